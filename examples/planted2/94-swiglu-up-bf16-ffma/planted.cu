// 94-swiglu-up-bf16-ffma. Planted: tensor cores unused. The first half of a SwiGLU MLP block on BF16 weights and
// activations: h = silu(X Wg) * (X Wu) for 4096 tokens, model width 1024, hidden width 2048 (two GEMMs sharing
// the X tile, 34.4 GFLOP, FP32 accumulation, FP32 output). 128x64 output tiles with X, Wg and Wu slices of depth
// 32 staged in shared memory; each thread keeps 8x4 gate and 8x4 up accumulators in registers and its inner loop
// unpacks bf16 pairs to float and runs 64 FFMAs per k. Hundreds of FLOPs per DRAM byte: the FMA pipe is the limit.
// Fixed twin: the same tiles and staging, products on the tensor cores (nvcuda::wmma m16n16k16, bf16 in, float
// accumulators), the SiLU-gate epilogue applied to the accumulator fragments before they are stored.
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
#include <cuda_bf16.h>
#include <mma.h>
using namespace nvcuda;

#define TOK 4096                 // tokens (GEMM rows)
#define DM 1024                  // model width (GEMM depth)
#define DF 2048                  // hidden width (columns of Wg and of Wu)
#define BM 128
#define BN 64
#define BK 32
#define LDA (BK + 8)             // bf16 per staged X row (80 bytes)
#define LDB (BN + 8)             // bf16 per staged W row (144 bytes)

struct Tiles {
    __nv_bfloat16 a[BM][LDA];
    __nv_bfloat16 g[BK][LDB];
    __nv_bfloat16 u[BK][LDB];
};

// X rows t0.. (128 x 32) and the matching 32 x 64 slices of Wg and Wu, 16 bytes a thread per copy.
__device__ __forceinline__ void stage_slice(const __nv_bfloat16* __restrict__ X, const __nv_bfloat16* __restrict__ Wg,
                                            const __nv_bfloat16* __restrict__ Wu, Tiles& s, int t0, int n0, int kt) {
    const int tid = threadIdx.x;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const int row = (tid >> 2) + 64 * h, part = (tid & 3) * 8;
        *reinterpret_cast<uint4*>(&s.a[row][part]) =
            *reinterpret_cast<const uint4*>(X + (size_t)(t0 + row) * DM + kt + part);
    }
    const int krow = tid >> 3, col = (tid & 7) * 8;
    const size_t src = (size_t)(kt + krow) * DF + n0 + col;
    *reinterpret_cast<uint4*>(&s.g[krow][col]) = *reinterpret_cast<const uint4*>(Wg + src);
    *reinterpret_cast<uint4*>(&s.u[krow][col]) = *reinterpret_cast<const uint4*>(Wu + src);
}

__device__ __forceinline__ float silu_gate(float g, float u) { return g / (1.f + expf(-g)) * u; }

__device__ __forceinline__ void unpack4(uint2 q, float* f) {
    const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&q);
    float2 lo = __bfloat1622float2(h[0]), hi = __bfloat1622float2(h[1]);
    f[0] = lo.x; f[1] = lo.y; f[2] = hi.x; f[3] = hi.y;
}

// Thread (tx, ty) of a 16x16 grid owns tokens t0 + ty + 16 i (i < 8) and hidden units n0 + 4 tx .. + 3.
extern "C" __global__ void __launch_bounds__(256, 2)
swiglu_up_ffma(const __nv_bfloat16* __restrict__ X, const __nv_bfloat16* __restrict__ Wg,
               const __nv_bfloat16* __restrict__ Wu, float* __restrict__ H) {
    __shared__ __align__(16) Tiles s;
    const int tx = threadIdx.x & 15, ty = threadIdx.x >> 4, n0 = blockIdx.x * BN, t0 = blockIdx.y * BM;
    float g[8][4], u[8][4];
#pragma unroll
    for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) g[i][j] = u[i][j] = 0.f;
    for (int kt = 0; kt < DM; kt += BK) {
        stage_slice(X, Wg, Wu, s, t0, n0, kt);
        __syncthreads();
#pragma unroll
        for (int k = 0; k < BK; k += 2) {
            float a0[8], a1[8], g0[4], g1[4], u0[4], u1[4];
#pragma unroll
            for (int i = 0; i < 8; ++i) {
                float2 t = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&s.a[ty + 16 * i][k]));
                a0[i] = t.x; a1[i] = t.y;
            }
            unpack4(*reinterpret_cast<const uint2*>(&s.g[k][tx * 4]), g0);
            unpack4(*reinterpret_cast<const uint2*>(&s.g[k + 1][tx * 4]), g1);
            unpack4(*reinterpret_cast<const uint2*>(&s.u[k][tx * 4]), u0);
            unpack4(*reinterpret_cast<const uint2*>(&s.u[k + 1][tx * 4]), u1);
#pragma unroll
            for (int i = 0; i < 8; ++i)
#pragma unroll
                for (int j = 0; j < 4; ++j) { g[i][j] = fmaf(a1[i], g1[j], fmaf(a0[i], g0[j], g[i][j])); u[i][j] = fmaf(a1[i], u1[j], fmaf(a0[i], u0[j], u[i][j])); }  // PLANTED
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < 8; ++i)
        *reinterpret_cast<float4*>(H + (size_t)(t0 + ty + 16 * i) * DF + n0 + tx * 4) =
            make_float4(silu_gate(g[i][0], u[i][0]), silu_gate(g[i][1], u[i][1]),
                        silu_gate(g[i][2], u[i][2]), silu_gate(g[i][3], u[i][3]));
}

// Warp wid owns tokens 32 (wid >> 1) .. + 31 and hidden units 32 (wid & 1) .. + 31: 2x2 gate and 2x2 up fragments.
extern "C" __global__ void __launch_bounds__(256, 2)
swiglu_up_wmma(const __nv_bfloat16* __restrict__ X, const __nv_bfloat16* __restrict__ Wg,
               const __nv_bfloat16* __restrict__ Wu, float* __restrict__ H) {
    __shared__ __align__(128) Tiles s;
    const int wid = threadIdx.x >> 5, wm = (wid >> 1) * 32, wn = (wid & 1) * 32;
    const int n0 = blockIdx.x * BN, t0 = blockIdx.y * BM;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> g[2][2], u[2][2];
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < 2; ++j) { wmma::fill_fragment(g[i][j], 0.f); wmma::fill_fragment(u[i][j], 0.f); }
    for (int kt = 0; kt < DM; kt += BK) {
        stage_slice(X, Wg, Wu, s, t0, n0, kt);
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < BK; kk += 16) {
            wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> a[2];
            wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::row_major> bg[2], bu[2];
#pragma unroll
            for (int i = 0; i < 2; ++i) wmma::load_matrix_sync(a[i], &s.a[wm + 16 * i][kk], LDA);
#pragma unroll
            for (int j = 0; j < 2; ++j) {
                wmma::load_matrix_sync(bg[j], &s.g[kk][wn + 16 * j], LDB);
                wmma::load_matrix_sync(bu[j], &s.u[kk][wn + 16 * j], LDB);
            }
#pragma unroll
            for (int i = 0; i < 2; ++i)
#pragma unroll
                for (int j = 0; j < 2; ++j) {
                    wmma::mma_sync(g[i][j], a[i], bg[j], g[i][j]);
                    wmma::mma_sync(u[i][j], a[i], bu[j], u[i][j]);
                }
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < 2; ++j) {
            // gate and up accumulators share one fragment layout: element t of both is the same (token, unit)
#pragma unroll
            for (int t = 0; t < g[i][j].num_elements; ++t) g[i][j].x[t] = silu_gate(g[i][j].x[t], u[i][j].x[t]);
            wmma::store_matrix_sync(H + (size_t)(t0 + wm + 16 * i) * DF + n0 + wn + 16 * j, g[i][j], DF,
                                    wmma::mem_row_major);
        }
}

int main() {
    std::vector<__nv_bfloat16> hx((size_t)TOK * DM), hg((size_t)DM * DF), hu((size_t)DM * DF);
    for (auto& v : hx) v = __float2bfloat16(2.f * frand() - 1.f);
    for (auto& v : hg) v = __float2bfloat16(0.06f * frand() - 0.03f);
    for (auto& v : hu) v = __float2bfloat16(0.06f * frand() - 0.03f);
    __nv_bfloat16 *dx = dcopy(hx), *dg = dcopy(hg), *du = dcopy(hu);
    float *dbad = dnew<float>((size_t)TOK * DF), *dfix = dnew<float>((size_t)TOK * DF);
    const dim3 grid(DF / BN, TOK / BM);
    LAUNCH(swiglu_up_ffma, grid, 256, dx, dg, du, dbad);
    LAUNCH(swiglu_up_wmma, grid, 256, dx, dg, du, dfix);
    CK(cudaDeviceSynchronize());
    return verdict("94-swiglu-up-bf16-ffma", hcopy(dbad, (size_t)TOK * DF), hcopy(dfix, (size_t)TOK * DF), 2e-3);
}
