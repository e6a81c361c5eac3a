// 34-healthy-wmma-gemm. Healthy: an fp16 GEMM (4096 x 4096 x 2048, fp32 accumulate) on the tensor
// cores: 128x128 block tiles staged through double-buffered padded shared memory (the next tile's
// 16-byte loads in flight during the math), 8 warps of 32x64 (2x4 WMMA 16x16x16 fragments each).
// Compared with a CPU reference on sampled outputs.
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
#define M 4096
#define N 4096
#define K 2048
#define BM 128
#define BN 128
#define BK 32
#define PAD 8

__device__ __forceinline__ void load_tiles(const __half* __restrict__ a, const __half* __restrict__ b, int r0, int c0,
                                           int k0, int t, uint4 ra[2], uint4 rb[2]) {
    for (int q = 0; q < 2; ++q) {  // 8 halves (16 bytes) per load, 2 of A and 2 of B per thread
        int e = t + q * 256;
        ra[q] = *(const uint4*)(a + (size_t)(r0 + e / (BK / 8)) * K + k0 + e % (BK / 8) * 8);
        rb[q] = *(const uint4*)(b + (size_t)(k0 + e / (BN / 8)) * N + c0 + e % (BN / 8) * 8);
    }
}

extern "C" __global__ void __launch_bounds__(256, 2) gemm_wmma_tiled(const __half* __restrict__ a,
                                                                     const __half* __restrict__ b,
                                                                     float* __restrict__ c) {
    using namespace nvcuda;
    __shared__ __align__(32) __half as[2][BM][BK + PAD], bs[2][BK][BN + PAD];
    int t = threadIdx.x, w = t / 32, wr = (w / 2) * 32, wc = (w % 2) * 64;
    int r0 = blockIdx.y * BM, c0 = blockIdx.x * BN;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[2][4];
    for (int i = 0; i < 2; ++i)
        for (int j = 0; j < 4; ++j) wmma::fill_fragment(acc[i][j], 0.0f);
    uint4 ra[2], rb[2];
    load_tiles(a, b, r0, c0, 0, t, ra, rb);
    for (int k0 = 0, cur = 0; k0 < K; k0 += BK, cur ^= 1) {
        for (int q = 0; q < 2; ++q) {  // the tile loaded during the previous step's math, into this step's buffer
            int e = t + q * 256;
            *(uint4*)&as[cur][e / (BK / 8)][e % (BK / 8) * 8] = ra[q];
            *(uint4*)&bs[cur][e / (BN / 8)][e % (BN / 8) * 8] = rb[q];
        }
        __syncthreads();
        if (k0 + BK < K) load_tiles(a, b, r0, c0, k0 + BK, t, ra, rb);  // in flight during the math below
        for (int kk = 0; kk < BK; kk += 16) {
            wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> fa[2];
            wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::row_major> fb[4];
            for (int i = 0; i < 2; ++i) wmma::load_matrix_sync(fa[i], &as[cur][wr + i * 16][kk], BK + PAD);
            for (int j = 0; j < 4; ++j) wmma::load_matrix_sync(fb[j], &bs[cur][kk][wc + j * 16], BN + PAD);
            for (int i = 0; i < 2; ++i)
                for (int j = 0; j < 4; ++j) wmma::mma_sync(acc[i][j], fa[i], fb[j], acc[i][j]);
        }
    }
    for (int i = 0; i < 2; ++i)
        for (int j = 0; j < 4; ++j)
            wmma::store_matrix_sync(c + (size_t)(r0 + wr + i * 16) * N + c0 + wc + j * 16, acc[i][j], N,
                                    wmma::mem_row_major);
}

int main() {
    std::vector<__half> ha((size_t)M * K), hb((size_t)K * N);
    for (auto& v : ha) v = __float2half(frand() - 0.5f);
    for (auto& v : hb) v = __float2half(frand() - 0.5f);
    __half *da = dcopy(ha), *db = dcopy(hb);
    float* dc = dnew<float>((size_t)M * N);
    LAUNCH(gemm_wmma_tiled, dim3(N / BN, M / BM), 256, da, db, dc);
    CK(cudaDeviceSynchronize());
    std::vector<float> got = hcopy(dc, (size_t)M * N), sample, ref;
    for (int s = 0; s < 512; ++s) {
        unsigned r = urand() % M, col = urand() % N;
        double acc = 0;
        for (int k = 0; k < K; ++k) acc += (double)__half2float(ha[(size_t)r * K + k]) * __half2float(hb[(size_t)k * N + col]);
        sample.push_back(got[(size_t)r * N + col]); ref.push_back((float)acc);
    }
    return verdict("34-healthy-wmma-gemm", sample, ref, 1e-3);
}
