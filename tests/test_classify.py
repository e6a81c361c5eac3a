"""Roofline classification of real H100 captures (tests/fixtures/ncu/, the planted suites' reports)."""

from __future__ import annotations

from pathlib import Path

import _planted2
import pytest

from kernelscope.heuristics.classify import (
    GLOBAL_INST,
    ISSUE_ACTIVE,
    LSU_PIPE,
    REFINE_METRICS,
    SHARED_INST,
    classify,
    peaks_for,
    tail_idle_pct,
)
from kernelscope.heuristics.pipeline import stage2_plan
from kernelscope.measure.ncu import load_profile
from kernelscope.models import KernelProfile, MetricValue

FIX = Path(__file__).parent / "fixtures" / "ncu"


@pytest.fixture(scope="module")
def kernels() -> dict[str, KernelProfile]:
    return {k.name.split("(")[0]: k for k in load_profile(FIX / "three-kernels.ncu-rep").kernels}


def test_peaks_table() -> None:
    p = peaks_for("NVIDIA H100 80GB HBM3")
    assert p is not None and p.dram_gbps == 3350 and p.sm_count == 132
    for name in ("NVIDIA H200", "NVIDIA A100-SXM4-80GB", "NVIDIA L40S", "NVIDIA GeForce RTX 4090", "NVIDIA H100 PCIe"):
        assert peaks_for(name) is not None, name
    assert peaks_for("Some Future GPU") is None


def test_copy_is_memory_bound_at_70_percent_of_the_roof(kernels: dict[str, KernelProfile]) -> None:
    b = classify(kernels["copy_coalesced"])
    assert b.cls == "memory-bound" and b.confidence > 0.6
    r = b.roofline
    assert r is not None and r.arithmetic_intensity is not None and r.arithmetic_intensity < r.ridge_point
    # 2^26 floats read + written = 512 MiB in 223 us: ~2.3 TB/s of 3.35
    # (a few % of the writes are still dirty in the 50 MB L2 when the kernel ends)
    assert r.dram_bytes == pytest.approx(2 * 4 * 2**26, rel=0.05)
    assert 2200 < r.achieved_dram_gbps < 2500 and 0.6 < r.fraction_of_roofline < 0.8


def test_strided_copy_moves_16x_the_bytes(kernels: dict[str, KernelProfile]) -> None:
    b = classify(kernels["copy_strided"])
    assert b.cls == "memory-bound"
    assert b.roofline and b.roofline.dram_bytes > 10 * 2 * 4 * 2**26


def test_fma_loop_is_compute_bound_at_the_roof(kernels: dict[str, KernelProfile]) -> None:
    b = classify(kernels["fma_heavy"])
    assert b.cls == "compute-bound" and b.confidence > 0.9
    r = b.roofline
    assert r is not None and r.arithmetic_intensity > r.ridge_point
    # 2^22 threads x 4096 FFMA x 2 FLOP = 34.4 GFLOP in 533 us: ~64.5 TFLOPS of 66.9
    assert r.flops == pytest.approx(2 * 4096 * 2**22, rel=0.001)
    assert 60 < r.achieved_tflops < 67 and r.fraction_of_roofline > 0.9


def test_missing_speed_of_light_is_said(kernels: dict[str, KernelProfile]) -> None:
    k = kernels["fma_heavy"].model_copy(update={"sm_throughput_pct": None})
    b = classify(k)
    assert b.confidence == 0 and "SpeedOfLight" in b.reasoning


def test_tiny_launch_with_idle_units_is_launch_limited() -> None:
    """P06's tiny grid (8 blocks on 132 SMs) leaves both units idle: the launch shape explains it."""
    light = load_profile(FIX.parent / "planted" / "06-tiny-grid" / "light.ncu-rep", top_lines=0)
    k = next(k for k in light.kernels if k.name.startswith("tiny_grid_map"))
    assert (k.waves_per_sm or 0) < 1 and max(k.sm_throughput_pct or 0, k.memory_throughput_pct or 0) < 10
    assert classify(k).cls == "launch/tail-limited"


def test_a_unit_at_its_peak_outranks_the_launch_shape() -> None:
    """The class follows where the time goes: P09 saxpy_float4 (recorded: memory at 89% of its peak) given 0.2
    waves per SM and 3 us (values stated here, not recorded) stays memory-bound, not launch/tail-limited; with its
    units idle (stated: memory 20%, compute 5%) the same launch is launch/tail-limited."""
    light = load_profile(FIX.parent / "planted" / "09-scalar-loads" / "light.ncu-rep", top_lines=0)
    k = next(k for k in light.kernels if k.name.startswith("saxpy_float4"))
    k = k.model_copy(update={"waves_per_sm": 0.2, "duration_ns": 3000.0})
    assert (k.memory_throughput_pct or 0) >= 85
    assert classify(k).cls == "memory-bound"
    idle = k.model_copy(update={"memory_throughput_pct": 20.0, "sm_throughput_pct": 5.0})
    assert classify(idle).cls == "launch/tail-limited"


def test_one_unit_near_its_peak_names_the_class_even_close_to_the_other() -> None:
    """A unit at or over 60% of its peak with the other under 60% is the limiter even when they are within 10
    points (values stated: memory 64%, compute 57%, P11 gather_independent otherwise as recorded)."""
    light = load_profile(FIX.parent / "planted" / "11-pointer-chase" / "light.ncu-rep", top_lines=0)
    k = next(k for k in light.kernels if k.name.startswith("gather_independent"))
    assert classify(k).cls == "latency-bound"  # recorded: memory 57%, compute 26%
    assert classify(k.model_copy(update={"memory_throughput_pct": 64.0, "sm_throughput_pct": 57.0})).cls \
        == "memory-bound"
    assert classify(k.model_copy(update={"memory_throughput_pct": 57.0, "sm_throughput_pct": 64.0})).cls \
        == "compute-bound"


# ------------------------------------------------------------------------------------------ second planted suite
def test_both_units_busy_through_the_lsu_pipe_is_one_limit() -> None:
    """Case 40 (recorded: memory 93% and compute 91% of peak, the LSU pipe at 92%, 76M shared-memory instructions
    against 0.5M global loads): the SM side is the memory side's own instructions, so one limit and not "mixed";
    shared-memory instructions make it compute-bound. Stated: the same with global loads outnumbering them is
    memory-bound; with the LSU pipe at 40% (a math pipe carries the SM) it is mixed; without the counts, mixed."""
    k = _planted2.kernel("40-patch-diffusion-sweeps", "diffuse_block_barriers")
    assert min(k.sm_throughput_pct or 0, k.memory_throughput_pct or 0) > 85
    b = classify(k)
    assert b.cls == "compute-bound" and "shared-memory instructions" in b.reasoning
    assert any(e.metric == LSU_PIPE and e.value and e.value > 90 for e in b.evidence)
    shared = sum(k.num(m) or 0 for m in SHARED_INST)
    glob = {m: MetricValue(value=2 * shared) for m in GLOBAL_INST}
    assert classify(k.model_copy(update={"metrics": {**k.metrics, **glob}})).cls == "memory-bound"
    math = {LSU_PIPE: MetricValue(value=40.0)}
    assert classify(k.model_copy(update={"metrics": {**k.metrics, **math}})).cls == "mixed"
    bare = {m: v for m, v in k.metrics.items() if m not in REFINE_METRICS}
    assert classify(k.model_copy(update={"metrics": bare})).cls == "mixed"


def test_both_units_busy_through_the_sm_data_path_is_one_limit() -> None:
    """Case 117 (recorded: memory 91% and compute 81% of peak, but the schedulers issue in 33% of the cycles and the
    LSU pipe runs at 16%: 16-byte loads move many bytes for each instruction): the SM figure is its data path
    carrying the global traffic, so memory-bound. Stated: issue at 60% (a pipe could carry the figure) is mixed;
    without the issue figure, mixed."""
    k = _planted2.kernel("117-healthy-star-join-bucket-probe", "join_probe_pairs")
    b = classify(k)
    assert b.cls == "memory-bound" and "data path" in b.reasoning
    assert any(e.metric == ISSUE_ACTIVE and e.value is not None and e.value < 40 for e in b.evidence)
    busy = {ISSUE_ACTIVE: MetricValue(value=60.0)}
    assert classify(k.model_copy(update={"metrics": {**k.metrics, **busy}})).cls == "mixed"
    bare = {m: v for m, v in k.metrics.items() if m != ISSUE_ACTIVE}
    assert classify(k.model_copy(update={"metrics": bare})).cls == "mixed"


def test_the_deep_stage_measures_what_tells_one_limit_from_two() -> None:
    assert set(REFINE_METRICS) <= set(stage2_plan(["mixed"]).metrics)
    assert set(REFINE_METRICS) <= set(stage2_plan(["launch/tail-limited", "mixed"]).metrics)


def test_a_partial_last_wave_with_idle_units_is_tail_limited() -> None:
    """Case 42 (recorded: 165 blocks, one per SM, 1.25 waves; compute and memory near 22%; theoretical occupancy
    25%): the partial wave leaves 37.5% of the SM time idle, which the launch shape explains before occupancy.
    Stated: 2 whole waves is occupancy-limited; a unit at 85% of its peak keeps its class (a block left alone
    in a tail runs faster when its units were the limit: the tail costs little)."""
    k = _planted2.kernel("42-walker-tail-wave", "walk_small_blocks")
    assert k.waves_per_sm == pytest.approx(1.25, abs=0.01)
    b = classify(k)
    assert b.cls == "launch/tail-limited" and "about 38%" in b.reasoning
    assert classify(k.model_copy(update={"waves_per_sm": 2.0})).cls == "occupancy-limited"
    assert classify(k.model_copy(update={"sm_throughput_pct": 85.0})).cls == "compute-bound"


def test_a_tail_behind_saturated_blocks_is_tail_limited() -> None:
    """Case 61 (recorded: 185 blocks of 1024 threads, one per SM, 1.40 waves; compute at 68% of its peak over the
    whole run, yet the schedulers issue in 98% of the cycles their SM is active): the SMs have no slack while
    their blocks run, so the 30% of SM time the partial wave leaves idle is what is left to win. Stated: a
    smaller tail (1.8 waves, 10% idle) or two whole waves leave it compute-bound; the same figures on the memory
    side with DRAM near its peak are memory-bound (DRAM is shared: fewer SMs can keep it busy)."""
    k = _planted2.kernel("61-saturated-tail-blocks", "series_wide_blocks")
    assert k.waves_per_sm == pytest.approx(1.40, abs=0.01)
    b = classify(k)
    assert b.cls == "launch/tail-limited" and "98%" in b.reasoning and "about 30%" in b.reasoning
    assert classify(k.model_copy(update={"waves_per_sm": 1.8})).cls == "compute-bound"
    assert classify(k.model_copy(update={"waves_per_sm": 2.0})).cls == "compute-bound"
    swapped = {"sm_throughput_pct": k.memory_throughput_pct, "memory_throughput_pct": k.sm_throughput_pct}
    dram = {"dram__throughput.avg.pct_of_peak_sustained_elapsed": MetricValue(value=k.sm_throughput_pct)}
    assert classify(k.model_copy(update={**swapped, "metrics": {**k.metrics, **dram}})).cls == "memory-bound"


def test_a_tail_behind_busy_shared_memory_is_tail_limited() -> None:
    """Case 72 (recorded: 191 blocks, one per SM by their 128 KB tables, 1.45 waves; the memory side at 71% over
    the run, all of it the SM's own shared-memory traffic, DRAM idle; the schedulers issue in 50% of the active
    cycles): over the 72% of the SM time the SMs are busy their shared memory runs at about 98% of its peak, so
    the tail is the time left: launch/tail-limited. Stated: with DRAM at 71% (the memory figure then DRAM's),
    memory-bound."""
    k = _planted2.kernel("72-lookup-tail-blocks", "lookup_wide_blocks")
    b = classify(k)
    assert b.cls == "launch/tail-limited" and "L1/shared-memory units" in b.reasoning
    dram = {"dram__throughput.avg.pct_of_peak_sustained_elapsed": MetricValue(value=k.memory_throughput_pct)}
    assert classify(k.model_copy(update={"metrics": {**k.metrics, **dram}})).cls == "memory-bound"


@pytest.mark.parametrize(("waves", "idle"), [(1.25, 37.5), (1.0, 0.0), (3.5, 12.5), (0.5, None), (4.5, None),
                                             (None, None)])
def test_tail_idle_share(waves: float | None, idle: float | None) -> None:
    assert tail_idle_pct(waves) == (pytest.approx(idle) if idle is not None else None)
