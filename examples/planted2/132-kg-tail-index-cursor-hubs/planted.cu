// 132-kg-tail-index-cursor-hubs. Planted: atomic contention on many warm destinations. Building the by-tail
// index of a knowledge graph (16M triples, 1M entities, stored by head): the offsets are known, and each triple
// claims its slot with a 64-bit atomicAdd on its tail's cursor and stores its head there. Tails follow a flat-headed
// Zipf-Mandelbrot law (the "human", "male", "USA", "English" entities): the top tail takes 4.3% of the triples
// (718K claims on one cursor), the top 10 23%, the top 100 51%, spread over L2 slices; each claim waits for its
// result, so every warp waits on the hub queues.
// Fixed twin: each block takes 2048 triples, groups equal tails in a shared-memory hash (rank within the group
// from a shared atomic) and claims one range per distinct tail with one global atomic, then stores.
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
#include <algorithm>
#include <functional>
#define NENT (1 << 20)          // entities
#define NTRIP (1 << 24)         // triples
#define TPB 512                 // twin: threads a block
#define PER 4                   // twin: triples a thread per tile
#define TILE (TPB * PER)
#define TSLOTS 4096             // twin: hash slots (a tile has about 960 distinct tails)
#define EMPTY_KEY (-1)

extern "C" __global__ void tail_index_scatter(const int* __restrict__ head, const int* __restrict__ tail,
                                              unsigned long long* __restrict__ cursor, int* __restrict__ by_tail,
                                              int ntrip) {
    for (int e = blockIdx.x * blockDim.x + threadIdx.x; e < ntrip; e += gridDim.x * blockDim.x) {
        int t = tail[e];
        unsigned long long p = atomicAdd(&cursor[t], 1ull);  // PLANTED
        by_tail[p] = head[e];
    }
}

extern "C" __global__ void __launch_bounds__(TPB) tail_index_scatter_grouped(
        const int* __restrict__ head, const int* __restrict__ tail, unsigned long long* __restrict__ cursor,
        int* __restrict__ by_tail, int ntrip) {
    extern __shared__ unsigned long long base[];          // TSLOTS claimed offsets
    int* keys = (int*)(base + TSLOTS);                      // TSLOTS tails (EMPTY_KEY where free)
    unsigned* cnt = (unsigned*)(keys + TSLOTS);             // TSLOTS triples of that tail in the tile
    for (int s = threadIdx.x; s < TSLOTS; s += TPB) { keys[s] = EMPTY_KEY; cnt[s] = 0; }
    __syncthreads();
    for (int t0 = blockIdx.x * TILE; t0 < ntrip; t0 += gridDim.x * TILE) {
        int hd[PER], tl[PER], slot[PER];
        unsigned rk[PER];
#pragma unroll
        for (int j = 0; j < PER; ++j) {                     // loads first, all in flight
            int e = t0 + j * TPB + threadIdx.x;
            tl[j] = e < ntrip ? tail[e] : EMPTY_KEY;
            hd[j] = e < ntrip ? head[e] : 0;
        }
#pragma unroll
        for (int j = 0; j < PER; ++j) {                     // group equal tails: slot and rank in the group
            slot[j] = -1;
            if (tl[j] != EMPTY_KEY) {
                unsigned s = ((unsigned)tl[j] * 2654435761u) >> 20;
                int old;
                while ((old = atomicCAS(&keys[s], EMPTY_KEY, tl[j])) != EMPTY_KEY && old != tl[j]) s = (s + 1) & (TSLOTS - 1);
                slot[j] = s;
                rk[j] = atomicAdd(&cnt[s], 1u);
            }
        }
        __syncthreads();
        unsigned long long got[TSLOTS / TPB];
#pragma unroll
        for (int i = 0; i < TSLOTS / TPB; ++i) {            // one claim per distinct tail of the tile
            int k = keys[i * TPB + threadIdx.x];
            got[i] = k != EMPTY_KEY ? atomicAdd(&cursor[k], (unsigned long long)cnt[i * TPB + threadIdx.x]) : 0ull;
        }
#pragma unroll
        for (int i = 0; i < TSLOTS / TPB; ++i) base[i * TPB + threadIdx.x] = got[i];
        __syncthreads();
#pragma unroll
        for (int j = 0; j < PER; ++j)
            if (slot[j] >= 0) by_tail[base[slot[j]] + rk[j]] = hd[j];
        __syncthreads();
        for (int s = threadIdx.x; s < TSLOTS; s += TPB) { keys[s] = EMPTY_KEY; cnt[s] = 0; }
        __syncthreads();
    }
}

// uniform in [0, n) from the generator's high bits (its low bits have short periods)
static unsigned below(unsigned n) { return (unsigned)(((unsigned long long)urand() * n) >> 32); }

int main() {
    // tail popularity: Zipf-Mandelbrot (rank + 4)^-1.2 over entities, ranks scattered by a random permutation
    std::vector<double> cdf(NENT);
    double tot = 0;
    for (int r = 0; r < NENT; ++r) { tot += pow(r + 5.0, -1.2); cdf[r] = tot; }
    for (auto& c : cdf) c /= tot;
    std::vector<int> perm(NENT);
    for (int i = 0; i < NENT; ++i) perm[i] = i;
    for (int i = NENT - 1; i > 0; --i) std::swap(perm[i], perm[below(i + 1)]);
    // triples stored by head (as dumped); heads uniform
    std::vector<int> hcount(NENT, 0), hhead(NTRIP), htail(NTRIP), indeg(NENT, 0);
    for (int e = 0; e < NTRIP; ++e) hcount[below(NENT)]++;
    for (int h = 0, e = 0; h < NENT; ++h)
        for (int k = 0; k < hcount[h]; ++k, ++e) {
            double x = (urand() >> 8) * (1.0 / 16777216.0) + (urand() >> 8) * (1.0 / 16777216.0 / 16777216.0);
            int r = std::min((int)(std::upper_bound(cdf.begin(), cdf.end(), x) - cdf.begin()), NENT - 1);
            hhead[e] = h; htail[e] = perm[r]; indeg[perm[r]]++;
        }
    std::vector<unsigned long long> offs(NENT + 1, 0);
    for (int v = 0; v < NENT; ++v) offs[v + 1] = offs[v] + indeg[v];
    std::vector<int> top(indeg);
    std::partial_sort(top.begin(), top.begin() + 100, top.end(), std::greater<int>());
    long long t10 = 0, t100 = 0;
    for (int i = 0; i < 100; ++i) { t100 += top[i]; if (i < 10) t10 += top[i]; }
    printf("top tail %d triples (%.2f%%), top 10 %.1f%%, top 100 %.1f%%\n", top[0], 100.0 * top[0] / NTRIP,
           100.0 * t10 / NTRIP, 100.0 * t100 / NTRIP);

    int *dhead = dcopy(hhead), *dtail = dcopy(htail);
    std::vector<unsigned long long> start(offs.begin(), offs.end() - 1);
    unsigned long long *dcur_bad = dcopy(start), *dcur_fix = dcopy(start);
    int *dbad = dnew<int>(NTRIP), *dfix = dnew<int>(NTRIP);
    const int smem = TSLOTS * (sizeof(unsigned long long) + sizeof(int) + sizeof(unsigned));
    CK(cudaFuncSetAttribute(tail_index_scatter_grouped, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    LAUNCH(tail_index_scatter, 132 * 8, 256, dhead, dtail, dcur_bad, dbad, NTRIP);
    tail_index_scatter_grouped<<<132 * 3, TPB, smem>>>(dhead, dtail, dcur_fix, dfix, NTRIP);
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    // the order inside a tail's range is the atomics' order: compare each range sorted, and the final cursors
    std::vector<int> b = hcopy(dbad, NTRIP), f = hcopy(dfix, NTRIP);
    std::vector<unsigned long long> cb = hcopy(dcur_bad, NENT), cf = hcopy(dcur_fix, NENT);
    for (int v = 0; v < NENT; ++v) {
        std::sort(b.begin() + offs[v], b.begin() + offs[v + 1]);
        std::sort(f.begin() + offs[v], f.begin() + offs[v + 1]);
    }
    std::vector<float> bf(b.begin(), b.end()), ff(f.begin(), f.end());
    for (int v = 0; v < NENT; ++v) { bf.push_back((float)cb[v]); ff.push_back((float)cf[v]); }
    return verdict("132-kg-tail-index-cursor-hubs", bf, ff, 0.0);
}
