// 106-healthy-rle-run-ends. Healthy: run-length encoding of 64M int keys into Arrow's run-end layout (values[r],
// run_ends[r]) in one pass with decoupled look-back over the tiles' run counts (64-bit status|count words, tile
// = blockIdx.x as CUB orders them, a warp-wide look-back window with backoff). Each 256-thread block reads its
// 4096-key tile with coalesced int4 loads, finds run heads with shuffles and counts them with ballots, and
// writes its runs through a per-warp shared staging row so each store instruction is contiguous. 256 MB read,
// about 150 MB written: DRAM-bound, expected at 80-90% of its peak.
// Challenger: the same kernel scattering each head straight from registers (no staging, no __syncwarp).
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
#define N (64 << 20)              // keys
#define THREADS 256
#define WARPS (THREADS / 32)
#define ROWS 4                     // rows of 128 keys (an int4 a lane) per warp
#define TILE (WARPS * ROWS * 128)  // 4096 keys
#define TILES (N / TILE)
#define FULL 0xffffffffu
#define ST_AGG 1ull                // tile status in the high word: 0 not ready, 1 aggregate, 2 inclusive prefix
#define ST_PRE 2ull

__device__ __forceinline__ unsigned long long ld_desc(const unsigned long long* d, int t) {
    return *(const volatile unsigned long long*)&d[t];
}
__device__ __forceinline__ void st_desc(unsigned long long* d, int t, unsigned long long st, unsigned v) {
    *(volatile unsigned long long*)&d[t] = (st << 32) | v;
}

// Warp 0 of the block: the number of runs starting in tiles before `tile`.
__device__ unsigned look_back(const unsigned long long* desc, int tile) {
    const int lane = threadIdx.x & 31;
    unsigned excl = 0;
    for (int base = tile - 32;; base -= 32) {
        const int t = base + lane;
        unsigned long long d = t < 0 ? ST_PRE << 32 : ld_desc(desc, t);
        for (int ns = 8; (d >> 32) == 0; ns = min(ns * 2, 256)) { __nanosleep(ns); d = ld_desc(desc, t); }
        const unsigned pre = __ballot_sync(FULL, (d >> 32) == ST_PRE);
        const int top = pre ? 31 - __clz(pre) : 0;  // nearest tile holding an inclusive prefix
        unsigned v = lane >= top ? (unsigned)d : 0u;
#pragma unroll
        for (int o = 16; o; o >>= 1) v += __shfl_xor_sync(FULL, v, o);
        excl += v;
        if (pre) return excl;
    }
}

template <bool STAGED>
__device__ __forceinline__ void rle_tile(const int* __restrict__ keys, int* __restrict__ values, int* __restrict__ run_ends,
                                         unsigned long long* desc, int* nruns) {
    __shared__ int s_warp[WARPS];
    __shared__ unsigned s_prefix;
    __shared__ int s_key[WARPS][128], s_pos[WARPS][128];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int tile = blockIdx.x;
    const int seg = tile * TILE + warp * (ROWS * 128);  // this warp's 512 keys
    int4 v[ROWS];
#pragma unroll
    for (int r = 0; r < ROWS; ++r) v[r] = reinterpret_cast<const int4*>(keys + seg + r * 128)[lane];
    const int before = seg > 0 ? keys[seg - 1] : ~keys[0];  // the key before the warp's first one
    unsigned heads[ROWS];
    int lane_off[ROWS], row_off[ROWS], warp_total = 0;
#pragma unroll
    for (int r = 0; r < ROWS; ++r) {
        const int last_prev_row = __shfl_sync(FULL, r ? v[r > 0 ? r - 1 : 0].w : before, 31);
        int p = __shfl_up_sync(FULL, v[r].w, 1);
        if (lane == 0) p = r ? last_prev_row : before;
        heads[r] = (v[r].x != p) | (v[r].y != v[r].x) << 1 | (v[r].z != v[r].y) << 2 | (v[r].w != v[r].z) << 3;
        const int c = __popc(heads[r]);
        const unsigned b0 = __ballot_sync(FULL, c & 1), b1 = __ballot_sync(FULL, c & 2), b2 = __ballot_sync(FULL, c & 4);
        const unsigned lt = (1u << lane) - 1u;
        lane_off[r] = __popc(b0 & lt) + 2 * __popc(b1 & lt) + 4 * __popc(b2 & lt);
        row_off[r] = warp_total;
        warp_total += __popc(b0) + 2 * __popc(b1) + 4 * __popc(b2);
    }
    if (lane == 0) s_warp[warp] = warp_total;
    __syncthreads();
    int warp_off = 0, tile_total = 0;
#pragma unroll
    for (int w = 0; w < WARPS; ++w) { const int c = s_warp[w]; warp_off += w < warp ? c : 0; tile_total += c; }
    if (warp == 0) {
        unsigned excl = 0;
        if (tile == 0) {
            if (lane == 0) st_desc(desc, 0, ST_PRE, tile_total);
        } else {
            if (lane == 0) st_desc(desc, tile, ST_AGG, tile_total);
            excl = look_back(desc, tile);
            if (lane == 0) st_desc(desc, tile, ST_PRE, excl + tile_total);
        }
        if (lane == 0) s_prefix = excl;
    }
    __syncthreads();
    const int tile_off = (int)s_prefix;
#pragma unroll
    for (int r = 0; r < ROWS; ++r) {
        const int k[4] = {v[r].x, v[r].y, v[r].z, v[r].w};
        const int pos = seg + r * 128 + 4 * lane;
        const int row_first = tile_off + warp_off + row_off[r];  // run index of the row's first head
        int o = lane_off[r];
        if (STAGED) {
#pragma unroll
            for (int j = 0; j < 4; ++j)
                if (heads[r] >> j & 1) { s_key[warp][o] = k[j]; s_pos[warp][o] = pos + j; ++o; }
            __syncwarp();
            const int row_total = (r + 1 < ROWS ? row_off[r + 1] : warp_total) - row_off[r];
            for (int i = lane; i < row_total; i += 32) {
                const int g = row_first + i;
                values[g] = s_key[warp][i];
                if (g > 0) run_ends[g - 1] = s_pos[warp][i];
            }
            __syncwarp();
        } else {
#pragma unroll
            for (int j = 0; j < 4; ++j)
                if (heads[r] >> j & 1) {
                    const int g = row_first + o++;
                    values[g] = k[j];
                    if (g > 0) run_ends[g - 1] = pos + j;
                }
        }
    }
    if (tile == TILES - 1 && threadIdx.x == 0) {
        run_ends[tile_off + tile_total - 1] = N;
        *nruns = tile_off + tile_total;
    }
}

extern "C" __global__ void __launch_bounds__(THREADS, 5) rle_run_ends(const int* __restrict__ keys, int* __restrict__ values,
        int* __restrict__ run_ends, unsigned long long* desc, int* nruns) {
    rle_tile<true>(keys, values, run_ends, desc, nruns);
}

extern "C" __global__ void __launch_bounds__(THREADS, 5) rle_run_ends_direct(const int* __restrict__ keys, int* __restrict__ values,
        int* __restrict__ run_ends, unsigned long long* desc, int* nruns) {
    rle_tile<false>(keys, values, run_ends, desc, nruns);
}

// values, lengths and the run count as floats (keys < 2^24, lengths <= 6: exact)
static std::vector<float> as_floats(const std::vector<int>& val, const std::vector<int>& ends, int runs) {
    std::vector<float> f;
    f.reserve(2 * (size_t)runs + 1);
    for (int r = 0; r < runs; ++r) { f.push_back((float)val[r]); f.push_back((float)(ends[r] - (r ? ends[r - 1] : 0))); }
    f.push_back((float)runs);
    return f;
}

int main() {
    std::vector<int> hk(N), ref_val, ref_end;
    int key = 0;
    for (int i = 0; i < N;) {
        key = (key + 1 + (int)(urand() >> 12) % 1000) & 0xffffff;  // never the previous run's key
        const int len = std::min(1 + (int)((urand() >> 8) % 6), N - i);
        for (int j = 0; j < len; ++j) hk[i + j] = key;
        i += len;
        ref_val.push_back(key);
        ref_end.push_back(i);
    }
    const int runs = (int)ref_val.size();
    int* dk = dcopy(hk);
    int *dv1 = dnew<int>(runs), *de1 = dnew<int>(runs), *dv2 = dnew<int>(runs), *de2 = dnew<int>(runs);
    unsigned long long *desc1 = dnew<unsigned long long>(TILES), *desc2 = dnew<unsigned long long>(TILES);
    int* dn = dnew<int>(2);
    rle_run_ends<<<TILES, THREADS>>>(dk, dv1, de1, desc1, dn);
    CK(cudaGetLastError());
    rle_run_ends_direct<<<TILES, THREADS>>>(dk, dv2, de2, desc2, dn + 1);
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    std::vector<int> n = hcopy(dn, 2);
    std::vector<float> ref = as_floats(ref_val, ref_end, runs);
    std::vector<float> got = n[0] == runs ? as_floats(hcopy(dv1, runs), hcopy(de1, runs), runs) : std::vector<float>();
    std::vector<float> chal = n[1] == runs ? as_floats(hcopy(dv2, runs), hcopy(de2, runs), runs) : std::vector<float>();
    if (got != ref) { printf("MISMATCH 106-healthy-rle-run-ends: rle_run_ends differs from the host encoding (runs %d of %d)\n", n[0], runs); return 1; }
    return verdict("106-healthy-rle-run-ends", chal, got, 0.0);
}
