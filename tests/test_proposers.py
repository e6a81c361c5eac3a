"""LLM proposers over real HTTP: a loopback server speaks Anthropic's Messages API and the OpenAI
chat-completions API; the official SDKs talk to it; the optimize loop runs end to end on CPU with
each, including the follow-up for a reply without code and the repair turn for a broken candidate."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from _endpoint import Request, Response, completion
from _endpoint import serve as serve_endpoint

pytest.importorskip("anthropic")
pytest.importorskip("openai")

from kernelscope.agent.config import OptimizeConfig
from kernelscope.agent.loop import optimize
from kernelscope.agent.proposers import extract_code, rationale
from kernelscope.agent.search.knobs import apply_knobs

CASE = Path(__file__).parent / "agentcases" / "chunked_sum"


class FakeModel:
    """Rewrites the current candidate with a quarter of its CHUNKS; its 2nd reply has no code block and
    its 3rd a syntax error, so the follow-up and the repair turn are exercised."""

    def __init__(self) -> None:
        self.calls: list[dict] = []
        self.tool_script: list[tuple[str, dict]] = []  # tool calls to make before the first proposal
        self.tool_results: list[object] = []

    def reply(self, user: str) -> str:
        n = len(self.calls)
        if "failed to build" in user:
            code = extract_code(user) or ""
            return "Fixed the typo.\n```python\n" + code.replace("def forward(self, x):(", "def forward(self, x):") \
                .replace("acc = = ", "acc = ") + "```"
        if "no ```python block" in user:
            return "Sorry.\n```python\n" + self._rewrite(self._last_source) + "```"
        m = re.search(r"## Current candidate.*?```python\n(.*?)```", user, re.S)
        src = m.group(1) if m else ""
        self._last_source = src
        if n == 1:
            return "I would use fewer chunks."  # no code: the proposer asks again
        code = self._rewrite(src)
        if n == 3:
            code = code.replace("acc = torch.zeros", "acc = = torch.zeros")  # a syntax error: repair turn
        return f"Fewer, larger slices cut per-op overhead.\n```python\n{code}```"

    @staticmethod
    def _rewrite(src: str) -> str:
        m = re.search(r"^CHUNKS = (\d+)", src, re.M)
        chunks = max(1, int(m.group(1)) // 4) if m else 1
        return re.sub(r"^CHUNKS = \d+.*$", f"CHUNKS = {chunks}", src, flags=re.M)


@pytest.fixture
def provider() -> Iterator[tuple[str, FakeModel]]:
    model = FakeModel()

    def answer(req: Request) -> Response:
        msgs = req.body["messages"]
        model.calls.append({"path": req.path, "headers": req.headers, "body": req.body})
        anthropic = req.path.endswith("/v1/messages")
        last = msgs[-1]
        results = [c.get("content") for c in last["content"] if c.get("type") == "tool_result"] \
            if isinstance(last.get("content"), list) else [last["content"]] if last.get("role") == "tool" else []
        call = None
        if results:  # a tool answer: record it, then ask again or answer the prompt that started the turn
            model.tool_results += results
            if len(model.tool_results) < len(model.tool_script):
                call = model.tool_script[len(model.tool_results)]
            prompt = next(m["content"] for m in msgs if m["role"] == "user" and isinstance(m["content"], str))
            text = "" if call else model.reply(prompt)
        elif req.body.get("tools") and model.tool_script and "## Current candidate" in str(last.get("content")):
            call, text = model.tool_script[0], "Let me look up CuTe's TMA first."
        else:
            user = last["content"]
            text = model.reply(user if isinstance(user, str) else json.dumps(user))
        if anthropic:
            content: list[dict] = [{"type": "text", "text": text}] if text else []
            if call:
                content.append({"type": "tool_use", "id": f"toolu_{len(model.calls)}", "name": call[0],
                                "input": call[1]})
            return Response({"id": "msg_1", "type": "message", "role": "assistant", "model": req.body["model"],
                             "content": content, "stop_reason": "tool_use" if call else "end_turn",
                             "stop_sequence": None, "usage": {"input_tokens": 100, "output_tokens": 50}})
        message: dict = {"role": "assistant", "content": text or None}
        if call:
            message["tool_calls"] = [{"id": f"call_{len(model.calls)}", "type": "function",
                                      "function": {"name": call[0], "arguments": json.dumps(call[1])}}]
        return completion(req, message)

    with serve_endpoint(answer) as url:
        yield url, model


def test_code_extraction() -> None:
    reply = "Use float4.\n```python\nclass ModelNew: pass\n```\nor\n```py\nclass ModelNew: x = 1\n```"
    assert extract_code(reply) == "class ModelNew: x = 1\n"
    assert extract_code("```python\nprint(1)\n```") is None
    assert rationale(reply) == "Use float4."


@pytest.mark.anyio
@pytest.mark.parametrize("which", ["anthropic", "openai"])
async def test_llm_proposer_end_to_end(which: str, provider: tuple[str, FakeModel], tmp_path: Path,
                                       monkeypatch: pytest.MonkeyPatch, nominal_speedups: None) -> None:
    url, model = provider
    if which == "anthropic":
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", url)
    else:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        monkeypatch.setenv("OPENAI_BASE_URL", url + "/v1")
    start = tmp_path / "start.py"  # a plain (knob-free) starting candidate: 256 chunks
    start.write_text(apply_knobs((CASE / "candidate.py").read_text(), {"CHUNKS": "256", "WIDE_ACC": "0"}))
    cfg = OptimizeConfig(reference=CASE / "reference.py", candidate=start, out=tmp_path / "run", budget=4,
                         device="cpu", timing_budget_s=0.1, trials=2, proposer=which,
                         model="test-model", strategy="greedy")
    s = await optimize(cfg)
    assert s.proposer == which and s.evaluations == 4
    assert s.best_status == "correct" and s.best_speedup > s.start_speedup
    assert "CHUNKS = 1" in (tmp_path / "run" / "best.py").read_text() or "CHUNKS = 4" in \
        (tmp_path / "run" / "best.py").read_text()
    assert s.llm_calls == len(model.calls) >= 5 and s.llm_tokens == {"input": 100 * s.llm_calls,
                                                                      "output": 50 * s.llm_calls}
    first = model.calls[0]
    if which == "anthropic":
        assert first["path"].endswith("/v1/messages") and "anthropic-version" in first["headers"]
        h = first["headers"]  # the SDK sends the key as x-api-key or as a bearer token, by version
        assert h.get("x-api-key") == "sk-ant-test" or h.get("authorization") == "Bearer sk-ant-test"
        assert "You optimize GPU kernels" in first["body"]["system"]
    else:
        assert first["path"].endswith("/v1/chat/completions")
        assert first["headers"].get("authorization") == "Bearer sk-test"
    prompt = first["body"]["messages"][-1]["content"]
    assert "## Reference" in prompt and "## What the search has tried" in prompt
    assert "## Profile of the current candidate" in prompt and "no kernels to profile" in prompt  # CPU: no profile
    assert any("failed to build" in c["body"]["messages"][-1]["content"] for c in model.calls)  # the repair turn
    evals = [json.loads(p.read_text()) for p in (tmp_path / "run" / "evals").glob("*.json")]
    assert any(e.get("repaired_source") for e in evals)


@pytest.mark.anyio
@pytest.mark.parametrize("which", ["anthropic", "openai"])
async def test_llm_proposer_looks_up_cutlass_through_the_server(which: str, provider: tuple[str, FakeModel],
                                                                tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                                                ) -> None:
    """The model calls search_cutlass and read_cutlass_file (offered with the server's own schemas) before
    it writes; the calls go to the real server and the answers back to the model."""
    from kernelscope.tools import cutlass

    if cutlass.locate()[0] is None:
        pytest.skip(f"CUTLASS/CuTe headers absent: {cutlass.locate()[1]} (pip install 'kernelscope[cutlass]')")
    url, model = provider
    model.tool_script = [("search_cutlass", {"query": "make_tma_copy", "kind": "definitions", "limit": 3}),
                         ("read_cutlass_file", {"path": "include/cute/arch/copy_sm90_tma.hpp", "start_line": 1,
                                                "end_line": 20})]
    if which == "anthropic":
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", url)
    else:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        monkeypatch.setenv("OPENAI_BASE_URL", url + "/v1")
    start = tmp_path / "start.py"
    start.write_text(apply_knobs((CASE / "candidate.py").read_text(), {"CHUNKS": "256", "WIDE_ACC": "0"}))
    cfg = OptimizeConfig(reference=CASE / "reference.py", candidate=start, out=tmp_path / "run", budget=2,
                         device="cpu", timing_budget_s=0.1, trials=2, proposer=which, model="test-model",
                         strategy="greedy")
    s = await optimize(cfg)
    assert s.evaluations == 2 and s.llm_tool_calls == 2
    offered = next(c["body"]["tools"] for c in model.calls if c["body"].get("tools"))
    names = {t["name"] if which == "anthropic" else t["function"]["name"] for t in offered}
    assert names == {"search_cutlass", "read_cutlass_file"}
    search, read = (r if isinstance(r, str) else json.dumps(r) for r in model.tool_results[:2])
    assert "make_tma_copy" in search and ".hpp" in search  # a definition, with its file
    assert "copy_sm90_tma.hpp" in read or "#pragma once" in read
    system = model.calls[0]["body"]["system"] if which == "anthropic" else \
        model.calls[0]["body"]["messages"][0]["content"]
    assert "search_cutlass" in system


def test_the_command_with_an_openai_endpoint(provider: tuple[str, FakeModel], tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch, nominal_speedups: None,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    """`kernelscope optimize PROBLEM --device cpu --proposer openai --model M --budget N --out DIR`: plain
    lines off a terminal, the summary line, the run directory."""
    from kernelscope.cli import main

    url, model = provider
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("OPENAI_BASE_URL", url + "/v1")
    start = tmp_path / "start.py"
    start.write_text(apply_knobs((CASE / "candidate.py").read_text(), {"CHUNKS": "256", "WIDE_ACC": "0"}))
    out = tmp_path / "run"
    assert main(["optimize", str(CASE / "reference.py"), str(start), "--device", "cpu", "--proposer", "openai",
                 "--model", "test-model", "--budget", "3", "--out", str(out), "--strategy", "greedy",
                 "--timing-budget", "0.1", "--trials", "2", "--no-live"]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("[1/3] node 0 start") and "[3/3] node 2" in printed
    assert f"proposer openai ({len(model.calls)} LLM calls" in printed and f"run directory {out}" in printed
    assert "confirmed by a longer measurement" in printed  # the best, measured again: its figure is printed
    summary = json.loads((out / "summary.json").read_text())
    assert summary["evaluations"] == 3 and summary["proposer"] == "openai" and summary["llm_calls"] == len(model.calls)
    assert (out / "report.html").is_file() and (out / "best.py").is_file()
