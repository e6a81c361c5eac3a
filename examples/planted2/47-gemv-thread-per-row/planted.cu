// 47-gemv-thread-per-row. Planted: uncoalesced global loads. y = A x for a row-major 65536 x 1024 float
// matrix (256 MB), one thread per row walking along it: at each step the 32 lanes of a warp read 32 different
// rows, 4 KB apart, so every load instruction touches 32 sectors for 128 useful bytes; L1 keeps most
// lines for the next steps, but looks up 32 sectors per request: the L1, not DRAM, sets the pace.
// Fixed twin: one warp per row, the lanes reading consecutive float4s of the row (fully coalesced) and
// combining their partial dot products with shuffles.
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
#define ROWS 65536u
#define COLS 1024u

extern "C" __global__ void gemv_thread_per_row(const float* __restrict__ a, const float* __restrict__ x,
                                               float* __restrict__ y) {
    unsigned r = blockIdx.x * blockDim.x + threadIdx.x;
    const float* row = a + (size_t)r * COLS;
    float s = 0.0f;
    for (unsigned c = 0; c < COLS; ++c) s = fmaf(row[c], x[c], s);  // PLANTED
    y[r] = s;
}

extern "C" __global__ void gemv_warp_per_row(const float* __restrict__ a, const float* __restrict__ x,
                                             float* __restrict__ y) {
    unsigned lane = threadIdx.x % 32, r = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    const float4* row = reinterpret_cast<const float4*>(a + (size_t)r * COLS);
    const float4* xv = reinterpret_cast<const float4*>(x);
    float s = 0.0f;
    for (unsigned c = lane; c < COLS / 4; c += 32) {
        float4 v = row[c], w = xv[c];
        s = fmaf(v.x, w.x, fmaf(v.y, w.y, fmaf(v.z, w.z, fmaf(v.w, w.w, s))));
    }
    for (int d = 16; d > 0; d /= 2) s += __shfl_down_sync(0xffffffffu, s, d);
    if (lane == 0) y[r] = s;
}

int main() {
    std::vector<float> ha((size_t)ROWS * COLS), hx(COLS);
    for (auto& v : ha) v = frand() - 0.5f;
    for (auto& v : hx) v = frand();
    float *da = dcopy(ha), *dx = dcopy(hx), *dbad = dnew<float>(ROWS), *dfix = dnew<float>(ROWS);
    LAUNCH(gemv_thread_per_row, ROWS / 128, 128, da, dx, dbad);
    LAUNCH(gemv_warp_per_row, ROWS / 8, 256, da, dx, dfix);
    CK(cudaDeviceSynchronize());
    return verdict("47-gemv-thread-per-row", hcopy(dbad, ROWS), hcopy(dfix, ROWS), 2e-2);
}
