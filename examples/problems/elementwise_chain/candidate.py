"""Elementwise chain, knob-annotated for the offline proposer: the fused chain with the block size,
the load width, the loads in flight per thread and the grid shape as knobs.

- THREADS: threads per block.
- VEC: floats per load and store (1, 2 or 4: float, float2, float4).
- ITEMS: vectors each thread loads per loop trip before computing on them.
- BLOCKS_PER_SM: the grid is SMs x this many blocks and threads stride through the array; 0 launches
  one block per THREADS x ITEMS vectors instead (one trip per thread, no stride loop).

Same arithmetic as naive.py and better.py (exact mul/add rounding, PyTorch's gelu and sigmoid
formulas). The declared order starts from a slow corner (64 threads, scalar, one block per SM);
`kernelscope optimize examples/problems/elementwise_chain` searches the 360 configurations.
"""

import functools

import torch

from kernelscope.fast import CudaKernel

# @knob THREADS 64 128 256 512 1024
# @knob VEC 1 2 4
# @knob ITEMS 1 2 4 8
# @knob BLOCKS_PER_SM 1 2 4 8 16 0

CUDA_SRC = r"""
#if VEC == 4
typedef float4 vec_t;
#elif VEC == 2
typedef float2 vec_t;
#else
typedef float vec_t;
#endif

__device__ __forceinline__ float chain(float v, float scale, float bias) {
    float z = __fadd_rn(__fmul_rn(v, scale), bias);
    float inner = 0.7978845608028654f * (z + 0.044715f * (z * z * z));
    float g = 0.5f * z * (1.0f + tanhf(inner));
    return g * (1.0f / (1.0f + expf(-v)));
}

extern "C" __global__ void __launch_bounds__(THREADS)
chain_knobs(const float* __restrict__ x, float* __restrict__ y, long long n, float scale, float bias) {
    const vec_t* xv = reinterpret_cast<const vec_t*>(x);
    vec_t* yv = reinterpret_cast<vec_t*>(y);
    const long long nv = n / VEC;
    const long long stride = (long long)gridDim.x * THREADS;
    for (long long base = blockIdx.x * (long long)THREADS + threadIdx.x; base < nv; base += stride * ITEMS) {
        vec_t v[ITEMS];
#pragma unroll
        for (int k = 0; k < ITEMS; ++k) if (base + k * stride < nv) v[k] = xv[base + k * stride];
#pragma unroll
        for (int k = 0; k < ITEMS; ++k) {
            if (base + k * stride >= nv) break;
            float* a = reinterpret_cast<float*>(&v[k]);
#pragma unroll
            for (int j = 0; j < VEC; ++j) a[j] = chain(a[j], scale, bias);
            yv[base + k * stride] = v[k];
        }
    }
}
"""

KERNEL = CudaKernel(CUDA_SRC, "chain_knobs", options=(
    "--std=c++17", f"-DTHREADS={THREADS}", f"-DVEC={VEC}", f"-DITEMS={ITEMS}"))  # noqa: F821
KERNELS = [KERNEL]


@functools.cache
def _num_sms(device: torch.device) -> int:
    if device.type != "cuda":  # only for dry runs off the GPU
        return 132
    return torch.cuda.get_device_properties(device).multi_processor_count


class ModelNew(torch.nn.Module):
    def __init__(self, scale: float = 1.5, bias: float = 0.25) -> None:
        super().__init__()
        self.scale = float(scale)
        self.bias = float(bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        n = x.numel()
        if n % VEC:  # noqa: F821
            raise ValueError(f"chain_knobs needs the element count divisible by VEC={VEC}")  # noqa: F821
        y = torch.empty_like(x)
        per_block = THREADS * ITEMS  # noqa: F821
        one_pass = (n // VEC + per_block - 1) // per_block  # noqa: F821
        blocks = one_pass if BLOCKS_PER_SM == 0 else min(one_pass, _num_sms(x.device) * BLOCKS_PER_SM)  # noqa: F821
        KERNEL(grid=(max(1, blocks),), block=(THREADS,), args=(x, y, n, self.scale, self.bias))  # noqa: F821
        return y
