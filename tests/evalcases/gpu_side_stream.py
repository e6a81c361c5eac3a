# Does its work on a private stream and returns without joining it: events on the current stream
# time an empty window. The harness must flag it.
import torch

from kernelscope.fast import CudaKernel

SRC = r"""
extern "C" __global__ void rowsoftmax(const float* x, float* y, int rows, int cols) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    const float* xr = x + (long long)r * cols;
    float* yr = y + (long long)r * cols;
    float m = -3.4e38f;
    for (int j = 0; j < cols; ++j) m = fmaxf(m, xr[j]);
    float s = 0.f;
    for (int j = 0; j < cols; ++j) s += expf(xr[j] - m);
    for (int j = 0; j < cols; ++j) yr[j] = expf(xr[j] - m) / s;
}
"""
k = CudaKernel(SRC, "rowsoftmax")


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.side = torch.cuda.Stream()

    def forward(self, x):
        y = torch.empty_like(x)
        self.side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.side):
            k(((x.shape[0] + 127) // 128,), (128,), (x, y, x.shape[0], x.shape[1]))
        return y
