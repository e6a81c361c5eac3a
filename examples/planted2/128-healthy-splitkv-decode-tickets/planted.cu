// 128-healthy-splitkv-decode-tickets. Healthy: split-KV attention decode (flash-decoding) for one query token, 32
// heads over a 32K-token FP16 KV cache (128-dim heads, 512 MB). Each block streams a 256-token chunk of one head
// (16-byte loads, online softmax in half-warps), merges its half-warps in shared memory, writes a partial
// (max, sum, 128 weighted values), then __threadfence and an atomicInc ticket per head: the last of the head's 128
// blocks to arrive merges the partials into the output and leaves the counter at zero. About one FMA per byte of
// cache: it should run near the DRAM roof, the tickets costing one atomic per block.
// Challenger: the same algorithm with 128-token chunks (256 splits a head, twice the blocks and partials).
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

#define HEADS 32
#define TOKENS 32768
#define DIM 128
#define THREADS 256
#define GROUPS (THREADS / 16)  // half-warps; each lane holds 8 of a token's 128 dims
#define FULL 0xffffffffu

__device__ __forceinline__ void unpack8(const uint4& u, float* f) {
    const __half2* h = reinterpret_cast<const __half2*>(&u);
#pragma unroll
    for (int i = 0; i < 4; ++i) { const float2 t = __half22float2(h[i]); f[2 * i] = t.x; f[2 * i + 1] = t.y; }
}

template <int CHUNK>
__device__ __forceinline__ void decode_chunk(const float* __restrict__ q, const __half* __restrict__ kc,
                                             const __half* __restrict__ vc, float2* __restrict__ part_ml,
                                             float* __restrict__ part_acc, unsigned* tickets, float* __restrict__ out) {
    constexpr int SPLITS = TOKENS / CHUNK, PER_GROUP = CHUNK / GROUPS;
    __shared__ __align__(16) float s_acc[GROUPS][DIM];
    __shared__ float s_m[GROUPS], s_l[GROUPS], s_w[SPLITS], s_red[2][THREADS / 32], s_fin[2][DIM], s_sum;
    __shared__ int s_last;
    const int head = blockIdx.x / SPLITS, split = blockIdx.x % SPLITS;
    const int g = threadIdx.x >> 4, sub = threadIdx.x & 15;

    float qv[8];  // scaled by log2(e)/sqrt(DIM): scores come out in base 2
    {
        const float4* qp = reinterpret_cast<const float4*>(q + head * DIM + sub * 8);
        const float4 a = qp[0], b = qp[1];
        const float sc = 1.44269504f * 0.08838834764f;
        qv[0] = a.x * sc; qv[1] = a.y * sc; qv[2] = a.z * sc; qv[3] = a.w * sc;
        qv[4] = b.x * sc; qv[5] = b.y * sc; qv[6] = b.z * sc; qv[7] = b.w * sc;
    }
    const size_t tok0 = (size_t)head * TOKENS + (size_t)split * CHUNK;
    const uint4* kp = reinterpret_cast<const uint4*>(kc + tok0 * DIM) + sub;  // a token is 16 uint4
    const uint4* vp = reinterpret_cast<const uint4*>(vc + tok0 * DIM) + sub;
    float m = -INFINITY, l = 0.f, acc[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) acc[i] = 0.f;

#pragma unroll 2
    for (int it = 0; it < PER_GROUP; it += 2) {
        const int t0 = g + it * GROUPS, t1 = t0 + GROUPS;  // neighbouring half-warps read neighbouring tokens
        const uint4 k0 = kp[t0 * 16], k1 = kp[t1 * 16], v0 = vp[t0 * 16], v1 = vp[t1 * 16];
        float f0[8], f1[8], s0 = 0.f, s1 = 0.f;
        unpack8(k0, f0); unpack8(k1, f1);
#pragma unroll
        for (int i = 0; i < 8; ++i) { s0 = fmaf(qv[i], f0[i], s0); s1 = fmaf(qv[i], f1[i], s1); }
#pragma unroll
        for (int o = 8; o; o >>= 1) { s0 += __shfl_xor_sync(FULL, s0, o); s1 += __shfl_xor_sync(FULL, s1, o); }
        const float mn = fmaxf(m, fmaxf(s0, s1));
        const float c = exp2f(m - mn), p0 = exp2f(s0 - mn), p1 = exp2f(s1 - mn);
        l = fmaf(l, c, p0 + p1);
        unpack8(v0, f0); unpack8(v1, f1);
#pragma unroll
        for (int i = 0; i < 8; ++i) acc[i] = fmaf(acc[i], c, fmaf(p0, f0[i], p1 * f1[i]));
        m = mn;
    }

    // merge the half-warps: this block's partial
    if (sub == 0) { s_m[g] = m; s_l[g] = l; }
    reinterpret_cast<float4*>(&s_acc[g][sub * 8])[0] = make_float4(acc[0], acc[1], acc[2], acc[3]);
    reinterpret_cast<float4*>(&s_acc[g][sub * 8])[1] = make_float4(acc[4], acc[5], acc[6], acc[7]);
    __syncthreads();
    if (threadIdx.x < DIM) {
        float mx = -INFINITY;
#pragma unroll
        for (int k = 0; k < GROUPS; ++k) mx = fmaxf(mx, s_m[k]);
        float sl = 0.f, sa = 0.f;
#pragma unroll
        for (int k = 0; k < GROUPS; ++k) { const float w = exp2f(s_m[k] - mx); sl = fmaf(s_l[k], w, sl); sa = fmaf(s_acc[k][threadIdx.x], w, sa); }
        part_acc[(size_t)blockIdx.x * DIM + threadIdx.x] = sa;
        if (threadIdx.x == 0) part_ml[blockIdx.x] = make_float2(mx, sl);
    }

    // ticket: the head's last block to arrive merges its SPLITS partials
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) s_last = atomicInc(&tickets[head], SPLITS - 1) == SPLITS - 1;  // wraps back to 0
    __syncthreads();
    if (!s_last) return;
    __threadfence();
    const int first = head * SPLITS;
    float ms = -INFINITY, ls = 0.f;
    if (threadIdx.x < SPLITS) { const float2 ml = __ldcg(&part_ml[first + threadIdx.x]); ms = ml.x; ls = ml.y; }
    float mx = ms;
#pragma unroll
    for (int o = 16; o; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(FULL, mx, o));
    if ((threadIdx.x & 31) == 0) s_red[0][threadIdx.x >> 5] = mx;
    __syncthreads();
    mx = s_red[0][0];
#pragma unroll
    for (int k = 1; k < THREADS / 32; ++k) mx = fmaxf(mx, s_red[0][k]);
    float w = 0.f;
    if (threadIdx.x < SPLITS) { w = exp2f(ms - mx); s_w[threadIdx.x] = w; }
    float lw = ls * w;
#pragma unroll
    for (int o = 16; o; o >>= 1) lw += __shfl_xor_sync(FULL, lw, o);
    __syncthreads();
    if ((threadIdx.x & 31) == 0) s_red[1][threadIdx.x >> 5] = lw;
    __syncthreads();
    if (threadIdx.x == 0) { float t = 0.f; for (int k = 0; k < THREADS / 32; ++k) t += s_red[1][k]; s_sum = t; }
    const int d = threadIdx.x & (DIM - 1), half = threadIdx.x / DIM;
    float a = 0.f;
#pragma unroll 16
    for (int s = half; s < SPLITS; s += THREADS / DIM) a = fmaf(s_w[s], __ldcg(&part_acc[(size_t)(first + s) * DIM + d]), a);
    s_fin[half][d] = a;
    __syncthreads();
    if (threadIdx.x < DIM) out[head * DIM + d] = (s_fin[0][d] + s_fin[1][d]) / s_sum;
}

extern "C" __global__ void __launch_bounds__(THREADS)
decode_split_tickets(const float* __restrict__ q, const __half* __restrict__ kc, const __half* __restrict__ vc,
                     float2* part_ml, float* part_acc, unsigned* tickets, float* out) {
    decode_chunk<256>(q, kc, vc, part_ml, part_acc, tickets, out);
}

extern "C" __global__ void __launch_bounds__(THREADS)
decode_split_tickets_fine(const float* __restrict__ q, const __half* __restrict__ kc, const __half* __restrict__ vc,
                          float2* part_ml, float* part_acc, unsigned* tickets, float* out) {
    decode_chunk<128>(q, kc, vc, part_ml, part_acc, tickets, out);
}

int main() {
    const size_t cache = (size_t)HEADS * TOKENS * DIM;
    // 8-bit codes, exact in FP16: keys in [-1, 1), values in [0, 1)
    std::vector<unsigned char> ck(cache), cv(cache);
    for (auto& c : ck) c = (unsigned char)(urand() >> 24);
    for (auto& c : cv) c = (unsigned char)(urand() >> 24);
    std::vector<float> hq(HEADS * DIM);
    for (auto& v : hq) v = 4.0f * frand() - 2.0f;
    __half tk[256], tv[256];
    for (int c = 0; c < 256; ++c) { tk[c] = __float2half((c - 128) / 128.0f); tv[c] = __float2half(c / 256.0f); }
    std::vector<__half> hk(cache), hv(cache);
    for (size_t i = 0; i < cache; ++i) { hk[i] = tk[ck[i]]; hv[i] = tv[cv[i]]; }
    float* dq = dcopy(hq);
    __half *dk = dcopy(hk), *dv = dcopy(hv);
    std::vector<__half>().swap(hk); std::vector<__half>().swap(hv);
    const int blocks = HEADS * (TOKENS / 256), blocks_fine = HEADS * (TOKENS / 128);
    float2 *ml = dnew<float2>(blocks), *ml_fine = dnew<float2>(blocks_fine);
    float *acc = dnew<float>((size_t)blocks * DIM), *acc_fine = dnew<float>((size_t)blocks_fine * DIM);
    unsigned* tickets = dnew<unsigned>(2 * HEADS);
    float *dout = dnew<float>(HEADS * DIM), *dout_fine = dnew<float>(HEADS * DIM);
    LAUNCH(decode_split_tickets, blocks, THREADS, dq, dk, dv, ml, acc, tickets, dout);
    LAUNCH(decode_split_tickets_fine, blocks_fine, THREADS, dq, dk, dv, ml_fine, acc_fine, tickets + HEADS, dout_fine);
    CK(cudaDeviceSynchronize());
    // reference: exact softmax attention in double
    std::vector<float> ref(HEADS * DIM);
    std::vector<double> sc(TOKENS), o(DIM);
    for (int h = 0; h < HEADS; ++h) {
        double mx = -1e300;
        for (int t = 0; t < TOKENS; ++t) {
            const unsigned char* kr = &ck[((size_t)h * TOKENS + t) * DIM];
            double s = 0;
            for (int d = 0; d < DIM; ++d) s += (double)hq[h * DIM + d] * ((kr[d] - 128) / 128.0);
            sc[t] = s / std::sqrt((double)DIM);
            mx = std::max(mx, sc[t]);
        }
        double den = 0;
        std::fill(o.begin(), o.end(), 0.0);
        for (int t = 0; t < TOKENS; ++t) {
            const double w = std::exp(sc[t] - mx);
            den += w;
            const unsigned char* vr = &cv[((size_t)h * TOKENS + t) * DIM];
            for (int d = 0; d < DIM; ++d) o[d] += w * (vr[d] / 256.0);
        }
        for (int d = 0; d < DIM; ++d) ref[h * DIM + d] = (float)(o[d] / den);
    }
    int rc = verdict("128-healthy-splitkv-decode-tickets", hcopy(dout, HEADS * DIM), ref, 1e-3);
    rc |= verdict("128-healthy-splitkv-decode-tickets challenger", hcopy(dout_fine, HEADS * DIM), ref, 1e-3);
    return rc;
}
