// 23-copies-in-loop. Planted (system): host-device copies inside the loop. 24 iterations, each copies
// 8 MB from pageable host memory to the GPU, runs one short kernel and copies the result back, so the
// GPU mostly waits for the copies. Run with no argument for the planted version, `fixed` for the twin.
// Fixed twin (same program, argument `fixed`): pinned host memory, one copy in, 24 kernels, one out.
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
#define N (2u << 20)
#define ITERS 24
#define THREADS 256

extern "C" __global__ void scale_step(float* __restrict__ x, float a) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < N) x[i] = fmaf(x[i], a, 0.001f);
}

int main(int argc, char** argv) {
    bool fixed = argc > 1 && strcmp(argv[1], "fixed") == 0;
    std::vector<float> init(N);
    for (auto& v : init) v = frand();
    float* d = dnew<float>(N);
    std::vector<float> out(N);
    if (!fixed) {
        std::vector<float> h = init;
        for (int it = 0; it < ITERS; ++it) {
            CK(cudaMemcpy(d, h.data(), N * sizeof(float), cudaMemcpyHostToDevice));  // PLANTED
            LAUNCH(scale_step, N / THREADS, THREADS, d, 0.999f);
            CK(cudaMemcpy(h.data(), d, N * sizeof(float), cudaMemcpyDeviceToHost));
        }
        out = h;
    } else {
        float* h;
        CK(cudaMallocHost(&h, N * sizeof(float)));
        memcpy(h, init.data(), N * sizeof(float));
        CK(cudaMemcpy(d, h, N * sizeof(float), cudaMemcpyHostToDevice));
        for (int it = 0; it < ITERS; ++it) LAUNCH(scale_step, N / THREADS, THREADS, d, 0.999f);
        CK(cudaMemcpy(h, d, N * sizeof(float), cudaMemcpyDeviceToHost));
        memcpy(out.data(), h, N * sizeof(float));
        CK(cudaFreeHost(h));
    }
    std::vector<float> ref = init;
    for (int it = 0; it < ITERS; ++it)
        for (auto& v : ref) v = fmaf(v, 0.999f, 0.001f);
    return verdict(fixed ? "23-copies-in-loop (fixed)" : "23-copies-in-loop", out, ref, 1e-5);
}
