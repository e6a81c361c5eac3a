// 25-malloc-per-iteration. Planted (system): allocation churn. 64 iterations each cudaMalloc a 32 MB
// scratch buffer, run two kernels through it and cudaFree it: every cudaFree synchronizes the device
// and every cudaMalloc costs host time the GPU waits through. Run with `fixed` for the twin.
// Fixed twin (argument `fixed`): one scratch buffer allocated before the loop and freed after it.
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
#define N (8u << 20)
#define ITERS 64
#define THREADS 256

extern "C" __global__ void square_into(const float* __restrict__ x, float* __restrict__ tmp, float shift) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < N) { float d = x[i] - shift; tmp[i] = d * d; }
}

extern "C" __global__ void accumulate(const float* __restrict__ tmp, float* __restrict__ acc) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < N) acc[i] += tmp[i];
}

int main(int argc, char** argv) {
    bool fixed = argc > 1 && strcmp(argv[1], "fixed") == 0;
    std::vector<float> hx(N);
    for (auto& v : hx) v = frand();
    float *dx = dcopy(hx), *acc = dnew<float>(N), *tmp = fixed ? dnew<float>(N) : nullptr;
    for (int it = 0; it < ITERS; ++it) {
        if (!fixed) CK(cudaMalloc(&tmp, N * sizeof(float)));  // PLANTED
        LAUNCH(square_into, N / THREADS, THREADS, dx, tmp, it / (float)ITERS);
        LAUNCH(accumulate, N / THREADS, THREADS, tmp, acc);
        if (!fixed) CK(cudaFree(tmp));
    }
    CK(cudaDeviceSynchronize());
    std::vector<float> out = hcopy(acc, N), ref(N, 0.0f);
    for (int it = 0; it < ITERS; ++it)
        for (unsigned i = 0; i < N; ++i) { float d = hx[i] - it / (float)ITERS; ref[i] += d * d; }
    return verdict(fixed ? "25-malloc-per-iteration (fixed)" : "25-malloc-per-iteration", out, ref, 1e-4);
}
