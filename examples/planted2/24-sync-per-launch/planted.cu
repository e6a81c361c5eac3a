// 24-sync-per-launch. Planted (system): a device synchronization after every launch. 200 iterations
// of a ~20 us smoothing kernel, each followed by cudaDeviceSynchronize: the host waits for the GPU,
// then the GPU waits for the host's next launch. Run with `fixed` for the twin.
// Fixed twin (argument `fixed`): the same launches queued back to back, one synchronization at the end.
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
#define ITERS 200
#define THREADS 256

extern "C" __global__ void smooth_step(const float* __restrict__ x, float* __restrict__ y) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < N) y[i] = 0.25f * x[i == 0 ? 0 : i - 1] + 0.5f * x[i] + 0.25f * x[i + 1 == N ? i : i + 1];
}

int main(int argc, char** argv) {
    bool fixed = argc > 1 && strcmp(argv[1], "fixed") == 0;
    std::vector<float> init(N);
    for (auto& v : init) v = frand();
    float *a = dcopy(init), *b = dnew<float>(N);
    for (int it = 0; it < ITERS; ++it) {
        LAUNCH(smooth_step, N / THREADS, THREADS, it % 2 ? b : a, it % 2 ? a : b);
        if (!fixed) CK(cudaDeviceSynchronize());  // PLANTED
    }
    CK(cudaDeviceSynchronize());
    std::vector<float> out = hcopy(ITERS % 2 ? b : a, N), ref(init), tmp(N);
    for (int it = 0; it < ITERS; ++it) {
        for (unsigned i = 0; i < N; ++i)
            tmp[i] = 0.25f * ref[i == 0 ? 0 : i - 1] + 0.5f * ref[i] + 0.25f * ref[i + 1 == N ? i : i + 1];
        ref.swap(tmp);
    }
    return verdict(fixed ? "24-sync-per-launch (fixed)" : "24-sync-per-launch", out, ref, 1e-4);
}
