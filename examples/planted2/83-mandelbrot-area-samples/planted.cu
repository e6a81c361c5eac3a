// 83-mandelbrot-area-samples. Planted: warp divergence. Monte Carlo estimate of the Mandelbrot set's area: 2M
// random points c of [-2, 0.5] x [0, 1.25], one a thread, each iterated z = z^2 + c until it escapes or reaches
// 1024 steps. A quarter of the points never escape, so nearly every warp runs all 1024 steps while most of its
// lanes escaped after a few (253 steps a point on average): about 8 of 32 lanes do work per instruction.
// Fixed twin: each warp owns 256 points and refills a lane with the warp's next point as soon as its point is
// done (checked every 16 steps, with a ballot): lanes stay busy, the same step count for every point.
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
#define N (1u << 21)
#define MAXIT 1024
#define THREADS 256
#define CHUNK 256   // points a warp owns in the twin
#define BATCH 16    // steps between refills

__device__ __forceinline__ bool bounded(float x, float y) { return fmaf(x, x, y * y) <= 4.f; }
__device__ __forceinline__ void step(float& x, float& y, float2 c) {
    float xn = fmaf(x, x, fmaf(-y, y, c.x)); y = fmaf(x + x, y, c.y); x = xn; }

extern "C" __global__ void escape_per_point(const float2* __restrict__ pts, float* __restrict__ steps) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    float2 c = pts[i];
    float x = 0.f, y = 0.f;
    int it = 0;
    while (it < MAXIT && bounded(x, y)) { step(x, y, c); ++it; }  // PLANTED
    steps[i] = (float)it;
}

extern "C" __global__ void escape_refill(const float2* __restrict__ pts, float* __restrict__ steps) {
    const unsigned lane = threadIdx.x & 31, below = (1u << lane) - 1;
    const unsigned first = (blockIdx.x * blockDim.x + threadIdx.x) / 32 * CHUNK, last = first + CHUNK;
    unsigned i = first + lane, next = first + 32;  // this lane's point; the warp's next unclaimed point
    float2 c = pts[i];
    float x = 0.f, y = 0.f;
    int it = 0;  // MAXIT once the warp's points run out
    for (;;) {
#pragma unroll
        for (int s = 0; s < BATCH; ++s)
            if (it < MAXIT && bounded(x, y)) { step(x, y, c); ++it; }
        bool done = i < last && !(it < MAXIT && bounded(x, y));
        unsigned m = __ballot_sync(0xffffffffu, done);
        if (done) {
            steps[i] = (float)it;
            i = next + __popc(m & below);
            x = y = 0.f;
            it = i < last ? 0 : MAXIT;
            if (i < last) c = pts[i];
        }
        next += __popc(m);
        if (__all_sync(0xffffffffu, i >= last)) break;
    }
}

int main() {
    std::vector<float2> hp(N);
    for (auto& p : hp) { p.x = -2.f + 2.5f * frand(); p.y = 1.25f * frand(); }
    float2* dp = dcopy(hp);
    float *dbad = dnew<float>(N), *dfix = dnew<float>(N);
    LAUNCH(escape_per_point, N / THREADS, THREADS, dp, dbad);
    LAUNCH(escape_refill, N / CHUNK * 32 / THREADS, THREADS, dp, dfix);
    CK(cudaDeviceSynchronize());
    return verdict("83-mandelbrot-area-samples", hcopy(dbad, N), hcopy(dfix, N), 0.0);
}
