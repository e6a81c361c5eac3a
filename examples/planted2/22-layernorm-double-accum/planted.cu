// 22-layernorm-double-accum. Planted: FP64 in a float kernel. A warp-per-row layer norm (32K rows x
// 1024 floats, 16-byte loads) that accumulates the sum and the sum of squares in double: every
// element is converted to double and added on the FP64 pipe, and the shuffles move 64-bit values.
// Fixed twin: float accumulators (the row's 1024 values are well within float's range and precision).
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
#define ROWS (32u << 10)
#define COLS 1024
#define THREADS 256
#define PER (COLS / 32 / 4)   // float4 per lane

extern "C" __global__ void layernorm_double(const float4* __restrict__ x, float4* __restrict__ y) {
    unsigned r = (blockIdx.x * blockDim.x + threadIdx.x) / 32, lane = threadIdx.x % 32;
    float4 v[PER];
    double s = 0.0, q = 0.0;
    for (int j = 0; j < PER; ++j) {
        v[j] = x[(size_t)r * (COLS / 4) + j * 32 + lane];
        s += (double)v[j].x + v[j].y + v[j].z + v[j].w;  // PLANTED
        q += (double)v[j].x * v[j].x + (double)v[j].y * v[j].y + (double)v[j].z * v[j].z + (double)v[j].w * v[j].w;
    }
    for (int o = 16; o > 0; o /= 2) { s += __shfl_xor_sync(0xffffffffu, s, o); q += __shfl_xor_sync(0xffffffffu, q, o); }
    float mean = (float)(s / COLS), rstd = rsqrtf((float)(q / COLS) - mean * mean + 1e-5f);
    for (int j = 0; j < PER; ++j)
        y[(size_t)r * (COLS / 4) + j * 32 + lane] = make_float4((v[j].x - mean) * rstd, (v[j].y - mean) * rstd,
                                                                (v[j].z - mean) * rstd, (v[j].w - mean) * rstd);
}

extern "C" __global__ void layernorm_float(const float4* __restrict__ x, float4* __restrict__ y) {
    unsigned r = (blockIdx.x * blockDim.x + threadIdx.x) / 32, lane = threadIdx.x % 32;
    float4 v[PER];
    float s = 0.0f, q = 0.0f;
    for (int j = 0; j < PER; ++j) {
        v[j] = x[(size_t)r * (COLS / 4) + j * 32 + lane];
        s += v[j].x + v[j].y + v[j].z + v[j].w;
        q += v[j].x * v[j].x + v[j].y * v[j].y + v[j].z * v[j].z + v[j].w * v[j].w;
    }
    for (int o = 16; o > 0; o /= 2) { s += __shfl_xor_sync(0xffffffffu, s, o); q += __shfl_xor_sync(0xffffffffu, q, o); }
    float mean = s / COLS, rstd = rsqrtf(q / COLS - mean * mean + 1e-5f);
    for (int j = 0; j < PER; ++j)
        y[(size_t)r * (COLS / 4) + j * 32 + lane] = make_float4((v[j].x - mean) * rstd, (v[j].y - mean) * rstd,
                                                                (v[j].z - mean) * rstd, (v[j].w - mean) * rstd);
}

int main() {
    size_t n = (size_t)ROWS * COLS;
    std::vector<float> hx(n);
    for (auto& v : hx) v = frand();
    float *dx = dcopy(hx), *dbad = dnew<float>(n), *dfix = dnew<float>(n);
    LAUNCH(layernorm_double, ROWS * 32 / THREADS, THREADS, (const float4*)dx, (float4*)dbad);
    LAUNCH(layernorm_float, ROWS * 32 / THREADS, THREADS, (const float4*)dx, (float4*)dfix);
    CK(cudaDeviceSynchronize());
    return verdict("22-layernorm-double-accum", hcopy(dbad, n), hcopy(dfix, n), 1e-3);
}
