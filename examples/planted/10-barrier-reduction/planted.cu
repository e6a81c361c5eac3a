// 10-barrier-reduction. Planted: barrier-heavy block reductions. row_stats_tree computes the mean and
// (two-pass) variance of each 1024-float row with the classic shared-memory tree in a 1024-thread block,
// a __syncthreads() after every halving step, the last five inside a single warp: 24 block-wide
// barriers per row, executed by all 32 warps. Fixed twin: row_stats_shfl uses 256 threads x 4 elements,
// reduces each warp with shuffles and then 8 partials from shared memory: one __syncthreads() per sum.
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <cuda_runtime.h>

#define CK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \
    fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); exit(1); } } while (0)

#define COLS 1024        // floats per row; one row per block
#define ROWS 32768       // 128 MB of floats
#define FIX_THREADS 256  // fixed twin: 4 elements per thread

// The step and its barrier share one line: ncu charges a barrier wait to the instruction after the
// barrier, which is the next step. Warps with no active lane branch over the step (the __syncwarp keeps
// ptxas from turning it into predicated shared loads/stores that idle warps would still issue).
__device__ __forceinline__ float block_sum_tree(float v, float* sm) {
    const unsigned t = threadIdx.x, warp_first = t & ~31u;
    sm[t] = v;
    __syncthreads();
#pragma unroll
    for (unsigned k = COLS / 2; k > 0; k >>= 1) {
        if (warp_first < k) { if (t < k) { v += sm[t + k]; sm[t] = v; } __syncwarp(); } __syncthreads();  // PLANTED
    }
    float r = sm[0];
    __syncthreads();  // every thread has read sm[0] before sm is reused
    return r;
}

extern "C" __global__ void __launch_bounds__(COLS)
row_stats_tree(const float* __restrict__ x, float* __restrict__ mean, float* __restrict__ var) {
    __shared__ float sm[COLS];
    float v = x[(size_t)blockIdx.x * COLS + threadIdx.x];
    float m = block_sum_tree(v, sm) * (1.0f / COLS);
    float d = v - m;
    float q = block_sum_tree(d * d, sm) * (1.0f / COLS);
    if (threadIdx.x == 0) { mean[blockIdx.x] = m; var[blockIdx.x] = q; }
}

__device__ __forceinline__ float block_sum_shfl(float v, float* partials) {
    unsigned lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    if (lane == 0) partials[warp] = v;
    __syncthreads();
    float4 a = *reinterpret_cast<const float4*>(partials), b = *reinterpret_cast<const float4*>(partials + 4);
    return ((a.x + a.y) + (a.z + a.w)) + ((b.x + b.y) + (b.z + b.w));  // FIX_THREADS / 32 == 8 partials
}

extern "C" __global__ void __launch_bounds__(FIX_THREADS)
row_stats_shfl(const float* __restrict__ x, float* __restrict__ mean, float* __restrict__ var) {
    __shared__ __align__(16) float partials[2][FIX_THREADS / 32];  // one slot set per sum: no barrier between
    const float* row = x + (size_t)blockIdx.x * COLS + threadIdx.x;
    float v0 = row[0], v1 = row[FIX_THREADS], v2 = row[2 * FIX_THREADS], v3 = row[3 * FIX_THREADS];
    float m = block_sum_shfl((v0 + v1) + (v2 + v3), partials[0]) * (1.0f / COLS);
    float d0 = v0 - m, d1 = v1 - m, d2 = v2 - m, d3 = v3 - m;
    float q = block_sum_shfl((d0 * d0 + d1 * d1) + (d2 * d2 + d3 * d3), partials[1]) * (1.0f / COLS);
    if (threadIdx.x == 0) { mean[blockIdx.x] = m; var[blockIdx.x] = q; }
}

int main() {
    size_t n = (size_t)ROWS * COLS;
    float* h_x = (float*)malloc(n * sizeof(float));
    float *h_m[2], *h_v[2];
    unsigned s = 10u;
    for (size_t i = 0; i < n; ++i) { s = s * 1664525u + 1013904223u; h_x[i] = (s >> 8) * (1.0f / 16777216.0f) + (float)(i / COLS % 7); }
    float *d_x, *d_m[2], *d_v[2];
    CK(cudaMalloc(&d_x, n * sizeof(float)));
    CK(cudaMemcpy(d_x, h_x, n * sizeof(float), cudaMemcpyHostToDevice));
    for (int k = 0; k < 2; ++k) {
        h_m[k] = (float*)malloc(ROWS * sizeof(float));
        h_v[k] = (float*)malloc(ROWS * sizeof(float));
        CK(cudaMalloc(&d_m[k], ROWS * sizeof(float)));
        CK(cudaMalloc(&d_v[k], ROWS * sizeof(float)));
        CK(cudaMemset(d_m[k], 0, ROWS * sizeof(float)));
        CK(cudaMemset(d_v[k], 0, ROWS * sizeof(float)));
    }

    row_stats_tree<<<ROWS, COLS>>>(d_x, d_m[0], d_v[0]);
    CK(cudaGetLastError());
    row_stats_shfl<<<ROWS, FIX_THREADS>>>(d_x, d_m[1], d_v[1]);
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    for (int k = 0; k < 2; ++k) {
        CK(cudaMemcpy(h_m[k], d_m[k], ROWS * sizeof(float), cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(h_v[k], d_v[k], ROWS * sizeof(float), cudaMemcpyDeviceToHost));
    }

    bool ok = true;
    double c[2] = {0, 0};
    for (int r = 0; r < ROWS; ++r) {
        for (int k = 0; k < 2; ++k) c[k] += h_m[k][r] + h_v[k][r];
        if (fabs((double)h_m[0][r] - h_m[1][r]) > 1e-5 * fabs((double)h_m[1][r]) + 1e-6) ok = false;
        if (fabs((double)h_v[0][r] - h_v[1][r]) > 1e-4 * fabs((double)h_v[1][r]) + 1e-6) ok = false;
    }
    for (int r = 0; ok && r < ROWS; r += 1237) {  // spot-check rows against a host computation
        double sm = 0, sq = 0;
        for (int i = 0; i < COLS; ++i) sm += h_x[(size_t)r * COLS + i];
        sm /= COLS;
        for (int i = 0; i < COLS; ++i) { double d = h_x[(size_t)r * COLS + i] - sm; sq += d * d; }
        sq /= COLS;
        if (fabs(sm - h_m[1][r]) > 1e-5 * fabs(sm) + 1e-6 || fabs(sq - h_v[1][r]) > 1e-3 * sq + 1e-6) ok = false;
    }
    printf("%s 10-barrier-reduction bad=%.6f fixed=%.6f\n", ok ? "ok" : "MISMATCH", c[0], c[1]);
    CK(cudaFree(d_x));
    for (int k = 0; k < 2; ++k) {
        CK(cudaFree(d_m[k]));
        CK(cudaFree(d_v[k]));
        free(h_m[k]); free(h_v[k]);
    }
    free(h_x);
    return ok ? 0 : 1;
}
