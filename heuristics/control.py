"""Control-flow rules: warp divergence."""

from __future__ import annotations

from collections.abc import Iterable

from kernelscope.heuristics.memory import hottest_line
from kernelscope.heuristics.registry import Run, rule
from kernelscope.models import Evidence, Finding, Fix, KernelProfile, SourceLineCounters

THREADS = "smsp__thread_inst_executed_per_inst_executed.ratio"
DIVERGENT = "smsp__sass_branch_targets_threads_divergent.sum"


def _least_efficient_line(k: KernelProfile) -> str | None:
    """The line of the branch that splits the warps (the most divergent branch targets: the instruction that
    carries the cost); without per-line branch counts, the sampled line where the fewest threads of a warp execute
    each instruction, weighted by samples."""
    split = hottest_line(k, "smsp__branch_targets_threads_divergent")
    if split is not None:
        return split
    def waste(s: SourceLineCounters) -> float:
        inst, thr = s.counters.get("inst_executed", 0.0), s.counters.get("thread_inst_executed", 0.0)
        if not inst:
            return 0.0
        return (1.0 - thr / (32.0 * inst)) * s.counters.get("smsp__pcsamp_sample_count", 0.0)

    best = max(k.source_lines, key=waste, default=None)
    if best is None or waste(best) <= 0:
        return hottest_line(k, "smsp__pcsamp_warps_issue_stalled_branch_resolving")
    return best.label


@rule("control.warp-divergence", family="control", scope="ncu",
      description="Branches split warps, so only part of each warp does useful work.",
      thresholds={"max_threads_per_inst": 24.0, "high_threads_per_inst": 18.0, "min_divergent_targets": 1},
      metrics=(THREADS, DIVERGENT, "smsp__sass_average_branch_targets_threads_uniform.pct"))
def _divergence(k: KernelProfile, run: Run) -> Iterable[Finding]:
    thr, div = k.num(THREADS), k.num(DIVERGENT)
    if thr is None or div is None or div < run.th["min_divergent_targets"] or thr > run.th["max_threads_per_inst"]:
        return
    line = _least_efficient_line(k)
    yield run.finding(
        kernel=k.name, line=line, impact=1.0 - thr / 32.0,
        severity="high" if thr <= run.th["high_threads_per_inst"] else "warning", title="Warp divergence",
        diagnosis=(f"{k.name}: on average {thr:.1f} of 32 threads execute each warp instruction and "
                   f"{div:,.0f} branch targets diverged: both sides of data-dependent branches run one after the "
                   "other with part of the warp masked off" + (f"; worst line {line}" if line else "") + "."),
        evidence=[Evidence(metric=THREADS, value=round(thr, 2), threshold=run.th["max_threads_per_inst"], source="ncu",
                           kernel=k.name, line=line),
                  Evidence(metric=DIVERGENT, value=div, source="ncu", kernel=k.name),
                  Evidence(metric="smsp__sass_average_branch_targets_threads_uniform.pct",
                           value=k.num("smsp__sass_average_branch_targets_threads_uniform.pct"), unit="%",
                           source="ncu", kernel=k.name)],
        fixes=[Fix(action="Make the branch condition uniform per warp: map work so the 32 threads of a warp take "
                          "the same path (branch on threadIdx.x / 32, or sort/bin the work first).",
                   expected_effect=f"up to {32 / max(thr, 1):.1f}x more useful work per instruction"),
               Fix(action="Replace short divergent paths by predicated arithmetic (select both results).",
                   expected_effect="no serialization for short branches")],
    )
