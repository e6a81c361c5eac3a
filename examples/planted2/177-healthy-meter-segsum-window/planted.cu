// 177-healthy-meter-segsum-window. Healthy: single-pass segmented inclusive sum with decoupled look-back.
// 64M smart-meter energy readings (float, 256 MB) with a uint8 session-head flag each (64 MB): out[i] is the energy
// used since the last head at or before i (the head's own reading included), 256 MB of float written. A block of
// 512 threads takes a 4096-reading tile by an atomic ticket, loads it with 16-byte (readings) and 4-byte (flags)
// coalesced loads, scans it with warp shuffles, and publishes its aggregate (head seen?, sum since the tile's last
// head) as ONE packed 64-bit status word (state in bits 62-63, head bit 32, float bits 0-31). Warp 0 then looks
// back while the block waits at a __syncthreads: its 32 lanes read the 32 preceding words with volatile 64-bit
// loads, sleep a fixed 32 ns while any is still empty, and stop at the nearest word that is an inclusive prefix or
// whose tile holds a head (a head resets the sum: nothing further back matters). About one look-back step a tile;
// the tile's writes are coalesced float4 stores. 576 MB move in all: the kernel should run at the DRAM roof.
// Challenger: the same scan and look-back with 256-thread blocks, 2048-reading tiles (twice as many look-backs).
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
typedef unsigned long long u64;
#define FULL 0xffffffffu
#define ST_AGG (1ull << 62)
#define ST_PFX (2ull << 62)
#define ST_MASK (3ull << 62)
#define HEADBIT (1ull << 32)
struct SF { unsigned f; float s; };   // (head seen, sum since the last head)
__device__ __forceinline__ SF cmb(SF a, SF b) { SF r; r.f = a.f | b.f; r.s = b.f ? b.s : a.s + b.s; return r; }
__device__ __forceinline__ SF shup(SF a, int o) { SF r; r.f = __shfl_up_sync(FULL, a.f, o); r.s = __shfl_up_sync(FULL, a.s, o); return r; }
__device__ __forceinline__ SF shdn(SF a, int o) { SF r; r.f = __shfl_down_sync(FULL, a.f, o); r.s = __shfl_down_sync(FULL, a.s, o); return r; }
__device__ __forceinline__ SF shidx(SF a, int l) { SF r; r.f = __shfl_sync(FULL, a.f, l); r.s = __shfl_sync(FULL, a.s, l); return r; }
__device__ __forceinline__ u64 pack(SF a, u64 state) { return state | (a.f ? HEADBIT : 0ull) | __float_as_uint(a.s); }

// Warp-wide look-back over windows of 32 predecessors: exclusive (head, sum) carry of tile `tile` (tile > 0).
__device__ SF lookback(const u64* st, int tile, int lane) {
    SF acc = {0u, 0.f};
    for (int base = tile - 32;; base -= 32) {
        const int idx = base + lane;
        u64 w;
        for (;;) {
            w = idx < 0 ? ST_PFX : *(volatile const u64*)(st + idx);
            if (__all_sync(FULL, (w & ST_MASK) != 0)) break;
            __nanosleep(32);
        }
        const unsigned stop = __ballot_sync(FULL, (w & ST_MASK) == ST_PFX || (w & HEADBIT));
        const int hl = stop ? 31 - __clz(stop) : 0;
        SF x = {0u, 0.f};
        if (lane >= hl) { x.f = (w & HEADBIT) ? 1u : 0u; x.s = __uint_as_float((unsigned)w); }
        for (int o = 1; o < 32; o <<= 1) { SF y = shdn(x, o); if (lane + o < 32) x = cmb(x, y); }
        acc = cmb(shidx(x, 0), acc);
        if (stop) return acc;
    }
}

template <int BLOCK>
__device__ __forceinline__ void segsum_tile(const float4* __restrict__ val, const unsigned* __restrict__ head,
                                            float4* __restrict__ out, u64* st, unsigned* ticket) {
    constexpr int NW = BLOCK / 32, C = 2, TILE = BLOCK * C * 4;   // 8 readings a thread
    __shared__ unsigned s_tile;
    __shared__ SF s_w[NW];
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    if (threadIdx.x == 0) s_tile = atomicAdd(ticket, 1u);
    __syncthreads();
    const int tile = (int)s_tile;
    const size_t q0 = (size_t)tile * (TILE / 4) + (size_t)w * (32 * C) + lane;   // float4 index of chunk 0
    float4 v[C]; unsigned h[C];
#pragma unroll
    for (int k = 0; k < C; ++k) { v[k] = val[q0 + 32 * k]; h[k] = head[q0 + 32 * k]; }
    SF carry = {0u, 0.f};
    unsigned need = 0;                       // bit 4k+i: reading (k, i) still adds the carry from before the warp
#pragma unroll
    for (int k = 0; k < C; ++k) {
        float* x = reinterpret_cast<float*>(&v[k]);
        unsigned seen = 0, lneed = 0; float s = 0.f;
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const unsigned hd = (h[k] >> (8 * i)) & 0xffu;
            s = hd ? x[i] : s + x[i];
            seen |= hd;
            x[i] = s;
            lneed |= (seen ? 0u : 1u) << i;
        }
        SF inc = {seen ? 1u : 0u, s};
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) { SF y = shup(inc, o); if (lane >= o) inc = cmb(y, inc); }
        SF ex = shup(inc, 1);
        if (lane == 0) ex = SF{0u, 0.f};
        ex = cmb(carry, ex);                 // what precedes this lane's 4 readings inside the warp's region
#pragma unroll
        for (int i = 0; i < 4; ++i) if (lneed >> i & 1u) x[i] += ex.s;
        if (!ex.f) need |= lneed << (4 * k);
        carry = cmb(carry, shidx(inc, 31));
    }
    if (lane == 0) s_w[w] = carry;
    __syncthreads();
    if (w == 0) {
        SF a = lane < NW ? s_w[lane] : SF{0u, 0.f};
        SF inc = a;
        for (int o = 1; o < 32; o <<= 1) { SF y = shup(inc, o); if (lane >= o) inc = cmb(y, inc); }
        SF ex = shup(inc, 1);
        if (lane == 0) ex = SF{0u, 0.f};
        const SF agg = shidx(inc, 31);
        if (lane == 0) *(volatile u64*)(st + tile) = pack(agg, tile == 0 ? ST_PFX : ST_AGG);
        SF tc = {0u, 0.f};
        if (tile > 0) {
            tc = lookback(st, tile, lane);   // the rest of the block waits at the barrier below
            if (lane == 0) *(volatile u64*)(st + tile) = pack(cmb(tc, agg), ST_PFX);
        }
        if (lane < NW) s_w[lane] = cmb(tc, ex);
    }
    __syncthreads();
    const float ext = s_w[w].s;
#pragma unroll
    for (int k = 0; k < C; ++k) {
        float* x = reinterpret_cast<float*>(&v[k]);
#pragma unroll
        for (int i = 0; i < 4; ++i) if (need >> (4 * k + i) & 1u) x[i] += ext;
        out[q0 + 32 * k] = v[k];
    }
}

extern "C" __global__ void __launch_bounds__(512, 3)
meter_segsum_window(const float4* val, const unsigned* head, float4* out, u64* st, unsigned* ticket) {
    segsum_tile<512>(val, head, out, st, ticket);
}
extern "C" __global__ void __launch_bounds__(256, 6)
meter_segsum_window_t2048(const float4* val, const unsigned* head, float4* out, u64* st, unsigned* ticket) {
    segsum_tile<256>(val, head, out, st, ticket);
}

int main() {
    const size_t N = 1u << 26, NT = N / 4096, NT2 = N / 2048;
    std::vector<float> val(N);
    std::vector<unsigned char> head(N);
    for (size_t i = 0; i < N; ++i) {
        val[i] = 0.05f + 2.0f * frand();                        // kWh per interval
        head[i] = (i == 0 || (urand() >> 18) == 0) ? 1 : 0;     // a new session every ~16K readings
    }
    std::vector<float> ref(N);
    double run = 0;
    for (size_t i = 0; i < N; ++i) { run = head[i] ? val[i] : run + val[i]; ref[i] = (float)run; }
    float* d_val = dcopy(val);
    unsigned char* d_head = dcopy(head);
    float* d_out = dnew<float>(N);
    u64* d_st = dnew<u64>(NT2);
    unsigned* d_ticket = dnew<unsigned>(1);
    LAUNCH(meter_segsum_window, (unsigned)NT, 512, (const float4*)d_val, (const unsigned*)d_head, (float4*)d_out,
           d_st, d_ticket);
    CK(cudaDeviceSynchronize());
    std::vector<float> got = hcopy(d_out, N);
    CK(cudaMemset(d_out, 0, N * sizeof(float)));
    CK(cudaMemset(d_st, 0, NT2 * sizeof(u64)));
    CK(cudaMemset(d_ticket, 0, sizeof(unsigned)));
    LAUNCH(meter_segsum_window_t2048, (unsigned)NT2, 256, (const float4*)d_val, (const unsigned*)d_head,
           (float4*)d_out, d_st, d_ticket);
    CK(cudaDeviceSynchronize());
    std::vector<float> got2 = hcopy(d_out, N);
    int rc = verdict("177-healthy-meter-segsum-window", got, ref, 1e-3);
    rc |= verdict("177-healthy-meter-segsum-window:challenger", got2, ref, 1e-3);
    CK(cudaFree(d_val)); CK(cudaFree(d_head)); CK(cudaFree(d_out)); CK(cudaFree(d_st)); CK(cudaFree(d_ticket));
    return rc;
}
