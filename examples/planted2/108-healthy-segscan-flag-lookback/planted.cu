// 108-healthy-segscan-flag-lookback. Healthy: inclusive scan by key (cumulative sums inside each packed
// sequence, thrust::inclusive_scan_by_key's contract) over 48M (key, value) pairs in one pass: decoupled
// look-back whose 64-bit descriptors carry status, a "segment starts here" flag and the float aggregate, so a
// tile stops looking back at the first flagged predecessor. 256-thread blocks, 4096-item tiles loaded with int4
// and float4, lanes scan 4 items, warps scan lanes with a head-bounded shuffle scan. 384 MB read, 192 MB
// written: DRAM-bound, expected at 80-90% of its peak.
// Challenger: reduce-then-scan in one cooperative kernel (each block's aggregate read from its range's last head
// to its end, grid.sync, carry-in from the block aggregates, then its ~23 tiles in order with a running carry).
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
#include <cooperative_groups.h>
namespace cg = cooperative_groups;
#define N (48 << 20)
#define THREADS 256
#define WARPS (THREADS / 32)
#define ROWS 4                        // rows of 128 items (one int4 + one float4 a lane) per warp
#define WARP_ITEMS (ROWS * 128)
#define TILE (WARPS * WARP_ITEMS)     // 4096 items
#define TILES (N / TILE)
#define FULL 0xffffffffu
#define ST_AGG 1ull                   // descriptor high word: status bits, plus ST_HEAD
#define ST_PRE 2ull
#define ST_HEAD 4ull                  // a segment starts inside the tile: its aggregate restarts there

struct Agg { bool head; float sum; };  // did a segment start in the span, sum since its last start
__device__ __forceinline__ Agg combine(Agg a, Agg b) { return {a.head || b.head, b.head ? b.sum : a.sum + b.sum}; }

// Scans one tile; all lanes of warp 0 call prefix(tile aggregate), which returns the sum carried into the tile.
template <class Prefix>
__device__ __forceinline__ void scan_tile(const int* __restrict__ keys, const float* __restrict__ vals, float* __restrict__ out,
                                          int tile, Prefix prefix) {
    __shared__ int s_head[WARPS];
    __shared__ float s_sum[WARPS], s_prefix;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int seg = tile * TILE + warp * WARP_ITEMS;
    int4 k[ROWS];
    float4 x[ROWS];
#pragma unroll
    for (int r = 0; r < ROWS; ++r) {
        k[r] = reinterpret_cast<const int4*>(keys + seg + r * 128)[lane];
        x[r] = reinterpret_cast<const float4*>(vals + seg + r * 128)[lane];
    }
    const int before = seg > 0 ? keys[seg - 1] : ~keys[0];
    const unsigned lt = (1u << lane) - 1u;
    float carry = 0.f;        // sum since the warp's last head at the end of the previous row (0 carried in)
    int first = WARP_ITEMS;   // the warp's first head, as an index into its 512 items
#pragma unroll
    for (int r = 0; r < ROWS; ++r) {
        const int last_prev_row = __shfl_sync(FULL, r ? k[r > 0 ? r - 1 : 0].w : before, 31);
        int p = __shfl_up_sync(FULL, k[r].w, 1);
        if (lane == 0) p = r ? last_prev_row : before;
        const unsigned f = (k[r].x != p) | (k[r].y != k[r].x) << 1 | (k[r].z != k[r].y) << 2 | (k[r].w != k[r].z) << 3;
        float s0 = x[r].x, s1 = (f & 2) ? x[r].y : s0 + x[r].y, s2 = (f & 4) ? x[r].z : s1 + x[r].z,
              s3 = (f & 8) ? x[r].w : s2 + x[r].w;
        const unsigned hm = __ballot_sync(FULL, f != 0);          // lanes holding a head
        const unsigned le = hm & (lt | 1u << lane);
        const int start = le ? 31 - __clz(le) : -1;               // this lane's segment starts in lane `start`
        float X = s3;
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
            const float y = __shfl_up_sync(FULL, X, o);
            if (lane >= o && lane - o >= start) X += y;
        }
        float c = __shfl_up_sync(FULL, X, 1);
        if (lane == 0) c = 0.f;
        if (!(hm & lt)) c += carry;
        if (!(f & 1)) { s0 += c; if (!(f & 2)) { s1 += c; if (!(f & 4)) { s2 += c; if (!(f & 8)) s3 += c; } } }
        x[r] = make_float4(s0, s1, s2, s3);
        const float row_end = __shfl_sync(FULL, X, 31);
        carry = hm ? row_end : carry + row_end;
        if (hm && first == WARP_ITEMS) {
            const int l0 = __ffs(hm) - 1;
            first = r * 128 + 4 * l0 + __ffs(__shfl_sync(FULL, f, l0)) - 1;
        }
    }
    if (lane == 0) { s_head[warp] = first < WARP_ITEMS; s_sum[warp] = carry; }
    __syncthreads();
    Agg wex = {false, 0.f}, tot = {false, 0.f};
#pragma unroll
    for (int w = 0; w < WARPS; ++w) {
        const Agg a = {s_head[w] != 0, s_sum[w]};
        if (w < warp) wex = combine(wex, a);
        tot = combine(tot, a);
    }
    if (warp == 0) {
        const float pre = prefix(tot);
        if (lane == 0) s_prefix = pre;
    }
    __syncthreads();
    const float wc = wex.head ? wex.sum : s_prefix + wex.sum;  // carried into this warp's first items
#pragma unroll
    for (int r = 0; r < ROWS; ++r) {
        const int i0 = r * 128 + 4 * lane;
        float4 y = x[r];
        if (i0 < first) y.x += wc;
        if (i0 + 1 < first) y.y += wc;
        if (i0 + 2 < first) y.z += wc;
        if (i0 + 3 < first) y.w += wc;
        reinterpret_cast<float4*>(out + seg + r * 128)[lane] = y;
    }
}

__device__ __forceinline__ unsigned long long ld_desc(const unsigned long long* d, int t) {
    return *(const volatile unsigned long long*)&d[t];
}
__device__ __forceinline__ void st_desc(unsigned long long* d, int t, unsigned long long st, float v) {
    *(volatile unsigned long long*)&d[t] = st << 32 | __float_as_uint(v);
}

extern "C" __global__ void __launch_bounds__(THREADS) segscan_lookback(const int* __restrict__ keys, const float* __restrict__ vals,
        float* __restrict__ out, unsigned long long* desc, unsigned* ticket) {
    __shared__ int s_tile;
    if (threadIdx.x == 0) s_tile = atomicAdd(ticket, 1u);
    __syncthreads();
    const int tile = s_tile, lane = threadIdx.x & 31;
    scan_tile(keys, vals, out, tile, [&](Agg t) {
        if (tile == 0) {
            if (lane == 0) st_desc(desc, 0, ST_PRE, t.sum);
            return 0.f;
        }
        if (lane == 0) st_desc(desc, tile, ST_AGG | (t.head ? ST_HEAD : 0), t.sum);
        float pre = 0.f;
        for (int base = tile - 32;; base -= 32) {
            const int i = base + lane;
            unsigned long long d = i < 0 ? ST_PRE << 32 : ld_desc(desc, i);
            for (int ns = 8; ((d >> 32) & 3) == 0; ns = min(ns * 2, 256)) { __nanosleep(ns); d = ld_desc(desc, i); }
            const unsigned stop = __ballot_sync(FULL, (d >> 32) & (ST_PRE | ST_HEAD));
            const int top = stop ? 31 - __clz(stop) : 0;  // nearest predecessor that ends the walk
            float v = lane >= top ? __uint_as_float((unsigned)d) : 0.f;
#pragma unroll
            for (int o = 16; o; o >>= 1) v += __shfl_xor_sync(FULL, v, o);
            pre += v;
            if (stop) break;
        }
        if (lane == 0) st_desc(desc, tile, ST_PRE, t.head ? t.sum : pre + t.sum);
        return pre;
    });
}

extern "C" __global__ void __launch_bounds__(THREADS, 4) segscan_reduce_then_scan(const int* __restrict__ keys, const float* __restrict__ vals,
        float* __restrict__ out, float* blk_sum, int* blk_head) {
    __shared__ int s_last;
    __shared__ float s_red[WARPS];
    const int b = blockIdx.x, G = gridDim.x, lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int t0 = (int)((long long)TILES * b / G), t1 = (int)((long long)TILES * (b + 1) / G);
    // 1. (head, sum since the last head) of the range: its last head found from the end a tile of keys at a time,
    //    then the values from there to the end
    const int lo = t0 * TILE, hi = t1 * TILE;
    int h = -1;
    for (int end = hi; end > lo && h < 0; end -= TILE) {
        if (threadIdx.x == 0) s_last = -1;
        __syncthreads();
        int last = -1;
#pragma unroll
        for (int j = 0; j < TILE / THREADS; ++j) {
            const int p = end - TILE + j * THREADS + threadIdx.x;
            if (p == 0 || keys[p] != keys[p - 1]) last = p;
        }
        if (last >= 0) atomicMax(&s_last, last);
        __syncthreads();
        h = s_last;
        __syncthreads();
    }
    float v = 0.f;
#pragma unroll 8
    for (int p = max(h, lo) + threadIdx.x; p < hi; p += THREADS) v += vals[p];
#pragma unroll
    for (int o = 16; o; o >>= 1) v += __shfl_xor_sync(FULL, v, o);
    if (lane == 0) s_red[warp] = v;
    __syncthreads();
    float sum = 0.f;
#pragma unroll
    for (int w = 0; w < WARPS; ++w) sum += s_red[w];
    const bool head = h >= 0;
    if (threadIdx.x == 0) { blk_sum[b] = sum; blk_head[b] = head; }
    cg::this_grid().sync();
    // 2. the carry into this block from the blocks before it, then its tiles in order with a running carry
    float carry = 0.f;
    if (warp == 0) {
        for (int base = b - 32;; base -= 32) {
            const int i = base + lane;
            const unsigned stop = __ballot_sync(FULL, i < 0 || __ldcg(blk_head + i));
            const int top = stop ? 31 - __clz(stop) : 0;
            float c = lane >= top && i >= 0 ? __ldcg(blk_sum + i) : 0.f;
#pragma unroll
            for (int o = 16; o; o >>= 1) c += __shfl_xor_sync(FULL, c, o);
            carry += c;
            if (stop) break;
        }
    }
    for (int t = t0; t < t1; ++t)
        scan_tile(keys, vals, out, t, [&](Agg a) {
            const float pre = carry;
            carry = a.head ? a.sum : carry + a.sum;
            return pre;
        });
}

int main() {
    std::vector<int> hk(N);
    std::vector<float> hv(N), ref(N);
    int id = 0;
    for (int i = 0; i < N; ++id) {  // packed sequences: most up to 2K items, one in five up to 32K
        const int len = std::min(N - i, (urand() >> 8) % 5 ? 1 + (int)((urand() >> 8) % 2048) : 2048 + (int)((urand() >> 8) % 30720));
        double run = 0;
        for (int j = 0; j < len; ++j, ++i) { hk[i] = id; hv[i] = frand(); run += hv[i]; ref[i] = (float)run; }
    }
    int* dk = dcopy(hk);
    float* dv = dcopy(hv);
    float *out1 = dnew<float>(N), *out2 = dnew<float>(N);
    unsigned long long* desc = dnew<unsigned long long>(TILES);
    unsigned* ticket = dnew<unsigned>(1);
    int sms = 0, per_sm = 0;
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, segscan_reduce_then_scan, THREADS, 0));
    int grid = std::min(sms * per_sm, TILES);
    float* blk_sum = dnew<float>(grid);
    int* blk_head = dnew<int>(grid);
    segscan_lookback<<<TILES, THREADS>>>(dk, dv, out1, desc, ticket);
    CK(cudaGetLastError());
    void* args[] = {&dk, &dv, &out2, &blk_sum, &blk_head};
    CK(cudaLaunchCooperativeKernel(segscan_reduce_then_scan, dim3(grid), dim3(THREADS), args, 0, 0));
    CK(cudaDeviceSynchronize());
    std::vector<float> got = hcopy(out1, N);
    double worst = 0;
    for (int i = 0; i < N; ++i) worst = std::max(worst, fabs((double)got[i] - ref[i]) / (fabs((double)ref[i]) + 1e-2));
    if (!(worst <= 1e-3)) { printf("MISMATCH 108-healthy-segscan-flag-lookback: segscan_lookback vs host max_rel_err=%.3g\n", worst); return 1; }
    return verdict("108-healthy-segscan-flag-lookback", hcopy(out2, N), got, 1e-3);
}
