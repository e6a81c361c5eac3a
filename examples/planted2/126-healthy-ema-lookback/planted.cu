// 126-healthy-ema-lookback. Healthy: an exponential moving average y[i] = a*y[i-1] + (1-a)*x[i] over 48M samples
// in one pass: each block takes a 4096-sample tile from an atomic counter, scans it as a composition of affine maps
// (warp shuffles, a^k multipliers), publishes its tile aggregate, looks back over its predecessors' status words
// (cuda::atomic_ref load with memory_order_acquire, 32 predecessors at once, __nanosleep backoff) and writes y with
// float4 stores. 192 MB read, 192 MB written: it should run near the DRAM roof, the look-back hidden behind the
// other resident blocks' streaming.
// Challenger: the same algorithm with 8192-sample tiles (half the look-backs, twice the registers).
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
#include <cuda/atomic>

#define N (48u << 20)  // 50,331,648 samples: 192 MB in, 192 MB out
#define THREADS 256
#define WARPS (THREADS / 32)
#define FULL 0xffffffffu
#define AGGREGATE 1ull
#define INCLUSIVE 2ull
typedef unsigned long long u64;
typedef cuda::atomic_ref<u64, cuda::thread_scope_device> status_ref;

// a status word: flag in the high half, the tile's value (aggregate from a zero state, or y at the tile's end) low
__device__ __forceinline__ u64 pack(u64 flag, float v) { return (flag << 32) | __float_as_uint(v); }
__device__ __forceinline__ float square_n(float p, int n) { for (int i = 0; i < n; ++i) p *= p; return p; }

// ROWS float4 rows of 128 samples per warp; tile = WARPS * ROWS * 128 samples
template <int ROWS, int LOG_ROWS>
__device__ __forceinline__ void ema_tile(const float* __restrict__ x, float* __restrict__ y, u64* status,
                                         unsigned* counter, float a) {
    constexpr int WARP_ITEMS = ROWS * 128, TILE = WARPS * WARP_ITEMS;
    __shared__ unsigned s_tile;
    __shared__ float s_warp[WARPS], s_prefix;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (threadIdx.x == 0) s_tile = atomicAdd(counter, 1u);  // tiles in launch order: look-back never deadlocks
    __syncthreads();
    const unsigned tile = s_tile;
    const float b = 1.0f - a;
    const float a4 = square_n(a, 2), a128 = square_n(a4, 5), aw = square_n(a128, LOG_ROWS), at = square_n(aw, 3);
    const size_t base = (size_t)tile * TILE + warp * WARP_ITEMS;
    const float4* xin = reinterpret_cast<const float4*>(x + base) + lane;
    float4 v[ROWS];
#pragma unroll
    for (int r = 0; r < ROWS; ++r) v[r] = xin[r * 32];

    // each lane folds its 4 samples from a zero state, then a warp scan composes the lanes (multiplier a^(4d))
    float rowb[ROWS], w = 0.f;
#pragma unroll
    for (int r = 0; r < ROWS; ++r) {
        float t = b * v[r].x;
        t = fmaf(a, t, b * v[r].y); t = fmaf(a, t, b * v[r].z); t = fmaf(a, t, b * v[r].w);
        float c = a4;
#pragma unroll
        for (int d = 1; d < 32; d <<= 1) {
            const float u = __shfl_up_sync(FULL, t, d);
            if (lane >= d) t = fmaf(c, u, t);
            c *= c;
        }
        rowb[r] = t;
        w = fmaf(a128, w, __shfl_sync(FULL, t, 31));  // the warp's span from a zero state
    }
    if (lane == 0) s_warp[warp] = w;
    __syncthreads();

    if (warp == 0) {
        float agg = 0.f;
        for (int k = 0; k < WARPS; ++k) agg = fmaf(aw, agg, s_warp[k]);
        if (tile == 0) {
            if (lane == 0) { status_ref(status[0]).store(pack(INCLUSIVE, agg), cuda::memory_order_release); s_prefix = 0.f; }
        } else {
            if (lane == 0) status_ref(status[tile]).store(pack(AGGREGATE, agg), cuda::memory_order_release);
            const float lg = log2f(a) * TILE;               // log2 of a^TILE
            const float pw = exp2f(lg * lane), step = exp2f(lg * 32);
            float excl = 0.f, mul = 1.f;
            int pred = (int)tile - 1;
            unsigned ns = 32;
            while (true) {
                const int idx = pred - lane;
                const u64 s = idx >= 0 ? status_ref(status[idx]).load(cuda::memory_order_acquire) : pack(INCLUSIVE, 0.f);
                if (__any_sync(FULL, (s >> 32) == 0)) { __nanosleep(ns); ns = ns < 1024 ? 2 * ns : ns; continue; }
                const unsigned inc = __ballot_sync(FULL, (s >> 32) == INCLUSIVE);
                const int stop = inc ? __ffs(inc) - 1 : 31;
                float part = lane <= stop ? pw * __uint_as_float((unsigned)s) : 0.f;
#pragma unroll
                for (int o = 16; o; o >>= 1) part += __shfl_xor_sync(FULL, part, o);
                excl = fmaf(mul, part, excl);
                if (inc) break;
                mul *= step;
                pred -= 32;
            }
            if (lane == 0) {
                status_ref(status[tile]).store(pack(INCLUSIVE, fmaf(at, excl, agg)), cuda::memory_order_release);
                s_prefix = excl;
            }
        }
    }
    __syncthreads();

    float yc = s_prefix;  // y just before this warp's span
    for (int k = 0; k < warp; ++k) yc = fmaf(aw, yc, s_warp[k]);
    const float pl = exp2f(log2f(a) * (4 * lane));  // a^(4 lane)
    float4* yout = reinterpret_cast<float4*>(y + base) + lane;
#pragma unroll
    for (int r = 0; r < ROWS; ++r) {
        float ex = __shfl_up_sync(FULL, rowb[r], 1);
        if (lane == 0) ex = 0.f;
        const float e = fmaf(pl, yc, ex);  // y just before the lane's first sample
        float4 o;
        o.x = fmaf(a, e, b * v[r].x); o.y = fmaf(a, o.x, b * v[r].y);
        o.z = fmaf(a, o.y, b * v[r].z); o.w = fmaf(a, o.z, b * v[r].w);
        yout[r * 32] = o;
        yc = fmaf(a128, yc, __shfl_sync(FULL, rowb[r], 31));
    }
}

extern "C" __global__ void __launch_bounds__(THREADS)
ema_lookback(const float* __restrict__ x, float* __restrict__ y, u64* status, unsigned* counter, float a) {
    ema_tile<4, 2>(x, y, status, counter, a);
}

extern "C" __global__ void __launch_bounds__(THREADS)
ema_lookback_wide(const float* __restrict__ x, float* __restrict__ y, u64* status, unsigned* counter, float a) {
    ema_tile<8, 3>(x, y, status, counter, a);
}

int main() {
    const unsigned tiles = N / (WARPS * 4 * 128), tiles_wide = N / (WARPS * 8 * 128);
    const float a = 0.999f;
    std::vector<float> hx(N);
    for (auto& v : hx) v = frand();
    float* dx = dcopy(hx);
    float *dy = dnew<float>(N), *dz = dnew<float>(N);
    u64 *st = dnew<u64>(tiles), *st_wide = dnew<u64>(tiles_wide);
    unsigned* counters = dnew<unsigned>(2);
    LAUNCH(ema_lookback, tiles, THREADS, dx, dy, st, counters, a);
    LAUNCH(ema_lookback_wide, tiles_wide, THREADS, dx, dz, st_wide, counters + 1, a);
    CK(cudaDeviceSynchronize());
    std::vector<float> ref(N);
    const double ad = a, bd = 1.0f - a;
    double yv = 0.0;
    for (size_t i = 0; i < N; ++i) { yv = ad * yv + bd * hx[i]; ref[i] = (float)yv; }
    int rc = verdict("126-healthy-ema-lookback", hcopy(dy, N), ref, 1e-3);
    rc |= verdict("126-healthy-ema-lookback challenger", hcopy(dz, N), ref, 1e-3);
    return rc;
}
