// 74-batched-gemv-batch-major. Planted: L2 thrashing. One fp32 weight matrix (16384 x 4096, 256 MB) applied
// to 4 input vectors, the decode step of a small batch: one block per (input, 16-row tile), numbered
// input-major, as a grid (tiles, batch) would be. The blocks resident at once all work on the same input,
// so each input streams all of W through the 50 MB L2 before the next input starts on row 0: every tile
// is fetched from DRAM four times (1 GB read for 256 MB of data) and the L2 hits almost nothing.
// Fixed twin: the same blocks numbered tile-major (the 4 inputs of a tile are adjacent block ids, so they
// run at the same time): each tile comes from DRAM once and from L2 the other three times.
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
#define ROWS 16384
#define K 4096
#define BATCH 4
#define THREADS 256
#define RPW 2                             // rows per warp
#define RPB (THREADS / 32 * RPW)          // rows per block: 16
#define TILES (ROWS / RPB)                // 1024 tiles, 4096 blocks

// y[b][r] = dot(W[r][:], x[b][:]), 2 rows per warp, 16 rows per block; x[b] staged in shared memory.
// The two kernels differ only in how the block id maps to (input b, tile).
extern "C" __global__ void gemv_batch_major(const float4* __restrict__ W4, const float4* __restrict__ x4,
                                            float* __restrict__ y) {
    __shared__ float4 xs[K / 4];
    const int b = blockIdx.x / TILES, tile = blockIdx.x % TILES;  // PLANTED
    for (int c = threadIdx.x; c < K / 4; c += blockDim.x) xs[c] = x4[b * (K / 4) + c];
    __syncthreads();
    const int lane = threadIdx.x & 31, row0 = tile * RPB + (threadIdx.x >> 5) * RPW;
    const float4* w0 = W4 + (size_t)row0 * (K / 4);
    float acc[RPW] = {};
#pragma unroll 4
    for (int c = lane; c < K / 4; c += 32) {
        const float4 xv = xs[c];
#pragma unroll
        for (int j = 0; j < RPW; ++j) {
            const float4 w = w0[j * (K / 4) + c];  // PLANTED
            acc[j] += w.x * xv.x + w.y * xv.y + w.z * xv.z + w.w * xv.w;
        }
    }
#pragma unroll
    for (int j = 0; j < RPW; ++j) {
        float v = acc[j];
        for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
        if (lane == 0) y[b * ROWS + row0 + j] = v;
    }
}

extern "C" __global__ void gemv_tile_major(const float4* __restrict__ W4, const float4* __restrict__ x4,
                                           float* __restrict__ y) {
    __shared__ float4 xs[K / 4];
    const int b = blockIdx.x % BATCH, tile = blockIdx.x / BATCH;
    for (int c = threadIdx.x; c < K / 4; c += blockDim.x) xs[c] = x4[b * (K / 4) + c];
    __syncthreads();
    const int lane = threadIdx.x & 31, row0 = tile * RPB + (threadIdx.x >> 5) * RPW;
    const float4* w0 = W4 + (size_t)row0 * (K / 4);
    float acc[RPW] = {};
#pragma unroll 4
    for (int c = lane; c < K / 4; c += 32) {
        const float4 xv = xs[c];
#pragma unroll
        for (int j = 0; j < RPW; ++j) {
            const float4 w = w0[j * (K / 4) + c];
            acc[j] += w.x * xv.x + w.y * xv.y + w.z * xv.z + w.w * xv.w;
        }
    }
#pragma unroll
    for (int j = 0; j < RPW; ++j) {
        float v = acc[j];
        for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
        if (lane == 0) y[b * ROWS + row0 + j] = v;
    }
}

int main() {
    std::vector<float> hw((size_t)ROWS * K), hx((size_t)BATCH * K);
    for (auto& v : hw) v = 2.0f * frand() - 1.0f;
    for (auto& v : hx) v = 2.0f * frand() - 1.0f;
    float *dw = dcopy(hw), *dx = dcopy(hx);
    float *dbad = dnew<float>((size_t)BATCH * ROWS), *dfix = dnew<float>((size_t)BATCH * ROWS);
    LAUNCH(gemv_batch_major, TILES * BATCH, THREADS, (const float4*)dw, (const float4*)dx, dbad);
    LAUNCH(gemv_tile_major, TILES * BATCH, THREADS, (const float4*)dw, (const float4*)dx, dfix);
    CK(cudaDeviceSynchronize());
    return verdict("74-batched-gemv-batch-major", hcopy(dbad, (size_t)BATCH * ROWS), hcopy(dfix, (size_t)BATCH * ROWS), 1e-3);
}
