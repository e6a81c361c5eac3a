# A partial rewrite: the GEMM stays in cuBLAS (torch.mm), bias + ReLU + scale are fused in its own kernel.
# Valid under the delegation policy, reported with its library share.
import torch

from kernelscope.fast import CudaKernel

epilogue = CudaKernel(r'''
extern "C" __global__ void bias_relu_half(const float* y, const float* b, float* out, long long rows, int cols) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i >= rows * cols) return;
    float v = y[i] + b[i % cols];
    out[i] = (v > 0.f ? v : 0.f) * 0.5f;
}''', "bias_relu_half")


class ModelNew(torch.nn.Module):
    def __init__(self, n_in, n_out):
        super().__init__()
        self.linear = torch.nn.Linear(n_in, n_out)  # same seed, same weights as the reference

    def forward(self, x):
        y = torch.mm(x, self.linear.weight.t())
        out = torch.empty_like(y)
        n = y.numel()
        epilogue(grid=((n + 255) // 256,), block=(256,),
                 args=(y, self.linear.bias, out, y.shape[0], y.shape[1]))
        return out
