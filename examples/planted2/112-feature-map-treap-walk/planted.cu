// 112-feature-map-treap-walk. Planted: dependent loads: a warp per token walks a treap, 2 chained loads a level, ~28 levels.
// A recommender's feature-id -> FP16 embedding-row map kept as a treap of 4M keys in arrays indexed by allocation slot
// (key[], child pair child[2n], child[2n+1]: 48 MB, slots in random order as nodes were allocated). A warp per token walks
// from the root with all lanes in step: each level loads the node's key, and the comparison picks which child slot to
// load next, so every load's address comes from the previous one (~56 chained loads of one sector each), then the
// 32 lanes convert the token's 32-half row. Fixed twin: the same keys in a static 32-ary B-tree (each level one
// coalesced 128-byte load compared by all 32 lanes, a ballot picks the child): 5 levels and one slot load; same rows.
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
static unsigned ubelow(unsigned n) { return (unsigned)(((unsigned long long)urand() * n) >> 32); }  // high LCG bits
#include <cuda_fp16.h>
#define NKEYS (4 * 1024 * 1024)
#define DIM 32
#define TOKENS (1024 * 1024)
#define THREADS 256
#define MAXLEV 8

__constant__ int c_off[MAXLEV];  // B-tree level l starts at c_off[l] in the key array; level 0 = the leaves

extern "C" __global__ void lookup_treap(const int* __restrict__ tkey, const int* __restrict__ tchild, int root,
                                        const __half* __restrict__ rows, const int* __restrict__ tokens,
                                        float* __restrict__ out) {
    const int w = (blockIdx.x * blockDim.x + threadIdx.x) >> 5, lane = threadIdx.x & 31;
    if (w >= TOKENS) return;
    const int key = tokens[w];
    int n = root, k = tkey[n];
    while (k != key) { n = tchild[2 * n + (key > k)]; k = tkey[n]; }  // PLANTED
    out[(size_t)w * DIM + lane] = __half2float(rows[(size_t)n * DIM + lane]);
}

extern "C" __global__ void lookup_btree(const int* __restrict__ bkeys, int top, const int* __restrict__ slot_of,
                                        const __half* __restrict__ rows, const int* __restrict__ tokens,
                                        float* __restrict__ out) {
    const int w = (blockIdx.x * blockDim.x + threadIdx.x) >> 5, lane = threadIdx.x & 31;
    if (w >= TOKENS) return;
    const int key = tokens[w];
    int b = 0;
    for (int l = top; l >= 1; --l) {  // level l holds the minimum key of each level l-1 node: count those <= key
        const int k = bkeys[c_off[l] + 32 * b + lane];
        b = 32 * b + __popc(__ballot_sync(0xffffffffu, k <= key)) - 1;
    }
    const int k = bkeys[c_off[0] + 32 * b + lane];
    const int n = slot_of[32 * b + __ffs(__ballot_sync(0xffffffffu, k == key)) - 1];
    out[(size_t)w * DIM + lane] = __half2float(rows[(size_t)n * DIM + lane]);
}

int main() {
    // sorted distinct keys, random priorities, random allocation slots
    std::vector<int> keys(NKEYS), prio(NKEYS), slot(NKEYS);
    for (int i = 0; i < NKEYS; ++i) { keys[i] = i * 500 + (int)ubelow(500); prio[i] = (int)(urand() >> 1); slot[i] = i; }
    for (int i = NKEYS - 1; i > 0; --i) std::swap(slot[i], slot[ubelow(i + 1)]);
    // treap = Cartesian tree of (key, prio), built with a stack over the sorted keys (max-heap on prio)
    std::vector<int> L(NKEYS, -1), R(NKEYS, -1), st;
    for (int i = 0; i < NKEYS; ++i) {
        int last = -1;
        while (!st.empty() && prio[st.back()] < prio[i]) { last = st.back(); st.pop_back(); }
        L[i] = last;
        if (!st.empty()) R[st.back()] = i;
        st.push_back(i);
    }
    std::vector<int> tkey(NKEYS), tchild(2 * NKEYS);
    std::vector<__half> rows((size_t)NKEYS * DIM);
    for (int i = 0; i < NKEYS; ++i) {
        const int s = slot[i];
        tkey[s] = keys[i];
        tchild[2 * s] = L[i] < 0 ? -1 : slot[L[i]];
        tchild[2 * s + 1] = R[i] < 0 ? -1 : slot[R[i]];
    }
    for (auto& v : rows) v = __float2half(frand() * 2.0f - 1.0f);
    // static B-tree: level 0 = the sorted keys padded to 32, level l = the minima of level l-1's 32-key nodes
    std::vector<int> bk, cur(keys);
    int off[MAXLEV];
    int l = 0;
    for (;;) {
        off[l] = (int)bk.size();
        const size_t padded = (cur.size() + 31) / 32 * 32;
        bk.insert(bk.end(), cur.begin(), cur.end());
        bk.resize(off[l] + padded, 0x7fffffff);
        if (padded == 32) break;
        std::vector<int> up;
        for (size_t j = 0; j < cur.size(); j += 32) up.push_back(cur[j]);
        cur.swap(up);
        ++l;
    }
    const int top = l;
    CK(cudaMemcpyToSymbol(c_off, off, sizeof(off)));
    std::vector<int> slot_of(slot);  // leaf position i (i-th smallest key) -> its row's slot
    slot_of.resize((NKEYS + 31) / 32 * 32, 0);
    std::vector<int> tok(TOKENS);
    for (auto& t : tok) t = keys[ubelow(NKEYS)];

    int *dkey = dcopy(tkey), *dchild = dcopy(tchild), *dtok = dcopy(tok), *dbk = dcopy(bk), *dslot = dcopy(slot_of);
    __half* drows = dcopy(rows);
    float *dbad = dnew<float>((size_t)TOKENS * DIM), *dfix = dnew<float>((size_t)TOKENS * DIM);
    const int blocks = TOKENS * 32 / THREADS;
    LAUNCH(lookup_treap, blocks, THREADS, dkey, dchild, slot[st.front()], drows, dtok, dbad);
    LAUNCH(lookup_btree, blocks, THREADS, dbk, top, dslot, drows, dtok, dfix);
    CK(cudaDeviceSynchronize());
    return verdict("112-feature-map-treap-walk", hcopy(dbad, (size_t)TOKENS * DIM), hcopy(dfix, (size_t)TOKENS * DIM), 0.0);
}
