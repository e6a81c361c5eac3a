"""Row sum, knob-annotated for the offline proposer: one block per row, with the block size, the load
width and the number of independent accumulators (loads in flight per thread) as knobs.

- THREADS: threads per block (one block per row of 8192).
- VEC: floats per load (1, 2 or 4: float, float2, float4).
- ACCS: independent partial sums per thread; each loop trip issues ACCS loads before adding them.

The declared order starts from a slow corner (32 threads, scalar loads, one accumulator);
`kernelscope optimize examples/problems/row_sum` searches the 54 configurations.
"""

import torch

from kernelscope.fast import CudaKernel

# @knob THREADS 32 64 128 256 512 1024
# @knob VEC 1 2 4
# @knob ACCS 1 2 4

CUDA_SRC = r"""
#if VEC == 4
typedef float4 vec_t;
#elif VEC == 2
typedef float2 vec_t;
#else
typedef float vec_t;
#endif
#define NWARPS (THREADS / 32)

__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

extern "C" __global__ void __launch_bounds__(THREADS)
row_sum_knobs(const float* __restrict__ x, float* __restrict__ y, int rows, int cols) {
    __shared__ float sh[NWARPS];
    const int row = blockIdx.x;
    if (row >= rows) return;
    const vec_t* xv = reinterpret_cast<const vec_t*>(x + (long long)row * cols);
    const int n = cols / VEC;
    float acc[ACCS];
#pragma unroll
    for (int k = 0; k < ACCS; ++k) acc[k] = 0.0f;
    for (int base = threadIdx.x; base < n; base += THREADS * ACCS) {
        vec_t v[ACCS];
#pragma unroll
        for (int k = 0; k < ACCS; ++k) if (base + k * THREADS < n) v[k] = xv[base + k * THREADS];
#pragma unroll
        for (int k = 0; k < ACCS; ++k) {
            if (base + k * THREADS >= n) break;
            const float* a = reinterpret_cast<const float*>(&v[k]);
            float t = 0.0f;
#pragma unroll
            for (int j = 0; j < VEC; ++j) t += a[j];
            acc[k] += t;
        }
    }
    float s = 0.0f;
#pragma unroll
    for (int k = 0; k < ACCS; ++k) s += acc[k];
    s = warp_sum(s);
    if ((threadIdx.x & 31) == 0) sh[threadIdx.x >> 5] = s;
    __syncthreads();
    if (threadIdx.x < 32) {
        s = warp_sum(threadIdx.x < NWARPS ? sh[threadIdx.x] : 0.0f);
        if (threadIdx.x == 0) y[row] = s;
    }
}
"""

KERNEL = CudaKernel(CUDA_SRC, "row_sum_knobs", options=(
    "--std=c++17", f"-DTHREADS={THREADS}", f"-DVEC={VEC}", f"-DACCS={ACCS}"))  # noqa: F821
KERNELS = [KERNEL]


class ModelNew(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        rows, cols = x.shape
        if cols % VEC:  # noqa: F821
            raise ValueError(f"row_sum_knobs needs cols divisible by VEC={VEC}")  # noqa: F821
        y = torch.empty(rows, dtype=x.dtype, device=x.device)
        KERNEL(grid=(rows,), block=(THREADS,), args=(x, y, rows, cols))  # noqa: F821
        return y
