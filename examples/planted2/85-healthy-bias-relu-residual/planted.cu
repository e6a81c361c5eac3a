// 85-healthy-bias-relu-residual. Healthy: the epilogue of a transformer feed-forward layer, y = relu(x + bias) + residual,
// over 12288 tokens x 4096 features in fp32 (192 MB per tensor). One float4 per thread on a 2D grid (4 blocks
// of 256 threads along a row, one grid row per token): x and the residual are read once with 16-byte loads,
// the 16 KB bias is read through L1 and stays there, y is written once with 16-byte stores. 576 MB through
// DRAM, coalesced both ways, a handful of instructions per float4: bound by DRAM. No warning is expected.
// Challenger: one 256-thread block per row, each thread loading four float4 of the row (12 loads in flight)
// before it writes them: the same bytes with more loads in flight per thread. Same speed expected.
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
#define ROWS 12288u
#define COLS 4096u
#define C4 (COLS / 4)           // float4 per row
#define N ((size_t)ROWS * COLS)

__device__ __forceinline__ float4 epilogue(float4 a, float4 b, float4 r) {
    return make_float4(fmaxf(a.x + b.x, 0.0f) + r.x, fmaxf(a.y + b.y, 0.0f) + r.y,
                       fmaxf(a.z + b.z, 0.0f) + r.z, fmaxf(a.w + b.w, 0.0f) + r.w);
}

extern "C" __global__ void bias_relu_residual_vec4(const float4* __restrict__ x, const float4* __restrict__ bias,
                                                   const float4* __restrict__ res, float4* __restrict__ y) {
    const unsigned c = blockIdx.x * blockDim.x + threadIdx.x;  // float4 column of the row
    const size_t i = (size_t)blockIdx.y * C4 + c;
    y[i] = epilogue(x[i], bias[c], res[i]);
}

extern "C" __global__ void bias_relu_residual_rowloop(const float4* __restrict__ x, const float4* __restrict__ bias,
                                                      const float4* __restrict__ res, float4* __restrict__ y) {
    const size_t row = (size_t)blockIdx.x * C4;
    float4 a[C4 / 256], b[C4 / 256], r[C4 / 256];  // launched with 256 threads: four float4 of the row each
#pragma unroll
    for (unsigned k = 0; k < C4 / 256; ++k) {
        const unsigned c = threadIdx.x + 256u * k;
        a[k] = x[row + c]; b[k] = bias[c]; r[k] = res[row + c];
    }
#pragma unroll
    for (unsigned k = 0; k < C4 / 256; ++k) y[row + threadIdx.x + 256u * k] = epilogue(a[k], b[k], r[k]);
}

int main() {
    std::vector<float> hx(N), hr(N), hb(COLS);
    for (auto& v : hx) v = frand() * 2.0f - 1.0f;
    for (auto& v : hr) v = frand() * 2.0f - 1.0f;
    for (auto& v : hb) v = frand() * 0.5f - 0.25f;
    float *dx = dcopy(hx), *dr = dcopy(hr), *db = dcopy(hb), *dy = dnew<float>(N), *dch = dnew<float>(N);
    LAUNCH(bias_relu_residual_vec4, dim3(C4 / 256, ROWS), 256, (const float4*)dx, (const float4*)db,
           (const float4*)dr, (float4*)dy);
    LAUNCH(bias_relu_residual_rowloop, ROWS, 256, (const float4*)dx, (const float4*)db, (const float4*)dr,
           (float4*)dch);
    CK(cudaDeviceSynchronize());
    std::vector<float> want(N);
    for (size_t i = 0; i < N; ++i) want[i] = fmaxf(hx[i] + hb[i % COLS], 0.0f) + hr[i];
    return verdict("85-healthy-bias-relu-residual", hcopy(dy, N), want, 0.0) |
           verdict("85-healthy-bias-relu-residual challenger", hcopy(dch, N), want, 0.0);
}
