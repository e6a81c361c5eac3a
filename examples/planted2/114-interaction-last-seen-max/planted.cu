// 114-interaction-last-seen-max. Planted: atomic contention: atomicMax on a handful of hot item counters.
// A temporal-graph memory update (TGN style): 12M user->item interactions in time order, and for every node the index of
// its latest interaction, kept with atomicMax on 32-bit counters. Users are uniform over 2M, but item popularity is
// Zipf-like over 1M items relabelled by popularity (item 0 takes ~5% of all events, items 0-31 a quarter, all on one
// 128-byte line): the global atomicMax per event serializes on the L2 slice holding the hottest items.
// Fixed twin: each block keeps the 2048 most popular items in shared memory (atomicMax there, native and on chip) and
// flushes them with one global atomicMax per touched item at the end; same grid, same events, same results.
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
#define NEV (12 * 1024 * 1024)
#define NUSER (2 * 1024 * 1024)
#define NITEM (1024 * 1024)
#define HOT 2048  // items 0..HOT-1 (the most popular after relabelling) are kept per block in shared memory
#define BLOCKS 264
#define THREADS 1024

extern "C" __global__ void last_seen_global_max(const int* __restrict__ user, const int* __restrict__ item,
                                                unsigned* __restrict__ last_user, unsigned* __restrict__ last_item) {
    for (int e = blockIdx.x * blockDim.x + threadIdx.x; e < NEV; e += gridDim.x * blockDim.x) {
        atomicMax(&last_user[user[e]], (unsigned)e + 1u);
        atomicMax(&last_item[item[e]], (unsigned)e + 1u);  // PLANTED
    }
}

extern "C" __global__ void last_seen_hot_items_smem(const int* __restrict__ user, const int* __restrict__ item,
                                                    unsigned* __restrict__ last_user, unsigned* __restrict__ last_item) {
    __shared__ unsigned hot[HOT];
    for (int i = threadIdx.x; i < HOT; i += blockDim.x) hot[i] = 0u;
    __syncthreads();
    for (int e = blockIdx.x * blockDim.x + threadIdx.x; e < NEV; e += gridDim.x * blockDim.x) {
        atomicMax(&last_user[user[e]], (unsigned)e + 1u);
        const int it = item[e];
        if (it < HOT) atomicMax(&hot[it], (unsigned)e + 1u);
        else atomicMax(&last_item[it], (unsigned)e + 1u);
    }
    __syncthreads();
    for (int i = threadIdx.x; i < HOT; i += blockDim.x)
        if (hot[i]) atomicMax(&last_item[i], hot[i]);
}

int main() {
    std::vector<int> user(NEV), item(NEV);
    const float lnN = logf((float)NITEM + 1.0f);
    for (int e = 0; e < NEV; ++e) {
        user[e] = (int)ubelow(NUSER);
        item[e] = std::min(NITEM - 1, (int)expf(frand() * lnN) - 1);  // P(item k) ~ ln((k+2)/(k+1)) / ln(N+1)
    }
    std::vector<float> ref(NUSER + NITEM, 0.0f);  // latest event (1-based) of each user, then of each item
    for (int e = 0; e < NEV; ++e) { ref[user[e]] = (float)(e + 1); ref[NUSER + item[e]] = (float)(e + 1); }
    int *duser = dcopy(user), *ditem = dcopy(item);
    unsigned *dbad = dnew<unsigned>(NUSER + NITEM), *dfix = dnew<unsigned>(NUSER + NITEM);
    LAUNCH(last_seen_global_max, BLOCKS, THREADS, duser, ditem, dbad, dbad + NUSER);
    LAUNCH(last_seen_hot_items_smem, BLOCKS, THREADS, duser, ditem, dfix, dfix + NUSER);
    CK(cudaDeviceSynchronize());
    std::vector<unsigned> hb = hcopy(dbad, NUSER + NITEM), hf = hcopy(dfix, NUSER + NITEM);
    std::vector<float> bad(hb.begin(), hb.end()), fix(hf.begin(), hf.end());
    if (verdict("114-interaction-last-seen-max (fixed vs host)", fix, ref, 0.0)) return 1;
    return verdict("114-interaction-last-seen-max", bad, fix, 0.0);
}
