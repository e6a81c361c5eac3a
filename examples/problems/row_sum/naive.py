"""Row sum, naive: one thread per row, a sequential float accumulation.

Neighbouring threads read addresses a row (32 KiB) apart, so nothing coalesces, and the grid has
only ROWS threads. The sum is Kahan-compensated: a plain sequential float sum of 8192 randn values is
off by up to ~1e-3 (simulated: a few rows of 8192 fail rtol=atol=1e-4, the harness's default float32
tolerance); the compensation costs three adds per element, nothing next to the memory stalls.
"""

import torch

from kernelscope.fast import CudaKernel

CUDA_SRC = r"""
extern "C" __global__ void row_sum_naive(const float* __restrict__ x, float* __restrict__ y, int rows, int cols) {
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= rows) return;
    const float* xr = x + (long long)row * cols;
    float s = 0.0f, comp = 0.0f;
    for (int j = 0; j < cols; ++j) {
        float v = xr[j] - comp;
        float t = s + v;
        comp = (t - s) - v;
        s = t;
    }
    y[row] = s;
}
"""

KERNEL = CudaKernel(CUDA_SRC, "row_sum_naive")
KERNELS = [KERNEL]
THREADS = 256


class ModelNew(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        rows, cols = x.shape
        y = torch.empty(rows, dtype=x.dtype, device=x.device)
        KERNEL(grid=((rows + THREADS - 1) // THREADS,), block=(THREADS,), args=(x, y, rows, cols))
        return y
