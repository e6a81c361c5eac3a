// 109-batched-cholesky-sync-steps. Planted: barrier-bound factorization. 20480 SPD 32x32 matrices (covariances
// of a batched Kalman/GP update) factored A = L L^T, one 1024-thread block a matrix, a thread an element in a
// padded shared tile: every pivot k runs three phases (square root and reciprocal, column scale, trailing update)
// separated by __syncthreads, 96 barriers a matrix with a handful of instructions between them, one thread busy
// in the first phase and one lane a warp in the second. The warps spend most of their time at the barriers.
// Fixed twin: the same right-looking algorithm, same operations in the same order, one warp a matrix: lane j
// holds column j in registers and the pivot column is broadcast with shuffles; no barrier at all.
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
#define BATCH 20480
#define M 32
#define FULL 0xffffffffu

extern "C" __global__ void __launch_bounds__(M * M) cholesky_elementwise(const float* __restrict__ A, float* __restrict__ L) {
    __shared__ float a[M][M + 1], inv;
    const int i = threadIdx.x / M, j = threadIdx.x % M;  // this thread's element
    const size_t base = (size_t)blockIdx.x * M * M;
    a[i][j] = A[base + threadIdx.x];
    __syncthreads();
    for (int k = 0; k < M; ++k) {
        if (i == k && j == k) { const float d = sqrtf(a[k][k]); a[k][k] = d; inv = 1.0f / d; }
        __syncthreads();  // PLANTED
        if (j == k && i > k) a[i][k] *= inv;
        __syncthreads();  // PLANTED
        if (j > k && i >= j) a[i][j] -= a[i][k] * a[j][k];
        __syncthreads();  // PLANTED
    }
    L[base + threadIdx.x] = i >= j ? a[i][j] : 0.f;
}

extern "C" __global__ void __launch_bounds__(256) cholesky_warp(const float* __restrict__ A, float* __restrict__ L) {
    const int lane = threadIdx.x & 31;
    const size_t base = ((size_t)blockIdx.x * 8 + (threadIdx.x >> 5)) * M * M;
    float a[M];  // column `lane`
#pragma unroll
    for (int i = 0; i < M; ++i) a[i] = A[base + i * M + lane];
#pragma unroll
    for (int k = 0; k < M; ++k) {
        const float d = sqrtf(__shfl_sync(FULL, a[k], k)), inv = 1.0f / d;
        if (lane == k) a[k] = d;
        float ljk = 0.f;  // L[lane][k], known from i == lane on; only rows i >= lane use it
#pragma unroll
        for (int i = k + 1; i < M; ++i) {
            if (lane == k) a[i] *= inv;
            const float lik = __shfl_sync(FULL, a[i], k);
            if (i == lane) ljk = lik;
            if (lane > k && i >= lane) a[i] -= lik * ljk;
        }
    }
#pragma unroll
    for (int i = 0; i < M; ++i) L[base + i * M + lane] = i >= lane ? a[i] : 0.f;
}

int main() {
    std::vector<float> ha((size_t)BATCH * M * M);
    for (int b = 0; b < BATCH; ++b) {  // symmetric, diagonally dominant: SPD
        float* m = &ha[(size_t)b * M * M];
        for (int i = 0; i < M; ++i) {
            m[i * M + i] = 16.f + frand();
            for (int j = 0; j < i; ++j) m[i * M + j] = m[j * M + i] = frand() - 0.5f;
        }
    }
    float* da = dcopy(ha);
    float *dl1 = dnew<float>(ha.size()), *dl2 = dnew<float>(ha.size());
    cholesky_elementwise<<<BATCH, M * M>>>(da, dl1);
    CK(cudaGetLastError());
    cholesky_warp<<<BATCH / 8, 256>>>(da, dl2);
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    std::vector<float> l1 = hcopy(dl1, ha.size());
    double worst = 0;  // L L^T against A on a few matrices
    for (int b = 0; b < BATCH; b += 997)
        for (int i = 0; i < M; ++i)
            for (int j = 0; j <= i; ++j) {
                double s = 0;
                for (int p = 0; p <= j; ++p) s += (double)l1[(size_t)b * M * M + i * M + p] * l1[(size_t)b * M * M + j * M + p];
                worst = std::max(worst, fabs(s - ha[(size_t)b * M * M + i * M + j]));
            }
    if (!(worst < 1e-3)) { printf("MISMATCH 109-batched-cholesky-sync-steps: L L^T differs from A by %.3g\n", worst); return 1; }
    return verdict("109-batched-cholesky-sync-steps", l1, hcopy(dl2, ha.size()), 1e-5);
}
