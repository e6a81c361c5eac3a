// 22-layernorm-double-accum. Planted: FP64 in a float kernel. A warp-per-row layer norm fused with an
// exact GELU over fp16 activations (64K rows x 1024 halves, 16-byte loads and stores), written the
// reference way in double: the sum and the sum of squares accumulate in double, and each output is
// (x - mean) / std followed by 0.5 z (1 + erf(z / sqrt 2)), all in double. erf in double is about 45 FP64
// instructions and the division about 10 more: ~60 FP64 operations per element against 4 bytes of DRAM
// traffic, so the FP64 pipe (64 per clock per SM, half the FP32 rate) and not DRAM limits the kernel.
// Fixed twin: the same computation in float (erff, float division): memory-bound.
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
#include <cuda_fp16.h>
#define ROWS (64u << 10)
#define COLS 1024
#define THREADS 256
#define PER (COLS / 32 / 8)   // 16-byte vectors (8 halves) per lane

__device__ __forceinline__ void unpack(uint4 u, float* f) {
    const __half2* h = reinterpret_cast<const __half2*>(&u);
    for (int i = 0; i < 4; ++i) { float2 t = __half22float2(h[i]); f[2 * i] = t.x; f[2 * i + 1] = t.y; }
}
__device__ __forceinline__ uint4 pack(const float* f) {
    uint4 u;
    __half2* h = reinterpret_cast<__half2*>(&u);
    for (int i = 0; i < 4; ++i) h[i] = __floats2half2_rn(f[2 * i], f[2 * i + 1]);
    return u;
}

__device__ __forceinline__ float gelu_d(float x, double mean, double sd) {
    double z = ((double)x - mean) / sd;  // PLANTED
    return (float)(0.5 * z * (1.0 + erf(z * 0.7071067811865476)));  // PLANTED
}

extern "C" __global__ void layernorm_double(const uint4* __restrict__ x, uint4* __restrict__ y) {
    unsigned r = (blockIdx.x * blockDim.x + threadIdx.x) / 32, lane = threadIdx.x % 32;
    double s = 0.0, q = 0.0;
    for (int j = 0; j < PER; ++j) {
        float f[8];
        unpack(x[(size_t)r * (COLS / 8) + j * 32 + lane], f);
        for (int i = 0; i < 8; ++i) {
            s += (double)f[i];  // PLANTED
            q += (double)f[i] * f[i];
        }
    }
    for (int o = 16; o > 0; o /= 2) { s += __shfl_xor_sync(0xffffffffu, s, o); q += __shfl_xor_sync(0xffffffffu, q, o); }
    double mean = s / COLS, sd = sqrt(q / COLS - mean * mean + 1e-5);
    for (int j = 0; j < PER; ++j) {  // second pass: the row again (L1/L2 hits), fewer live registers
        float f[8];
        unpack(x[(size_t)r * (COLS / 8) + j * 32 + lane], f);
        for (int i = 0; i < 8; ++i) f[i] = gelu_d(f[i], mean, sd);
        y[(size_t)r * (COLS / 8) + j * 32 + lane] = pack(f);
    }
}

__device__ __forceinline__ float gelu_f(float x, float mean, float sd) {
    float z = (x - mean) / sd;
    return 0.5f * z * (1.0f + erff(z * 0.70710678f));
}

extern "C" __global__ void layernorm_float(const uint4* __restrict__ x, uint4* __restrict__ y) {
    unsigned r = (blockIdx.x * blockDim.x + threadIdx.x) / 32, lane = threadIdx.x % 32;
    float s = 0.0f, q = 0.0f;
    for (int j = 0; j < PER; ++j) {
        float f[8];
        unpack(x[(size_t)r * (COLS / 8) + j * 32 + lane], f);
        for (int i = 0; i < 8; ++i) { s += f[i]; q += f[i] * f[i]; }
    }
    for (int o = 16; o > 0; o /= 2) { s += __shfl_xor_sync(0xffffffffu, s, o); q += __shfl_xor_sync(0xffffffffu, q, o); }
    float mean = s / COLS, sd = sqrtf(q / COLS - mean * mean + 1e-5f);
    for (int j = 0; j < PER; ++j) {  // second pass: the row again (L1/L2 hits), fewer live registers
        float f[8];
        unpack(x[(size_t)r * (COLS / 8) + j * 32 + lane], f);
        for (int i = 0; i < 8; ++i) f[i] = gelu_f(f[i], mean, sd);
        y[(size_t)r * (COLS / 8) + j * 32 + lane] = pack(f);
    }
}

static std::vector<float> to_float(const std::vector<__half>& h) {
    std::vector<float> f(h.size());
    for (size_t i = 0; i < h.size(); ++i) f[i] = __half2float(h[i]);
    return f;
}

int main() {
    size_t n = (size_t)ROWS * COLS;
    std::vector<__half> hx(n);
    for (auto& v : hx) v = __float2half(frand());
    __half *dx = dcopy(hx), *dbad = dnew<__half>(n), *dfix = dnew<__half>(n);
    LAUNCH(layernorm_double, ROWS * 32 / THREADS, THREADS, (const uint4*)dx, (uint4*)dbad);
    LAUNCH(layernorm_float, ROWS * 32 / THREADS, THREADS, (const uint4*)dx, (uint4*)dfix);
    CK(cudaDeviceSynchronize());
    // both round to half at the end: allow two half ulps
    return verdict("22-layernorm-double-accum", to_float(hcopy(dbad, n)), to_float(hcopy(dfix, n)), 2e-3);
}
