// 105-healthy-groupnorm-stats-nhwc. Healthy: GroupNorm statistics (mean, rstd of 32 groups of 16 channels) of a
// channels-last activation, 16 x 128 x 128 x 512 FP32 (537 MB, read once). Each 256-thread block streams a
// contiguous 64-pixel slab (128 KB) with 16-byte loads, sums and sums of squares per group through shuffles and
// shared memory (two barriers), and writes 32 partials; the sample's last block (a ticket counter per sample,
// threadfence-reduction style) combines its 256 partials in a fixed order: deterministic, and DRAM-bound.
// Challenger: one block per (sample, group), the textbook layout: each block reads its group's 64-byte slice of
// every pixel (2 KB stride), no inter-block step. Both are checked against a CPU reference in double.
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
#define NB 16
#define HW (128 * 128)
#define C 512
#define G 32
#define CPG (C / G)          // 16 channels, four float4, a group
#define C4 (C / 4)           // float4 per pixel
#define P 64                 // pixels per block in the tiled kernel
#define TILES (HW / P)       // blocks per sample
#define THREADS 256
#define PPI (THREADS / C4)   // pixels per step of a block
#define EPS 1e-5f
#define FULL 0xffffffffu
static_assert(HW % P == 0 && THREADS % C4 == 0 && CPG % 4 == 0, "whole tiles, whole groups per float4");

__device__ __forceinline__ void add4(float4 v, float& s, float& ss) {
    s += (v.x + v.y) + (v.z + v.w);
    ss += (v.x * v.x + v.y * v.y) + (v.z * v.z + v.w * v.w);
}

__device__ __forceinline__ void finish(float s, float ss, float* mean, float* rstd, int ng) {
    const float m = s * (1.f / ((float)HW * CPG));
    const float var = fmaxf(ss * (1.f / ((float)HW * CPG)) - m * m, 0.f);
    mean[ng] = m;
    rstd[ng] = rsqrtf(var + EPS);
}

extern "C" __global__ void __launch_bounds__(THREADS)
groupnorm_stats_tiles(const float* __restrict__ x, float2* __restrict__ partial, unsigned* __restrict__ ticket,
                      float* __restrict__ mean, float* __restrict__ rstd) {
    __shared__ float2 s_half[PPI][G];
    __shared__ float2 s_fin[THREADS / G][G];
    __shared__ bool s_last;
    const int n = blockIdx.x / TILES, tile = blockIdx.x % TILES, t = threadIdx.x, lane = t & 31;
    const int q = t % C4, pp = t / C4;               // this thread's float4 of channels, and pixel phase
    const float4* src = reinterpret_cast<const float4*>(x + ((size_t)n * HW + (size_t)tile * P) * C);
    float s = 0.f, ss = 0.f;
#pragma unroll 4
    for (int p = pp; p < P; p += PPI) add4(src[p * C4 + q], s, ss);
    // the four lanes of a group (consecutive q), then the block's pixel phases
    s += __shfl_xor_sync(FULL, s, 1);  ss += __shfl_xor_sync(FULL, ss, 1);
    s += __shfl_xor_sync(FULL, s, 2);  ss += __shfl_xor_sync(FULL, ss, 2);
    if ((lane & 3) == 0) s_half[pp][q / 4] = make_float2(s, ss);
    __syncthreads();
    if (t < G) {
        float2 a = s_half[0][t];
#pragma unroll
        for (int k = 1; k < PPI; ++k) { a.x += s_half[k][t].x; a.y += s_half[k][t].y; }
        partial[(size_t)blockIdx.x * G + t] = a;
        __threadfence();                             // the partial is visible before the ticket is taken
    }
    __syncthreads();
    if (t == 0) s_last = atomicAdd(&ticket[n], 1u) == TILES - 1;
    __syncthreads();
    if (!s_last) return;
    // the sample's last block: its TILES partials per group, in a fixed order
    __threadfence();
    const int g = t % G, part = t / G;
    float2 a = make_float2(0.f, 0.f);
    for (int k = part; k < TILES; k += THREADS / G) {
        const float2 v = __ldcg(&partial[((size_t)n * TILES + k) * G + g]);
        a.x += v.x; a.y += v.y;
    }
    s_fin[part][g] = a;
    __syncthreads();
    if (t < G) {
        float2 r = s_fin[0][t];
#pragma unroll
        for (int k = 1; k < THREADS / G; ++k) { r.x += s_fin[k][t].x; r.y += s_fin[k][t].y; }
        finish(r.x, r.y, mean, rstd, n * G + t);
        if (t == 0) ticket[n] = 0;                   // ready for the next call
    }
}

extern "C" __global__ void __launch_bounds__(THREADS)
groupnorm_stats_per_group(const float* __restrict__ x, float* __restrict__ mean, float* __restrict__ rstd) {
    __shared__ float2 s_warp[THREADS / 32];
    const int n = blockIdx.x / G, g = blockIdx.x % G, t = threadIdx.x, lane = t & 31, w = t >> 5;
    const int k = t % (CPG / 4), p0 = t / (CPG / 4);  // float4 within the group's slice, first pixel
    const float4* src = reinterpret_cast<const float4*>(x + (size_t)n * HW * C + g * CPG);
    float s = 0.f, ss = 0.f;
#pragma unroll 4
    for (int p = p0; p < HW; p += THREADS / (CPG / 4)) add4(src[p * C4 + k], s, ss);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) { s += __shfl_xor_sync(FULL, s, o); ss += __shfl_xor_sync(FULL, ss, o); }
    if (lane == 0) s_warp[w] = make_float2(s, ss);
    __syncthreads();
    if (t == 0) {
        float2 r = s_warp[0];
#pragma unroll
        for (int i = 1; i < THREADS / 32; ++i) { r.x += s_warp[i].x; r.y += s_warp[i].y; }
        finish(r.x, r.y, mean, rstd, blockIdx.x);
    }
}

int main() {
    const size_t total = (size_t)NB * HW * C;
    std::vector<float> bias(C), h(total);
    for (auto& b : bias) b = frand() - 0.5f;
    for (size_t i = 0; i < total; ++i) h[i] = bias[i % C] + 2.f * frand() - 1.f;
    std::vector<float> ref(2 * NB * G);                // means, then rstds
    for (int n = 0; n < NB; ++n) {
        std::vector<double> s(G, 0.0), ss(G, 0.0);
        for (size_t p = 0; p < HW; ++p) {
            const float* px = &h[((size_t)n * HW + p) * C];
            for (int c = 0; c < C; ++c) { s[c / CPG] += px[c]; ss[c / CPG] += (double)px[c] * px[c]; }
        }
        for (int g = 0; g < G; ++g) {
            const double m = s[g] / ((double)HW * CPG), var = ss[g] / ((double)HW * CPG) - m * m;
            ref[n * G + g] = (float)m;
            ref[NB * G + n * G + g] = (float)(1.0 / sqrt(var + EPS));
        }
    }
    float* dx = dcopy(h);
    float2* dpart = dnew<float2>((size_t)NB * TILES * G);
    unsigned* dticket = dnew<unsigned>(NB);
    float *dstat = dnew<float>(2 * NB * G), *dstat2 = dnew<float>(2 * NB * G);
    LAUNCH(groupnorm_stats_tiles, NB * TILES, THREADS, dx, dpart, dticket, dstat, dstat + NB * G);
    LAUNCH(groupnorm_stats_per_group, NB * G, THREADS, dx, dstat2, dstat2 + NB * G);
    CK(cudaDeviceSynchronize());
    std::vector<float> got = hcopy(dstat, 2 * NB * G), got2 = hcopy(dstat2, 2 * NB * G), want = ref;
    got.insert(got.end(), got2.begin(), got2.end());
    want.insert(want.end(), ref.begin(), ref.end());
    return verdict("105-healthy-groupnorm-stats-nhwc", got, want, 1e-3);
}
