// 173-healthy-csr-rowptr-lookback. Healthy: CSR row pointers (rowptr[i] = counts[0] + .. + counts[i-1], rowptr[n] =
// nnz) from 64M uint32 per-row nonzero counts (0-15, one row in 1024 a 512+ hub) in one pass with decoupled look-back,
// CUB-style: block b scans tile b (blocks are dispatched in index order), 256 threads x 8 rows, two uint4 a thread
// (quads t and 256+t, so each load and store is a whole 512-byte warp access; both quads are scanned at once as one
// 64-bit pair of sums). Warp 0 publishes the tile sum in a packed 64-bit status word (flag high, sum low) and, while
// the block waits at __syncthreads, reads the 32 tiles before it with volatile 64-bit loads, adding aggregates back
// to the nearest inclusive prefix. 256 MB in, 256 MB out: DRAM-bound, ~170-190 us at 85-90% of peak.
// Challenger: the same scan with 256-thread tiles of 1024 rows (one uint4 a thread, twice the tiles and look-backs).
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

#define N_ROWS (64u << 20)
#define FULL 0xffffffffu
enum : unsigned { ST_AGG = 1u, ST_PREFIX = 2u };  // status 0 = not published yet (cudaMemset)

__device__ __forceinline__ unsigned long long ld_status(const unsigned long long* p) {
    return *(const volatile unsigned long long*)p; }
__device__ __forceinline__ void st_status(unsigned long long* p, unsigned flag, unsigned v) {
    *(volatile unsigned long long*)p = ((unsigned long long)flag << 32) | v; }

// warp 0: publish the tile's sum, then add predecessors' sums back to the nearest inclusive prefix
__device__ __forceinline__ unsigned lookback(unsigned long long* status, int tile, unsigned agg, int lane) {
    if (tile == 0) { if (lane == 0) st_status(status, ST_PREFIX, agg); return 0u; }
    if (lane == 0) st_status(status + tile, ST_AGG, agg);
    unsigned prefix = 0;
    for (int pred = tile - 32 + lane; ; pred -= 32) {          // lane 31 reads the nearest predecessor
        unsigned long long s = pred < 0 ? (unsigned long long)ST_PREFIX << 32 : ld_status(status + pred);
        while (__any_sync(FULL, (unsigned)(s >> 32) == 0u))     // some predecessor has not published yet
            if ((unsigned)(s >> 32) == 0u) s = ld_status(status + pred);
        const unsigned pmask = __ballot_sync(FULL, (unsigned)(s >> 32) == ST_PREFIX);
        const int stop = pmask ? 31 - __clz(pmask) : 0;          // nearest inclusive prefix in this window
        unsigned v = lane >= stop ? (unsigned)s : 0u;
        for (int o = 16; o; o >>= 1) v += __shfl_xor_sync(FULL, v, o);
        prefix += v;
        if (pmask) break;
    }
    if (lane == 0) st_status(status + tile, ST_PREFIX, prefix + agg);
    return prefix;
}

template <int THREADS, int QUADS>
__device__ __forceinline__ void rowptr_tile(const uint4* __restrict__ counts, unsigned* __restrict__ rowptr,
                                            unsigned long long* status, int n_tiles) {
    constexpr int WARPS = THREADS / 32;
    __shared__ unsigned long long s_warp[WARPS];
    __shared__ unsigned s_prefix, s_total0;
    const int t = threadIdx.x, lane = t & 31, warp = t >> 5, tile = blockIdx.x;
    const size_t q0 = (size_t)tile * THREADS * QUADS + t;        // this thread's quads: q0 + j * THREADS
    uint4 c[QUADS];
    unsigned long long mine = 0;                                  // quad j's sum in bits 32j..32j+31
#pragma unroll
    for (int j = 0; j < QUADS; ++j) {
        c[j] = counts[q0 + j * THREADS];
        mine |= (unsigned long long)(c[j].x + c[j].y + c[j].z + c[j].w) << (32 * j);
    }
    unsigned long long incl = mine;
#pragma unroll
    for (int d = 1; d < 32; d <<= 1) {
        const unsigned long long y = __shfl_up_sync(FULL, incl, d);
        if (lane >= d) incl += y;
    }
    if (lane == 31) s_warp[warp] = incl;
    __syncthreads();
    if (warp == 0) {                                              // the rest of the block waits at the barrier
        const unsigned long long w = lane < WARPS ? s_warp[lane] : 0ull;
        unsigned long long wi = w;
#pragma unroll
        for (int d = 1; d < WARPS; d <<= 1) {
            const unsigned long long y = __shfl_up_sync(FULL, wi, d);
            if (lane >= d) wi += y;
        }
        const unsigned long long total = __shfl_sync(FULL, wi, WARPS - 1);
        if (lane < WARPS) s_warp[lane] = wi - w;                  // exclusive offsets of the warps
        const unsigned prefix = lookback(status, tile, (unsigned)total + (unsigned)(total >> 32), lane);
        if (lane == 0) { s_prefix = prefix; s_total0 = (unsigned)total; }
    }
    __syncthreads();
    const unsigned long long ex = s_warp[warp] + incl - mine;
    uint4* out4 = reinterpret_cast<uint4*>(rowptr);
    unsigned last = 0;
#pragma unroll
    for (int j = 0; j < QUADS; ++j) {
        uint4 o;
        o.x = s_prefix + (j ? s_total0 : 0u) + (unsigned)(ex >> (32 * j));
        o.y = o.x + c[j].x; o.z = o.y + c[j].y; o.w = o.z + c[j].z;
        out4[q0 + j * THREADS] = o;
        last = o.w + c[j].w;
    }
    if (tile == n_tiles - 1 && t == THREADS - 1) rowptr[(size_t)n_tiles * THREADS * QUADS * 4] = last;  // nnz
}

extern "C" __global__ void __launch_bounds__(256) rowptr_lookback_2k(const uint4* counts, unsigned* rowptr,
                                                                    unsigned long long* status, int n_tiles) {
    rowptr_tile<256, 2>(counts, rowptr, status, n_tiles);
}
extern "C" __global__ void __launch_bounds__(256) rowptr_lookback_1k(const uint4* counts, unsigned* rowptr,
                                                                    unsigned long long* status, int n_tiles) {
    rowptr_tile<256, 1>(counts, rowptr, status, n_tiles);
}

static size_t count_diff(const std::vector<unsigned>& a, const std::vector<unsigned>& b, size_t* first) {
    size_t bad = a.size() == b.size() ? 0 : 1;
    *first = 0;
    for (size_t i = 0; i < a.size() && i < b.size(); ++i)
        if (a[i] != b[i] && !bad++) *first = i;
    return bad;
}

int main() {
    const size_t n = N_ROWS;
    std::vector<unsigned> h(n), ref(n + 1);
    for (size_t i = 0; i < n; ++i) {
        unsigned c = urand() >> 28;                               // 0-15 nonzeros a row
        if ((urand() >> 22) == 0u) c += 512u;                     // one row in 1024 is a hub
        h[i] = c;
    }
    ref[0] = 0;
    for (size_t i = 0; i < n; ++i) ref[i + 1] = ref[i] + h[i];   // nnz ~ 0.53G, fits in uint32

    const int tiles2k = (int)(n / 2048), tiles1k = (int)(n / 1024);
    uint4* d_counts = reinterpret_cast<uint4*>(dcopy(h));
    unsigned* d_a = dnew<unsigned>(n + 1);
    unsigned* d_b = dnew<unsigned>(n + 1);
    unsigned long long* st_a = dnew<unsigned long long>(tiles2k);
    unsigned long long* st_b = dnew<unsigned long long>(tiles1k);
    LAUNCH(rowptr_lookback_2k, tiles2k, 256, d_counts, d_a, st_a, tiles2k);
    LAUNCH(rowptr_lookback_1k, tiles1k, 256, d_counts, d_b, st_b, tiles1k);
    CK(cudaDeviceSynchronize());
    std::vector<unsigned> a = hcopy(d_a, n + 1), b = hcopy(d_b, n + 1);

    size_t fa, fb, da = count_diff(a, ref, &fa), db = count_diff(b, ref, &fb);
    if (da || db) {
        printf("MISMATCH 173-healthy-csr-rowptr-lookback 2k: %zu differ (first %zu), 1k: %zu differ (first %zu)\n",
               da, fa, db, fb);
        return 1;
    }
    std::vector<float> sa, sr;                                    // exact above; tile starts for the verdict line
    for (size_t i = 0; i <= n; i += 1024) { sa.push_back((float)a[i]); sr.push_back((float)ref[i]); }
    return verdict("173-healthy-csr-rowptr-lookback", sa, sr, 0.0);
}
