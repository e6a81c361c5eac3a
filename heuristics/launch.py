"""Launch-family rules: grids too small for the GPU, partial last waves, and many tiny launches."""

from __future__ import annotations

import math
from collections.abc import Iterable

from kernelscope.heuristics.classify import saturated_tail, tail_idle_pct
from kernelscope.heuristics.occupancy import hidden_note
from kernelscope.heuristics.registry import Run, rule
from kernelscope.models import Evidence, Finding, Fix, KernelProfile

SM_COUNT = "device__attribute_multiprocessor_count"


@rule("launch.tiny-grid", family="launch", scope="ncu",
      description="The grid has fewer blocks than the GPU has SMs: most of the GPU idles.",
      thresholds={"max_sm_fraction": 0.5, "high_sm_fraction": 0.125, "min_duration_ns": 5_000.0,
                  "saturated_pct": 80.0},
      metrics=(SM_COUNT,), supersedes=("occupancy.achieved-below-theoretical",))
def _tiny(k: KernelProfile, run: Run) -> Iterable[Finding]:
    grid, sms, dur = k.grid_size, k.num(SM_COUNT), k.duration_ns
    if grid is None or not sms or dur is None or dur < run.th["min_duration_ns"]:
        return
    frac = grid / sms
    if frac > run.th["max_sm_fraction"]:
        return
    hidden = hidden_note(k, run.th["saturated_pct"])
    yield run.finding(
        kernel=k.name, impact=1.0 - frac,
        severity="info" if hidden else "critical" if frac <= run.th["high_sm_fraction"] else "high",
        title="Grid too small for the GPU",
        diagnosis=(f"{k.name} launches {grid} blocks of {k.block_size} threads on a GPU with {sms:.0f} SMs and runs "
                   f"{dur / 1e3:.1f} us: at most {100 * frac:.0f}% of the SMs have work, the rest idle the whole "
                   "time." + (hidden or "")),
        evidence=[Evidence(metric="launch__grid_size", value=grid, threshold=round(run.th["max_sm_fraction"] * sms),
                           source="ncu", kernel=k.name),
                  Evidence(metric=SM_COUNT, value=sms, source="ncu", kernel=k.name),
                  Evidence(metric="launch__waves_per_multiprocessor", value=k.waves_per_sm, source="ncu",
                           kernel=k.name),
                  Evidence(metric="gpu__time_duration.sum", value=dur, unit="ns", source="ncu", kernel=k.name)],
        fixes=[Fix(action=f"Split the work over at least {2 * sms:.0f} blocks (one per output tile/row, or a "
                          "grid-stride loop with gridDim = a multiple of the SM count).",
                   expected_effect=f"up to {sms / max(grid, 1):.0f}x faster when the work divides"),
               Fix(action="If the work is a long sequential loop per block, parallelize inside it (split-K style "
                          "partial results combined at the end).", expected_effect="uses the idle SMs")],
    )


@rule("launch.tail-effect", family="launch", scope="ncu",
      description="The last wave of blocks only partly fills the GPU; high where the blocks leave their SMs no "
                  "slack while they run (the classifier's saturated tail: the tail is the time left to win).",
      thresholds={"min_idle_pct": 25.0, "max_waves": 4.0, "min_duration_ns": 10_000.0, "saturated_pct": 80.0})
def _tail(k: KernelProfile, run: Run) -> Iterable[Finding]:
    waves, dur = k.waves_per_sm, k.duration_ns
    idle = tail_idle_pct(waves, run.th["max_waves"])
    if waves is None or idle is None or dur is None or dur < run.th["min_duration_ns"] or idle < run.th["min_idle_pct"]:
        return
    full = math.ceil(waves - 1e-9)
    hidden = hidden_note(k, run.th["saturated_pct"])
    # the blocks leave their SMs no slack while they run (the classifier's saturated tail): the tail is the limiter
    saturated = saturated_tail(k)
    yield run.finding(
        kernel=k.name, severity="high" if saturated else "info" if hidden else "warning", impact=idle / 100,
        title="Tail effect: a partial last wave",
        diagnosis=(f"{k.name} runs {waves:.2f} waves of blocks: the last wave fills only {100 * (waves % 1):.0f}% of "
                   f"the GPU, so about {idle:.0f}% of the SM time across the {full} waves is idle."
                   + (f" While the blocks run, {saturated[1]}: they are at their roof, so the idle tail is the time "
                      "left to win, ahead of making each block cheaper." if saturated else hidden or "")),
        evidence=[Evidence(metric="launch__waves_per_multiprocessor", value=round(waves, 3), source="ncu",
                           kernel=k.name),
                  Evidence(metric="idle_share_pct", value=round(idle, 1), threshold=run.th["min_idle_pct"], unit="%",
                           source="ncu", kernel=k.name)],
        fixes=[Fix(action="Size the grid to a whole number of waves (blocks per SM x SM count), e.g. a persistent "
                          "grid-stride kernel.", expected_effect="no idle tail"),
               Fix(action="Or use smaller blocks / more work per block so the waves divide evenly.",
                   expected_effect="a shorter tail")],
    )


@rule("launch.many-small-launches", family="launch", scope="ncu",
      description="The same kernel is launched many times with a few microseconds of work each.",
      thresholds={"min_launches": 16, "max_mean_ns": 10_000.0, "high_launches": 64},
      supersedes=("occupancy.achieved-below-theoretical", "latency.dependent-loads", "stalls.dominant-stall-reason"),
      context=('launches', 'total_ns'))
def _many(k: KernelProfile, run: Run) -> Iterable[Finding]:
    n = run.ctx.get("launches", {}).get(k.mangled_name, 1)
    total = run.ctx.get("total_ns", {}).get(k.mangled_name)
    if n < run.th["min_launches"] or not total:
        return
    mean = total / n
    if mean > run.th["max_mean_ns"]:
        return
    yield run.finding(
        kernel=k.name, impact=0.9,
        severity="high" if n >= run.th["high_launches"] else "warning", title="Many tiny launches",
        diagnosis=(f"{k.name} was launched {n} times at {mean / 1e3:.1f} us of GPU time each: at a few microseconds "
                   "of launch overhead per call, the GPU spends as long waiting for work as doing it, and each "
                   "launch is too small to fill the SMs."),
        evidence=[Evidence(metric="launches", value=n, threshold=run.th["min_launches"], source="ncu", kernel=k.name),
                  Evidence(metric="mean_gpu_time_per_launch", value=round(mean, 1), threshold=run.th["max_mean_ns"],
                           unit="ns", source="ncu", kernel=k.name),
                  Evidence(metric="launch__grid_size", value=k.grid_size, source="ncu", kernel=k.name)],
        fixes=[Fix(action="Batch the slices into one launch (a grid over all of them, the slice index from "
                          "blockIdx).", expected_effect="one launch's overhead instead of many; fuller SMs"),
               Fix(action="If the launches must stay separate, capture them in a CUDA graph.",
                   expected_effect="launch overhead drops to ~1 us per kernel")],
    )
