# Keeps its input resident in L2 across the harness' flush: a persisting L2 carve-out and a persisting
# access-policy window on the current stream, set from the forward. The harness must flag it.
import ctypes

import torch

from kernelscope.fast import CudaKernel
from kernelscope.harness.observers.l2_persistence import CudaRuntime

relu = CudaKernel(r'''
extern "C" __global__ void relu(const float* x, float* y, long long n) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] > 0.f ? x[i] : 0.f;
}''', "relu")


class Window(ctypes.Structure):  # cudaAccessPolicyWindow
    _fields_ = [("base_ptr", ctypes.c_void_p), ("num_bytes", ctypes.c_size_t), ("hitRatio", ctypes.c_float),
                ("hitProp", ctypes.c_int), ("missProp", ctypes.c_int)]


class Value(ctypes.Union):  # cudaStreamAttrValue (cudaLaunchAttributeValue, 64 bytes)
    _fields_ = [("accessPolicyWindow", Window), ("pad", ctypes.c_char * 64)]


_rt = CudaRuntime().lib


class ModelNew(torch.nn.Module):
    def forward(self, x):
        x = x.contiguous()
        nbytes = x.numel() * x.element_size()
        _rt.cudaDeviceSetLimit(0x06, ctypes.c_size_t(min(nbytes, 32 << 20)))  # cudaLimitPersistingL2CacheSize
        v = Value()
        v.accessPolicyWindow = Window(x.data_ptr(), min(nbytes, 32 << 20), 1.0, 2, 1)  # persisting / streaming
        _rt.cudaStreamSetAttribute(ctypes.c_void_p(torch.cuda.current_stream().cuda_stream), 1, ctypes.byref(v))
        y = torch.empty_like(x)
        relu(grid=((x.numel() + 255) // 256,), block=(256,), args=(x, y, x.numel()))
        return y
