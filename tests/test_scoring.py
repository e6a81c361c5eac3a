"""Scoring that follows the server, feedback from every outcome, and robust runs (issue 27, items 1, 2, 4).

A scripted OpenAI-compatible endpoint (real HTTP, the official SDK) writes the candidates; a fake server
peer answers the `run` tool with the structured answers the server gives (invalid with its cheat flag,
incorrect with its trials, a build error, faster, inconclusive), so the tests run in a second on CPU and
assert nothing about timing."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import anyio
import pytest
from _endpoint import Request, Response, text_completion
from _endpoint import serve as serve_endpoint

pytest.importorskip("openai")

from kernelscope.agent.answers import outcome_from_run
from kernelscope.agent.client import Evaluation
from kernelscope.agent.config import OptimizeConfig
from kernelscope.agent.loop import optimize
from kernelscope.agent.optimize import summary_text
from kernelscope.agent.proposers import LLMExpander
from kernelscope.agent.search import Outcome, reward

REFERENCE = '''import torch


class Model(torch.nn.Module):
    def forward(self, x):
        return x.sum(dim=1)  # REFERENCE-MARK


def get_inputs():
    return [torch.randn(8, 8)]


def get_init_inputs():
    return []
'''


def module(result: str, n: int) -> str:
    """A candidate whose `run` answer the fake peer reads from its RESULT line."""
    return f"# RESULT: {result}\n# variant {n}\nimport torch\n\n\nclass ModelNew(torch.nn.Module):\n    pass\n"


def run_answer(source: str, timing_budget_s: float | None) -> dict[str, Any]:
    """The `run` tool's structured answer for a candidate's RESULT line (the longer confirmation run reads
    its CONFIRM line, when there is one)."""
    m = re.search(r"^# RESULT: (\w+) ?([\d.]*)", source, re.M)
    kind, x = (m.group(1), float(m.group(2) or 1.0)) if m else ("good", 1.0)
    c = re.search(r"^# CONFIRM: ([\d.]+)", source, re.M)
    if timing_budget_s and c:
        x = float(c.group(1))
    ok_corr = {"correct": True, "trials": 2, "passed": 2, "policy": "default"}
    sp = {"baseline": "eager", "speedup": x, "ci_low": x * 0.95, "ci_high": x * 1.05,
          "verdict": "faster" if x > 1 else "slower"}
    if kind == "cheat":  # timed, correct, and handed the main op back to PyTorch
        return {"eval": {"status": "ok", "verdict": "invalid", "correctness": ok_corr, "speedups": [sp],
                         "flags": [{"id": "reference-ops", "severity": "invalid", "message": "the candidate calls "
                                    "the reference's main PyTorch ops (sum) instead of its own kernel."}]}}
    if kind == "wrong":
        return {"eval": {"status": "ok", "verdict": "incorrect", "correctness": {
            "correct": False, "trials": 2, "passed": 1, "policy": "default", "max_abs_error": 0.5,
            "max_rel_error": 0.25, "trial_results": [{"trial": 0, "ok": True},
                                                     {"trial": 1, "ok": False, "max_abs_error": 0.5}]}}}
    if kind == "broken":
        return {"eval": {"status": "error", "verdict": "incorrect",
                         "error": "SyntaxError: invalid syntax (candidate.py, line 7)"}}
    if kind == "noisy":  # a high point estimate the interval does not support
        sp = {**sp, "ci_low": 0.4, "ci_high": x * 3, "verdict": "inconclusive"}
        return {"eval": {"status": "ok", "verdict": "inconclusive", "correctness": ok_corr, "speedups": [sp]}}
    return {"eval": {"status": "ok", "verdict": sp["verdict"], "correctness": ok_corr, "speedups": [sp]}}


class FakePeer:
    """The server of a run as the loop sees it: `capabilities` and `run` (scripted answers)."""

    def __init__(self, cfg: OptimizeConfig) -> None:
        self.cfg = cfg
        self.runs: list[tuple[str, float | None]] = []
        self.cache: Any = None
        self.fail_on: int | None = None  # raise KeyboardInterrupt at this run

    async def capabilities(self) -> dict[str, Any]:
        return {"can": {}}

    async def evaluate(self, source: str, *, timing_budget_s: float | None = None,
                       trials: int | None = None) -> Evaluation:
        self.runs.append((source, timing_budget_s))
        result = run_answer(source, timing_budget_s)
        return Evaluation(outcome_from_run(result, None), "run answer", result, "cpu0")


class Model:
    """Scripted replies: proposals in order, repairs answered with a good candidate; the first ``storm``
    requests answer HTTP 429 with a Retry-After."""

    def __init__(self, proposals: list[str], storm: int = 0) -> None:
        self.proposals, self.storm = proposals, storm
        self.prompts: list[str] = []  # every request's last user message
        self.statuses: list[int] = []
        self.repairs = 0

    def answer(self, prompt: str) -> tuple[int, str]:
        self.prompts.append(prompt)
        if len(self.prompts) <= self.storm:
            return 429, ""
        if "## Repair" in prompt:
            self.repairs += 1
            return 200, f"Repaired it.\n```python\n{module('good 1.1', 100 + self.repairs)}```"
        asked = sum(1 for p in self.prompts[self.storm:] if "## Repair" not in p) - 1
        code = self.proposals[asked % len(self.proposals)] if asked < len(self.proposals) else \
            module("good 0.5", 200 + asked)
        return 200, f"Proposal {asked}.\n```python\n{code}```"


@pytest.fixture
def endpoint(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Model]]:
    holder: list[Model] = []

    def answer(req: Request) -> Response:
        status, text = holder[-1].answer(req.body["messages"][-1]["content"])
        if status == 200:
            return text_completion(req, text, 10, 5)
        return Response({"error": {"message": "rate limited", "type": "rate_limit"}}, status,
                        {"retry-after": "7"} if status == 429 else None)

    with serve_endpoint(answer) as url:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        monkeypatch.setenv("OPENAI_BASE_URL", url + "/v1")
        yield holder


def setup(tmp_path: Path, budget: int, **kw: Any) -> tuple[OptimizeConfig, list[FakePeer], Any]:
    ref = tmp_path / "reference.py"
    ref.write_text(REFERENCE)
    cfg = OptimizeConfig(reference=ref, out=tmp_path / "run", budget=budget, device="cpu", proposer="openai",
                         model="test-model", strategy="greedy", **kw)
    peers: list[FakePeer] = []

    @asynccontextmanager
    async def connect(c: OptimizeConfig, reference: str) -> AsyncIterator[FakePeer]:
        peers.append(FakePeer(c))
        yield peers[-1]

    return cfg, peers, connect


def all_nodes(tree: dict[str, Any]) -> list[dict[str, Any]]:
    return [tree, *(n for c in tree["children"] for n in all_nodes(c))]


# ------------------------------------------------------------------------------------------- scoring
def test_failures_rank_below_every_correct_candidate_and_inconclusive_is_a_tie() -> None:
    cheat = outcome_from_run(run_answer(module("cheat 2.29", 1), None), None)
    wrong = outcome_from_run(run_answer(module("wrong", 2), None), None)
    slow = outcome_from_run(run_answer(module("good 0.05", 3), None), None)
    noisy = outcome_from_run(run_answer(module("noisy 5.0", 4), None), None)
    steady = outcome_from_run(run_answer(module("good 1.2", 5), None), None)
    assert cheat.status == "invalid" and "reference-ops" in cheat.feedback and "(sum)" in cheat.feedback
    assert wrong.status == "incorrect" and "max abs error 0.5" in wrong.feedback and "trial 1" in wrong.feedback
    assert reward(cheat) < reward(slow) and reward(wrong) < reward(slow)
    assert noisy.rank_speedup == 1.0 and reward(noisy) == 0.0 < reward(steady)  # a tie with the reference
    assert steady.rank_speedup == pytest.approx(1.2 * 0.95)  # the lower confidence bound
    assert "SLOWER" in slow.feedback
    assert Outcome("correct", speedup=2.0).rank_speedup == 2.0  # no interval: the point estimate


@pytest.mark.anyio
async def test_a_cheating_candidate_never_ends_as_best_and_the_confirmed_figure_is_printed(
        tmp_path: Path, endpoint: list[Model]) -> None:
    endpoint.append(Model([module("cheat 2.29", 1), module("good 1.5\n# CONFIRM: 1.4", 2),
                           module("noisy 3.0", 3), module("wrong", 4), module("broken", 5)]))
    cfg, peers, connect = setup(tmp_path, budget=6)
    s = await optimize(cfg, connect=connect)
    statuses = {n["id"]: n["status"] for n in all_nodes(json.loads((tmp_path / "run" / "tree.json").read_text()))}
    assert s.evaluations == 6 and "invalid" not in statuses.values()  # the cheat was repaired, not kept
    best = (tmp_path / "run" / "best.py").read_text()
    assert "cheat" not in best and "# RESULT: good 1.5" in best
    assert s.confirmed and s.best_speedup == pytest.approx(1.4) and s.search_speedup == pytest.approx(1.5)
    assert s.best_ci == [pytest.approx(1.4 * 0.95), pytest.approx(1.4 * 1.05)]
    text = summary_text(s)
    assert "at 1.400x over the reference (95% CI 1.330-1.470), confirmed by a longer measurement" in text
    confirm_runs = [b for _, b in peers[0].runs if b]
    assert len(confirm_runs) == 2 and all(b >= 1.0 for b in confirm_runs)  # the best and the runner-up
    report = (tmp_path / "run" / "report.html").read_text()
    assert "1.400x over the reference (95% CI 1.330-1.470), confirmed" in report
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["best_speedup"] == pytest.approx(1.4)


@pytest.mark.anyio
async def test_a_cheat_kept_by_every_repair_still_never_wins(tmp_path: Path, endpoint: list[Model]) -> None:
    model = Model([module("cheat 9.0", 1), module("good 1.2", 2)])
    model.answer = _no_repairs(model)  # type: ignore[method-assign]
    endpoint.append(model)
    cfg, _, connect = setup(tmp_path, budget=3)
    s = await optimize(cfg, connect=connect)
    assert s.best_status == "correct" and "cheat" not in (tmp_path / "run" / "best.py").read_text()
    assert any(n["status"] == "invalid" for n in all_nodes(json.loads((tmp_path / "run" / "tree.json").read_text())))


def _no_repairs(model: Model) -> Any:
    answer = model.answer

    def no_code_for_repairs(prompt: str) -> tuple[int, str]:
        if "## Repair" in prompt:
            model.prompts.append(prompt)
            return 200, "I cannot fix that."
        return answer(prompt)
    return no_code_for_repairs


# ------------------------------------------------------------------------------------------- feedback
@pytest.mark.anyio
async def test_every_outcome_feeds_the_next_prompt_and_the_memory(tmp_path: Path, endpoint: list[Model]) -> None:
    model = Model([module("wrong", 1), module("cheat 2.0", 2), module("broken", 3), module("good 0.5", 4),
                   "no code here"])
    endpoint.append(model)
    cfg, _, connect = setup(tmp_path, budget=5)
    await optimize(cfg, connect=connect)
    repairs = [p for p in model.prompts if "## Repair" in p]
    assert len(repairs) == 3  # one per failed candidate: incorrect, invalid, not built
    assert all("REFERENCE-MARK" in p and "## The failed candidate" in p for p in repairs)
    assert "max abs error 0.5" in repairs[0] and "first failing trial 1" in repairs[0]
    assert "reference-ops" in repairs[1] and "instead of its own kernel" in repairs[1]
    assert "SyntaxError: invalid syntax" in repairs[2]
    proposals = [p for p in model.prompts if "## Current candidate" in p]
    assert all("REFERENCE-MARK" in p for p in proposals)
    last = proposals[-1]
    assert "incorrect" in last and "max abs error 0.5" in last  # the search memory carries the details
    changes = [n["change"] for n in all_nodes(json.loads((tmp_path / "run" / "tree.json").read_text()))]
    assert sum(ch.startswith("repair of a ") for ch in changes) == 3  # repaired nodes carry their own label
    assert any("repair of a incorrect candidate" in ch or "repair of a invalid" in ch for ch in changes)
    evals = [json.loads(p.read_text()) for p in (tmp_path / "run" / "evals").glob("*.json")]
    assert sum(1 for e in evals if e.get("repaired_source")) == 3


@pytest.mark.anyio
async def test_the_follow_up_carries_the_reference_and_the_code(tmp_path: Path, endpoint: list[Model]) -> None:
    model = Model(["I would fuse the loops.", module("good 1.3", 1)])
    endpoint.append(model)
    cfg, _, connect = setup(tmp_path, budget=2)
    s = await optimize(cfg, connect=connect)
    follow = next(p for p in model.prompts if "had no ```python block" in p)
    assert "REFERENCE-MARK" in follow and "## The candidate to improve" in follow and "fuse the loops" in follow
    assert s.evaluations == 2


@pytest.mark.anyio
async def test_a_repair_that_repeats_an_evaluated_source_is_not_run_again(tmp_path: Path,
                                                                          endpoint: list[Model]) -> None:
    model = Model([module("good 1.1", 101), module("wrong", 1)])  # the repair will return good 1.1 #101
    endpoint.append(model)
    cfg, peers, connect = setup(tmp_path, budget=3, confirm=False)
    await optimize(cfg, connect=connect)
    sources = [src for src, _ in peers[0].runs]
    assert sources.count(module("good 1.1", 101)) == 1  # evaluated once, reused for the repair


# ------------------------------------------------------------------------------------------- robust runs
def test_backoff_honours_retry_after_and_is_bounded() -> None:
    class Err(Exception):
        status_code = 429
        response = SimpleNamespace(headers={"retry-after": "3"})

    class Client:
        def __init__(self) -> None:
            self.n = 0

        def complete(self, *a: Any, **k: Any) -> tuple[str, dict[str, int]]:
            self.n += 1
            raise Err("rate limited")

    waits: list[float] = []
    exp = LLMExpander(Client(), REFERENCE, retries=2, sleep=waits.append)
    assert exp.repair("x", "error") is None and waits == [3.0, 3.0] and exp.failed_calls == 1
    Err.response.headers = {}
    waits.clear()
    exp = LLMExpander(Client(), REFERENCE, retries=3, backoff_s=1.0, max_backoff_s=3.0, sleep=waits.append)
    assert exp.repair("x", "error") is None and waits == [1.0, 2.0, 3.0]

    class Fatal(Exception):
        status_code = 401

    class Denied(Client):
        def complete(self, *a: Any, **k: Any) -> tuple[str, dict[str, int]]:
            raise Fatal("bad key")

    with pytest.raises(Fatal):  # a wrong key ends the run: retrying cannot help
        LLMExpander(Denied(), REFERENCE, sleep=waits.append).repair("x", "e")


@pytest.mark.anyio
async def test_a_429_storm_does_not_end_the_run(tmp_path: Path, endpoint: list[Model]) -> None:
    endpoint.append(Model([module("good 1.2", 1), module("good 1.5", 2), module("good 0.9", 3)], storm=7))
    cfg, _, connect = setup(tmp_path, budget=3)
    waits: list[float] = []
    s = await optimize(cfg, connect=connect, sleep=waits.append)
    assert s.evaluations == 3 and s.best_status == "correct"
    assert s.llm_failed == 1 and s.llm_retried == 6 and waits == [7.0] * 6  # Retry-After honoured, no waiting
    assert (tmp_path / "run" / "report.html").is_file()


@pytest.mark.anyio
async def test_a_resume_makes_no_model_call_for_what_was_done(tmp_path: Path, endpoint: list[Model]) -> None:
    proposals = [module("good 1.2", 1), module("wrong", 2), module("good 1.5", 3), module("good 0.9", 4)]
    endpoint.append(Model(proposals))
    cfg, peers, connect = setup(tmp_path, budget=5)
    first = await optimize(cfg, connect=connect)
    asked = len(endpoint[-1].prompts)
    assert first.llm_calls == asked > 0
    endpoint.append(Model(proposals))
    again = await optimize(cfg, connect=connect)
    # every proposal comes from the run directory; the repair turn is not even asked (its result is kept)
    assert endpoint[-1].prompts == [] and again.llm_calls == 0 and again.llm_cached == asked - endpoint[0].repairs
    assert endpoint[0].repairs == 1 and peers[1].runs == []  # every evaluation and the confirmation reused
    assert again.reused == 4 and again.best_id == first.best_id and again.best_speedup == first.best_speedup


def test_an_interrupt_mid_run_leaves_summary_and_report(tmp_path: Path, endpoint: list[Model]) -> None:
    endpoint.append(Model([module("good 1.2", n) for n in range(1, 9)]))
    cfg, _, connect = setup(tmp_path, budget=8)
    seen: list[int] = []

    def on_step(st: Any) -> None:
        seen.append(len(st.nodes))
        if len(st.nodes) == 3:
            raise KeyboardInterrupt  # Ctrl-C while the search runs

    with pytest.raises(KeyboardInterrupt):
        anyio.run(lambda: optimize(cfg, connect=connect, on_step=on_step))
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["stopped"] == "interrupted" and summary["evaluations"] == 3
    assert (tmp_path / "run" / "report.html").is_file() and (tmp_path / "run" / "best.py").is_file()
    assert json.loads((tmp_path / "run" / "tree.json").read_text())["children"]


@pytest.mark.anyio
async def test_a_cancelled_run_stops_cleanly_with_its_summary(tmp_path: Path, endpoint: list[Model]) -> None:
    endpoint.append(Model([module("good 1.2", n) for n in range(1, 9)]))
    cfg, _, connect = setup(tmp_path, budget=8)
    two = threading.Event()

    def on_step(st: Any) -> None:
        if len(st.nodes) >= 2:
            two.set()

    async with anyio.create_task_group() as tg:
        async def run() -> None:
            await optimize(cfg, connect=connect, on_step=on_step)

        tg.start_soon(run)
        await anyio.to_thread.run_sync(two.wait)
        tg.cancel_scope.cancel()
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["stopped"] == "interrupted" and summary["evaluations"] >= 2
    assert (tmp_path / "run" / "report.html").is_file()


def test_the_tree_and_summary_are_written_after_every_evaluation(tmp_path: Path, endpoint: list[Model]) -> None:
    endpoint.append(Model([module("good 1.2", n) for n in range(1, 5)]))
    cfg, _, connect = setup(tmp_path, budget=4)
    written: list[int] = []

    def on_step(st: Any) -> None:  # the loop checkpoints before it calls on_step
        written.append(json.loads((tmp_path / "run" / "summary.json").read_text())["evaluations"])

    anyio.run(lambda: optimize(cfg, connect=connect, on_step=on_step))
    assert written == [1, 2, 3, 4]


def test_a_harness_failure_is_not_ranked_and_not_blamed_on_the_candidate() -> None:
    """`harness-error` and `too-large` answers (the evaluation failed, not the candidate) are not ranked,
    and the feedback says so instead of calling the candidate incorrect."""
    for status, error in (("harness-error", "RuntimeError in the comparison"),
                          ("too-large", "needs 90.0 GiB, 79.1 GiB free")):
        o = outcome_from_run({"mode": "eval", "eval": {"status": status, "verdict": "inconclusive",
                                                       "error": error, "flags": []}}, None)
        assert o.status == "crashed" and reward(o) < reward(Outcome("correct", speedup=0.5))
        assert o.feedback.startswith(f"NOT JUDGED ({status}") and error in o.feedback
        assert "INCORRECT" not in o.feedback
