// 66-piecewise-poly-branches. Planted: warp divergence. A function defined piecewise on four intervals, each
// piece its own 40-term polynomial, evaluated on 8M random arguments: the four pieces are four branches, and a
// warp whose lanes fall in all four runs the four polynomials one after the other, a quarter of its lanes each.
// Fixed twin: the lanes pick their piece's coefficients (staged in shared memory) and run one polynomial
// together.
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
#define DEG 40
__constant__ float c_pieces[4][DEG];

__device__ __forceinline__ float horner(const float* c, float x) {
    float v = 0.0f;
#pragma unroll 8
    for (int k = 0; k < DEG; ++k) v = fmaf(v, x, c[k]);
    return v;
}

extern "C" __global__ void piecewise_branches(const float* __restrict__ x, float* __restrict__ y) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    float t = x[i];
    float v = t < -2.0f ? horner(c_pieces[0], t) : t < 0.0f ? horner(c_pieces[1], t) : t < 2.0f ? horner(c_pieces[2], t) : horner(c_pieces[3], t);  // PLANTED
    y[i] = v;
}

extern "C" __global__ void piecewise_select(const float* __restrict__ x, float* __restrict__ y) {
    __shared__ float c[4][DEG];
    for (unsigned k = threadIdx.x; k < 4 * DEG; k += blockDim.x) c[k / DEG][k % DEG] = c_pieces[k / DEG][k % DEG];
    __syncthreads();
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    float t = x[i];
    int p = (t >= -2.0f) + (t >= 0.0f) + (t >= 2.0f);
    y[i] = horner(c[p], t);
}

int main() {
    std::vector<float> hx(N), hc(4 * DEG);
    for (auto& v : hx) v = frand() * 8.0f - 4.0f;
    for (auto& v : hc) v = (frand() - 0.5f) * 0.01f;
    CK(cudaMemcpyToSymbol(c_pieces, hc.data(), hc.size() * sizeof(float)));
    float *dx = dcopy(hx), *dbad = dnew<float>(N), *dfix = dnew<float>(N);
    LAUNCH(piecewise_branches, N / 256, 256, dx, dbad);
    LAUNCH(piecewise_select, N / 256, 256, dx, dfix);
    CK(cudaDeviceSynchronize());
    return verdict("66-piecewise-poly-branches", hcopy(dbad, N), hcopy(dfix, N), 0.0);
}
