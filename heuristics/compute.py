"""Compute-family rules over Nsight Compute profiles: tensor cores left idle on FMA-heavy work, the FP64
pipe, special functions, and instruction-issue-bound kernels."""

from __future__ import annotations

from collections.abc import Iterable

from kernelscope.heuristics.classify import ISSUE_ACTIVE, SOL_HIGH_PCT, peaks_for
from kernelscope.heuristics.memory import cost_line, hottest_line
from kernelscope.heuristics.registry import Run, rule
from kernelscope.models import Evidence, Finding, Fix, KernelProfile, KernelSassStats

FMA_PIPE = "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active"
TENSOR_PIPE = "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active"
FP64_PIPE = "sm__inst_executed_pipe_fp64.avg.pct_of_peak_sustained_active"
XU_PIPE = "sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active"
ISSUE = ISSUE_ACTIVE
FFMA = "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum"
THREAD_INST = "smsp__thread_inst_executed.sum"
SHARED_LD = "smsp__sass_inst_executed_op_shared_ld.sum"
GLOBAL_LD = "smsp__sass_inst_executed_op_global_ld.sum"
FFMA_RATE = "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum.per_cycle_elapsed"
FADD_RATE = "smsp__sass_thread_inst_executed_op_fadd_pred_on.sum.per_cycle_elapsed"
FMUL_RATE = "smsp__sass_thread_inst_executed_op_fmul_pred_on.sum.per_cycle_elapsed"


HALF_FMA_OPCODES = ("HFMA2", "HFMA")  # half-precision FMAs on the FMA pipe (scalar or paired)


def fma_work(k: KernelProfile, sass: KernelSassStats | None) -> tuple[float, float] | None:
    """Thread-level FMAs the kernel executed on the FMA pipe, and how many of them are half-precision: FFMA measured,
    HFMA estimated from the SASS's static share of half FMAs times the thread instructions measured (the light
    and deep stages count no half FMAs); None without the counts."""
    ffma, total = k.num(FFMA), k.num(THREAD_INST)
    if ffma is None or not total:
        return None
    half = 0.0
    if sass is not None and sass.instructions:
        half = total * sum(sass.opcodes.get(o, 0) for o in HALF_FMA_OPCODES) / sass.instructions
    return ffma + half, half


def mac_share_pct(k: KernelProfile) -> float | None:
    """FFMA's share of the FP32 arithmetic instructions executed (FFMA, FADD, FMUL); None without the counts."""
    rates = [k.num(m) for m in (FFMA_RATE, FADD_RATE, FMUL_RATE)]
    if any(r is None for r in rates) or not sum(rates):  # type: ignore[arg-type]
        return None
    return 100.0 * rates[0] / sum(rates)  # type: ignore[arg-type,operator]


@rule("compute.tensor-cores-unused", family="tensor", scope="ncu",
      description="A matrix product written with FMAs (FP32 or half, scalar) while the tensor cores idle: FMAs "
                  "fed by streamed operands, with more FLOPs per DRAM byte than the GPU's FP32 ridge point (below "
                  "it a kernel that ran its FMAs for free would still wait on DRAM, so a faster pipe cannot pay: "
                  "filters, stencils and small products stay there), and FP32 arithmetic that is mostly "
                  "multiply-accumulates (not a stencil's or a distance's adds). Reported whatever the kernel's "
                  "class today (an opportunity: a memory-limited naive product gains most from tiling onto tensor "
                  "cores).",
      thresholds={"max_tensor_pipe_pct": 1.0, "min_fma_share_pct": 10.0, "max_ffma_per_shared_load": 64.0,
                  "max_ffma_per_global_load": 4.0, "ridge_flops_per_dram_byte": 20.0, "min_mac_share_pct": 75.0},
      metrics=(FMA_PIPE, TENSOR_PIPE, FFMA, THREAD_INST, SHARED_LD, GLOBAL_LD),  # + the FP32 op rates: light stage
      supersedes=("sass.no-tensor-cores-on-mma-like",), context=('sass',), explains=("compute.issue-bound",))
def _tensor(k: KernelProfile, run: Run) -> Iterable[Finding]:
    th, sass = run.th, run.ctx.get("sass", {}).get(k.mangled_name)
    tensor, total, work = k.num(TENSOR_PIPE), k.num(THREAD_INST), fma_work(k, sass)
    if work is None or not total or (tensor is None and sass is None):
        return
    if (tensor is not None and tensor > th["max_tensor_pipe_pct"]) or (sass is not None and sass.uses_tensor_cores):
        return
    fmas, half = work
    share = 100.0 * fmas / total
    # A product streams its operands (a tiled one through shared memory, a naive one straight from global memory,
    # about one load per FMA) and reuses each byte it fetches many times. FMA chains on values held in registers
    # (recurrences, polynomials) stream nothing; elementwise and matrix-vector kernels reuse nothing.
    lds, gld = k.num(SHARED_LD) or 0.0, k.num(GLOBAL_LD) or 0.0
    warp_fma = fmas / 32.0
    tiled = lds > 0 and warp_fma / lds <= th["max_ffma_per_shared_load"]
    naive = gld > 0 and warp_fma / gld <= th["max_ffma_per_global_load"]
    dram = (k.dram_bytes_read or 0.0) + (k.dram_bytes_write or 0.0)
    intensity = 2.0 * fmas / dram if dram else None
    # reuse enough for a faster pipe to pay: FLOPs per DRAM byte over the FP32 ridge point (the device's peak FP32
    # rate over its DRAM bandwidth; the threshold where its peaks are unknown). Measured DRAM bytes are at least
    # the compulsory ones, so a product's measured intensity never overstates it. Without the DRAM counts, only
    # a tiled product's staging shows reuse
    peaks = peaks_for(k.device)
    ridge = (peaks.fp32_tflops * 1e3 / peaks.dram_gbps) if peaks else th["ridge_flops_per_dram_byte"]
    reused = intensity >= ridge if intensity is not None else tiled
    if share < th["min_fma_share_pct"] or not (tiled or naive) or not reused:
        return
    # a product's arithmetic is multiply-accumulates (a dot product per output); a stencil, a distance or density
    # kernel, a reduction add most of their values with FADD/FMUL. Measured on the FP32 work (half adds are not
    # counted by the profile's op counters, so a half-precision kernel is not judged by it)
    mac = mac_share_pct(k)
    if half < fmas / 2 and mac is not None and mac < th["min_mac_share_pct"]:
        return
    fma = k.num(FMA_PIPE)
    ev = [Evidence(metric="fma_share_of_thread_instructions_pct", value=round(share, 1),
                   threshold=th["min_fma_share_pct"], unit="%", source="ncu", kernel=k.name),
          Evidence(metric="fma_flops_per_dram_byte", value=round(intensity, 1) if intensity is not None else None,
                   threshold=round(ridge, 1), unit="FLOP/B", source="ncu", kernel=k.name),
          Evidence(metric="fma_per_operand_load", value=round(warp_fma / (lds if tiled else gld), 2),
                   threshold=th["max_ffma_per_shared_load" if tiled else "max_ffma_per_global_load"],
                   source="ncu", kernel=k.name),
          Evidence(metric="ffma_share_of_fp32_arithmetic_pct", value=round(mac, 1) if mac is not None else None,
                   threshold=th["min_mac_share_pct"], unit="%", source="ncu", kernel=k.name),
          Evidence(metric=TENSOR_PIPE, value=round(tensor, 2) if tensor is not None else None,
                   threshold=th["max_tensor_pipe_pct"], unit="%", source="ncu", kernel=k.name),
          Evidence(metric=FMA_PIPE, value=round(fma, 1) if fma is not None else None, unit="%", source="ncu",
                   kernel=k.name)]
    if sass is not None:
        ev.append(Evidence(metric="half_fma_instructions_static", value=sum(sass.opcodes.get(o, 0)
                                                                            for o in HALF_FMA_OPCODES), source="sass",
                           kernel=k.name))
    line = hottest_line(k, "smsp__pcsamp_sample_count")
    kind = "half-precision" if half >= fmas / 2 else "FP32"
    yield run.finding(
        kernel=k.name, line=line, impact=0.9, severity="high",
        title="Matrix product on FMAs with idle tensor cores",
        diagnosis=(f"{k.name}: {kind} FMAs are {share:.0f}% of executed thread instructions, fed by "
                   + ("operands reused from shared memory (a tiled product)" if tiled else
                      "operands loaded from global memory about once per FMA (a naive product)")
                   + (f", and each DRAM byte feeds {intensity:.0f} FLOPs (the FP32 ridge point is {ridge:.0f}: past "
                      "it the FMA pipe, not DRAM, is the roof)" if intensity is not None else "")
                   + " (data reuse: a matrix product, not an elementwise or matrix-vector kernel); the tensor pipe "
                   "is idle. On an H100 the FP16/BF16 tensor "
                   "cores deliver ~15x the FP32 FMA rate (TF32 ~7x)"
                   + ("" if tiled else ", and tiling through shared memory (which tensor-core code needs anyway) "
                      "also removes the memory traffic that limits it today") + "."),
        evidence=ev,
        fixes=[Fix(action="Compute the product on tensor cores with tiles staged in shared memory: WMMA "
                          "(nvcuda::wmma 16x16x16, FP16/BF16 in, FP32 accumulate), mma.sync PTX, or on sm_90 "
                          "wgmma/CUTLASS/cuBLAS.",
                   expected_effect="5-15x on the product itself"),
               Fix(action="If inputs must stay FP32, use TF32 tensor cores where the accuracy policy allows.",
                   expected_effect="up to ~7x over FFMA")],
    )


@rule("compute.fp64-pipe", family="compute", scope="ncu",
      description="The FP64 pipe is busy in a kernel (often from unintended double-precision promotions).",
      thresholds={"min_fp64_pipe_pct": 10.0}, metrics=(FP64_PIPE,), supersedes=("sass.fp64-in-kernel",),
      explains=("compute.special-functions", "sass.mufu-heavy", "compute.issue-bound"))  # promotions add F2F
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
      description="Transcendentals (MUFU: exp, sin, rsqrt...) keep the XU pipe busy; a warning where it is the busiest "
                  "math pipe of an SM near its roof (the limiter), a note where the FMA pipe is busier or the SM is "
                  "far from its roof (the warps wait).",
      thresholds={"min_xu_pipe_pct": 40.0}, metrics=(XU_PIPE, FMA_PIPE), supersedes=("sass.mufu-heavy",))
def _xu(k: KernelProfile, run: Run) -> Iterable[Finding]:
    v = k.num(XU_PIPE)
    if v is None or v < run.th["min_xu_pipe_pct"]:
        return
    fma, sm = k.num(FMA_PIPE), k.sm_throughput_pct
    # the XU pipe, a quarter of the FMA pipe's rate, the busiest math pipe of an SM near its roof: it limits; an SM
    # far from its roof (warps waiting) is limited by the waiting, whatever pipe is busiest
    limits = (fma is None or v >= fma) and (sm is None or sm >= SOL_HIGH_PCT)
    yield run.finding(
        kernel=k.name, severity="warning" if limits else "info", impact=min(1.0, v / 100) if limits else 0.05,
        title="Special-function (XU) pipe busy",
        # the MUFU instructions themselves wait on the throttles; their consumers on the short scoreboard
        line=cost_line(k, ("smsp__pcsamp_warps_issue_stalled_mio_throttle",
                           "smsp__pcsamp_warps_issue_stalled_math_pipe_throttle"),
                       ("smsp__pcsamp_warps_issue_stalled_short_scoreboard",)),
        diagnosis=(f"{k.name}: the XU pipe (MUFU transcendentals, conversions) runs at {v:.0f}% of peak"
                   + (": it has 1/4 of the FMA pipe's throughput, so it limits the kernel." if limits else
                      f", below the FMA pipe's {fma:.0f}%: busy, but not what limits the kernel."
                      if fma is not None and v < fma else
                      f", but the SM runs at {sm or 0.0:.0f}% of its peak: the warps wait, so the pipe is busy without "
                      "limiting the kernel.")),
        evidence=[Evidence(metric=XU_PIPE, value=round(v, 1), threshold=run.th["min_xu_pipe_pct"], unit="%",
                           source="ncu", kernel=k.name),
                  Evidence(metric=FMA_PIPE, value=round(fma, 1) if fma is not None else None, unit="%", source="ncu",
                           kernel=k.name)],
        fixes=[Fix(action="Hoist transcendentals out of loops, use identities (exp(a)*exp(b) = exp(a+b)), or "
                          "polynomial approximations on the FMA pipe.", expected_effect="fewer MUFU instructions"),
               Fix(action="Avoid needless int/float conversions (they also use the XU pipe).",
                   expected_effect="XU pipe freed")],
    )


@rule("compute.issue-bound", family="compute", scope="ncu",
      description="The schedulers issue an instruction almost every cycle: instruction count sets the time.",
      thresholds={"min_issue_pct": 75.0, "useful_fma_share_pct": 50.0},
      metrics=(ISSUE, "smsp__inst_executed.sum", FFMA, THREAD_INST), context=("sass",))
def _issue(k: KernelProfile, run: Run) -> Iterable[Finding]:
    v = k.num(ISSUE)
    if v is None or v < run.th["min_issue_pct"]:
        return
    work, total = fma_work(k, run.ctx.get("sass", {}).get(k.mangled_name)), k.num(THREAD_INST)
    # the arithmetic itself: FMAs (FP32 and half), and the FP32 adds and multiplies beside them (from the op rates)
    mac = mac_share_pct(k)
    scale = 100.0 / mac if mac else 1.0  # FP32 arithmetic per FFMA
    fma_share = (100.0 * (work[0] + (scale - 1.0) * (work[0] - work[1])) / total
                 if work is not None and total else None)
    useful = fma_share is not None and fma_share >= run.th["useful_fma_share_pct"]
    yield run.finding(
        kernel=k.name, severity="info" if useful else "warning", impact=round(v / 100, 3),
        title="Instruction-issue bound",
        line=hottest_line(k, "smsp__pcsamp_sample_count"),
        diagnosis=(f"{k.name}: the warp schedulers issue in {v:.0f}% of active cycles, near the one-instruction-per-"
                   "cycle limit: only fewer instructions make it faster."
                   + (f" {fma_share:.0f}% of its thread instructions are floating-point arithmetic (FMAs, FP32 adds "
                      "and multiplies), so most of what it issues is the arithmetic itself: it runs near the FP32 "
                      "roof, and only packed (half2) math or tensor cores would raise it." if useful else
                      f" Only {fma_share:.0f}% of them are floating-point arithmetic: index arithmetic, conversions "
                      "and control flow take the issue slots." if fma_share is not None else "")),
        evidence=[Evidence(metric=ISSUE, value=round(v, 1), threshold=run.th["min_issue_pct"], unit="%", source="ncu",
                           kernel=k.name),
                  Evidence(metric="smsp__inst_executed.sum", value=k.num("smsp__inst_executed.sum"), source="ncu",
                           kernel=k.name),
                  Evidence(metric="fp_arithmetic_share_of_thread_instructions_pct",
                           value=round(fma_share, 1) if fma_share is not None else None,
                           threshold=run.th["useful_fma_share_pct"], unit="%", source="ncu", kernel=k.name)],
        fixes=[Fix(action="Cut instructions per result: vector loads, fewer index computations (strength reduction, "
                          "hoisting), unrolling to drop loop overhead, packed half2 math.",
                   expected_effect="time falls with the instruction count"),
               Fix(action="Move matrix-like math to tensor cores.", expected_effect="many FMAs per instruction")],
    )
