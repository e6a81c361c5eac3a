// 178-healthy-sorted-distinct-backoff. Healthy: single-pass DISTINCT of a sorted key column, decoupled look-back.
// 96M sorted uint32 user ids of a click log (384 MB; runs of 1-8 equal ids, ~22M distinct) are compacted to their
// distinct values in order (unique_copy, ~90 MB written). A block of 512 threads takes an 8192-key tile by an
// atomic ticket; each lane loads 4 consecutive keys at a time with a 16-byte load (4 loads a thread), compares
// them with its neighbours (shuffles; one extra key a warp), and the tile's count of run heads is published as
// ONE packed 64-bit status word (state in bits 62-63, count in bits 0-31). Warp 0 then looks back while the
// block waits at a __syncthreads: its 32 lanes read the 32 preceding words with volatile 64-bit loads, sleeping
// with an exponential back-off (32 ns doubling to 512 ns) while any is still empty, and a ballot finds the
// nearest inclusive prefix. Before that, every warp ranks its heads with three ballots per 128 keys and stages
// them in shared memory in order; after it the block writes them with 128-byte aligned coalesced stores.
// ~470 MB move: the kernel should run at the DRAM roof.
// Challenger: the same kernel polling with a fixed 32 ns sleep.
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
constexpr int BLOCK = 512, NW = BLOCK / 32, C = 4, TILE = BLOCK * C * 4;   // 8192 keys (32 KB) per tile
constexpr int SMEM = TILE * 4;                                             // staged distinct keys, worst case

// Warp-wide look-back: distinct keys before tile `tile` (tile > 0).
template <bool EXPO>
__device__ unsigned lookback(const u64* st, int tile, int lane) {
    unsigned acc = 0, ns = 32;
    for (int base = tile - 32;; base -= 32) {
        const int idx = base + lane;
        u64 w;
        for (;;) {
            w = idx < 0 ? ST_PFX : *(volatile const u64*)(st + idx);
            if (__all_sync(FULL, (w & ST_MASK) != 0)) break;
            __nanosleep(ns);
            if (EXPO && ns < 512) ns <<= 1;
        }
        const unsigned pfx = __ballot_sync(FULL, (w & ST_MASK) == ST_PFX);
        const int hl = pfx ? 31 - __clz(pfx) : 0;
        acc += __reduce_add_sync(FULL, lane >= hl ? (unsigned)w : 0u);
        if (pfx) return acc;
    }
}

template <bool EXPO>
__device__ __forceinline__ void distinct_tile(const uint4* __restrict__ keys4, const unsigned* __restrict__ keys,
                                              unsigned* __restrict__ out, u64* st, unsigned* ticket) {
    extern __shared__ unsigned s_out[];
    __shared__ unsigned s_tile, s_cnt[NW], s_pfx, s_tot;
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    if (threadIdx.x == 0) s_tile = atomicAdd(ticket, 1u);
    __syncthreads();
    const int tile = (int)s_tile;
    const size_t g0 = (size_t)tile * TILE + (size_t)w * (128 * C);            // first key of the warp's region
    uint4 x[C];
#pragma unroll
    for (int k = 0; k < C; ++k) x[k] = keys4[g0 / 4 + 32 * k + lane];
    unsigned carry = 0;                                  // the key before the chunk's first key
    if (lane == 0) carry = g0 > 0 ? keys[g0 - 1] : ~x[0].x;
    carry = __shfl_sync(FULL, carry, 0);
    unsigned heads = 0;                                  // bit 4k+j: key j of the lane's chunk k starts a run
#pragma unroll
    for (int k = 0; k < C; ++k) {
        unsigned prev = __shfl_up_sync(FULL, x[k].w, 1);
        if (lane == 0) prev = carry;
        carry = __shfl_sync(FULL, x[k].w, 31);
        heads |= ((x[k].x != prev) | (x[k].y != x[k].x) << 1 | (x[k].z != x[k].y) << 2 | (x[k].w != x[k].z) << 3)
                 << (4 * k);
    }
    const unsigned cnt = __reduce_add_sync(FULL, __popc(heads));
    if (lane == 0) s_cnt[w] = cnt;
    __syncthreads();
    const unsigned c = lane < NW ? s_cnt[lane] : 0u;
    unsigned off = __reduce_add_sync(FULL, lane < w ? c : 0u);                   // distinct keys before the warp
    const unsigned agg = __reduce_add_sync(FULL, c);                             // distinct keys in the tile
    if (threadIdx.x == 0) *(volatile u64*)(st + tile) = (tile == 0 ? ST_PFX : ST_AGG) | agg;
    const unsigned lt = (1u << lane) - 1u;
#pragma unroll
    for (int k = 0; k < C; ++k) {
        const unsigned h = heads >> (4 * k) & 0xfu, n = __popc(h);
        const unsigned b0 = __ballot_sync(FULL, n & 1u), b1 = __ballot_sync(FULL, n & 2u),
                       b2 = __ballot_sync(FULL, n & 4u);
        unsigned r = off + __popc(b0 & lt) + 2 * __popc(b1 & lt) + 4 * __popc(b2 & lt);
        if (h & 1u) s_out[r++] = x[k].x;
        if (h & 2u) s_out[r++] = x[k].y;
        if (h & 4u) s_out[r++] = x[k].z;
        if (h & 8u) s_out[r] = x[k].w;
        off += __popc(b0) + 2 * __popc(b1) + 4 * __popc(b2);
    }
    if (w == 0) {
        unsigned pfx = 0;
        if (tile > 0) {
            pfx = lookback<EXPO>(st, tile, lane);      // the rest of the block waits at the barrier below
            if (lane == 0) *(volatile u64*)(st + tile) = ST_PFX | (u64)(pfx + agg);
        }
        if (lane == 0) { s_pfx = pfx; s_tot = agg; }
    }
    __syncthreads();
    const unsigned pfx = s_pfx, tot = s_tot;
    for (unsigned g = (pfx & ~31u) + threadIdx.x; g < pfx + tot; g += BLOCK)       // 128-byte aligned rows
        if (g >= pfx) out[g] = s_out[g - pfx];
}

extern "C" __global__ void __launch_bounds__(BLOCK, 3)
sorted_distinct_backoff(const uint4* keys4, const unsigned* keys, unsigned* out, u64* st, unsigned* ticket) {
    distinct_tile<true>(keys4, keys, out, st, ticket);
}
extern "C" __global__ void __launch_bounds__(BLOCK, 3)
sorted_distinct_fixed32(const uint4* keys4, const unsigned* keys, unsigned* out, u64* st, unsigned* ticket) {
    distinct_tile<false>(keys4, keys, out, st, ticket);
}

int main() {
    const size_t N = 3u << 25, NT = N / TILE;            // 96M keys
    std::vector<unsigned> keys(N);
    unsigned key = 1000, left = 0;
    for (size_t i = 0; i < N; ++i) {
        if (left == 0) { key += 1u + (urand() >> 28); left = 1u + (urand() >> 29); }   // gap 1-16, run 1-8
        keys[i] = key;
        --left;
    }
    std::vector<unsigned> ref;
    ref.reserve(N / 4);
    for (size_t i = 0; i < N; ++i) if (i == 0 || keys[i] != keys[i - 1]) ref.push_back(keys[i]);
    const size_t M = ref.size();
    printf("%zu distinct of %zu keys\n", M, N);
    unsigned* d_keys = dcopy(keys);
    unsigned* d_out = dnew<unsigned>(M);
    u64* d_st = dnew<u64>(NT);
    unsigned* d_ticket = dnew<unsigned>(1);
    CK(cudaFuncSetAttribute(sorted_distinct_backoff, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM));
    CK(cudaFuncSetAttribute(sorted_distinct_backoff, cudaFuncAttributePreferredSharedMemoryCarveout, 100));
    CK(cudaFuncSetAttribute(sorted_distinct_fixed32, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM));
    CK(cudaFuncSetAttribute(sorted_distinct_fixed32, cudaFuncAttributePreferredSharedMemoryCarveout, 100));
    std::vector<float> bad(2, 0.f), zero(2, 0.f);
    for (int run = 0; run < 2; ++run) {
        if (run == 0) sorted_distinct_backoff<<<(unsigned)NT, BLOCK, SMEM>>>((const uint4*)d_keys, d_keys, d_out, d_st, d_ticket);
        else sorted_distinct_fixed32<<<(unsigned)NT, BLOCK, SMEM>>>((const uint4*)d_keys, d_keys, d_out, d_st, d_ticket);
        CK(cudaGetLastError());
        CK(cudaDeviceSynchronize());
        std::vector<unsigned> got = hcopy(d_out, M);
        for (size_t k = 0; k < M; ++k) bad[run] += got[k] != ref[k];
        CK(cudaMemset(d_out, 0, M * sizeof(unsigned)));
        CK(cudaMemset(d_st, 0, NT * sizeof(u64)));
        CK(cudaMemset(d_ticket, 0, sizeof(unsigned)));
    }
    CK(cudaFree(d_keys)); CK(cudaFree(d_out)); CK(cudaFree(d_st)); CK(cudaFree(d_ticket));
    return verdict("178-healthy-sorted-distinct-backoff", bad, zero, 0.0);   // wrong keys: kernel, challenger
}
