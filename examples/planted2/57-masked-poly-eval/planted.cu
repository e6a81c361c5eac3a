// 57-masked-poly-eval. Planted: warp divergence. A 192-term polynomial is evaluated (Horner) only where a
// random mask is set (half of the elements); elsewhere the input is copied. One thread per element: in every
// warp about half the lanes sit masked off through the whole polynomial, so the FMA pipe does half useful work.
// Fixed twin: the same polynomial over a compacted list of the masked elements (built once, outside the
// timed kernels; the unmasked outputs are a plain copy): every lane of every warp evaluates.
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
#define N (8u << 20)
#define DEG 192
__constant__ float c_coef[DEG];

extern "C" __global__ void poly_masked(const float* __restrict__ x, const unsigned char* __restrict__ m,
                                       float* __restrict__ y) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= N) return;
    float t = x[i], v = t;
    if (m[i]) { v = 0.0f; for (int k = 0; k < DEG; ++k) v = fmaf(v, t, c_coef[k]); }  // PLANTED
    y[i] = v;
}

extern "C" __global__ void poly_compacted(const float* __restrict__ x, const unsigned* __restrict__ idx,
                                          unsigned count, float* __restrict__ y) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= count) return;
    unsigned j = idx[i];
    float t = x[j], v = 0.0f;
    for (int k = 0; k < DEG; ++k) v = fmaf(v, t, c_coef[k]);
    y[j] = v;
}

int main() {
    std::vector<float> hx(N), hc(DEG);
    std::vector<unsigned char> hm(N);
    std::vector<unsigned> hidx;
    for (auto& v : hx) v = frand() * 1.8f - 0.9f;
    for (int k = 0; k < DEG; ++k) hc[k] = (frand() - 0.5f) * 0.05f;
    for (unsigned i = 0; i < N; ++i) { hm[i] = urand() >> 31; if (hm[i]) hidx.push_back(i); }
    CK(cudaMemcpyToSymbol(c_coef, hc.data(), DEG * sizeof(float)));
    float *dx = dcopy(hx), *dbad = dnew<float>(N), *dfix = dnew<float>(N);
    unsigned char* dm = dcopy(hm);
    unsigned* didx = dcopy(hidx);
    unsigned count = (unsigned)hidx.size();
    CK(cudaMemcpy(dfix, dx, N * sizeof(float), cudaMemcpyDeviceToDevice));  // unmasked outputs: the input
    LAUNCH(poly_masked, N / 256, 256, dx, dm, dbad);
    LAUNCH(poly_compacted, (count + 255) / 256, 256, dx, didx, count, dfix);
    CK(cudaDeviceSynchronize());
    return verdict("57-masked-poly-eval", hcopy(dbad, N), hcopy(dfix, N), 0.0);
}
