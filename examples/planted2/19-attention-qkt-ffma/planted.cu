// 19-attention-qkt-ffma. Planted: tensor cores unused. The attention scores S = Q K^T / sqrt(d) for
// 32 heads x 1024 x 1024 (d = 64, fp16 inputs, fp32 scores), tiled 64x64 in shared memory with a 4x4
// register tile per thread, all on CUDA-core FFMAs: a matrix product the tensor cores would run at
// many times the FP32 rate.
// Fixed twin: WMMA 16x16x16 (fp16 in, fp32 accumulate), four warps per 64x64 tile.
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
#define BH 32
#define L 1024
#define D 64
#define TILE 64

extern "C" __global__ void qkt_ffma(const __half* __restrict__ q, const __half* __restrict__ k,
                                    float* __restrict__ s, float scale) {
    __shared__ __align__(16) float qs[TILE][D + 4], ks[TILE][D + 4];  // rows padded: conflict-free float4 reads
    const __half* qb = q + ((size_t)blockIdx.z * L + blockIdx.y * TILE) * D;
    const __half* kb = k + ((size_t)blockIdx.z * L + blockIdx.x * TILE) * D;
    int t = threadIdx.y * 16 + threadIdx.x, tx = threadIdx.x, ty = threadIdx.y;
    for (int j = t; j < TILE * D / 8; j += 256) {  // 8 halves (16 bytes) per load, 8 lanes per 128-byte row
        int row = j / 8, d0 = j % 8 * 8;
        uint4 a = *(const uint4*)(qb + row * D + d0), b = *(const uint4*)(kb + row * D + d0);
        const __half2 *ha = (const __half2*)&a, *hb = (const __half2*)&b;
        for (int e = 0; e < 4; ++e) {
            float2 fa = __half22float2(ha[e]), fb = __half22float2(hb[e]);
            qs[row][d0 + 2 * e] = fa.x; qs[row][d0 + 2 * e + 1] = fa.y;
            ks[row][d0 + 2 * e] = fb.x; ks[row][d0 + 2 * e + 1] = fb.y;
        }
    }
    __syncthreads();
    float acc[4][4] = {};  // rows ty + 16 r, columns tx + 16 c of the tile
    for (int d = 0; d < D; d += 4) {
        float4 a[4], b[4];
        for (int r = 0; r < 4; ++r) a[r] = *(const float4*)&qs[ty + 16 * r][d];
        for (int c = 0; c < 4; ++c) b[c] = *(const float4*)&ks[tx + 16 * c][d];
        for (int r = 0; r < 4; ++r)
            for (int c = 0; c < 4; ++c)
                acc[r][c] = fmaf(a[r].w, b[c].w, fmaf(a[r].z, b[c].z, fmaf(a[r].y, b[c].y, fmaf(a[r].x, b[c].x, acc[r][c]))));  // PLANTED
    }
    for (int r = 0; r < 4; ++r) {
        float* out = s + ((size_t)blockIdx.z * L + blockIdx.y * TILE + ty + 16 * r) * L + blockIdx.x * TILE;
        for (int c = 0; c < 4; ++c) out[tx + 16 * c] = acc[r][c] * scale;
    }
}

extern "C" __global__ void qkt_wmma(const __half* __restrict__ q, const __half* __restrict__ k,
                                    float* __restrict__ s, float scale) {
    using namespace nvcuda;
    int w = threadIdx.x / 32;
    const __half* qb = q + ((size_t)blockIdx.z * L + blockIdx.y * TILE + w * 16) * D;
    const __half* kb = k + ((size_t)blockIdx.z * L + blockIdx.x * TILE) * D;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[4];
    for (int n = 0; n < 4; ++n) wmma::fill_fragment(acc[n], 0.0f);
    for (int kk = 0; kk < D; kk += 16) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> a;
        wmma::load_matrix_sync(a, qb + kk, D);
        for (int n = 0; n < 4; ++n) {
            wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::col_major> b;  // K^T: K rows as columns
            wmma::load_matrix_sync(b, kb + n * 16 * D + kk, D);
            wmma::mma_sync(acc[n], a, b, acc[n]);
        }
    }
    for (int n = 0; n < 4; ++n) {
        for (int e = 0; e < acc[n].num_elements; ++e) acc[n].x[e] *= scale;
        float* out = s + ((size_t)blockIdx.z * L + blockIdx.y * TILE + w * 16) * L + blockIdx.x * TILE + n * 16;
        wmma::store_matrix_sync(out, acc[n], L, wmma::mem_row_major);
    }
}

int main() {
    size_t nq = (size_t)BH * L * D, ns = (size_t)BH * L * L;
    std::vector<__half> hq(nq), hk(nq);
    for (size_t i = 0; i < nq; ++i) { hq[i] = __float2half(frand() - 0.5f); hk[i] = __float2half(frand() - 0.5f); }
    __half *dq = dcopy(hq), *dk = dcopy(hk);
    float *dbad = dnew<float>(ns), *dfix = dnew<float>(ns), scale = 0.125f;
    LAUNCH(qkt_ffma, dim3(L / TILE, L / TILE, BH), dim3(16, 16), dq, dk, dbad, scale);
    LAUNCH(qkt_wmma, dim3(L / TILE, L / TILE, BH), 128, dq, dk, dfix, scale);
    CK(cudaDeviceSynchronize());
    return verdict("19-attention-qkt-ffma", hcopy(dbad, ns), hcopy(dfix, ns), 1e-3);
}
