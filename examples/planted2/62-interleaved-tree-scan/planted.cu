// 62-interleaved-tree-scan. Planted: warp divergence by predication. An exclusive scan of each 1024-element
// segment with the work-efficient tree (up-sweep, then down-sweep) in shared memory, each level's active
// threads picked by an interleaved test on the thread index ((tid + 1) % (2d) == 0): at level d only one lane in
// 2d of every warp does the add, yet every warp issues the level. The bodies are short, so the compiler
// predicates them instead of branching: the lanes are lost to predication, not to divergent branches.
// Fixed twin: a warp-shuffle scan (every lane active at every step) and one pass over the 32 warp totals.
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
#define SEG 1024
#define N (32u << 20)

extern "C" __global__ void scan_tree_interleaved(const float* __restrict__ in, float* __restrict__ out) {
    __shared__ float s[SEG];
    unsigned t = threadIdx.x;
    s[t] = in[blockIdx.x * SEG + t];
    __syncthreads();
    for (unsigned d = 1; d < SEG; d *= 2) {
        if ((t + 1) % (2 * d) == 0) s[t] += s[t - d];  // PLANTED
        __syncthreads();
    }
    if (t == SEG - 1) s[t] = 0.0f;
    __syncthreads();
    for (unsigned d = SEG / 2; d >= 1; d /= 2) {
        if ((t + 1) % (2 * d) == 0) { float l = s[t - d]; s[t - d] = s[t]; s[t] += l; }  // PLANTED
        __syncthreads();
    }
    out[blockIdx.x * SEG + t] = s[t];
}

extern "C" __global__ void scan_warp_shuffle(const float* __restrict__ in, float* __restrict__ out) {
    __shared__ float wsum[SEG / 32];
    unsigned t = threadIdx.x, lane = t % 32, w = t / 32;
    float x = in[blockIdx.x * SEG + t], v = x;
    for (int o = 1; o < 32; o *= 2) { float u = __shfl_up_sync(0xffffffffu, v, o); if (lane >= o) v += u; }
    if (lane == 31) wsum[w] = v;
    __syncthreads();
    if (w == 0) {
        float a = wsum[lane], b = a;
        for (int o = 1; o < 32; o *= 2) { float u = __shfl_up_sync(0xffffffffu, b, o); if (lane >= o) b += u; }
        wsum[lane] = b - a;  // exclusive offsets of the warps
    }
    __syncthreads();
    out[blockIdx.x * SEG + t] = v - x + wsum[w];
}

int main() {
    std::vector<float> h(N);
    for (auto& v : h) v = (float)(urand() % 16);  // integers: every order of summation is exact
    float *din = dcopy(h), *dbad = dnew<float>(N), *dfix = dnew<float>(N);
    LAUNCH(scan_tree_interleaved, N / SEG, SEG, din, dbad);
    LAUNCH(scan_warp_shuffle, N / SEG, SEG, din, dfix);
    CK(cudaDeviceSynchronize());
    std::vector<float> a = hcopy(dbad, N), b = hcopy(dfix, N);
    double want = 0;
    for (unsigned i = 0; i < SEG; ++i) { if (a[i] != (float)want) { printf("MISMATCH scan at %u\n", i); return 1; } want += h[i]; }
    return verdict("62-interleaved-tree-scan", a, b, 0.0);
}
