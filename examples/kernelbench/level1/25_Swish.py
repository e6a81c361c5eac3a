"""KernelBench level 1, 25_Swish: Swish as one elementwise CUDA kernel, knob-annotated for the offline
proposer (`kernelscope bench KERNELBENCH --level 1 --problems 25 --candidates examples/kernelbench
--proposer offline`). Same function as the reference's x * torch.sigmoid(x) (fp32; v / (1.0f + expf(-v))).

- THREADS: threads per block.
- VEC: floats per load and store (1, 2 or 4: float, float2, float4).
- ITEMS: vectors each thread loads per loop trip before computing on them.
- BLOCKS_PER_SM: the grid is SMs x this many blocks and threads stride through the array; 0 launches one
  block per THREADS x ITEMS vectors instead.

Indices are 64-bit: KernelBench's input has 4096 x 393216 elements (6 GiB), past 2^31.
"""

import functools

import torch

from kernelscope.fast import CudaKernel

# @knob THREADS 128 256 512 1024
# @knob VEC 1 2 4
# @knob ITEMS 1 2 4
# @knob BLOCKS_PER_SM 2 4 8 0

CUDA_SRC = r"""
#if VEC == 4
typedef float4 vec_t;
#elif VEC == 2
typedef float2 vec_t;
#else
typedef float vec_t;
#endif

__device__ __forceinline__ float op(float v, float slope) {
    return v / (1.0f + expf(-v));
}

extern "C" __global__ void __launch_bounds__(THREADS)
swish_knobs(const float* __restrict__ x, float* __restrict__ y, long long n, float slope) {
    const vec_t* xv = reinterpret_cast<const vec_t*>(x);
    vec_t* yv = reinterpret_cast<vec_t*>(y);
    const long long nv = n / VEC;
    const long long stride = (long long)gridDim.x * THREADS;
    for (long long base = blockIdx.x * (long long)THREADS + threadIdx.x; base < nv; base += stride * ITEMS) {
        vec_t v[ITEMS];
#pragma unroll
        for (int k = 0; k < ITEMS; ++k) if (base + k * stride < nv) v[k] = xv[base + k * stride];
#pragma unroll
        for (int k = 0; k < ITEMS; ++k) {
            if (base + k * stride >= nv) break;
            float* a = reinterpret_cast<float*>(&v[k]);
#pragma unroll
            for (int j = 0; j < VEC; ++j) a[j] = op(a[j], slope);
            yv[base + k * stride] = v[k];
        }
    }
    for (long long i = nv * VEC + blockIdx.x * (long long)THREADS + threadIdx.x; i < n; i += stride)  // the tail
        y[i] = op(x[i], slope);
}
"""

KERNEL = CudaKernel(CUDA_SRC, "swish_knobs", options=(
    "--std=c++17", f"-DTHREADS={THREADS}", f"-DVEC={VEC}", f"-DITEMS={ITEMS}"))  # noqa: F821
KERNELS = [KERNEL]


@functools.cache
def _num_sms(device: torch.device) -> int:
    if device.type != "cuda":  # only for dry runs off the GPU
        return 132
    return torch.cuda.get_device_properties(device).multi_processor_count


class ModelNew(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.slope = 0.0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dtype != torch.float32:
            raise ValueError(f"swish_knobs takes float32, got {x.dtype}")
        x = x.contiguous()
        n = x.numel()
        y = torch.empty_like(x)
        per_block = THREADS * ITEMS  # noqa: F821
        one_pass = (n // VEC + per_block - 1) // per_block  # noqa: F821
        blocks = one_pass if BLOCKS_PER_SM == 0 else min(one_pass, _num_sms(x.device) * BLOCKS_PER_SM)  # noqa: F821
        KERNEL(grid=(max(1, blocks),), block=(THREADS,), args=(x, y, n, self.slope))  # noqa: F821
        return y
