// 12-tail-wave. Planted: tail effect. 300 blocks of 1024 threads, each thread summing 4096 terms of
// FMA work: two blocks fit per SM, so a wave is 264 blocks and the second wave runs 36 blocks on 36 of
// 132 SMs (1.14 waves: the GPU is mostly idle for almost half of the time).
// Fixed twin: the same terms split 8 ways over 2400 blocks (9.1 waves), partial sums by atomicAdd.
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
#define BLOCKS 300
#define THREADS 1024
#define TERMS 4096
#define SPLIT 8

__device__ __forceinline__ float terms(float x, int k0, int k1) {  // sum of (1 + x * k / 10^4)^2 over [k0, k1)
    float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f, c = k0 * 1e-4f;
    for (int k = k0; k < k1; k += 4) {
        float t0 = fmaf(x, c, 1.0f), t1 = fmaf(x, c + 1e-4f, 1.0f), t2 = fmaf(x, c + 2e-4f, 1.0f);
        float t3 = fmaf(x, c + 3e-4f, 1.0f);
        s0 = fmaf(t0, t0, s0); s1 = fmaf(t1, t1, s1); s2 = fmaf(t2, t2, s2); s3 = fmaf(t3, t3, s3);
        c += 4e-4f;
    }
    return s0 + s1 + s2 + s3;
}

extern "C" __global__ void __launch_bounds__(THREADS, 2) series_long_blocks(const float* __restrict__ x,
                                                                            float* __restrict__ out) {
    unsigned i = blockIdx.x * THREADS + threadIdx.x;
    out[i] = terms(x[i], 0, TERMS);  // PLANTED
}

extern "C" __global__ void __launch_bounds__(THREADS, 2) series_split_blocks(const float* __restrict__ x,
                                                                             float* __restrict__ out) {
    unsigned i = (blockIdx.x / SPLIT) * THREADS + threadIdx.x, part = blockIdx.x % SPLIT;
    atomicAdd(&out[i], terms(x[i], part * (TERMS / SPLIT), (part + 1) * (TERMS / SPLIT)));
}

int main() {
    const unsigned n = BLOCKS * THREADS;
    std::vector<float> hx(n);
    for (auto& v : hx) v = 0.5f * frand();
    float *dx = dcopy(hx), *dbad = dnew<float>(n), *dfix = dnew<float>(n);
    LAUNCH(series_long_blocks, BLOCKS, THREADS, dx, dbad);
    LAUNCH(series_split_blocks, BLOCKS * SPLIT, THREADS, dx, dfix);
    CK(cudaDeviceSynchronize());
    return verdict("12-tail-wave", hcopy(dbad, n), hcopy(dfix, n), 1e-3);
}
