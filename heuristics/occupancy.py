"""Occupancy-family rules over Nsight Compute profiles: achieved vs theoretical and the limiter."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from kernelscope.heuristics.registry import rule
from kernelscope.models import Evidence, Finding, Fix, KernelProfile

_LIMITERS = {
    "launch__occupancy_limit_registers": "registers per thread",
    "launch__occupancy_limit_shared_mem": "shared memory per block",
    "launch__occupancy_limit_blocks": "the blocks-per-SM limit (blocks too small)",
    "launch__occupancy_limit_warps": "warps per SM (block size)",
}


@rule("occupancy.low-theoretical", family="occupancy", scope="ncu",
      description="The launch configuration caps resident warps below half the SM's maximum.",
      thresholds={"theoretical_pct": 50.0})
def _low_theoretical(k: KernelProfile, th: Mapping[str, float], ctx: Mapping[str, Any]) -> Iterable[Finding]:
    theo = k.theoretical_occupancy_pct
    if theo is None or theo >= th["theoretical_pct"]:
        return
    limits = {m: k.metrics[m].value for m in _LIMITERS if m in k.metrics and isinstance(k.metrics[m].value,
                                                                                        (int, float))}
    limiter = min(limits, key=lambda m: limits[m]) if limits else None  # type: ignore[arg-type, return-value]
    why = _LIMITERS.get(limiter or "", "an unknown resource")
    yield Finding(
        rule="occupancy.low-theoretical", family="occupancy", severity="warning", kernel=k.name,
        title="Low theoretical occupancy",
        diagnosis=f"{k.name}: at most {theo:.0f}% of the SM's warps can be resident, limited by {why}.",
        evidence=[Evidence(metric="sm__maximum_warps_per_active_cycle_pct", value=theo,
                           threshold=th["theoretical_pct"], unit="%", source="ncu", kernel=k.name)]
        + [Evidence(metric=m, value=v, unit="blocks", source="ncu", kernel=k.name) for m, v in limits.items()],
        fixes=[Fix(action="Relieve the limiter: fewer registers (__launch_bounds__), less shared memory per "
                          "block, or larger blocks.", expected_effect="more warps to hide latency")],
    )


@rule("occupancy.achieved-below-theoretical", family="occupancy", scope="ncu",
      description="Far fewer warps are resident on average than the launch allows (imbalance, tails).",
      thresholds={"ratio": 0.7, "min_theoretical_pct": 50.0})
def _achieved(k: KernelProfile, th: Mapping[str, float], ctx: Mapping[str, Any]) -> Iterable[Finding]:
    ach, theo = k.achieved_occupancy_pct, k.theoretical_occupancy_pct
    if ach is None or theo is None or theo < th["min_theoretical_pct"] or ach >= th["ratio"] * theo:
        return
    waves = k.waves_per_sm
    yield Finding(
        rule="occupancy.achieved-below-theoretical", family="occupancy", severity="warning", kernel=k.name,
        title="Achieved occupancy well below theoretical",
        diagnosis=(f"{k.name}: {ach:.0f}% of warps resident on average vs {theo:.0f}% possible"
                   + (f" over {waves:.2f} waves" if waves is not None else "")
                   + ": blocks finish unevenly or the last wave is partial."),
        evidence=[Evidence(metric="sm__warps_active.avg.pct_of_peak_sustained_active", value=ach,
                           threshold=round(th["ratio"] * theo, 1), unit="%", source="ncu", kernel=k.name),
                  Evidence(metric="launch__waves_per_multiprocessor", value=waves, source="ncu", kernel=k.name)],
        fixes=[Fix(action="Balance work per block (grid-stride loops, a persistent grid sized to the SM count).",
                   expected_effect="fewer idle SMs in the tail")],
    )
