// 11-single-block-dot. Planted: tiny grid. A dot product of two 16M-float vectors by one block of
// 1024 threads: one SM of 132 streams 128 MB while the others idle.
// Fixed twin: 1056 blocks (8 per SM), float4 loads, shuffles, one atomicAdd per block.
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
#define N (16u << 20)

extern "C" __global__ void dot_one_block(const float* __restrict__ a, const float* __restrict__ b,
                                         float* __restrict__ out) {
    __shared__ float part[32];
    float s = 0.0f;
    for (unsigned i = threadIdx.x; i < N; i += blockDim.x) s += a[i] * b[i];  // PLANTED
    for (int o = 16; o > 0; o /= 2) s += __shfl_xor_sync(0xffffffffu, s, o);
    if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = s;
    __syncthreads();
    if (threadIdx.x < 32) {
        s = part[threadIdx.x];
        for (int o = 16; o > 0; o /= 2) s += __shfl_xor_sync(0xffffffffu, s, o);
        if (threadIdx.x == 0) *out = s;
    }
}

extern "C" __global__ void dot_grid(const float4* __restrict__ a, const float4* __restrict__ b,
                                    float* __restrict__ out) {
    __shared__ float part[8];
    float s = 0.0f;
    for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < N / 4; i += gridDim.x * blockDim.x) {
        float4 x = a[i], y = b[i];
        s += x.x * y.x + x.y * y.y + x.z * y.z + x.w * y.w;
    }
    for (int o = 16; o > 0; o /= 2) s += __shfl_xor_sync(0xffffffffu, s, o);
    if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = s;
    __syncthreads();
    if (threadIdx.x == 0) {
        for (int w = 1; w < 8; ++w) s += part[w];
        atomicAdd(out, s);
    }
}

int main() {
    std::vector<float> ha(N), hb(N);
    for (unsigned i = 0; i < N; ++i) { ha[i] = frand() - 0.5f; hb[i] = frand() - 0.5f; }
    float *da = dcopy(ha), *db = dcopy(hb), *dbad = dnew<float>(1), *dfix = dnew<float>(1);
    LAUNCH(dot_one_block, 1, 1024, da, db, dbad);
    LAUNCH(dot_grid, 132 * 8, 256, (const float4*)da, (const float4*)db, dfix);
    CK(cudaDeviceSynchronize());
    return verdict("11-single-block-dot", hcopy(dbad, 1), hcopy(dfix, 1), 1e-3);
}
