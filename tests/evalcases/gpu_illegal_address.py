import torch

from kernelscope.fast import CudaKernel

k = CudaKernel(r"""
extern "C" __global__ void boom(float* y) { float* bad = (float*)0x10; bad[threadIdx.x] = y[0]; }
""", "boom")


class ModelNew(torch.nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        k((1,), (32,), (y,))
        torch.cuda.synchronize()
        return y
