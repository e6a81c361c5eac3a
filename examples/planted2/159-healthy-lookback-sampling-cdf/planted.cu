// 159-healthy-lookback-sampling-cdf. Healthy: the unnormalized CDF (inclusive float prefix sum) of 64M texel
// weights for importance sampling, in one pass with decoupled look-back. Each block of 256 threads owns a
// 4096-weight tile: 4 coalesced float4 loads a thread (striped), in-register and warp-shuffle scans of the 4 rows,
// one __syncthreads, then warp 0 scans the 32 row-warp totals and its lane 0 publishes the tile sum with
// atomicExch on a packed 64-bit word (flag << 32 | float bits) and walks back one predecessor at a time, polling
// with atomicAdd(word, 0) and backing off with __nanosleep while a predecessor has published nothing, adding
// aggregates until it meets an inclusive prefix. A second __syncthreads hands the prefix to the block, which
// writes its 16 sums as float4 stores. 256 MB read and 256 MB written, about 6 blocks of loads in flight per SM
// while one block's lane 0 polls: the kernel should run near the DRAM roof.
// Challenger: the same tiles with the look-back done by the whole warp, 32 predecessors an atomicOr(word, 0) poll,
// __ballot_sync for the nearest inclusive prefix, no backoff.
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
#define FULL 0xffffffffu
#define NT 256
#define V 4
#define NW (NT / 32)

__device__ __forceinline__ unsigned long long pack(unsigned flag, float v) {
    return (unsigned long long)flag << 32 | __float_as_uint(v);
}
// Lane 0, tile > 0: the sum of all earlier tiles. Tiles are blockIdx.x, as in CUB: blocks are dispatched in index
// order, so each predecessor is resident or done. Flags: 1 aggregate, 2 inclusive prefix.
__device__ float lookback_walk(unsigned long long* status, int tile) {
    float excl = 0.0f;
    unsigned ns = 32;
    for (int i = tile - 1; i >= 0;) {
        const unsigned long long w = atomicAdd(status + i, 0ull);
        const unsigned f = (unsigned)(w >> 32);
        if (f == 0) { __nanosleep(ns); ns = ns < 512 ? ns * 2 : 512; continue; }
        excl += __uint_as_float((unsigned)w);
        if (f == 2) break;
        --i;
    }
    return excl;
}
// Whole warp, tile > 0: 32 predecessors a poll.
__device__ float lookback_window(unsigned long long* status, int tile, int lane) {
    float excl = 0.0f;
    for (int base = tile - 1;; base -= 32) {
        const int idx = base - lane;
        unsigned long long w;
        do {
            w = idx >= 0 ? atomicOr(status + idx, 0ull) : pack(2, 0.0f);
        } while (!__all_sync(FULL, (w >> 32) != 0));
        const unsigned pfx = __ballot_sync(FULL, (w >> 32) == 2);
        float v = __uint_as_float((unsigned)w);
        if (pfx && lane > __ffs(pfx) - 1) v = 0.0f;
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(FULL, v, o);
        excl += v;
        if (pfx) return excl;
    }
}

template <bool WINDOW>
__device__ __forceinline__ void cdf_tile(const float4* __restrict__ w, float4* __restrict__ cdf,
                                         unsigned long long* status) {
    static_assert(V * NW == 32, "one row-warp total a lane");
    __shared__ float sh_e[V * NW];
    __shared__ float sh_prefix;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, tile = blockIdx.x;
    const float4* in = w + (size_t)tile * NT * V;
    float4 a[V];
#pragma unroll
    for (int k = 0; k < V; ++k) a[k] = in[k * NT + tid];
    float x[V];
#pragma unroll
    for (int k = 0; k < V; ++k) {
        a[k].y += a[k].x; a[k].z += a[k].y; a[k].w += a[k].z;  // in-vector inclusive scan
        float t = a[k].w;
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) { const float y = __shfl_up_sync(FULL, t, o); if (lane >= o) t += y; }
        x[k] = t - a[k].w;
        if (lane == 31) sh_e[k * NW + warp] = t;
    }
    __syncthreads();
    if (warp == 0) {
        const float e = sh_e[lane];
        float incl = e;
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) { const float y = __shfl_up_sync(FULL, incl, o); if (lane >= o) incl += y; }
        sh_e[lane] = incl - e;
        const float agg = __shfl_sync(FULL, incl, 31);
        if (tile == 0) {
            if (lane == 0) { atomicExch(status, pack(2, agg)); sh_prefix = 0.0f; }
        } else {
            if (lane == 0) atomicExch(status + tile, pack(1, agg));
            float excl = 0.0f;
            if (WINDOW) excl = lookback_window(status, tile, lane);
            else if (lane == 0) excl = lookback_walk(status, tile);
            if (lane == 0) { atomicExch(status + tile, pack(2, excl + agg)); sh_prefix = excl; }
        }
    }
    __syncthreads();
    const float p = sh_prefix;
    float4* out = cdf + (size_t)tile * NT * V;
#pragma unroll
    for (int k = 0; k < V; ++k) {
        const float b = p + sh_e[k * NW + warp] + x[k];
        out[k * NT + tid] = make_float4(b + a[k].x, b + a[k].y, b + a[k].z, b + a[k].w);
    }
}

extern "C" __global__ void __launch_bounds__(NT) cdf_lookback_walk(const float4* __restrict__ w,
        float4* __restrict__ cdf, unsigned long long* status) {
    cdf_tile<false>(w, cdf, status);
}
extern "C" __global__ void __launch_bounds__(NT) cdf_lookback_window(const float4* __restrict__ w,
        float4* __restrict__ cdf, unsigned long long* status) {
    cdf_tile<true>(w, cdf, status);
}

int main() {
    const size_t n = (size_t)64 << 20;  // 64M texels, 16384 tiles of 4096
    const int tiles = (int)(n / (NT * V * 4));
    std::vector<float> h(n), ref(n);
    double run = 0.0;
    for (size_t i = 0; i < n; ++i) {  // luminance-like weights: mostly dim, a few bright texels
        float l = frand();
        h[i] = l * l * 4.0f;
        run += h[i];
        ref[i] = (float)run;
    }
    float* d_w = dcopy(h);
    float* d_cdf = dnew<float>(n);
    unsigned long long* d_status = dnew<unsigned long long>(tiles);

    LAUNCH(cdf_lookback_walk, tiles, NT, (const float4*)d_w, (float4*)d_cdf, d_status);
    CK(cudaDeviceSynchronize());
    std::vector<float> got = hcopy(d_cdf, n);
    printf("n=%zu total=%.6g walk_last=%.6g\n", n, run, got[n - 1]);
    int rc = verdict("159-healthy-lookback-sampling-cdf", got, ref, 1e-3);

    CK(cudaMemset(d_status, 0, tiles * sizeof(unsigned long long)));
    CK(cudaMemset(d_cdf, 0, n * sizeof(float)));
    LAUNCH(cdf_lookback_window, tiles, NT, (const float4*)d_w, (float4*)d_cdf, d_status);
    CK(cudaDeviceSynchronize());
    got = hcopy(d_cdf, n);
    rc |= verdict("159-healthy-lookback-sampling-cdf(challenger)", got, ref, 1e-3);
    CK(cudaFree(d_w)); CK(cudaFree(d_cdf)); CK(cudaFree(d_status));
    return rc;
}
