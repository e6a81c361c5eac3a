// 123-tst-digest-lookup-warp. Planted: dependent loads, one ternary-search-tree walk in flight per warp.
// An object store maps 64-hex-digit content hashes (SHA-256 names) to object ids with a ternary search tree:
// 16-byte nodes {lo, eq, hi, digit} (a name's last node holds -2 - id in eq) in a 250 MB pool filled by
// concurrent inserts, so a path's nodes are far apart. A warp looks up one name, its digits staged in shared
// memory: ~15 steps through the hot top of the tree, then ~59 single-child steps that each miss to DRAM, every
// step waiting for the node that names the next one. All 32 lanes load the same node: one load in flight.
// Fixed twin: the same tree and the same loop with 8 lanes per name, 4 names per warp: 4 independent chains,
// 4 loads in flight per warp, and each step's 13 instructions serve 4 lookups instead of 1.
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
#define NKEYS 262144               // names in the tree
#define NQ 262144                  // lookups (1 in 16 absent)
#define KEYB 32                    // bytes per name: 64 hex digits, digit 2i = high nibble of byte i

// node: x = lo child, y = eq child, z = hi child (-1: none), w = digit; on a name's last digit y = -2 - object id
extern "C" __global__ void __launch_bounds__(256) tst_lookup_warp(const int4* __restrict__ tst, int root,
        const unsigned char* __restrict__ names, float* __restrict__ out) {
    __shared__ unsigned char digits[8][64];  // one name per warp, one digit a byte
    const int q = (blockIdx.x * blockDim.x + threadIdx.x) >> 5, lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    if (q >= NQ) return;
    const unsigned kb = names[(size_t)q * KEYB + lane];
    digits[w][2 * lane] = kb >> 4; digits[w][2 * lane + 1] = kb & 15;
    __syncwarp();
    const unsigned char* dig = digits[w];
    int n = root, d = 0;
    while (n >= 0) {
        const int4 nd = tst[n]; const int c = dig[d]; n = c < nd.w ? nd.x : c > nd.w ? nd.z : nd.y; d += c == nd.w;  // PLANTED
    }
    if (lane == 0) out[q] = n < -1 ? (float)(-2 - n) : -1.0f;
}

extern "C" __global__ void __launch_bounds__(256) tst_lookup_quad(const int4* __restrict__ tst, int root,
        const unsigned* __restrict__ names, float* __restrict__ out) {
    __shared__ unsigned char digits[32][64];  // four names per warp, eight lanes a name
    const int q = (blockIdx.x * blockDim.x + threadIdx.x) >> 3, sub = threadIdx.x & 7, g = threadIdx.x >> 3;
    if (q >= NQ) return;
    const unsigned kw = names[(size_t)q * (KEYB / 4) + sub];  // bytes 4*sub .. 4*sub+3
#pragma unroll
    for (int i = 0; i < 4; ++i) { const unsigned b = (kw >> (8 * i)) & 255; digits[g][8 * sub + 2 * i] = b >> 4; digits[g][8 * sub + 2 * i + 1] = b & 15; }
    __syncwarp();
    const unsigned char* dig = digits[g];
    int n = root, d = 0;
    while (n >= 0) {
        const int4 nd = tst[n]; const int c = dig[d]; n = c < nd.w ? nd.x : c > nd.w ? nd.z : nd.y; d += c == nd.w;
    }
    if (sub == 0) out[q] = n < -1 ? (float)(-2 - n) : -1.0f;
}

static inline size_t below(size_t n) {  // uniform in [0, n) from the LCG's high bits (its low bits cycle)
    const unsigned long long x = ((unsigned long long)urand() << 32) | urand();
    return (size_t)(((unsigned __int128)x * n) >> 64);
}
static inline int digit(const unsigned char* name, int d) { return (name[d >> 1] >> ((~d & 1) << 2)) & 15; }

int main() {
    std::vector<unsigned char> keys((size_t)NKEYS * KEYB);
    for (auto& b : keys) b = (unsigned char)(urand() >> 24);
    // build by insertion
    std::vector<int4> t;
    t.reserve((size_t)NKEYS * 63);
    auto node = [&](int c) { t.push_back(make_int4(-1, -1, -1, c)); return (int)t.size() - 1; };
    int root = node(digit(&keys[0], 0));
    for (int i = 0; i < NKEYS; ++i) {
        const unsigned char* k = &keys[(size_t)i * KEYB];
        int n = root, d = 0;
        for (;;) {
            const int c = digit(k, d), nc = t[n].w & 255;
            if (c < nc) { if (t[n].x < 0) { const int m = node(c); t[n].x = m; } n = t[n].x; }
            else if (c > nc) { if (t[n].z < 0) { const int m = node(c); t[n].z = m; } n = t[n].z; }
            else if (d == 63) { t[n].y = -2 - i; break; }
            else { ++d; if (t[n].y < 0) { const int m = node(digit(k, d)); t[n].y = m; } n = t[n].y; }
        }
    }
    // the pool order of concurrent inserts: node ids permuted at random
    const size_t nn = t.size();
    std::vector<int> perm(nn);
    for (size_t i = 0; i < nn; ++i) perm[i] = (int)i;
    for (size_t i = nn - 1; i > 0; --i) std::swap(perm[i], perm[below(i + 1)]);
    std::vector<int4> pool(nn);
    auto mapped = [&](int c) { return c < 0 ? c : perm[c]; };
    for (size_t i = 0; i < nn; ++i) pool[perm[i]] = make_int4(mapped(t[i].x), mapped(t[i].y), mapped(t[i].z), t[i].w);
    root = perm[root];
    std::vector<int4>().swap(t);
    // lookups: names in the tree, 1 in 16 random (absent)
    std::vector<unsigned char> q((size_t)NQ * KEYB);
    for (int i = 0; i < NQ; ++i) {
        if (below(16) == 0) for (int b = 0; b < KEYB; ++b) q[(size_t)i * KEYB + b] = (unsigned char)(urand() >> 24);
        else memcpy(&q[(size_t)i * KEYB], &keys[below(NKEYS) * KEYB], KEYB);
    }
    printf("names %d, nodes %zu (%.0f MB), lookups %d\n", NKEYS, nn, nn * 16.0 / 1e6, NQ);

    int4* dtst = dcopy(pool);
    unsigned char* dq = dcopy(q);
    float *dbad = dnew<float>(NQ), *dfix = dnew<float>(NQ);
    LAUNCH(tst_lookup_warp, NQ * 32 / 256, 256, dtst, root, dq, dbad);
    LAUNCH(tst_lookup_quad, NQ * 8 / 256, 256, dtst, root, (const unsigned*)dq, dfix);
    CK(cudaDeviceSynchronize());
    return verdict("123-tst-digest-lookup-warp", hcopy(dbad, NQ), hcopy(dfix, NQ), 0.0);
}
