// 124-skiplist-range-scan. Planted: dependent loads, range queries answered by walking a pointer skip list.
// A memtable keeps 2M (64-bit key, value) records in a skip list of 128-byte nodes with 64-bit next pointers
// (p = 1/4, up to 12 levels), allocated in insertion order, so key-order neighbours are far apart in a 268 MB
// pool. A warp answers one range query (sum of the values of the 32 records at or after a key): all lanes walk
// the search path (~40 steps, the lower levels DRAM misses) and then 32 level-0 links, each load's result
// being the next load's address, with one 32-byte load in flight per warp.
// Fixed twin: the same records flattened into sorted key and value arrays plus a directory on the top 20 key
// bits: three dependent loads (directory, one bucket of keys, 32 values read at once by the lanes).
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
#define NKEYS 2097152              // records
#define NQ 393216                  // range queries
#define MAXL 12                    // skip-list levels
#define SCAN 32                    // records summed per query
#define DIR_BITS 20                // directory on the top key bits
#define FULL 0xffffffffu

struct __align__(128) SkipNode {
    unsigned long long key;
    float val;
    int level;
    const SkipNode* next[MAXL];
};

extern "C" __global__ void __launch_bounds__(256) skiplist_range_sum(const SkipNode* __restrict__ head,
        const unsigned long long* __restrict__ lo_keys, float* __restrict__ out) {
    const int q = (blockIdx.x * blockDim.x + threadIdx.x) >> 5, lane = threadIdx.x & 31;
    if (q >= NQ) return;
    const unsigned long long lo = lo_keys[q];
    const SkipNode* x = head;
    for (int l = MAXL - 1; l >= 0; --l)
        for (const SkipNode* y = x->next[l]; y && y->key < lo; y = y->next[l]) x = y;  // PLANTED
    float v = 0.0f;  // lane s keeps the value of the s-th record at or after lo
    const SkipNode* y = x->next[0];
    for (int s = 0; s < SCAN && y; ++s, y = y->next[0]) if (s == lane) v = y->val;  // PLANTED
    for (int o = 16; o; o >>= 1) v += __shfl_xor_sync(FULL, v, o);
    if (lane == 0) out[q] = v;
}

extern "C" __global__ void __launch_bounds__(256) sorted_range_sum(const unsigned long long* __restrict__ keys,
        const float* __restrict__ vals, const int* __restrict__ dir, const unsigned long long* __restrict__ lo_keys,
        float* __restrict__ out) {
    const int q = (blockIdx.x * blockDim.x + threadIdx.x) >> 5, lane = threadIdx.x & 31;
    if (q >= NQ) return;
    const unsigned long long lo = lo_keys[q];
    const unsigned b = (unsigned)(lo >> (64 - DIR_BITS));
    int pos = dir[b];
    const int end = dir[b + 1];
    for (;;) {  // count the bucket's keys below lo, 32 at a time
        const int cnt = __popc(__ballot_sync(FULL, pos + lane < end && keys[pos + lane] < lo));
        pos += cnt;
        if (cnt < 32) break;
    }
    float v = pos + lane < NKEYS && lane < SCAN ? vals[pos + lane] : 0.0f;
    for (int o = 16; o; o >>= 1) v += __shfl_xor_sync(FULL, v, o);
    if (lane == 0) out[q] = v;
}

static unsigned long long urand64() { const unsigned long long h = urand(); return (h << 32) | urand(); }

int main() {
    static_assert(sizeof(SkipNode) == 128, "node layout");
    std::vector<unsigned long long> key(NKEYS);
    std::vector<float> val(NKEYS);
    std::vector<int> level(NKEYS);
    for (int i = 0; i < NKEYS; ++i) {
        key[i] = urand64();
        val[i] = frand() - 0.5f;
        int l = 1;
        while (l < MAXL && (urand() >> 30) == 0) ++l;  // p = 1/4
        level[i] = l;
    }
    // nodes in insertion order, the head last; links point into the device pool
    SkipNode* dpool = dnew<SkipNode>(NKEYS + 1);
    std::vector<SkipNode> pool(NKEYS + 1);
    memset(pool.data(), 0, pool.size() * sizeof(SkipNode));
    for (int i = 0; i < NKEYS; ++i) { pool[i].key = key[i]; pool[i].val = val[i]; pool[i].level = level[i]; }
    pool[NKEYS].level = MAXL;
    std::vector<int> order(NKEYS);
    for (int i = 0; i < NKEYS; ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](int a, int b) { return key[a] < key[b]; });
    for (int l = 0; l < MAXL; ++l) {
        int prev = NKEYS;
        for (int r : order) if (level[r] > l) { pool[prev].next[l] = dpool + r; prev = r; }
        pool[prev].next[l] = nullptr;
    }
    CK(cudaMemcpy(dpool, pool.data(), pool.size() * sizeof(SkipNode), cudaMemcpyHostToDevice));
    // the flat copy: sorted keys and values, directory of first positions per top-20-bit bucket
    std::vector<unsigned long long> skey(NKEYS);
    std::vector<float> sval(NKEYS);
    for (int i = 0; i < NKEYS; ++i) { skey[i] = key[order[i]]; sval[i] = val[order[i]]; }
    std::vector<int> dir((1 << DIR_BITS) + 1);
    for (int b = 0, i = 0; b <= (1 << DIR_BITS); ++b) {
        while (i < NKEYS && (skey[i] >> (64 - DIR_BITS)) < (unsigned long long)b) ++i;
        dir[b] = i;
    }
    std::vector<unsigned long long> lo(NQ);
    for (auto& k : lo) k = urand64();
    printf("records %d, pool %.0f MB, queries %d\n", NKEYS, (NKEYS + 1) * 128.0 / 1e6, NQ);

    unsigned long long* dlo = dcopy(lo);
    unsigned long long* dkey = dcopy(skey);
    float* dval = dcopy(sval);
    int* ddir = dcopy(dir);
    float *dbad = dnew<float>(NQ), *dfix = dnew<float>(NQ);
    LAUNCH(skiplist_range_sum, NQ * 32 / 256, 256, dpool + NKEYS, dlo, dbad);
    LAUNCH(sorted_range_sum, NQ * 32 / 256, 256, dkey, dval, ddir, dlo, dfix);
    CK(cudaDeviceSynchronize());
    return verdict("124-skiplist-range-scan", hcopy(dbad, NQ), hcopy(dfix, NQ), 1e-5);
}
