// 76-palette-quantize-powf. Planted: squares taken with powf. Maps each pixel of a 4096 x 4096 planar
// float RGB image to the nearest of 8 palette colours (an 8-colour e-paper display), writing the index and
// the squared error (kept for error diffusion). The distance is written as in the formula,
// powf(r - pr, 2.0f) + ...: 24 powf calls a pixel, and CUDA's powf does not special-case the exponent 2
// (about 70 instructions each: logarithm, exponential, special-value checks), so instruction issue sets
// the time of a kernel that should stream 17 bytes a pixel at DRAM speed.
// Fixed twin: the same search with d = dr * dr + dg * dg + db * db (a multiply and two FMAs a colour).
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
#define WIDTH 4096
#define HEIGHT 4096
#define NPIX (WIDTH * HEIGHT)
#define NPAL 8
#define THREADS 256

__constant__ float3 c_pal[NPAL];

extern "C" __global__ void quantize_powf(const float* __restrict__ r, const float* __restrict__ g,
                                         const float* __restrict__ b, unsigned char* __restrict__ idx,
                                         float* __restrict__ err) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    const float pr = r[i], pg = g[i], pb = b[i];
    float best = 3.4e38f;
    int bi = 0;
#pragma unroll
    for (int k = 0; k < NPAL; ++k) {
        const float d = powf(pr - c_pal[k].x, 2.0f) + powf(pg - c_pal[k].y, 2.0f) + powf(pb - c_pal[k].z, 2.0f);  // PLANTED
        if (d < best) { best = d; bi = k; }
    }
    idx[i] = (unsigned char)bi;
    err[i] = best;
}

extern "C" __global__ void quantize_mul(const float* __restrict__ r, const float* __restrict__ g,
                                        const float* __restrict__ b, unsigned char* __restrict__ idx,
                                        float* __restrict__ err) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    const float pr = r[i], pg = g[i], pb = b[i];
    float best = 3.4e38f;
    int bi = 0;
#pragma unroll
    for (int k = 0; k < NPAL; ++k) {
        const float dr = pr - c_pal[k].x, dg = pg - c_pal[k].y, db = pb - c_pal[k].z;
        const float d = dr * dr + dg * dg + db * db;
        if (d < best) { best = d; bi = k; }
    }
    idx[i] = (unsigned char)bi;
    err[i] = best;
}

int main() {
    // black, white, red, green, blue, yellow, orange, grey
    const float3 hpal[NPAL] = {{0.f, 0.f, 0.f}, {1.f, 1.f, 1.f}, {0.8f, 0.1f, 0.1f}, {0.1f, 0.6f, 0.2f},
                               {0.1f, 0.2f, 0.7f}, {0.95f, 0.85f, 0.1f}, {0.9f, 0.5f, 0.1f}, {0.5f, 0.5f, 0.5f}};
    CK(cudaMemcpyToSymbol(c_pal, hpal, sizeof(hpal)));
    std::vector<float> hr(NPIX), hg(NPIX), hb(NPIX);
    for (int i = 0; i < NPIX; ++i) { hr[i] = frand(); hg[i] = frand(); hb[i] = frand(); }
    float *dr = dcopy(hr), *dg = dcopy(hg), *db = dcopy(hb);
    unsigned char *ibad = dnew<unsigned char>(NPIX), *ifix = dnew<unsigned char>(NPIX);
    float *ebad = dnew<float>(NPIX), *efix = dnew<float>(NPIX);
    LAUNCH(quantize_powf, NPIX / THREADS, THREADS, dr, dg, db, ibad, ebad);
    LAUNCH(quantize_mul, NPIX / THREADS, THREADS, dr, dg, db, ifix, efix);
    CK(cudaDeviceSynchronize());
    // the squared errors are compared (a near-tie may pick another index of equal error)
    return verdict("76-palette-quantize-powf", hcopy(ebad, NPIX), hcopy(efix, NPIX), 1e-3);
}
