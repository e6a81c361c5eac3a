// 04-register-limited-occupancy. Planted: registers cap occupancy. scale_sum_early_coefs loads its 116
// epilogue coefficients before a latency-bound streaming loop (y = 0.5 x, s += x; one load in flight per
// warp); the loop's stores keep the compiler from deferring them, so all stay live: 128 registers/thread,
// 2 blocks of 256 per SM, 25% theoretical occupancy, too few warps to hide DRAM latency.
// Fixed twin: scale_sum_late_coefs loads them after the loop (32 registers, 100% occupancy), same math.
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <cstring>
#include <cuda_runtime.h>

#define CK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \
    fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); exit(1); } } while (0)

#define N (1 << 26)        // streamed floats: 256 MB in, 256 MB out
#define NCOEF 116          // per-thread epilogue coefficients (116 live values -> 128 registers)
#define THREADS 256
#define BLOCKS 2112        // 540K threads: 8 waves at 2 blocks/SM, 2 waves at 8 blocks/SM

extern "C" __global__ void __launch_bounds__(THREADS)
scale_sum_early_coefs(const float* __restrict__ x, const float* coef, float* y, float* out) {
    unsigned t = blockIdx.x * blockDim.x + threadIdx.x, stride = gridDim.x * blockDim.x;
    float c[NCOEF];
#pragma unroll
    for (int j = 0; j < NCOEF; ++j) c[j] = coef[j * THREADS + threadIdx.x];  // live across the whole loop
    float s = 0.0f;
#pragma unroll 1
    for (unsigned i = t; i < N; i += stride) {
        float v = x[i];  // PLANTED
        y[i] = 0.5f * v;
        s += v;
    }
    float r = s;
#pragma unroll
    for (int j = 0; j < NCOEF; ++j) r = fmaf(r, 0.5f, c[j]);
    out[t] = r;
}

extern "C" __global__ void __launch_bounds__(THREADS)
scale_sum_late_coefs(const float* __restrict__ x, const float* coef, float* y, float* out) {
    unsigned t = blockIdx.x * blockDim.x + threadIdx.x, stride = gridDim.x * blockDim.x;
    float s = 0.0f;
#pragma unroll 1
    for (unsigned i = t; i < N; i += stride) {
        float v = x[i];
        y[i] = 0.5f * v;
        s += v;
    }
    float r = s;
#pragma unroll
    for (int j = 0; j < NCOEF; ++j) r = fmaf(r, 0.5f, coef[j * THREADS + threadIdx.x]);
    out[t] = r;
}

int main() {
    const size_t nout = (size_t)BLOCKS * THREADS;
    float* h_x = (float*)malloc((size_t)N * sizeof(float));
    float* h_c = (float*)malloc(NCOEF * THREADS * sizeof(float));
    float* h_bad = (float*)malloc(nout * sizeof(float));
    float* h_fix = (float*)malloc(nout * sizeof(float));
    unsigned s = 4242u;
    for (size_t i = 0; i < N; ++i) { s = s * 1664525u + 1013904223u; h_x[i] = (s >> 8) * (1.0f / 16777216.0f); }
    for (int i = 0; i < NCOEF * THREADS; ++i) { s = s * 1664525u + 1013904223u; h_c[i] = (s >> 8) * (1.0f / 16777216.0f) - 0.5f; }

    float* h_ybad = (float*)malloc((size_t)N * sizeof(float));
    float* h_yfix = (float*)malloc((size_t)N * sizeof(float));
    float *d_x, *d_c, *d_bad, *d_fix, *d_ybad, *d_yfix;
    CK(cudaMalloc(&d_x, (size_t)N * sizeof(float)));
    CK(cudaMalloc(&d_c, NCOEF * THREADS * sizeof(float)));
    CK(cudaMalloc(&d_bad, nout * sizeof(float)));
    CK(cudaMalloc(&d_fix, nout * sizeof(float)));
    CK(cudaMalloc(&d_ybad, (size_t)N * sizeof(float)));
    CK(cudaMalloc(&d_yfix, (size_t)N * sizeof(float)));
    CK(cudaMemcpy(d_x, h_x, (size_t)N * sizeof(float), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d_c, h_c, NCOEF * THREADS * sizeof(float), cudaMemcpyHostToDevice));
    CK(cudaMemset(d_bad, 0, nout * sizeof(float)));
    CK(cudaMemset(d_fix, 0, nout * sizeof(float)));
    CK(cudaMemset(d_ybad, 0, (size_t)N * sizeof(float)));
    CK(cudaMemset(d_yfix, 0, (size_t)N * sizeof(float)));

    scale_sum_early_coefs<<<BLOCKS, THREADS>>>(d_x, d_c, d_ybad, d_bad);
    CK(cudaGetLastError());
    scale_sum_late_coefs<<<BLOCKS, THREADS>>>(d_x, d_c, d_yfix, d_fix);
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(h_bad, d_bad, nout * sizeof(float), cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(h_fix, d_fix, nout * sizeof(float), cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(h_ybad, d_ybad, (size_t)N * sizeof(float), cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(h_yfix, d_yfix, (size_t)N * sizeof(float), cudaMemcpyDeviceToHost));

    bool ok = memcmp(h_ybad, h_yfix, (size_t)N * sizeof(float)) == 0 && h_yfix[12345] == 0.5f * h_x[12345];
    double cb = 0, cf = 0;
    for (size_t i = 0; i < nout; ++i) {
        cb += h_bad[i]; cf += h_fix[i];
        if (!(fabs((double)h_bad[i] - h_fix[i]) <= 1e-5 * fabs((double)h_fix[i]) + 1e-5)) ok = false;
    }
    printf("%s 04-register-limited-occupancy bad=%.6f fixed=%.6f\n", ok ? "ok" : "MISMATCH", cb, cf);
    CK(cudaFree(d_x));
    CK(cudaFree(d_c));
    CK(cudaFree(d_bad));
    CK(cudaFree(d_fix));
    CK(cudaFree(d_ybad));
    CK(cudaFree(d_yfix));
    free(h_x); free(h_c); free(h_bad); free(h_fix); free(h_ybad); free(h_yfix);
    return ok ? 0 : 1;
}
