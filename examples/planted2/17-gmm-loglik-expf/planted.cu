// 17-gmm-loglik-expf. Planted: special-function pressure. The log-likelihood of each sample under a
// 16-component 1-D Gaussian mixture takes 16 exponentials and a logarithm per sample: MUFU
// instructions on the XU pipe (16 lanes per cycle per SM) set the time, not the FMAs or the bytes.
// Fixed twin: the likelihood is a function of x alone, so each block tabulates it once in shared
// memory (4097 samples over the input range) and interpolates linearly.
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
#define N (64u << 20)
#define COMP 16
#define TAB 4096
#define LO (-4.0f)
#define HI 4.0f
#define THREADS 256

__constant__ float c_mu[COMP], c_k[COMP], c_w[COMP];  // means, -1 / (2 sigma^2) * log2(e), weights

__device__ __forceinline__ float loglik(float v) {
    float p = 0.0f;
    for (int c = 0; c < COMP; ++c) { float d = v - c_mu[c]; p = fmaf(c_w[c], exp2f(c_k[c] * d * d), p); }  // PLANTED
    return __logf(p);
}

extern "C" __global__ void gmm_loglik_direct(const float* __restrict__ x, float* __restrict__ y) {
    for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < N; i += gridDim.x * blockDim.x)
        y[i] = loglik(x[i]);  // PLANTED
}

extern "C" __global__ void gmm_loglik_table(const float* __restrict__ x, float* __restrict__ y) {
    __shared__ float tab[TAB + 1];
    for (int j = threadIdx.x; j <= TAB; j += blockDim.x) tab[j] = loglik(LO + (HI - LO) * j / TAB);
    __syncthreads();
    for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < N; i += gridDim.x * blockDim.x) {
        float u = (x[i] - LO) * (TAB / (HI - LO));
        int j = min(max((int)u, 0), TAB - 1);
        float f = u - j;
        y[i] = fmaf(f, tab[j + 1] - tab[j], tab[j]);
    }
}

int main() {
    std::vector<float> hx(N), mu(COMP), k(COMP), w(COMP);
    for (auto& v : hx) v = (HI - LO) * frand() + LO;
    for (int c = 0; c < COMP; ++c) {
        float s = 0.6f + 0.8f * frand();
        mu[c] = 6.0f * frand() - 3.0f; k[c] = -1.4426950f / (2 * s * s); w[c] = 1.0f / (COMP * s * 2.5066283f);
    }
    CK(cudaMemcpyToSymbol(c_mu, mu.data(), sizeof(float) * COMP));
    CK(cudaMemcpyToSymbol(c_k, k.data(), sizeof(float) * COMP));
    CK(cudaMemcpyToSymbol(c_w, w.data(), sizeof(float) * COMP));
    float *dx = dcopy(hx), *dbad = dnew<float>(N), *dfix = dnew<float>(N);
    LAUNCH(gmm_loglik_direct, 132 * 8, THREADS, dx, dbad);
    LAUNCH(gmm_loglik_table, 132 * 8, THREADS, dx, dfix);
    CK(cudaDeviceSynchronize());
    return verdict("17-gmm-loglik-expf", hcopy(dbad, N), hcopy(dfix, N), 1e-3);
}
