// 52-healthy-warp-softmax. Healthy: softmax over the rows of a 65536 x 1024 float matrix, one warp per row,
// the way fused kernels do it: each lane loads 8 float4 of the row into registers (one read of the row),
// the max and the sum are reduced with shuffles, and the normalized row is written once. Bound by DRAM
// (256 MB each way): expf runs on the special-function pipe well below it. No warning is expected.
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
#define ROWS 65536u
#define COLS 1024u
#define PER (COLS / 128)  // float4 per lane

extern "C" __global__ void softmax_warp_row(const float4* __restrict__ x, float4* __restrict__ y) {
    unsigned lane = threadIdx.x % 32, row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    const float4* xr = x + (size_t)row * (COLS / 4);
    float4 v[PER];
    float m = -INFINITY;
#pragma unroll
    for (int k = 0; k < PER; ++k) {
        v[k] = xr[lane + 32 * k];
        m = fmaxf(m, fmaxf(fmaxf(v[k].x, v[k].y), fmaxf(v[k].z, v[k].w)));
    }
    for (int d = 16; d > 0; d /= 2) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, d));
    float s = 0.0f;
#pragma unroll
    for (int k = 0; k < PER; ++k) {
        v[k].x = __expf(v[k].x - m); v[k].y = __expf(v[k].y - m); v[k].z = __expf(v[k].z - m); v[k].w = __expf(v[k].w - m);
        s += (v[k].x + v[k].y) + (v[k].z + v[k].w);
    }
    for (int d = 16; d > 0; d /= 2) s += __shfl_xor_sync(0xffffffffu, s, d);
    float inv = 1.0f / s;
    float4* yr = y + (size_t)row * (COLS / 4);
#pragma unroll
    for (int k = 0; k < PER; ++k) yr[lane + 32 * k] = make_float4(v[k].x * inv, v[k].y * inv, v[k].z * inv, v[k].w * inv);
}

int main() {
    const size_t n = (size_t)ROWS * COLS;
    std::vector<float> hx(n), ref(n);
    for (auto& v : hx) v = 4.0f * frand() - 2.0f;
    for (size_t r = 0; r < ROWS; ++r) {
        const float* xr = &hx[r * COLS];
        double m = -1e30, s = 0;
        for (size_t c = 0; c < COLS; ++c) m = xr[c] > m ? xr[c] : m;
        for (size_t c = 0; c < COLS; ++c) s += exp(xr[c] - m);
        for (size_t c = 0; c < COLS; ++c) ref[r * COLS + c] = (float)(exp(xr[c] - m) / s);
    }
    float *dx = dcopy(hx), *dy = dnew<float>(n);
    LAUNCH(softmax_warp_row, ROWS / 8, 256, reinterpret_cast<const float4*>(dx), reinterpret_cast<float4*>(dy));
    CK(cudaDeviceSynchronize());
    return verdict("52-healthy-warp-softmax", hcopy(dy, n), ref, 1e-3);
}
