// 82-octree-leaf-lookup. Planted: dependent loads. Sampling a field stored on an adaptive pointer octree (9 MB of
// nodes, 8 child slots of 4 bytes each, built from 1M sources in 16K tight clusters) at 24M query points sorted by
// Morton key: each thread walks from the root to its leaf, one child slot a level, the next address the value just
// loaded: 17 levels on average, the top 4 or 5 hitting L1, the rest one L2 round trip each. A warp's lanes share
// their path (1.1 nodes, one sector each, a level), so the L2, DRAM and the schedulers stay far from busy.
// Fixed twin: each thread walks the paths of 4 queries (a quarter of the key range apart) in lockstep: 4 loads
// in flight a level instead of 1, the same leaf for every query.
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
typedef unsigned long long u64;
#define NC 16384             // clusters
#define PER 64               // sources a cluster
#define LEAF 8               // sources a leaf at most
#define SIGMA 4e-6f          // cluster radius (the unit cube's side is 1)
#define NQ (24u << 20)       // query points
#define WAYS 4
#define THREADS 256

// child[s + octant]: the slot of an octant of the node whose 8 slots start at s (the root's at 0); a slot holds
// the next node's first slot (> 0), a leaf ~l (< 0) or 0 (an empty octant).
extern "C" __global__ void locate_one(const u64* __restrict__ keys, const int* __restrict__ child,
                                      const float* __restrict__ leafval, float* __restrict__ out) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    u64 k = keys[i];
    int c = 0, sh = 60;
    do { c = child[c | (int)((k >> sh) & 7)]; sh -= 3; } while (c > 0);  // PLANTED
    out[i] = c < 0 ? leafval[~c] : 0.f;
}

extern "C" __global__ void locate_four(const u64* __restrict__ keys, const int* __restrict__ child,
                                       const float* __restrict__ leafval, float* __restrict__ out) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    u64 k[WAYS]; int c[WAYS];
#pragma unroll
    for (int j = 0; j < WAYS; ++j) k[j] = keys[i + j * (NQ / WAYS)];
#pragma unroll
    for (int j = 0; j < WAYS; ++j) c[j] = child[(int)(k[j] >> 60)];
    for (int sh = 57; (c[0] > 0) | (c[1] > 0) | (c[2] > 0) | (c[3] > 0); sh -= 3) {
#pragma unroll
        for (int j = 0; j < WAYS; ++j)
            if (c[j] > 0) c[j] = child[c[j] | (int)((k[j] >> sh) & 7)];
    }
#pragma unroll
    for (int j = 0; j < WAYS; ++j) out[i + j * (NQ / WAYS)] = c[j] < 0 ? leafval[~c[j]] : 0.f;
}

static u64 spread(u64 v) {
    v &= 0x1fffff; v = (v | v << 32) & 0x1f00000000ffffull; v = (v | v << 16) & 0x1f0000ff0000ffull;
    v = (v | v << 8) & 0x100f00f00f00f00full; v = (v | v << 4) & 0x10c30c30c30c30c3ull;
    return (v | v << 2) & 0x1249249249249249ull;
}
static u64 morton(float x, float y, float z) {  // 21 bits an axis, x highest
    auto q = [](float f) { int v = (int)(f * 2097152.f); return (u64)std::min(std::max(v, 0), 2097151); };
    return spread(q(x)) << 2 | spread(q(y)) << 1 | spread(q(z));
}
static float gauss() { return (frand() + frand() + frand() + frand() - 2.f) * 1.7320508f; }  // unit variance
static void radix_sort(std::vector<u64>& a) {
    std::vector<u64> b(a.size());
    for (int pass = 0; pass < 4; ++pass) {
        std::vector<size_t> cnt(65537, 0);
        for (u64 v : a) ++cnt[((v >> (16 * pass)) & 0xffff) + 1];
        for (int d = 0; d < 65536; ++d) cnt[d + 1] += cnt[d];
        for (u64 v : a) b[cnt[(v >> (16 * pass)) & 0xffff]++] = v;
        a.swap(b);
    }
}
// Top-down build over sorted source keys: a node of level L splits on the key's bits 60-3L..62-3L.
static std::vector<int> child;
static std::vector<float> leafval;
static int build(const std::vector<u64>& s, size_t a, size_t b, int level) {
    if (b - a <= LEAF || level == 21) { leafval.push_back(log2f((float)(b - a)) + 3.f * level); return ~(int)(leafval.size() - 1); }
    int id = (int)(child.size() / 8), sh = 60 - 3 * level;
    child.resize(child.size() + 8);
    for (size_t o = 0, k = a; o < 8; ++o) {
        size_t e = k;
        while (e < b && ((s[e] >> sh) & 7) == o) ++e;
        int c = e > k ? build(s, k, e, level + 1) : 0;
        child[id * 8 + o] = c; k = e;
    }
    return id;
}

int main() {
    std::vector<float> cen(3 * NC);
    for (auto& v : cen) v = 0.05f + 0.9f * frand();
    std::vector<u64> src;
    for (int c = 0; c < NC; ++c)
        for (int k = 0; k < PER; ++k)
            src.push_back(morton(cen[3 * c] + SIGMA * gauss(), cen[3 * c + 1] + SIGMA * gauss(), cen[3 * c + 2] + SIGMA * gauss()));
    std::sort(src.begin(), src.end());
    build(src, 0, src.size(), 0);
    const int inner = (int)(child.size() / 8);  // nodes stored in a random order (as a parallel builder leaves them), root first
    std::vector<int> perm(inner);
    for (int n = 0; n < inner; ++n) perm[n] = n;
    for (int n = inner - 1; n > 1; --n) { int j = 1 + (int)(urand() % n); std::swap(perm[n], perm[j]); }
    std::vector<int> hc(child.size());
    for (int n = 0; n < inner; ++n)
        for (int o = 0; o < 8; ++o) { int c = child[8 * n + o]; hc[8 * perm[n] + o] = c > 0 ? 8 * perm[c] : c; }
    std::vector<u64> q(NQ);
    for (auto& v : q) {
        int c = (int)(urand() % NC);
        v = morton(cen[3 * c] + SIGMA * gauss(), cen[3 * c + 1] + SIGMA * gauss(), cen[3 * c + 2] + SIGMA * gauss());
    }
    radix_sort(q);
    u64* dq = dcopy(q);
    int* dc = dcopy(hc);
    float *dl = dcopy(leafval), *dbad = dnew<float>(NQ), *dfix = dnew<float>(NQ);
    LAUNCH(locate_one, NQ / THREADS, THREADS, dq, dc, dl, dbad);
    LAUNCH(locate_four, NQ / WAYS / THREADS, THREADS, dq, dc, dl, dfix);
    CK(cudaDeviceSynchronize());
    return verdict("82-octree-leaf-lookup", hcopy(dbad, NQ), hcopy(dfix, NQ), 0.0);
}
