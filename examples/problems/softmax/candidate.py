"""Softmax, knob-annotated for the offline proposer: one block per row, with the block size, the load
width, the number of independent loads in flight per thread and the statistics pass as knobs.

- THREADS: threads per block (one block per row of 4096).
- VEC: floats per load (1, 2 or 4: float, float2, float4).
- UNROLL: loads each thread issues per loop trip before using them.
- ONLINE: 0 computes the row max and then the sum of exponentials in two reads of the row; 1 keeps a
  running (max, sum) pair per thread and reads the row once for both.

The declared order starts from a slow corner (32 threads, scalar loads, two statistics passes);
`kernelscope optimize examples/problems/softmax` searches the 108 configurations.
"""

import torch

from kernelscope.fast import CudaKernel

# @knob THREADS 32 64 128 256 512 1024
# @knob VEC 1 2 4
# @knob UNROLL 1 2 4
# @knob ONLINE 0 1

CUDA_SRC = r"""
#if VEC == 4
typedef float4 vec_t;
#elif VEC == 2
typedef float2 vec_t;
#else
typedef float vec_t;
#endif
#define NWARPS (THREADS / 32)

__device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}
__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
// Block-wide max/sum through one shared slot per warp; every thread gets the result.
__device__ __forceinline__ float block_reduce(float v, float* sh, bool is_max) {
    v = is_max ? warp_max(v) : warp_sum(v);
    if ((threadIdx.x & 31) == 0) sh[threadIdx.x >> 5] = v;
    __syncthreads();
    if (threadIdx.x < 32) {
        float w = threadIdx.x < NWARPS ? sh[threadIdx.x] : (is_max ? -3.402823466e+38f : 0.0f);
        w = is_max ? warp_max(w) : warp_sum(w);
        if (threadIdx.x == 0) sh[32] = w;
    }
    __syncthreads();
    float r = sh[32];
    __syncthreads();
    return r;
}

extern "C" __global__ void __launch_bounds__(THREADS)
softmax_knobs(const float* __restrict__ x, float* __restrict__ y, int rows, int cols) {
    __shared__ float sh[33];
    const int row = blockIdx.x;
    if (row >= rows) return;
    const vec_t* xv = reinterpret_cast<const vec_t*>(x + (long long)row * cols);
    vec_t* yv = reinterpret_cast<vec_t*>(y + (long long)row * cols);
    const int n = cols / VEC;
    float m = -3.402823466e+38f, s = 0.0f;
#if ONLINE
    for (int base = threadIdx.x; base < n; base += THREADS * UNROLL) {
        vec_t v[UNROLL];
#pragma unroll
        for (int k = 0; k < UNROLL; ++k) if (base + k * THREADS < n) v[k] = xv[base + k * THREADS];
#pragma unroll
        for (int k = 0; k < UNROLL; ++k) {
            if (base + k * THREADS >= n) break;
            const float* a = reinterpret_cast<const float*>(&v[k]);
#pragma unroll
            for (int j = 0; j < VEC; ++j) {
                if (a[j] > m) { s = s * expf(m - a[j]) + 1.0f; m = a[j]; }
                else s += expf(a[j] - m);
            }
        }
    }
    const float row_max = block_reduce(m, sh, true);
    const float row_sum = block_reduce(s * expf(m - row_max), sh, false);
#else
    for (int base = threadIdx.x; base < n; base += THREADS * UNROLL) {
        vec_t v[UNROLL];
#pragma unroll
        for (int k = 0; k < UNROLL; ++k) if (base + k * THREADS < n) v[k] = xv[base + k * THREADS];
#pragma unroll
        for (int k = 0; k < UNROLL; ++k) {
            if (base + k * THREADS >= n) break;
            const float* a = reinterpret_cast<const float*>(&v[k]);
#pragma unroll
            for (int j = 0; j < VEC; ++j) m = fmaxf(m, a[j]);
        }
    }
    const float row_max = block_reduce(m, sh, true);
    for (int base = threadIdx.x; base < n; base += THREADS * UNROLL) {
        vec_t v[UNROLL];
#pragma unroll
        for (int k = 0; k < UNROLL; ++k) if (base + k * THREADS < n) v[k] = xv[base + k * THREADS];
#pragma unroll
        for (int k = 0; k < UNROLL; ++k) {
            if (base + k * THREADS >= n) break;
            const float* a = reinterpret_cast<const float*>(&v[k]);
#pragma unroll
            for (int j = 0; j < VEC; ++j) s += expf(a[j] - row_max);
        }
    }
    const float row_sum = block_reduce(s, sh, false);
#endif
    for (int base = threadIdx.x; base < n; base += THREADS * UNROLL) {
        vec_t v[UNROLL];
#pragma unroll
        for (int k = 0; k < UNROLL; ++k) if (base + k * THREADS < n) v[k] = xv[base + k * THREADS];
#pragma unroll
        for (int k = 0; k < UNROLL; ++k) {
            if (base + k * THREADS >= n) break;
            float* a = reinterpret_cast<float*>(&v[k]);
#pragma unroll
            for (int j = 0; j < VEC; ++j) a[j] = expf(a[j] - row_max) / row_sum;
            yv[base + k * THREADS] = v[k];
        }
    }
}
"""

KERNEL = CudaKernel(CUDA_SRC, "softmax_knobs", options=(
    "--std=c++17", f"-DTHREADS={THREADS}", f"-DVEC={VEC}", f"-DUNROLL={UNROLL}", f"-DONLINE={ONLINE}"))  # noqa: F821
KERNELS = [KERNEL]


class ModelNew(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        rows, cols = x.shape
        if cols % VEC:  # noqa: F821
            raise ValueError(f"softmax_knobs needs cols divisible by VEC={VEC}")  # noqa: F821
        y = torch.empty_like(x)
        KERNEL(grid=(rows,), block=(THREADS,), args=(x, y, rows, cols))  # noqa: F821
        return y
