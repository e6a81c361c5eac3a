"""The optimize run's report, live view and the loop's profile plumbing.

The report is opened in a real headless Chromium (Playwright driving the browser named by
KERNELSCOPE_BROWSER, which `.ci/browser` installs, or Playwright's own): the page must load without
errors and draw every evaluation in the speedup chart, the tree and the findings table. Profiles are the
`analyze` answers recorded on the H100 for the planted suite (tests/fixtures/planted)."""

from __future__ import annotations

import io
import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from kernelscope.agent.answers import findings_of
from kernelscope.agent.config import OptimizeConfig
from kernelscope.agent.live import LiveView, PlainView
from kernelscope.agent.loop import optimize
from kernelscope.agent.problems import reference_as_candidate, resolve_problem
from kernelscope.agent.proposers import make_expander
from kernelscope.agent.report import render_report, roofline_chart, write_report
from kernelscope.agent.search import MCTS, KnobExpander, Outcome, parse_knobs, run_search, strategies

REPO = Path(__file__).resolve().parent.parent
CASE = Path(__file__).parent / "agentcases" / "chunked_sum"
PLANTED = Path(__file__).parent / "fixtures" / "planted"
RUNS = Path(__file__).parent / "fixtures" / "optimize"


def _recorded(case: str) -> dict[str, Any]:
    return json.loads((PLANTED / case / "analyze.json").read_text())


# ------------------------------------------------------------------------------------------- plumbing
def test_findings_of_a_recorded_analyze_answer() -> None:
    """The FFMA matmul's H100 profile: its costliest kernel's class, the rules most severe first, one
    sentence per finding with its first fix (what the LLM prompt and the offline knob order read)."""
    cls, rules, severe, details = findings_of(_recorded("07-ffma-matmul"))
    assert cls == "compute-bound"
    assert "compute.tensor-cores-unused" in rules and severe
    assert details[0].startswith(rules[0]) and "Fix: " in details[0]
    ranks = {"critical": 0, "high": 1, "warning": 2, "info": 3}
    sev = [d.split("(", 1)[1].split(",", 1)[0].split(")", 1)[0] for d in details]
    assert [ranks[s] for s in sev] == sorted(ranks[s] for s in sev)
    assert findings_of({"status": "no-kernels", "kernels": []}) == (None, [], False, [])


def test_problem_directories_and_the_reference_start(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ref, cand = resolve_problem(REPO / "examples" / "problems" / "softmax")
    assert ref.name == "reference.py" and cand is not None and cand.name in ("candidate.py", "naive.py")
    assert resolve_problem(CASE / "reference.py") == (CASE / "reference.py", None)
    with pytest.raises(ValueError, match="not a file or a problem directory"):
        resolve_problem(tmp_path / "nope")
    with pytest.raises(ValueError, match=r"without reference\.py"):
        resolve_problem(tmp_path)
    src = reference_as_candidate((CASE / "reference.py").read_text())
    pytest.importorskip("torch", reason="the reference start is checked by importing it, which needs torch")
    ns: dict[str, Any] = {}
    exec(compile(src, "candidate.py", "exec"), ns)
    assert issubclass(ns["ModelNew"], ns["Model"])
    cfg = OptimizeConfig(reference=CASE / "reference.py", out=tmp_path, proposer="offline")
    with pytest.raises(ValueError, match="knob-annotated candidate"):
        make_expander(cfg, None, "")
    pytest.importorskip("openai", reason="the LLM start needs the `llm` extra (openai)")
    cfg = OptimizeConfig(reference=CASE / "reference.py", out=tmp_path, proposer="openai", model="m")
    monkeypatch.setenv("OPENAI_API_KEY", "unused")
    _, start, _ = make_expander(cfg, None, (CASE / "reference.py").read_text())
    assert start.payload["reference_start"] == "1" and "class ModelNew(Model)" in start.payload["source"]


class FakeClock:
    """``time.monotonic`` for the search module, advanced by the evaluations alone: a deadline test that
    does not depend on how busy the machine is."""

    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now


def test_a_time_budget_stops_the_search(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = FakeClock()
    monkeypatch.setattr(strategies, "time", clock)
    exp = KnobExpander(parse_knobs((CASE / "candidate.py").read_text()))
    calls = []

    def evaluate(cfg: dict[str, str]) -> Outcome:
        calls.append(cfg)
        clock.now += 0.05
        return Outcome("correct", speedup=1.0 + len(calls) / 10)

    st = run_search(MCTS(), exp, evaluate, exp.start(), budget=50, deadline=0.12)
    assert st.stopped == "time" and 2 <= len(st.nodes) <= 4
    assert len(st.nodes) == 3  # evaluations start at 0, 0.05 and 0.10 s; the check at 0.15 s stops
    st = run_search(MCTS(), exp, evaluate, exp.start(), budget=3)
    assert st.stopped == "budget" and len(st.nodes) == 3


def test_live_view_and_plain_lines() -> None:
    from rich.console import Console

    exp = KnobExpander(parse_knobs((CASE / "candidate.py").read_text()))
    seen: list[int] = []
    buf = io.StringIO()
    plain = PlainView(4, stream=buf)
    console = Console(file=io.StringIO(), width=120, record=True)
    live = LiveView(4, 60.0, "test run", console=console)

    def evaluate(cfg: dict[str, str]) -> Outcome:
        live.activity("evaluating a candidate (run)")
        return Outcome("correct", speedup=2.0 if cfg["CHUNKS"] == "64" else 1.0)

    def step(st: Any) -> None:
        seen.append(len(st.nodes))
        plain.step(st)
        live.step(st)

    with live:
        st = run_search(MCTS(initial=0), exp, evaluate, exp.start(), budget=4, on_step=step)
        live.activity("profiling node 1 (analyze)")
        console.print(live)
    assert seen == [1, 2, 3, 4] and len(st.nodes) == 4
    lines = buf.getvalue().splitlines()
    assert lines[0].startswith("[1/4] node 0 start") and "best 2.000x (node 1)" in lines[-1]
    text = console.export_text()
    assert "4/4" in text and "node 1: 2.000x" in text and "profiling node 1 (analyze)" in text


# ------------------------------------------------------------------------------------------- report
def test_roofline_section_from_recorded_profiles() -> None:
    k = _recorded("07-ffma-matmul")["kernels"]
    ffma = next(x for x in k if x["name"].startswith("ffma"))["bottleneck"]
    wmma = next(x for x in k if x["name"].startswith("wmma"))["bottleneck"]
    page = roofline_chart([("reference", ffma), ("best (node 3)", wmma)])
    assert page.count('class="roof-row"') == 2 and 'id="roofline-chart"' in page
    assert page.count('class="roof-point"') == 1  # the tensor-core kernel has no FP32 FLOPs to place
    assert "H100" in page
    assert "roofline-missing" in roofline_chart([])


def _browser() -> str | None:
    path = os.environ.get("KERNELSCOPE_BROWSER")
    if path and Path(path).is_file():
        return path
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return None
    with sync_playwright() as p:
        own = p.chromium.executable_path
    return own if own and Path(own).is_file() else None


def _launch(p: Any, browser: str) -> Any:
    """Start Chromium in its normal multi-process mode (single-process mode segfaulted at launch under a
    loaded CI run). A browser that dies while starting, before any page of ours exists, is tried once
    more: that crash is the browser's, and the second failure is reported as it is."""
    try:
        return p.chromium.launch(executable_path=browser, args=["--no-sandbox"])
    except Exception as e:  # playwright's TargetClosedError; its module path is private
        if "closed" not in str(e):
            raise
        return p.chromium.launch(executable_path=browser, args=["--no-sandbox"])


def _open(report: Path) -> dict[str, Any]:
    """Load the page in headless Chromium; counts of what it drew, and every error it raised."""
    browser = _browser()
    if browser is None:
        msg = ("no headless browser: run .ci/browser and set KERNELSCOPE_BROWSER to the path it prints "
               "(pip install 'kernelscope[browser]')")
        if os.environ.get("KERNELSCOPE_REQUIRE_BROWSER"):
            pytest.fail(msg)
        pytest.skip(msg)
    from playwright.sync_api import sync_playwright

    errors: list[str] = []
    with sync_playwright() as p:
        b = _launch(p, browser)
        try:
            page = b.new_page(viewport={"width": 1000, "height": 900})
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.goto(report.as_uri())
            page.wait_for_load_state("load")
            seen = page.evaluate("""() => ({
                title: document.title,
                evals: document.querySelectorAll('#speedup-chart .eval').length,
                bestPoints: (document.querySelector('#best-line')?.getAttribute('points') || '').trim()
                            .split(/\\s+/).filter(Boolean).length,
                treeNodes: document.querySelectorAll('#tree-chart g.node').length,
                rows: document.querySelectorAll('#nodes tr.node-row').length,
                roofRows: document.querySelectorAll('#roofline-table tr.roof-row').length,
                roofPoints: document.querySelectorAll('#roofline-chart .roof-point').length,
                chartBox: document.querySelector('#speedup-chart')?.getBoundingClientRect().width || 0,
                treeBox: document.querySelector('#tree-chart')?.getBoundingClientRect().height || 0,
                source: document.querySelector('#best-source')?.textContent || '',
            })""")
            shot = page.screenshot(full_page=True)
        finally:
            b.close()
    seen["errors"] = errors
    seen["screenshot_bytes"] = len(shot)
    return seen


def test_report_of_a_cpu_run_in_a_headless_browser(tmp_path: Path) -> None:
    import anyio

    out = tmp_path / "run"
    cfg = OptimizeConfig(reference=CASE / "reference.py", candidate=CASE / "candidate.py", out=out, budget=6,
                         device="cpu", timing_budget_s=0.1, trials=2, proposer="offline")
    s = anyio.run(optimize, cfg)
    assert s.report and Path(s.report).is_file() and s.analyses == 0 and "CPU" in (s.analysis_note or "")
    seen = _open(Path(s.report))
    assert seen["errors"] == []
    assert seen["title"].startswith("kernelscope optimize: chunked_sum")
    assert seen["evals"] == seen["treeNodes"] == seen["rows"] == 6
    assert seen["bestPoints"] == 6 and seen["chartBox"] > 300 and seen["treeBox"] > 100
    assert "CHUNKS = " in seen["source"] and seen["screenshot_bytes"] > 10_000


@pytest.mark.parametrize("run", sorted(p.name for p in RUNS.iterdir() if p.is_dir()) if RUNS.is_dir() else [])
def test_report_of_a_recorded_h100_run_in_a_headless_browser(run: str, tmp_path: Path) -> None:
    """A whole run directory recorded on the H100 (tests/fixtures/optimize/*, with its profiles): the
    report rebuilds from it and shows the reference and the best on the roofline table."""
    d = tmp_path / run
    shutil.copytree(RUNS / run, d)
    summary = json.loads((d / "summary.json").read_text())
    assert summary["analyses"] >= 2 and summary["best_speedup"] > summary["start_speedup"]
    page = render_report(d, summary, json.loads((d / "tree.json").read_text()))
    assert "reference" in page
    seen = _open(write_report(d))
    assert seen["errors"] == [] and seen["evals"] == seen["rows"] == summary["evaluations"]
    assert seen["roofRows"] >= 2
