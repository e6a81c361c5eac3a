// 75-bilateral-double-exp. Planted: double-precision math from a double literal. A 5x5 bilateral filter
// (edge-preserving denoise) on a 4096 x 4096 float image computes each tap's weight as
// exp(-0.5 * (spatial + range)): the literal 0.5 is a double, so the argument is promoted and exp() resolves
// to the double-precision exp, about 25 FP64 instructions and two conversions per tap, 25 taps a pixel.
// Neighbours come through L1 (each row of a warp's taps is one or two 128-byte lines); the FP64 pipe,
// half the FP32 rate on an H100, sets the time.
// Fixed twin: the same filter with 0.5f and expf (one MUFU.EX2 and a few FP32 instructions per tap).
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
#define W 4096
#define H 4096
#define R 2

extern "C" __global__ void bilateral_promoted(const float* __restrict__ in, float* __restrict__ out,
                                              float inv_s2, float inv_r2) {
    const int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    const float c = in[y * W + x];
    float num = 0.0f, den = 0.0f;
#pragma unroll
    for (int dy = -R; dy <= R; ++dy) {
        const int yy = min(max(y + dy, 0), H - 1);
#pragma unroll
        for (int dx = -R; dx <= R; ++dx) {
            const int xx = min(max(x + dx, 0), W - 1);
            const float v = in[yy * W + xx], d = v - c;
            const float w = exp(-0.5 * ((dx * dx + dy * dy) * inv_s2 + d * d * inv_r2));  // PLANTED
            num += w * v;
            den += w;
        }
    }
    out[y * W + x] = num / den;
}

extern "C" __global__ void bilateral_float(const float* __restrict__ in, float* __restrict__ out,
                                           float inv_s2, float inv_r2) {
    const int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    const float c = in[y * W + x];
    float num = 0.0f, den = 0.0f;
#pragma unroll
    for (int dy = -R; dy <= R; ++dy) {
        const int yy = min(max(y + dy, 0), H - 1);
#pragma unroll
        for (int dx = -R; dx <= R; ++dx) {
            const int xx = min(max(x + dx, 0), W - 1);
            const float v = in[yy * W + xx], d = v - c;
            const float w = expf(-0.5f * ((dx * dx + dy * dy) * inv_s2 + d * d * inv_r2));
            num += w * v;
            den += w;
        }
    }
    out[y * W + x] = num / den;
}

int main() {
    // a smooth gradient with noise and a few hard edges, values in [0, 1]
    std::vector<float> him((size_t)W * H);
    for (int y = 0; y < H; ++y)
        for (int x = 0; x < W; ++x)
            him[(size_t)y * W + x] = 0.5f * ((x / 512 + y / 512) & 1) + 0.25f * x / W + 0.2f * frand();
    float* din = dcopy(him);
    float *dbad = dnew<float>((size_t)W * H), *dfix = dnew<float>((size_t)W * H);
    const float sigma_s = 1.5f, sigma_r = 0.1f;
    const float inv_s2 = 1.0f / (sigma_s * sigma_s), inv_r2 = 1.0f / (sigma_r * sigma_r);
    const dim3 block(32, 8), grid(W / 32, H / 8);
    bilateral_promoted<<<grid, block>>>(din, dbad, inv_s2, inv_r2);
    CK(cudaGetLastError());
    bilateral_float<<<grid, block>>>(din, dfix, inv_s2, inv_r2);
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    return verdict("75-bilateral-double-exp", hcopy(dbad, (size_t)W * H), hcopy(dfix, (size_t)W * H), 1e-4);
}
