// 164-cdf-chained-scan-serial. Planted: a chain of blocks, each waiting for its predecessor's complete result. The CDF
// of 5.2M unnormalized sampling weights (the cumsum before an inverse-transform searchsorted), written as a single-pass
// "chained" scan: each 512-thread block takes an 8192-weight tile by ticket and loads it, then thread 0 spins until
// the previous tile has published its inclusive total; only then does the block scan its tile (shuffles, two
// barriers), add the carry, store, and the last thread publishes the tile's inclusive total behind a __threadfence.
// No look-back over aggregates: every tile's scan and fence sit on one serial chain of 640 links (about 1.5-2 us
// each), while the other resident blocks wait at the barrier behind their spinning thread 0; DRAM and SMs idle.
// Fixed twin: the same tile and loads, scanned before any wait; the tile's total is published at once as a 64-bit
// aggregate word and warp 0 looks back over 32 predecessors a step (decoupled look-back): no serial chain.
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
constexpr int THREADS = 512, WARPS = THREADS / 32, ROUNDS = 4, CHUNK = 128 * ROUNDS, TILE = CHUNK * WARPS;
constexpr unsigned long long K_AGG = 1ull << 32, K_PRE = 2ull << 32;   // high word: kind; low word: float bits

// each warp owns a contiguous chunk of 512 weights: lane holds 4 consecutive weights a round, 4 rounds
__device__ __forceinline__ void load_chunk(const float* __restrict__ x, size_t cbase, int lane, float v[4 * ROUNDS]) {
#pragma unroll
    for (int r = 0; r < ROUNDS; ++r) {
        const float4 a = reinterpret_cast<const float4*>(x + cbase)[r * 32 + lane];
        v[4 * r] = a.x; v[4 * r + 1] = a.y; v[4 * r + 2] = a.z; v[4 * r + 3] = a.w;
    }
}
// inclusive scan of the chunk in place; returns the chunk's total (in every lane)
__device__ __forceinline__ float scan_chunk(float v[4 * ROUNDS], int lane) {
    float cs = 0.f;
#pragma unroll
    for (int r = 0; r < ROUNDS; ++r) {
        v[4 * r + 1] += v[4 * r]; v[4 * r + 2] += v[4 * r + 1]; v[4 * r + 3] += v[4 * r + 2];
        float s = v[4 * r + 3];
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) { const float t = __shfl_up_sync(0xffffffffu, s, o); if (lane >= o) s += t; }
        float ex = __shfl_up_sync(0xffffffffu, s, 1);
        ex = (lane == 0 ? 0.f : ex) + cs;
#pragma unroll
        for (int k = 0; k < 4; ++k) v[4 * r + k] += ex;
        cs += __shfl_sync(0xffffffffu, s, 31);
    }
    return cs;
}
__device__ __forceinline__ void store_chunk(float* __restrict__ y, size_t cbase, int lane, const float v[4 * ROUNDS], float add) {
#pragma unroll
    for (int r = 0; r < ROUNDS; ++r)
        reinterpret_cast<float4*>(y + cbase)[r * 32 + lane] =
            make_float4(v[4 * r] + add, v[4 * r + 1] + add, v[4 * r + 2] + add, v[4 * r + 3] + add);
}

extern "C" __global__ void __launch_bounds__(THREADS) cdf_chained(const float* __restrict__ x, float* __restrict__ y,
        volatile float* carry, volatile int* ready, unsigned* ticket) {
    __shared__ int s_tile;
    __shared__ float s_wt[WARPS], s_carry;
    const int tid = threadIdx.x, lane = tid & 31, w = tid >> 5;
    if (tid == 0) s_tile = atomicAdd(ticket, 1u);      // tiles start in order: the chain cannot deadlock
    __syncthreads();
    const int tile = s_tile;
    const size_t cbase = (size_t)tile * TILE + (size_t)w * CHUNK;
    float v[4 * ROUNDS];
    load_chunk(x, cbase, lane, v);
    if (tid == 0) {                                    // wait for everything before this tile
        float c = 0.f;
        if (tile > 0) {
            while (ready[tile - 1] == 0) { }                                  // PLANTED
            __threadfence();
            c = carry[tile - 1];
        }
        s_carry = c;
    }
    __syncthreads();
    const float wt = scan_chunk(v, lane);
    if (lane == 0) s_wt[w] = wt;
    __syncthreads();
    float add = s_carry;
    for (int k = 0; k < w; ++k) add += s_wt[k];
    store_chunk(y, cbase, lane, v, add);
    if (tid == THREADS - 1) {                          // the tile's last weight: its inclusive total
        carry[tile] = v[4 * ROUNDS - 1] + add;
        __threadfence();
        ready[tile] = 1;
    }
}

extern "C" __global__ void __launch_bounds__(THREADS) cdf_lookback(const float* __restrict__ x, float* __restrict__ y,
        unsigned long long* status, unsigned* ticket) {
    __shared__ int s_tile;
    __shared__ float s_wt[WARPS], s_carry;
    const int tid = threadIdx.x, lane = tid & 31, w = tid >> 5;
    if (tid == 0) s_tile = atomicAdd(ticket, 1u);
    __syncthreads();
    const int tile = s_tile;
    const size_t cbase = (size_t)tile * TILE + (size_t)w * CHUNK;
    float v[4 * ROUNDS];
    load_chunk(x, cbase, lane, v);
    const float wt = scan_chunk(v, lane);              // the tile's own work first, no waiting
    if (lane == 0) s_wt[w] = wt;
    __syncthreads();
    if (w == 0) {
        float tt = 0.f;
#pragma unroll
        for (int k = 0; k < WARPS; ++k) tt += s_wt[k];
        volatile unsigned long long* vs = status;
        if (lane == 0) vs[tile] = (tile == 0 ? K_PRE : K_AGG) | __float_as_uint(tt);
        float c = 0.f;
        if (tile > 0) {
            for (int p = tile - 1;; p -= 32) {          // 32 predecessors a step, back to the nearest inclusive total
                const int q = p - lane;
                unsigned long long st = q >= 0 ? (unsigned long long)vs[q] : K_PRE;
                while (__any_sync(0xffffffffu, (st >> 32) == 0)) if ((st >> 32) == 0) st = vs[q];
                const unsigned pre = __ballot_sync(0xffffffffu, (st >> 32) == 2);
                const int stop = pre ? __ffs(pre) - 1 : 31;
                float val = lane <= stop ? __uint_as_float((unsigned)st) : 0.f;
#pragma unroll
                for (int o = 16; o > 0; o >>= 1) val += __shfl_xor_sync(0xffffffffu, val, o);
                c += val;
                if (pre) break;
            }
            if (lane == 0) vs[tile] = K_PRE | __float_as_uint(c + tt);
        }
        if (lane == 0) s_carry = c;
    }
    __syncthreads();
    float add = s_carry;
    for (int k = 0; k < w; ++k) add += s_wt[k];
    store_chunk(y, cbase, lane, v, add);
}

int main() {
    const int NT = 640, N = NT * TILE;                 // 5,242,880 weights, 20 MB each way
    std::vector<float> hx(N), ref(N);
    for (int i = 0; i < N; ++i) hx[i] = frand();
    double run = 0.0;
    for (int i = 0; i < N; ++i) { run += hx[i]; ref[i] = (float)run; }
    float* d_x = dcopy(hx);
    float* d_y = dnew<float>(N);
    float* d_carry = dnew<float>(NT);
    int* d_ready = dnew<int>(NT);
    unsigned long long* d_status = dnew<unsigned long long>(NT);
    unsigned* d_ticket = dnew<unsigned>(2);
    LAUNCH(cdf_chained, NT, THREADS, d_x, d_y, d_carry, d_ready, d_ticket);
    CK(cudaDeviceSynchronize());
    std::vector<float> ya = hcopy(d_y, N);
    CK(cudaMemset(d_y, 0, N * sizeof(float)));
    LAUNCH(cdf_lookback, NT, THREADS, d_x, d_y, d_status, d_ticket + 1);
    CK(cudaDeviceSynchronize());
    std::vector<float> yb = hcopy(d_y, N);
    int rc = verdict("164-cdf-chained-scan-serial", ya, yb, 1e-3);
    rc |= verdict("164-cdf-chained-scan-serial (twin vs host)", yb, ref, 1e-3);
    return rc;
}
