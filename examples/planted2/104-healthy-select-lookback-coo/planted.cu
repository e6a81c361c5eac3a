// 104-healthy-select-lookback-coo. Healthy: single-pass select-if (gradient sparsification into COO: keep
// |g| > 0.5, about half of 64M floats) in the order of the input. Each block takes the next 4096-item tile from
// a counter, loads it with 16-byte loads, ranks its kept items with warp ballots, finds its output offset by a
// decoupled look-back over the earlier tiles' published counts (inter-block flags), compacts the survivors in
// shared memory and writes them with aligned, coalesced stores. 256 MB read, 256 MB written: DRAM is the roof.
// Challenger: the same algorithm on 8192-item tiles of 512 threads (half the look-backs and tile barriers).
// Both are checked exactly against a CPU reference (count, indices and values).
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
#define N (1 << 26)
#define THRESH 0.5f
#define R 4                     // float4 loads per thread and tile
#define FULL 0xffffffffu
#define FLAG_AGG 1ull           // a tile's own count is published
#define FLAG_INCL 2ull          // the count of all tiles up to and including it is published

__device__ __forceinline__ void publish(unsigned long long* status, unsigned tile, unsigned long long flag, unsigned v) {
    *(volatile unsigned long long*)(status + tile) = (flag << 32) | v;  // flag and value in one 64-bit store
}

// Warp 0: the number of items kept by all tiles before `tile` (decoupled look-back, 32 predecessors a step)
__device__ __forceinline__ unsigned look_back(const unsigned long long* status, int tile, int lane) {
    const volatile unsigned long long* st = status;
    unsigned prefix = 0;
    for (int pred = tile - 1;; pred -= 32) {
        const int p = pred - lane;
        unsigned long long s;
        do s = p >= 0 ? st[p] : FLAG_INCL << 32;  // tile 0 publishes an inclusive count: never passed
        while (__any_sync(FULL, (s >> 32) == 0));
        const unsigned incl = __ballot_sync(FULL, (s >> 32) == FLAG_INCL);
        if (incl) return prefix + __reduce_add_sync(FULL, lane < __ffs(incl) ? (unsigned)s : 0u);
        prefix += __reduce_add_sync(FULL, (unsigned)s);
    }
}

template <int THREADS>
__device__ __forceinline__ void select_tile(const float* __restrict__ x, float* __restrict__ out_val,
                                            int* __restrict__ out_idx, unsigned long long* status,
                                            unsigned* tile_counter, unsigned* total) {
    constexpr int NW = THREADS / 32, NT = R * NW, E = NT / 32, TILE = THREADS * R * 4, NTILES = N / TILE;
    static_assert(N % TILE == 0 && NT % 32 == 0, "whole tiles, whole warps of counts");
    constexpr int SPAN = TILE + NW * 32;            // the tile, then a 32-word scratch row per warp
    extern __shared__ float smem[];
    float* s_buf = smem;                            // the staged tile, then the kept values in order
    int* s_idx = reinterpret_cast<int*>(smem + SPAN);  // the kept items' offsets in the tile
    __shared__ int s_tot[NT], s_excl[NT];          // kept per (round, warp), and its exclusive scan
    __shared__ unsigned s_tile, s_base, s_count;
    const int t = threadIdx.x, lane = t & 31, w = t >> 5;
    const unsigned lt = (1u << lane) - 1u;

    if (t == 0) s_tile = atomicAdd(tile_counter, 1u);  // tiles in start order: look-back cannot deadlock
    __syncthreads();
    const unsigned tile = s_tile;
    const float4* src = reinterpret_cast<const float4*>(x + (size_t)tile * TILE);
    float4 v[R];
#pragma unroll
    for (int j = 0; j < R; ++j) v[j] = src[j * THREADS + t];
#pragma unroll
    for (int j = 0; j < R; ++j) reinterpret_cast<float4*>(s_buf)[j * THREADS + t] = v[j];
    __syncwarp();
    // Round j of warp w is tile items j*4*THREADS + w*128 + [0, 128): read back as 4 runs of 32 in order
    float xs[R][4];
#pragma unroll
    for (int j = 0; j < R; ++j) {
        int cnt = 0;
#pragma unroll
        for (int s = 0; s < 4; ++s) {
            xs[j][s] = s_buf[j * 4 * THREADS + w * 128 + s * 32 + lane];
            cnt += __popc(__ballot_sync(FULL, fabsf(xs[j][s]) > THRESH));
        }
        if (lane == 0) s_tot[j * NW + w] = cnt;
    }
    __syncthreads();

    if (w == 0) {
        int tot[E], sum = 0;
#pragma unroll
        for (int e = 0; e < E; ++e) { tot[e] = s_tot[lane * E + e]; sum += tot[e]; }
        int incl = sum;
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) { int y = __shfl_up_sync(FULL, incl, o); if (lane >= o) incl += y; }
        int run = incl - sum;
#pragma unroll
        for (int e = 0; e < E; ++e) { s_excl[lane * E + e] = run; run += tot[e]; }
        const unsigned agg = __shfl_sync(FULL, incl, 31);
        unsigned prefix = 0;
        if (tile == 0) {
            if (lane == 0) publish(status, 0, FLAG_INCL, agg);
        } else {
            if (lane == 0) publish(status, tile, FLAG_AGG, agg);
            prefix = look_back(status, tile, lane);
            if (lane == 0) publish(status, tile, FLAG_INCL, prefix + agg);
        }
        if (lane == 0) { s_base = prefix; s_count = agg; }
    }
    __syncthreads();

    // Stable partition of each run of 32, no branch: kept items to their place in the tile's output (at most
    // 32 consecutive words), dropped ones to the warp's scratch row on the banks the kept ones leave free
#pragma unroll
    for (int j = 0; j < R; ++j) {
        int pos = s_excl[j * NW + w];
#pragma unroll
        for (int s = 0; s < 4; ++s) {
            const bool keep = fabsf(xs[j][s]) > THRESH;
            const unsigned m = __ballot_sync(FULL, keep);
            const int before = __popc(m & lt), kept = __popc(m);
            const int slot = keep ? pos + before : TILE + w * 32 + ((pos + kept + lane - before) & 31);
            s_buf[slot] = xs[j][s];
            s_idx[slot] = j * 4 * THREADS + w * 128 + s * 32 + lane;
            pos += kept;
        }
    }
    __syncthreads();

    // Coalesced stores of [base, base + count), in warp chunks aligned to 128 bytes
    const unsigned base = s_base, end = s_base + s_count;
    const int gbase = (int)(tile * TILE);
    for (unsigned c = (base >> 5) + w; c * 32 < end; c += NW) {
        const unsigned i = c * 32 + lane;
        if (i >= base && i < end) { out_val[i] = s_buf[i - base]; out_idx[i] = gbase + s_idx[i - base]; }
    }
    if (tile == NTILES - 1 && t == 0) *total = end;
}

extern "C" __global__ void __launch_bounds__(256, 6)
select_lookback_4k(const float* __restrict__ x, float* __restrict__ out_val, int* __restrict__ out_idx,
                   unsigned long long* status, unsigned* tile_counter, unsigned* total) {
    select_tile<256>(x, out_val, out_idx, status, tile_counter, total);
}

extern "C" __global__ void __launch_bounds__(512, 3)
select_lookback_8k(const float* __restrict__ x, float* __restrict__ out_val, int* __restrict__ out_idx,
                   unsigned long long* status, unsigned* tile_counter, unsigned* total) {
    select_tile<512>(x, out_val, out_idx, status, tile_counter, total);
}

int main() {
    std::vector<float> hx(N);
    for (auto& v : hx) v = 2.f * frand() - 1.f;
    std::vector<int> ridx;
    std::vector<float> rval;
    for (int i = 0; i < N; ++i) if (fabsf(hx[i]) > THRESH) { ridx.push_back(i); rval.push_back(hx[i]); }
    const size_t k = ridx.size();  // the outputs' capacity: exactly what the reference keeps
    const int tiles4k = N / 4096, tiles8k = N / 8192, smem4k = 2 * (4096 + 8 * 32) * 4, smem8k = 2 * (8192 + 16 * 32) * 4;
    float* dx = dcopy(hx);
    float *val4k = dnew<float>(k), *val8k = dnew<float>(k);
    int *idx4k = dnew<int>(k), *idx8k = dnew<int>(k);
    unsigned long long *st4k = dnew<unsigned long long>(tiles4k), *st8k = dnew<unsigned long long>(tiles8k);
    unsigned *ctr4k = dnew<unsigned>(2), *ctr8k = dnew<unsigned>(2);  // [0] next tile, [1] total kept
    CK(cudaFuncSetAttribute(select_lookback_8k, cudaFuncAttributeMaxDynamicSharedMemorySize, smem8k));
    select_lookback_4k<<<tiles4k, 256, smem4k>>>(dx, val4k, idx4k, st4k, ctr4k, ctr4k + 1);
    CK(cudaGetLastError());
    select_lookback_8k<<<tiles8k, 512, smem8k>>>(dx, val8k, idx8k, st8k, ctr8k, ctr8k + 1);
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    // Mismatches (count, then every output slot) of each kernel against the reference: 0 and 0 expected
    std::vector<float> got, want(2, 0.f);
    const float* vals[2] = {val4k, val8k};
    const int* idxs[2] = {idx4k, idx8k};
    const unsigned* ctrs[2] = {ctr4k, ctr8k};
    for (int q = 0; q < 2; ++q) {
        std::vector<unsigned> c = hcopy(ctrs[q], 2);
        std::vector<float> gv = hcopy(vals[q], k);
        std::vector<int> gi = hcopy(idxs[q], k);
        double bad = c[1] == k ? 0 : 1;
        for (size_t i = 0; i < k; ++i) bad += (gi[i] != ridx[i]) || (gv[i] != rval[i]);
        got.push_back((float)bad);
    }
    printf("kept %zu of %d\n", k, N);
    return verdict("104-healthy-select-lookback-coo", got, want, 0.0);
}
