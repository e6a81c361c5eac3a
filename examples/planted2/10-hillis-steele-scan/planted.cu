// 10-hillis-steele-scan. Planted: barrier-heavy synchronization. An inclusive scan of each 1024-
// element chunk by 1024 threads, Hillis-Steele over a double buffer in shared memory: 10 steps, each
// ending in a block-wide __syncthreads that 32 warps wait at.
// Fixed twin: 256 threads x 4 elements, warp-shuffle scans, one barrier to combine the warp totals.
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
#define N (32u << 20)
#define CHUNK 1024

extern "C" __global__ void scan_hillis_steele(const float* __restrict__ x, float* __restrict__ y) {
    __shared__ float buf[2][CHUNK];
    unsigned t = threadIdx.x, base = blockIdx.x * CHUNK;
    int cur = 0;
    buf[0][t] = x[base + t];
    __syncthreads();
    for (unsigned d = 1; d < CHUNK; d *= 2) {
        float v = buf[cur][t] + (t >= d ? buf[cur][t - d] : 0.0f);
        buf[cur ^ 1][t] = v; cur ^= 1; __syncthreads();  // PLANTED
    }
    y[base + t] = buf[cur][t];
}

extern "C" __global__ void scan_warp_shuffle(const float4* __restrict__ x, float4* __restrict__ y) {
    __shared__ float warp_tot[8];
    unsigned t = threadIdx.x, lane = t % 32, w = t / 32;
    float4 v = x[blockIdx.x * (CHUNK / 4) + t];
    v.y += v.x; v.z += v.y; v.w += v.z;
    float s = v.w;
    for (int o = 1; o < 32; o *= 2) { float u = __shfl_up_sync(0xffffffffu, s, o); if (lane >= o) s += u; }
    if (lane == 31) warp_tot[w] = s;
    __syncthreads();
    float off = s - v.w;
    for (unsigned k = 0; k < w; ++k) off += warp_tot[k];
    v.x += off; v.y += off; v.z += off; v.w += off;
    y[blockIdx.x * (CHUNK / 4) + t] = v;
}

int main() {
    std::vector<float> hx(N);
    for (auto& v : hx) v = (float)(urand() % 16);  // small integers: every partial sum is exact
    float *dx = dcopy(hx), *dbad = dnew<float>(N), *dfix = dnew<float>(N);
    LAUNCH(scan_hillis_steele, N / CHUNK, CHUNK, dx, dbad);
    LAUNCH(scan_warp_shuffle, N / CHUNK, CHUNK / 4, (const float4*)dx, (float4*)dfix);
    CK(cudaDeviceSynchronize());
    return verdict("10-hillis-steele-scan", hcopy(dbad, N), hcopy(dfix, N), 0.0);
}
