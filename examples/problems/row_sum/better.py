"""Row sum, better: one 256-thread block per row, coalesced float4 loads, two independent
accumulators per thread, warp-shuffle then shared-memory reduction.

Consecutive threads read consecutive 16-byte chunks of the row, so every load instruction moves
512 contiguous bytes per warp; 8192 blocks keep every SM's memory pipeline full. Rows whose length
is not a multiple of 4, or an unaligned pointer, take the scalar loop.
"""

import torch

from kernelscope.fast import CudaKernel

CUDA_SRC = r"""
#define RS_THREADS 256

__device__ __forceinline__ float warp_sum(float v) {
    for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
    return v;
}

extern "C" __global__ void __launch_bounds__(RS_THREADS)
row_sum_block(const float* __restrict__ x, float* __restrict__ y, int rows, int cols) {
    __shared__ float s_part[32];
    const int row = blockIdx.x;
    if (row >= rows) return;
    const float* xr = x + (long long)row * cols;
    const bool vec = ((cols & 3) == 0) && ((((unsigned long long)x) & 15ull) == 0);

    float s0 = 0.0f, s1 = 0.0f;
    if (vec) {
        const float4* x4 = reinterpret_cast<const float4*>(xr);
        const int n4 = cols >> 2;
        const int step = blockDim.x;
        int i = threadIdx.x;
        for (; i + step < n4; i += 2 * step) {
            float4 a = x4[i];
            float4 c = x4[i + step];
            s0 += (a.x + a.y) + (a.z + a.w);
            s1 += (c.x + c.y) + (c.z + c.w);
        }
        if (i < n4) {
            float4 a = x4[i];
            s0 += (a.x + a.y) + (a.z + a.w);
        }
    } else {
        for (int i = threadIdx.x; i < cols; i += blockDim.x) s0 += xr[i];
    }

    float s = warp_sum(s0 + s1);
    const int warp = threadIdx.x >> 5;
    const int lane = threadIdx.x & 31;
    const int nwarps = (blockDim.x + 31) >> 5;
    if (lane == 0) s_part[warp] = s;
    __syncthreads();
    if (warp == 0) {
        s = warp_sum(lane < nwarps ? s_part[lane] : 0.0f);
        if (lane == 0) y[row] = s;
    }
}
"""

KERNEL = CudaKernel(CUDA_SRC, "row_sum_block")
KERNELS = [KERNEL]
THREADS = 256  # must match RS_THREADS (the launch bound) and be a multiple of 32


class ModelNew(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        rows, cols = x.shape
        y = torch.empty(rows, dtype=x.dtype, device=x.device)
        KERNEL(grid=(rows,), block=(THREADS,), args=(x, y, rows, cols))
        return y
