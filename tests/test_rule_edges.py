"""The rules at their edges (issue 29): thresholds that include the value at the threshold, launch and occupancy
findings that step back where a unit at its peak sets the time. Inputs are recorded H100 captures
(tests/fixtures/planted) with only the fields a case names changed, each stated in its docstring."""

from __future__ import annotations

from functools import cache
from pathlib import Path

from kernelscope.heuristics import REGISTRY
from kernelscope.measure.ncu import load_profile
from kernelscope.models import CompileResult, KernelProfile, MetricValue

FIX = Path(__file__).parent / "fixtures"


@cache
def _kernels(case: str, stage: str = "deep") -> tuple[KernelProfile, ...]:
    return tuple(load_profile(FIX / "planted" / case / f"{stage}.ncu-rep").kernels)


def recorded(case: str, kernel: str, stage: str = "deep") -> KernelProfile:
    return next(k for k in _kernels(case, stage) if k.name.startswith(kernel))


def with_metrics(k: KernelProfile, **metrics: float) -> KernelProfile:
    return k.model_copy(update={"metrics": {**k.metrics, **{m: MetricValue(value=v) for m, v in metrics.items()}}})


def _fired(rid: str, data: object, context: dict | None = None) -> list:  # type: ignore[type-arg]
    return REGISTRY[rid].run(data, context=context or {})


def _at_half_occupancy_by_registers() -> KernelProfile:
    """P04 scale_sum_early_coefs (recorded: 128 registers, 256 threads, 25%) as 1024-thread blocks of 64 registers:
    one block per SM by registers (64 x 1024 = the SM's 65536), two by warps, so exactly 50% theoretical."""
    k = recorded("04-register-limited-occupancy", "scale_sum_early_coefs")
    k = k.model_copy(update={"block_size": 1024, "registers_per_thread": 64, "theoretical_occupancy_pct": 50.0})
    return with_metrics(k, **{"launch__occupancy_limit_registers": 1, "launch__occupancy_limit_warps": 2,
                              "launch__occupancy_limit_blocks": 32, "launch__occupancy_limit_shared_mem": 32})


def test_register_limited_occupancy_at_exactly_its_threshold_is_reported() -> None:
    k = _at_half_occupancy_by_registers()
    for rid in ("occupancy.register-limited", "occupancy.low-theoretical"):
        found = _fired(rid, k)
        assert found and found[0].severity == "warning", (rid, found)
        assert any(e.value == 50.0 and e.threshold == 50.0 for e in found[0].evidence)
    # one point over the threshold it is not
    assert not _fired("occupancy.register-limited", k.model_copy(update={"theoretical_occupancy_pct": 50.1}))
    # ptxas' view of the same: 64 registers allow 32 of 64 warps on sm_90, reported at the threshold
    comp = CompileResult.model_validate_json((FIX / "planted" / "04-register-limited-occupancy" / "compile.json")
                                             .read_text())
    kr = next(x for x in comp.kernels if x.name.startswith("scale_sum_early_coefs"))
    kr = kr.model_copy(update={"registers": 64})
    found = _fired("ptxas.register-limited-occupancy", [kr], {"arch": "sm_90"})
    assert found and "50% theoretical" in found[0].diagnosis


def test_occupancy_findings_step_back_when_a_unit_is_at_its_peak() -> None:
    """The same 50% kernel with its memory at 89% of peak (stated): the occupancy is not what limits it, so the
    finding is information, not a warning."""
    k = _at_half_occupancy_by_registers().model_copy(update={"memory_throughput_pct": 89.0})
    f = _fired("occupancy.register-limited", k)[0]
    assert f.severity == "info" and "89% of its peak" in f.diagnosis


def test_a_tiny_grid_at_the_memory_roof_is_not_called_idle() -> None:
    """P06 tiny_grid_map (recorded: 8 blocks, both units idle) is critical; given memory at 90% of its peak
    (stated), the small grid is information only."""
    k = recorded("06-tiny-grid", "tiny_grid_map")
    assert _fired("launch.tiny-grid", k)[0].severity == "critical"
    busy = _fired("launch.tiny-grid", k.model_copy(update={"memory_throughput_pct": 90.0}))[0]
    assert busy.severity == "info" and "not what limits" in busy.diagnosis


def test_a_grid_of_exactly_half_the_sms_is_a_tiny_grid() -> None:
    """P06 tiny_grid_map with 66 blocks (stated) on the H100's 132 SMs: at max_sm_fraction (0.5) it fires."""
    k = recorded("06-tiny-grid", "tiny_grid_map")
    assert _fired("launch.tiny-grid", k.model_copy(update={"grid_size": 66}))
    assert not _fired("launch.tiny-grid", k.model_copy(update={"grid_size": 67}))


def test_uncoalesced_loads_at_exactly_eight_sectors_per_request_are_reported() -> None:
    """P01 strided_copy without its excess-sector counts (stated: as the light stage alone gives it) and 8.0
    sectors per request (stated; recorded: 32): the sectors-per-request threshold (8) is inclusive."""
    k = recorded("01-strided-copy", "strided_copy")
    metrics = {m: v for m, v in k.metrics.items() if "theoretical_sectors_global" not in m}
    k = k.model_copy(update={"metrics": metrics, "global_load_sectors_per_request": 8.0})
    assert _fired("memory.uncoalesced-global-access", k)
    assert not _fired("memory.uncoalesced-global-access", k.model_copy(update={"global_load_sectors_per_request": 7.9}))


def test_the_sass_product_rule_fires_at_its_counts() -> None:
    """The naive_sgemm fixture's SASS (recorded: 128 FFMA, 64 LDS) with exactly 64 FFMA in 213 instructions
    (stated: 30.0%): at both thresholds it fires."""
    from kernelscope.tools.sass import sass_for_cubin_bytes

    st = sass_for_cubin_bytes((FIX / "sass" / "naive_sgemm.cubin").read_bytes()).kernels[0]
    edge = st.model_copy(update={"opcodes": {**st.opcodes, "FFMA": 64}, "instructions": 213})
    assert round(100 * 64 / 213, 1) == 30.0
    assert _fired("sass.no-tensor-cores-on-mma-like", edge)
    assert not _fired("sass.no-tensor-cores-on-mma-like", edge.model_copy(update={"opcodes": {**st.opcodes,
                                                                                              "FFMA": 63}}))
