"""Softmax through ``torch.utils.cpp_extension.load_inline``: the same kernel as ``better.py``
(``KERNEL_SRC`` is byte-for-byte its ``CUDA_SRC``), built as a C++/CUDA extension with a launcher.

Used to compare the fast path (NVRTC through ``kernelscope.fast``) with the usual KernelBench
route. The extension is built when this module is imported, as KernelBench candidates do; its name
carries a hash of the sources and flags, so a rerun with the same sources reuses the build in
``TORCH_EXTENSIONS_DIR`` and a changed source never collides with an old build.
"""

import hashlib

import torch
from torch.utils.cpp_extension import load_inline

KERNEL_SRC = r"""
#define SOFTMAX_THREADS 256
#define NEG_BIG (-3.402823466e+38f)

__device__ __forceinline__ void softmax_merge(float& m, float& s, float m2, float s2) {
    float mn = fmaxf(m, m2);
    s = s * expf(m - mn) + s2 * expf(m2 - mn);
    m = mn;
}

__device__ __forceinline__ void softmax_warp_merge(float& m, float& s) {
    for (int off = 16; off > 0; off >>= 1) {
        float m2 = __shfl_xor_sync(0xffffffffu, m, off);
        float s2 = __shfl_xor_sync(0xffffffffu, s, off);
        softmax_merge(m, s, m2, s2);
    }
}

extern "C" __global__ void __launch_bounds__(SOFTMAX_THREADS)
softmax_rows(const float* __restrict__ x, float* __restrict__ y, int rows, int cols) {
    __shared__ float s_max[32];
    __shared__ float s_sum[32];
    const int row = blockIdx.x;
    if (row >= rows) return;
    const float* xr = x + (long long)row * cols;
    float* yr = y + (long long)row * cols;
    const bool vec = ((cols & 3) == 0) && ((((unsigned long long)x | (unsigned long long)y) & 15ull) == 0);

    float m = NEG_BIG;
    float s = 0.0f;
    if (vec) {
        const float4* x4 = reinterpret_cast<const float4*>(xr);
        const int n4 = cols >> 2;
#pragma unroll 4
        for (int i = threadIdx.x; i < n4; i += blockDim.x) {
            float4 v = x4[i];
            float mn = fmaxf(m, fmaxf(fmaxf(v.x, v.y), fmaxf(v.z, v.w)));
            s = s * expf(m - mn) + expf(v.x - mn) + expf(v.y - mn) + expf(v.z - mn) + expf(v.w - mn);
            m = mn;
        }
    } else {
        for (int i = threadIdx.x; i < cols; i += blockDim.x) {
            float v = xr[i];
            float mn = fmaxf(m, v);
            s = s * expf(m - mn) + expf(v - mn);
            m = mn;
        }
    }

    softmax_warp_merge(m, s);
    const int warp = threadIdx.x >> 5;
    const int lane = threadIdx.x & 31;
    const int nwarps = (blockDim.x + 31) >> 5;
    if (lane == 0) {
        s_max[warp] = m;
        s_sum[warp] = s;
    }
    __syncthreads();
    if (warp == 0) {
        m = lane < nwarps ? s_max[lane] : NEG_BIG;
        s = lane < nwarps ? s_sum[lane] : 0.0f;
        softmax_warp_merge(m, s);
        if (lane == 0) {
            s_max[0] = m;
            s_sum[0] = s;
        }
    }
    __syncthreads();
    m = s_max[0];
    s = s_sum[0];

    if (vec) {
        const float4* x4 = reinterpret_cast<const float4*>(xr);
        float4* y4 = reinterpret_cast<float4*>(yr);
        const int n4 = cols >> 2;
#pragma unroll 4
        for (int i = threadIdx.x; i < n4; i += blockDim.x) {
            float4 v = x4[i];
            float4 o;
            o.x = expf(v.x - m) / s;
            o.y = expf(v.y - m) / s;
            o.z = expf(v.z - m) / s;
            o.w = expf(v.w - m) / s;
            y4[i] = o;
        }
    } else {
        for (int i = threadIdx.x; i < cols; i += blockDim.x) yr[i] = expf(xr[i] - m) / s;
    }
}
"""

LAUNCHER_SRC = r"""
torch::Tensor softmax_forward(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda(), "softmax_forward: x must be a CUDA tensor");
    TORCH_CHECK(x.dim() == 2, "softmax_forward: x must be 2-D");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "softmax_forward: x must be float32");
    const c10::cuda::CUDAGuard guard(x.device());
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    const int rows = static_cast<int>(xc.size(0));
    const int cols = static_cast<int>(xc.size(1));
    if (rows > 0 && cols > 0) {
        softmax_rows<<<rows, SOFTMAX_THREADS, 0, c10::cuda::getCurrentCUDAStream()>>>(
            xc.data_ptr<float>(), y.data_ptr<float>(), rows, cols);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
    }
    return y;
}
"""

CUDA_SRC = (
    "#include <torch/extension.h>\n"
    "#include <c10/cuda/CUDAException.h>\n"
    "#include <c10/cuda/CUDAGuard.h>\n"
    "#include <c10/cuda/CUDAStream.h>\n"
    + KERNEL_SRC
    + LAUNCHER_SRC
)
CPP_SRC = "torch::Tensor softmax_forward(torch::Tensor x);\n"
EXTRA_CUDA_CFLAGS = ["-O3"]
EXTENSION_NAME = "ks_softmax_" + hashlib.sha256(
    "\0".join([CPP_SRC, CUDA_SRC, *EXTRA_CUDA_CFLAGS]).encode()
).hexdigest()[:16]

softmax_ext = load_inline(
    name=EXTENSION_NAME,
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=["softmax_forward"],
    extra_cuda_cflags=EXTRA_CUDA_CFLAGS,
    verbose=False,
)


class ModelNew(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return softmax_ext.softmax_forward(x)
