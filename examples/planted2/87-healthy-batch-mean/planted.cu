// 87-healthy-batch-mean. Healthy: the mean over the leading dimension of a [16][6M] fp32 tensor (x.mean(dim=0): 16
// gradient shards or micro-batches averaged feature by feature), 384 MB in, 24 MB out. One thread per float4 of
// features walks down the 16 rows, accumulating in registers; at each row a warp reads 512 contiguous bytes, and
// the loop is unrolled by 4, so four 16-byte loads are in flight per thread. No shared memory, no barrier, no
// atomics, the summation order fixed (results bit-exact). Bound by DRAM. No warning is expected.
// Challenger: one thread per feature (scalar 4-byte loads, the same row order), four times the threads. Same speed
// or a little slower expected.
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
#define B 16u                    // rows reduced over
#define C (6u << 20)             // features
#define C4 (C / 4)

extern "C" __global__ void batch_mean_vec4(const float4* __restrict__ x, float4* __restrict__ out) {
    const unsigned c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C4) return;
    float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll 4
    for (unsigned b = 0; b < B; ++b) {
        const float4 v = x[(size_t)b * C4 + c];
        acc.x += v.x; acc.y += v.y; acc.z += v.z; acc.w += v.w;
    }
    const float inv = 1.0f / B;
    out[c] = make_float4(acc.x * inv, acc.y * inv, acc.z * inv, acc.w * inv);
}

extern "C" __global__ void batch_mean_scalar(const float* __restrict__ x, float* __restrict__ out) {
    const unsigned c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    float acc = 0.0f;
#pragma unroll 4
    for (unsigned b = 0; b < B; ++b) acc += x[(size_t)b * C + c];
    out[c] = acc * (1.0f / B);
}

int main() {
    std::vector<float> hx((size_t)B * C);
    for (auto& v : hx) v = frand() * 2.0f - 1.0f;
    float *dx = dcopy(hx), *dout = dnew<float>(C), *dch = dnew<float>(C);
    LAUNCH(batch_mean_vec4, C4 / 256, 256, (const float4*)dx, (float4*)dout);
    LAUNCH(batch_mean_scalar, C / 256, 256, dx, dch);
    CK(cudaDeviceSynchronize());
    std::vector<float> want(C, 0.0f);
    for (unsigned b = 0; b < B; ++b)
        for (size_t c = 0; c < C; ++c) want[c] += hx[(size_t)b * C + c];
    for (auto& v : want) v *= 1.0f / B;
    return verdict("87-healthy-batch-mean", hcopy(dout, C), want, 0.0) |
           verdict("87-healthy-batch-mean challenger", hcopy(dch, C), want, 0.0);
}
