// 157-healthy-lookback-string-offsets. Healthy: single-pass decoupled look-back scan of 48M uint32 string lengths
// into int64 end offsets (a string column whose total length passes 2^32, so the offsets must be 64-bit). Each
// block of 256 threads owns a 4096-length tile: 8 coalesced 8-byte loads a thread (striped, two lengths each),
// in-register and warp-shuffle scans of the 8 rows, one __syncthreads, then warp 0 scans the 64 row-warp totals,
// publishes the tile aggregate in a packed 64-bit status word (flag in bits 62-63, value below) and looks back
// over its predecessors 32 at a time: each lane volatile-loads one predecessor's word, __all_sync waits (with
// __nanosleep backoff) until the whole window is published, __ballot_sync finds the nearest inclusive prefix and
// a shuffle sum adds the aggregates up to it. A second __syncthreads hands the prefix to the block, which writes
// its 16 offsets as 16-byte stores. 192 MB read and 384 MB written, about 6 blocks of loads in flight per SM:
// the look-back hides behind the other resident blocks' streaming and the kernel should run near the DRAM roof.
// Challenger: the same code with 128-thread blocks and 2048-length tiles (twice the tiles and look-backs).
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
#include <cstdint>

#define FULL 0xffffffffu
#define FLAG_AGG (1ull << 62)
#define FLAG_PFX (2ull << 62)
#define VAL_MASK ((1ull << 62) - 1)

__device__ __forceinline__ unsigned long long warp_sum_u64(unsigned long long v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(FULL, v, o);
    return v;
}
__device__ __forceinline__ void publish(unsigned long long* status, int tile, unsigned long long word) {
    *(volatile unsigned long long*)(status + tile) = word;  // flag and value travel in one 64-bit store
}
// Warp 0 of tile `tile` (> 0): the sum of all earlier tiles, in every lane. Tiles are blockIdx.x, as in CUB:
// blocks are dispatched in index order, so every predecessor is resident or done.
__device__ unsigned long long lookback_window(const unsigned long long* status, int tile, int lane) {
    unsigned long long excl = 0;
    for (int base = tile - 1;; base -= 32) {
        const int idx = base - lane;  // lane 0: the nearest predecessor
        unsigned long long w;
        unsigned ns = 32;
        while (true) {
            w = idx >= 0 ? *(const volatile unsigned long long*)(status + idx) : FLAG_PFX;
            if (__all_sync(FULL, (w >> 62) != 0)) break;
            __nanosleep(ns);
            ns = ns < 512 ? ns * 2 : 512;
        }
        const unsigned pfx = __ballot_sync(FULL, (w >> 62) == 2);
        const unsigned long long v = w & VAL_MASK;
        if (pfx) {
            const int first = __ffs(pfx) - 1;
            return excl + warp_sum_u64(lane <= first ? v : 0ull);
        }
        excl += warp_sum_u64(v);
    }
}

// NT threads, V uint2 vectors a thread (striped: vector k of thread t is tile vector k*NT + t).
template <int NT, int V>
__device__ __forceinline__ void offsets_tile(const uint2* __restrict__ len, longlong2* __restrict__ ends,
                                             unsigned long long* __restrict__ status) {
    constexpr int NW = NT / 32, E = V * NW, PER = E / 32;
    static_assert(E % 32 == 0, "row-warp totals must fill whole lanes");
    __shared__ unsigned sh_e[E];  // row-warp totals, then their exclusive offsets (tile order: row k, then warp)
    __shared__ unsigned long long sh_prefix;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, tile = blockIdx.x;
    const uint2* in = len + (size_t)tile * NT * V;
    uint2 v[V];
#pragma unroll
    for (int k = 0; k < V; ++k) v[k] = in[k * NT + tid];
    unsigned x[V];  // exclusive offset of this thread's vector within its warp's part of row k
#pragma unroll
    for (int k = 0; k < V; ++k) {
        const unsigned s = v[k].x + v[k].y;
        unsigned t = s;
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
            const unsigned y = __shfl_up_sync(FULL, t, o);
            if (lane >= o) t += y;
        }
        x[k] = t - s;
        if (lane == 31) sh_e[k * NW + warp] = t;
    }
    __syncthreads();
    if (warp == 0) {
        unsigned e[PER], run = 0;
#pragma unroll
        for (int j = 0; j < PER; ++j) { e[j] = sh_e[lane * PER + j]; run += e[j]; }
        unsigned incl = run;
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
            const unsigned y = __shfl_up_sync(FULL, incl, o);
            if (lane >= o) incl += y;
        }
        const unsigned agg = __shfl_sync(FULL, incl, 31);
        unsigned ex = incl - run;
#pragma unroll
        for (int j = 0; j < PER; ++j) { sh_e[lane * PER + j] = ex; ex += e[j]; }
        if (tile == 0) {
            if (lane == 0) { publish(status, 0, FLAG_PFX | agg); sh_prefix = 0; }
        } else {
            if (lane == 0) publish(status, tile, FLAG_AGG | agg);
            const unsigned long long excl = lookback_window(status, tile, lane);
            if (lane == 0) { publish(status, tile, FLAG_PFX | (excl + agg)); sh_prefix = excl; }
        }
    }
    __syncthreads();
    const unsigned long long p = sh_prefix;
    longlong2* out = ends + (size_t)tile * NT * V;
#pragma unroll
    for (int k = 0; k < V; ++k) {
        const unsigned long long b = p + sh_e[k * NW + warp] + x[k] + v[k].x;
        out[k * NT + tid] = make_longlong2((long long)b, (long long)(b + v[k].y));
    }
}

extern "C" __global__ void __launch_bounds__(256) offsets_lookback(const uint2* __restrict__ len,
        longlong2* __restrict__ ends, unsigned long long* __restrict__ status) {
    offsets_tile<256, 8>(len, ends, status);
}
extern "C" __global__ void __launch_bounds__(128) offsets_lookback_t2048(const uint2* __restrict__ len,
        longlong2* __restrict__ ends, unsigned long long* __restrict__ status) {
    offsets_tile<128, 8>(len, ends, status);
}

// Counts the elements whose offset differs from the running sum of the lengths.
static size_t count_bad(const std::vector<unsigned>& len, const std::vector<long long>& ends) {
    unsigned long long run = 0;
    size_t bad = 0;
    for (size_t i = 0; i < len.size(); ++i) { run += len[i]; bad += (unsigned long long)ends[i] != run; }
    return bad;
}

int main() {
    const size_t n = (size_t)48 << 20;  // 48M strings: a multiple of both tile sizes (4096, 2048)
    std::vector<unsigned> h(n);
    for (size_t i = 0; i < n; ++i) {  // mostly short strings, one in 16 a long one: about 79 bytes a string
        unsigned l = (urand() >> 8) % 96;
        if ((urand() >> 28) == 0) l += (urand() >> 8) % 1024;
        h[i] = l;
    }
    unsigned* d_len = dcopy(h);
    long long* d_ends = dnew<long long>(n);
    const int tiles_a = (int)(n / 4096), tiles_b = (int)(n / 2048);
    unsigned long long* d_status = dnew<unsigned long long>(tiles_b);

    LAUNCH(offsets_lookback, tiles_a, 256, (const uint2*)d_len, (longlong2*)d_ends, d_status);
    CK(cudaDeviceSynchronize());
    std::vector<long long> got = hcopy(d_ends, n);
    const size_t bad_a = count_bad(h, got);
    const long long total = got[n - 1];

    CK(cudaMemset(d_status, 0, tiles_b * sizeof(unsigned long long)));
    CK(cudaMemset(d_ends, 0, n * sizeof(long long)));
    LAUNCH(offsets_lookback_t2048, tiles_b, 128, (const uint2*)d_len, (longlong2*)d_ends, d_status);
    CK(cudaDeviceSynchronize());
    got = hcopy(d_ends, n);
    const size_t bad_b = count_bad(h, got);

    printf("n=%zu total_bytes=%lld wrong: tile4096=%zu tile2048=%zu\n", n, total, bad_a, bad_b);
    std::vector<float> bad = {(float)bad_a, (float)bad_b}, none = {0.0f, 0.0f};
    int rc = verdict("157-healthy-lookback-string-offsets", bad, none, 0.0);
    CK(cudaFree(d_len)); CK(cudaFree(d_ends)); CK(cudaFree(d_status));
    return rc;
}
