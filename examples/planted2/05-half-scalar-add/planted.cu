// 05-half-scalar-add. Planted: non-vectorized access. A residual add of two fp16 tensors moves one
// 2-byte half per thread per load: a warp request is 64 bytes (2 sectors), so the kernel issues 8x
// the memory instructions a 16-byte access would.
// Fixed twin: eight halves per thread through one 16-byte load per operand (__hadd2 on the pairs).
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
#include <cuda_fp16.h>
#define N (64u << 20)   // 64M halves: 128 MB per tensor
#define THREADS 256

extern "C" __global__ void residual_add_half(const __half* __restrict__ a, const __half* __restrict__ b,
                                             __half* __restrict__ c) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < N) c[i] = __hadd(a[i], b[i]);  // PLANTED
}

extern "C" __global__ void residual_add_half8(const uint4* __restrict__ a, const uint4* __restrict__ b,
                                              uint4* __restrict__ c) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < N / 8) {
        uint4 x = a[i], y = b[i], z;
        const __half2 *hx = (const __half2*)&x, *hy = (const __half2*)&y;
        __half2* hz = (__half2*)&z;
        for (int j = 0; j < 4; ++j) hz[j] = __hadd2(hx[j], hy[j]);
        c[i] = z;
    }
}

int main() {
    std::vector<__half> ha(N), hb(N);
    for (unsigned i = 0; i < N; ++i) { ha[i] = __float2half(frand()); hb[i] = __float2half(frand()); }
    __half *da = dcopy(ha), *db = dcopy(hb), *dbad = dnew<__half>(N), *dfix = dnew<__half>(N);
    LAUNCH(residual_add_half, N / THREADS, THREADS, da, db, dbad);
    LAUNCH(residual_add_half8, N / 8 / THREADS, THREADS, (const uint4*)da, (const uint4*)db, (uint4*)dfix);
    CK(cudaDeviceSynchronize());
    std::vector<__half> rb = hcopy(dbad, N), rf = hcopy(dfix, N);
    std::vector<float> b(N), f(N);
    for (unsigned i = 0; i < N; ++i) { b[i] = __half2float(rb[i]); f[i] = __half2float(rf[i]); }
    return verdict("05-half-scalar-add", b, f, 0.0);
}
