"""Every registered rule fires on one input and stays silent on another, both from recorded H100 data.

The inputs are the captures under tests/fixtures: the Nsight Compute reports of the planted suite
(``P<nn>``, deep stage unless named) and of three-kernels.cu, the planted programs' ptxas reports and
SASS statistics, the SASS fixture cubins, and the CUPTI traces. A silent case is, wherever one exists,
the planted kernel's fixed twin. Where no recorded artifact makes a rule fire, the case takes a
recorded input and changes only the fields the rule reads; its ``note`` says which. The table must
cover the registry: a new rule without both cases fails ``test_every_rule_has_both_cases``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import _planted2
import pytest

from kernelscope.heuristics import REGISTRY, SCOPES
from kernelscope.heuristics.pipeline import merge_profiles
from kernelscope.measure.ncu import load_profile
from kernelscope.measure.summary import summarize
from kernelscope.measure.timeline import load_cupti
from kernelscope.models import (
    CompileResult,
    KernelProfile,
    KernelResources,
    KernelSassStats,
    MetricValue,
    SassResult,
    TraceSummary,
)
from kernelscope.tools.sass import sass_for_cubin_bytes

FIX = Path(__file__).parent / "fixtures"
PLANTED = {p.name[:2]: p for p in (FIX / "planted").iterdir() if p.is_dir()}


# ------------------------------------------------------------------------------------- recorded inputs
@cache
def _report(path: Path) -> tuple[KernelProfile, ...]:
    return tuple(load_profile(path).kernels)


def ncu(case: str, kernel: str, stage: str = "deep") -> KernelProfile:
    """A kernel's first launch in a planted case's report (case "three" is ncu/three-kernels)."""
    path = FIX / "ncu" / "three-kernels.ncu-rep" if case == "three" else PLANTED[case] / f"{stage}.ncu-rep"
    return next(k for k in _report(path) if k.name.split("(")[0] == kernel)


@cache
def _sass(case: str) -> dict[str, KernelSassStats]:
    result = SassResult.model_validate_json((PLANTED[case] / "sass.json").read_text())
    return {k.mangled_name: k for k in result.kernels}


def sass(case: str, kernel: str) -> KernelSassStats:
    return next(k for k in _sass(case).values() if k.name.split("(")[0] == kernel)


@cache
def cubin(name: str) -> KernelSassStats:
    return sass_for_cubin_bytes((FIX / "sass" / f"{name}.cubin").read_bytes()).kernels[0]


@cache
def _ptxas(case: str) -> dict[str, KernelResources]:
    comp = CompileResult.model_validate_json((PLANTED[case] / "compile.json").read_text())
    return {k.mangled_name: k for k in comp.kernels}


def ptxas(case: str, kernel: str) -> KernelResources:
    return next(k for k in _ptxas(case).values() if k.name.split("(")[0] == kernel)


@cache
def trace(name: str) -> tuple[TraceSummary, Any]:
    return summarize(load_cupti(FIX / "trace" / name))


def with_metrics(k: KernelProfile, **metrics: float) -> KernelProfile:
    """``k`` with these ncu metrics set to these values."""
    return k.model_copy(update={"metrics": {**k.metrics, **{m: MetricValue(value=v) for m, v in metrics.items()}}})


def light_launch_context(case: str) -> dict[str, Any]:
    """The launch counts and summed times analyze passes to ncu rules, from a light report's launches."""
    launches = _report(PLANTED[case] / "light.ncu-rep")
    total: Counter[str] = Counter()
    for k in launches:
        total[k.mangled_name] += k.duration_ns or 0.0
    return {"launches": dict(Counter(k.mangled_name for k in launches)), "total_ns": dict(total)}


# ------------------------------------------------------------------------------------- the table
@dataclass(frozen=True)
class Case:
    load: Callable[[], Any]  # the rule's input (one of its scope, or a list for ptxas)
    kernel: str | None = None  # the kernel a firing case's finding names
    context: Callable[[], dict[str, Any]] = dict
    note: str = ""  # the input's origin when it is not a recorded capture as is


FP64_PIPE = "sm__inst_executed_pipe_fp64.avg.pct_of_peak_sustained_active"
XU_PIPE = "sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active"
L2_READ = "lts__t_sectors_srcunit_tex_op_read.sum"


def _l2_reused() -> KernelProfile:
    k = ncu("02", "transpose_conflicted")
    return with_metrics(k, **{L2_READ: 2 * (k.num(L2_READ) or 0)}).model_copy(update={"l2_hit_rate_pct": 30.0})


def _saxpy_pair(launches: int) -> dict[str, Any]:
    """P09's two SAXPY kernels (both stream through DRAM) as the other diagnosed kernels, each launched
    ``launches`` times."""
    pair = {k.mangled_name: k for k in (ncu("09", "saxpy_scalar", "light"), ncu("09", "saxpy_float4", "light"))}
    return {"kernels": pair, "launches": dict.fromkeys(pair, launches), "total_ns": {}}


FIRES: dict[str, Case] = {
    # ncu: memory
    "memory.uncoalesced-global-access": Case(lambda: ncu("three", "copy_strided"), "copy_strided"),
    "memory.dram-saturated": Case(lambda: ncu("01", "strided_copy"), "strided_copy"),
    "memory.shared-bank-conflicts": Case(lambda: ncu("02", "transpose_conflicted"), "transpose_conflicted"),
    "memory.local-memory-traffic": Case(lambda: ncu("03", "spilling_recurrence"), "spilling_recurrence",
                                        context=lambda: {"ptxas": _ptxas("03")}),
    "memory.atomic-contention": Case(lambda: ncu("08", "contended_atomic_sum"), "contended_atomic_sum"),
    "memory.non-vectorized-access": Case(lambda: ncu("01", "coalesced_copy"), "coalesced_copy",
                                         context=lambda: {"sass": _sass("01")}),
    "memory.low-cache-hit-rate": Case(lambda: ncu("11", "chase_dependent"), "chase_dependent"),
    "memory.fusion-candidate": Case(lambda: ncu("09", "saxpy_scalar", "light"), "saxpy_scalar",
                                    context=lambda: _saxpy_pair(10),
                                    note="P09's two SAXPY kernels as if launched 10 times each (recorded: once)"),
    "memory.l2-thrash": Case(_l2_reused, "transpose_conflicted",
                             note="P02 transpose_conflicted with its L2 read sectors doubled and an L2 hit rate of "
                                  "30% (recorded: 51%): data read twice from L2 but fetched once from DRAM"),
    # ncu: compute, control, latency
    "compute.tensor-cores-unused": Case(lambda: merge_profiles(ncu("07", "ffma_matmul", "light"),
                                                               ncu("07", "ffma_matmul")), "ffma_matmul",
                                        context=lambda: {"sass": _sass("07")},
                                        note="P07 ffma_matmul's light and deep reports merged, as analyze does"),
    "compute.fp64-pipe": Case(lambda: with_metrics(ncu("three", "fma_heavy"), **{FP64_PIPE: 45.0}), "fma_heavy",
                              note="three-kernels fma_heavy with the FP64 pipe at 45% (not captured in the report)"),
    "compute.special-functions": Case(lambda: with_metrics(ncu("three", "copy_strided"), **{XU_PIPE: 55.0}),
                                      "copy_strided", note="three-kernels copy_strided with the XU pipe at 55% "
                                                           "(recorded: 1.2%)"),
    "compute.issue-bound": Case(lambda: ncu("three", "fma_heavy"), "fma_heavy"),
    "control.warp-divergence": Case(lambda: ncu("05", "divergent_paths"), "divergent_paths"),
    "latency.dependent-loads": Case(lambda: ncu("11", "chase_dependent"), "chase_dependent"),
    # ncu: launch, occupancy, stalls
    "launch.tiny-grid": Case(lambda: ncu("06", "tiny_grid_map"), "tiny_grid_map"),
    "launch.tail-effect": Case(lambda: ncu("07", "ffma_matmul").model_copy(update={"waves_per_sm": 2.2}),
                               "ffma_matmul", note="P07 ffma_matmul with 2.2 waves per SM (recorded: 3.88)"),
    "launch.many-small-launches": Case(lambda: ncu("12", "slice_scale_bias", "light"), "slice_scale_bias",
                                       context=lambda: light_launch_context("12")),
    "occupancy.low-theoretical": Case(lambda: ncu("04", "scale_sum_early_coefs"), "scale_sum_early_coefs"),
    "occupancy.achieved-below-theoretical": Case(lambda: ncu("06", "tiny_grid_map"), "tiny_grid_map"),
    "occupancy.register-limited": Case(lambda: ncu("04", "scale_sum_early_coefs"), "scale_sum_early_coefs"),
    "stalls.dominant-stall-reason": Case(lambda: ncu("three", "copy_coalesced"), "copy_coalesced"),
    "stalls.barrier-heavy": Case(lambda: ncu("10", "row_stats_tree"), "row_stats_tree"),
    "stalls.cross-block-wait": Case(lambda: _planted2.kernel("106-healthy-rle-run-ends", "rle_run_ends"),
                                    "rle_run_ends", note="the second planted suite's case 106"),
    # sass
    "sass.local-memory": Case(lambda: sass("03", "spilling_recurrence"), "spilling_recurrence"),
    "sass.scalar-global-loads": Case(lambda: sass("03", "registered_recurrence"), "registered_recurrence"),
    "sass.fp64-in-kernel": Case(lambda: cubin("fp64_mix"), "fp64_mix"),
    "sass.no-tensor-cores-on-mma-like": Case(lambda: cubin("naive_sgemm"), "naive_sgemm"),
    "sass.mufu-heavy": Case(lambda: sass("10", "row_stats_tree").model_copy(
        update={"special_function_instructions": 40}), "row_stats_tree",
        note="P10 row_stats_tree's SASS with 40 of its 202 instructions MUFU (recorded: none)"),
    # ptxas
    "ptxas.register-spills": Case(lambda: list(_ptxas("03").values()), "spilling_recurrence"),
    "ptxas.local-memory-stack": Case(lambda: [ptxas("03", "registered_recurrence").model_copy(
        update={"stack_bytes": 64})], "registered_recurrence",
        note="P03 registered_recurrence with a 64-byte stack frame and no spills (recorded: no stack)"),
    "ptxas.register-limited-occupancy": Case(lambda: list(_ptxas("04").values()), "scale_sum_early_coefs",
                                             context=lambda: {"arch": "sm_90"}),
    # trace
    "system.launch-overhead": Case(lambda: trace("many-tiny-launches")[0],
                                   context=lambda: {"facts": trace("many-tiny-launches")[1]}),
    "system.copies-in-loop": Case(lambda: trace("copy-loop-planted")[0],
                                  context=lambda: {"facts": trace("copy-loop-planted")[1]}),
    "system.pageable-copies": Case(lambda: trace("copy-loop-planted")[0],
                                   context=lambda: {"facts": trace("copy-loop-planted")[1]}),
    "system.synchronization": Case(lambda: trace("copy-loop-planted")[0],
                                   context=lambda: {"facts": trace("copy-loop-planted")[1]}),
    "system.gpu-idle": Case(lambda: trace("torch-eager")[0], context=lambda: {"facts": trace("torch-eager")[1]}),
    "system.allocation-churn": Case(lambda: trace("copy-loop-planted")[0],
                                    context=lambda: {"facts": trace("copy-loop-planted")[1]}),
    "system.dominant-kernel": Case(lambda: trace("copy-loop-fixed")[0], "polish",
                                   context=lambda: {"facts": trace("copy-loop-fixed")[1]}),
    "system.copies-not-overlapped": Case(lambda: trace("copy-loop-planted")[0],
                                         context=lambda: {"facts": trace("copy-loop-planted")[1]}),
}

SILENT: dict[str, Case] = {
    "memory.uncoalesced-global-access": Case(lambda: ncu("three", "copy_coalesced")),
    "memory.dram-saturated": Case(lambda: ncu("three", "copy_coalesced")),
    "memory.shared-bank-conflicts": Case(lambda: ncu("02", "transpose_padded")),
    "memory.local-memory-traffic": Case(lambda: ncu("03", "registered_recurrence"),
                                        context=lambda: {"ptxas": _ptxas("03")}),
    "memory.atomic-contention": Case(lambda: ncu("08", "block_reduced_sum")),
    "memory.non-vectorized-access": Case(lambda: ncu("09", "saxpy_float4"), context=lambda: {"sass": _sass("09")}),
    "memory.low-cache-hit-rate": Case(lambda: ncu("09", "saxpy_float4")),
    "memory.l2-thrash": Case(lambda: ncu("02", "transpose_conflicted")),
    "memory.fusion-candidate": Case(lambda: ncu("09", "saxpy_scalar", "light"), context=lambda: _saxpy_pair(1)),
    "compute.tensor-cores-unused": Case(lambda: ncu("07", "wmma_matmul"), context=lambda: {"sass": _sass("07")}),
    "compute.fp64-pipe": Case(lambda: with_metrics(ncu("three", "fma_heavy"), **{FP64_PIPE: 0.0}),
                              note="three-kernels fma_heavy with the FP64 pipe idle, as the CUPTI collector "
                                   "records it for the planted kernels"),
    "compute.special-functions": Case(lambda: ncu("three", "copy_strided")),
    "compute.issue-bound": Case(lambda: ncu("three", "copy_coalesced")),
    "control.warp-divergence": Case(lambda: ncu("05", "uniform_paths")),
    "latency.dependent-loads": Case(lambda: ncu("11", "gather_independent")),
    "launch.tiny-grid": Case(lambda: ncu("06", "wide_grid_map")),
    "launch.tail-effect": Case(lambda: ncu("07", "ffma_matmul")),
    "launch.many-small-launches": Case(lambda: ncu("12", "full_scale_bias", "light"),
                                       context=lambda: light_launch_context("12")),
    "occupancy.low-theoretical": Case(lambda: ncu("04", "scale_sum_late_coefs")),
    "occupancy.achieved-below-theoretical": Case(lambda: ncu("06", "wide_grid_map")),
    "occupancy.register-limited": Case(lambda: ncu("04", "scale_sum_late_coefs")),
    "stalls.dominant-stall-reason": Case(lambda: ncu("three", "fma_heavy")),
    "stalls.barrier-heavy": Case(lambda: ncu("10", "row_stats_shfl")),
    "stalls.cross-block-wait": Case(lambda: ncu("10", "row_stats_tree")),  # barrier-bound, polls no other block
    "sass.local-memory": Case(lambda: sass("03", "registered_recurrence")),
    "sass.scalar-global-loads": Case(lambda: sass("09", "saxpy_float4")),
    "sass.fp64-in-kernel": Case(lambda: cubin("copy_float4")),
    "sass.no-tensor-cores-on-mma-like": Case(lambda: cubin("wmma_gemm")),
    "sass.mufu-heavy": Case(lambda: sass("10", "row_stats_tree")),
    "ptxas.register-spills": Case(lambda: [ptxas("03", "registered_recurrence")]),
    # spilling_recurrence has a 272-byte frame, but of spills: the spill rule speaks
    "ptxas.local-memory-stack": Case(lambda: list(_ptxas("03").values())),
    "ptxas.register-limited-occupancy": Case(lambda: [ptxas("04", "scale_sum_late_coefs")],
                                             context=lambda: {"arch": "sm_90"}),
    "system.launch-overhead": Case(lambda: trace("torch-graph")[0], context=lambda: {"facts": trace("torch-graph")[1]}),
    "system.copies-in-loop": Case(lambda: trace("copy-loop-fixed")[0],
                                  context=lambda: {"facts": trace("copy-loop-fixed")[1]}),
    "system.pageable-copies": Case(lambda: trace("copy-loop-fixed")[0],
                                   context=lambda: {"facts": trace("copy-loop-fixed")[1]}),
    "system.synchronization": Case(lambda: trace("copy-loop-fixed")[0],
                                   context=lambda: {"facts": trace("copy-loop-fixed")[1]}),
    "system.gpu-idle": Case(lambda: trace("torch-graph")[0], context=lambda: {"facts": trace("torch-graph")[1]}),
    "system.allocation-churn": Case(lambda: trace("copy-loop-fixed")[0],
                                    context=lambda: {"facts": trace("copy-loop-fixed")[1]}),
    "system.dominant-kernel": Case(lambda: trace("torch-eager")[0], context=lambda: {"facts": trace("torch-eager")[1]}),
    "system.copies-not-overlapped": Case(lambda: trace("copy-loop-fixed")[0],
                                         context=lambda: {"facts": trace("copy-loop-fixed")[1]}),
}


def test_every_rule_has_both_cases() -> None:
    missing_fire, missing_silent = sorted(set(REGISTRY) - set(FIRES)), sorted(set(REGISTRY) - set(SILENT))
    assert not missing_fire and not missing_silent, (f"rules without a firing case: {missing_fire}; "
                                                     f"without a silent case: {missing_silent}")
    assert set(FIRES) == set(SILENT) == set(REGISTRY), "cases for rules that are not registered"


def _inputs(rid: str, data: Any) -> list[Any]:
    items = data if isinstance(data, list) else [data]
    model = SCOPES[REGISTRY[rid].scope].model
    assert items and all(isinstance(x, model) for x in items), f"{rid}: the case is not {model.__name__} input"
    return items


@pytest.mark.parametrize("rid", sorted(FIRES))
def test_rule_fires(rid: str) -> None:
    case, r = FIRES[rid], REGISTRY[rid]
    data = case.load()
    _inputs(rid, data)
    found = r.run(data, context=case.context())
    assert found, f"{rid} did not fire ({case.note or 'recorded input'})"
    for f in found:
        assert (f.rule, f.family) == (r.id, r.family)
        assert f.title and f.diagnosis and f.evidence and f.fixes
    if case.kernel is not None:
        assert any((f.kernel or "").split("(")[0] == case.kernel for f in found), [f.kernel for f in found]


@pytest.mark.parametrize("rid", sorted(SILENT))
def test_rule_stays_silent(rid: str) -> None:
    case = SILENT[rid]
    data = case.load()
    _inputs(rid, data)
    assert REGISTRY[rid].run(data, context=case.context()) == []
