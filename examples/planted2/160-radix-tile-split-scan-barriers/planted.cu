// 160-radix-tile-split-scan-barriers. Planted: barrier-heavy block scans. The local stage of an LSD radix sort
// pass (digit = bits 8..11): 32M uint32 keys in 32768 tiles of 1024, each tile stably sorted by its 4-bit digit
// in shared memory and written back (the per-tile sort before the global scatter). 2 blocks of 1024 threads per
// SM loop over the tiles; for each of the digit's 4 bits the block does the textbook 1-bit split: every thread
// holds one key, a Hillis-Steele scan of the "bit is 0" flags over 1024 entries in a double-buffered shared array
// (10 steps, each a shared load, an add, a shared store and a __syncthreads), then each key is scattered to its rank.
// 48 barriers a tile with 3-5 instructions between them: each warp's shared load returns within a few tens of
// cycles, then it waits at the step barrier for the other 31 warps of its block, 40 times a tile; DRAM (256 MB in
// all) stays far from busy.
// Fixed twin: the same stable sort of the same tiles with one pass over the 4-bit digit: __match_any_sync groups
// the lanes of a warp by digit (rank within the warp from a popc), one leader a group writes its count, warps
// 0-15 scan one digit's 32 warp counts each with shuffles, and every key goes straight to its place: 3 barriers
// a tile instead of 48 (and the next tile's key loaded one tile ahead).
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
#define FULL 0xffffffffu
#define TILE 1024

extern "C" __global__ void __launch_bounds__(TILE, 2) tile_sort_split_scan(const unsigned* __restrict__ keys,
        unsigned* __restrict__ out, int ntiles, int shift) {
    __shared__ unsigned scan[2][TILE];
    __shared__ unsigned sk[TILE];
    const int tid = threadIdx.x;
    for (int tile = blockIdx.x; tile < ntiles; tile += gridDim.x) {
        unsigned key = keys[(size_t)tile * TILE + tid];
        for (int b = 0; b < 4; ++b) {  // LSD 1-bit splits: stable, so 4 of them sort by the digit
            const unsigned zero = ((key >> (shift + b)) & 1u) ^ 1u;
            int cur = 0;
            unsigned v = zero;
            scan[0][tid] = v;
            __syncthreads();
            for (int off = 1; off < TILE; off <<= 1) {  // Hillis-Steele inclusive scan, double-buffered
                if (tid >= off) v += scan[cur][tid - off];
                cur ^= 1;
                scan[cur][tid] = v;
                __syncthreads();  // PLANTED
            }
            const unsigned before = v - zero, zeros = scan[cur][TILE - 1];
            sk[zero ? before : zeros + (tid - before)] = key;
            __syncthreads();
            key = sk[tid];
        }
        out[(size_t)tile * TILE + tid] = key;
    }
}

extern "C" __global__ void __launch_bounds__(TILE, 2) tile_sort_digit_match(const unsigned* __restrict__ keys,
        unsigned* __restrict__ out, int ntiles, int shift) {
    __shared__ unsigned cnt[2][32][17];  // [parity][warp][digit], padded: zeroed one tile ahead
    __shared__ unsigned dtot[16];
    __shared__ unsigned sk[TILE];
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const unsigned lt = (1u << lane) - 1;
    for (int i = tid; i < 2 * 32 * 17; i += TILE) (&cnt[0][0][0])[i] = 0;
    __syncthreads();
    int par = 0;
    unsigned key = blockIdx.x < ntiles ? keys[(size_t)blockIdx.x * TILE + tid] : 0u;
    for (int tile = blockIdx.x; tile < ntiles; tile += gridDim.x, par ^= 1) {
        const int nxt = tile + gridDim.x;  // the next tile's key is loaded while this one is ranked
        const unsigned next = nxt < ntiles ? keys[(size_t)nxt * TILE + tid] : 0u;
        const unsigned d = (key >> shift) & 15u;
        const unsigned peers = __match_any_sync(FULL, d);
        const unsigned rank = __popc(peers & lt);
        if (lane == __ffs(peers) - 1) cnt[par][warp][d] = __popc(peers);
        __syncthreads();
        if (warp < 16) {  // warp w: exclusive scan of digit w's counts over the 32 warps
            const unsigned c = cnt[par][lane][warp];
            unsigned t = c;
#pragma unroll
            for (int o = 1; o < 32; o <<= 1) { const unsigned y = __shfl_up_sync(FULL, t, o); if (lane >= o) t += y; }
            cnt[par][lane][warp] = t - c;
            if (lane == 31) dtot[warp] = t;
        } else {
            const int j = tid - 512;  // the next tile's counters, last read before this tile's first barrier
            cnt[par ^ 1][j >> 4][j & 15] = 0;
        }
        __syncthreads();
        const unsigned dt = dtot[lane & 15];
        unsigned s = dt;
#pragma unroll
        for (int o = 1; o < 16; o <<= 1) {  // lanes 0-15 and 16-31 both scan the 16 digit totals
            const unsigned y = __shfl_up_sync(FULL, s, o, 16);
            if ((lane & 15) >= o) s += y;
        }
        const unsigned dbase = __shfl_sync(FULL, s - dt, d);
        sk[dbase + cnt[par][warp][d] + rank] = key;
        __syncthreads();
        out[(size_t)tile * TILE + tid] = sk[tid];
        key = next;
    }
}

int main() {
    const int ntiles = 32768, shift = 8;
    const size_t n = (size_t)ntiles * TILE;  // 32M keys, 128 MB
    std::vector<unsigned> h(n), ref(n);
    for (size_t i = 0; i < n; ++i) h[i] = urand();
    for (int t = 0; t < ntiles; ++t) {  // host reference: stable counting sort of each tile by its digit
        const unsigned* k = &h[(size_t)t * TILE];
        unsigned start[17] = {0};
        for (int i = 0; i < TILE; ++i) ++start[((k[i] >> shift) & 15u) + 1];
        for (int d = 0; d < 16; ++d) start[d + 1] += start[d];
        for (int i = 0; i < TILE; ++i) ref[(size_t)t * TILE + start[(k[i] >> shift) & 15u]++] = k[i];
    }
    int sms = 0;
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    const int grid = 2 * sms;  // persistent: 2 blocks of 1024 threads fill each SM
    unsigned* d_keys = dcopy(h);
    unsigned* d_a = dnew<unsigned>(n);
    unsigned* d_b = dnew<unsigned>(n);

    LAUNCH(tile_sort_split_scan, grid, TILE, d_keys, d_a, ntiles, shift);
    LAUNCH(tile_sort_digit_match, grid, TILE, d_keys, d_b, ntiles, shift);
    CK(cudaDeviceSynchronize());
    std::vector<unsigned> a = hcopy(d_a, n), b = hcopy(d_b, n);
    size_t bad_a = 0, bad_b = 0;
    for (size_t i = 0; i < n; ++i) { bad_a += a[i] != ref[i]; bad_b += b[i] != ref[i]; }
    printf("n=%zu tiles=%d grid=%d wrong: split_scan=%zu digit_match=%zu\n", n, ntiles, grid, bad_a, bad_b);
    std::vector<float> bad = {(float)bad_a, (float)bad_b}, none = {0.0f, 0.0f};  // wrong keys: planted, fixed
    int rc = verdict("160-radix-tile-split-scan-barriers", bad, none, 0.0);
    CK(cudaFree(d_keys)); CK(cudaFree(d_a)); CK(cudaFree(d_b));
    return rc;
}
