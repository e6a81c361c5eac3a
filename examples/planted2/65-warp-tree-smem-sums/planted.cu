// 65-warp-tree-smem-sums. Planted: warp divergence by predication. Sums of 32-float chunks (64M floats), one
// chunk per warp at a time, by the old warp-synchronous tree in shared memory: after the load, five levels in
// which only lanes below 16, 8, 4, 2, 1 add. The bodies are short, so the compiler predicates them: every
// warp issues each level with all but a few lanes predicated off, and the kernel spends its time issuing
// those shared-memory instructions.
// Fixed twin: the same sums with __shfl_down_sync (every lane active at every level, no shared memory).
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

extern "C" __global__ void chunk_sums_smem_tree(const float* __restrict__ x, float* __restrict__ sums) {
    __shared__ float sh[THREADS];
    const unsigned lane = threadIdx.x % 32;
    for (unsigned i = blockIdx.x * THREADS + threadIdx.x; i < N; i += gridDim.x * THREADS) {
        sh[threadIdx.x] = x[i];
        __syncwarp();
        for (unsigned s = 16; s > 0; s >>= 1) {
            if (lane < s) sh[threadIdx.x] += sh[threadIdx.x + s];  // PLANTED
            __syncwarp();
        }
        if (lane == 0) sums[i / 32] = sh[threadIdx.x];
        __syncwarp();
    }
}

extern "C" __global__ void chunk_sums_shuffle(const float* __restrict__ x, float* __restrict__ sums) {
    for (unsigned i = blockIdx.x * THREADS + threadIdx.x; i < N; i += gridDim.x * THREADS) {
        float v = x[i];
        for (unsigned s = 16; s > 0; s >>= 1) v += __shfl_down_sync(0xffffffffu, v, s);
        if (i % 32 == 0) sums[i / 32] = v;
    }
}

int main() {
    std::vector<float> h(N);
    for (auto& v : h) v = (float)(urand() % 16);  // integers: every order of summation is exact
    float *dx = dcopy(h), *dbad = dnew<float>(N / 32), *dfix = dnew<float>(N / 32);
    LAUNCH(chunk_sums_smem_tree, 132 * 8, THREADS, dx, dbad);
    LAUNCH(chunk_sums_shuffle, 132 * 8, THREADS, dx, dfix);
    CK(cudaDeviceSynchronize());
    return verdict("65-warp-tree-smem-sums", hcopy(dbad, N / 32), hcopy(dfix, N / 32), 0.0);
}
