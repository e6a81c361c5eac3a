// 06-tiny-grid. Planted: a launch far too small for the GPU. tiny_grid_map applies a 64-step FMA
// recurrence to 1M floats with only 8 blocks x 128 threads (8 of 132 SMs busy, one warp per scheduler,
// each thread looping over 1024 elements). The cause is the launch configuration, not a statement.
// Fixed twin: wide_grid_map is the same grid-stride code launched with one thread per element.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>

#define CK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \
    fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); exit(1); } } while (0)

#define N (1 << 20)
#define ITER 64
#define THREADS 128
#define TINY_BLOCKS 8

extern "C" __global__ void tiny_grid_map(const float* __restrict__ in, float* __restrict__ out, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        float x = in[i];  // PLANTED
        float y = 0.0f;
        for (int k = 0; k < ITER; ++k) { x = fmaf(x, 0.999f, 0.01f); y = fmaf(y, 0.5f, x); }
        out[i] = y;
    }
}

extern "C" __global__ void wide_grid_map(const float* __restrict__ in, float* __restrict__ out, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        float x = in[i];
        float y = 0.0f;
        for (int k = 0; k < ITER; ++k) { x = fmaf(x, 0.999f, 0.01f); y = fmaf(y, 0.5f, x); }
        out[i] = y;
    }
}

int main() {
    size_t bytes = (size_t)N * sizeof(float);
    float *h_in = (float*)malloc(bytes), *h_bad = (float*)malloc(bytes), *h_fix = (float*)malloc(bytes);
    unsigned s = 6u;
    for (int i = 0; i < N; ++i) { s = s * 1664525u + 1013904223u; h_in[i] = (s >> 8) * (1.0f / 16777216.0f); }
    float *d_in, *d_bad, *d_fix;
    CK(cudaMalloc(&d_in, bytes));
    CK(cudaMalloc(&d_bad, bytes));
    CK(cudaMalloc(&d_fix, bytes));
    CK(cudaMemcpy(d_in, h_in, bytes, cudaMemcpyHostToDevice));
    CK(cudaMemset(d_bad, 0, bytes));
    CK(cudaMemset(d_fix, 0, bytes));

    tiny_grid_map<<<TINY_BLOCKS, THREADS>>>(d_in, d_bad, N);
    CK(cudaGetLastError());
    wide_grid_map<<<N / THREADS, THREADS>>>(d_in, d_fix, N);
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(h_bad, d_bad, bytes, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(h_fix, d_fix, bytes, cudaMemcpyDeviceToHost));

    bool ok = memcmp(h_bad, h_fix, bytes) == 0;
    double cb = 0, cf = 0;
    for (int i = 0; i < N; ++i) { cb += h_bad[i]; cf += h_fix[i]; }
    printf("%s 06-tiny-grid bad=%.6f fixed=%.6f\n", ok ? "ok" : "MISMATCH", cb, cf);
    CK(cudaFree(d_in));
    CK(cudaFree(d_bad));
    CK(cudaFree(d_fix));
    free(h_in); free(h_bad); free(h_fix);
    return ok ? 0 : 1;
}
