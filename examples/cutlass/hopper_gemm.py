"""A CuTe GEMM for Hopper (TMA + wgmma) through kernelscope's fast path, checked against torch and
timed against cuBLAS (torch.matmul).

    python examples/cutlass/hopper_gemm.py                      # 4096^3, fp16 and bf16
    python examples/cutlass/hopper_gemm.py --m 8192 --dtype bf16 --budget-s 2

The kernel (``hopper_gemm.cu``) computes ``C = A @ B.T`` with A (M, K) and B (N, K) row-major, the
layout of ``torch.nn.functional.linear``; fp16 or bf16 in and out, fp32 accumulation. NVRTC builds
it for ``sm_90a`` with the CUTLASS/CuTe headers (``CudaKernel(..., arch="sm_90a", cutlass=True)``);
the TMA descriptors come from ``tensor_map_2d`` (the driver's ``cuTensorMapEncodeTiled``), built
once per operand in a :class:`Plan`.

Timing follows the project's method: warm-up until two consecutive chunks agree within 2% (at least
50 ms), a 256 MiB L2 flush before every timed call (outside the timed window), CUDA events around
each call, the two sides interleaved (ABBA) over several freshly allocated input sets in turn, and
medians with the interquartile range.
"""

from __future__ import annotations

import argparse
import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from kernelscope.fast import CudaKernel, tensor_map_2d

HERE = Path(__file__).resolve().parent
SOURCE = (HERE / "hopper_gemm.cu").read_text()
# The launch shape; hopper_gemm.cu static_asserts the same numbers.
TILE_M, TILE_N, TILE_K, THREADS, SMEM_BYTES = 128, 256, 64, 256, 198656
KERNELS: dict[torch.dtype, CudaKernel] = {
    torch.float16: CudaKernel(SOURCE, "hopper_gemm_f16", arch="sm_90a", cutlass=True),
    torch.bfloat16: CudaKernel(SOURCE, "hopper_gemm_bf16", arch="sm_90a", cutlass=True),
}


def check_device() -> None:
    if not torch.cuda.is_available():
        raise RuntimeError("the Hopper GEMM needs a CUDA GPU")
    cc = torch.cuda.get_device_capability()
    if cc != (9, 0):
        raise RuntimeError(f"the Hopper GEMM needs compute capability 9.0 (H100/H200), this GPU has {cc[0]}.{cc[1]}")


@dataclass
class Plan:
    """One GEMM's launch, prepared: the TMA descriptors of A and B and the output. The descriptors
    hold the tensors' addresses, so the plan keeps the tensors."""

    a: torch.Tensor
    b: torch.Tensor
    c: torch.Tensor

    def __post_init__(self) -> None:
        a, b, c = self.a, self.b, self.c
        if a.dtype not in KERNELS or b.dtype != a.dtype or c.dtype != a.dtype:
            raise ValueError(f"A, B and C must share one dtype, float16 or bfloat16 (got {a.dtype}, {b.dtype}, "
                             f"{c.dtype})")
        if a.dim() != 2 or b.dim() != 2 or a.shape[1] != b.shape[1] or tuple(c.shape) != (a.shape[0], b.shape[0]):
            raise ValueError(f"shapes: A (M, K), B (N, K), C (M, N); got {tuple(a.shape)}, {tuple(b.shape)}, "
                             f"{tuple(c.shape)}")
        if not (a.is_contiguous() and b.is_contiguous() and c.is_contiguous()):
            raise ValueError("A, B and C must be contiguous (row-major)")
        if a.shape[1] % 8:
            raise ValueError(f"K = {a.shape[1]} must be a multiple of 8 (TMA needs 16-byte row pitches)")
        self.m, self.k = a.shape
        self.n = b.shape[0]
        self.kernel = KERNELS[a.dtype]
        self.tma_a = tensor_map_2d(a, TILE_M, TILE_K, swizzle=128)
        self.tma_b = tensor_map_2d(b, TILE_N, TILE_K, swizzle=128)
        self.grid = (math.ceil(self.n / TILE_N), math.ceil(self.m / TILE_M))

    def run(self) -> torch.Tensor:
        self.kernel(grid=self.grid, block=(THREADS,), shared_mem=SMEM_BYTES,
                    args=(self.tma_a, self.tma_b, self.c, self.m, self.n, self.k))
        return self.c


def gemm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``a @ b.T`` on the Hopper kernel: a (M, K), b (N, K), fp16 or bf16, contiguous, K % 8 == 0."""
    check_device()
    c = torch.empty(a.shape[0], b.shape[0], dtype=a.dtype, device=a.device)
    return Plan(a, b, c).run()


# ------------------------------------------------------------------------------------ correctness
@dataclass
class Check:
    shape: tuple[int, int, int]
    dtype: str
    max_abs_err: float  # vs the fp32 product of the same inputs
    cublas_max_abs_err: float
    max_rel_err: float
    ok: bool


def check(m: int, n: int, k: int, dtype: torch.dtype, seed: int = 0) -> Check:
    """Ours and cuBLAS against the fp32 product of the same (rounded) inputs."""
    g = torch.Generator(device="cuda").manual_seed(seed)
    a = torch.randn(m, k, device="cuda", dtype=dtype, generator=g)
    b = torch.randn(n, k, device="cuda", dtype=dtype, generator=g)
    ours = gemm(a, b).float()
    ref = a.float() @ b.float().T
    cublas = torch.matmul(a, b.T).float()
    torch.cuda.synchronize()
    err = (ours - ref).abs()
    tol = 1e-2 + 1e-2 * ref.abs()  # output rounding (fp16 2^-11, bf16 2^-8 relative) with margin
    return Check(shape=(m, n, k), dtype=str(dtype).removeprefix("torch."), max_abs_err=err.max().item(),
                 cublas_max_abs_err=(cublas - ref).abs().max().item(),
                 max_rel_err=(err / ref.abs().clamp_min(1.0)).max().item(),
                 ok=bool(torch.isfinite(ours).all().item() and (err <= tol).all().item()))


# ------------------------------------------------------------------------------------ timing
@dataclass
class Timing:
    median_us: float
    iqr_us: float
    runs: int

    def tflops(self, m: int, n: int, k: int) -> float:
        return 2.0 * m * n * k / (self.median_us * 1e-6) / 1e12


def _stats(samples: list[float]) -> Timing:
    q = statistics.quantiles(samples, n=4)
    return Timing(median_us=statistics.median(samples), iqr_us=q[2] - q[0], runs=len(samples))


def benchmark(m: int = 4096, n: int = 4096, k: int = 4096, dtype: torch.dtype = torch.float16,
              budget_s: float = 1.0, input_sets: int = 3) -> dict[str, Timing]:
    """Median time per call of ours and of torch.matmul (cuBLAS) on the same inputs."""
    check_device()
    plans, pairs = [], []
    for i in range(input_sets):
        g = torch.Generator(device="cuda").manual_seed(100 + i)
        a = torch.randn(m, k, device="cuda", dtype=dtype, generator=g)
        b = torch.randn(n, k, device="cuda", dtype=dtype, generator=g)
        plans.append(Plan(a, b, torch.empty(m, n, device="cuda", dtype=dtype)))
        pairs.append((a, b.T))  # cuBLAS gets the same transposed view torch.nn.functional.linear uses
    sides: dict[str, Callable[[int], object]] = {
        "cute_hopper": lambda i: plans[i].run(),
        "torch.matmul": lambda i: torch.matmul(*pairs[i]),
    }
    flush = torch.empty(256 * 1024 * 1024 // 4, device="cuda", dtype=torch.float32)

    # warm-up: both sides until two consecutive chunks agree within 2%, at least 50 ms
    def chunk() -> float:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for i in range(10):
            for fn in sides.values():
                fn(i % input_sets)
        end.record()
        torch.cuda.synchronize()
        return start.elapsed_time(end)

    prev, spent = chunk(), 0.0
    for _ in range(40):
        cur = chunk()
        spent += cur
        if spent >= 50.0 and abs(cur - prev) <= 0.02 * prev:
            break
        prev = cur

    samples: dict[str, list[float]] = {name: [] for name in sides}
    order = list(sides)
    total_ms, rnd = 0.0, 0
    while total_ms < budget_s * 1000.0 or rnd < 30:
        names = order if rnd % 2 == 0 else order[::-1]  # ABBA
        for name in names:
            flush.zero_()  # evict A and B from L2, outside the timed window
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            sides[name](rnd % input_sets)
            end.record()
            end.synchronize()
            ms = start.elapsed_time(end)
            samples[name].append(ms * 1000.0)
            total_ms += ms
        rnd += 1
    return {name: _stats(v) for name, v in samples.items()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--m", type=int, default=4096)
    ap.add_argument("--n", type=int, default=None, help="default: m")
    ap.add_argument("--k", type=int, default=None, help="default: m")
    ap.add_argument("--dtype", choices=["fp16", "bf16", "both"], default="both")
    ap.add_argument("--budget-s", type=float, default=1.0, help="seconds of timed runs per dtype")
    args = ap.parse_args(argv)
    m = args.m
    n = args.n or m
    k = args.k or m
    check_device()
    dtypes = {"fp16": [torch.float16], "bf16": [torch.bfloat16], "both": [torch.float16, torch.bfloat16]}[args.dtype]
    print(f"device: {torch.cuda.get_device_name()}; C = A @ B.T, M={m} N={n} K={k}")
    status = 0
    for dt in dtypes:
        c = check(m, n, k, dt)
        print(f"{c.dtype}: correct={c.ok} max |err| {c.max_abs_err:.4g} (cuBLAS {c.cublas_max_abs_err:.4g}) "
              "vs the fp32 product")
        if not c.ok:
            status = 1
            continue
        t = benchmark(m, n, k, dt, budget_s=args.budget_s)
        ours, ref = t["cute_hopper"], t["torch.matmul"]
        print(f"{c.dtype}: cute_hopper {ours.median_us:.1f} us (IQR {ours.iqr_us:.1f}, {ours.tflops(m, n, k):.0f} "
              f"TFLOP/s), torch.matmul {ref.median_us:.1f} us (IQR {ref.iqr_us:.1f}, {ref.tflops(m, n, k):.0f} "
              f"TFLOP/s): {ref.median_us / ours.median_us:.2f}x cuBLAS's speed, {ours.runs} runs each")
    return status


if __name__ == "__main__":
    raise SystemExit(main())
