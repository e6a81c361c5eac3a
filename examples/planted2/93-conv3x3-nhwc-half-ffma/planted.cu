// 93-conv3x3-nhwc-half-ffma. Planted: tensor cores unused. A 3x3 convolution (stride 1, pad 1) on FP16 NHWC
// activations, 32x56x56x128 -> 128 channels, written as an implicit GEMM (M = 100352 pixels, N = 128, K = 1152):
// 128x128 output tiles, im2col slices of 32 channels staged in shared memory as half, and an 8x8 register tile
// per thread whose inner loop converts the halves to float and runs 64 FFMAs per k (FP32 accumulation).
// 29.6 GFLOP with over 300 FLOPs per DRAM byte: the FMA pipe is the limit.
// Fixed twin: the same tiles, loads and FP32 accumulation on the tensor cores (nvcuda::wmma m16n16k16, half in,
// float accumulators), 8 warps of 64x32 outputs each.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cmath>
#include <vector>
#include <cuda_runtime.h>
#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
    fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); exit(1); } } while (0)
#define LAUNCH(k, g, b, ...) do { k<<<(g), (b)>>>(__VA_ARGS__); CK(cudaGetLastError()); } while (0)
static unsigned g_seed = 12345u;
inline unsigned urand() { g_seed = g_seed * 1664525u + 1013904223u; return g_seed; }
inline float frand() { return (urand() >> 8) * (1.0f / 16777216.0f); }  // [0, 1)
template <class T> static T* dnew(size_t n) {
    T* p; CK(cudaMalloc(&p, n * sizeof(T))); CK(cudaMemset(p, 0, n * sizeof(T))); return p; }
template <class T> static T* dcopy(const std::vector<T>& h) {
    T* p = dnew<T>(h.size()); CK(cudaMemcpy(p, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice)); return p; }
template <class T> static std::vector<T> hcopy(const T* d, size_t n) {
    std::vector<T> h(n); CK(cudaMemcpy(h.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost)); return h; }
// "ok <case> ..." and 0 when every element of a (bad or tested) matches b (fixed or reference) within tol
static int verdict(const char* name, const std::vector<float>& a, const std::vector<float>& b, double tol) {
    double sa = 0, sb = 0, worst = a.size() == b.size() ? 0 : 1e30;
    for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
        sa += a[i]; sb += b[i];
        double e = fabs((double)a[i] - b[i]) / (fabs((double)b[i]) + 1e-2);
        if (std::isnan(e) || e > worst) worst = std::isnan(e) ? 1e30 : e;
    }
    bool ok = worst <= tol;
    printf("%s %s bad=%.6g fixed=%.6g max_rel_err=%.3g\n", ok ? "ok" : "MISMATCH", name, sa, sb, worst);
    return ok ? 0 : 1;
}
#include <cuda_fp16.h>
#include <mma.h>
using namespace nvcuda;

#define NB 32
#define HH 56
#define WW 56
#define CI 128
#define CO 128
#define MPIX (NB * HH * WW)      // 100352 output pixels = GEMM rows
#define KDIM (9 * CI)            // 1152 = GEMM depth, ordered (r, s, c)
#define BM 128
#define BN 128
#define BK 32
#define LDA (BK + 8)             // halves per staged A row (80 bytes)
#define LDB (BN + 8)             // halves per staged B row (272 bytes)

// Stages one BK-deep slice: A = im2col rows of the tile's 128 pixels (32 consecutive channels of one tap,
// 64 contiguous bytes of x, zero outside the image), B = 32 rows of the KRSC weights (all 128 outputs).
__device__ __forceinline__ void stage_slice(const __half* __restrict__ x, const __half* __restrict__ w,
                                            __half (*As)[LDA], __half (*Bs)[LDB], int m0, int kt) {
    const int tid = threadIdx.x;
    const int tap = kt / CI, c0 = kt % CI, r = tap / 3, s = tap % 3;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const int row = (tid >> 2) + 64 * h, part = (tid & 3) * 8;
        const int m = m0 + row, n = m / (HH * WW), pix = m % (HH * WW);
        const int ih = pix / WW + r - 1, iw = pix % WW + s - 1;
        uint4 v = make_uint4(0u, 0u, 0u, 0u);
        if (ih >= 0 && ih < HH && iw >= 0 && iw < WW)
            v = *reinterpret_cast<const uint4*>(x + ((size_t)(n * HH + ih) * WW + iw) * CI + c0 + part);
        *reinterpret_cast<uint4*>(&As[row][part]) = v;
    }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const int chunk = tid + 256 * h, krow = chunk >> 4, col = (chunk & 15) * 8;
        *reinterpret_cast<uint4*>(&Bs[krow][col]) =
            *reinterpret_cast<const uint4*>(w + (size_t)(kt + krow) * CO + col);
    }
}

__device__ __forceinline__ void unpack8(uint4 q, float* f) {
    const __half2* h = reinterpret_cast<const __half2*>(&q);
#pragma unroll
    for (int j = 0; j < 4; ++j) { float2 t = __half22float2(h[j]); f[2 * j] = t.x; f[2 * j + 1] = t.y; }
}

// Thread (tx, ty) of a 16x16 grid owns pixels ty + 16 i (i < 8) and output channels 8 tx .. 8 tx + 7.
extern "C" __global__ void __launch_bounds__(256, 2)
conv3x3_ffma(const __half* __restrict__ x, const __half* __restrict__ w, float* __restrict__ y) {
    __shared__ __align__(16) __half As[BM][LDA];
    __shared__ __align__(16) __half Bs[BK][LDB];
    const int tx = threadIdx.x & 15, ty = threadIdx.x >> 4, m0 = blockIdx.x * BM;
    float acc[8][8];
#pragma unroll
    for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[i][j] = 0.f;
    for (int kt = 0; kt < KDIM; kt += BK) {
        stage_slice(x, w, As, Bs, m0, kt);
        __syncthreads();
#pragma unroll
        for (int k = 0; k < BK; k += 2) {
            float a0[8], a1[8], b0[8], b1[8];
#pragma unroll
            for (int i = 0; i < 8; ++i) {
                float2 t = __half22float2(*reinterpret_cast<const __half2*>(&As[ty + 16 * i][k]));
                a0[i] = t.x; a1[i] = t.y;
            }
            unpack8(*reinterpret_cast<const uint4*>(&Bs[k][tx * 8]), b0);
            unpack8(*reinterpret_cast<const uint4*>(&Bs[k + 1][tx * 8]), b1);
#pragma unroll
            for (int i = 0; i < 8; ++i)
#pragma unroll
                for (int j = 0; j < 8; ++j) acc[i][j] = fmaf(a1[i], b1[j], fmaf(a0[i], b0[j], acc[i][j]));  // PLANTED
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < 8; ++i) {
        float4* dst = reinterpret_cast<float4*>(y + (size_t)(m0 + ty + 16 * i) * CO + tx * 8);
        dst[0] = make_float4(acc[i][0], acc[i][1], acc[i][2], acc[i][3]);
        dst[1] = make_float4(acc[i][4], acc[i][5], acc[i][6], acc[i][7]);
    }
}

// Warp wid owns rows 64 (wid >> 2) .. + 63 and columns 32 (wid & 3) .. + 31 of the 128x128 tile: 4x2 fragments.
extern "C" __global__ void __launch_bounds__(256, 2)
conv3x3_wmma(const __half* __restrict__ x, const __half* __restrict__ w, float* __restrict__ y) {
    __shared__ __align__(128) __half As[BM][LDA];
    __shared__ __align__(128) __half Bs[BK][LDB];
    const int wid = threadIdx.x >> 5, wm = (wid >> 2) * 64, wn = (wid & 3) * 32, m0 = blockIdx.x * BM;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[4][2];
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 2; ++j) wmma::fill_fragment(acc[i][j], 0.f);
    for (int kt = 0; kt < KDIM; kt += BK) {
        stage_slice(x, w, As, Bs, m0, kt);
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < BK; kk += 16) {
            wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> a[4];
            wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::row_major> b[2];
#pragma unroll
            for (int i = 0; i < 4; ++i) wmma::load_matrix_sync(a[i], &As[wm + 16 * i][kk], LDA);
#pragma unroll
            for (int j = 0; j < 2; ++j) wmma::load_matrix_sync(b[j], &Bs[kk][wn + 16 * j], LDB);
#pragma unroll
            for (int i = 0; i < 4; ++i)
#pragma unroll
                for (int j = 0; j < 2; ++j) wmma::mma_sync(acc[i][j], a[i], b[j], acc[i][j]);
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 2; ++j)
            wmma::store_matrix_sync(y + (size_t)(m0 + wm + 16 * i) * CO + wn + 16 * j, acc[i][j], CO,
                                    wmma::mem_row_major);
}

int main() {
    std::vector<__half> hx((size_t)MPIX * CI), hw((size_t)KDIM * CO);
    for (auto& v : hx) v = __float2half(2.f * frand() - 1.f);
    for (auto& v : hw) v = __float2half(0.04f * frand() - 0.02f);
    __half *dx = dcopy(hx), *dw = dcopy(hw);
    float *dbad = dnew<float>((size_t)MPIX * CO), *dfix = dnew<float>((size_t)MPIX * CO);
    LAUNCH(conv3x3_ffma, MPIX / BM, 256, dx, dw, dbad);
    LAUNCH(conv3x3_wmma, MPIX / BM, 256, dx, dw, dfix);
    CK(cudaDeviceSynchronize());
    return verdict("93-conv3x3-nhwc-half-ffma", hcopy(dbad, (size_t)MPIX * CO), hcopy(dfix, (size_t)MPIX * CO), 2e-3);
}
