// 51-healthy-smem-stencil. Healthy: a 1D convolution with a 17-tap filter (radius 8) over 64M floats, the
// textbook shared-memory version: each 256-thread block stages its 256 inputs plus an 8-element halo on each
// side in shared memory, one barrier, then each thread reads its 17 neighbours from the tile (taps in
// constant memory). Every input is read from DRAM about once: bound by DRAM (512 MB). No warning expected.
// Challenger (added 2026-11-27, after the capture measured DRAM at 52%, to test the healthy label by
// measurement): the same filter with no shared memory, four outputs per thread from five aligned float4 loads,
// the overlap between neighbours served by L1. If it runs 1.2x faster or more, the label is refuted.
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
#define R 8
#define T 256

__constant__ float c_taps[2 * R + 1];

extern "C" __global__ void __launch_bounds__(T) conv1d_tiled(const float* __restrict__ x, float* __restrict__ y) {
    __shared__ float tile[T + 2 * R];
    int i = blockIdx.x * T + threadIdx.x;
    tile[threadIdx.x + R] = x[i];
    if (threadIdx.x < R) {
        int l = i - R, r = i + T;
        tile[threadIdx.x] = l >= 0 ? x[l] : 0.0f;
        tile[threadIdx.x + T + R] = r < (int)N ? x[r] : 0.0f;
    }
    __syncthreads();
    float s = 0.0f;
#pragma unroll
    for (int k = 0; k <= 2 * R; ++k) s = fmaf(c_taps[k], tile[threadIdx.x + k], s);
    y[i] = s;
}

extern "C" __global__ void __launch_bounds__(T) conv1d_registers(const float4* __restrict__ x4, float4* __restrict__ y4) {
    const int q = blockIdx.x * T + threadIdx.x;  // outputs 4q .. 4q + 3
    float v[4 + 2 * R];
#pragma unroll
    for (int c = 0; c < (4 + 2 * R) / 4; ++c) {
        const int j = q - R / 4 + c;
        const float4 f = (j >= 0 && j < (int)(N / 4)) ? x4[j] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        v[4 * c] = f.x; v[4 * c + 1] = f.y; v[4 * c + 2] = f.z; v[4 * c + 3] = f.w;
    }
    float o[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) {
        float s = 0.0f;
#pragma unroll
        for (int k = 0; k <= 2 * R; ++k) s = fmaf(c_taps[k], v[e + k], s);
        o[e] = s;
    }
    y4[q] = make_float4(o[0], o[1], o[2], o[3]);
}

int main() {
    std::vector<float> hx(N), ref(N), taps(2 * R + 1);
    for (auto& v : hx) v = frand();
    for (int k = 0; k <= 2 * R; ++k) taps[k] = 1.0f / (1 + (k > R ? k - R : R - k));
    for (long i = 0; i < (long)N; ++i) {
        float s = 0.0f;
        for (int k = 0; k <= 2 * R; ++k) {
            long j = i - R + k;
            s = fmaf(taps[k], (j >= 0 && j < (long)N) ? hx[j] : 0.0f, s);
        }
        ref[i] = s;
    }
    CK(cudaMemcpyToSymbol(c_taps, taps.data(), sizeof(float) * (2 * R + 1)));
    float *dx = dcopy(hx), *dy = dnew<float>(N), *dc = dnew<float>(N);
    LAUNCH(conv1d_tiled, N / T, T, dx, dy);
    LAUNCH(conv1d_registers, N / 4 / T, T, (const float4*)dx, (float4*)dc);
    CK(cudaDeviceSynchronize());
    return verdict("51-healthy-smem-stencil", hcopy(dy, N), ref, 1e-5) |
           verdict("51-healthy-smem-stencil challenger", hcopy(dc, N), ref, 1e-5);
}
