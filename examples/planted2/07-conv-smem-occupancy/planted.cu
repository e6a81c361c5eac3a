// 07-conv-smem-occupancy. Planted: low theoretical occupancy from shared memory. A 7x7 convolution
// stages a 134x134 input tile (70 KB of dynamic shared memory) per 128-thread block: 3 blocks fit on
// an SM, 12 warps of 64 (19%), too few to hide the loads of the staging phase.
// Fixed twin: 32x32 output tiles (a 38x38 input tile, 5.6 KB) with 256 threads: full occupancy.
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
#define W 4096          // 4096 x 4096 output, input padded by 3 on every side
#define R 3
#define WP (W + 2 * R)
#define BIG 128         // bad: 128 x 128 output tile per 128-thread block (one column per thread)
#define SMALL 32        // fixed: 32 x 32 output tile per 256-thread block (4 outputs per thread)

__constant__ float c_filt[(2 * R + 1) * (2 * R + 1)];

extern "C" __global__ void conv7_big_tile(const float* __restrict__ in, float* __restrict__ out) {
    extern __shared__ float tile[];  // PLANTED
    const int TW = BIG + 2 * R;
    int x0 = blockIdx.x * BIG, y0 = blockIdx.y * BIG;
    for (int j = threadIdx.x; j < TW * TW; j += blockDim.x)
        tile[j] = in[(size_t)(y0 + j / TW) * WP + x0 + j % TW];
    __syncthreads();
    int x = threadIdx.x;
    for (int y = 0; y < BIG; ++y) {
        float acc = 0.0f;
        for (int dy = 0; dy <= 2 * R; ++dy)
            for (int dx = 0; dx <= 2 * R; ++dx) acc += c_filt[dy * (2 * R + 1) + dx] * tile[(y + dy) * TW + x + dx];
        out[(size_t)(y0 + y) * W + x0 + x] = acc;
    }
}

extern "C" __global__ void conv7_small_tile(const float* __restrict__ in, float* __restrict__ out) {
    __shared__ float tile[SMALL + 2 * R][SMALL + 2 * R];
    const int TW = SMALL + 2 * R;
    int x0 = blockIdx.x * SMALL, y0 = blockIdx.y * SMALL;
    for (int j = threadIdx.x; j < TW * TW; j += blockDim.x)
        tile[j / TW][j % TW] = in[(size_t)(y0 + j / TW) * WP + x0 + j % TW];
    __syncthreads();
    int x = threadIdx.x % SMALL;
    for (int y = threadIdx.x / SMALL; y < SMALL; y += 8) {
        float acc = 0.0f;
        for (int dy = 0; dy <= 2 * R; ++dy)
            for (int dx = 0; dx <= 2 * R; ++dx) acc += c_filt[dy * (2 * R + 1) + dx] * tile[y + dy][x + dx];
        out[(size_t)(y0 + y) * W + x0 + x] = acc;
    }
}

int main() {
    std::vector<float> hin((size_t)WP * WP), hf((2 * R + 1) * (2 * R + 1));
    for (auto& v : hin) v = frand();
    for (auto& v : hf) v = frand() - 0.5f;
    CK(cudaMemcpyToSymbol(c_filt, hf.data(), hf.size() * sizeof(float)));
    float *din = dcopy(hin), *dbad = dnew<float>((size_t)W * W), *dfix = dnew<float>((size_t)W * W);
    int smem = (BIG + 2 * R) * (BIG + 2 * R) * sizeof(float);
    CK(cudaFuncSetAttribute(conv7_big_tile, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    conv7_big_tile<<<dim3(W / BIG, W / BIG), BIG, smem>>>(din, dbad);
    CK(cudaGetLastError());
    LAUNCH(conv7_small_tile, dim3(W / SMALL, W / SMALL), 256, din, dfix);
    CK(cudaDeviceSynchronize());
    return verdict("07-conv-smem-occupancy", hcopy(dbad, (size_t)W * W), hcopy(dfix, (size_t)W * W), 0.0);
}
