// 46-healthy-padded-transpose. Healthy: an out-of-place transpose of a 8192 x 8192 float matrix through
// 32 x 33 shared-memory tiles (the padding column keeps the column reads free of bank conflicts); 32 x 8
// threads per tile, each moving four elements, so both the global reads and the global writes are
// coalesced rows. Bound by DRAM (256 MB each way): no warning is expected.
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
#define DIM 8192u
#define TD 32
#define RB 8

extern "C" __global__ void __launch_bounds__(TD * RB) transpose_tiled(const float* __restrict__ in,
                                                                    float* __restrict__ out) {
    __shared__ float tile[TD][TD + 1];
    unsigned x = blockIdx.x * TD + threadIdx.x, y = blockIdx.y * TD + threadIdx.y;
#pragma unroll
    for (int j = 0; j < TD; j += RB) tile[threadIdx.y + j][threadIdx.x] = in[(size_t)(y + j) * DIM + x];
    __syncthreads();
    x = blockIdx.y * TD + threadIdx.x;
    y = blockIdx.x * TD + threadIdx.y;
#pragma unroll
    for (int j = 0; j < TD; j += RB) out[(size_t)(y + j) * DIM + x] = tile[threadIdx.x][threadIdx.y + j];
}

int main() {
    const size_t n = (size_t)DIM * DIM;
    std::vector<float> hx(n), ref(n);
    for (auto& v : hx) v = frand();
    for (size_t r = 0; r < DIM; ++r)
        for (size_t c = 0; c < DIM; ++c) ref[c * DIM + r] = hx[r * DIM + c];
    float *dx = dcopy(hx), *dy = dnew<float>(n);
    LAUNCH(transpose_tiled, dim3(DIM / TD, DIM / TD), dim3(TD, RB), dx, dy);
    CK(cudaDeviceSynchronize());
    return verdict("46-healthy-padded-transpose", hcopy(dy, n), ref, 0.0);
}
