// 37-healthy-horner-poly. Healthy, compute-bound: a degree-160 polynomial evaluated by Horner's rule
// for 32M inputs, four independent evaluations per thread (16-byte loads): the FP32 FMA pipe sets the
// time. Not a matrix product: tensor cores have nothing to offer here.
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
#define DEG 160
#define THREADS 256

__constant__ float c_coef[DEG + 1];

extern "C" __global__ void horner4(const float4* __restrict__ x, float4* __restrict__ y) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    float4 v = x[i], p = make_float4(c_coef[DEG], c_coef[DEG], c_coef[DEG], c_coef[DEG]);
    for (int k = DEG - 1; k >= 0; --k) {
        float c = c_coef[k];
        p.x = fmaf(p.x, v.x, c); p.y = fmaf(p.y, v.y, c); p.z = fmaf(p.z, v.z, c); p.w = fmaf(p.w, v.w, c);
    }
    y[i] = p;
}

int main() {
    std::vector<float> hx(N), hc(DEG + 1), ref(N);
    for (auto& v : hx) v = frand() - 0.5f;
    for (int k = 0; k <= DEG; ++k) hc[k] = 1.0f / (k + 1);
    for (unsigned i = 0; i < N; ++i) {
        float p = hc[DEG];
        for (int k = DEG - 1; k >= 0; --k) p = fmaf(p, hx[i], hc[k]);
        ref[i] = p;
    }
    CK(cudaMemcpyToSymbol(c_coef, hc.data(), sizeof(float) * (DEG + 1)));
    float *dx = dcopy(hx), *dy = dnew<float>(N);
    LAUNCH(horner4, N / 4 / THREADS, THREADS, (const float4*)dx, (float4*)dy);
    CK(cudaDeviceSynchronize());
    return verdict("37-healthy-horner-poly", hcopy(dy, N), ref, 1e-5);
}
