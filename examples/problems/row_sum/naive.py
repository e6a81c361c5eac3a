"""Row sum, naive: one thread per row, a sequential float accumulation.

Neighbouring threads read addresses a row (32 KiB) apart, so nothing coalesces, and the grid has
only ROWS threads. The sequential sum is also the least accurate order (see the tests' tolerance).
"""

import torch

from kernelscope.fast import CudaKernel

CUDA_SRC = r"""
extern "C" __global__ void row_sum_naive(const float* __restrict__ x, float* __restrict__ y, int rows, int cols) {
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= rows) return;
    const float* xr = x + (long long)row * cols;
    float s = 0.0f;
    for (int j = 0; j < cols; ++j) s += xr[j];
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
