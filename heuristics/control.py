"""Control-flow rules: warp divergence."""

from __future__ import annotations

from collections.abc import Iterable

from kernelscope.heuristics.memory import DRAM_PCT, dram_pct, hottest_line
from kernelscope.heuristics.registry import Run, rule
from kernelscope.models import Evidence, Finding, Fix, KernelProfile, SourceLineCounters

THREADS = "smsp__thread_inst_executed_per_inst_executed.ratio"
DIVERGENT = "smsp__sass_branch_targets_threads_divergent.sum"


PRED_ON = "smsp__thread_inst_executed_pred_on.sum"
INST = "smsp__inst_executed.sum"


def lanes_doing_work(k: KernelProfile) -> float | None:
    """Threads per executed warp instruction whose predicate is on: the lanes that do work. Branch divergence
    lowers it, and so does predication, the compiler's form of a short divergent branch (all 32 threads active,
    most of them predicated off). From the kernel's counter where captured, else summed over the source
    counters; None without either."""
    on, inst = k.num(PRED_ON), k.num(INST)
    if on is not None and inst:
        return on / inst
    inst_l = sum(s.counters.get("inst_executed", 0.0) for s in k.source_lines)
    on_l = sum(s.counters.get("thread_inst_executed_true", 0.0) for s in k.source_lines)
    return on_l / inst_l if inst_l and on_l else None


def _least_efficient_line(k: KernelProfile) -> str | None:
    """The line of the branch that splits the warps (the most divergent branch targets: the instruction that
    carries the cost); without per-line branch counts (or where predication, not branches, masks the lanes), the
    line whose instructions leave the most lane slots without work (predicated off or inactive)."""
    split = hottest_line(k, "smsp__branch_targets_threads_divergent")
    if split is not None:
        return split

    def lost(s: SourceLineCounters) -> float:
        inst = s.counters.get("inst_executed", 0.0)
        done = s.counters.get("thread_inst_executed_true", s.counters.get("thread_inst_executed", 0.0))
        return 32.0 * inst - done if inst else 0.0

    best = max(k.source_lines, key=lost, default=None)
    if best is None or lost(best) <= 0:
        return hottest_line(k, "smsp__pcsamp_warps_issue_stalled_branch_resolving")
    return best.label


@rule("control.warp-divergence", family="control", scope="ncu",
      description="Branches split warps, or the compiler predicates short divergent paths, so only part of each "
                  "warp does useful work; a note where DRAM already runs near its peak, or where the SM has "
                  "throughput to spare (its busiest unit under 60% of its peak: the warps wait on something else, "
                  "and the idle lanes cost nothing the kernel waits for).",
      thresholds={"max_threads_per_inst": 24.0, "high_threads_per_inst": 18.0, "min_divergent_targets": 1,
                  "dram_roof_pct": 80.0, "busy_sm_pct": 60.0},
      metrics=(THREADS, DIVERGENT, "smsp__sass_average_branch_targets_threads_uniform.pct", PRED_ON, INST, DRAM_PCT))
def _divergence(k: KernelProfile, run: Run) -> Iterable[Finding]:
    th = run.th
    thr, div, work = k.num(THREADS), k.num(DIVERGENT), lanes_doing_work(k)
    branches = (thr is not None and div is not None and div >= th["min_divergent_targets"]
                and thr <= th["max_threads_per_inst"])
    # predication: every thread active, most predicated off (a short divergent path the compiler if-converted)
    predicated = work is not None and work <= th["max_threads_per_inst"] and (thr is None or work < thr - 1.0)
    if not (branches or predicated):
        return
    lanes = min(v for v in (thr, work) if v is not None)
    line = _least_efficient_line(k)
    mem, sm = dram_pct(k), k.sm_throughput_pct
    at_roof = mem is not None and mem >= th["dram_roof_pct"]
    # idle lanes cost the SM's throughput (predicated instructions take issue slots, divergent paths run one after
    # the other): they matter where that throughput is what the kernel spends (classify's "near its peak"), not
    # where the warps wait on memory, barriers or other blocks with the SM mostly idle
    spare = sm is not None and sm < th["busy_sm_pct"]
    quiet = at_roof or spare
    how = (f"{div:,.0f} branch targets diverged: both sides of data-dependent branches run one after the other "
           "with part of the warp masked off" if branches else
           f"all {thr if thr is not None else 32:.0f} threads are active but the rest are predicated off: the "
           "compiler turned short divergent branches into predicated instructions, which every warp issues "
           "whoever needs them")
    yield run.finding(
        kernel=k.name, line=line, impact=(1.0 - lanes / 32.0) if not quiet else 0.05,
        severity="info" if quiet else "high" if lanes <= th["high_threads_per_inst"] else "warning",
        title="Warp divergence",
        diagnosis=(f"{k.name}: on average {lanes:.1f} of 32 threads do work in each warp instruction; {how}"
                   + (f"; worst line {line}" if line else "") + "."
                   + (f" DRAM runs at {mem:.0f}% of its peak: the idle lanes are not what sets the time today."
                      if at_roof else "")
                   + (f" The SM runs at {sm:.0f}% of its peak throughput, so the idle lanes take issue slots "
                      "nothing else needs while the warps wait on something else: not what sets the time today."
                      if spare and not at_roof else "")),
        evidence=[Evidence(metric=THREADS, value=round(thr, 2) if thr is not None else None,
                           threshold=th["max_threads_per_inst"], source="ncu", kernel=k.name, line=line),
                  Evidence(metric="threads_not_predicated_off_per_inst", value=round(work, 2) if work is not None
                           else None, threshold=th["max_threads_per_inst"], source="ncu", kernel=k.name),
                  Evidence(metric=DIVERGENT, value=div, source="ncu", kernel=k.name),
                  Evidence(metric="smsp__sass_average_branch_targets_threads_uniform.pct",
                           value=k.num("smsp__sass_average_branch_targets_threads_uniform.pct"), unit="%",
                           source="ncu", kernel=k.name)],
        fixes=[Fix(action="Make the branch condition uniform per warp: map work so the 32 threads of a warp take "
                          "the same path (branch on threadIdx.x / 32, compact the active indices so active threads "
                          "are contiguous, or sort/bin the work first).",
                   expected_effect=f"up to {32 / max(lanes, 1):.1f}x more useful work per instruction"),
               Fix(action="For tree steps (reductions, scans) keep the active threads contiguous (index by "
                          "tid * stride instead of testing tid % stride) and finish the last 32 elements with warp "
                          "shuffles.", expected_effect="whole warps retire from each step"),
               Fix(action="Replace short divergent paths by arithmetic selects where both sides are cheap.",
                   expected_effect="no serialization for short branches")],
    )
