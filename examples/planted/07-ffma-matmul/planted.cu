// 07-ffma-matmul. Planted: tensor cores unused. ffma_matmul computes C = A * B (A 4096x2048, B 2048x4096,
// fp16 in, fp32 out, row-major) with a well-tiled CUDA-core kernel (128x128 block tile, 8x8 outputs per
// thread, fp16 converted to fp32 in shared memory): it is FFMA-bound, ~15x below the fp16 tensor roof.
// Fixed twin: wmma_matmul does the same product on tensor cores (nvcuda::wmma 16x16x16, fp32 accumulate).
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <mma.h>

#define CK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \
    fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); exit(1); } } while (0)

#define M 4096
#define N 4096
#define K 2048
#define BM 128   // ffma_matmul: block tile BM x BN, k-step BK, 256 threads of 8x8 outputs
#define BN 128
#define BK 16
#define WBM 64   // wmma_matmul: block tile WBM x WBN, k-step WBK, 4 warps of 32x32
#define WBN 64
#define WBK 32
#define HPAD 8

using namespace nvcuda;

extern "C" __global__ void __launch_bounds__(256, 2)
ffma_matmul(const __half* __restrict__ A, const __half* __restrict__ B, float* __restrict__ C) {
    __shared__ __align__(16) float As[BM][BK];        // A tile, row-major (read as float2 along k)
    __shared__ __align__(16) float Bs[BK][BN];        // B tile, row-major
    const int tid = threadIdx.x, tx = tid & 15, ty = tid >> 4;
    const int bm = blockIdx.y * BM, bn = blockIdx.x * BN;
    const int am = tid >> 2, ak = (tid & 3) * 4;      // A loader: rows am, am + 64; 4 halves at ak
    const int bk = tid >> 5, bc = (tid & 31) * 4;     // B loader: rows bk, bk + 8; 4 halves at bc
    float acc[8][8];
#pragma unroll
    for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[i][j] = 0.0f;

    const __half* pa = A + (size_t)(bm + am) * K + ak;
    const __half* pb = B + (size_t)bk * N + bn + bc;
#pragma unroll 1
    for (int k0 = 0; k0 < K; k0 += BK, pa += BK, pb += (size_t)BK * N) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {  // 8-byte global loads; each warp reads whole 32-byte sectors
            __half2 a[2], b[2];
            *reinterpret_cast<uint2*>(a) = *reinterpret_cast<const uint2*>(pa + h * (BM / 2) * K);
            *reinterpret_cast<uint2*>(b) = *reinterpret_cast<const uint2*>(pb + h * 8 * N);
            float2 a01 = __half22float2(a[0]), a23 = __half22float2(a[1]);
            float2 b01 = __half22float2(b[0]), b23 = __half22float2(b[1]);
            *reinterpret_cast<float4*>(&As[am + h * 64][ak]) = make_float4(a01.x, a01.y, a23.x, a23.y);
            *reinterpret_cast<float4*>(&Bs[bk + h * 8][bc]) = make_float4(b01.x, b01.y, b23.x, b23.y);
        }
        __syncthreads();
#pragma unroll
        for (int k = 0; k < BK; k += 2) {
            float2 av[8];  // rows ty*4 + i and 64 + ty*4 + i, two k values each
#pragma unroll
            for (int i = 0; i < 8; ++i)
                av[i] = *reinterpret_cast<const float2*>(&As[(i < 4 ? 0 : BM / 2 - 4) + ty * 4 + i][k]);
#pragma unroll
            for (int kk = 0; kk < 2; ++kk) {
                float4 b0 = *reinterpret_cast<const float4*>(&Bs[k + kk][tx * 4]);
                float4 b1 = *reinterpret_cast<const float4*>(&Bs[k + kk][BN / 2 + tx * 4]);
                const float b[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
                float a[8];
#pragma unroll
                for (int i = 0; i < 8; ++i) a[i] = kk == 0 ? av[i].x : av[i].y;
#pragma unroll
                for (int i = 0; i < 8; ++i)
#pragma unroll
                    for (int j = 0; j < 8; ++j)
                        acc[i][j] = fmaf(a[i], b[j], acc[i][j]);  // PLANTED
            }
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < 8; ++i) {
        int row = bm + (i < 4 ? 0 : BM / 2 - 4) + ty * 4 + i;
        float* c = C + (size_t)row * N + bn;
        *reinterpret_cast<float4*>(c + tx * 4) = make_float4(acc[i][0], acc[i][1], acc[i][2], acc[i][3]);
        *reinterpret_cast<float4*>(c + BN / 2 + tx * 4) = make_float4(acc[i][4], acc[i][5], acc[i][6], acc[i][7]);
    }
}

extern "C" __global__ void __launch_bounds__(128)
wmma_matmul(const __half* __restrict__ A, const __half* __restrict__ B, float* __restrict__ C) {
    __shared__ __align__(32) __half As[WBM][WBK + HPAD];
    __shared__ __align__(32) __half Bs[WBK][WBN + HPAD];
    const int tid = threadIdx.x, warp = tid >> 5, wm = warp >> 1, wn = warp & 1;
    const int bm = blockIdx.y * WBM, bn = blockIdx.x * WBN;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[2][2];
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < 2; ++j) wmma::fill_fragment(acc[i][j], 0.0f);

    for (int k0 = 0; k0 < K; k0 += WBK) {
#pragma unroll
        for (int c = tid; c < WBM * WBK / 8; c += 128) {  // 16-byte chunks of the A tile
            int r = c / (WBK / 8), q = (c % (WBK / 8)) * 8;
            *reinterpret_cast<uint4*>(&As[r][q]) = *reinterpret_cast<const uint4*>(A + (size_t)(bm + r) * K + k0 + q);
        }
#pragma unroll
        for (int c = tid; c < WBK * WBN / 8; c += 128) {  // 16-byte chunks of the B tile
            int r = c / (WBN / 8), q = (c % (WBN / 8)) * 8;
            *reinterpret_cast<uint4*>(&Bs[r][q]) = *reinterpret_cast<const uint4*>(B + (size_t)(k0 + r) * N + bn + q);
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < WBK; kk += 16) {
            wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> fa[2];
            wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::row_major> fb[2];
#pragma unroll
            for (int i = 0; i < 2; ++i) wmma::load_matrix_sync(fa[i], &As[wm * 32 + i * 16][kk], WBK + HPAD);
#pragma unroll
            for (int j = 0; j < 2; ++j) wmma::load_matrix_sync(fb[j], &Bs[kk][wn * 32 + j * 16], WBN + HPAD);
#pragma unroll
            for (int i = 0; i < 2; ++i)
#pragma unroll
                for (int j = 0; j < 2; ++j) wmma::mma_sync(acc[i][j], fa[i], fb[j], acc[i][j]);
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < 2; ++j)
            wmma::store_matrix_sync(C + (size_t)(bm + wm * 32 + i * 16) * N + bn + wn * 32 + j * 16, acc[i][j], N,
                                    wmma::mem_row_major);
}

int main() {
    size_t na = (size_t)M * K, nb = (size_t)K * N, nc = (size_t)M * N;
    __half* h_a = (__half*)malloc(na * sizeof(__half));
    __half* h_b = (__half*)malloc(nb * sizeof(__half));
    float* h_bad = (float*)malloc(nc * sizeof(float));
    float* h_fix = (float*)malloc(nc * sizeof(float));
    // Values k/64 with |k| <= 64: exact in fp16, products and partial sums exact in fp32.
    unsigned s = 7u;
    for (size_t i = 0; i < na; ++i) { s = s * 1664525u + 1013904223u; h_a[i] = __float2half((float)((int)((s >> 16) % 129) - 64) / 64.0f); }
    for (size_t i = 0; i < nb; ++i) { s = s * 1664525u + 1013904223u; h_b[i] = __float2half((float)((int)((s >> 16) % 129) - 64) / 64.0f); }

    __half *d_a, *d_b;
    float *d_bad, *d_fix;
    CK(cudaMalloc(&d_a, na * sizeof(__half)));
    CK(cudaMalloc(&d_b, nb * sizeof(__half)));
    CK(cudaMalloc(&d_bad, nc * sizeof(float)));
    CK(cudaMalloc(&d_fix, nc * sizeof(float)));
    CK(cudaMemcpy(d_a, h_a, na * sizeof(__half), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d_b, h_b, nb * sizeof(__half), cudaMemcpyHostToDevice));
    CK(cudaMemset(d_bad, 0, nc * sizeof(float)));
    CK(cudaMemset(d_fix, 0, nc * sizeof(float)));

    ffma_matmul<<<dim3(N / BN, M / BM), 256>>>(d_a, d_b, d_bad);
    CK(cudaGetLastError());
    wmma_matmul<<<dim3(N / WBN, M / WBM), 128>>>(d_a, d_b, d_fix);
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(h_bad, d_bad, nc * sizeof(float), cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(h_fix, d_fix, nc * sizeof(float), cudaMemcpyDeviceToHost));

    bool ok = true;
    double cb = 0, cf = 0;
    for (size_t i = 0; i < nc; ++i) {
        cb += h_bad[i]; cf += h_fix[i];
        if (!(fabs((double)h_bad[i] - h_fix[i]) <= 1e-3 * fabs((double)h_fix[i]) + 1e-3)) ok = false;
    }
    for (int t = 0; t < 64 && ok; ++t) {  // spot-check against a host dot product
        size_t r = (size_t)(t * 977) % M, c = (size_t)(t * 1553 + 11) % N;
        double ref = 0;
        for (size_t k = 0; k < K; ++k) ref += (double)__half2float(h_a[r * K + k]) * __half2float(h_b[k * N + c]);
        if (fabs(ref - h_fix[r * N + c]) > 1e-3 * fabs(ref) + 1e-3) ok = false;
    }
    printf("%s 07-ffma-matmul bad=%.6f fixed=%.6f\n", ok ? "ok" : "MISMATCH", cb, cf);
    CK(cudaFree(d_a));
    CK(cudaFree(d_b));
    CK(cudaFree(d_bad));
    CK(cudaFree(d_fix));
    free(h_a); free(h_b); free(h_bad); free(h_fix);
    return ok ? 0 : 1;
}
