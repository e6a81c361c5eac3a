// wmma_gemm.cu: a tensor-core GEMM with the WMMA API (16x16x16 tiles, half inputs, float
// accumulators). One warp computes one 16x16 tile of C; the SASS contains HMMA instructions, so the
// sass tool reports uses_tensor_cores and the "no tensor cores" rule stays silent.
// Compile for sm_80 or newer. Assumes M, N, K are multiples of 16 and row-major A, column-major B.

#include <cuda_fp16.h>
#include <mma.h>

using namespace nvcuda;

__global__ void wmma_gemm(const half* __restrict__ a, const half* __restrict__ b, float* __restrict__ c,
                          int m, int n, int k) {
    int warp_m = (blockIdx.x * blockDim.x + threadIdx.x) / warpSize;
    int warp_n = blockIdx.y * blockDim.y + threadIdx.y;
    int row = warp_m * 16;
    int col = warp_n * 16;
    if (row >= m || col >= n) {
        return;
    }
    wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> a_frag;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::col_major> b_frag;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
    wmma::fill_fragment(acc, 0.0f);
    for (int kk = 0; kk < k; kk += 16) {
        wmma::load_matrix_sync(a_frag, a + row * k + kk, k);
        wmma::load_matrix_sync(b_frag, b + col * k + kk, k);
        wmma::mma_sync(acc, a_frag, b_frag, acc);
    }
    wmma::store_matrix_sync(c + row * n + col, acc, n, wmma::mem_row_major);
}
