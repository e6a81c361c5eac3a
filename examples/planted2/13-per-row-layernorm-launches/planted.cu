// 13-per-row-layernorm-launches. Planted: many small launches. A layer norm of 256 rows x 4096 floats
// launched once per row from a host loop: each launch is one 256-thread block and a few microseconds,
// so launch latency and the idle GPU between launches dominate.
// Fixed twin: one launch, one block per row.
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
#define ROWS 256
#define COLS 4096
#define THREADS 256

__device__ __forceinline__ void layernorm_row(const float* __restrict__ x, float* __restrict__ y) {
    __shared__ float red[2][THREADS / 32];
    float v[COLS / THREADS], s = 0.0f, q = 0.0f;
    for (int j = 0; j < COLS / THREADS; ++j) { v[j] = x[j * THREADS + threadIdx.x]; s += v[j]; q += v[j] * v[j]; }
    for (int o = 16; o > 0; o /= 2) { s += __shfl_xor_sync(0xffffffffu, s, o); q += __shfl_xor_sync(0xffffffffu, q, o); }
    if (threadIdx.x % 32 == 0) { red[0][threadIdx.x / 32] = s; red[1][threadIdx.x / 32] = q; }
    __syncthreads();
    s = 0.0f; q = 0.0f;
    for (int w = 0; w < THREADS / 32; ++w) { s += red[0][w]; q += red[1][w]; }
    float mean = s / COLS, rstd = rsqrtf(q / COLS - mean * mean + 1e-5f);
    for (int j = 0; j < COLS / THREADS; ++j) y[j * THREADS + threadIdx.x] = (v[j] - mean) * rstd;
}

extern "C" __global__ void layernorm_one_row(const float* __restrict__ x, float* __restrict__ y, int row) {
    layernorm_row(x + (size_t)row * COLS, y + (size_t)row * COLS);  // PLANTED
}

extern "C" __global__ void layernorm_all_rows(const float* __restrict__ x, float* __restrict__ y) {
    layernorm_row(x + (size_t)blockIdx.x * COLS, y + (size_t)blockIdx.x * COLS);
}

int main() {
    std::vector<float> hx((size_t)ROWS * COLS);
    for (auto& v : hx) v = frand();
    float *dx = dcopy(hx), *dbad = dnew<float>(hx.size()), *dfix = dnew<float>(hx.size());
    for (int r = 0; r < ROWS; ++r) LAUNCH(layernorm_one_row, 1, THREADS, dx, dbad, r);
    LAUNCH(layernorm_all_rows, ROWS, THREADS, dx, dfix);
    CK(cudaDeviceSynchronize());
    return verdict("13-per-row-layernorm-launches", hcopy(dbad, hx.size()), hcopy(dfix, hx.size()), 0.0);
}
