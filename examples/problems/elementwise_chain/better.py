"""Elementwise chain, better: the fused chain with 16-byte float4 loads and stores in a grid-stride
loop sized to fill the GPU once (SMs x 8 blocks of 256 threads), unrolled so each thread keeps
several loads in flight. The tail (n % 4) and unaligned pointers take a scalar grid-stride loop.

Same arithmetic as naive.py (exact mul/add rounding, PyTorch's gelu and sigmoid formulas).
"""

import functools

import torch

from kernelscope.fast import CudaKernel

CUDA_SRC = r"""
__device__ __forceinline__ float gelu_tanh_sigmoid(float v, float scale, float bias) {
    float z = __fadd_rn(__fmul_rn(v, scale), bias);
    float inner = 0.7978845608028654f * (z + 0.044715f * (z * z * z));
    float g = 0.5f * z * (1.0f + tanhf(inner));
    return g * (1.0f / (1.0f + expf(-v)));
}

extern "C" __global__ void __launch_bounds__(256)
chain_vec4(const float* __restrict__ x, float* __restrict__ y, long long n, float scale, float bias) {
    const long long tid = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    const long long stride = (long long)gridDim.x * blockDim.x;
    const bool aligned = ((((unsigned long long)x | (unsigned long long)y) & 15ull) == 0);
    const long long n4 = aligned ? (n >> 2) : 0;
    const float4* x4 = reinterpret_cast<const float4*>(x);
    float4* y4 = reinterpret_cast<float4*>(y);
#pragma unroll 4
    for (long long i = tid; i < n4; i += stride) {
        float4 v = x4[i];
        float4 o;
        o.x = gelu_tanh_sigmoid(v.x, scale, bias);
        o.y = gelu_tanh_sigmoid(v.y, scale, bias);
        o.z = gelu_tanh_sigmoid(v.z, scale, bias);
        o.w = gelu_tanh_sigmoid(v.w, scale, bias);
        y4[i] = o;
    }
    for (long long i = n4 * 4 + tid; i < n; i += stride) y[i] = gelu_tanh_sigmoid(x[i], scale, bias);
}
"""

KERNEL = CudaKernel(CUDA_SRC, "chain_vec4")
KERNELS = [KERNEL]
THREADS = 256
BLOCKS_PER_SM = 8  # 8 x 256 = 2048 threads, the per-SM maximum on sm_80/sm_90


@functools.cache
def _num_sms(device: torch.device) -> int:
    if device.type != "cuda":  # only for dry runs off the GPU
        return 132
    return torch.cuda.get_device_properties(device).multi_processor_count


class ModelNew(torch.nn.Module):
    def __init__(self, scale: float = 1.5, bias: float = 0.25) -> None:
        super().__init__()
        self.scale = float(scale)
        self.bias = float(bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        blocks = max(1, min((n // 4 + THREADS - 1) // THREADS, _num_sms(x.device) * BLOCKS_PER_SM))
        KERNEL(grid=(blocks,), block=(THREADS,), args=(x, y, n, self.scale, self.bias))
        return y
