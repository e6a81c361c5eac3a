// 88-softcap-scores-transposed-fp64. Planted: uncoalesced loads and stores (dominant), and FP64 math (second).
// Gemma-2 style soft-capping of attention logits, y = 50 tanh(s * scale / 50), over 16 heads of 2048 x 2048 fp32
// scores (256 MB in, 256 MB out), a 32 x 32 tile per block of 32 x 8 threads, four elements a thread loaded before
// any is written. (1) threadIdx.x walks the query (row) index, so the 32 lanes of a warp load and store one column of
// 32 rows 8 KB apart: every access touches 32 sectors for 128 useful bytes, every store sends 32 partial-sector
// writes to L2. (2) The cap is a double literal: the division and tanh run in FP64 (~35 FP64 ops per element).
// Fixed twin: threadIdx.x walks the key (column) index (128 contiguous bytes per warp access), the math in float.
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
#define BH 16u                  // batch x heads
#define S 2048u                 // sequence length (queries = keys)
#define N ((size_t)BH * S * S)
#define SOFTCAP 50.0            // attention logit cap
#define SOFTCAPF 50.0f

__device__ __forceinline__ float cap_logit(float s, float scale) {
    return SOFTCAP * tanh(s * scale / SOFTCAP);  // ALSO PLANTED (second problem): the double literal promotes the math to FP64
}

__device__ __forceinline__ float cap_logit_f(float s, float scale) {
    return SOFTCAPF * tanhf(s * scale / SOFTCAPF);
}

extern "C" __global__ void softcap_scores_naive(const float* __restrict__ scores, float* __restrict__ out,
                                                float scale) {
    const unsigned q = blockIdx.y * 32 + threadIdx.x;  // query (row) from the lane
    const unsigned k = blockIdx.x * 32 + threadIdx.y;  // key (column), then + 8, + 16, + 24
    const float* src = scores + (size_t)blockIdx.z * S * S + (size_t)q * S + k;
    float* dst = out + (size_t)blockIdx.z * S * S + (size_t)q * S + k;
    float v[4];
#pragma unroll
    for (unsigned j = 0; j < 4; ++j) v[j] = src[8 * j];  // PLANTED
#pragma unroll
    for (unsigned j = 0; j < 4; ++j) dst[8 * j] = cap_logit(v[j], scale);  // PLANTED
}

extern "C" __global__ void softcap_scores(const float* __restrict__ scores, float* __restrict__ out, float scale) {
    const unsigned q = blockIdx.y * 32 + threadIdx.y;  // query (row), then + 8, + 16, + 24
    const unsigned k = blockIdx.x * 32 + threadIdx.x;  // key (column) from the lane
    const float* src = scores + (size_t)blockIdx.z * S * S + (size_t)q * S + k;
    float* dst = out + (size_t)blockIdx.z * S * S + (size_t)q * S + k;
    float v[4];
#pragma unroll
    for (unsigned j = 0; j < 4; ++j) v[j] = src[8 * j * S];
#pragma unroll
    for (unsigned j = 0; j < 4; ++j) dst[8 * j * S] = cap_logit_f(v[j], scale);
}

int main() {
    // Raw logits of a 128-dimensional head, all in the range the cap bends (|s * scale| from 35 to 150), so the
    // double tanh takes the same branch in every lane.
    std::vector<float> hs(N);
    for (auto& v : hs) { const float m = 400.0f + 1300.0f * frand(); v = (urand() & 1u) ? m : -m; }
    const float scale = 0.08838834764831845f;  // 1 / sqrt(128)
    float *ds = dcopy(hs), *dbad = dnew<float>(N), *dfix = dnew<float>(N);
    const dim3 grid(S / 32, S / 32, BH), block(32, 8);
    LAUNCH(softcap_scores_naive, grid, block, ds, dbad, scale);
    LAUNCH(softcap_scores, grid, block, ds, dfix, scale);
    CK(cudaDeviceSynchronize());
    return verdict("88-softcap-scores-transposed-fp64", hcopy(dbad, N), hcopy(dfix, N), 1e-4);
}
