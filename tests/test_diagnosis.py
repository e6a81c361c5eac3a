"""The whole diagnosis for the model (issue 27, item 3), on CPU over recorded H100 answers.

The agent talks to the real server in memory (its registry, tool schemas and text summaries); only the
measurements a CPU cannot make are the recorded answers of an H100 run (tests/fixtures/optimize/softmax:
its `run` answers per candidate, its `analyze` answers, the GPU it ran on). A scripted OpenAI-compatible
endpoint (real HTTP, the official SDK, reached through ``base_url``) proposes the recorded candidates, so
the prompts of the three feedback arms and every MCP call can be checked."""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from _endpoint import serve as serve_endpoint
from _endpoint import text_completion

pytest.importorskip("openai")

from mcp import Client

from kernelscope.agent.client import ServerPeer
from kernelscope.agent.config import OptimizeConfig
from kernelscope.agent.diagnosis import estimate_tokens, fit_summary, raw_table
from kernelscope.agent.loop import optimize
from kernelscope.agent.problems import reference_as_candidate
from kernelscope.agent.store import key_file
from kernelscope.models import AnalyzeResult, EvalResult, GpuInfo
from kernelscope.server.app import create_server
from kernelscope.server.summaries import analyze_summary
from kernelscope.tools import analyze as analyze_mod
from kernelscope.tools import capabilities as caps_mod
from kernelscope.tools import run as run_mod

REPO = Path(__file__).resolve().parent.parent
RECORDED = Path(__file__).parent / "fixtures" / "optimize"
SOFTMAX = RECORDED / "softmax"


def _nodes(tree: dict[str, Any]) -> list[dict[str, Any]]:
    return [tree, *(n for c in tree["children"] for n in _nodes(c))]


def recorded(run: Path) -> tuple[dict[int, str], dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
    """A recorded run: each node's source, and the `run` and `analyze` answers by source (the reference's
    profile under the reference as a candidate, as the agent sends it)."""
    nodes = _nodes(json.loads((run / "tree.json").read_text()))
    sources = {n["id"]: (run / "candidates" / f"{n['id']:04d}.py").read_text() for n in nodes}
    runs = {sources[n["id"]]: json.loads((run / "evals" / key_file(n["key"])).read_text())["result"] for n in nodes}
    profiles: dict[str, dict[str, Any]] = {}
    for n in nodes:
        p = run / "analysis" / key_file(n["key"])
        if p.is_file():
            profiles[sources[n["id"]]] = json.loads(p.read_text())["result"]
    ref = reference_as_candidate((REPO / json.loads((run / "config.json").read_text())["reference"]).read_text())
    for p in (run / "analysis").glob("*.json"):
        rec = json.loads(p.read_text())
        if rec["label"] == "the reference":
            profiles[ref] = rec["result"]
    return sources, runs, profiles


def host_text(result: dict[str, Any]) -> str:
    """The text the `analyze` tool answers for a recorded structured answer (what a host reads)."""
    return analyze_summary(AnalyzeResult.model_validate({**result, "mode": "eval"}))


def _profiles() -> list[tuple[str, dict[str, Any]]]:
    out = []
    for p in sorted(RECORDED.glob("*/analysis/*.json")):
        rec = json.loads(p.read_text())
        out.append((f"{p.parent.parent.name}/{rec['label']}", rec["result"]))
    return out


# ------------------------------------------------------------------------------------------- the budget
@pytest.mark.parametrize("budget", [120, 250, 500, 1000])
def test_a_summary_fits_its_budget_whole_lines_least_important_first(budget: int) -> None:
    for name, result in _profiles():
        text = host_text(result)
        fitted = fit_summary(text, budget)
        assert estimate_tokens(fitted) <= budget, name
        if estimate_tokens(text) <= budget:
            assert fitted == text
            continue
        lines = fitted.splitlines()
        note = lines[-1] if lines else ""
        assert not lines or note.startswith(f"[dropped to fit {budget} tokens"), name
        original = text.splitlines()
        assert all(ln in original for ln in lines[:-1]), f"{name}: a line was cut or changed"
        if "Reports: " in text and lines[:-1]:
            assert not any(ln.startswith("Reports: ") for ln in lines), f"{name}: report ids outlived the diagnosis"
            assert "report ids" in note
        if budget >= 500:  # the costliest kernel's class line and the headline survive a modest budget
            assert any(ln.startswith("- ") for ln in lines) and lines[0] == original[0], name


def test_a_larger_budget_keeps_more_and_drops_fixes_before_findings() -> None:
    result = dict(_profiles())["elementwise_chain/the reference"]  # three kernels, 7.7 kB of summary
    text = host_text(result)
    kept = [set(fit_summary(text, b).splitlines()[:-1]) for b in (300, 600, 1200)]
    assert kept[0] <= kept[1] <= kept[2] and len(kept[0]) < len(kept[2])
    mid = fit_summary(text, 1200)
    assert "fix 2" in mid.splitlines()[-1] and "[INFO] Memory system near its peak" in mid  # a finding kept
    assert sum(ln.lstrip().startswith("fix 2") for ln in mid.splitlines()) < text.count("fix 2:")


def test_the_raw_arm_has_the_counters_and_none_of_the_diagnosis() -> None:
    for name, result in _profiles():
        table = raw_table(result, 100_000)
        rules = {f["rule"] for k in result["kernels"] for f in k.get("findings") or []}
        assert not any(r in table for r in rules), name
        assert "threshold" not in table and "fix" not in table.lower() and "BOUND" not in table.upper(), name
        top = result["kernels"][0]
        assert f"gpu__time_duration.sum = {top['duration_ns']:.0f} ns" in table, name
        assert "sm__throughput.avg.pct_of_peak_sustained_elapsed = " in table, name
        small = raw_table(result, 400)
        assert estimate_tokens(small) <= 400 and small.splitlines()[0].startswith("kernel "), name
        assert small.splitlines()[-1].startswith("[dropped to fit 400 tokens") or small == table, name


def test_the_host_summary_names_the_hot_source_lines() -> None:
    """A kernel's lines with the most warp samples are in the text a host reads (and so in the prompt)."""
    result = dict(_profiles())["softmax/start"]
    kern = {**result["kernels"][0], "hot_lines": ["candidate.cu:57  `m = fmaxf(m, a[j]);`"]}
    text = host_text({**result, "kernels": [kern]})
    assert "  hot lines (most warp samples): candidate.cu:57  `m = fmaxf(m, a[j]);`" in text.splitlines()
    assert "hot lines" in fit_summary(text, 400)


def test_a_profile_kept_without_its_text_shows_its_findings() -> None:
    """Run directories written before the text was kept (like the recorded ones) still give the model the
    findings, one sentence each, under the budget."""
    from kernelscope.agent.answers import findings_of
    from kernelscope.agent.diagnosis import feedback_text

    result = dict(_profiles())["row_sum/start"]
    details = findings_of(result)[3]
    text = feedback_text("diagnosis", "", result, 1200, details)
    assert text.splitlines()[0] == f"- {details[0]}" and "memory.non-vectorized-access" in text
    short = feedback_text("diagnosis", "", result, 120, details)
    assert estimate_tokens(short) <= 120 and short.endswith("]")
    assert feedback_text("none", "x", result, 1200, details) == ""


def test_the_token_estimate_is_deterministic_and_counts_symbols() -> None:
    assert estimate_tokens("") == 0
    assert estimate_tokens("gpu__time_duration.sum=125216") == estimate_tokens("gpu__time_duration.sum=125216")
    assert estimate_tokens("a b c") == 3 and estimate_tokens("123456") == 2 and estimate_tokens("x\ny") == 3


# ------------------------------------------------------------------------------------------- a whole run
class Proposals:
    """A scripted model: the recorded candidates in a given order; every request's last user message and
    system prompt kept."""

    def __init__(self, sources: list[str]) -> None:
        self.sources, self.prompts, self.systems, self.paths = sources, [], [], []

    def answer(self, body: dict[str, Any], path: str) -> str:
        self.paths.append(path)
        self.systems.append(body["messages"][0]["content"])
        self.prompts.append(body["messages"][-1]["content"])
        n = len(self.prompts) - 1
        return f"Proposal {n}.\n```python\n{self.sources[n % len(self.sources)]}```"


@pytest.fixture
def endpoint(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, list[Proposals]]]:
    holder: list[Proposals] = []
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)  # the endpoint is reached through --base-url only
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    with serve_endpoint(lambda req: text_completion(req, holder[-1].answer(req.body, req.path), 10, 5)) as url:
        yield url + "/v1", holder


@pytest.fixture
def h100(monkeypatch: pytest.MonkeyPatch) -> tuple[dict[int, str], Counter[str]]:
    """The real server, its measurements replaced by the recorded H100 run's answers: `capabilities` as on
    that H100 (the GPU its `run` answers name; Nsight Compute usable), `run` and `analyze` as recorded."""
    sources, runs, profiles = recorded(SOFTMAX)
    measured: Counter[str] = Counter()
    real_report = caps_mod.capability_report
    gpu = next(r["eval"]["gpu"] for r in runs.values())

    def report(*, probe: bool = True) -> Any:
        r = real_report(probe=False)
        r.gpus = [GpuInfo(index=0, name=gpu, compute_capability="9.0", sm_arch="sm_90")]
        r.can = {**r.can, "ncu_profile": True, "run": True}
        return r

    def run(req: Any, **kw: Any) -> EvalResult:
        measured["run"] += 1
        return EvalResult.model_validate(runs[req.candidate]["eval"])

    def analyze(req: Any, **kw: Any) -> AnalyzeResult:
        measured["analyze"] += 1
        measured["analyze:" + str(next(i for i, s in sources.items() if s == req.candidate)
                                  if req.candidate in sources.values() else "reference")] += 1
        return AnalyzeResult.model_validate({**profiles[req.candidate], "mode": "eval"})

    monkeypatch.setattr(caps_mod, "capability_report", report)
    monkeypatch.setattr(run_mod, "eval_candidate", run)
    monkeypatch.setattr(analyze_mod, "analyze", analyze)
    return sources, measured


def connect_counting(calls: Counter[str]) -> Any:
    @asynccontextmanager
    async def connect(cfg: OptimizeConfig, reference: str) -> AsyncIterator[ServerPeer]:
        async with Client(create_server()) as client:
            call = client.call_tool

            async def counted(name: str, args: dict[str, Any], *a: Any, **kw: Any) -> Any:
                calls[name] += 1
                return await call(name, args, *a, **kw)

            client.call_tool = counted  # type: ignore[method-assign]
            yield ServerPeer(client, cfg, reference)

    return connect


def config(tmp_path: Path, sources: dict[int, str], url: str, feedback: str, **kw: Any) -> OptimizeConfig:
    start = tmp_path / "start.py"
    start.write_text(sources[0])
    return OptimizeConfig(reference=REPO / "examples/problems/softmax/reference.py", candidate=start,
                          out=tmp_path / f"run-{feedback}", budget=4, device="cuda", proposer="openai", model="m",
                          base_url=url, strategy="greedy", confirm=False, report=False, feedback=feedback, **kw)


def _section(prompt: str, title: str) -> str:
    m = re.search(rf"^## {title} \(.*?; at most (\d+) tokens\)\n(.*?)(?=^## )", prompt, re.S | re.M)
    assert m, f"no section {title!r}"
    assert estimate_tokens(m.group(2).strip()) <= int(m.group(1))
    return m.group(2)


@pytest.mark.anyio
@pytest.mark.parametrize("feedback", ["diagnosis", "raw", "none"])
async def test_the_three_arms_over_recorded_h100_answers(feedback: str, tmp_path: Path, h100: Any,
                                                         endpoint: Any) -> None:
    sources, measured = h100
    url, holder = endpoint
    holder.append(Proposals([sources[3], sources[2], sources[1]]))  # 1.155x, then 1.10x (in reach), 1.01x
    calls: Counter[str] = Counter()
    s = await optimize(config(tmp_path, sources, url, feedback), connect=connect_counting(calls))
    model = holder[-1]
    assert s.evaluations == 4 and s.llm_calls == len(model.prompts) == 3 and s.best_id == 1
    assert all(p.endswith("/v1/chat/completions") for p in model.paths)  # base_url, no OPENAI_BASE_URL
    first, last = model.prompts[0], model.prompts[-1]
    for prompt in model.prompts:  # the target and the API, in every arm
        assert "## Target GPU\nNVIDIA H100 80GB HBM3 (sm_90)" in prompt and "DRAM 3350 GB/s" in prompt
        assert "FP16/BF16 tensor cores 989.4 TFLOP/s" in prompt and "CudaKernel(source, name, *, options=" in prompt
    assert calls["bottleneck_classify"] == 1 and calls["capabilities"] == 1 and calls["run"] == measured["run"] == 4
    if feedback == "none":
        assert calls["analyze"] == measured["analyze"] == 0 and s.analyses == 0
        assert "## Profile" not in "".join(model.prompts) and "analyze" not in first
        return
    # profiled: the reference, the start, 1.155x, and 1.10x (within 10% of the best lower bound); not 1.01x
    assert calls["analyze"] == measured["analyze"] == 4 and measured["analyze:reference"] == 1
    assert measured["analyze:0"] == measured["analyze:3"] == measured["analyze:2"] == 1 and not measured["analyze:1"]
    ref, cand = _section(first, "Profile of the reference"), _section(first, "Profile of the current candidate")
    assert "at most 600 tokens" in first and "at most 1200 tokens" in first
    if feedback == "diagnosis":
        assert cand.startswith("Analyzed 1 of 1 kernel(s)") and "LAUNCH/TAIL-LIMITED" in cand
        assert "evidence: smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio=" in cand
        assert "fix 1: " in cand and "top stalls (cycles/issue)" in cand and "(threshold " in cand
        assert "cunn_SoftMax" in ref and "MIXED" in ref
    else:
        assert cand.startswith("kernel softmax_knobs: 1 launch(es)") and "gpu__time_duration.sum = 125216 ns" in cand
        assert "LAUNCH" not in cand and "stalls.dominant-stall-reason" not in last and "[HIGH]" not in last
        assert "cunn_SoftMax" in ref and "MIXED" not in ref
    assert "## Findings" not in first and "## Bottleneck class" not in first


@pytest.mark.anyio
async def test_nothing_is_profiled_twice_and_the_budget_holds(tmp_path: Path, h100: Any, endpoint: Any) -> None:
    sources, measured = h100
    url, holder = endpoint
    holder.append(Proposals([sources[3], sources[2], sources[1]]))
    cfg = config(tmp_path, sources, url, "diagnosis", feedback_tokens=150)
    calls: Counter[str] = Counter()
    await optimize(cfg, connect=connect_counting(calls))
    assert calls["analyze"] == measured["analyze"] == 4
    prompt = holder[-1].prompts[0]
    cand = _section(prompt, "Profile of the current candidate")
    assert "at most 150 tokens" in prompt and "[dropped to fit 150 tokens" in cand
    assert _section(prompt, "Profile of the reference").strip().endswith("]")  # 75 tokens: its note says what went
    records = [json.loads(p.read_text()) for p in (cfg.out / "analysis").glob("*.json")]
    assert len(records) == 4 and all(r["summary"].startswith("Analyzed ") for r in records)
    # a resume with the same proposals (and a fourth that repeats a profiled source) asks the server for none
    holder.append(Proposals([sources[3], sources[2], sources[1], sources[0]]))
    again: Counter[str] = Counter()
    s = await optimize(cfg.model_copy(update={"budget": 5}), connect=connect_counting(again))
    assert again["analyze"] == 0 and measured["analyze"] == 4 and s.analyses >= 4
    assert len(list((cfg.out / "analysis").glob("*.json"))) == 4


@pytest.mark.anyio
async def test_the_reference_as_the_start_is_profiled_once(tmp_path: Path, h100: Any, endpoint: Any) -> None:
    """Without a starting candidate the reference is the start: one profile serves as both, and the first
    prompt shows it once."""
    sources, measured = h100
    url, holder = endpoint
    holder.append(Proposals([sources[3], sources[2]]))
    cfg = config(tmp_path, sources, url, "diagnosis").model_copy(update={"candidate": None, "budget": 3})
    calls: Counter[str] = Counter()
    s = await optimize(cfg, connect=connect_counting(calls))
    assert s.evaluations == 3 and calls["run"] == 2  # the reference itself is not timed against itself
    assert calls["analyze"] == measured["analyze"] == 3 and measured["analyze:reference"] == 1
    first, second = holder[-1].prompts
    assert "## Profile of the reference" not in first and "cunn_SoftMax" in _section(first, "Profile of the "
                                                                                        "current candidate")
    assert "cunn_SoftMax" in _section(second, "Profile of the reference")


def test_no_profile_arm_refuses_always_profiling(tmp_path: Path) -> None:
    from kernelscope.agent.client import analysis_available

    cfg = OptimizeConfig(reference=REPO / "examples/problems/softmax/reference.py", out=tmp_path, device="cuda",
                         feedback="none")
    assert analysis_available({"can": {"ncu_profile": True}}, cfg) == \
        (False, "no profiles: the feedback arm is none (--feedback none)")
    with pytest.raises(ValueError, match="contradicts --feedback none"):
        analysis_available({"can": {"ncu_profile": True}}, cfg.model_copy(update={"analyze": "always"}))


def test_feedback_options_reach_the_config(tmp_path: Path) -> None:
    from kernelscope.agent.optimize import config_from_args
    from kernelscope.cli import build_parser

    args = build_parser().parse_args([
        "optimize", str(REPO / "tests/agentcases/chunked_sum"), "--out", str(tmp_path), "--feedback", "raw",
        "--feedback-tokens", "800", "--profile-within", "0.2", "--base-url", "http://localhost:11434/v1",
        "--cutlass-tools", "never", "--proposer", "openai", "--model", "qwen2.5-coder:7b"])
    cfg = config_from_args(args)
    assert (cfg.feedback, cfg.feedback_tokens, cfg.profile_within, cfg.base_url, cfg.cutlass_tools) == \
        ("raw", 800, 0.2, "http://localhost:11434/v1", "never")
    assert config_from_args(build_parser().parse_args(["optimize", str(REPO / "tests/agentcases/chunked_sum"),
                                                       "--out", str(tmp_path)])).feedback == "diagnosis"


def test_the_cutlass_files_the_prompt_names_are_readable_by_the_tool() -> None:
    """The proposer's note points at files read_cutlass_file can read (not kernelscope's own examples/)."""
    from kernelscope.agent.proposers import TOOLS_NOTE
    from kernelscope.tools import cutlass

    root, why = cutlass.locate()
    if root is None:
        pytest.skip(f"CUTLASS/CuTe headers absent: {why}")
    named = re.findall(r"\b((?:include|examples)/[\w/.]+\.(?:hpp|cu|h))", TOOLS_NOTE)
    assert len(named) == 3 and "examples/cutlass" not in TOOLS_NOTE
    for path in named:
        if path.startswith("examples/") and not root.has_examples:
            continue
        assert cutlass.read_file(path, end_line=5).total_lines > 5, path
