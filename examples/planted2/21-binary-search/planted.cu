// 21-binary-search. Planted: dependent loads. 32M sorted queries (a searchsorted), each a binary search
// over 4M sorted keys (16 MB, resident in the 50 MB L2): every probe address depends on the previous
// probe's key, so each warp has one load in flight through 22 steps. The queries are sorted, so the 32
// lanes of a warp probe the same or neighbouring keys (one or two sectors a request): the L2 is far from
// busy, DRAM only streams the queries and results, and warps wait on one L2 round trip after another.
// Fixed twin: each thread advances 8 independent searches in lockstep (same probes, 8 loads in flight).
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
#define LOG2KEYS 22
#define KEYS (1u << LOG2KEYS)
#define Q (32u << 20)
#define WAYS 8
#define THREADS 256

extern "C" __global__ void search_one(const unsigned* __restrict__ keys, const unsigned* __restrict__ q,
                                      unsigned* __restrict__ out) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x, v = q[i], lo = 0;
    for (unsigned step = KEYS / 2; step > 0; step /= 2)
        if (keys[lo + step - 1] < v) lo += step;  // PLANTED
    out[i] = lo;
}

extern "C" __global__ void search_eight(const unsigned* __restrict__ keys, const unsigned* __restrict__ q,
                                        unsigned* __restrict__ out) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x, v[WAYS], lo[WAYS];
#pragma unroll
    for (int j = 0; j < WAYS; ++j) { v[j] = q[i + j * (Q / WAYS)]; lo[j] = 0; }
    for (unsigned step = KEYS / 2; step > 0; step /= 2) {
        unsigned k[WAYS];
#pragma unroll
        for (int j = 0; j < WAYS; ++j) k[j] = keys[lo[j] + step - 1];
#pragma unroll
        for (int j = 0; j < WAYS; ++j) lo[j] += k[j] < v[j] ? step : 0;
    }
#pragma unroll
    for (int j = 0; j < WAYS; ++j) out[i + j * (Q / WAYS)] = lo[j];
}

int main() {
    std::vector<unsigned> hk(KEYS), hq(Q);
    unsigned acc = 0;
    for (auto& v : hk) { acc += 1 + urand() % 64; v = acc; }
    for (size_t i = 0; i < Q; ++i) hq[i] = (unsigned)((unsigned long long)i * acc / Q) + urand() % 8;  // sorted-ish
    unsigned *dk = dcopy(hk), *dq = dcopy(hq), *dbad = dnew<unsigned>(Q), *dfix = dnew<unsigned>(Q);
    LAUNCH(search_one, Q / THREADS, THREADS, dk, dq, dbad);
    LAUNCH(search_eight, Q / WAYS / THREADS, THREADS, dk, dq, dfix);
    CK(cudaDeviceSynchronize());
    std::vector<unsigned> rb = hcopy(dbad, Q), rf = hcopy(dfix, Q);
    return verdict("21-binary-search", std::vector<float>(rb.begin(), rb.end()),
                   std::vector<float>(rf.begin(), rf.end()), 0.0);
}
