"""Causes before symptoms, opportunities whatever the class, and no matrix-product advice for kernels that are
not products (issue 29), over recorded H100 captures: the planted suite's Nsight Compute reports
(tests/fixtures/planted), the CUPTI collector's runs of the same programs (tests/fixtures/collector) and
three-kernels.cu (tests/fixtures/ncu). Where a case changes a recorded value, its docstring states the value."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import _planted2
import pytest

from kernelscope.heuristics import REGISTRY, merge, run_rules
from kernelscope.heuristics.classify import classify
from kernelscope.heuristics.compute import FADD_RATE, FFMA, FFMA_RATE, FMUL_RATE, GLOBAL_LD, SHARED_LD, mac_share_pct
from kernelscope.heuristics.pipeline import diagnose_kernels, merge_profiles, rank_for_class
from kernelscope.measure.collector import collected_profile, load_collected
from kernelscope.measure.ncu import load_profile
from kernelscope.models import KernelProfile, KernelSassStats, MetricValue, SassResult
from kernelscope.models.profile import POLL_INST

FIX = Path(__file__).parent / "fixtures"
FP64_PIPE = "sm__inst_executed_pipe_fp64.avg.pct_of_peak_sustained_active"
XU_PIPE = "sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active"
MIO = "smsp__average_warps_issue_stalled_mio_throttle_per_issue_active.ratio"
DRAM_PCT = "dram__throughput.avg.pct_of_peak_sustained_elapsed"


@cache
def _report(path: Path) -> tuple[KernelProfile, ...]:
    return tuple(load_profile(path).kernels)


def planted(case: str, kernel: str) -> KernelProfile:
    """A planted kernel's light and deep reports merged, as analyze's rules stage reads them."""
    d = FIX / "planted" / case
    light, deep = (next(k for k in _report(d / f"{s}.ncu-rep") if k.name.startswith(kernel)) for s in ("light", "deep"))
    return merge_profiles(light, deep)


@cache
def sass(case: str) -> dict[str, KernelSassStats]:
    return {k.mangled_name: k for k in SassResult.model_validate_json((FIX / "planted" / case / "sass.json")
                                                                      .read_text()).kernels}


def with_metrics(k: KernelProfile, **metrics: float) -> KernelProfile:
    return k.model_copy(update={"metrics": {**k.metrics, **{m: MetricValue(value=v) for m, v in metrics.items()}}})


# ------------------------------------------------------------------------------------------ causes and symptoms
def test_fp64_use_is_the_cause_of_special_function_pressure() -> None:
    """three-kernels fma_heavy with its FP64 pipe at 45% and its XU pipe at 55% (stated; not in the report): a float
    kernel promoted to double, whose conversions fill the XU pipe. The FP64 finding leads and carries the XU
    finding's evidence; with the FP64 pipe idle, the XU finding stands alone."""
    base = next(k for k in _report(FIX / "ncu" / "three-kernels.ncu-rep") if k.name.startswith("fma_heavy"))
    promoted = with_metrics(base, **{FP64_PIPE: 45.0, XU_PIPE: 55.0})
    raw = {f.rule for f in run_rules("ncu", promoted)}
    assert {"compute.fp64-pipe", "compute.special-functions"} <= raw  # both rules fire on their own
    [d] = diagnose_kernels([promoted])
    top = d.findings[0]
    assert top.rule == "compute.fp64-pipe" and "compute.special-functions" in top.explains
    assert all(f.rule != "compute.special-functions" for f in d.findings)
    assert any(e.metric == XU_PIPE for e in top.evidence) and "merged here" in top.diagnosis
    [alone] = diagnose_kernels([with_metrics(base, **{FP64_PIPE: 0.0, XU_PIPE: 55.0})])
    assert any(f.rule == "compute.special-functions" and not f.explains for f in alone.findings)


@pytest.mark.parametrize(("case", "kernel", "cause"), [
    ("01-strided-copy", "strided_copy", "memory.uncoalesced-global-access"),
    ("04-register-limited-occupancy", "scale_sum_early_coefs", "occupancy.register-limited"),
    ("07-ffma-matmul", "wmma_matmul", "occupancy.register-limited"),
])
def test_the_dominant_stall_merges_into_the_finding_that_explains_it(case: str, kernel: str, cause: str) -> None:
    """Recorded kernels whose dominant stall (long scoreboard, lg throttle) a specific finding explains: the generic
    stall finding fires, but the answer shows it only inside the cause's finding, which leads."""
    k = planted(case, kernel)
    raw = run_rules("ncu", k, context={"sass": sass(case)})
    stall = next(f for f in raw if f.rule == "stalls.dominant-stall-reason")
    assert f"stalls.dominant-stall-reason:{stall.topic}" in REGISTRY[cause].explains
    merged = merge(raw)
    assert all(f.rule != "stalls.dominant-stall-reason" for f in merged)
    host = next(f for f in merged if f.rule == cause)
    assert "stalls.dominant-stall-reason" in host.explains
    assert any(e.metric.startswith("smsp__average_warps_issue_stalled_") for e in host.evidence)


def test_scalar_loads_at_the_dram_roof_are_a_note() -> None:
    """P09 saxpy_scalar (recorded: DRAM at 83% of its peak with 32-bit loads; its float4 twin ran 1.07x faster):
    the bytes set the time, so the scalar-load finding is a note (info) carrying the DRAM figure, and as a note it
    takes no symptom in. Stated: with DRAM at 60% the same kernel gets the warning, which absorbs the dominant
    stall it explains."""
    k = planted("09-scalar-loads", "saxpy_scalar")
    [f] = REGISTRY["memory.non-vectorized-access"].run(k)
    assert f.severity == "info" and "not time" in f.diagnosis and any(e.metric == DRAM_PCT for e in f.evidence)
    below = with_metrics(k, **{DRAM_PCT: 60.0})
    merged = merge(run_rules("ncu", below, context={"sass": sass("09-scalar-loads")}))
    host = next(f for f in merged if f.rule == "memory.non-vectorized-access")
    assert host.severity == "warning" and "stalls.dominant-stall-reason" in host.explains


def _mio_bound(k: KernelProfile) -> KernelProfile:
    return with_metrics(k.model_copy(update={"stall_reasons": {"mio_throttle": 12.0, "long_scoreboard": 2.0,
                                                               "selected": 1.0}}), **{MIO: 12.0})


def test_mio_throttle_advice_fits_what_the_kernel_issues() -> None:
    """The same stall (mio_throttle at 12 cycles per issue, 80% of stalls: stated) on P09 saxpy_scalar, which
    allocates no shared memory and runs no MUFU work (recorded), and on P02 transpose_conflicted, whose tiles live
    in shared memory (recorded): only the latter is told to change its shared-memory accesses."""
    def advice(case: str, kernel: str) -> str:
        k = _mio_bound(planted(case, kernel))
        found = run_rules("ncu", k, context={"sass": sass(case)})
        f = next(f for f in found if f.rule == "stalls.dominant-stall-reason")
        assert f.topic == "mio_throttle"
        return " ".join(x.action for x in f.fixes)

    no_shared = advice("09-scalar-loads", "saxpy_scalar")
    assert "shared" not in no_shared.replace("no shared memory", "") and "MUFU" not in no_shared
    assert "shared-memory accesses" in advice("02-transpose-bank-conflicts", "transpose_conflicted")


# ------------------------------------------------------------------------------------------ tensor cores
def test_an_fma_product_limited_by_memory_still_gets_the_tensor_core_finding() -> None:
    """P07 ffma_matmul (recorded: a tiled FP32 product, compute-bound) made a naive one limited by memory (stated:
    no shared loads, two global loads per warp FMA, memory at 85% and compute at 30% of peak): the class is
    memory-bound, and the tensor-core finding is there and leads."""
    k = planted("07-ffma-matmul", "ffma_matmul")
    warp_fma = (k.num(FFMA) or 0) / 32
    naive = with_metrics(k, **{SHARED_LD: 0.0, GLOBAL_LD: 2 * warp_fma}).model_copy(
        update={"memory_throughput_pct": 85.0, "sm_throughput_pct": 30.0})
    assert classify(naive).cls == "memory-bound"
    [d] = diagnose_kernels([naive], context={"sass": sass("07-ffma-matmul")})
    assert d.findings[0].rule == "compute.tensor-cores-unused" and d.findings[0].severity == "high"
    assert "naive product" in d.findings[0].diagnosis


def test_a_half_precision_product_on_scalar_fmas_is_recognised() -> None:
    """The same kernel with its FMAs in half precision (stated: no FFMA executed; the SASS's 1024 FFMA counted as
    HFMA2): the half FMAs, estimated from the SASS, make the product."""
    k = planted("07-ffma-matmul", "ffma_matmul")
    st = dict(sass("07-ffma-matmul"))
    name = k.mangled_name
    ops = dict(st[name].opcodes)
    ops["HFMA2"], ops["FFMA"] = ops.get("HFMA2", 0) + ops.pop("FFMA"), 0
    st[name] = st[name].model_copy(update={"opcodes": ops})
    found = REGISTRY["compute.tensor-cores-unused"].run(with_metrics(k, **{FFMA: 0.0}), context={"sass": st})
    assert found and "half-precision" in found[0].diagnosis


def _collected(case: str) -> list[KernelProfile]:
    return collected_profile(load_collected(FIX / "collector" / f"{case}.jsonl")).kernels


@pytest.mark.parametrize("case", sorted(p.stem for p in (FIX / "collector").glob("*.jsonl")))
def test_tensor_core_advice_only_for_matrix_products(case: str) -> None:
    """Over every planted kernel as the CUPTI collector measured it (every rule family's metrics): FMA recurrences
    on registers (P03, P05, P06: FFMA 63-95% of instructions) and streaming FMAs (P04, P09 saxpy_float4: FFMA
    29%, one load per FMA, but 0.2 FLOP per DRAM byte) are not products; only P07's tiled FFMA GEMM is. The SASS
    rule stays silent on the same kernels' SASS unless shared-memory tiles feed the FMAs."""
    st = sass(case)
    for k in _collected(case):
        fired = REGISTRY["compute.tensor-cores-unused"].run(k, context={"sass": st})
        assert bool(fired) == (k.name.startswith("ffma_matmul")), (k.name, fired)
        static = REGISTRY["sass.no-tensor-cores-on-mma-like"].run(st[k.mangled_name])
        assert bool(static) == (k.name.startswith("ffma_matmul")), (k.name, static)


def test_a_static_fp64_finding_names_the_cause_of_measured_xu_pressure() -> None:
    """The SASS of a float kernel with a double promotion (recorded: tests/fixtures/sass/fp64_mix.cubin, F2F
    conversions around an FP64 instruction) and a profile of the same kernel whose FP64 pipe is nearly idle but
    whose XU pipe runs at 55% (stated: three-kernels fma_heavy's report with those two values and the cubin's kernel
    name): the FP64 pipe rule measured its claim and is silent, yet the static FP64 finding stays, leads and carries
    the XU finding, because the promotion's conversions are what fills the XU pipe."""
    from kernelscope.tools.sass import sass_for_cubin_bytes

    st = sass_for_cubin_bytes((FIX / "sass" / "fp64_mix.cubin").read_bytes()).kernels[0]
    base = next(k for k in _report(FIX / "ncu" / "three-kernels.ncu-rep") if k.name.startswith("fma_heavy"))
    k = with_metrics(base, **{FP64_PIPE: 2.0, XU_PIPE: 55.0}).model_copy(update={"mangled_name": st.mangled_name})
    static = REGISTRY["sass.fp64-in-kernel"].run(st)
    assert static and not REGISTRY["compute.fp64-pipe"].run(k)
    [d] = diagnose_kernels([k], extra={st.mangled_name: static})
    assert d.findings[0].rule == "sass.fp64-in-kernel" and "compute.special-functions" in d.findings[0].explains


def test_streaming_kernels_launched_together_are_fusion_candidates() -> None:
    """P09's program (recorded light and deep reports), its launch counts stated as 10 per kernel, as a loop running
    both would give: each SAXPY kernel is named as the other's fusion candidate (info: the profile shows the shape,
    not the data flow). With the counts as recorded (once each) there is none."""
    from kernelscope.heuristics.pipeline import diagnose_stages

    d = FIX / "planted" / "09-scalar-loads"
    light, deep = load_profile(d / "light.ncu-rep"), load_profile(d / "deep.ncu-rep")
    totals = {k.mangled_name: (10, 10 * (k.duration_ns or 0.0)) for k in light.kernels}
    diags, _ = diagnose_stages(light, deep, totals=totals)
    for k in diags:
        f = next(f for f in k.findings if f.rule == "memory.fusion-candidate")
        other = next(x for x in diags if x is not k)
        assert f.severity == "info" and other.name.split("(")[0] in f.diagnosis
    diags, _ = diagnose_stages(light, deep)
    assert all(f.rule != "memory.fusion-candidate" for k in diags for f in k.findings)


def test_on_chip_reuse_without_multiply_accumulates_is_no_product() -> None:
    """Case 40, a diffusion stencil swept 24 times in shared memory (recorded: FMA-pipe work fed by shared loads,
    each DRAM byte reused many times, but FFMA only 40% of the FP32 arithmetic: its values are summed with FADD):
    no tensor-core finding. Stated: the same kernel with its adds counted as FFMA is still no product, its DRAM
    bytes feeding 14 FLOPs each (under the FP32 ridge, 20 on an H100); with a quarter of that traffic too, it is
    taken for one. Case 41, a 1x1 convolution on scalar FMAs (recorded: FFMA 100% of the FP32 arithmetic, 88
    FLOPs per DRAM byte), keeps the finding."""
    rule = REGISTRY["compute.tensor-cores-unused"]
    stencil = _planted2.kernel("40-patch-diffusion-sweeps", "diffuse_block_barriers")
    assert mac_share_pct(stencil) is not None and mac_share_pct(stencil) < 50  # type: ignore[operator]
    assert not rule.run(stencil)
    rates = {m: stencil.num(m) or 0.0 for m in (FFMA_RATE, FADD_RATE, FMUL_RATE)}
    as_macs = with_metrics(stencil, **{FFMA_RATE: sum(rates.values()), FADD_RATE: 0.0, FMUL_RATE: 0.0})
    assert not rule.run(as_macs)
    quarter = {"dram_bytes_read": (stencil.dram_bytes_read or 0) / 4,
               "dram_bytes_write": (stencil.dram_bytes_write or 0) / 4}
    assert rule.run(as_macs.model_copy(update=quarter))
    conv = _planted2.kernel("41-pointwise-conv-scalar", "conv1x1_thread_per_output")
    [f] = rule.run(conv)
    assert any(e.metric == "ffma_share_of_fp32_arithmetic_pct" and e.value == 100.0 for e in f.evidence)


def test_a_healthy_compute_bound_kernel_gets_notes_not_warnings() -> None:
    """Case 44, an all-pairs N-body (recorded: issue active 91%, FFMA 34% of the thread instructions but FP32
    arithmetic with its adds and multiplies about 69%; the XU pipe at 42% for one rsqrtf per interaction, the FMA
    pipe at 73%): the issue-bound and special-function findings are notes. Stated: without the adds and
    multiplies the issue slots look spent on overhead (warning); with the XU pipe at 80%, busier than the FMA
    pipe, it limits (warning)."""
    k = _planted2.kernel("44-healthy-nbody-tiles", "nbody_accel")
    [issue] = REGISTRY["compute.issue-bound"].run(k)
    [xu] = REGISTRY["compute.special-functions"].run(k)
    assert issue.severity == "info" and "floating-point arithmetic" in issue.diagnosis
    assert xu.severity == "info" and "not what limits" in xu.diagnosis
    [issue] = REGISTRY["compute.issue-bound"].run(with_metrics(k, **{FADD_RATE: 0.0, FMUL_RATE: 0.0}))
    assert issue.severity == "warning" and "Only 34%" in issue.diagnosis
    [xu] = REGISTRY["compute.special-functions"].run(with_metrics(k, **{XU_PIPE: 80.0}))
    assert xu.severity == "warning"
    assert not [f for f in diagnose_kernels([k])[0].findings if f.severity != "info"]


def test_scalar_loads_of_a_scan_at_the_dram_roof_are_a_note() -> None:
    """Case 45, a warp-shuffle scan (recorded: 4-byte loads, DRAM at 87%, global loads 5% of the instructions): no
    finding. Stated: with loads at 15% of the instructions, a note (the DRAM roof), not a warning."""
    k = _planted2.kernel("45-healthy-warp-scan", "scan_segments")
    rule = REGISTRY["memory.non-vectorized-access"]
    assert not rule.run(k)
    issued = k.num("smsp__inst_executed.sum") or 0.0
    [f] = rule.run(with_metrics(k, **{"smsp__sass_inst_executed_op_global_ld.sum": 0.15 * issued}))
    assert f.severity == "info"


def test_scalar_loads_that_are_a_small_share_of_the_work_are_not_reported() -> None:
    """Case 50, a shared-memory histogram (recorded: uchar4 loads, 4 bytes per thread per instruction, but global
    loads 5.9% of the warp instructions: four shared atomics per load dominate): wider loads could not matter, and
    no finding is raised. Stated: with global loads at 15% of the instructions, the warning is back."""
    k = _planted2.kernel("50-healthy-smem-histogram", "histogram_private")
    rule = REGISTRY["memory.non-vectorized-access"]
    assert k.global_load_sectors_per_request == 4.0 and not rule.run(k)
    issued = k.num("smsp__inst_executed.sum") or 0.0
    [f] = rule.run(with_metrics(k, **{"smsp__sass_inst_executed_op_global_ld.sum": 0.15 * issued}))
    assert f.severity == "warning" and any(e.metric == "global_loads_share_of_instructions_pct" for e in f.evidence)


# ------------------------------------------------------------------------------------------ waits that cost nothing
def test_a_stall_on_the_limiting_unit_or_hidden_by_issue_is_a_note() -> None:
    """Fixed twins of the second suite as recorded: 02's warp-per-row softmax waits on memory (long scoreboard)
    with the memory side at 79% of its peak, the unit its class names; 09's chunked segment sum waits on memory
    while the schedulers issue in 85% of cycles (other warps hide it): both notes. Stated: the softmax with its
    memory side at 45% and 09 with issue at 50% get the warning."""
    rule = REGISTRY["stalls.dominant-stall-reason"]
    soft = _planted2.kernel("02-naive-softmax", "softmax_warp_per_row")
    [f] = rule.run(soft)
    assert f.severity == "info" and "that unit's limit" in f.diagnosis
    [f] = rule.run(soft.model_copy(update={"memory_throughput_pct": 45.0}))
    assert f.severity in ("warning", "high")
    seg = _planted2.kernel("09-ragged-segments", "segsum_warp_per_chunk")
    [f] = rule.run(seg)
    assert f.severity == "info" and "hide the wait" in f.diagnosis
    [f] = rule.run(with_metrics(seg, **{"smsp__issue_active.avg.pct_of_peak_sustained_active": 50.0}))
    assert f.severity in ("warning", "high")


def test_wasted_sectors_in_a_compute_bound_kernel_are_a_note() -> None:
    """27's fixed twin (recorded: half of its global sectors excess, compute at 90% of peak and memory at 22%):
    the bandwidth it wastes is not what it needs, a note. Stated: memory at 70% makes it the warning again."""
    rule = REGISTRY["memory.uncoalesced-global-access"]
    k = _planted2.kernel("27-tiny-grid-divergent", "parity_wide_grid")
    [f] = rule.run(k)
    assert f.severity == "info" and "compute-bound" in f.diagnosis
    [f] = rule.run(k.model_copy(update={"memory_throughput_pct": 70.0}))
    assert f.severity == "high"


def test_lanes_lost_to_predication_are_divergence() -> None:
    """Case 62, a tree scan whose levels test (tid + 1) % (2d) (recorded: all 32 threads active per instruction, 14
    of them not predicated off; no divergent branch: the compiler predicated every level; the LSU pipe at 85%):
    warp divergence, high, on the down-sweep's line (its loads, swap and add lose the most lane slots). Its twin,
    a shuffle scan, raises nothing. Stated: the same lanes on an SM with issue to spare (compute at 40%) are a
    note."""
    rule = REGISTRY["control.warp-divergence"]
    k = _planted2.kernel("62-interleaved-tree-scan", "scan_tree_interleaved")
    assert k.num("smsp__sass_branch_targets_threads_divergent.sum") == 0
    [f] = rule.run(k)
    assert f.severity == "high" and "predicated off" in f.diagnosis and (f.line or "").endswith("planted.cu:52")
    assert not rule.run(_planted2.kernel("62-interleaved-tree-scan", "scan_warp_shuffle"))
    [f] = rule.run(k.model_copy(update={"sm_throughput_pct": 40.0}))
    assert f.severity == "info" and "issue slots nothing else needs" in f.diagnosis


def test_a_barrier_ahead_of_dram_bound_streaming_is_a_note() -> None:
    """Case 58, a segment reversal through shared memory (recorded: 37% of the stalls at its one barrier, DRAM at
    89% of its peak): the warps wait there for loads DRAM already delivers near its peak, so the barrier finding
    is a note and the kernel draws no warning. Stated: with DRAM at 50%, a warning. Case 40 (the barriers of 24
    sweeps in shared memory, DRAM idle) keeps its warning."""
    rule = REGISTRY["stalls.barrier-heavy"]
    k = _planted2.kernel("58-healthy-tile-reverse", "reverse_segments")
    [f] = rule.run(k)
    assert f.severity == "info" and "DRAM runs at 89%" in f.diagnosis
    assert not [f for f in diagnose_kernels([k])[0].findings if f.severity != "info"]
    [f] = rule.run(with_metrics(k, **{"dram__throughput.avg.pct_of_peak_sustained_elapsed": 50.0}))
    assert f.severity in ("warning", "high")
    [f] = rule.run(_planted2.kernel("40-patch-diffusion-sweeps", "diffuse_block_barriers"))
    assert f.severity in ("warning", "high")


def test_few_warps_that_already_fill_every_issue_slot_are_a_note() -> None:
    """Case 61 (recorded: 39 registers, one block of 1024 threads per SM, theoretical occupancy 50%; the schedulers
    issue in 98% of the cycles the SM is active): more warps could not issue more, so the register-limited finding
    is a note, and the tail is the top finding. Stated: with issue at 50%, a warning."""
    rule = REGISTRY["occupancy.register-limited"]
    k = _planted2.kernel("61-saturated-tail-blocks", "series_wide_blocks")
    [f] = rule.run(k)
    assert f.severity == "info" and "98% of the cycles" in f.diagnosis
    assert diagnose_kernels([k])[0].findings[0].rule == "launch.tail-effect"
    [f] = rule.run(with_metrics(k, **{"smsp__issue_active.avg.pct_of_peak_sustained_active": 50.0}))
    assert f.severity == "warning"


def test_a_filter_under_the_fp32_ridge_is_no_product() -> None:
    """Case 63, a 7x7 blur with register tiles (recorded: FFMA 51% of the thread instructions, 4 per shared load,
    all multiply-accumulates, 14 FLOPs per DRAM byte): with its FMAs free it would still wait on DRAM (the FP32
    ridge is 20 FLOPs per byte on an H100), so tensor cores cannot pay: no finding. Case 64, a textbook tiled
    SGEMM (51 FLOPs per byte), gets it, and says where the ridge is. Stated: the blur with a third of its DRAM
    traffic (42 FLOPs per byte) would be taken for a product."""
    rule = REGISTRY["compute.tensor-cores-unused"]
    blur = _planted2.kernel("63-healthy-blur7-register-tiles", "blur7_tiles")
    assert not rule.run(blur)
    [f] = rule.run(_planted2.kernel("64-batched-sgemm-textbook", "sgemm_tiled_batched"))
    assert "ridge point is 20" in f.diagnosis
    assert any(e.metric == "fma_flops_per_dram_byte" and e.threshold == 20.0 for e in f.evidence)
    third = {"dram_bytes_read": (blur.dram_bytes_read or 0) / 3, "dram_bytes_write": (blur.dram_bytes_write or 0) / 3}
    assert rule.run(blur.model_copy(update=third))


def test_a_tail_class_puts_the_tail_before_occupancy() -> None:
    """Case 68, Newton refinements (recorded: 160 blocks, one per SM by their 120 KB of shared memory, 1.21 waves
    leaving 39% of the SM time idle; theoretical occupancy 37.5%; compute at 38% of its peak): launch/tail-
    limited, and the tail, which names the class, ranks first although low occupancy's estimated impact is
    larger. Stated: the same findings on an occupancy-limited kernel put occupancy first."""
    k = _planted2.kernel("68-newton-tail-blocks", "newton_wide_blocks")
    [d] = diagnose_kernels([k])
    assert d.bottleneck.cls == "launch/tail-limited"
    ranked = [f.rule for f in d.findings]
    assert ranked[:2] == ["launch.tail-effect", "occupancy.low-theoretical"]
    tail, occ = (next(f for f in d.findings if f.rule == r) for r in ranked[:2])
    assert (occ.impact or 0) > (tail.impact or 0)
    assert [f.rule for f in rank_for_class([tail, occ], "occupancy-limited")] == ranked[1::-1]


def test_a_tail_behind_blocks_at_their_roof_outranks_their_roof() -> None:
    """Case 72, random table lookups in shared memory (recorded: 1.45 waves leaving 28% of the SM time idle; the
    L1/shared units at 71% of their peak over the run, about 98% while the SMs are busy; bank conflicts on 72% of
    the wavefronts): the blocks run at their roof, so the tail is the time left to win. The tail finding is high,
    like the bank conflicts', and leads as the finding that names the class. Stated: with the memory side at 50%
    over the run the blocks have slack, and the tail is a warning behind the conflicts."""
    rule = REGISTRY["launch.tail-effect"]
    k = _planted2.kernel("72-lookup-tail-blocks", "lookup_wide_blocks")
    [f] = rule.run(k)
    assert f.severity == "high" and "time left to win" in f.diagnosis
    [d] = diagnose_kernels([k])
    assert d.bottleneck.cls == "launch/tail-limited"
    assert [g.rule for g in d.findings[:2]] == ["launch.tail-effect", "memory.shared-bank-conflicts"]
    slack = k.model_copy(update={"memory_throughput_pct": 50.0})
    [f] = rule.run(slack)
    assert f.severity == "warning"
    assert diagnose_kernels([slack])[0].findings[0].rule == "memory.shared-bank-conflicts"


def test_resident_warps_that_already_issue_every_cycle_are_a_note() -> None:
    """Case 80, powf per pixel (recorded: achieved occupancy 65% of a possible 100%; the schedulers issue in 84% of
    the active cycles, the SM at 84% of its peak): the warps resident already fill the issue slots, so more of
    them would not issue more; achieved-below-theoretical is a note and the issue-bound finding leads. Stated:
    with issue at 40% and the SM at 40%, a warning. Case 09 (10% achieved, issue 20%) keeps its warning."""
    rule = REGISTRY["occupancy.achieved-below-theoretical"]
    k = _planted2.kernel("80-gamma-powf-per-pixel", "gamma_powf_each_pixel")
    [f] = rule.run(k)
    assert f.severity == "info" and "84%" in f.diagnosis
    assert diagnose_kernels([k])[0].findings[0].rule == "compute.issue-bound"
    idle = with_metrics(k.model_copy(update={"sm_throughput_pct": 40.0}),
                        **{"smsp__issue_active.avg.pct_of_peak_sustained_active": 40.0})
    [f] = rule.run(idle)
    assert f.severity == "warning"
    [f] = rule.run(_planted2.kernel("09-ragged-segments", "segsum_warp_per_segment"))
    assert f.severity == "warning"


def test_atomics_are_counted_where_they_serialize() -> None:
    """Case 102, a bounding box merged by CAS loops (recorded: 11.6K atomic requests from the SMs, 4.7M warp
    instructions of streaming loads, but 323K CAS requests at L2, the busiest slice taking 40x the average): each
    CAS instruction's lanes update one address one by one, so the L2 count is the work that serializes, and the
    contention finding leads. Stated: counted at the SMs only (the L2 requests equal to them), 0.25 per 100 warp
    instructions, under the rule's 1: no finding."""
    rule = REGISTRY["memory.atomic-contention"]
    k = _planted2.kernel("102-lidar-bounds-cas-storm", "bounds_thread_cas")
    [f] = rule.run(k)
    assert "at L2" in f.diagnosis and f.severity == "high"
    assert diagnose_kernels([k])[0].findings[0].rule == "memory.atomic-contention"
    cas = "lts__t_requests_srcunit_tex_op_atom_dot_cas"
    scale = 11566.0 / (k.num(f"{cas}.sum") or 1.0)
    flat = with_metrics(k, **{f"{cas}.{r}": (k.num(f"{cas}.{r}") or 0.0) * scale for r in ("sum", "avg", "max")})
    assert not rule.run(flat)


def test_atomics_queued_on_an_idle_memory_system_are_contention() -> None:
    """Case 114 (recorded): 12M atomicMax updates on Zipf-popular items. The busiest L2 slice takes only 3.7x the
    average of 22M reduction requests (under the rule's 4x), but 69% of stall cycles are warps on the full LSU
    queue (lg_throttle) while the memory system runs at 12% of its peak, and the reductions are half of what the
    SMs send to global memory: the contention finding leads and supersedes the lg-throttle stall finding. Its
    twin (hot items in shared memory, 1.15x imbalance) gets none. Stated: the same kernel with its memory system
    at 60% (the queue could be bytes, not serialized updates): no finding below the 4x imbalance."""
    rule = REGISTRY["memory.atomic-contention"]
    k = _planted2.kernel("114-interaction-last-seen-max", "last_seen_global_max")
    [f] = rule.run(k)
    assert f.severity == "high" and "not the bytes" in f.diagnosis
    assert any(e.metric.startswith("lg_throttle") and e.value >= 40 for e in f.evidence)
    ranked = [x.rule for x in diagnose_kernels([k])[0].findings]
    assert ranked[0] == "memory.atomic-contention" and "stalls.dominant-stall-reason" not in ranked
    assert not rule.run(_planted2.kernel("114-interaction-last-seen-max", "last_seen_hot_items_smem"))
    assert not rule.run(k.model_copy(update={"memory_throughput_pct": 60.0}))


def test_barrier_waits_on_other_blocks_are_named_as_such() -> None:
    """Case 106 (recorded, healthy): run-length encoding with a decoupled look-back. 56% of stall cycles are at
    barriers, and warp 0's polling lines (volatile loads, back-off NANOSLEEP) hold samples that, times the 7 other
    warps of the block, account for 65% of them: the note says the block waits on earlier blocks, and no
    barrier-heavy warning is left. Stated: the memory system at 20% (blocks nearly serialized): a warning; the
    polling counters removed: barrier-heavy at high, as before. Case 109 (barrier-bound Cholesky, no polling):
    barrier-heavy, no cross-block note."""
    k = _planted2.kernel("106-healthy-rle-run-ends", "rle_run_ends")
    found = {f.rule: f for f in diagnose_kernels([k])[0].findings}
    assert "stalls.barrier-heavy" not in found
    note = found["stalls.cross-block-wait"]
    assert note.severity == "info" and note.line and note.line.split("  ")[0].endswith(":62")
    assert "earlier blocks" in note.diagnosis
    [f] = REGISTRY["stalls.cross-block-wait"].run(k.model_copy(update={"memory_throughput_pct": 20.0}))
    assert f.severity == "warning" and "serialized" in f.diagnosis
    bare = k.model_copy(update={"source_lines": [s.model_copy(update={"counters": {
        c: v for c, v in s.counters.items() if c != POLL_INST}}) for s in k.source_lines]})
    assert not REGISTRY["stalls.cross-block-wait"].run(bare)
    assert [f.severity for f in REGISTRY["stalls.barrier-heavy"].run(bare)] == ["high"]
    chol = _planted2.kernel("109-batched-cholesky-sync-steps", "cholesky_elementwise")
    assert not REGISTRY["stalls.cross-block-wait"].run(chol)
    assert [f.severity for f in REGISTRY["stalls.barrier-heavy"].run(chol)] == ["high"]


def test_what_counts_as_polling_other_blocks() -> None:
    """The SASS nvcc 13 emits for sm_90 (checked by compiling each form): a volatile load is STRONG.SYS, an
    acquire load a STRONG.GPU load followed by CCTL.IVALL, __nanosleep a NANOSLEEP; __ldcg is a STRONG.GPU load on
    its own, which streams data and is no poll."""
    from kernelscope.measure.sourcemap import polls

    code = {0: "LDG.E.64.STRONG.SYS R4, desc[UR6][R2.64]", 16: "NANOSLEEP 0x8",
            32: "LDG.E.STRONG.GPU R0, desc[UR4][R6.64]", 48: "FADD R1, R0, R0",
            64: "LD.E.STRONG.GPU R12, desc[UR4][R10.64]", 80: "CCTL.IVALL",
            96: "@!P0 LDG.E.STRONG.SYS R8, desc[UR4][R8.64]", 112: "LDG.E.128.CONSTANT R4, desc[UR6][R2.64]"}
    assert {pc for pc in code if polls(pc, lambda q: code.get(q, ""))} == {0, 16, 64, 96}


# nvcc 13, sm_90, -O3 (cuobjdump -sass; addresses as it prints them): a relaxed-load spin-wait on a flag, and a
# grid-stride sum over __ldcg loads
SPIN_RELAXED = """\
0080 LDG.E.STRONG.GPU R5, desc[UR4][R2.64] ;
0090 ISETP.NE.AND P0, PT, R5, RZ, PT ;
00a0 @!P0 BRA 0x80 ;
00b0 LDC.64 R2, c[0x0][0x218] ;
00c0 LEA R2, P0, R7, R2, 0x2 ;
00d0 LEA.HI.X R3, R7, R3, RZ, 0x2, P0 ;
00e0 STG.E desc[UR4][R2.64], R5 ;
00f0 EXIT ;"""
STREAM_CG = """\
0120 IMAD.WIDE R2, R11, 0x4, R6 ;
0130 LDG.E.STRONG.GPU R2, desc[UR4][R2.64] ;
0140 IADD3 R11, R0, R11, RZ ;
0150 ISETP.GE.AND P0, PT, R11, UR7, PT ;
0160 FADD R9, R2, R9 ;
0170 @!P0 BRA 0x120 ;
0180 BSYNC B0 ;
0190 STG.E desc[UR4][R4.64], R9 ;
01a0 EXIT ;"""


def _listing(text: str) -> dict[int, str]:
    return {int(a, 16): code for a, code in (ln.split(" ", 1) for ln in text.splitlines())}


def test_a_load_its_own_loop_waits_on_is_a_poll() -> None:
    """A STRONG.GPU load (ld.relaxed, ld.cg) polls where a branch of the loop around it tests the loaded value;
    __ldcg in a grid-stride loop, whose branches test the index, streams."""
    from kernelscope.measure.sourcemap import spins_on_load

    spin, stream = _listing(SPIN_RELAXED), _listing(STREAM_CG)
    assert spins_on_load(0x80, lambda pc: spin.get(pc, ""))
    assert not spins_on_load(0x130, lambda pc: stream.get(pc, ""))
    assert not spins_on_load(0xe0, lambda pc: spin.get(pc, ""))  # a store writes no register the loop tests


SPIN_PACKED_64 = """\
0080 LDG.E.64.STRONG.GPU R4, desc[UR4][R2.64] ;
0090 LOP3.LUT R6, R5, 0xc0000000, RZ, 0xc0, !PT ;
00a0 ISETP.NE.AND P0, PT, R6, RZ, PT ;
00b0 @!P0 BRA 0x80 ;
00c0 STG.E desc[UR4][R8.64], R4 ;
00d0 EXIT ;"""
STREAM_CARRY = """\
0080 LDG.E.STRONG.GPU R4, desc[UR4][R2.64] ;
0090 ISETP.NE.AND P3, PT, R4, RZ, PT ;
00a0 IADD3 R8, P3, R8, 0x1, RZ ;
00b0 FADD R9, R4, R9 ;
00c0 ISETP.GE.AND P0, PT, R8, UR7, PT ;
00d0 @!P0 BRA 0x80 ;
00e0 EXIT ;"""


def test_polling_reads_registers_and_predicates_as_the_chain_walk_does() -> None:
    """spins_on_load shares the chained-load walk's operand reader: a 64-bit load writes both halves (a look-back
    word packs its flag in the high half), and a carry-out predicate (``IADD3 R8, P3, ...``) is written, not read,
    so a loop counter that follows it does not inherit the loaded value's taint."""
    from kernelscope.measure.sourcemap import spins_on_load

    packed, carry = _listing(SPIN_PACKED_64), _listing(STREAM_CARRY)
    assert spins_on_load(0x80, lambda pc: packed.get(pc, ""))
    assert not spins_on_load(0x80, lambda pc: carry.get(pc, ""))


CAS_POLL = """\
0ab0 ISETP.NE.U32.AND P5, PT, R31, RZ, PT ;
0ac0 BSSY B0, 0xb50 ;
0ad0 ISETP.NE.AND.EX P5, PT, RZ, RZ, PT, P5 ;
0ae0 @P5 BRA 0xb40 ;
0af0 CS2R R4, SRZ ;
0b00 CS2R R6, SRZ ;
0b10 ATOMG.E.CAS.64.STRONG.GPU PT, R4, [R24], R4, R6 ;
0b20 IMAD.MOV.U32 R30, RZ, RZ, R4 ;
0b30 IMAD.MOV.U32 R31, RZ, RZ, R5 ;
0b40 BSYNC B0 ;
0b50 ISETP.NE.U32.AND P5, PT, R31, RZ, PT ;
0b60 VOTE.ANY P5, !P5 ;
0b70 @P5 BRA 0xab0 ;
0b80 EXIT ;"""
CAS_RETRY = """\
0100 FMNMX R6, R4, R9, !PT ;
0110 ATOMG.E.CAS.STRONG.GPU PT, R6, [R2.64], R4, R6 ;
0120 ISETP.NE.AND P0, PT, R6, R4, PT ;
0130 IMAD.MOV.U32 R4, RZ, RZ, R6 ;
0140 @P0 BRA 0x100 ;
0150 EXIT ;"""
TICKET_LOOP = """\
09f0 IMAD.WIDE R2, R0, 0x4, R10 ;
0a00 LDG.E.CONSTANT R3, desc[UR6][R2.64] ;
0a10 HFMA2.MMA R14, -RZ, RZ, 0, 5.9604644775390625e-08 ;
0a20 MOV R15, 0x0 ;
0a30 IMAD.WIDE R6, R0, 0x4, R16 ;
0a40 LDG.E.CONSTANT R7, desc[UR6][R6.64] ;
0a50 IMAD.WIDE R4, R3, 0x8, R12 ;
0a60 ATOMG.E.ADD.64.STRONG.GPU PT, R4, desc[UR6][R4.64], R14 ;
0a70 IADD3 R0, R0, UR4, RZ ;
0a80 LEA R8, P0, R4, UR10, 0x2 ;
0a90 LEA.HI.X R9, R4, UR11, R5, 0x2, P0 ;
0aa0 STG.E desc[UR6][R8.64], R7 ;
0ab0 ISETP.GE.AND P0, PT, R0, UR8, PT ;
0ac0 @!P0 BRA 0x9f0 ;
0ad0 EXIT ;"""


def test_an_atomic_that_reads_a_status_word_in_a_spin_is_a_poll() -> None:
    """Look-back polled with ``atomicCAS(p, 0, 0)`` (dev 175, its SASS): the CAS returns the status word, the loop
    leaves on it, and its operands are zeros set anew each round (CS2R writes a pair), so it reads: a poll. A CAS
    retry loop computes its next swap from the value it got back (an update), and a grid-stride loop that takes a
    slot with atomicAdd leaves on its index (the carry-out of the slot's address computation is overwritten by
    the loop's compare): neither polls."""
    from kernelscope.measure.sourcemap import atomic_read_poll, polls

    poll, retry, ticket = _listing(CAS_POLL), _listing(CAS_RETRY), _listing(TICKET_LOOP)
    assert atomic_read_poll(0xb10, lambda pc: poll.get(pc, "")) and polls(0xb10, lambda pc: poll.get(pc, ""))
    assert not atomic_read_poll(0x110, lambda pc: retry.get(pc, ""))
    assert not polls(0xa60, lambda pc: ticket.get(pc, ""))


def test_a_push_scatter_backed_up_on_its_atomics_is_contention() -> None:
    """Dev 165 (recorded, wave 18): a HITS push whose FP64 atomics follow four loads each (20% of the requests) on
    moderately skewed targets (busiest slice 2.6x the average). A loaded value's wait says nothing here, but 27% of
    the stall cycles are the queue and completion of outgoing requests (lg_throttle, drain, membar) with memory at
    23%: contention, named on the atomic's line. Without those waits, no finding."""
    k = _planted2.kernel("165-hits-authority-push-f64", "hits_auth_push")
    [f] = REGISTRY["memory.atomic-contention"].run(k)
    assert f.severity == "high" and f.line and f.line.endswith(":55")
    assert any(e.metric == "lg_throttle+membar+drain stall share" and e.value >= 20 for e in f.evidence)
    calm = k.model_copy(update={"stall_reasons": {r: (0.0 if r in ("lg_throttle", "drain", "membar") else v)
                                                  for r, v in k.stall_reasons.items()}})
    assert not REGISTRY["memory.atomic-contention"].run(calm)


def test_bank_conflicts_nobody_waits_on_are_a_note() -> None:
    """Dev 175 (recorded, healthy): 44% of its shared wavefronts are conflict replays, but its warps spend 5% of
    their stalls on shared memory: a note. Dev 03's conflicted SGEMM waits 81% there: high."""
    [quiet] = REGISTRY["memory.shared-bank-conflicts"].run(
        _planted2.kernel("175-healthy-pivot-partition-cas", "partition_cas"))
    [loud] = REGISTRY["memory.shared-bank-conflicts"].run(_planted2.kernel("03-sgemm-bank-conflicts", "sgemm_conf"))
    assert quiet.severity == "info" and loud.severity == "high"


def test_the_barrier_after_a_look_back_is_a_wait_on_other_blocks() -> None:
    """Cases 126 and 127 (recorded, dev, healthy): decoupled look-backs polled by acquire loads (cuda::atomic_ref,
    inline ld.acquire.gpu). Warp 0's polling lines alone explain under half the barrier wait (it also sums its
    predecessors), but the barrier that ends the polling phase holds most of it (the reader's
    BARRIER_AFTER_POLL): a note, no barrier-heavy warning. The same counters removed: barrier-heavy at high."""
    from kernelscope.heuristics.stalls import waits_on_other_blocks
    from kernelscope.models.profile import BARRIER_AFTER_POLL

    for case, name in (("126-healthy-ema-lookback", "ema_lookback"),
                       ("127-healthy-pivot-partition-lookback", "pivot_partition")):
        k = _planted2.kernel(case, name)
        share = waits_on_other_blocks(k)
        assert share is not None and share[0] >= 0.8
        found = {f.rule: f for f in diagnose_kernels([k])[0].findings}
        assert "stalls.barrier-heavy" not in found and found["stalls.cross-block-wait"].severity == "info"
        bare = k.model_copy(update={"source_lines": [s.model_copy(update={"counters": {
            c: v for c, v in s.counters.items() if c != BARRIER_AFTER_POLL}}) for s in k.source_lines]})
        share = waits_on_other_blocks(bare)
        assert share is not None and share[0] < 0.5
        assert [f.severity for f in REGISTRY["stalls.barrier-heavy"].run(bare)] == ["high"]


def test_which_barriers_end_a_polling_phase() -> None:
    from kernelscope.measure.sourcemap import barriers_after_polls

    assert barriers_after_polls([0x100, 0x400, 0x800], [0x200, 0x300]) == {0x400}
    assert barriers_after_polls([0x100, 0x400], [0x500]) == set()  # polls after the last barrier: none waits there
    assert barriers_after_polls([0x400], [0x10]) == {0x400}
    assert barriers_after_polls([], [0x10]) == set()


def test_a_chain_of_blocks_is_a_warning_only_while_the_gpu_idles() -> None:
    """Case 129 (recorded, dev): each block waits for the previous block's whole result; memory and compute at
    2%: a warning. Its twin (a decoupled look-back) waits too, with compute at 52% and memory at 39%: a note."""
    rule = REGISTRY["stalls.cross-block-wait"]
    [bad] = rule.run(_planted2.kernel("129-varint-encode-chained-wait", "varint_encode_chained"))
    assert bad.severity == "warning" and "serialized" in bad.diagnosis
    [twin] = rule.run(_planted2.kernel("129-varint-encode-chained-wait", "varint_encode_lookback"))
    assert twin.severity == "info" and "overlaps" in twin.diagnosis


def test_a_busy_special_function_pipe_on_an_idle_sm_is_a_note() -> None:
    """Case 127 (recorded): ballot/popc counting keeps the XU pipe at 41%, its busiest math pipe, while the SM runs
    at 42% of its peak (warps wait at barriers): a note. Stated: the SM at 80% makes it the limiter (a warning);
    case 17 (expf per element, XU 70%, SM 71%) keeps its warning."""
    rule = REGISTRY["compute.special-functions"]
    k = _planted2.kernel("127-healthy-pivot-partition-lookback", "pivot_partition")
    [f] = rule.run(k)
    assert f.severity == "info" and "wait" in f.diagnosis
    assert [f.severity for f in rule.run(k.model_copy(update={"sm_throughput_pct": 80.0}))] == ["warning"]
    assert [f.severity for f in rule.run(_planted2.kernel("17-gmm-loglik-expf", "gmm_loglik_direct"))] == ["warning"]


def test_a_hot_slice_of_a_minor_atomic_kind_is_no_contention() -> None:
    """Case 121 (recorded, dev, healthy): 8.4M slot atomics over a 2M-cell table (even over the L2 slices) and one
    FP64 reduction a block into one total (32K requests, 42x the average on its slice). The busiest slice carries
    16% more atomics than the average one over both kinds: no contention. Case 119 (Zipf object counters, one kind):
    still contention."""
    rule = REGISTRY["memory.atomic-contention"]
    assert not rule.run(_planted2.kernel("121-healthy-md-step-cell-slots", "nve_step_bin"))
    assert rule.run(_planted2.kernel("119-cdn-egress-zipf-objects", "egress_per_object"))


def test_atomics_spread_over_many_warm_addresses_are_contention() -> None:
    """Case 119 (recorded, dev): Zipf object counters, 15.1M L2 reductions in 2.5 ms, memory at 8%, 83% of stall
    cycles waiting on memory; each L2 slice applies 0.075 updates per ns. Stated with its hottest slice at 1.5x the
    average (the warm objects spread evenly over the slices): still contention, named by the slices' slow rate. The
    same at 60% memory, or with the updates applied 4x faster, is not; the privatized twin (0.5 per ns, memory at
    61%) and the healthy cell-slot kernel of case 121 (0.32 per ns, memory at 68%) stay silent."""
    rule = REGISTRY["memory.atomic-contention"]
    k = _planted2.kernel("119-cdn-egress-zipf-objects", "egress_per_object")
    red = "lts__t_requests_srcunit_tex_op_red"
    avg = k.num(f"{red}.avg") or 0.0
    even = k.model_copy(update={"metrics": {**k.metrics, f"{red}.max": MetricValue(value=1.5 * avg)}})
    [f] = rule.run(even)
    assert f.severity == "high" and "warm addresses" in f.diagnosis
    rate = next(e for e in f.evidence if e.metric == "l2_atomics_per_slice_per_ns")
    assert rate.value == pytest.approx(avg / (k.duration_ns or 1.0), rel=1e-3) and rate.value < 0.1
    assert not rule.run(even.model_copy(update={"memory_throughput_pct": 60.0}))
    assert not rule.run(even.model_copy(update={"duration_ns": (k.duration_ns or 0.0) / 4}))
    assert not rule.run(_planted2.kernel("119-cdn-egress-zipf-objects", "egress_per_object_hot"))
    assert not rule.run(_planted2.kernel("121-healthy-md-step-cell-slots", "nve_step_bin"))


def test_atomics_whose_results_the_threads_wait_on_are_queued_too() -> None:
    """Cases 132 and 134 (recorded, dev): a knowledge-graph index whose threads claim slots with atomicAdd and use
    the returned cursor (91% of stall cycles on the long scoreboard, hottest slice 2.8x the average, memory 33%),
    and a count-min sketch of a Zipf stream (lg_throttle, drain and long scoreboard 59%, 3.0x, memory 24%). The wait
    on an atomic's result counts with the queue's: contention, which supersedes the dependent-load finding the
    scoreboard stalls drew. Stated: memory at 60%, silent."""
    rule = REGISTRY["memory.atomic-contention"]
    for case, name in (("132-kg-tail-index-cursor-hubs", "tail_index_scatter"),
                       ("134-countmin-zipf-flows", "cms_update_global")):
        k = _planted2.kernel(case, name)
        [f] = rule.run(k)
        assert f.severity == "high" and "their results" in f.diagnosis
        assert diagnose_kernels([k])[0].findings[0].rule == "memory.atomic-contention"
        assert not rule.run(k.model_copy(update={"memory_throughput_pct": 60.0}))


def test_divergence_on_an_sm_that_waits_is_a_note() -> None:
    """Case 106 (recorded, dev, healthy): run-length encoding with a look-back; data-dependent run heads leave 22.9
    of 32 threads an instruction, but the SM runs at 37% of its peak while its warps wait on other blocks: a note.
    Stated: the SM at 80% makes it a warning. Case 14 (a data-dependent branch, the SM at 94%) stays high."""
    rule = REGISTRY["control.warp-divergence"]
    k = _planted2.kernel("106-healthy-rle-run-ends", "rle_run_ends")
    [f] = rule.run(k)
    assert f.severity == "info" and "something else" in f.diagnosis
    assert [f.severity for f in rule.run(k.model_copy(update={"sm_throughput_pct": 80.0}))] == ["warning"]
    assert [f.severity for f in rule.run(_planted2.kernel("14-data-dependent-branch", "activate_branchy"))] == ["high"]


def test_lanes_updating_one_address_are_contention() -> None:
    """Case 146 (recorded, dev): GPS fixes in trip order add to their 500 m cell, about 16 lanes of a warp on one
    address. Its 1.6M reduction instructions touch 0.8M sectors a line, but L2 receives 45M updates, 19 for each
    sector, and runs at 83% of its peak on them while DRAM idles at 10%: contention, though no slice stands out.
    Its run-length twin (one update a run) and the healthy warp-aggregated case 148 get one update a sector:
    silent. Stated: the L2 busy with reads instead (atomics a minority of its work, memory busy), silent."""
    rule = REGISTRY["memory.atomic-contention"]
    k = _planted2.kernel("146-trip-speed-grid-runs", "speed_grid_atomic")
    [f] = rule.run(k)
    per = next(e for e in f.evidence if e.metric == "l2_atomic_updates_per_sector")
    assert f.severity == "high" and per.value is not None and 15 < per.value < 25 and "one after another" in f.diagnosis
    assert diagnose_kernels([k])[0].findings[0].rule == "memory.atomic-contention"
    reads = {"lts__t_sectors_srcunit_tex_op_read.sum": MetricValue(value=1e9)}
    assert not rule.run(k.model_copy(update={"metrics": {**k.metrics, **reads}}))
    assert not rule.run(_planted2.kernel("146-trip-speed-grid-runs", "speed_grid_runs"))
    assert not rule.run(_planted2.kernel("148-healthy-instance-depth-stats", "instance_stats_warp"))


def test_an_atomic_lines_own_scattered_sectors_merge_into_its_contention() -> None:
    """Case 165 (recorded, dev): a HITS push scatters float64 atomicAdds over hub authorities; line 55's excess L2
    sectors (17.5M of its 23.6M) all belong to its atomics. The uncoalesced finding there is the contention's own
    scatter (topic 'atomic'), merged into the contention finding, which leads. Case 170's fixed twin (dev) scatters
    with plain stores on line 73 (5% of that line's excess atomic): a layout finding of its own."""
    push = _planted2.kernel("165-hits-authority-push-f64", "hits_auth_push")
    [u] = REGISTRY["memory.uncoalesced-global-access"].run(push)
    assert u.topic == "atomic" and u.line is not None and u.line.split()[0].endswith(":55")
    [d] = diagnose_kernels([push])
    lead = d.findings[0]
    assert lead.rule == "memory.atomic-contention" and "memory.uncoalesced-global-access" in lead.explains
    assert not [f for f in d.findings if f.rule == "memory.uncoalesced-global-access"]
    [t] = REGISTRY["memory.uncoalesced-global-access"].run(
        _planted2.kernel("170-lidar-pillar-max-height", "pillar_max_height_checked"))
    assert t.topic is None and t.line is not None and t.line.split()[0].endswith(":73")
