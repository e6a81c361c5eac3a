"""LayerNorm, naive: one thread per row, three passes (mean, centred variance, normalise and write).

Neighbouring threads walk rows 16 KiB apart (no coalescing) and the grid has only BATCH threads.
"""

import torch

from kernelscope.fast import CudaKernel

CUDA_SRC = r"""
extern "C" __global__ void layernorm_naive(const float* __restrict__ x, const float* __restrict__ w,
                                           const float* __restrict__ b, float* __restrict__ y,
                                           int rows, int cols, float eps) {
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= rows) return;
    const float* xr = x + (long long)row * cols;
    float* yr = y + (long long)row * cols;
    float sum = 0.0f;
    for (int j = 0; j < cols; ++j) sum += xr[j];
    float mean = sum / (float)cols;
    float sq = 0.0f;
    for (int j = 0; j < cols; ++j) {
        float d = xr[j] - mean;
        sq += d * d;
    }
    float rstd = rsqrtf(sq / (float)cols + eps);
    for (int j = 0; j < cols; ++j) yr[j] = (xr[j] - mean) * rstd * w[j] + b[j];
}
"""

KERNEL = CudaKernel(CUDA_SRC, "layernorm_naive")
KERNELS = [KERNEL]
THREADS = 256


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
        KERNEL(grid=((rows + THREADS - 1) // THREADS,), block=(THREADS,),
               args=(x, self.weight, self.bias, y, rows, cols, self.eps))
        return y
