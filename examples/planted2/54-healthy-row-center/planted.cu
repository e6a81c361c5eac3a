// 54-healthy-row-center. Healthy: subtract each row's mean from a 16384 x 4096 float matrix, one 256-thread
// block per row: each thread loads 4 float4 of the row into registers, the block sums them (shuffles within
// warps, the 8 warp sums through shared memory, two barriers), and the centred row is written from the
// registers. One read and one write of the matrix (512 MB): bound by DRAM. No warning is expected.
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
#define ROWS 16384u
#define COLS 4096u
#define T 256
#define PER (COLS / 4 / T)  // float4 per thread

extern "C" __global__ void __launch_bounds__(T) center_rows(const float4* __restrict__ x, float4* __restrict__ y) {
    __shared__ float part[T / 32];
    __shared__ float mean;
    const float4* xr = x + (size_t)blockIdx.x * (COLS / 4);
    float4 v[PER];
    float s = 0.0f;
#pragma unroll
    for (int k = 0; k < PER; ++k) {
        v[k] = xr[threadIdx.x + T * k];
        s += (v[k].x + v[k].y) + (v[k].z + v[k].w);
    }
    for (int d = 16; d > 0; d /= 2) s += __shfl_xor_sync(0xffffffffu, s, d);
    if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = s;
    __syncthreads();
    if (threadIdx.x < 32) {
        float w = threadIdx.x < T / 32 ? part[threadIdx.x] : 0.0f;
        for (int d = 16; d > 0; d /= 2) w += __shfl_xor_sync(0xffffffffu, w, d);
        if (threadIdx.x == 0) mean = w / COLS;
    }
    __syncthreads();
    float m = mean;
    float4* yr = y + (size_t)blockIdx.x * (COLS / 4);
#pragma unroll
    for (int k = 0; k < PER; ++k) yr[threadIdx.x + T * k] = make_float4(v[k].x - m, v[k].y - m, v[k].z - m, v[k].w - m);
}

int main() {
    const size_t n = (size_t)ROWS * COLS;
    std::vector<float> h(n), ref(n);
    for (auto& v : h) v = frand();
    for (size_t r = 0; r < ROWS; ++r) {
        double s = 0;
        for (size_t c = 0; c < COLS; ++c) s += h[r * COLS + c];
        float m = (float)(s / COLS);
        for (size_t c = 0; c < COLS; ++c) ref[r * COLS + c] = h[r * COLS + c] - m;
    }
    float *dx = dcopy(h), *dy = dnew<float>(n);
    LAUNCH(center_rows, ROWS, T, reinterpret_cast<const float4*>(dx), reinterpret_cast<float4*>(dy));
    CK(cudaDeviceSynchronize());
    return verdict("54-healthy-row-center", hcopy(dy, n), ref, 1e-3);
}
