// 45-healthy-warp-scan. Healthy: a segmented inclusive scan (64M floats, segments of 4096, one per
// block) written the way a library does it: each warp loads 16 rows of 32 coalesced floats, scans each
// row with shuffles (carrying the row total forward in a register), one barrier shares the warp totals
// through shared memory, and each value gets its warp's offset before a coalesced store. Bound by DRAM
// (256 MB read, 256 MB written): no warning is expected.
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
#define N (64u << 20)
#define SEG 4096
#define WARPS 8
#define ROWS (SEG / (32 * WARPS))  // 16 rows of 32 per warp

extern "C" __global__ void __launch_bounds__(32 * WARPS) scan_segments(const float* __restrict__ x,
                                                                      float* __restrict__ y) {
    __shared__ float warp_total[WARPS];
    unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    size_t base = (size_t)blockIdx.x * SEG + (size_t)warp * ROWS * 32 + lane;
    float v[ROWS], carry = 0.0f;
#pragma unroll
    for (int r = 0; r < ROWS; ++r) {
        float a = x[base + 32 * r];
#pragma unroll
        for (int d = 1; d < 32; d *= 2) {
            float b = __shfl_up_sync(0xffffffffu, a, d);
            if (lane >= d) a += b;
        }
        v[r] = a + carry;
        carry = __shfl_sync(0xffffffffu, v[r], 31);
    }
    if (lane == 31) warp_total[warp] = carry;
    __syncthreads();
    float offset = 0.0f;
    for (unsigned w = 0; w < warp; ++w) offset += warp_total[w];
#pragma unroll
    for (int r = 0; r < ROWS; ++r) y[base + 32 * r] = v[r] + offset;
}

int main() {
    std::vector<float> hx(N), ref(N);
    for (auto& v : hx) v = frand();
    for (size_t s = 0; s < N; s += SEG) {
        double acc = 0;
        for (size_t i = s; i < s + SEG; ++i) { acc += hx[i]; ref[i] = (float)acc; }
    }
    float *dx = dcopy(hx), *dy = dnew<float>(N);
    LAUNCH(scan_segments, N / SEG, 32 * WARPS, dx, dy);
    CK(cudaDeviceSynchronize());
    return verdict("45-healthy-warp-scan", hcopy(dy, N), ref, 1e-4);
}
