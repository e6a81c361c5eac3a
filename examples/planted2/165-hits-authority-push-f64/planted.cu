// 165-hits-authority-push-f64. Planted: atomic contention. One weighted-HITS authority step on a 2M-page web crawl
// (24M links, weights from anchor text), pushed along the links in the order they are stored (by source page):
// each thread loads a link's source, target and weight and the source's hub score (four loads) and adds
// w * hub into the target's FP64 authority with atomicAdd. The targets are moderately skewed: 30% of the links
// point into 256 popular pages (portals, wikis) whose popularity falls as 1/(rank+3), the rest spread uniformly
// over all 2M pages: the most linked page takes about 2% of all additions, the 256 together about 30%. The 16 MB
// authority vector stays in L2, and the slices that hold the popular pages apply their FP64 additions one after
// another while the link stream (12 bytes a link) waits: the kernel runs far below DRAM bandwidth.
// Fixed twin: the same links stored by target (the transpose, a CSC kept with the graph); a warp takes 512
// consecutive links, sums runs of equal targets with a segmented warp scan and adds each run once (a run that
// crosses rounds is carried in registers): about one atomic per target per warp, a popular page ~900 in all.
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

#define NPAGE (1 << 21)       // pages (2,097,152)
#define NWARM 256             // popular pages
#define SEG_ROUNDS 16         // twin: 16 rounds of 32 links a warp

extern "C" __global__ void hits_auth_push(const int* __restrict__ src, const int* __restrict__ dst,
                                          const float* __restrict__ w, const double* __restrict__ hub,
                                          double* auth, int m) {
    int e = blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= m) return;
    int u = src[e], v = dst[e];
    double c = (double)w[e] * hub[u];
    atomicAdd(&auth[v], c);  // PLANTED
}

// Links sorted by target (csc order): keys ascend along the lanes and from round to round.
extern "C" __global__ void hits_auth_csc_segreduce(const int* __restrict__ csrc, const int* __restrict__ cdst,
                                                   const float* __restrict__ cw, const double* __restrict__ hub,
                                                   double* auth, int m) {
    const unsigned FULL = 0xffffffffu;
    const int NONE = 0x7fffffff;                   // past the end: sorts last, never written
    int lane = threadIdx.x & 31;
    int warp = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    int base = warp * (32 * SEG_ROUNDS);
    if (base >= m) return;                         // warp-uniform
    int ckey = -1;                                 // the run left open by the previous round
    double carry = 0.0;
    for (int r = 0; r < SEG_ROUNDS; ++r) {
        int e = base + r * 32 + lane;
        int key = NONE;
        double val = 0.0;
        if (e < m) { key = cdst[e]; val = (double)cw[e] * hub[csrc[e]]; }
        if (lane == 0) {                           // the open run goes on in lane 0, or it is complete
            if (key == ckey) val += carry;
            else if (ckey >= 0 && ckey != NONE) atomicAdd(&auth[ckey], carry);
        }
        for (int d = 1; d < 32; d <<= 1) {         // inclusive scan within runs of equal keys
            double o = __shfl_up_sync(FULL, val, d);
            int ko = __shfl_up_sync(FULL, key, d);
            if (lane >= d && ko == key) val += o;
        }
        int knext = __shfl_down_sync(FULL, key, 1);
        if (lane < 31 && knext != key) atomicAdd(&auth[key], val);   // a run ends inside the round
        carry = __shfl_sync(FULL, val, 31);
        ckey = __shfl_sync(FULL, key, 31);
    }
    if (lane == 0 && ckey >= 0 && ckey != NONE) atomicAdd(&auth[ckey], carry);
}

int main() {
    const int N = NPAGE;
    // out-degrees 4..19 (mean 11.5): about 24.1M links, stored by source
    std::vector<int> deg(N);
    long long mm = 0;
    for (int u = 0; u < N; ++u) { deg[u] = 4 + (int)(urand() >> 28); mm += deg[u]; }
    const int m = (int)mm;
    double cdf[NWARM], s = 0;
    for (int k = 0; k < NWARM; ++k) { s += 1.0 / (k + 3); cdf[k] = s; }
    for (int k = 0; k < NWARM; ++k) cdf[k] /= s;
    int warm[NWARM];                               // scattered over the id space (odd multiplier: distinct)
    for (int k = 0; k < NWARM; ++k) warm[k] = (int)(((unsigned)k * 2654435761u + 0x9e3779b9u) & (N - 1));
    std::vector<int> hsrc(m), hdst(m);
    std::vector<float> hw(m);
    for (int u = 0, e = 0; u < N; ++u)
        for (int j = 0; j < deg[u]; ++j, ++e) {
            hsrc[e] = u;
            if (frand() < 0.30f) {
                double r = frand();
                int k = (int)(std::upper_bound(cdf, cdf + NWARM, r) - cdf);
                hdst[e] = warm[k < NWARM ? k : NWARM - 1];
            } else {
                hdst[e] = (int)(urand() >> 11);
            }
            hw[e] = 0.25f + frand();
        }
    std::vector<double> hhub(N);
    for (int u = 0; u < N; ++u) hhub[u] = 0.5 + frand();
    // the transpose: counting sort by target (stable)
    std::vector<int> start(N + 1, 0);
    for (int e = 0; e < m; ++e) start[hdst[e] + 1]++;
    for (int v = 0; v < N; ++v) start[v + 1] += start[v];
    std::vector<int> csrc(m), cdst(m);
    std::vector<float> cw(m);
    for (int e = 0; e < m; ++e) { int p = start[hdst[e]]++; csrc[p] = hsrc[e]; cdst[p] = hdst[e]; cw[p] = hw[e]; }
    std::vector<double> ref(N, 0.0);
    for (int e = 0; e < m; ++e) ref[hdst[e]] += (double)hw[e] * hhub[hsrc[e]];

    int* d_src = dcopy(hsrc); int* d_dst = dcopy(hdst); float* d_w = dcopy(hw);
    int* d_csrc = dcopy(csrc); int* d_cdst = dcopy(cdst); float* d_cw = dcopy(cw);
    double* d_hub = dcopy(hhub);
    double* d_auth = dnew<double>(N);
    double* d_auth2 = dnew<double>(N);
    LAUNCH(hits_auth_push, (m + 255) / 256, 256, d_src, d_dst, d_w, d_hub, d_auth, m);
    int warps = (m + 32 * SEG_ROUNDS - 1) / (32 * SEG_ROUNDS);
    LAUNCH(hits_auth_csc_segreduce, (warps + 7) / 8, 256, d_csrc, d_cdst, d_cw, d_hub, d_auth2, m);
    CK(cudaDeviceSynchronize());
    std::vector<double> a = hcopy(d_auth, N), b = hcopy(d_auth2, N);
    std::vector<float> fa(N), fb(N);
    for (int v = 0; v < N; ++v) { fa[v] = (float)a[v]; fb[v] = (float)b[v]; }
    double worst = 0;                              // the twin against the host sums
    for (int v = 0; v < N; ++v) worst = std::max(worst, fabs(b[v] - ref[v]) / (fabs(ref[v]) + 1e-2));
    if (!(worst <= 1e-9)) { printf("MISMATCH 165-hits-authority-push-f64 twin vs host: %.3g\n", worst); return 1; }
    return verdict("165-hits-authority-push-f64", fa, fb, 1e-5);
}
