// 151-sssp-relax-hub-destinations. Planted: atomic contention. One edge-parallel Bellman-Ford round of SSSP on a
// 1M-vertex graph with power-law in-degree: each vertex has 12-20 out-edges whose heads are drawn Zipf(1) over
// vertex ranks (ranks scattered over the ids by a hash), 16.8M edges in a source-ordered COO list. One thread an
// edge loads src, dst and weight, gathers dist[src] (near-coalesced, sources are sorted) and relaxes the head with
// atomicMin(&next[dst], dist[src] + w). The top hub is the head of ~69% of the vertices' lists (630K atomics on one
// word from the 7/8 of sources already reached), the next ones of 44% and 32%: L2 applies them one after another.
// Fixed twin: the same round over the same edges ordered by destination (built once; the graph is static across
// rounds): a warp takes 32 consecutive edges, min-reduces equal destinations with shuffles, one atomicMin a run.
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

constexpr int NV = 1 << 20;
constexpr unsigned INF = 0xffffffffu;

// Push: next[dst[e]] = min(next[dst[e]], dist[src[e]] + w[e]) for every edge, one thread an edge.
extern "C" __global__ void sssp_relax_push(const unsigned* __restrict__ src, const unsigned* __restrict__ dst,
                                           const unsigned* __restrict__ wt, const unsigned* __restrict__ dist,
                                           unsigned* next, int E) {
    int e = blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= E) return;
    unsigned v = dst[e], du = dist[src[e]];
    if (du != INF) atomicMin(&next[v], du + wt[e]);  // PLANTED
}

// Same round over destination-ordered edges: a segmented min over each warp's runs of equal dst, one atomic a run.
extern "C" __global__ void sssp_relax_dst_segmin(const unsigned* __restrict__ src, const unsigned* __restrict__ dst,
                                                 const unsigned* __restrict__ wt, const unsigned* __restrict__ dist,
                                                 unsigned* next, int E) {
    int e = blockIdx.x * blockDim.x + threadIdx.x, lane = threadIdx.x & 31;
    unsigned v = INF, cand = INF;  // lanes past the end: largest key (keeps the warp sorted), no candidate
    if (e < E) {
        v = dst[e];
        unsigned du = dist[src[e]];
        if (du != INF) cand = du + wt[e];
    }
    for (int o = 1; o < 32; o <<= 1) {  // suffix min within runs of equal v (runs are contiguous: v is sorted)
        unsigned ov = __shfl_down_sync(0xffffffffu, v, o), oc = __shfl_down_sync(0xffffffffu, cand, o);
        if (lane + o < 32 && ov == v) cand = min(cand, oc);
    }
    unsigned pv = __shfl_up_sync(0xffffffffu, v, 1);
    if (e < E && (lane == 0 || pv != v) && cand != INF) atomicMin(&next[v], cand);
}

int main() {
    // Zipf(1) over in-degree ranks; rank r is vertex (r * 2654435761 + 40503) mod 2^20 (a bijection).
    std::vector<double> cdf(NV);
    double s = 0;
    for (int r = 0; r < NV; ++r) { s += 1.0 / (r + 1); cdf[r] = s; }
    for (double& c : cdf) c /= s;
    std::vector<unsigned> src, dst, wt, dist(NV);
    src.reserve((size_t)NV * 20); dst.reserve((size_t)NV * 20); wt.reserve((size_t)NV * 20);
    unsigned buf[20];
    for (unsigned u = 0; u < (unsigned)NV; ++u) {
        int len = 12 + (int)((urand() >> 12) % 9), got = 0;  // 12..20 distinct heads, no self-loop
        while (got < len) {
            double x = (urand() >> 8) * (1.0 / 16777216.0) + (urand() >> 8) * (1.0 / 281474976710656.0);
            unsigned r = (unsigned)std::min<size_t>(std::lower_bound(cdf.begin(), cdf.end(), x) - cdf.begin(), NV - 1);
            unsigned v = (r * 2654435761u + 40503u) & (NV - 1);
            bool dup = v == u;
            for (int t = 0; t < got; ++t) dup |= buf[t] == v;
            if (!dup) buf[got++] = v;
        }
        for (int t = 0; t < len; ++t) { src.push_back(u); dst.push_back(buf[t]); wt.push_back(1 + (urand() >> 24)); }
        dist[u] = (urand() >> 29) == 0 ? INF : (urand() >> 12);  // a round in progress: 1/8 unreached
    }
    int E = (int)src.size();
    // Destination order (counting sort, stable): built once for a static graph.
    std::vector<int> start(NV + 1, 0);
    for (int e = 0; e < E; ++e) start[dst[e] + 1]++;
    for (int v = 0; v < NV; ++v) start[v + 1] += start[v];
    std::vector<unsigned> src_d(E), dst_d(E), wt_d(E);
    for (int e = 0; e < E; ++e) { int k = start[dst[e]]++; src_d[k] = src[e]; dst_d[k] = dst[e]; wt_d[k] = wt[e]; }

    unsigned *d_src = dcopy(src), *d_dst = dcopy(dst), *d_wt = dcopy(wt);
    unsigned *d_src_d = dcopy(src_d), *d_dst_d = dcopy(dst_d), *d_wt_d = dcopy(wt_d);
    unsigned *d_dist = dcopy(dist), *d_nbad = dcopy(dist), *d_nfix = dcopy(dist);  // next starts as dist

    LAUNCH(sssp_relax_push, (E + 255) / 256, 256, d_src, d_dst, d_wt, d_dist, d_nbad, E);
    CK(cudaDeviceSynchronize());
    LAUNCH(sssp_relax_dst_segmin, (E + 255) / 256, 256, d_src_d, d_dst_d, d_wt_d, d_dist, d_nfix, E);
    CK(cudaDeviceSynchronize());

    std::vector<unsigned> nbad = hcopy(d_nbad, NV), nfix = hcopy(d_nfix, NV), nref = dist;
    for (int e = 0; e < E; ++e)
        if (dist[src[e]] != INF) nref[dst[e]] = std::min(nref[dst[e]], dist[src[e]] + wt[e]);
    int wrong = 0, improved = 0;
    for (int v = 0; v < NV; ++v) { wrong += nfix[v] != nref[v] || nbad[v] != nref[v]; improved += nref[v] != dist[v]; }
    printf("edges=%d improved=%d wrong=%d\n", E, improved, wrong);
    std::vector<float> a(nbad.begin(), nbad.end()), b(nfix.begin(), nfix.end());  // values < 2^24 or INF: exact
    int rc = verdict("151-sssp-relax-hub-destinations", a, b, 0.0);
    if (wrong) { printf("MISMATCH vs host reference: %d vertices differ\n", wrong); rc = 1; }
    CK(cudaFree(d_src)); CK(cudaFree(d_dst)); CK(cudaFree(d_wt)); CK(cudaFree(d_src_d)); CK(cudaFree(d_dst_d));
    CK(cudaFree(d_wt_d)); CK(cudaFree(d_dist)); CK(cudaFree(d_nbad)); CK(cudaFree(d_nfix));
    return rc;
}
