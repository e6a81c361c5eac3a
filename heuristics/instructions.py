"""Instruction-family rules over SASS statistics: local memory, scalar loads, FP64 promotions, FMA-heavy
code without tensor cores, MUFU-heavy loops."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from kernelscope.heuristics.registry import Run, rank, rule, run_rules
from kernelscope.models import Evidence, Finding, Fix, KernelSassStats, Severity


def _pct(part: int, whole: int) -> float:
    return round(100.0 * part / whole, 1) if whole else 0.0


FP64_RATE_BY_ARCH = {  # FP64:FP32 throughput (A100, H100, B200 / T4 / RTX 30, L4/L40/RTX 40, RTX 50)
    "sm_80": "1/2", "sm_90": "1/2", "sm_100": "1/2", "sm_75": "1/32", "sm_86": "1/64", "sm_89": "1/64",
    "sm_120": "1/64",
}


def _cls_count(k: KernelSassStats, cls: str) -> int:
    return next((c.count for c in k.classes if c.cls == cls), 0)


def _ev(k: KernelSassStats, metric: str, value: float | str | None, threshold: float | str | None = None,
        unit: str | None = None) -> Evidence:
    return Evidence(metric=metric, value=value, threshold=threshold, unit=unit, source="sass", kernel=k.name)


@rule("sass.local-memory", family="memory", scope="sass",
      description="LDL/STL in the SASS: spills or stack arrays.",
      thresholds={"high_count": 16})  # LDL+STL instructions from which local memory traffic is likely heavy
def _local_memory(k: KernelSassStats, run: Run) -> Iterable[Finding]:
    """LDL/STL present: register spills or a per-thread array the compiler could not keep in registers."""
    n = k.local_loads + k.local_stores
    if n == 0:
        return
    severity: Severity = "high" if n >= run.th["high_count"] else "warning"
    regs = f" with {k.registers} registers per thread" if k.registers is not None else ""
    yield run.finding(
        severity=severity, kernel=k.name,
        title="Local memory (spills or stack arrays)",
        diagnosis=(
            f"{k.name} has {k.local_stores} STL and {k.local_loads} LDL instructions{regs}: values live in "
            "per-thread local memory, which sits in DRAM behind L1 and costs global-memory latency and "
            "bandwidth. Static counts do not show whether they sit in a hot loop; the compile report's spill "
            "bytes and a profile's local traffic do."
        ),
        evidence=[
            _ev(k, "local_stores", k.local_stores, 0), _ev(k, "local_loads", k.local_loads, 0),
            _ev(k, "registers", k.registers),
        ],
        fixes=[
            Fix(action="If the register count is capped (-maxrregcount, __launch_bounds__ with a high "
                       "min-blocks value), relax the cap so ptxas can keep the values in registers.",
                expected_effect="Spills disappear when the cap was the cause; occupancy may drop a little."),
            Fix(action="Index per-thread arrays only with compile-time constants (fully unroll the loops "
                       "that touch them) so the array is promoted to registers.",
                expected_effect="Removes the stack array's LDL/STL entirely."),
            Fix(action="Shorten live ranges: compute values closer to their use, split the kernel, or keep "
                       "large per-thread data in shared memory.",
                expected_effect="Fewer live registers, so fewer spills."),
        ],
    )


@rule("sass.scalar-global-loads", family="memory", scope="sass",
      description="Only 32-bit global loads where vectors may fit.",
      thresholds={"min_scalar_loads": 16})  # 32-bit-or-narrower global loads before vectors are worth a look
def _scalar_global_loads(k: KernelSassStats, run: Run) -> Iterable[Finding]:
    """Many 32-bit global loads and no vector loads."""
    loads = k.memory.loads_by_width
    scalar = sum(n for w, n in loads.items() if int(w) <= 32)
    vector = sum(n for w, n in loads.items() if int(w) >= 64)
    if vector or scalar < run.th["min_scalar_loads"]:
        return
    yield run.finding(
        severity="info", kernel=k.name,
        title="Only scalar global loads",
        diagnosis=(
            f"{k.name} issues {scalar} global loads of 32 bits or less and none of 64/128 bits. If each "
            "thread reads neighbouring elements, 128-bit loads move the same bytes with a quarter of the "
            "instructions; if the accesses are gathers, this is expected."
        ),
        evidence=[
            _ev(k, "scalar_global_loads", scalar, run.th["min_scalar_loads"]),
            _ev(k, "vectorized_load_pct", k.memory.vectorized_load_pct, 0, "%"),
        ],
        fixes=[
            Fix(action="Load through float4/int4 (or __ldg on float4) where a thread reads 4 consecutive "
                       "32-bit elements, with 16-byte aligned pointers and a scalar tail loop.",
                expected_effect="Up to 4x fewer load instructions; helps memory-bound kernels that are "
                                "issue- or latency-limited."),
            Fix(action="Tell the compiler about alignment (__builtin_assume_aligned, aligned struct types) "
                       "so it can merge adjacent loads itself.",
                expected_effect="Vector loads without hand-written casts."),
        ],
    )


@rule("sass.fp64-in-kernel", family="instructions", scope="sass",
      description="FP64 math in a float kernel (promotions).",
      explains=("compute.special-functions", "sass.mufu-heavy", "compute.issue-bound"))  # the conversions they add
def _fp64_in_kernel(k: KernelSassStats, run: Run) -> Iterable[Finding]:
    """FP64 arithmetic next to float conversions or float math: usually an unintended promotion."""
    fp64, fp32 = k.fp64_instructions, _cls_count(k, "fp32")
    f2f = k.opcodes.get("F2F", 0)
    if fp64 == 0 or (f2f == 0 and fp32 < fp64):
        return
    base_arch = re.match(r"sm_\d+", k.arch or "")
    rate = FP64_RATE_BY_ARCH.get(base_arch.group(0)) if base_arch else None
    slow = rate in ("1/32", "1/64")
    severity: Severity = "high" if slow else "warning"
    rate_text = (f"on {k.arch} FP64 runs at {rate} of the FP32 rate" if rate
                 else "FP64 runs at 1/64 of the FP32 rate on GeForce/RTX/L4/L40-class GPUs and 1/2 on A100/H100")
    yield run.finding(
        severity=severity, kernel=k.name,
        title="Double-precision math in a float kernel",
        diagnosis=(
            f"{k.name} has {fp64} FP64 instructions next to {fp32} FP32 ones and {f2f} F2F conversions: "
            f"probably double literals (0.5 instead of 0.5f) or double math functions promoting float "
            f"values; {rate_text}, and each double takes two registers."
        ),
        evidence=[
            _ev(k, "fp64_instructions", fp64, 0), _ev(k, "fp32_instructions", fp32),
            _ev(k, "f2f_conversions", f2f), _ev(k, "fp64_rate_vs_fp32", rate),
        ],
        fixes=[
            Fix(action="Give float literals the f suffix (0.5f, 1.0f) and call the float functions "
                       "(sqrtf, expf, fabsf) or the overloaded ones on float arguments.",
                expected_effect="The FP64 and F2F instructions vanish; large speedups on 1/64-rate GPUs."),
            Fix(action="Compile with --use_fast_math or check with -Wdouble-promotion (host side) to find "
                       "the promotions; keep FP64 only where the accuracy is needed.",
                expected_effect="Locates the remaining promotions."),
        ],
    )


@rule("sass.no-tensor-cores-on-mma-like", family="tensor", scope="sass",
      description="FFMA-heavy code fed by shared-memory tiles (the shape of a tiled matrix product) with no "
                  "tensor-core instructions.",
      thresholds={"min_ffma": 64, "min_ffma_pct": 30.0, "max_ffma_per_shared_load": 16.0})
def _no_tensor_cores(k: KernelSassStats, run: Run) -> Iterable[Finding]:
    """FFMA-dominated code fed from shared memory, without any MMA: a tiled product left on the CUDA cores. FMA
    chains on registers (recurrences, polynomials) or on streamed global loads (elementwise, matrix-vector) are
    not products a static count can tell apart: the profile's rule (compute.tensor-cores-unused) measures their
    reuse."""
    ffma, lds = k.opcodes.get("FFMA", 0), k.opcodes.get("LDS", 0)
    share = _pct(ffma, k.instructions)
    if k.uses_tensor_cores or ffma < run.th["min_ffma"] or share < run.th["min_ffma_pct"]:
        return
    if not lds or ffma / lds > run.th["max_ffma_per_shared_load"]:
        return
    severity: Severity = "warning"
    shape = "; with shared-memory loads feeding them this looks like a tiled GEMM or convolution"
    yield run.finding(
        severity=severity, kernel=k.name,
        title="FMA-heavy kernel without tensor cores",
        diagnosis=(
            f"{k.name} has {ffma} FFMA instructions ({share}% of {k.instructions}) and no HMMA/HGMMA{shape}. "
            "If it computes matrix products, tensor cores offer several times the FP32 FMA throughput."
        ),
        evidence=[
            _ev(k, "ffma_instructions", ffma, run.th["min_ffma"]),
            _ev(k, "ffma_pct", share, run.th["min_ffma_pct"], "%"),
            _ev(k, "tensor_core_instructions", 0), _ev(k, "shared_loads", lds),
            _ev(k, "ffma_per_shared_load", round(ffma / lds, 2), run.th["max_ffma_per_shared_load"]),
        ],
        fixes=[
            Fix(action="Use a library (cuBLAS, CUTLASS, cuDNN) or tensor-core code: WMMA/mma.sync on "
                       "sm_80+, wgmma on sm_90.",
                expected_effect="Several-fold higher math throughput for GEMM-shaped work."),
            Fix(action="If the tolerance allows, use TF32 (FP32 inputs) or BF16/FP16 inputs with FP32 "
                       "accumulation.",
                expected_effect="Makes tensor cores usable; check accuracy against the FP32 result."),
        ],
    )


@rule("sass.mufu-heavy", family="instructions", scope="sass",
      description="Many special-function (MUFU) instructions.",
      thresholds={"min_mufu": 16, "min_mufu_pct": 10.0})
def _mufu_heavy(k: KernelSassStats, run: Run) -> Iterable[Finding]:
    """Many MUFU (special function unit) instructions: a pipe with a fraction of the FMA rate."""
    mufu = k.special_function_instructions
    share = _pct(mufu, k.instructions)
    if mufu < run.th["min_mufu"] or share < run.th["min_mufu_pct"]:
        return
    yield run.finding(
        severity="info", kernel=k.name,
        title="Many special-function (MUFU) instructions",
        diagnosis=(
            f"{k.name} has {mufu} MUFU instructions ({share}% of {k.instructions}): the special function "
            "unit issues at a fraction (1/4 to 1/8) of the FP32 rate, so it can bound math-heavy loops."
        ),
        evidence=[_ev(k, "mufu_instructions", mufu, run.th["min_mufu"]),
                  _ev(k, "mufu_pct", share, run.th["min_mufu_pct"], "%")],
        fixes=[
            Fix(action="Hoist transcendental calls out of loops, reuse results (one rsqrt instead of sqrt and "
                       "a division), or precompute tables.",
                expected_effect="Fewer MUFU instructions on the critical path."),
            Fix(action="Where precision allows, use half2 variants (h2exp, h2rcp) or polynomial "
                       "approximations on the FMA pipe.",
                expected_effect="Moves work to faster pipes."),
        ],
    )


def sass_findings(stats: list[KernelSassStats],
                  overrides: Mapping[str, Mapping[str, float]] | None = None) -> list[Finding]:
    """Run the SASS rules over every kernel; most severe first."""
    return rank([f for k in stats for f in run_rules("sass", k, overrides=overrides)])
