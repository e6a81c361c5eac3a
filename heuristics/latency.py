"""Latency-family rules: chains of dependent loads that no amount of occupancy hides."""

from __future__ import annotations

from collections.abc import Iterable

from kernelscope.heuristics.compute import GLOBAL_LD
from kernelscope.heuristics.memory import hottest_line, stall_share
from kernelscope.heuristics.registry import Run, rule
from kernelscope.models import Evidence, Finding, Fix, KernelProfile
from kernelscope.models.profile import CHAINED_LOAD_INST, GLOBAL_LOAD_INST


def chained_share(k: KernelProfile) -> tuple[float, str | None] | None:
    """(the share of the kernel's global load instructions whose address waits for an earlier load's value, the
    line that runs the most of them), from the reader's per-line CHAINED_LOAD_INST and GLOBAL_LOAD_INST counters;
    None where the reader had no SASS to follow (the CUPTI collector) or the kernel loads nothing from global
    memory."""
    if not any(s.counters.get(GLOBAL_LOAD_INST) for s in k.source_lines):
        return None
    lines = [s for s in k.source_lines if s.counters.get(CHAINED_LOAD_INST)]
    loads = k.num(GLOBAL_LD) or sum(s.counters.get(GLOBAL_LOAD_INST, 0.0) for s in k.source_lines)
    chained = sum(s.counters[CHAINED_LOAD_INST] for s in lines)
    top = max(lines, key=lambda s: s.counters[CHAINED_LOAD_INST], default=None)
    return min(1.0, chained / loads), top.label if top is not None else None


@rule("latency.dependent-loads", family="latency", scope="ncu",
      description="Warps wait on memory most of the time while neither memory nor compute is busy: each load "
                  "waits for the previous one. Where the SASS shows the chain (most global loads take their address "
                  "from an earlier load's value), memory and compute need only stay under the roof.",
      thresholds={"min_long_scoreboard_share_pct": 50.0, "max_memory_pct": 40.0, "max_sm_pct": 40.0,
                  "min_achieved_occupancy_pct": 50.0, "min_chained_share": 0.5, "chained_max_pct": 60.0},
      metrics=(GLOBAL_LD,), supersedes=("stalls.dominant-stall-reason", "memory.low-cache-hit-rate"))
def _dependent(k: KernelProfile, run: Run) -> Iterable[Finding]:
    ls, cycles = stall_share(k, "long_scoreboard")
    mem, sm = k.memory_throughput_pct, k.sm_throughput_pct
    if ls is None or mem is None or sm is None or ls < run.th["min_long_scoreboard_share_pct"]:
        return
    chain = chained_share(k)
    shown = chain is not None and chain[0] >= run.th["min_chained_share"]
    ceiling = run.th["chained_max_pct"] if shown else None
    if ceiling is not None:
        if mem >= ceiling or sm >= ceiling:
            return
    elif mem > run.th["max_memory_pct"] or sm > run.th["max_sm_pct"]:
        return
    ach = k.achieved_occupancy_pct
    if ach is None or ach < run.th["min_achieved_occupancy_pct"]:
        return  # too few warps: the occupancy and launch rules name the cause
    line = (chain[1] if shown and chain is not None else None) or \
        hottest_line(k, "smsp__pcsamp_warps_issue_stalled_long_scoreboard")
    yield run.finding(
        kernel=k.name, line=line, severity="high",
        impact=min(1.0, ls / 100), title="Latency-bound: dependent memory loads",
        diagnosis=(f"{k.name}: {ls:.0f}% of stall cycles wait on global/local loads ({cycles:.0f} cycles per issued "
                   f"instruction) while memory runs at {mem:.0f}% and compute at {sm:.0f}% of peak: too few "
                   "independent loads are in flight, "
                   + (f"because each address depends on the previous load: {100 * chain[0]:.0f}% of the global "
                      "loads take their address from an earlier load's value" if shown and chain is not None else
                      f"although the SASS shows few chains ({100 * chain[0]:.0f}% of the global loads wait on an "
                      "earlier load's value): each warp issues few loads before it needs their values"
                      if chain is not None else "typically because each address depends on the previous load")
                   + (f"; worst line {line}" if line else "") + "."),
        evidence=[Evidence(metric="smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio",
                           value=cycles, unit="cycles/issue", source="ncu", kernel=k.name, line=line),
                  Evidence(metric="long_scoreboard_share_pct", value=round(ls, 1),
                           threshold=run.th["min_long_scoreboard_share_pct"], unit="%", source="ncu", kernel=k.name),
                  Evidence(metric="gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed", value=mem,
                           threshold=ceiling if ceiling is not None else run.th["max_memory_pct"], unit="%",
                           source="ncu", kernel=k.name),
                  *([Evidence(metric="chained_global_load_share", value=round(chain[0], 3),
                              threshold=run.th["min_chained_share"], source="sass", kernel=k.name, line=chain[1])]
                    if chain is not None else [])],
        fixes=[Fix(action="Break the dependency chain: compute addresses without loaded values, or follow several "
                          "independent chains per thread (interleave 4-8 of them).",
                   expected_effect="several loads in flight per warp; time falls toward the bandwidth limit"),
               Fix(action="Prefetch the next element (software pipelining) or restructure the data (arrays instead of "
                          "linked structures).", expected_effect="latency overlapped with work"),
               Fix(action="Raise occupancy so more warps hide the latency.", expected_effect="helps only partly for "
                                                                                             "serial chains")],
    )
