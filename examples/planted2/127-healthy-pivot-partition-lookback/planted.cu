// 127-healthy-pivot-partition-lookback. Healthy: one quickselect step, a stable three-way partition of 40M quantized
// scores around a pivot in one pass: items below it packed from the front of `out`, items above it from the back
// (reversed, as CUB's partition does), ties packed into `ties`. Each block takes a 4096-item tile from an atomic
// counter, stages it through shared memory (float4 loads), counts the classes with warp ballots, publishes both
// counts in one 64-bit status word and looks back 32 predecessors at a time, polling with inline-PTX ld.acquire.gpu
// (no backoff), then scatters the tile into shared memory by class and writes each class run with coalesced stores.
// 160 MB read, 160 MB written: it should run near the DRAM roof.
// Challenger: the same algorithm with 8192-item tiles.
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

#define N (40u << 20)  // 41,943,040 scores
#define THREADS 256
#define WARPS (THREADS / 32)
#define FULL 0xffffffffu
#define AGGREGATE 1ull
#define INCLUSIVE 2ull
#define COUNT_MASK ((1ull << 62) - 1)
typedef unsigned long long u64;

// a status word: flag in bits 62-63, items below the pivot in bits 0-30, items above it in bits 31-61
__device__ __forceinline__ u64 ld_acquire(const u64* p) {
    u64 v; asm volatile("ld.acquire.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory"); return v; }
__device__ __forceinline__ void st_release(u64* p, u64 v) {
    asm volatile("st.release.gpu.global.u64 [%0], %1;" :: "l"(p), "l"(v) : "memory"); }

template <int IPT>  // items per thread; tile = THREADS * IPT
__device__ __forceinline__ void partition_tile(const float* __restrict__ keys, float* __restrict__ out,
                                               float* __restrict__ ties, u64* status, unsigned* counter, float pivot) {
    constexpr unsigned TILE = THREADS * IPT, WARP_ITEMS = 32 * IPT;
    __shared__ __align__(16) float buf[TILE];
    __shared__ unsigned s_tile, s_lo[WARPS], s_hi[WARPS];
    __shared__ u64 s_excl;
    const unsigned lane = threadIdx.x & 31, warp = threadIdx.x >> 5, below = (1u << lane) - 1;
    if (threadIdx.x == 0) s_tile = atomicAdd(counter, 1u);  // tiles in launch order: look-back never deadlocks
    __syncthreads();
    const unsigned tile = s_tile;
    const size_t base = (size_t)tile * TILE;

    // stage the tile: coalesced float4 loads, then each warp reads its span warp-striped
    const float4* src = reinterpret_cast<const float4*>(keys + base);
    float4 f[IPT / 4];
#pragma unroll
    for (int q = 0; q < IPT / 4; ++q) f[q] = src[q * THREADS + threadIdx.x];
#pragma unroll
    for (int q = 0; q < IPT / 4; ++q) reinterpret_cast<float4*>(buf)[q * THREADS + threadIdx.x] = f[q];
    __syncthreads();
    float k[IPT];
    unsigned nlo = 0, nhi = 0;
#pragma unroll
    for (int q = 0; q < IPT; ++q) {
        k[q] = buf[warp * WARP_ITEMS + q * 32 + lane];
        nlo += __popc(__ballot_sync(FULL, k[q] < pivot));
        nhi += __popc(__ballot_sync(FULL, k[q] > pivot));
    }
    if (lane == 0) { s_lo[warp] = nlo; s_hi[warp] = nhi; }
    __syncthreads();
    unsigned lo = 0, hi = 0, tlo = 0, thi = 0;  // this warp's offsets within the tile's classes, tile totals
#pragma unroll
    for (unsigned w = 0; w < WARPS; ++w) {
        if (w < warp) { lo += s_lo[w]; hi += s_hi[w]; }
        tlo += s_lo[w]; thi += s_hi[w];
    }
    const unsigned teq = TILE - tlo - thi;
    unsigned eq = warp * WARP_ITEMS - lo - hi;

    if (warp == 0) {
        const u64 agg = (u64)tlo | ((u64)thi << 31);
        if (tile == 0) {
            if (lane == 0) { st_release(&status[0], (INCLUSIVE << 62) | agg); s_excl = 0; }
        } else {
            if (lane == 0) st_release(&status[tile], (AGGREGATE << 62) | agg);
            u64 excl = 0;
            int pred = (int)tile - 1;
            while (true) {
                const int idx = pred - (int)lane;
                const u64 s = idx >= 0 ? ld_acquire(&status[idx]) : (INCLUSIVE << 62);
                if (__any_sync(FULL, (s >> 62) == 0)) continue;  // a predecessor has not published yet: poll again
                const unsigned inc = __ballot_sync(FULL, (s >> 62) == INCLUSIVE);
                const unsigned stop = inc ? __ffs(inc) - 1 : 31;
                u64 part = lane <= stop ? (s & COUNT_MASK) : 0;  // both counts add field by field
#pragma unroll
                for (int o = 16; o; o >>= 1) part += __shfl_xor_sync(FULL, part, o);
                excl += part;
                if (inc) break;
                pred -= 32;
            }
            if (lane == 0) { st_release(&status[tile], (INCLUSIVE << 62) | (excl + agg)); s_excl = excl; }
        }
    }

    // scatter into shared memory by class (buf was read into registers before the last barrier): [lo | eq | hi]
#pragma unroll
    for (int q = 0; q < IPT; ++q) {
        const bool isl = k[q] < pivot, ish = k[q] > pivot;
        const unsigned ml = __ballot_sync(FULL, isl), mh = __ballot_sync(FULL, ish), me = ~(ml | mh);
        if (isl) buf[lo + __popc(ml & below)] = k[q];
        if (ish) buf[tlo + teq + hi + __popc(mh & below)] = k[q];
        if (!isl && !ish) buf[tlo + eq + __popc(me & below)] = k[q];
        lo += __popc(ml); hi += __popc(mh); eq += __popc(me);
    }
    __syncthreads();

    const unsigned elo = (unsigned)(s_excl & 0x7fffffffu), ehi = (unsigned)((s_excl >> 31) & 0x7fffffffu);
    const unsigned eeq = (unsigned)base - elo - ehi;
    for (unsigned i = threadIdx.x; i < TILE; i += THREADS) {
        const float v = buf[i];
        if (i < tlo) out[elo + i] = v;
        else if (i < tlo + teq) ties[eeq + (i - tlo)] = v;
        else out[N - 1 - (ehi + (i - tlo - teq))] = v;
    }
}

extern "C" __global__ void __launch_bounds__(THREADS)
pivot_partition(const float* __restrict__ keys, float* __restrict__ out, float* __restrict__ ties, u64* status,
                unsigned* counter, float pivot) {
    partition_tile<16>(keys, out, ties, status, counter, pivot);
}

extern "C" __global__ void __launch_bounds__(THREADS)
pivot_partition_wide(const float* __restrict__ keys, float* __restrict__ out, float* __restrict__ ties, u64* status,
                     unsigned* counter, float pivot) {
    partition_tile<32>(keys, out, ties, status, counter, pivot);
}

int main() {
    const unsigned tiles = N / (THREADS * 16), tiles_wide = N / (THREADS * 32);
    const float pivot = 512.0f / 1024.0f;
    std::vector<float> hk(N);
    for (auto& v : hk) v = (float)(urand() >> 22) * (1.0f / 1024.0f);  // 10-bit scores: about 0.1% tie the pivot
    float* dk = dcopy(hk);
    float *dout = dnew<float>(N), *dties = dnew<float>(N), *dout2 = dnew<float>(N), *dties2 = dnew<float>(N);
    u64 *st = dnew<u64>(tiles), *st_wide = dnew<u64>(tiles_wide);
    unsigned* counters = dnew<unsigned>(2);
    LAUNCH(pivot_partition, tiles, THREADS, dk, dout, dties, st, counters, pivot);
    LAUNCH(pivot_partition_wide, tiles_wide, THREADS, dk, dout2, dties2, st_wide, counters + 1, pivot);
    CK(cudaDeviceSynchronize());
    // reference: stable partition on the host; the middle of `out` and the tail of `ties` stay zero
    std::vector<float> ref(2 * (size_t)N, 0.0f);
    size_t nlo = 0, nhi = 0, neq = 0;
    for (size_t i = 0; i < N; ++i) {
        const float v = hk[i];
        if (v < pivot) ref[nlo++] = v;
        else if (v > pivot) ref[N - 1 - nhi++] = v;
        else ref[N + neq++] = v;
    }
    auto both = [](const float* o, const float* t) {
        std::vector<float> h = hcopy(o, N), ht = hcopy(t, N);
        h.insert(h.end(), ht.begin(), ht.end());
        return h;
    };
    printf("below %zu, ties %zu, above %zu\n", nlo, neq, nhi);
    int rc = verdict("127-healthy-pivot-partition-lookback", both(dout, dties), ref, 0.0);
    rc |= verdict("127-healthy-pivot-partition-lookback challenger", both(dout2, dties2), ref, 0.0);
    return rc;
}
