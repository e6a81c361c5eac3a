// 125-healthy-moe-combine-gather. Healthy: mixture-of-experts combine, a gather-sum of rows at the DRAM roof.
// After the experts ran, their outputs sit in dispatch order (grouped by expert, 262144 rows of 512 floats,
// 512 MB). Each of 32768 tokens sums its top-8 rows weighted by its gates: a block per token reads its 8 slots
// and gates (two 16-byte loads each), then each thread loads its float4 of the 8 rows (independent loads;
// ptxas keeps 2-3 in flight a thread at 32 registers, ~80 KB a SM with 16 blocks) and writes one float4.
// Each row is read exactly once: DRAM streams ~576 MB in 2 KB pieces, slot -> row the only dependence.
// Challenger: a warp per token, 4 float4 per lane per row, 8 row pieces in flight a lane, same sums and order.
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
#define TOKENS 32768
#define TOPK 8
#define HID 512                    // hidden size, floats
#define NEXP 64
#define V4 (HID / 4)               // float4 per row

extern "C" __global__ void __launch_bounds__(128) moe_combine_rows(const float4* __restrict__ expert_out,
        const int* __restrict__ slot, const float* __restrict__ gate, float4* __restrict__ out) {
    const int t = blockIdx.x, c = threadIdx.x;
    const int4 s0 = reinterpret_cast<const int4*>(slot)[2 * t], s1 = reinterpret_cast<const int4*>(slot)[2 * t + 1];
    const float4 g0 = reinterpret_cast<const float4*>(gate)[2 * t], g1 = reinterpret_cast<const float4*>(gate)[2 * t + 1];
    const int s[TOPK] = {s0.x, s0.y, s0.z, s0.w, s1.x, s1.y, s1.z, s1.w};
    const float g[TOPK] = {g0.x, g0.y, g0.z, g0.w, g1.x, g1.y, g1.z, g1.w};
    float4 r[TOPK];
#pragma unroll
    for (int k = 0; k < TOPK; ++k) r[k] = expert_out[(size_t)s[k] * V4 + c];
    float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
    for (int k = 0; k < TOPK; ++k) {
        acc.x = fmaf(g[k], r[k].x, acc.x); acc.y = fmaf(g[k], r[k].y, acc.y);
        acc.z = fmaf(g[k], r[k].z, acc.z); acc.w = fmaf(g[k], r[k].w, acc.w);
    }
    out[(size_t)t * V4 + c] = acc;
}

extern "C" __global__ void __launch_bounds__(256) moe_combine_warp(const float4* __restrict__ expert_out,
        const int* __restrict__ slot, const float* __restrict__ gate, float4* __restrict__ out) {
    const int t = (blockIdx.x * blockDim.x + threadIdx.x) >> 5, lane = threadIdx.x & 31;
    if (t >= TOKENS) return;
    const int sl = slot[t * TOPK + (lane & 7)];
    const float gl = gate[t * TOPK + (lane & 7)];
    float4 acc[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) acc[j] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
    for (int k = 0; k < TOPK; k += 2) {
        float4 r[2][4];
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const float4* row = expert_out + (size_t)__shfl_sync(0xffffffffu, sl, k + h) * V4;
#pragma unroll
            for (int j = 0; j < 4; ++j) r[h][j] = row[lane + 32 * j];
        }
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const float gk = __shfl_sync(0xffffffffu, gl, k + h);
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                acc[j].x = fmaf(gk, r[h][j].x, acc[j].x); acc[j].y = fmaf(gk, r[h][j].y, acc[j].y);
                acc[j].z = fmaf(gk, r[h][j].z, acc[j].z); acc[j].w = fmaf(gk, r[h][j].w, acc[j].w);
            }
        }
    }
#pragma unroll
    for (int j = 0; j < 4; ++j) out[(size_t)t * V4 + lane + 32 * j] = acc[j];
}

int main() {
    // routing: 8 distinct experts per token, normalised gates; dispatch groups the (token, k) pairs by expert
    std::vector<int> expert(TOKENS * TOPK), count(NEXP, 0);
    std::vector<float> gate(TOKENS * TOPK);
    for (int t = 0; t < TOKENS; ++t) {
        int pick[NEXP];
        for (int e = 0; e < NEXP; ++e) pick[e] = e;
        float sum = 0.0f;
        for (int k = 0; k < TOPK; ++k) {
            const int j = k + (int)((urand() >> 8) % (unsigned)(NEXP - k));
            std::swap(pick[k], pick[j]);
            expert[t * TOPK + k] = pick[k];
            ++count[pick[k]];
            gate[t * TOPK + k] = 0.05f + frand();
            sum += gate[t * TOPK + k];
        }
        for (int k = 0; k < TOPK; ++k) gate[t * TOPK + k] /= sum;
    }
    std::vector<int> offset(NEXP + 1, 0), slot(TOKENS * TOPK);
    for (int e = 0; e < NEXP; ++e) offset[e + 1] = offset[e] + count[e];
    for (int i = 0; i < TOKENS * TOPK; ++i) slot[i] = offset[expert[i]]++;
    std::vector<float> eo((size_t)TOKENS * TOPK * HID);
    for (auto& v : eo) v = frand() - 0.5f;

    float4* deo = (float4*)dcopy(eo);
    std::vector<float>().swap(eo);
    int* dslot = dcopy(slot);
    float* dgate = dcopy(gate);
    float *dout = dnew<float>((size_t)TOKENS * HID), *dchal = dnew<float>((size_t)TOKENS * HID);
    LAUNCH(moe_combine_rows, TOKENS, 128, deo, dslot, dgate, (float4*)dout);
    LAUNCH(moe_combine_warp, TOKENS * 32 / 256, 256, deo, dslot, dgate, (float4*)dchal);
    CK(cudaDeviceSynchronize());
    return verdict("125-healthy-moe-combine-gather", hcopy(dout, (size_t)TOKENS * HID), hcopy(dchal, (size_t)TOKENS * HID), 1e-5);
}
