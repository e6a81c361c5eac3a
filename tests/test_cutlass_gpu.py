"""The CuTe Hopper GEMM (examples/cutlass/) on an H100: built by NVRTC for sm_90a through the fast
path, correct against torch on aligned and ragged shapes, HGMMA in the cubin it runs, timed against
cuBLAS (torch.matmul), and evaluated by the run tool as a candidate against torch.nn.functional.linear.

Run with -s to see the figures:  python -m pytest -m gpu -s tests/test_cutlass_gpu.py"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from kernelscope.tools import cutlass

pytestmark = pytest.mark.gpu
EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "cutlass" / "hopper_gemm.py"


@pytest.fixture(scope="module")
def hg() -> ModuleType:
    torch = pytest.importorskip("torch")
    pytest.importorskip("cupy")
    root, note = cutlass.locate()
    if root is None:
        pytest.skip(f"CUTLASS/CuTe headers absent: {note}")
    if not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("the Hopper GEMM needs a compute capability 9.0 GPU (H100/H200)")
    spec = importlib.util.spec_from_file_location("hopper_gemm_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses resolve the module's string annotations through sys.modules
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("dtype_name", ["float16", "bfloat16"])
@pytest.mark.parametrize("shape", [(4096, 4096, 4096), (1000, 1000, 1000), (256, 512, 72), (129, 257, 8),
                                   (384, 768, 4160)])
def test_gemm_matches_torch(hg: ModuleType, dtype_name: str, shape: tuple[int, int, int]) -> None:
    import torch

    c = hg.check(*shape, getattr(torch, dtype_name))
    print(f"\n{dtype_name} {shape}: max |err| {c.max_abs_err:.4g} vs the fp32 product "
          f"(cuBLAS {c.cublas_max_abs_err:.4g})")
    assert c.ok, c
    # no worse than cuBLAS's own rounding, within one output ulp-ish margin
    assert c.max_abs_err <= 2 * c.cublas_max_abs_err + 0.05, c


def test_the_cubin_it_runs_is_sm90a_with_hgmma(hg: ModuleType) -> None:
    import torch

    from kernelscope.tools.sass import sass_for_cubin_bytes

    k = hg.KERNELS[torch.float16]
    k.compile()
    assert k.cubin_path is not None and k.cubin_path.is_file()
    s = sass_for_cubin_bytes(k.cubin_path.read_bytes())
    stats = {x.name: x for x in s.kernels}
    assert {"hopper_gemm_f16", "hopper_gemm_bf16"} <= set(stats)
    for name in ("hopper_gemm_f16", "hopper_gemm_bf16"):
        assert stats[name].arch == "sm_90a" and stats[name].tensor_core_instructions.get("HGMMA", 0) >= 4


@pytest.mark.parametrize("dtype_name", ["float16", "bfloat16"])
def test_timing_against_cublas(hg: ModuleType, dtype_name: str) -> None:
    import torch

    m = n = k = 4096
    t = hg.benchmark(m, n, k, getattr(torch, dtype_name), budget_s=1.0)
    ours, ref = t["cute_hopper"], t["torch.matmul"]
    print(f"\n{torch.cuda.get_device_name()} {dtype_name} {m}x{n}x{k} C = A @ B.T: "
          f"cute_hopper {ours.median_us:.1f} us (IQR {ours.iqr_us:.1f}, {ours.tflops(m, n, k):.0f} TFLOP/s), "
          f"torch.matmul {ref.median_us:.1f} us (IQR {ref.iqr_us:.1f}, {ref.tflops(m, n, k):.0f} TFLOP/s), "
          f"ratio {ref.median_us / ours.median_us:.2f}x cuBLAS's speed, {ours.runs} runs each")
    assert ours.runs >= 30 and ref.runs >= 30
    # well above what CUDA cores can reach (~60 TFLOP/s fp32 FMA): the tensor cores do the work
    assert ours.tflops(m, n, k) > 150


REFERENCE = '''
import torch

class Model(torch.nn.Module):
    def forward(self, a, b):
        return torch.nn.functional.linear(a, b)

def get_inputs():
    return [torch.randn(4096, 4096, dtype=torch.float16), torch.randn(4096, 4096, dtype=torch.float16)]

def get_init_inputs():
    return []
'''

CANDIDATE = '''
import math
import torch
from kernelscope.fast import CudaKernel, tensor_map_2d

SRC = {src!r}
GEMM = CudaKernel(SRC, "hopper_gemm_f16", arch="sm_90a", cutlass=True)

class ModelNew(torch.nn.Module):
    def forward(self, a, b):
        m, k = a.shape
        n = b.shape[0]
        c = torch.empty(m, n, dtype=a.dtype, device=a.device)
        GEMM(grid=(math.ceil(n / 256), math.ceil(m / 128)), block=(256,), shared_mem=198656,
             args=(tensor_map_2d(a, 128, 64), tensor_map_2d(b, 256, 64), c, m, n, k))
        return c
'''


def test_the_run_tool_evaluates_it_as_a_candidate(hg: ModuleType) -> None:
    from kernelscope.models.requests import EvalRequest
    from kernelscope.tools.run import eval_candidate

    src = (EXAMPLE.parent / "hopper_gemm.cu").read_text()
    r = eval_candidate(EvalRequest(reference=REFERENCE, candidate=CANDIDATE.format(src=src), device="cuda",
                                   trials=3, timing_budget_s=1.0, timeout_s=300))
    assert r.status == "ok" and r.correctness and r.correctness.correct, (r.error, r.correctness, r.traceback)
    assert not [f for f in r.flags if f.severity == "invalid"], r.flags
    sp = r.speedups[0]
    print(f"\nrun tool: candidate {r.timings['candidate'].median_us:.1f} us vs F.linear "
          f"{r.timings['reference'].median_us:.1f} us: speedup {sp.speedup:.2f}x "
          f"[{sp.ci_low:.2f}, {sp.ci_high:.2f}] {sp.verdict}")
