// 56-oddeven-transposition-sort. Planted: warp divergence (lanes masked off). Every block sorts 1024 keys in
// shared memory by odd-even transposition: 1024 phases, a barrier after each. The block has one thread per
// key, but in a phase only the threads at even (or odd) positions compare and swap with their right
// neighbour: half of every warp sits masked off in every phase, and the swap itself is data-dependent.
// Fixed twin: one thread per pair (512 threads), every lane compares the pair it owns and writes min and max
// without a branch.
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
#define KEYS 1024
#define BLOCKS 4096

extern "C" __global__ void sort_thread_per_key(const float* __restrict__ in, float* __restrict__ out) {
    __shared__ float s[KEYS];
    unsigned t = threadIdx.x;
    s[t] = in[blockIdx.x * KEYS + t];
    __syncthreads();
    for (unsigned p = 0; p < KEYS; ++p) {
        if (((t ^ p) & 1u) == 0 && t + 1 < KEYS) { float a = s[t], b = s[t + 1]; if (a > b) { s[t] = b; s[t + 1] = a; } }  // PLANTED
        __syncthreads();
    }
    out[blockIdx.x * KEYS + t] = s[t];
}

extern "C" __global__ void sort_thread_per_pair(const float* __restrict__ in, float* __restrict__ out) {
    __shared__ float s[KEYS];
    unsigned t = threadIdx.x;
    s[t] = in[blockIdx.x * KEYS + t];
    s[t + KEYS / 2] = in[blockIdx.x * KEYS + t + KEYS / 2];
    __syncthreads();
    for (unsigned p = 0; p < KEYS; ++p) {
        unsigned i = 2 * t + (p & 1u);
        if (i + 1 < KEYS) { float a = s[i], b = s[i + 1]; s[i] = fminf(a, b); s[i + 1] = fmaxf(a, b); }
        __syncthreads();
    }
    out[blockIdx.x * KEYS + t] = s[t];
    out[blockIdx.x * KEYS + t + KEYS / 2] = s[t + KEYS / 2];
}

int main() {
    const size_t n = (size_t)KEYS * BLOCKS;
    std::vector<float> h(n);
    for (auto& v : h) v = frand();
    float *din = dcopy(h), *dbad = dnew<float>(n), *dfix = dnew<float>(n);
    LAUNCH(sort_thread_per_key, BLOCKS, KEYS, din, dbad);
    LAUNCH(sort_thread_per_pair, BLOCKS, KEYS / 2, din, dfix);
    CK(cudaDeviceSynchronize());
    std::vector<float> a = hcopy(dbad, n), b = hcopy(dfix, n);
    for (size_t i = 0; i + 1 < n; ++i)
        if ((i + 1) % KEYS && a[i] > a[i + 1]) { printf("MISMATCH unsorted at %zu\n", i); return 1; }
    return verdict("56-oddeven-transposition-sort", a, b, 0.0);
}
