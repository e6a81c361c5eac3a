// 92-pixelnorm-nchw-warp-per-pixel. Planted: uncoalesced global access. Pixel-wise feature normalization
// (StyleGAN's PixelNorm: y = x / sqrt(mean over channels of x^2 + eps)) of an NCHW fp32 tensor (48 x 256 x 64 x 64,
// 192 MB), written the way it would be for NHWC: a warp per pixel, lane l holding channels l, l+32, ..., and a
// shuffle reduction. In NCHW consecutive channels are H*W floats (16 KB) apart, so every load and store of a warp
// touches 32 sectors in 32 lines for 128 useful bytes; the 8 warps of a block (8 adjacent pixels) share those
// sectors through L1, but each request still costs 32 sector lookups and each store 32 partial sector writes.
// Fixed twin: 32 adjacent pixels per block, one a lane, each of the 8 warps taking 32 of the channels (every access
// a coalesced 128-byte row); the 8 partial sums meet in shared memory. One read and one write per element in both.
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
#define BATCH 48
#define CH 256
#define HW (64 * 64)
#define PIXELS (BATCH * HW)
#define THREADS 256
#define EPS 1e-8f

extern "C" __global__ void pixelnorm_warp_per_pixel(const float* __restrict__ x, float* __restrict__ y) {
    const unsigned lane = threadIdx.x & 31;
    const unsigned pix = blockIdx.x * (THREADS / 32) + (threadIdx.x >> 5);  // image n, position p
    const size_t base = (size_t)(pix / HW) * CH * HW + pix % HW;
    float v[CH / 32], ss = 0.0f;
#pragma unroll
    for (int k = 0; k < CH / 32; ++k) { v[k] = x[base + (size_t)(lane + 32 * k) * HW]; ss += v[k] * v[k]; }  // PLANTED
#pragma unroll
    for (int o = 16; o; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
    const float r = rsqrtf(ss * (1.0f / CH) + EPS);
#pragma unroll
    for (int k = 0; k < CH / 32; ++k) y[base + (size_t)(lane + 32 * k) * HW] = v[k] * r;  // PLANTED
}

extern "C" __global__ void pixelnorm_pixel_per_lane(const float* __restrict__ x, float* __restrict__ y) {
    __shared__ float part[THREADS / 32][32];
    const unsigned lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const unsigned pix = blockIdx.x * 32 + lane;  // 32 adjacent pixels of one image (HW is a multiple of 32)
    const size_t base = (size_t)(pix / HW) * CH * HW + pix % HW;
    float v[CH / 8], ss = 0.0f;
#pragma unroll
    for (int k = 0; k < CH / 8; ++k) { v[k] = x[base + (size_t)(warp * (CH / 8) + k) * HW]; ss += v[k] * v[k]; }
    part[warp][lane] = ss;
    __syncthreads();
    ss = 0.0f;
#pragma unroll
    for (int w = 0; w < THREADS / 32; ++w) ss += part[w][lane];
    const float r = rsqrtf(ss * (1.0f / CH) + EPS);
#pragma unroll
    for (int k = 0; k < CH / 8; ++k) y[base + (size_t)(warp * (CH / 8) + k) * HW] = v[k] * r;
}

int main() {
    const size_t total = (size_t)PIXELS * CH;
    std::vector<float> hx(total);
    for (auto& v : hx) v = 2.0f * frand() - 1.0f;
    float* dx = dcopy(hx);
    float *yb = dnew<float>(total), *yf = dnew<float>(total);
    LAUNCH(pixelnorm_warp_per_pixel, PIXELS / (THREADS / 32), THREADS, dx, yb);
    LAUNCH(pixelnorm_pixel_per_lane, PIXELS / 32, THREADS, dx, yf);
    CK(cudaDeviceSynchronize());
    return verdict("92-pixelnorm-nchw-warp-per-pixel", hcopy(yb, total), hcopy(yf, total), 1e-4);
}
