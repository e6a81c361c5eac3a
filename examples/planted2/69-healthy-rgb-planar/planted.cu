// 69-healthy-rgb-planar. Healthy. Converts 64M interleaved RGB pixels (three floats each) to three planes,
// through shared memory: each 1024-thread block loads its 3072 floats coalesced, one barrier, then each thread
// reads its pixel's three values (a stride of 3 words: odd, so no bank conflict) and writes them to the three
// planes, coalesced. Every byte crosses DRAM once each way (768 MB read, 768 MB written): DRAM-bound.
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
#define PIXELS (64u << 20)
#define THREADS 1024

extern "C" __global__ void rgb_to_planar(const float* __restrict__ rgb, float* __restrict__ r,
                                         float* __restrict__ g, float* __restrict__ b) {
    __shared__ float s[3 * THREADS];
    const size_t base = (size_t)blockIdx.x * THREADS;
    for (int k = threadIdx.x; k < 3 * THREADS; k += THREADS) s[k] = rgb[3 * base + k];
    __syncthreads();
    const size_t p = base + threadIdx.x;
    r[p] = s[3 * threadIdx.x];
    g[p] = s[3 * threadIdx.x + 1];
    b[p] = s[3 * threadIdx.x + 2];
}

int main() {
    std::vector<float> h(3 * (size_t)PIXELS);
    for (auto& v : h) v = frand();
    float *din = dcopy(h), *dr = dnew<float>(PIXELS), *dg = dnew<float>(PIXELS), *db = dnew<float>(PIXELS);
    LAUNCH(rgb_to_planar, PIXELS / THREADS, THREADS, din, dr, dg, db);
    CK(cudaDeviceSynchronize());
    std::vector<float> got = hcopy(dr, PIXELS), want(PIXELS);
    for (size_t i = 0; i < PIXELS; ++i) want[i] = h[3 * i];
    std::vector<float> gb = hcopy(db, PIXELS);
    for (size_t i = 0; i < PIXELS; ++i) if (gb[i] != h[3 * i + 2]) { printf("MISMATCH blue at %zu\n", i); return 1; }
    return verdict("69-healthy-rgb-planar", got, want, 0.0);
}
