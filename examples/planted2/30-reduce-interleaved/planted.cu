// 30-reduce-interleaved. Planted: warp divergence. The textbook first reduction: each block sums 256
// elements in shared memory with interleaved addressing, `if (tid % (2 * s) == 0)`: from the first
// step on, only every 2nd, 4th, 8th... lane of each warp works, every warp still issues every step,
// and the modulo runs in every thread.
// Fixed twin: warp shuffles (full warps at every step), one shared exchange of the 8 warp sums.
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
#define THREADS 256

extern "C" __global__ void reduce_interleaved(const float* __restrict__ x, float* __restrict__ part) {
    __shared__ float s[THREADS];
    unsigned tid = threadIdx.x;
    s[tid] = x[blockIdx.x * THREADS + tid];
    __syncthreads();
    for (unsigned st = 1; st < THREADS; st *= 2) {
        if (tid % (2 * st) == 0) s[tid] += s[tid + st];  // PLANTED
        __syncthreads();
    }
    if (tid == 0) part[blockIdx.x] = s[0];
}

extern "C" __global__ void reduce_shuffle(const float* __restrict__ x, float* __restrict__ part) {
    __shared__ float ws[THREADS / 32];
    float v = x[blockIdx.x * THREADS + threadIdx.x];
    for (int o = 16; o > 0; o /= 2) v += __shfl_down_sync(0xffffffffu, v, o);
    if (threadIdx.x % 32 == 0) ws[threadIdx.x / 32] = v;
    __syncthreads();
    if (threadIdx.x == 0) {
        for (int w = 1; w < THREADS / 32; ++w) v += ws[w];
        part[blockIdx.x] = v;
    }
}

int main() {
    std::vector<float> hx(N);
    for (auto& v : hx) v = (float)(urand() % 64);  // integers: every order of summation is exact
    float *dx = dcopy(hx), *dbad = dnew<float>(N / THREADS), *dfix = dnew<float>(N / THREADS);
    LAUNCH(reduce_interleaved, N / THREADS, THREADS, dx, dbad);
    LAUNCH(reduce_shuffle, N / THREADS, THREADS, dx, dfix);
    CK(cudaDeviceSynchronize());
    return verdict("30-reduce-interleaved", hcopy(dbad, N / THREADS), hcopy(dfix, N / THREADS), 0.0);
}
