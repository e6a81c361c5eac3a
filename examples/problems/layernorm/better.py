"""LayerNorm, better: one 256-thread block per row, float4 loads, single-read Welford statistics.

Each thread folds its float4 chunks into a running (count, mean, M2) with Chan's parallel update
(numerically stable, unlike sum / sum-of-squares); the triples are merged across the warp with
shuffles and across the block through shared memory. A second pass re-reads the row (from L2) with
the weight and bias as float4 and writes the result. Rows whose length is not a multiple of 4, or
unaligned pointers, take the scalar loops.
"""

import torch

from kernelscope.fast import CudaKernel

CUDA_SRC = r"""
#define LN_THREADS 256

// Chan et al.: merge (nb, mb, m2b) into (na, ma, m2a). Empty sides (count 0) are no-ops.
__device__ __forceinline__ void welford_merge(float& na, float& ma, float& m2a, float nb, float mb, float m2b) {
    float n = na + nb;
    if (n == 0.0f) return;
    float d = mb - ma;
    float f = nb / n;
    ma += d * f;
    m2a += m2b + d * d * na * f;
    na = n;
}

__device__ __forceinline__ void welford_warp(float& n, float& m, float& m2) {
    for (int off = 16; off > 0; off >>= 1) {
        float n2 = __shfl_xor_sync(0xffffffffu, n, off);
        float mm = __shfl_xor_sync(0xffffffffu, m, off);
        float q2 = __shfl_xor_sync(0xffffffffu, m2, off);
        welford_merge(n, m, m2, n2, mm, q2);
    }
}

extern "C" __global__ void __launch_bounds__(LN_THREADS)
layernorm_rows(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ b,
               float* __restrict__ y, int rows, int cols, float eps) {
    __shared__ float s_n[32];
    __shared__ float s_m[32];
    __shared__ float s_m2[32];
    const int row = blockIdx.x;
    if (row >= rows) return;
    const float* xr = x + (long long)row * cols;
    float* yr = y + (long long)row * cols;
    const unsigned long long ptrs = (unsigned long long)x | (unsigned long long)w | (unsigned long long)b
                                    | (unsigned long long)y;
    const bool vec = ((cols & 3) == 0) && ((ptrs & 15ull) == 0);

    float n = 0.0f, mean = 0.0f, m2 = 0.0f;
    if (vec) {
        const float4* x4 = reinterpret_cast<const float4*>(xr);
        const int n4 = cols >> 2;
#pragma unroll 4
        for (int i = threadIdx.x; i < n4; i += blockDim.x) {
            float4 v = x4[i];
            float cm = ((v.x + v.y) + (v.z + v.w)) * 0.25f;
            float dx = v.x - cm, dy = v.y - cm, dz = v.z - cm, dw = v.w - cm;
            welford_merge(n, mean, m2, 4.0f, cm, dx * dx + dy * dy + dz * dz + dw * dw);
        }
    } else {
        for (int i = threadIdx.x; i < cols; i += blockDim.x) welford_merge(n, mean, m2, 1.0f, xr[i], 0.0f);
    }

    welford_warp(n, mean, m2);
    const int warp = threadIdx.x >> 5;
    const int lane = threadIdx.x & 31;
    const int nwarps = (blockDim.x + 31) >> 5;
    if (lane == 0) {
        s_n[warp] = n;
        s_m[warp] = mean;
        s_m2[warp] = m2;
    }
    __syncthreads();
    if (warp == 0) {
        n = lane < nwarps ? s_n[lane] : 0.0f;
        mean = lane < nwarps ? s_m[lane] : 0.0f;
        m2 = lane < nwarps ? s_m2[lane] : 0.0f;
        welford_warp(n, mean, m2);
        if (lane == 0) {
            s_m[0] = mean;
            s_m2[0] = rsqrtf(m2 / (float)cols + eps);
        }
    }
    __syncthreads();
    mean = s_m[0];
    const float rstd = s_m2[0];

    if (vec) {
        const float4* x4 = reinterpret_cast<const float4*>(xr);
        const float4* w4 = reinterpret_cast<const float4*>(w);
        const float4* b4 = reinterpret_cast<const float4*>(b);
        float4* y4 = reinterpret_cast<float4*>(yr);
        const int n4 = cols >> 2;
#pragma unroll 4
        for (int i = threadIdx.x; i < n4; i += blockDim.x) {
            float4 v = x4[i], g = w4[i], c = b4[i], o;
            o.x = (v.x - mean) * rstd * g.x + c.x;
            o.y = (v.y - mean) * rstd * g.y + c.y;
            o.z = (v.z - mean) * rstd * g.z + c.z;
            o.w = (v.w - mean) * rstd * g.w + c.w;
            y4[i] = o;
        }
    } else {
        for (int i = threadIdx.x; i < cols; i += blockDim.x) yr[i] = (xr[i] - mean) * rstd * w[i] + b[i];
    }
}
"""

KERNEL = CudaKernel(CUDA_SRC, "layernorm_rows")
KERNELS = [KERNEL]
THREADS = 256  # must match LN_THREADS (the launch bound) and be a multiple of 32


class ModelNew(torch.nn.Module):
    def __init__(self, dim: int = 4096, eps: float = 1e-5) -> None:
        super().__init__()
        self.dim = int(dim)
        self.eps = float(eps)
        self.weight = torch.nn.Parameter(torch.randn(self.dim))
        self.bias = torch.nn.Parameter(torch.randn(self.dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        cols = x.shape[-1]
        if cols != self.dim:
            raise ValueError(f"last dim {cols} != normalized size {self.dim}")
        rows = x.numel() // cols
        y = torch.empty_like(x)
        KERNEL(grid=(rows,), block=(THREADS,), args=(x, self.weight, self.bias, y, rows, cols, self.eps))
        return y
