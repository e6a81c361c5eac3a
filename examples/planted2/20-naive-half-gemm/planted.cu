// 20-naive-half-gemm. Planted: tensor cores unused, in a kernel limited by memory. An fp16 GEMM
// (2048 x 2048 x 1024, fp32 accumulate) written as one thread per output with scalar FMAs and no
// tiling: every product re-reads A and B through L1/L2, so the memory side is what shows as busy, but
// the fix that matters is tiling for the tensor cores.
// Fixed twin: WMMA 16x16x16 fragments, a 64x64 tile per 4-warp block (2x2 fragments per warp).
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
#define M 2048
#define N 2048
#define K 1024

extern "C" __global__ void hgemm_naive(const __half* __restrict__ a, const __half* __restrict__ b,
                                       float* __restrict__ c) {
    unsigned col = blockIdx.x * blockDim.x + threadIdx.x, row = blockIdx.y * blockDim.y + threadIdx.y;
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc = fmaf(__half2float(a[row * K + k]), __half2float(b[k * N + col]), acc);  // PLANTED
    c[row * N + col] = acc;
}

extern "C" __global__ void hgemm_wmma(const __half* __restrict__ a, const __half* __restrict__ b,
                                      float* __restrict__ c) {
    using namespace nvcuda;
    int w = threadIdx.x / 32, r0 = blockIdx.y * 64 + (w / 2) * 32, c0 = blockIdx.x * 64 + (w % 2) * 32;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[2][2];
    for (int i = 0; i < 2; ++i)
        for (int j = 0; j < 2; ++j) wmma::fill_fragment(acc[i][j], 0.0f);
    for (int k = 0; k < K; k += 16) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> fa[2];
        wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::row_major> fb[2];
        for (int i = 0; i < 2; ++i) wmma::load_matrix_sync(fa[i], a + (size_t)(r0 + i * 16) * K + k, K);
        for (int j = 0; j < 2; ++j) wmma::load_matrix_sync(fb[j], b + (size_t)k * N + c0 + j * 16, N);
        for (int i = 0; i < 2; ++i)
            for (int j = 0; j < 2; ++j) wmma::mma_sync(acc[i][j], fa[i], fb[j], acc[i][j]);
    }
    for (int i = 0; i < 2; ++i)
        for (int j = 0; j < 2; ++j)
            wmma::store_matrix_sync(c + (size_t)(r0 + i * 16) * N + c0 + j * 16, acc[i][j], N, wmma::mem_row_major);
}

int main() {
    std::vector<__half> ha((size_t)M * K), hb((size_t)K * N);
    for (auto& v : ha) v = __float2half(frand() - 0.5f);
    for (auto& v : hb) v = __float2half(frand() - 0.5f);
    __half *da = dcopy(ha), *db = dcopy(hb);
    float *dbad = dnew<float>((size_t)M * N), *dfix = dnew<float>((size_t)M * N);
    LAUNCH(hgemm_naive, dim3(N / 32, M / 8), dim3(32, 8), da, db, dbad);
    LAUNCH(hgemm_wmma, dim3(N / 64, M / 64), 128, da, db, dfix);
    CK(cudaDeviceSynchronize());
    return verdict("20-naive-half-gemm", hcopy(dbad, (size_t)M * N), hcopy(dfix, (size_t)M * N), 1e-3);
}
