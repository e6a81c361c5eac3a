// 16-gelu-double-promotion. Planted: FP64 use in a float kernel. The tanh GELU is written with double
// literals and tanh() instead of tanhf(), so every element is converted to double and the whole
// polynomial and tanh run on the FP64 pipe (and its conversions), which sets the time.
// Fixed twin: float literals and tanhf.
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
#define N (32u << 20)
#define THREADS 256

extern "C" __global__ void gelu_promoted(const float* __restrict__ x, float* __restrict__ y) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    float v = x[i];
    y[i] = 0.5 * v * (1.0 + tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)));  // PLANTED
}

extern "C" __global__ void gelu_float(const float* __restrict__ x, float* __restrict__ y) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    float v = x[i];
    y[i] = 0.5f * v * (1.0f + tanhf(0.7978845608f * (v + 0.044715f * v * v * v)));
}

int main() {
    std::vector<float> hx(N);
    for (auto& v : hx) v = 8.0f * frand() - 4.0f;
    float *dx = dcopy(hx), *dbad = dnew<float>(N), *dfix = dnew<float>(N);
    LAUNCH(gelu_promoted, N / THREADS, THREADS, dx, dbad);
    LAUNCH(gelu_float, N / THREADS, THREADS, dx, dfix);
    CK(cudaDeviceSynchronize());
    return verdict("16-gelu-double-promotion", hcopy(dbad, N), hcopy(dfix, N), 1e-4);
}
