// 77-median5x5-local-window. Planted: a per-thread array in local memory. A 5x5 median filter of a 4096 x 2048
// float image, one thread per pixel: the 25-value window is sorted by the textbook exchange loops, whose
// bounds depend on the outer index, so the compiler cannot give w[] registers and puts it on the stack
// (104 bytes a thread). Each of the 300 compare-exchanges then loads and stores through local memory: about
// 800 local accesses a pixel against 25 global loads, and the L1 serves local traffic, not the image.
// Fixed twin: the same loops and exchanges with #pragma unroll, so every index is a constant and w[] lives in
// registers (the compiler also drops the exchanges that cannot reach the middle element).
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
#define W 4096
#define H 2048
#define R 2
#define K ((2 * R + 1) * (2 * R + 1))  // 25

__device__ __forceinline__ int clampi(int v, int hi) { return v < 0 ? 0 : (v > hi ? hi : v); }

extern "C" __global__ void median5x5_sorted_window(const float* __restrict__ in, float* __restrict__ out) {
    const int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= W || y >= H) return;
    float w[K];
    int n = 0;
    for (int dy = -R; dy <= R; ++dy)
        for (int dx = -R; dx <= R; ++dx) w[n++] = in[clampi(y + dy, H - 1) * W + clampi(x + dx, W - 1)];
    for (int i = 0; i < K - 1; ++i)
        for (int j = i + 1; j < K; ++j) { const float a = w[i], b = w[j]; w[i] = fminf(a, b); w[j] = fmaxf(a, b); }  // PLANTED
    out[y * W + x] = w[K / 2];
}

extern "C" __global__ void median5x5_unrolled(const float* __restrict__ in, float* __restrict__ out) {
    const int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= W || y >= H) return;
    float w[K];
    int n = 0;
    for (int dy = -R; dy <= R; ++dy)
        for (int dx = -R; dx <= R; ++dx) w[n++] = in[clampi(y + dy, H - 1) * W + clampi(x + dx, W - 1)];
#pragma unroll
    for (int i = 0; i < K - 1; ++i)
#pragma unroll
        for (int j = i + 1; j < K; ++j) { const float a = w[i], b = w[j]; w[i] = fminf(a, b); w[j] = fmaxf(a, b); }
    out[y * W + x] = w[K / 2];
}

int main() {
    std::vector<float> img((size_t)W * H);
    for (auto& v : img) v = frand();
    float* din = dcopy(img);
    float *dbad = dnew<float>((size_t)W * H), *dfix = dnew<float>((size_t)W * H);
    const dim3 block(32, 8), grid(W / 32, H / 8);
    median5x5_sorted_window<<<grid, block>>>(din, dbad);
    CK(cudaGetLastError());
    median5x5_unrolled<<<grid, block>>>(din, dfix);
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    return verdict("77-median5x5-local-window", hcopy(dbad, (size_t)W * H), hcopy(dfix, (size_t)W * H), 0.0);
}
