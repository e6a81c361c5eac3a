// 142-kcore-peel-gateway-hubs. Planted: atomic contention on hub hosts' degree counters (value returned).
// One peeling round of a k-core decomposition (k = 8) on a host communication graph stored as a row-sorted
// COO edge list (both directions of 12M flows): a thread per entry loads its row host, tests it in the peel
// bitmap, loads the column host and decrements that host's degree with atomicSub, using the old value to
// flag hosts that fall below k. Server popularity is a power law (gateways, DNS, proxies): of the 7.4M
// decrements the top host takes 1.18M, the next ones 600K, 390K, 283K..., each serialized at its L2 slice.
// Fixed twin: the same round pulled by the decremented host over the same list (the graph is symmetric):
// each warp sums its contiguous span's runs of equal rows by shuffles and subtracts each run's count once.
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
#include <climits>
#define HOSTS (1 << 21)
#define FLOWS 12000000
#define KCORE 8
#define FULL 0xffffffffu

extern "C" __global__ void kcore_peel_push(const int* __restrict__ row, const int* __restrict__ col,
                                           const unsigned* __restrict__ peel, int* __restrict__ deg,
                                           int* __restrict__ next, int nnz) {
    const int e = blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= nnz) return;
    const int u = row[e];
    if ((peel[u >> 5] >> (u & 31)) & 1u) {          // u leaves this round: each neighbour loses one degree
        const int v = col[e];
        const int old = atomicSub(&deg[v], 1);  // PLANTED
        if (old == KCORE) next[v] = 1;              // v just fell below k: it leaves next round
    }
}

__device__ __forceinline__ void settle(int* deg, int* next, int v, int cnt) {
    if (cnt > 0) {
        const int old = atomicSub(&deg[v], cnt);
        if (old >= KCORE && old - cnt < KCORE) next[v] = 1;
    }
}

// Each warp owns a contiguous span of 32-entry tiles. Entry (v, u) counts 1 when u is peeled; rows are
// sorted, so the counts of one v are contiguous: a segmented warp sum gives each run's count, runs that end
// inside a tile are settled there, and the run still open at the tile's end is carried to the next tile.
extern "C" __global__ void __launch_bounds__(256) kcore_peel_pull_runs(
        const int* __restrict__ row, const int* __restrict__ col, const unsigned* __restrict__ peel,
        int* __restrict__ deg, int* __restrict__ next, int nnz) {
    const int lane = threadIdx.x & 31;
    const int warp = (int)((blockIdx.x * blockDim.x + threadIdx.x) >> 5);
    const int warps = (int)((gridDim.x * blockDim.x) >> 5);
    const int tiles = (nnz + 31) >> 5;
    const int per = (tiles + warps - 1) / warps;
    const int t0 = min(warp * per, tiles), t1 = min(t0 + per, tiles);
    int run_v = -1, run_c = 0;                      // open run carried between tiles (equal in all lanes)
    int nv = INT_MAX, nu = 0;                       // next tile's entry, loaded one tile ahead
    if (t0 < t1 && t0 * 32 + lane < nnz) { nv = row[t0 * 32 + lane]; nu = col[t0 * 32 + lane]; }
    for (int t = t0; t < t1; ++t) {
        const int v = nv, u = nu;                   // v = INT_MAX past the end: sorts last, counts 0
        nv = INT_MAX; nu = 0;
        if (t + 1 < t1 && (t + 1) * 32 + lane < nnz) { nv = row[(t + 1) * 32 + lane]; nu = col[(t + 1) * 32 + lane]; }
        int c = v != INT_MAX ? (int)((peel[u >> 5] >> (u & 31)) & 1u) : 0;
#pragma unroll
        for (int d = 1; d < 32; d <<= 1) {          // inclusive sum within runs of equal v
            const int ov = __shfl_up_sync(FULL, v, d);
            const int oc = __shfl_up_sync(FULL, c, d);
            if (lane >= d && ov == v) c += oc;
        }
        const int v0 = __shfl_sync(FULL, v, 0);
        const int vn = __shfl_down_sync(FULL, v, 1);
        if (v0 != run_v) { if (lane == 0) settle(deg, next, run_v, run_c); }   // carried run ended last tile
        else if (v == v0) c += run_c;                                           // first run continues it
        if (lane < 31 && vn != v) settle(deg, next, v, c);                      // runs ending in this tile
        run_v = __shfl_sync(FULL, v, 31);
        run_c = __shfl_sync(FULL, c, 31);
    }
    if (lane == 0) settle(deg, next, run_v, run_c);
}

int main() {
    // flows: one end uniform over hosts, the other a server drawn from a power law (s = 1.25) over ranks,
    // ranks scattered over host ids by a multiplicative hash
    const double s = 1.25, p = 1.0 - s, span = pow(HOSTS + 1.0, p) - 1.0;
    std::vector<int> fa(FLOWS), fb(FLOWS), deg(HOSTS, 0);
    for (int f = 0; f < FLOWS; ++f) {
        fa[f] = (int)(urand() >> 11);                   // HOSTS = 2^21: the high bits
        const double x = pow(1.0 + frand() * span, 1.0 / p);
        const unsigned r = (unsigned)std::min((int)x - 1, HOSTS - 1);
        fb[f] = (int)((r * 2654435761u) & (HOSTS - 1));
        ++deg[fa[f]]; ++deg[fb[f]];
    }
    // symmetric COO sorted by row (counting sort; within a row, flow order)
    const int nnz = 2 * FLOWS;
    std::vector<int> ptr(HOSTS + 1, 0), hrow(nnz), hcol(nnz);
    for (int v = 0; v < HOSTS; ++v) ptr[v + 1] = ptr[v] + deg[v];
    for (int f = 0; f < FLOWS; ++f) {
        int k = ptr[fa[f]]++; hrow[k] = fa[f]; hcol[k] = fb[f];
        k = ptr[fb[f]]++; hrow[k] = fb[f]; hcol[k] = fa[f];
    }
    std::vector<unsigned> hpeel(HOSTS / 32, 0u);
    for (int v = 0; v < HOSTS; ++v) if (deg[v] < KCORE) hpeel[v >> 5] |= 1u << (v & 31);
    int *drow = dcopy(hrow), *dcol = dcopy(hcol);
    unsigned* dpeel = dcopy(hpeel);
    int *deg_bad = dcopy(deg), *deg_fix = dcopy(deg);
    int *next_bad = dnew<int>(HOSTS), *next_fix = dnew<int>(HOSTS);

    const int threads = 256;
    LAUNCH(kcore_peel_push, (nnz + threads - 1) / threads, threads, drow, dcol, dpeel, deg_bad, next_bad, nnz);
    int sms = 0, per_sm = 0;
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kcore_peel_pull_runs, threads, 0));
    LAUNCH(kcore_peel_pull_runs, sms * per_sm, threads, drow, dcol, dpeel, deg_fix, next_fix, nnz);
    CK(cudaDeviceSynchronize());
    // degrees left and next-round flags, exact
    std::vector<int> db = hcopy(deg_bad, HOSTS), df = hcopy(deg_fix, HOSTS);
    std::vector<int> nb = hcopy(next_bad, HOSTS), nf = hcopy(next_fix, HOSTS);
    std::vector<float> bad(2 * (size_t)HOSTS), fix(2 * (size_t)HOSTS);
    for (int v = 0; v < HOSTS; ++v) {
        bad[v] = (float)db[v]; fix[v] = (float)df[v];
        bad[HOSTS + v] = (float)nb[v]; fix[HOSTS + v] = (float)nf[v];
    }
    return verdict("142-kcore-peel-gateway-hubs", bad, fix, 0.0);
}
