// 38-healthy-jacobi-stencil. Healthy: one 5-point Jacobi sweep over an 8192 x 8192 float grid, four
// points per thread: 16-byte loads of the row and of the rows above and below (coalesced; their reuse
// served by L1/L2), one float of each side neighbour, 16-byte stores, a full grid: memory-bound at
// bandwidth.
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
#define NX 8192
#define NY 8192

extern "C" __global__ void jacobi5_x4(const float* __restrict__ u, float* __restrict__ v) {
    unsigned x0 = (blockIdx.x * blockDim.x + threadIdx.x) * 4, y = blockIdx.y * blockDim.y + threadIdx.y;
    size_t i = (size_t)y * NX + x0;
    float4 c = *(const float4*)(u + i);
    if (y == 0 || y == NY - 1) { *(float4*)(v + i) = c; return; }
    float4 up = *(const float4*)(u + i - NX), dn = *(const float4*)(u + i + NX);
    float l = x0 > 0 ? u[i - 1] : 0.0f, r = x0 + 4 < NX ? u[i + 4] : 0.0f;
    float4 o;  // each sum as (left + right + up + down)
    o.x = x0 == 0 ? c.x : 0.25f * (l + c.y + up.x + dn.x);
    o.y = 0.25f * (c.x + c.z + up.y + dn.y);
    o.z = 0.25f * (c.y + c.w + up.z + dn.z);
    o.w = x0 + 4 == NX ? c.w : 0.25f * (c.z + r + up.w + dn.w);
    *(float4*)(v + i) = o;
}

int main() {
    size_t n = (size_t)NX * NY;
    std::vector<float> hu(n), ref(n);
    for (auto& v : hu) v = frand();
    for (size_t y = 0; y < NY; ++y)
        for (size_t x = 0; x < NX; ++x) {
            size_t i = y * NX + x;
            ref[i] = (x == 0 || y == 0 || x == NX - 1 || y == NY - 1) ? hu[i]
                     : 0.25f * (hu[i - 1] + hu[i + 1] + hu[i - NX] + hu[i + NX]);
        }
    float *du = dcopy(hu), *dv = dnew<float>(n);
    LAUNCH(jacobi5_x4, dim3(NX / 128, NY / 8), dim3(32, 8), du, dv);
    CK(cudaDeviceSynchronize());
    return verdict("38-healthy-jacobi-stencil", hcopy(dv, n), ref, 1e-6);
}
