// 63-healthy-blur7-register-tiles. Healthy. A 7x7 blur of a 4096 x 4096 image (weights in constant memory).
// Each block stages a 38 x 70 input tile (its 32 x 64 outputs and the 3-pixel halo; the input carries a zero
// border, so no index is clamped) in shared memory, one barrier, then each thread computes 8 outputs down a
// column from a 14-value window per filter column held in registers: 4 FMAs per shared load. About 10 FLOPs per
// DRAM byte, under the FP32 ridge (about 20 on an H100): DRAM sets the time, with the FMA pipe at about half of
// its peak. An image filter, not a matrix product: there is nothing for tensor cores to do.
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
#define R 3
#define P (W + 2 * R)         // the stored width: the image and its zero border
#define TX 32
#define TY 64
#define RY 8                  // outputs per thread, down a column
__constant__ float c_w[(2 * R + 1) * (2 * R + 1)];

extern "C" __global__ void __launch_bounds__(TX * (TY / RY)) blur7_tiles(const float* __restrict__ in,
                                                                        float* __restrict__ out) {
    __shared__ float t[TY + 2 * R][TX + 2 * R];
    const size_t ox = (size_t)blockIdx.x * TX, oy = (size_t)blockIdx.y * TY;
    const int tid = threadIdx.y * TX + threadIdx.x;
    for (int k = tid; k < (TY + 2 * R) * (TX + 2 * R); k += TX * (TY / RY)) {
        int j = k / (TX + 2 * R), i = k % (TX + 2 * R);
        t[j][i] = in[(oy + j) * P + ox + i];
    }
    __syncthreads();
    float acc[RY];
#pragma unroll
    for (int o = 0; o < RY; ++o) acc[o] = 0.0f;
    const int y0 = threadIdx.y * RY;
#pragma unroll
    for (int dx = 0; dx <= 2 * R; ++dx) {
        float v[RY + 2 * R];
#pragma unroll
        for (int r = 0; r < RY + 2 * R; ++r) v[r] = t[y0 + r][threadIdx.x + dx];
#pragma unroll
        for (int o = 0; o < RY; ++o)
#pragma unroll
            for (int dy = 0; dy <= 2 * R; ++dy) acc[o] = fmaf(c_w[dy * (2 * R + 1) + dx], v[o + dy], acc[o]);
    }
#pragma unroll
    for (int o = 0; o < RY; ++o) out[(oy + y0 + o) * W + ox + threadIdx.x] = acc[o];
}

int main() {
    std::vector<float> h((size_t)P * P, 0.0f), wt((2 * R + 1) * (2 * R + 1));
    for (size_t y = R; y < W + R; ++y)
        for (size_t x = R; x < W + R; ++x) h[y * P + x] = frand();
    for (int dy = 0; dy <= 2 * R; ++dy)
        for (int dx = 0; dx <= 2 * R; ++dx) wt[dy * (2 * R + 1) + dx] = 1.0f / (1 + abs(dy - R) + abs(dx - R));
    std::vector<float> ref((size_t)W * W);
    for (size_t y = 0; y < W; ++y)
        for (size_t x = 0; x < W; ++x) {
            float a = 0.0f;  // the kernel's order: filter column by column, rows within
            for (int dx = 0; dx <= 2 * R; ++dx)
                for (int dy = 0; dy <= 2 * R; ++dy) a = fmaf(wt[dy * (2 * R + 1) + dx], h[(y + dy) * P + x + dx], a);
            ref[y * W + x] = a;
        }
    CK(cudaMemcpyToSymbol(c_w, wt.data(), sizeof(float) * wt.size()));
    float *din = dcopy(h), *dout = dnew<float>((size_t)W * W);
    LAUNCH(blur7_tiles, dim3(W / TX, W / TY), dim3(TX, TY / RY), din, dout);
    CK(cudaDeviceSynchronize());
    return verdict("63-healthy-blur7-register-tiles", hcopy(dout, (size_t)W * W), ref, 1e-5);
}
