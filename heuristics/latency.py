"""Latency-family rules: chains of dependent loads that no amount of occupancy hides."""

from __future__ import annotations

from collections.abc import Iterable

from kernelscope.heuristics.memory import hottest_line, stall_share
from kernelscope.heuristics.registry import Run, rule
from kernelscope.models import Evidence, Finding, Fix, KernelProfile


@rule("latency.dependent-loads", family="latency", scope="ncu",
      description="Warps wait on memory most of the time while neither memory nor compute is busy: each load "
                  "waits for the previous one.",
      thresholds={"min_long_scoreboard_share_pct": 50.0, "max_memory_pct": 40.0, "max_sm_pct": 40.0,
                  "min_achieved_occupancy_pct": 50.0},
      supersedes=("stalls.dominant-stall-reason", "memory.low-cache-hit-rate"))
def _dependent(k: KernelProfile, run: Run) -> Iterable[Finding]:
    ls, cycles = stall_share(k, "long_scoreboard")
    mem, sm = k.memory_throughput_pct, k.sm_throughput_pct
    if ls is None or mem is None or sm is None:
        return
    if ls < run.th["min_long_scoreboard_share_pct"] or mem > run.th["max_memory_pct"] or sm > run.th["max_sm_pct"]:
        return
    ach = k.achieved_occupancy_pct
    if ach is None or ach < run.th["min_achieved_occupancy_pct"]:
        return  # too few warps: the occupancy and launch rules name the cause
    line = hottest_line(k, "smsp__pcsamp_warps_issue_stalled_long_scoreboard")
    yield run.finding(
        kernel=k.name, line=line, severity="high",
        impact=min(1.0, ls / 100), title="Latency-bound: dependent memory loads",
        diagnosis=(f"{k.name}: {ls:.0f}% of stall cycles wait on global/local loads ({cycles:.0f} cycles per issued "
                   f"instruction) while memory runs at {mem:.0f}% and compute at {sm:.0f}% of peak: too few "
                   "independent loads are in flight, typically because each address depends on the previous load"
                   + (f"; worst line {line}" if line else "") + "."),
        evidence=[Evidence(metric="smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio",
                           value=cycles, unit="cycles/issue", source="ncu", kernel=k.name, line=line),
                  Evidence(metric="long_scoreboard_share_pct", value=round(ls, 1),
                           threshold=run.th["min_long_scoreboard_share_pct"], unit="%", source="ncu", kernel=k.name),
                  Evidence(metric="gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed", value=mem,
                           threshold=run.th["max_memory_pct"], unit="%", source="ncu", kernel=k.name)],
        fixes=[Fix(action="Break the dependency chain: compute addresses without loaded values, or follow several "
                          "independent chains per thread (interleave 4-8 of them).",
                   expected_effect="several loads in flight per warp; time falls toward the bandwidth limit"),
               Fix(action="Prefetch the next element (software pipelining) or restructure the data (arrays instead of "
                          "linked structures).", expected_effect="latency overlapped with work"),
               Fix(action="Raise occupancy so more warps hide the latency.", expected_effect="helps only partly for "
                                                                                             "serial chains")],
    )
