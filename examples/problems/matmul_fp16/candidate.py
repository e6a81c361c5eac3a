"""Half matmul, knob-annotated for the offline proposer: the WMMA tensor-core GEMM of better.py with
its tiling as knobs. A hard space on purpose: good tilings are rare, and many combinations spill,
run out of static shared memory (48 KiB) or leave the tensor cores starved.

- BM, BN: the block's tile of C (rows, columns).
- BK: the K slice staged in shared memory per step (double-buffered through registers).
- WARPS_M, WARPS_N: the block's warps laid out over the tile; each warp owns a (BM / WARPS_M) x
  (BN / WARPS_N) sub-tile of 16x16x16 WMMA fragments. A warp tile that is not a multiple of 16 is
  refused at import (the configuration fails, as an invalid one should).

The declared order starts from a small, slow tiling (64x64x16, one warp);
`kernelscope optimize examples/problems/matmul_fp16` searches the 243 configurations.
"""

import torch

from kernelscope.fast import CudaKernel

# @knob BM 64 128 256
# @knob BN 64 128 256
# @knob BK 16 32 64
# @knob WARPS_M 1 2 4
# @knob WARPS_N 1 2 4

if (BM // WARPS_M) % 16 or (BN // WARPS_N) % 16:  # noqa: F821
    raise ValueError(f"warp tile {BM // WARPS_M}x{BN // WARPS_N} is not a multiple of 16")  # noqa: F821

CUDA_SRC = r"""
#include <cuda_fp16.h>
#include <mma.h>

using namespace nvcuda;

#define THREADS (32 * WARPS_M * WARPS_N)
#define WTM (BM / WARPS_M)
#define WTN (BN / WARPS_N)
#define FM (WTM / 16)
#define FN (WTN / 16)
#define A_LD (BK + 8)
#define B_LD (BN + 8)
#define A_CHUNKS (BM * BK / 8)
#define B_CHUNKS (BK * BN / 8)
#define A_PER ((A_CHUNKS + THREADS - 1) / THREADS)
#define B_PER ((B_CHUNKS + THREADS - 1) / THREADS)

__device__ __forceinline__ uint4 load_chunk(const __half* p, long long ld, int r, int c, int rmax, int cmax) {
    if (r < rmax && c < cmax) return *reinterpret_cast<const uint4*>(p + (long long)r * ld + c);
    return make_uint4(0u, 0u, 0u, 0u);
}

extern "C" __global__ void __launch_bounds__(THREADS)
matmul_knobs(const __half* __restrict__ a, const __half* __restrict__ b, __half* __restrict__ c,
             int m, int n, int k) {
    __shared__ __align__(128) __half As[2][BM * A_LD];
    __shared__ __align__(128) __half Bs[2][BK * B_LD];
    __shared__ __align__(128) float Cs[WARPS_M * WARPS_N][16 * 16];

    const int tid = threadIdx.x;
    const int warp = tid >> 5;
    const int lane = tid & 31;
    const int warp_m = warp / WARPS_N;
    const int warp_n = warp % WARPS_N;
    const int bm = blockIdx.y * BM;
    const int bn = blockIdx.x * BN;

    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[FM][FN];
#pragma unroll
    for (int i = 0; i < FM; ++i)
#pragma unroll
        for (int j = 0; j < FN; ++j) wmma::fill_fragment(acc[i][j], 0.0f);

    uint4 ra[A_PER], rb[B_PER];
    const int ktiles = (k + BK - 1) / BK;

#define LOAD_TILES(k0)                                                                              \
    _Pragma("unroll") for (int i = 0; i < A_PER; ++i) {                                             \
        int ch = tid + i * THREADS;                                                                 \
        if (ch < A_CHUNKS) ra[i] = load_chunk(a, k, bm + ch / (BK / 8), (k0) + (ch % (BK / 8)) * 8, m, k); \
    }                                                                                               \
    _Pragma("unroll") for (int i = 0; i < B_PER; ++i) {                                             \
        int ch = tid + i * THREADS;                                                                 \
        if (ch < B_CHUNKS) rb[i] = load_chunk(b, n, (k0) + ch / (BN / 8), bn + (ch % (BN / 8)) * 8, k, n); \
    }
#define STORE_TILES(buf)                                                                            \
    _Pragma("unroll") for (int i = 0; i < A_PER; ++i) {                                             \
        int ch = tid + i * THREADS;                                                                 \
        if (ch < A_CHUNKS)                                                                          \
            *reinterpret_cast<uint4*>(&As[buf][(ch / (BK / 8)) * A_LD + (ch % (BK / 8)) * 8]) = ra[i]; \
    }                                                                                               \
    _Pragma("unroll") for (int i = 0; i < B_PER; ++i) {                                             \
        int ch = tid + i * THREADS;                                                                 \
        if (ch < B_CHUNKS)                                                                          \
            *reinterpret_cast<uint4*>(&Bs[buf][(ch / (BN / 8)) * B_LD + (ch % (BN / 8)) * 8]) = rb[i]; \
    }

    LOAD_TILES(0)
    STORE_TILES(0)
    __syncthreads();

    for (int kt = 0; kt < ktiles; ++kt) {
        const int buf = kt & 1;
        const bool more = kt + 1 < ktiles;
        if (more) {
            LOAD_TILES((kt + 1) * BK)
        }
#pragma unroll
        for (int kk = 0; kk < BK; kk += 16) {
            wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> af[FM];
            wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::row_major> bf[FN];
#pragma unroll
            for (int i = 0; i < FM; ++i)
                wmma::load_matrix_sync(af[i], &As[buf][(warp_m * WTM + i * 16) * A_LD + kk], A_LD);
#pragma unroll
            for (int j = 0; j < FN; ++j)
                wmma::load_matrix_sync(bf[j], &Bs[buf][kk * B_LD + warp_n * WTN + j * 16], B_LD);
#pragma unroll
            for (int i = 0; i < FM; ++i)
#pragma unroll
                for (int j = 0; j < FN; ++j) wmma::mma_sync(acc[i][j], af[i], bf[j], acc[i][j]);
        }
        if (more) {
            STORE_TILES(buf ^ 1)
        }
        __syncthreads();
    }

    // Epilogue: fragment -> per-warp float scratch -> half, 8 halves (16 bytes) per lane.
    float* scratch = Cs[warp];
    const int er = lane >> 1;
    const int ec = (lane & 1) * 8;
#pragma unroll
    for (int i = 0; i < FM; ++i) {
#pragma unroll
        for (int j = 0; j < FN; ++j) {
            wmma::store_matrix_sync(scratch, acc[i][j], 16, wmma::mem_row_major);
            __syncwarp();
            const int grow = bm + warp_m * WTM + i * 16 + er;
            const int gcol = bn + warp_n * WTN + j * 16 + ec;
            if (grow < m && gcol < n) {
                const float* s = scratch + er * 16 + ec;
                uint4 packed;
                __half2* h = reinterpret_cast<__half2*>(&packed);
                h[0] = __floats2half2_rn(s[0], s[1]);
                h[1] = __floats2half2_rn(s[2], s[3]);
                h[2] = __floats2half2_rn(s[4], s[5]);
                h[3] = __floats2half2_rn(s[6], s[7]);
                *reinterpret_cast<uint4*>(c + (long long)grow * n + gcol) = packed;
            }
            __syncwarp();
        }
    }
}
"""

KERNEL = CudaKernel(CUDA_SRC, "matmul_knobs", options=(
    "--std=c++17", f"-DBM={BM}", f"-DBN={BN}", f"-DBK={BK}", f"-DWARPS_M={WARPS_M}",  # noqa: F821
    f"-DWARPS_N={WARPS_N}"))  # noqa: F821
KERNELS = [KERNEL]
THREADS = 32 * WARPS_M * WARPS_N  # noqa: F821


class ModelNew(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        a = a.contiguous()
        b = b.contiguous()
        if a.dtype != torch.float16 or b.dtype != torch.float16:
            raise TypeError("matmul_knobs takes float16 inputs")
        m, k = a.shape
        k2, n = b.shape
        if k != k2:
            raise ValueError(f"inner dimensions differ: {k} vs {k2}")
        if k % 8 or n % 8:
            raise ValueError(f"matmul_knobs needs K and N to be multiples of 8 (16-byte rows); got K={k}, N={n}")
        c = torch.empty((m, n), dtype=torch.float16, device=a.device)
        KERNEL(grid=((n + BN - 1) // BN, (m + BM - 1) // BM), block=(THREADS,), args=(a, b, c, m, n, k))  # noqa: F821
        return c
