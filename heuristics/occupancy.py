"""Occupancy-family rules over Nsight Compute profiles: achieved vs theoretical and the limiter."""

from __future__ import annotations

from collections.abc import Iterable

from kernelscope.heuristics.classify import ISSUE_ACTIVE
from kernelscope.heuristics.registry import Run, rule
from kernelscope.models import Evidence, Finding, Fix, KernelProfile


def busiest_unit_pct(k: KernelProfile) -> float | None:
    """How close the busiest unit (compute or memory) came to its peak: near it, the kernel's time is set by that
    unit, and launch shape or occupancy are no longer what holds it back."""
    vals = [v for v in (k.sm_throughput_pct, k.memory_throughput_pct) if v is not None]
    return max(vals) if vals else None


def hidden_note(k: KernelProfile, saturated_pct: float, *, while_active: bool = False) -> str | None:
    """A sentence for a finding whose cost the busiest unit's saturation hides, or None when it does not.
    ``while_active``: also where the schedulers issue in ``saturated_pct`` of the cycles their SM is active (a
    latency finding's case: warps already cover every issue slot while the SM runs, so more warps would not
    issue more, although idle SMs, a tail, keep the elapsed-time figures low)."""
    busy = busiest_unit_pct(k)
    if busy is not None and busy >= saturated_pct:
        return (f" The busiest unit already runs at {busy:.0f}% of its peak, so this is not what limits the kernel "
                "today; it matters once that unit's load falls.")
    issue = k.num(ISSUE_ACTIVE) if while_active else None
    if issue is not None and issue >= saturated_pct:
        return (f" The schedulers issue an instruction in {issue:.0f}% of the cycles their SM is active: the "
                "resident warps already hide the latency, so more of them would not issue more.")
    return None


_LIMITERS = {
    "launch__occupancy_limit_registers": "registers per thread",
    "launch__occupancy_limit_shared_mem": "shared memory per block",
    "launch__occupancy_limit_blocks": "the blocks-per-SM limit (blocks too small)",
    "launch__occupancy_limit_warps": "warps per SM (block size)",
}


@rule("occupancy.low-theoretical", family="occupancy", scope="ncu",
      description="The launch configuration caps resident warps at or below half the SM's maximum.",
      thresholds={"theoretical_pct": 50.0, "saturated_pct": 80.0}, metrics=(ISSUE_ACTIVE,))
def _low_theoretical(k: KernelProfile, run: Run) -> Iterable[Finding]:
    theo = k.theoretical_occupancy_pct
    if theo is None or theo > run.th["theoretical_pct"]:  # at the threshold it is reported
        return
    limits = {m: k.metrics[m].value for m in _LIMITERS if m in k.metrics and isinstance(k.metrics[m].value,
                                                                                        (int, float))}
    limiter = min(limits, key=lambda m: limits[m]) if limits else None  # type: ignore[arg-type, return-value]
    why = _LIMITERS.get(limiter or "", "an unknown resource")
    hidden = hidden_note(k, run.th["saturated_pct"], while_active=True)
    yield run.finding(
        severity="info" if hidden else "warning", kernel=k.name,
        title="Low theoretical occupancy",
        diagnosis=(f"{k.name}: at most {theo:.0f}% of the SM's warps can be resident, limited by {why}."
                   + (hidden or "")),
        evidence=[Evidence(metric="sm__maximum_warps_per_active_cycle_pct", value=theo,
                           threshold=run.th["theoretical_pct"], unit="%", source="ncu", kernel=k.name)]
        + [Evidence(metric=m, value=v, unit="blocks", source="ncu", kernel=k.name) for m, v in limits.items()],
        fixes=[Fix(action="Relieve the limiter: fewer registers (__launch_bounds__), less shared memory per "
                          "block, or larger blocks.", expected_effect="more warps to hide latency")],
    )


@rule("occupancy.achieved-below-theoretical", family="occupancy", scope="ncu",
      description="Far fewer warps are resident on average than the launch allows (imbalance, tails); a note where "
                  "the busiest unit is near its peak or the schedulers already issue in most active cycles.",
      thresholds={"ratio": 0.7, "min_theoretical_pct": 50.0, "saturated_pct": 80.0}, metrics=(ISSUE_ACTIVE,))
def _achieved(k: KernelProfile, run: Run) -> Iterable[Finding]:
    ach, theo = k.achieved_occupancy_pct, k.theoretical_occupancy_pct
    if ach is None or theo is None or theo < run.th["min_theoretical_pct"] or ach > run.th["ratio"] * theo:
        return
    waves = k.waves_per_sm
    # achieved occupancy counts the SMs' active cycles only: where the warps resident then already issue in most of
    # them, more would not issue more (the idle SMs of a tail are launch.tail-effect's)
    hidden = hidden_note(k, run.th["saturated_pct"], while_active=True)
    yield run.finding(
        severity="info" if hidden else "warning", kernel=k.name,
        title="Achieved occupancy well below theoretical",
        diagnosis=(f"{k.name}: {ach:.0f}% of warps resident on average vs {theo:.0f}% possible"
                   + (f" over {waves:.2f} waves" if waves is not None else "")
                   + ": blocks finish unevenly or the last wave is partial." + (hidden or "")),
        evidence=[Evidence(metric="sm__warps_active.avg.pct_of_peak_sustained_active", value=ach,
                           threshold=round(run.th["ratio"] * theo, 1), unit="%", source="ncu", kernel=k.name),
                  Evidence(metric="launch__waves_per_multiprocessor", value=waves, source="ncu", kernel=k.name)],
        fixes=[Fix(action="Balance work per block (grid-stride loops, a persistent grid sized to the SM count).",
                   expected_effect="fewer idle SMs in the tail")],
    )


@rule("occupancy.register-limited", family="occupancy", scope="ncu",
      description="Registers per thread are what caps resident warps (at or below the threshold).",
      thresholds={"theoretical_pct": 50.0, "high_theoretical_pct": 25.0, "saturated_pct": 80.0},
      metrics=(ISSUE_ACTIVE,), supersedes=("occupancy.low-theoretical", "ptxas.register-limited-occupancy"))
def _reg_limited(k: KernelProfile, run: Run) -> Iterable[Finding]:
    theo, regs = k.theoretical_occupancy_pct, k.registers_per_thread
    limits = {m: k.num(m) for m in _LIMITERS}
    reg_limit = limits.get("launch__occupancy_limit_registers")
    if theo is None or regs is None or reg_limit is None or theo > run.th["theoretical_pct"]:
        return
    others = [v for m, v in limits.items() if m != "launch__occupancy_limit_registers" and v is not None]
    if others and reg_limit > min(others):
        return  # another resource binds first
    ach = k.achieved_occupancy_pct
    block = k.block_size or 0
    target_regs = max(32, (65536 // max(1, 2 * block)) // 8 * 8) if block else None
    hidden = hidden_note(k, run.th["saturated_pct"], while_active=True)
    yield run.finding(
        kernel=k.name, impact=round(1 - theo / 100, 2),
        severity="info" if hidden else "high" if theo <= run.th["high_theoretical_pct"] else "warning",
        title="Occupancy limited by registers",
        diagnosis=(f"{k.name} uses {regs} registers per thread, so only {reg_limit:.0f} block(s) of {block} "
                   f"threads fit per SM: theoretical occupancy {theo:.0f}%"
                   + (f", achieved {ach:.0f}%" if ach is not None else "")
                   + ". With so few warps, memory and pipeline latency stay exposed." + (hidden or "")),
        evidence=[Evidence(metric="launch__registers_per_thread", value=regs, source="ncu", kernel=k.name),
                  Evidence(metric="launch__occupancy_limit_registers", value=reg_limit, unit="blocks", source="ncu",
                           kernel=k.name),
                  Evidence(metric="sm__maximum_warps_per_active_cycle_pct", value=theo,
                           threshold=run.th["theoretical_pct"], unit="%", source="ncu", kernel=k.name)]
        + [Evidence(metric=m, value=v, unit="blocks", source="ncu", kernel=k.name) for m, v in limits.items()
           if m != "launch__occupancy_limit_registers" and v is not None],
        fixes=[Fix(action=f"Cap registers with __launch_bounds__({block}, 2..4)" + (
                   f" (about {target_regs} registers for 2 blocks of {block})" if target_regs else "")
                   + "; check ptxas -v that it does not spill.", expected_effect="2-4x more resident warps"),
               Fix(action="Reduce live state per thread: fewer accumulators/unrolled values, recompute indices, "
                          "keep tiles in shared memory.", expected_effect="fewer registers without spills"),
               Fix(action="Or add instruction-level parallelism instead (more independent loads per thread) if "
                          "occupancy cannot rise.", expected_effect="latency hidden within a warp")],
    )
