# A partial rewrite as KernelBench level 2 writes them: the GEMM stays in cuBLAS (torch.matmul), bias + ReLU
# + scale are fused in its own load_inline kernel. Valid under the delegation policy, with its library share.
import torch
from torch.utils.cpp_extension import load_inline

CUDA = r'''
#include <torch/extension.h>

__global__ void fused_bias_relu_scale(const float* __restrict__ y, const float* __restrict__ b, float* out,
                                      long long n, int cols) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) out[i] = fmaxf(y[i] + b[i % cols], 0.f) * 0.5f;
}

torch::Tensor epilogue(torch::Tensor y, torch::Tensor b) {
    auto out = torch::empty_like(y);
    long long n = y.numel();
    fused_bias_relu_scale<<<(n + 255) / 256, 256, 0, at::cuda::getCurrentCUDAStream()>>>(
        y.data_ptr<float>(), b.data_ptr<float>(), out.data_ptr<float>(), n, (int)y.size(1));
    return out;
}
'''
CPP = "torch::Tensor epilogue(torch::Tensor y, torch::Tensor b);"
ext = load_inline("ks_fused_bias_relu_scale", cpp_sources=CPP,
                  cuda_sources="#include <ATen/cuda/CUDAContext.h>\n" + CUDA, functions=["epilogue"])


class ModelNew(torch.nn.Module):
    def __init__(self, n_in, n_out):
        super().__init__()
        self.linear = torch.nn.Linear(n_in, n_out)  # same seed, same weights as the reference

    def forward(self, x):
        return ext.epilogue(torch.matmul(x, self.linear.weight.t()), self.linear.bias)
