// 58-healthy-tile-reverse. Healthy. Reverses every 4096-float segment of a 1 GB array through shared memory:
// each thread loads one float4 (coalesced), a barrier, then each thread reads the mirrored float4 of the tile
// (conflict-free 16-byte shared reads), swaps its components and stores it (coalesced). Each byte crosses
// DRAM once each way: DRAM-bound, with one barrier per block that warps reach after their loads.
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
#define SEG 4096u
#define N (256u << 20)

extern "C" __global__ void reverse_segments(const float4* __restrict__ in, float4* __restrict__ out) {
    __shared__ float4 s[SEG / 4];
    unsigned t = threadIdx.x, base = blockIdx.x * (SEG / 4);
    s[t] = in[base + t];
    __syncthreads();
    float4 v = s[SEG / 4 - 1 - t];
    out[base + t] = make_float4(v.w, v.z, v.y, v.x);
}

int main() {
    std::vector<float> h(N);
    for (auto& v : h) v = frand();
    float *din = dcopy(h), *dout = dnew<float>(N);
    LAUNCH(reverse_segments, N / SEG, SEG / 4, (const float4*)din, (float4*)dout);
    CK(cudaDeviceSynchronize());
    std::vector<float> got = hcopy(dout, N), want(N);
    for (size_t i = 0; i < N; ++i) want[i] = h[(i / SEG) * SEG + (SEG - 1 - i % SEG)];
    return verdict("58-healthy-tile-reverse", got, want, 0.0);
}
