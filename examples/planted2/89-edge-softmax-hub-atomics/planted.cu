// 89-edge-softmax-hub-atomics. Planted: atomic contention. The denominator of a GAT edge softmax on a power-law
// graph (1M nodes, 33.5M edges in COO order sorted by destination, in-degrees Zipf-like with exponent 0.8, the
// largest hub taking 444K edges): one thread per edge writes exp(score) and atomicAdds it into denom[dst].
// Consecutive edges share their destination, so the lanes of a warp, and every warp inside a hub's run, hit
// one address: 33.5M reductions queue per address in L2, a hub's whole run on a single slice.
// Fixed twin: the same per-edge work, then a segmented warp reduction over the runs of equal destination (a
// ballot of run heads, five shuffles): one atomicAdd per run and warp, 32x fewer on a hub.
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
#define NODES (1 << 20)
#define EDGES (1 << 25)
#define THREADS 256
#define ZIPF 0.8

extern "C" __global__ void edge_softmax_denom_atomic(const int* __restrict__ dst, const float* __restrict__ score,
                                                     float* __restrict__ ex, float* __restrict__ denom) {
    unsigned e = blockIdx.x * blockDim.x + threadIdx.x;
    float v = expf(score[e]);
    ex[e] = v;
    atomicAdd(&denom[dst[e]], v);  // PLANTED
}

extern "C" __global__ void edge_softmax_denom_segmented(const int* __restrict__ dst, const float* __restrict__ score,
                                                        float* __restrict__ ex, float* __restrict__ denom) {
    unsigned e = blockIdx.x * blockDim.x + threadIdx.x, lane = threadIdx.x & 31;
    int d = dst[e];
    float v = expf(score[e]);
    ex[e] = v;
    // runs of equal destination are contiguous (sorted COO); a lane heads a run when its left neighbour differs
    int left = __shfl_up_sync(0xffffffffu, d, 1);
    unsigned heads = __ballot_sync(0xffffffffu, lane == 0 || d != left);
    unsigned later = heads & ~((2u << lane) - 1u);      // run heads after this lane
    unsigned end = later ? __ffs(later) - 1 : 32;        // first lane past this lane's run
#pragma unroll
    for (unsigned off = 1; off < 32; off <<= 1) {        // suffix sums within the run
        float o = __shfl_down_sync(0xffffffffu, v, off);
        if (lane + off < end) v += o;
    }
    if ((heads >> lane) & 1u) atomicAdd(&denom[d], v);  // the head holds its run's sum
}

int main() {
    // in-degree by popularity rank, Zipf-like; ranks are given to node ids by a random permutation
    std::vector<double> w(NODES);
    double wsum = 0;
    for (int r = 0; r < NODES; ++r) { w[r] = pow(r + 1.0, -ZIPF); wsum += w[r]; }
    std::vector<int> perm(NODES), indeg(NODES, 0);
    for (int i = 0; i < NODES; ++i) perm[i] = i;
    for (int i = NODES - 1; i > 0; --i) { int j = urand() % (i + 1); int t = perm[i]; perm[i] = perm[j]; perm[j] = t; }
    long long total = 0;
    for (int r = 0; r < NODES; ++r) { int k = (int)(EDGES * w[r] / wsum); if (k < 1) k = 1; indeg[perm[r]] = k; total += k; }
    if (total > EDGES) { fprintf(stderr, "degree sum %lld over %d\n", total, EDGES); return 1; }
    for (long long k = total; k < EDGES; ++k) indeg[urand() % NODES] += 1;
    std::vector<int> hd(EDGES);
    std::vector<float> hs(EDGES);
    size_t e = 0;
    for (int v = 0; v < NODES; ++v) for (int k = 0; k < indeg[v]; ++k) hd[e++] = v;  // sorted by destination
    for (auto& s : hs) s = -4.0f * frand();                                             // max-shifted scores
    int* dd = dcopy(hd);
    float* ds = dcopy(hs);
    float *exb = dnew<float>(EDGES), *exf = dnew<float>(EDGES);
    float *denb = dnew<float>(NODES), *denf = dnew<float>(NODES);
    LAUNCH(edge_softmax_denom_atomic, EDGES / THREADS, THREADS, dd, ds, exb, denb);
    LAUNCH(edge_softmax_denom_segmented, EDGES / THREADS, THREADS, dd, ds, exf, denf);
    CK(cudaDeviceSynchronize());
    return verdict("89-edge-softmax-hub-atomics", hcopy(denb, NODES), hcopy(denf, NODES), 1e-3);
}
