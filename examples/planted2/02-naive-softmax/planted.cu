// 02-naive-softmax. Planted: uncoalesced global access. A row softmax with one thread per row: the
// 32 lanes of a warp read 32 different rows (256 bytes apart), so each warp load touches 32 sectors
// for 128 useful bytes, in all three passes and the store.
// Fixed twin: one warp per row, two consecutive columns per lane, warp shuffles for max and sum.
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
#define ROWS (512u << 10)  // 512K rows x 64 columns: 128 MB in, 128 MB out
#define COLS 64
#define THREADS 256

extern "C" __global__ void softmax_thread_per_row(const float* __restrict__ x, float* __restrict__ y) {
    unsigned r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= ROWS) return;
    const float* xr = x + (size_t)r * COLS;
    float m = -INFINITY, s = 0.0f;
    for (int c = 0; c < COLS; ++c) m = fmaxf(m, xr[c]);  // PLANTED
    for (int c = 0; c < COLS; ++c) s += expf(xr[c] - m);  // PLANTED
    float inv = 1.0f / s;
    for (int c = 0; c < COLS; ++c) y[(size_t)r * COLS + c] = expf(xr[c] - m) * inv;  // PLANTED
}

extern "C" __global__ void softmax_warp_per_row(const float2* __restrict__ x, float2* __restrict__ y) {
    unsigned r = (blockIdx.x * blockDim.x + threadIdx.x) / 32, lane = threadIdx.x % 32;
    if (r >= ROWS) return;
    float2 v = x[(size_t)r * (COLS / 2) + lane];
    float m = fmaxf(v.x, v.y);
    for (int o = 16; o > 0; o /= 2) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    float a = expf(v.x - m), b = expf(v.y - m), s = a + b;
    for (int o = 16; o > 0; o /= 2) s += __shfl_xor_sync(0xffffffffu, s, o);
    float inv = 1.0f / s;
    y[(size_t)r * (COLS / 2) + lane] = make_float2(a * inv, b * inv);
}

int main() {
    size_t n = (size_t)ROWS * COLS;
    std::vector<float> hx(n);
    for (size_t i = 0; i < n; ++i) hx[i] = 8.0f * frand() - 4.0f;
    float* dx = dcopy(hx);
    float* dbad = dnew<float>(n);
    float* dfix = dnew<float>(n);
    LAUNCH(softmax_thread_per_row, ROWS / THREADS, THREADS, dx, dbad);
    LAUNCH(softmax_warp_per_row, ROWS * 32 / THREADS, THREADS, (const float2*)dx, (float2*)dfix);
    CK(cudaDeviceSynchronize());
    return verdict("02-naive-softmax", hcopy(dbad, n), hcopy(dfix, n), 1e-4);
}
