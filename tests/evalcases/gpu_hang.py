import torch

from kernelscope.fast import CudaKernel

k = CudaKernel(r"""
extern "C" __global__ void spin(volatile int* flag) { while (flag[0] == 0) { } }
""", "spin")


class ModelNew(torch.nn.Module):
    def forward(self, x):
        flag = torch.zeros(1, dtype=torch.int32, device=x.device)
        k((1,), (1,), (flag,))
        torch.cuda.synchronize()
        return x
