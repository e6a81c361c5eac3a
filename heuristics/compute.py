"""Compute-family rules over Nsight Compute profiles: tensor cores left idle on FMA-heavy work, the FP64
pipe, special functions, and instruction-issue-bound kernels."""

from __future__ import annotations

from collections.abc import Iterable

from kernelscope.heuristics.memory import hottest_line
from kernelscope.heuristics.registry import Run, rule
from kernelscope.models import Evidence, Finding, Fix, KernelProfile

FMA_PIPE = "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active"
TENSOR_PIPE = "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active"
FP64_PIPE = "sm__inst_executed_pipe_fp64.avg.pct_of_peak_sustained_active"
XU_PIPE = "sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active"
ISSUE = "smsp__issue_active.avg.pct_of_peak_sustained_active"
FFMA = "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum"
THREAD_INST = "smsp__thread_inst_executed.sum"
SHARED_LD = "smsp__sass_inst_executed_op_shared_ld.sum"
GLOBAL_LD = "smsp__sass_inst_executed_op_global_ld.sum"


@rule("compute.tensor-cores-unused", family="tensor", scope="ncu",
      description="Matrix-product-like FP32 FMA work runs on the FMA pipe while the tensor cores idle.",
      thresholds={"min_fma_pipe_pct": 30.0, "max_tensor_pipe_pct": 1.0, "min_ffma_share_pct": 25.0,
                  "max_ffma_per_shared_load": 64.0, "max_ffma_per_global_load": 4.0},
      metrics=(FMA_PIPE, TENSOR_PIPE, FFMA, THREAD_INST, SHARED_LD, GLOBAL_LD),
      supersedes=("sass.no-tensor-cores-on-mma-like",), context=('sass',), explains=("compute.issue-bound",))
def _tensor(k: KernelProfile, run: Run) -> Iterable[Finding]:
    fma, tensor, ffma, total = k.num(FMA_PIPE), k.num(TENSOR_PIPE), k.num(FFMA), k.num(THREAD_INST)
    if fma is None or tensor is None or ffma is None or not total:
        return
    ffma_share = 100.0 * ffma / total
    th = run.th
    if fma < th["min_fma_pipe_pct"] or tensor > th["max_tensor_pipe_pct"] or ffma_share < th["min_ffma_share_pct"]:
        return
    # A product streams its operands: a tiled one through shared memory, a naive one straight from
    # global memory (about one load per FMA). FMA chains on values held in registers (recurrences,
    # polynomials) do neither and are not matrix products.
    reuse, gld = k.num(SHARED_LD) or 0.0, k.num(GLOBAL_LD) or 0.0
    warp_ffma = ffma / 32.0
    tiled = reuse > 0 and warp_ffma / reuse <= run.th["max_ffma_per_shared_load"]
    naive = gld > 0 and warp_ffma / gld <= run.th["max_ffma_per_global_load"]
    if not (tiled or naive):
        return
    sass = run.ctx.get("sass", {}).get(k.mangled_name)
    ev = [Evidence(metric=FMA_PIPE, value=round(fma, 1), threshold=run.th["min_fma_pipe_pct"], unit="%", source="ncu",
                   kernel=k.name),
          Evidence(metric=TENSOR_PIPE, value=round(tensor, 2), threshold=run.th["max_tensor_pipe_pct"], unit="%",
                   source="ncu", kernel=k.name),
          Evidence(metric="ffma_share_of_thread_instructions_pct", value=round(ffma_share, 1),
                   threshold=run.th["min_ffma_share_pct"], unit="%", source="ncu", kernel=k.name)]
    if sass is not None:
        ev.append(Evidence(metric="tensor_core_instructions", value=sum(sass.tensor_core_instructions.values()),
                           source="sass", kernel=k.name))
    line = hottest_line(k, "smsp__pcsamp_sample_count")
    yield run.finding(
        kernel=k.name, line=line, impact=0.9,
        severity="high" if (k.sm_throughput_pct or 0) >= 50 else "warning",
        title="FMA-bound matrix work with idle tensor cores",
        diagnosis=(f"{k.name}: FFMA is {ffma_share:.0f}% of executed thread instructions, the FMA pipe is busy "
                   f"{fma:.0f}% of active cycles and the tensor pipe {tensor:.1f}%"
                   + (" with operands reused from shared memory (a tiled product)" if reuse else "")
                   + ". On an H100 the FP16/BF16 tensor cores deliver ~15x the FP32 FMA rate (TF32 ~7x)."),
        evidence=ev,
        fixes=[Fix(action="Compute the product on tensor cores: WMMA (nvcuda::wmma 16x16x16, FP16/BF16 in, FP32 "
                          "accumulate), mma.sync PTX, or on sm_90 wgmma/CUTLASS/cuBLAS.",
                   expected_effect="5-15x on the product itself"),
               Fix(action="If inputs must stay FP32, use TF32 tensor cores where the accuracy policy allows.",
                   expected_effect="up to ~7x over FFMA")],
    )


@rule("compute.fp64-pipe", family="compute", scope="ncu",
      description="The FP64 pipe is busy in a kernel (often from unintended double-precision promotions).",
      thresholds={"min_fp64_pipe_pct": 10.0}, metrics=(FP64_PIPE,), supersedes=("sass.fp64-in-kernel",),
      explains=("compute.special-functions", "sass.mufu-heavy"))  # F2F conversions of float<->double promotions
def _fp64(k: KernelProfile, run: Run) -> Iterable[Finding]:
    v = k.num(FP64_PIPE)
    if v is None or v < run.th["min_fp64_pipe_pct"]:
        return
    yield run.finding(
        kernel=k.name, severity="warning" if v < 40 else "high",
        impact=min(1.0, v / 100), title="FP64 pipe busy",
        line=hottest_line(k, "smsp__pcsamp_warps_issue_stalled_math_pipe_throttle",
                          "smsp__pcsamp_warps_issue_stalled_wait"),
        diagnosis=(f"{k.name}: the FP64 pipe issues {v:.0f}% of its peak. FP64 runs at half the FP32 rate on an "
                   "H100 and 1/64 on consumer GPUs; double literals (1.0 instead of 1.0f) and double math "
                   "functions promote float code silently."),
        evidence=[Evidence(metric=FP64_PIPE, value=round(v, 1), threshold=run.th["min_fp64_pipe_pct"], unit="%",
                           source="ncu", kernel=k.name)],
        fixes=[Fix(action="Use float literals (1.0f), float functions (expf, sqrtf) and -Xptxas -warn-double-usage "
                          "to find promotions.", expected_effect="the math moves to the FP32 pipe")],
    )


@rule("compute.special-functions", family="compute", scope="ncu",
      description="Transcendentals (MUFU: exp, sin, rsqrt...) keep the XU pipe busy.",
      thresholds={"min_xu_pipe_pct": 40.0}, metrics=(XU_PIPE,), supersedes=("sass.mufu-heavy",))
def _xu(k: KernelProfile, run: Run) -> Iterable[Finding]:
    v = k.num(XU_PIPE)
    if v is None or v < run.th["min_xu_pipe_pct"]:
        return
    yield run.finding(
        kernel=k.name, severity="warning", impact=min(1.0, v / 100),
        title="Special-function (XU) pipe busy",
        diagnosis=(f"{k.name}: the XU pipe (MUFU transcendentals, conversions) runs at {v:.0f}% of peak: it has 1/4 "
                   "of the FMA pipe's throughput, so it limits the kernel."),
        evidence=[Evidence(metric=XU_PIPE, value=round(v, 1), threshold=run.th["min_xu_pipe_pct"], unit="%",
                           source="ncu", kernel=k.name)],
        fixes=[Fix(action="Hoist transcendentals out of loops, use identities (exp(a)*exp(b) = exp(a+b)), or "
                          "polynomial approximations on the FMA pipe.", expected_effect="fewer MUFU instructions"),
               Fix(action="Avoid needless int/float conversions (they also use the XU pipe).",
                   expected_effect="XU pipe freed")],
    )


@rule("compute.issue-bound", family="compute", scope="ncu",
      description="The schedulers issue an instruction almost every cycle: instruction count sets the time.",
      thresholds={"min_issue_pct": 80.0}, metrics=(ISSUE, "smsp__inst_executed.sum"))
def _issue(k: KernelProfile, run: Run) -> Iterable[Finding]:
    v = k.num(ISSUE)
    if v is None or v < run.th["min_issue_pct"]:
        return
    yield run.finding(
        kernel=k.name, severity="warning", impact=0.3,
        title="Instruction-issue bound",
        line=hottest_line(k, "smsp__pcsamp_sample_count"),
        diagnosis=(f"{k.name}: the warp schedulers issue in {v:.0f}% of active cycles, near the one-instruction-per-"
                   "cycle limit: only fewer instructions make it faster."),
        evidence=[Evidence(metric=ISSUE, value=round(v, 1), threshold=run.th["min_issue_pct"], unit="%", source="ncu",
                           kernel=k.name),
                  Evidence(metric="smsp__inst_executed.sum", value=k.num("smsp__inst_executed.sum"), source="ncu",
                           kernel=k.name)],
        fixes=[Fix(action="Cut instructions per result: vector loads, fewer index computations (strength reduction, "
                          "hoisting), unrolling to drop loop overhead, packed half2 math.",
                   expected_effect="time falls with the instruction count"),
               Fix(action="Move matrix-like math to tensor cores.", expected_effect="many FMAs per instruction")],
    )
