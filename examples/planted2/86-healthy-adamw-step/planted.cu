// 86-healthy-adamw-step. Healthy: one AdamW optimizer step (decoupled weight decay, bias-corrected moments, the
// update PyTorch's AdamW makes) over 24M fp32 parameters. One float4 per thread: the parameters, gradients and both
// moments are read once with 16-byte loads, the parameters and moments written back once with 16-byte stores (7 x 96
// MB through DRAM). Per element a sqrt, a division and a few FMAs, about 30 instructions for 28 bytes: far under
// the FP32 and issue roofs, so DRAM is the limit. No warning is expected.
// Challenger: two float4 per thread, half the tensor apart (each access still contiguous across the warp): eight
// loads in flight per thread instead of four. Same speed expected.
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
#define N (24u << 20)           // parameters
#define N4 (N / 4)

struct AdamW { float lr, beta1, beta2, eps, weight_decay, step_size, inv_sqrt_bc2; };

__device__ __forceinline__ void adamw1(float& p, float g, float& m, float& v, const AdamW& h) {
    m = h.beta1 * m + (1.0f - h.beta1) * g;
    v = h.beta2 * v + (1.0f - h.beta2) * g * g;
    const float denom = sqrtf(v) * h.inv_sqrt_bc2 + h.eps;
    p = p * (1.0f - h.lr * h.weight_decay) - h.step_size * m / denom;
}

__device__ __forceinline__ void adamw4(float4* p, const float4* g, float4* m, float4* v, unsigned i, const AdamW& h) {
    float4 pp = p[i], gg = g[i], mm = m[i], vv = v[i];
    adamw1(pp.x, gg.x, mm.x, vv.x, h);
    adamw1(pp.y, gg.y, mm.y, vv.y, h);
    adamw1(pp.z, gg.z, mm.z, vv.z, h);
    adamw1(pp.w, gg.w, mm.w, vv.w, h);
    p[i] = pp; m[i] = mm; v[i] = vv;
}

extern "C" __global__ void adamw_step_vec4(float4* __restrict__ p, const float4* __restrict__ g,
                                           float4* __restrict__ m, float4* __restrict__ v, AdamW h) {
    const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < N4) adamw4(p, g, m, v, i, h);
}

extern "C" __global__ void adamw_step_vec4_x2(float4* __restrict__ p, const float4* __restrict__ g,
                                              float4* __restrict__ m, float4* __restrict__ v, AdamW h) {
    const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= N4 / 2) return;
    float4 pp[2], gg[2], mm[2], vv[2];
#pragma unroll
    for (int k = 0; k < 2; ++k) { const unsigned j = i + k * (N4 / 2); pp[k] = p[j]; gg[k] = g[j]; mm[k] = m[j]; vv[k] = v[j]; }
#pragma unroll
    for (int k = 0; k < 2; ++k) {
        adamw1(pp[k].x, gg[k].x, mm[k].x, vv[k].x, h);
        adamw1(pp[k].y, gg[k].y, mm[k].y, vv[k].y, h);
        adamw1(pp[k].z, gg[k].z, mm[k].z, vv[k].z, h);
        adamw1(pp[k].w, gg[k].w, mm[k].w, vv[k].w, h);
        const unsigned j = i + k * (N4 / 2);
        p[j] = pp[k]; m[j] = mm[k]; v[j] = vv[k];
    }
}

int main() {
    std::vector<float> hp(N), hg(N), hm(N), hv(N);
    for (size_t i = 0; i < N; ++i) {
        hp[i] = frand() * 2.0f - 1.0f;
        hg[i] = (frand() * 2.0f - 1.0f) * 1e-2f;
        hm[i] = (frand() * 2.0f - 1.0f) * 1e-3f;
        hv[i] = frand() * 1e-5f;
    }
    const int t = 10;  // step number
    AdamW h;
    h.lr = 1e-3f; h.beta1 = 0.9f; h.beta2 = 0.999f; h.eps = 1e-8f; h.weight_decay = 1e-2f;
    h.step_size = h.lr / (float)(1.0 - pow(0.9, t));
    h.inv_sqrt_bc2 = (float)(1.0 / sqrt(1.0 - pow(0.999, t)));
    float *dp = dcopy(hp), *dg = dcopy(hg), *dm = dcopy(hm), *dv = dcopy(hv);
    float *cp = dcopy(hp), *cm = dcopy(hm), *cv = dcopy(hv);  // the challenger's own state
    LAUNCH(adamw_step_vec4, N4 / 256, 256, (float4*)dp, (const float4*)dg, (float4*)dm, (float4*)dv, h);
    LAUNCH(adamw_step_vec4_x2, N4 / 2 / 256, 256, (float4*)cp, (const float4*)dg, (float4*)cm, (float4*)cv, h);
    CK(cudaDeviceSynchronize());
    std::vector<float> want;  // parameters, then first moments, then second moments
    want.reserve(3 * (size_t)N);
    std::vector<float> wm(hm), wv(hv);
    for (size_t i = 0; i < N; ++i) {
        wm[i] = h.beta1 * hm[i] + (1.0f - h.beta1) * hg[i];
        wv[i] = h.beta2 * hv[i] + (1.0f - h.beta2) * hg[i] * hg[i];
        const float denom = sqrtf(wv[i]) * h.inv_sqrt_bc2 + h.eps;
        want.push_back(hp[i] * (1.0f - h.lr * h.weight_decay) - h.step_size * wm[i] / denom);
    }
    want.insert(want.end(), wm.begin(), wm.end());
    want.insert(want.end(), wv.begin(), wv.end());
    auto state = [](float* p, float* m, float* v) {
        std::vector<float> s = hcopy(p, N), a = hcopy(m, N), b = hcopy(v, N);
        s.insert(s.end(), a.begin(), a.end());
        s.insert(s.end(), b.begin(), b.end());
        return s;
    };
    return verdict("86-healthy-adamw-step", state(dp, dm, dv), want, 1e-4) |
           verdict("86-healthy-adamw-step challenger", state(cp, cm, cv), want, 1e-4);
}
