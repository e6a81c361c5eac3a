"""Trajectories (issue 27, item 6): `kernelscope optimize` writes every model exchange and every MCP tool
call to trajectory.jsonl in the OpenAI chat form with tool calls.

A scripted OpenAI-compatible endpoint (real HTTP, the official SDK) writes the candidates, looks up
CUTLASS through the server when it is offered the tools, and answers one request with HTTP 429 whose
body echoes the API key; the real server runs the candidates on the CPU over stdio. Nothing asserts on
timing."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _endpoint import Request, Response, completion
from _endpoint import serve as serve_endpoint

from kernelscope.agent.config import OptimizeConfig
from kernelscope.agent.loop import optimize
from kernelscope.agent.search.knobs import apply_knobs
from kernelscope.agent.search.strategies import SearchState
from kernelscope.agent.trajectory import (
    MAX_ANSWER,
    MAX_LINE,
    MAX_TEXT,
    REDACTED,
    Redactor,
    Trajectory,
    episodes,
    read,
    source_id,
)

CASE = Path(__file__).parent / "agentcases" / "chunked_sum"
KEY = "sk-trajectory-test-" + "k3y" * 10  # must never reach the file


class Endpoint:
    """Rewrites the current candidate with a quarter of its CHUNKS; its first request offered the server's
    tools calls search_cutlass first; its third request is rate limited (429, the key in the body)."""

    def __init__(self) -> None:
        self.requests = 0
        self.replies = 0  # 200 answers with a final reply

    def answer(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        self.requests += 1
        msgs = body["messages"]
        if self.requests == 3:
            return 429, {"error": {"message": f"rate limited for key {KEY} (Authorization: Bearer {KEY})",
                                   "type": "rate_limit"}}
        if body.get("tools") and msgs[-1]["role"] == "user" and self.requests == 1:
            call = {"id": "call_x1", "type": "function",
                    "function": {"name": "search_cutlass", "arguments": json.dumps({"query": "make_tma_copy",
                                                                                     "limit": 2})}}
            return 200, {"role": "assistant", "content": None, "tool_calls": [call]}
        prompt = next(m["content"] for m in msgs if m["role"] == "user")
        m = re.search(r"## Current candidate.*?```python\n(.*?)```", prompt, re.S)
        src = m.group(1) if m else extract_last_code(prompt)
        n = re.search(r"^CHUNKS = (\d+)", src, re.M)
        code = re.sub(r"^CHUNKS = \d+.*$", f"CHUNKS = {max(1, int(n.group(1)) // 4) if n else 1}", src, flags=re.M)
        self.replies += 1
        return 200, {"role": "assistant", "content": f"Fewer, larger slices.\n```python\n{code}```"}


def extract_last_code(text: str) -> str:
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    return blocks[-1] if blocks else ""


@pytest.fixture
def endpoint(monkeypatch: pytest.MonkeyPatch) -> Iterator[Endpoint]:
    model = Endpoint()

    def answer(req: Request) -> Response:
        status, message = model.answer(req.body)
        return completion(req, message) if status == 200 else Response(message, status)

    with serve_endpoint(answer) as url:
        monkeypatch.setenv("OPENAI_API_KEY", KEY)
        monkeypatch.setenv("OPENAI_BASE_URL", url + "/v1")
        yield model


def check_calls_answered(rec: dict[str, Any]) -> None:
    """Every assistant tool call is answered by the next tool message(s), by id, in order."""
    pending: list[str] = []
    for m in rec["messages"]:
        if m["role"] == "assistant" and m.get("tool_calls"):
            assert not pending, f"record {rec['seq']}: a call left unanswered before the next turn"
            for tc in m["tool_calls"]:
                assert tc["type"] == "function" and isinstance(json.loads(tc["function"]["arguments"]), dict)
                pending.append(tc["id"])
        elif m["role"] == "tool":
            assert pending and m["tool_call_id"] == pending.pop(0), f"record {rec['seq']}: answer without a call"
            assert isinstance(m["content"], str) and len(m["content"]) <= MAX_ANSWER + 64
        else:
            assert not pending
    assert not pending, f"record {rec['seq']}: unanswered tool call"


@pytest.mark.anyio
async def test_optimize_writes_the_trajectory_as_it_goes_and_a_resume_repeats_nothing(
        endpoint: Endpoint, tmp_path: Path) -> None:
    pytest.importorskip("openai")
    pytest.importorskip("torch", reason="CPU evaluations need torch (its CPU build is enough)")
    start = tmp_path / "start.py"
    start.write_text(apply_knobs((CASE / "candidate.py").read_text(), {"CHUNKS": "256", "WIDE_ACC": "0"}))
    out = tmp_path / "run"
    path = out / "trajectory.jsonl"
    cfg = OptimizeConfig(reference=CASE / "reference.py", candidate=start, out=out, budget=2, device="cpu",
                         timing_budget_s=0.1, trials=2, proposer="openai", model="test-model", strategy="greedy",
                         llm_backoff_s=0, confirm=False, report=False)
    seen_at_step: list[bool] = []

    def on_step(st: SearchState) -> None:  # the run's record is in the file when the search hears of it
        ran = {r["meta"]["candidate"] for r in read(path) if r["meta"].get("tool") == "run"}
        seen_at_step.append(source_id(st.nodes[-1].payload["source"]) in ran)

    await optimize(cfg, on_step=on_step)
    first = path.read_text()
    assert seen_at_step and all(seen_at_step)
    records = read(path)
    assert [r["seq"] for r in records] == list(range(len(records)))
    assert records[0]["meta"]["tool"] == "capabilities"
    for r in records:
        check_calls_answered(r)
        assert len(json.dumps(r, ensure_ascii=False).encode()) <= MAX_LINE
        assert all(len(m["content"] or "") <= MAX_TEXT + 64 for m in r["messages"])

    ok = [r for r in records if r["type"] == "model" and r["meta"]["outcome"] == "ok"]
    assert len(ok) == endpoint.replies >= 1
    for r in ok:
        assert [m["role"] for m in r["messages"][:2]] == ["system", "user"]
        assert r["messages"][-1]["role"] == "assistant" and "```python" in r["messages"][-1]["content"]
        assert r["meta"]["model"] == "test-model" and r["meta"]["usage"]["input"] >= 100
        # the code the model wrote is evaluated later, by a `run` record naming the same candidate
        runs = [x for x in records
                if x["meta"].get("tool") == "run" and x["meta"]["candidate"] == r["meta"]["candidate"]]
        assert runs and all(x["seq"] > r["seq"] for x in runs)
        assert runs[0]["meta"]["result"]["status"] in ("correct", "incorrect", "crashed", "compile-error", "invalid")
    lookups = [m for r in ok for m in r["messages"] if m.get("tool_calls")]
    if any(r["tools"] for r in ok):  # the server has the CUTLASS headers: the model's lookup is inside its exchange
        assert lookups[0]["tool_calls"][0]["function"]["name"] == "search_cutlass"
        assert {t["function"]["name"] for t in ok[0]["tools"]} == {"search_cutlass", "read_cutlass_file"}
    assert not any(r["meta"].get("tool") == "search_cutlass" for r in records)  # not a second time on its own
    run_rec = next(r for r in records if r["meta"].get("tool") == "run")
    call = run_rec["messages"][0]["tool_calls"][0]
    assert json.loads(call["function"]["arguments"])["mode"] == "eval"
    assert run_rec["tools"][0]["function"]["name"] == "run"
    assert run_rec["meta"]["duration_s"] >= 0 and run_rec["meta"]["started"].endswith("Z")

    replies, requests = endpoint.replies, endpoint.requests
    await optimize(cfg.model_copy(update={"budget": 3}))
    after = path.read_text()
    assert after.startswith(first)  # appended, nothing rewritten
    records = read(path)
    new = records[len(read_lines(first)):]
    assert new and all(r["meta"]["invocation"] == 2 for r in new)
    assert endpoint.requests > requests and len([r for r in new if r["type"] == "model"]) == \
        endpoint.requests - requests  # only the model calls the resume made: none repeated
    ok_all = [r for r in records if r["type"] == "model" and r["meta"]["outcome"] == "ok"]
    assert len(ok_all) == endpoint.replies > replies
    failed = [r for r in records if r["type"] == "model" and r["meta"]["outcome"] == "error"]
    assert len(failed) == 1 and "429" in failed[0]["meta"]["error"] and failed[0]["messages"][-1]["role"] == "user"
    assert KEY not in after and REDACTED in after  # the key the 429 echoed, as a value and as a bearer token
    keys = [r["meta"]["key"] for r in records if r["type"] == "tool"]
    assert len(keys) == len(set(keys)) and sum(r["meta"].get("tool") == "capabilities" for r in records) == 1
    for ep in episodes(path):
        assert ep["messages"][0]["role"] == "system"
        check_calls_answered({"seq": -1, **ep})
        names = [tc["function"]["name"] for m in ep["messages"] if m["role"] == "assistant"
                 for tc in m.get("tool_calls") or []]
        assert "run" in names and {t["function"]["name"] for t in ep["tools"]} >= set(names)


def read_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


def test_a_line_cut_short_is_dropped_and_a_known_tool_call_is_not_written_twice(tmp_path: Path) -> None:
    path = tmp_path / "trajectory.jsonl"
    t = Trajectory(path)
    call = [{"role": "assistant", "content": None, "tool_calls": []}]
    assert t.write("tool", call, [], {"key": "tool:a"}) == 0
    assert t.write("model", [{"role": "user", "content": "x" * (3 * MAX_LINE)}], [], {}) == 1
    assert t.write("tool", call, [], {"key": "tool:a"}) is None
    with path.open("a") as f:
        f.write('{"seq": 2, "type": "mod')  # a crash in the middle of a line
    t2 = Trajectory(path)
    assert t2.seq == 2 and t2.invocation == 2 and "tool:a" in t2.keys
    assert t2.write("tool", call, [], {"key": "tool:a"}) is None
    assert t2.write("tool", call, [], {"key": "tool:b"}) == 2
    lines = path.read_text().splitlines()
    assert len(lines) == 3 and all(len(line.encode()) <= MAX_LINE for line in lines)
    assert "more characters cut" in json.loads(lines[1])["messages"][0]["content"]


def test_secrets_are_redacted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_SERVICE_TOKEN", "tok-0123456789abcdef")
    r = Redactor(["given-secret-value"])
    text = r("env tok-0123456789abcdef, given given-secret-value, sk-ant-api03-" + "a" * 30 +
             ", Authorization: Bearer abc.def.ghi-123456, https://user:pw1234@example.com/v1, api_key='q1w2e3r4t5y6'")
    for secret in ("tok-0123456789abcdef", "given-secret-value", "sk-ant-api03", "abc.def.ghi", "pw1234", "q1w2e3r4"):
        assert secret not in text
    assert "Bearer [redacted]" in text and "https://[redacted]@example.com" in text
    assert r("CHUNKS = 64\nacc = x.sum(dim=1)") == "CHUNKS = 64\nacc = x.sum(dim=1)"  # code is left alone
