"""`kernelscope optimize` on the GPU: on each knob-annotated problem the offline proposer, searching
through the real server (run + analyze over MCP), reaches a correct candidate faster than the
problem's naive.py, profiles the reference and the start, and writes the report.

Set KERNELSCOPE_KEEP_RUNS=DIR to keep the run directories (tests/fixtures/optimize/ holds runs kept
this way on the H100, for the CPU report tests)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from kernelscope.agent.answers import outcome_from_run
from kernelscope.agent.client import _server_params
from kernelscope.agent.config import OptimizeConfig
from kernelscope.agent.loop import optimize

pytestmark = [pytest.mark.gpu, pytest.mark.anyio]
PROBLEMS = Path(__file__).resolve().parent.parent / "examples" / "problems"
KNOBBED = sorted(p.name for p in PROBLEMS.iterdir() if (p / "candidate.py").is_file())


@pytest.mark.parametrize("problem", KNOBBED)
async def test_optimize_beats_the_naive_candidate(problem: str, tmp_path: Path) -> None:
    from mcp import Client

    d = PROBLEMS / problem
    out = tmp_path / problem
    cfg = OptimizeConfig(reference=d / "reference.py", candidate=d / "candidate.py", out=out, budget=12,
                         timing_budget_s=0.3, trials=2, analyze="always", analyze_max=5, device="cuda")
    s = await optimize(cfg)
    assert s.best_status == "correct" and s.best_speedup is not None
    assert s.analyses >= 2 and s.reference_bottleneck and s.report and Path(s.report).is_file()
    # the naive candidate through the same tool, for the comparison the issue asks for
    async with Client(_server_params(cfg)) as client:  # the same server command and environment
        r = await client.call_tool("run", {"mode": "eval", "reference": (d / "reference.py").read_text(),
                                           "candidate": (d / "naive.py").read_text(), "trials": 2,
                                           "timing_budget_s": 0.3, "device": "cuda"})
    naive = outcome_from_run(r.structured_content, None)
    assert naive.ok and naive.speedup
    print(f"{problem}: best {s.best_speedup:.3f}x (node {s.best_id}, {s.best_config}) vs naive.py "
          f"{naive.speedup:.3f}x; start {s.start_speedup:.3f}x; {s.analyses} profiles; "
          f"bottleneck {s.reference_bottleneck} -> {s.best_bottleneck}; {s.wall_s:.0f} s")
    assert s.best_speedup > naive.speedup
    keep = os.environ.get("KERNELSCOPE_KEEP_RUNS")
    if keep:
        dest = Path(keep) / problem
        shutil.rmtree(dest, ignore_errors=True)
        shutil.copytree(out, dest, ignore=shutil.ignore_patterns("server-home"))
