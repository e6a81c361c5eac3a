// 64-batched-sgemm-textbook. Planted: a matrix product on FMAs while the tensor cores idle. 64 independent
// 256 x 256 x 256 FP32 products by the textbook kernel: 16 x 16 tiles of A and B staged in shared memory, one
// output per thread, one FFMA per pair of shared loads. Each DRAM byte feeds about 40 FLOPs (over the FP32
// ridge of about 20), so a faster pipe would pay.
// Fixed twin: the same products on TF32 tensor cores (WMMA m16n16k8, fragments loaded straight from global
// memory, one 16 x 16 output tile per warp).
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
#include <mma.h>
using namespace nvcuda;
#define M 256
#define BATCH 64
#define TS 16

extern "C" __global__ void sgemm_tiled_batched(const float* __restrict__ A, const float* __restrict__ B,
                                               float* __restrict__ C) {
    __shared__ float As[TS][TS], Bs[TS][TS];
    const size_t off = (size_t)blockIdx.z * M * M;
    const int row = blockIdx.y * TS + threadIdx.y, col = blockIdx.x * TS + threadIdx.x;
    float acc = 0.0f;
    for (int k0 = 0; k0 < M; k0 += TS) {
        As[threadIdx.y][threadIdx.x] = A[off + (size_t)row * M + k0 + threadIdx.x];
        Bs[threadIdx.y][threadIdx.x] = B[off + (size_t)(k0 + threadIdx.y) * M + col];
        __syncthreads();
#pragma unroll
        for (int k = 0; k < TS; ++k) acc = fmaf(As[threadIdx.y][k], Bs[k][threadIdx.x], acc);  // PLANTED
        __syncthreads();
    }
    C[off + (size_t)row * M + col] = acc;
}

extern "C" __global__ void __launch_bounds__(128) sgemm_wmma_tf32_batched(const float* __restrict__ A,
                                                                        const float* __restrict__ B,
                                                                        float* __restrict__ C) {
    const size_t off = (size_t)blockIdx.z * M * M;
    const unsigned warp = threadIdx.x / 32, r0 = blockIdx.y * 16, c0 = (blockIdx.x * 4 + warp) * 16;
    wmma::fragment<wmma::accumulator, 16, 16, 8, float> acc;
    wmma::fill_fragment(acc, 0.0f);
    for (int k = 0; k < M; k += 8) {
        wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::row_major> a;
        wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::row_major> b;
        wmma::load_matrix_sync(a, A + off + (size_t)r0 * M + k, M);
        wmma::load_matrix_sync(b, B + off + (size_t)k * M + c0, M);
        for (int i = 0; i < a.num_elements; ++i) a.x[i] = wmma::__float_to_tf32(a.x[i]);
        for (int i = 0; i < b.num_elements; ++i) b.x[i] = wmma::__float_to_tf32(b.x[i]);
        wmma::mma_sync(acc, a, b, acc);
    }
    wmma::store_matrix_sync(C + off + (size_t)r0 * M + c0, acc, M, wmma::mem_row_major);
}

int main() {
    const size_t n = (size_t)BATCH * M * M;
    std::vector<float> ha(n), hb(n);
    for (auto& v : ha) v = frand();
    for (auto& v : hb) v = frand();
    float *da = dcopy(ha), *db = dcopy(hb), *dbad = dnew<float>(n), *dfix = dnew<float>(n);
    LAUNCH(sgemm_tiled_batched, dim3(M / TS, M / TS, BATCH), dim3(TS, TS), da, db, dbad);
    LAUNCH(sgemm_wmma_tf32_batched, dim3(M / 64, M / 16, BATCH), 128, da, db, dfix);
    CK(cudaDeviceSynchronize());
    return verdict("64-batched-sgemm-textbook", hcopy(dbad, n), hcopy(dfix, n), 2e-2);
}
