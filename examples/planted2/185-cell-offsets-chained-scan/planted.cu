// 185-cell-offsets-chained-scan. Planted: cross-block wait. The counting-sort step of a particle-in-cell code turns
// 33.6M per-cell particle counts (uint32, 134 MB) into exclusive cell start offsets (134 MB) in one pass. Each
// 768-thread block takes a 12288-count tile by ticket, loads it with coalesced 16-byte loads and scans it in
// registers (warp shuffles, 24 warp totals through shared memory); then thread 0 spins on the previous tile's word
// (volatile loads) until it holds that tile's INCLUSIVE prefix, adds its own total and publishes its own inclusive
// prefix, while the rest of the block waits at __syncthreads. No tile publishes anything before its predecessor has,
// so the carry crosses the 2731 tiles one L2 round trip at a time: every resident block has its tile loaded and sits
// at the barrier, no new tile can start, and DRAM and the SMs idle (about 1-2 ms instead of 0.1 ms).
// Fixed twin: decoupled look-back: the tile publishes its aggregate as soon as it is counted, then warp 0 reads 32
// predecessors' words per poll and sums aggregates back to the nearest inclusive prefix: DRAM-bound, ~10x faster.
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

constexpr int BT = 768, NW = BT / 32, VPL = 4;          // threads, warps, 16-byte vectors per lane
constexpr int TILE = BT * VPL * 4;                       // 12288 cells per tile
constexpr int NTILES = 2731;
constexpr size_t N = (size_t)TILE * NTILES;              // 33.56M cells
constexpr unsigned long long AGG = 1ull << 32, INC = 2ull << 32;   // status in the high word, count in the low
constexpr unsigned FULL = 0xffffffffu;

__device__ __forceinline__ unsigned incl_scan(unsigned v, int lane) {
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) { unsigned u = __shfl_up_sync(FULL, v, o); if (lane >= o) v += u; }
    return v;
}

// Loads one tile: warp w owns the contiguous vectors [w*VPL*32, (w+1)*VPL*32), lane l holds vectors j*32+l;
// the warp totals go to s_w.
__device__ __forceinline__ void tile_load(const uint4* in, uint4 (&v)[VPL], unsigned* s_w) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    unsigned sum = 0;
#pragma unroll
    for (int j = 0; j < VPL; ++j) v[j] = in[(warp * VPL + j) * 32 + lane];
#pragma unroll
    for (int j = 0; j < VPL; ++j) sum += v[j].x + v[j].y + v[j].z + v[j].w;
    sum = __reduce_add_sync(FULL, sum);
    if (lane == 0) s_w[warp] = sum;
    __syncthreads();
}

// The counts of the warps before warp `upto` (upto = NW: the tile total).
__device__ __forceinline__ unsigned warps_before(const unsigned* s_w, int upto) {
    unsigned t = 0;
#pragma unroll
    for (int w = 0; w < NW; ++w) t += w < upto ? s_w[w] : 0u;
    return t;
}

// Writes the exclusive offsets of the tile; run = carry into this warp's segment.
__device__ __forceinline__ void tile_store(uint4* out, const uint4 (&v)[VPL], unsigned run) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
    for (int j = 0; j < VPL; ++j) {
        const unsigned s = v[j].x + v[j].y + v[j].z + v[j].w;
        const unsigned inc = incl_scan(s, lane);
        uint4 o;
        o.x = run + inc - s; o.y = o.x + v[j].x; o.z = o.y + v[j].y; o.w = o.z + v[j].z;
        out[(warp * VPL + j) * 32 + lane] = o;
        run += __shfl_sync(FULL, inc, 31);
    }
}

extern "C" __global__ void __launch_bounds__(BT, 2)
cell_offsets_chained(const uint4* __restrict__ counts, uint4* __restrict__ offsets,
                     unsigned long long* tile_word, unsigned* ticket) {
    __shared__ unsigned s_tile, s_carry, s_w[NW];
    if (threadIdx.x == 0) s_tile = atomicAdd(ticket, 1u);          // tiles in the order blocks start
    __syncthreads();
    const unsigned tile = s_tile;
    uint4 v[VPL];
    tile_load(counts + (size_t)tile * (TILE / 4), v, s_w);
    if (threadIdx.x == 0) {
        const unsigned tot = warps_before(s_w, NW);
        unsigned carry = 0;
        if (tile > 0) {
            volatile unsigned long long* prev = tile_word + tile - 1;
            unsigned long long w;
            while (((w = *prev) & INC) == 0) { }                                          // PLANTED
            carry = (unsigned)w;
        }
        *(volatile unsigned long long*)(tile_word + tile) = INC | (carry + tot);          // PLANTED
        s_carry = carry;
    }
    __syncthreads();
    tile_store(offsets + (size_t)s_tile * (TILE / 4), v, s_carry + warps_before(s_w, threadIdx.x >> 5));
}

extern "C" __global__ void __launch_bounds__(BT, 2)
cell_offsets_lookback(const uint4* __restrict__ counts, uint4* __restrict__ offsets,
                      unsigned long long* tile_word, unsigned* ticket) {
    using word_ref = cuda::atomic_ref<unsigned long long, cuda::thread_scope_device>;
    __shared__ unsigned s_tile, s_carry, s_w[NW];
    if (threadIdx.x == 0) s_tile = atomicAdd(ticket, 1u);
    __syncthreads();
    const unsigned tile = s_tile;
    uint4 v[VPL];
    tile_load(counts + (size_t)tile * (TILE / 4), v, s_w);
    if (threadIdx.x < 32) {
        const int lane = threadIdx.x;
        const unsigned tot = warps_before(s_w, NW);
        word_ref mine(tile_word[tile]);
        unsigned excl = 0;
        if (tile == 0) {
            if (lane == 0) mine.store(INC | tot, cuda::memory_order_relaxed);
        } else {
            if (lane == 0) mine.store(AGG | tot, cuda::memory_order_relaxed);   // aggregate first
            int top = (int)tile - 1;
            while (true) {                            // lane l reads tile top-l
                const int p = top - lane;
                unsigned long long w = INC;           // before tile 0: an inclusive prefix of 0
                if (p >= 0) w = word_ref(tile_word[p]).load(cuda::memory_order_relaxed);
                if (__any_sync(FULL, (w >> 32) == 0)) continue;
                const unsigned incs = __ballot_sync(FULL, (w & INC) != 0);
                const int stop = incs ? __ffs(incs) - 1 : 31;
                excl += __reduce_add_sync(FULL, lane <= stop ? (unsigned)w : 0u);
                if (incs) break;
                top -= 32;
            }
            if (lane == 0) mine.store(INC | (excl + tot), cuda::memory_order_relaxed);
        }
        if (lane == 0) s_carry = excl;
    }
    __syncthreads();
    tile_store(offsets + (size_t)tile * (TILE / 4), v, s_carry + warps_before(s_w, threadIdx.x >> 5));
}

int main() {
    std::vector<unsigned> h(N), ref(N);
    for (auto& c : h) c = urand() >> 28;                   // 0..15 particles per cell
    unsigned run = 0;
    for (size_t i = 0; i < N; ++i) { ref[i] = run; run += h[i]; }
    unsigned* d_in = dcopy(h);
    unsigned* d_bad = dnew<unsigned>(N);
    unsigned* d_fix = dnew<unsigned>(N);
    unsigned long long* words = dnew<unsigned long long>(NTILES);
    unsigned* ticket = dnew<unsigned>(1);
    LAUNCH(cell_offsets_chained, NTILES, BT, (const uint4*)d_in, (uint4*)d_bad, words, ticket);
    CK(cudaDeviceSynchronize());
    CK(cudaMemset(words, 0, NTILES * sizeof(unsigned long long)));
    CK(cudaMemset(ticket, 0, sizeof(unsigned)));
    LAUNCH(cell_offsets_lookback, NTILES, BT, (const uint4*)d_in, (uint4*)d_fix, words, ticket);
    CK(cudaDeviceSynchronize());
    std::vector<unsigned> a = hcopy(d_bad, N), b = hcopy(d_fix, N);
    size_t wrong = 0;
    for (size_t i = 0; i < N; ++i) wrong += (a[i] != ref[i]) + (b[i] != ref[i]);
    if (wrong) { printf("MISMATCH 185-cell-offsets-chained-scan %zu wrong offsets\n", wrong); return 1; }
    std::vector<float> fa(N / 64), fb(N / 64);             // exact above; a sample for the usual line
    for (size_t i = 0; i < fa.size(); ++i) { fa[i] = (float)a[i * 64]; fb[i] = (float)b[i * 64]; }
    return verdict("185-cell-offsets-chained-scan", fa, fb, 1e-6);
}
