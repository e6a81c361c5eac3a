// 48-compaction-global-counter. Planted: atomic contention. Stream compaction of 16M floats into two
// lists, each with its own global counter: values in (0.75, 0.95] to the kept list, values above 0.95 to
// the outlier list. Each kept element takes its slot with an atomicAdd on its list's counter, so some
// 3.2M atomics queue on one address in L2 (0.8M on the other), one after another. (The counter each lane
// adds to depends on its value, so the compiler's own aggregation of atomics on a uniform address does
// not apply; a version with a single counter was aggregated by nvcc, as its SASS showed.)
// Fixed twin: warp-aggregated slots: per list, a ballot counts the warp's lanes, one lane takes the warp's
// slots with a single atomicAdd and broadcasts the base, each lane adds its rank: one atomic per warp and
// list. The kept values end up in another order, so each list is compared sorted.
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
#define N (16u << 20)
#define CUT 0.75f
#define HIGH 0.95f

extern "C" __global__ void compact_atomic_each(const float* __restrict__ x, float* __restrict__ kept,
                                               float* __restrict__ outliers, unsigned* __restrict__ count) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    float v = x[i];
    if (v > CUT) {
        unsigned list = v > HIGH ? 1u : 0u;
        unsigned slot = atomicAdd(&count[list], 1u);  // PLANTED
        (list ? outliers : kept)[slot] = v;
    }
}

extern "C" __global__ void compact_warp_aggregated(const float* __restrict__ x, float* __restrict__ kept,
                                                   float* __restrict__ outliers, unsigned* __restrict__ count) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x, lane = threadIdx.x % 32;
    float v = x[i];
    unsigned list = v > HIGH ? 1u : 0u;
    for (unsigned l = 0; l < 2; ++l) {
        bool mine = v > CUT && list == l;
        unsigned mask = __ballot_sync(0xffffffffu, mine), base = 0;
        if (lane == 0 && mask) base = atomicAdd(&count[l], (unsigned)__popc(mask));
        base = __shfl_sync(0xffffffffu, base, 0);
        if (mine) (l ? outliers : kept)[base + __popc(mask & ((1u << lane) - 1u))] = v;
    }
}

static std::vector<float> lists(const float* kept, const float* outliers, const unsigned* dcount) {
    std::vector<unsigned> n = hcopy(dcount, 2);
    std::vector<float> a = hcopy(kept, n[0]), b = hcopy(outliers, n[1]);
    std::sort(a.begin(), a.end());
    std::sort(b.begin(), b.end());
    a.insert(a.end(), b.begin(), b.end());
    return a;
}

int main() {
    std::vector<float> hx(N);
    for (auto& v : hx) v = frand();
    float *dx = dcopy(hx), *kb = dnew<float>(N), *ob = dnew<float>(N), *kf = dnew<float>(N), *of = dnew<float>(N);
    unsigned *cbad = dnew<unsigned>(2), *cfix = dnew<unsigned>(2);
    LAUNCH(compact_atomic_each, N / 256, 256, dx, kb, ob, cbad);
    LAUNCH(compact_warp_aggregated, N / 256, 256, dx, kf, of, cfix);
    CK(cudaDeviceSynchronize());
    return verdict("48-compaction-global-counter", lists(kb, ob, cbad), lists(kf, of, cfix), 0.0);
}
