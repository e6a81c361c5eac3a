// 61-saturated-tail-blocks. Planted: tail effect. 185 blocks of 1024 threads; each thread evaluates four
// polynomial series (16 independent Horner chains of 384 steps each, coefficients from constant memory). The
// chains keep the FMA pipe saturated, and 16 chains of live values need more than 32 registers a thread, so
// one block fits per SM: 132 blocks run, then 53 run alone on 40% of the SMs for as long again (1.40 waves,
// about 30% of the SM time idle) although the FMA pipe is saturated while the SMs are busy.
// Fixed twin: the same series (the same arithmetic per series) in 132 blocks of 1024 threads, each thread
// taking series by grid stride: 5 or 6 series a thread in a single round, instead of two rounds of 4.
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
#define BLOCKS 185
#define THREADS 1024
#define PER_THREAD 4
#define SERIES (BLOCKS * THREADS * PER_THREAD)
#define CHAINS 16
#define STEPS 384
__constant__ float c_coef[STEPS];

__device__ __forceinline__ float series(unsigned s) {
    float acc[CHAINS], x[CHAINS];
#pragma unroll
    for (int j = 0; j < CHAINS; ++j) { x[j] = 0.5f + 0.03f * j + 1e-7f * (s & 1023u); acc[j] = 0.0f; }
    for (int k = 0; k < STEPS; ++k) {
        float c = c_coef[k];
#pragma unroll
        for (int j = 0; j < CHAINS; ++j) acc[j] = fmaf(acc[j], x[j], c);
    }
    float r = 0.0f;
#pragma unroll
    for (int j = 0; j < CHAINS; ++j) r += acc[j];
    return r;
}

extern "C" __global__ void __launch_bounds__(THREADS, 1) series_wide_blocks(float* __restrict__ out) {
    unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
    for (unsigned q = 0; q < PER_THREAD; ++q) out[q * (BLOCKS * THREADS) + t] = series(q * (BLOCKS * THREADS) + t);  // PLANTED
}

extern "C" __global__ void __launch_bounds__(THREADS, 1) series_one_wave(float* __restrict__ out) {
    for (unsigned s = blockIdx.x * blockDim.x + threadIdx.x; s < SERIES; s += gridDim.x * blockDim.x)
        out[s] = series(s);
}

int main() {
    std::vector<float> hc(STEPS);
    for (auto& v : hc) v = (frand() - 0.5f) * 0.2f;
    CK(cudaMemcpyToSymbol(c_coef, hc.data(), STEPS * sizeof(float)));
    float *dbad = dnew<float>(SERIES), *dfix = dnew<float>(SERIES);
    LAUNCH(series_wide_blocks, BLOCKS, THREADS, dbad);
    LAUNCH(series_one_wave, 132, THREADS, dfix);
    CK(cudaDeviceSynchronize());
    return verdict("61-saturated-tail-blocks", hcopy(dbad, SERIES), hcopy(dfix, SERIES), 0.0);
}
