// 60-healthy-under-wave-stream. Healthy. y = a*x + y over 64M floats by a persistent grid of 100 blocks of
// 1024 threads (under one wave: fewer blocks than SMs), each thread striding through the arrays with four
// independent float4 loads of each array in flight. 100 SMs keep more than enough bytes in flight to saturate
// DRAM: the small grid costs nothing, and DRAM bandwidth sets the time.
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
#define BLOCKS 100
#define THREADS 1024

extern "C" __global__ void saxpy_persistent(float a, const float4* __restrict__ x, float4* __restrict__ y) {
    const unsigned n4 = N / 4, stride = gridDim.x * blockDim.x;
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    for (; i + 3 * stride < n4; i += 4 * stride) {
        float4 xv[4], yv[4];
#pragma unroll
        for (int u = 0; u < 4; ++u) { xv[u] = x[i + u * stride]; yv[u] = y[i + u * stride]; }
#pragma unroll
        for (int u = 0; u < 4; ++u)
            y[i + u * stride] = make_float4(fmaf(a, xv[u].x, yv[u].x), fmaf(a, xv[u].y, yv[u].y),
                                            fmaf(a, xv[u].z, yv[u].z), fmaf(a, xv[u].w, yv[u].w));
    }
    for (; i < n4; i += stride) {
        float4 xv = x[i], yv = y[i];
        y[i] = make_float4(fmaf(a, xv.x, yv.x), fmaf(a, xv.y, yv.y), fmaf(a, xv.z, yv.z), fmaf(a, xv.w, yv.w));
    }
}

int main() {
    std::vector<float> hx(N), hy(N);
    for (auto& v : hx) v = frand();
    for (auto& v : hy) v = frand();
    float *dx = dcopy(hx), *dy = dcopy(hy);
    const float a = 1.5f;
    LAUNCH(saxpy_persistent, BLOCKS, THREADS, a, (const float4*)dx, (float4*)dy);
    CK(cudaDeviceSynchronize());
    std::vector<float> got = hcopy(dy, N), want(N);
    for (size_t i = 0; i < N; ++i) want[i] = fmaf(a, hx[i], hy[i]);
    return verdict("60-healthy-under-wave-stream", got, want, 0.0);
}
