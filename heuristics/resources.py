"""Rules over ptxas' resource report: spills, local memory, register-limited occupancy."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from kernelscope.heuristics.registry import Run, rule, run_rules
from kernelscope.models import Evidence, Finding, Fix, KernelResources

# Per-SM limits by architecture: (registers per SM, max resident warps per SM).
SM_LIMITS: dict[int, tuple[int, int]] = {
    70: (65536, 64), 75: (65536, 32), 80: (65536, 64), 86: (65536, 48), 87: (65536, 48),
    89: (65536, 48), 90: (65536, 64), 100: (65536, 64), 103: (65536, 64), 120: (65536, 48),
}
REG_ALLOC_UNIT = 256  # registers are allocated per warp in units of 256


def sm_limits(arch: str | None) -> tuple[int, int]:
    digits = "".join(ch for ch in (arch or "") if ch.isdigit())
    return SM_LIMITS.get(int(digits) if digits else 90, (65536, 64))


def warps_allowed_by_registers(registers: int, arch: str | None) -> int:
    regs_per_sm, max_warps = sm_limits(arch)
    per_warp = -(-registers * 32 // REG_ALLOC_UNIT) * REG_ALLOC_UNIT
    return min(max_warps, regs_per_sm // per_warp) if per_warp else max_warps


@rule("ptxas.register-spills", family="memory", scope="ptxas",
      description="ptxas spilled registers to local memory.", thresholds={"min_spill_bytes": 1})
def _spills(k: KernelResources, run: Run) -> Iterable[Finding]:
    st, ld = k.spill_stores_bytes or 0, k.spill_loads_bytes or 0
    if st + ld < run.th["min_spill_bytes"]:
        return
    sev = "high" if st + ld >= 64 else "warning"
    yield run.finding(
        severity=sev, kernel=k.name,
        title="Register spills to local memory",
        diagnosis=(f"{k.name} spills {st} bytes (stores) and {ld} bytes (loads) per thread to local memory "
                   f"with {k.registers} registers: every spill is an L1/L2 round trip on the critical path."),
        evidence=[
            Evidence(metric="spill_stores_bytes", value=st, threshold=run.th["min_spill_bytes"], unit="B",
                     source="ptxas", kernel=k.name),
            Evidence(metric="spill_loads_bytes", value=ld, unit="B", source="ptxas", kernel=k.name),
            Evidence(metric="registers", value=k.registers, source="ptxas", kernel=k.name),
        ],
        fixes=[
            Fix(action="Raise the register cap: drop -maxrregcount or relax __launch_bounds__ "
                       "(fewer blocks per SM, but no spills).",
                expected_effect="removes the spill traffic; usually a net win when spills sit in the main loop"),
            Fix(action="Shorten live ranges: smaller per-thread tiles, fewer unrolled accumulators, "
                       "recompute cheap values instead of keeping them.",
                expected_effect="fewer live registers, so the same occupancy without spills"),
            Fix(action="Stage large per-thread state in shared memory instead of registers.",
                expected_effect="turns local-memory traffic into on-chip shared-memory accesses"),
        ],
    )


@rule("ptxas.local-memory-stack", family="memory", scope="ptxas",
      description="A stack frame without spills: arrays or structs placed in local memory.",
      thresholds={"min_stack_bytes": 16})
def _stack(k: KernelResources, run: Run) -> Iterable[Finding]:
    stack = k.stack_bytes or 0
    if stack < run.th["min_stack_bytes"] or (k.spill_stores_bytes or 0) > 0:
        return
    yield run.finding(
        severity="warning", kernel=k.name,
        title="Per-thread array in local memory",
        diagnosis=(f"{k.name} has a {stack}-byte stack frame with no spills: a per-thread array or struct is "
                   "indexed with run-time indices (or its address is taken), so it lives in local memory, "
                   "not registers."),
        evidence=[Evidence(metric="stack_frame_bytes", value=stack, threshold=run.th["min_stack_bytes"], unit="B",
                           source="ptxas", kernel=k.name)],
        fixes=[
            Fix(action="Make every index into the array a compile-time constant (#pragma unroll the loops "
                       "that index it) so it can live in registers.",
                expected_effect="local loads/stores disappear from SASS (check LDL/STL with the sass tool)"),
            Fix(action="If indices must be dynamic, keep the array in shared memory (one slice per thread, "
                       "padded against bank conflicts).",
                expected_effect="on-chip accesses instead of L1/L2 traffic"),
        ],
    )


@rule("ptxas.register-limited-occupancy", family="occupancy", scope="ptxas",
      description="Registers per thread cap the resident warps per SM at or below the threshold.",
      thresholds={"warning_occupancy_pct": 25.0, "info_occupancy_pct": 50.0}, context=("arch",))
def _regs(k: KernelResources, run: Run) -> Iterable[Finding]:
    arch = run.ctx.get("arch")
    _, max_warps = sm_limits(arch)
    if not k.registers:
        return
    warps = warps_allowed_by_registers(k.registers, arch)
    occ = 100.0 * warps / max_warps
    if occ > run.th["info_occupancy_pct"]:  # at the threshold it is reported
        return
    sev = "warning" if occ <= run.th["warning_occupancy_pct"] else "info"
    yield run.finding(
        severity=sev, kernel=k.name,
        title="Register count limits occupancy",
        diagnosis=(f"{k.name} uses {k.registers} registers per thread, so at most {warps} of {max_warps} warps "
                   f"fit on an SM ({occ:.0f}% theoretical occupancy, {arch or 'sm_90'}). That is fine for "
                   "ILP-rich kernels (GEMM tiles) but starves latency hiding in memory-bound ones."),
        evidence=[
            Evidence(metric="registers", value=k.registers, source="ptxas", kernel=k.name),
            Evidence(metric="theoretical_occupancy_pct_by_registers", value=round(occ, 1),
                     threshold=run.th["info_occupancy_pct"], unit="%", source="ptxas", kernel=k.name),
        ],
        fixes=[
            Fix(action="Add __launch_bounds__(BLOCK, MIN_BLOCKS) or -maxrregcount so ptxas targets more "
                       "resident warps (watch for spills).",
                expected_effect="higher occupancy; helps when profiling shows long-scoreboard stalls"),
            Fix(action="Reduce per-thread state (fewer accumulators or smaller unroll) if the kernel is "
                       "memory- or latency-bound.",
                expected_effect="more warps in flight to hide memory latency"),
        ],
    )


def resource_findings(kernels: list[KernelResources], *, arch: str | None = None,
                      overrides: Mapping[str, Mapping[str, float]] | None = None) -> list[Finding]:
    return run_rules("ptxas", kernels, overrides=overrides, context={"arch": arch})
