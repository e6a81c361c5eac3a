// 27-tiny-grid-divergent. Two planted problems. (1, dominant) 16 blocks of 256 threads grid-stride over
// 4M elements: 16 of 132 SMs work; (2) odd and even lanes take different 64-step FMA recurrences, so
// every warp runs both at half width.
// Fixed twin: one thread per element over 16384 blocks, elements regrouped so that each warp holds 32
// elements of one parity (the branch is uniform per warp); each element gets the same recurrence.
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
#define N (4u << 20)
#define STEPS 64

// Two loops with different bodies, kept as loops: the compiler cannot merge them into one with selected
// constants (it did with two FMA loops that differed only in their constants), so the branch stays a branch.
__device__ __forceinline__ float path(float v, bool odd) {
    if (odd) {
#pragma unroll 1
        for (int k = 0; k < STEPS; ++k) v = fmaf(v, 0.998f, 0.002f);
    } else {
#pragma unroll 1
        for (int k = 0; k < STEPS; ++k) v = fmaf(v * v, -0.25f, v + 0.01f);
    }
    return v;
}

extern "C" __global__ void parity_tiny_grid(const float* __restrict__ x, float* __restrict__ y) {
    for (unsigned e = blockIdx.x * blockDim.x + threadIdx.x; e < N; e += gridDim.x * blockDim.x)
        y[e] = path(x[e], e & 1);  // PLANTED
}

extern "C" __global__ void parity_wide_grid(const float* __restrict__ x, float* __restrict__ y) {
    unsigned g = blockIdx.x * blockDim.x + threadIdx.x, w = g / 32, lane = g % 32;
    unsigned e = 2 * ((w / 2) * 32 + lane) + (w & 1);  // warp w: 32 elements of parity w & 1
    y[e] = path(x[e], e & 1);
}

int main() {
    std::vector<float> hx(N);
    for (auto& v : hx) v = frand();
    float *dx = dcopy(hx), *dbad = dnew<float>(N), *dfix = dnew<float>(N);
    LAUNCH(parity_tiny_grid, 16, 256, dx, dbad);
    LAUNCH(parity_wide_grid, N / 256, 256, dx, dfix);
    CK(cudaDeviceSynchronize());
    return verdict("27-tiny-grid-divergent", hcopy(dbad, N), hcopy(dfix, N), 0.0);
}
