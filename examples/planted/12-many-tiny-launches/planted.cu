// 12-many-tiny-launches. Planted: launch overhead. y = 2x + 0.5 over 1M floats is done as 256 launches of
// slice_scale_bias, each covering one 4096-element slice (16 blocks, ~2 us of work): launch latency and
// ramp-up/tail of each tiny grid dominate. The cause is the launch pattern, not a statement.
// Fixed twin: full_scale_bias does the same element-wise work in a single launch over all 1M elements.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>

#define CK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \
    fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); exit(1); } } while (0)

#define N (1 << 20)
#define SLICE 4096
#define THREADS 256

extern "C" __global__ void slice_scale_bias(const float* __restrict__ x, float* __restrict__ y, int offset) {
    int i = offset + blockIdx.x * blockDim.x + threadIdx.x;
    y[i] = fmaf(2.0f, x[i], 0.5f);  // PLANTED
}

extern "C" __global__ void full_scale_bias(const float* __restrict__ x, float* __restrict__ y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    y[i] = fmaf(2.0f, x[i], 0.5f);
}

int main() {
    size_t bytes = (size_t)N * sizeof(float);
    float *h_x = (float*)malloc(bytes), *h_bad = (float*)malloc(bytes), *h_fix = (float*)malloc(bytes);
    unsigned s = 12u;
    for (int i = 0; i < N; ++i) { s = s * 1664525u + 1013904223u; h_x[i] = (s >> 8) * (1.0f / 16777216.0f) - 0.5f; }
    float *d_x, *d_bad, *d_fix;
    CK(cudaMalloc(&d_x, bytes));
    CK(cudaMalloc(&d_bad, bytes));
    CK(cudaMalloc(&d_fix, bytes));
    CK(cudaMemcpy(d_x, h_x, bytes, cudaMemcpyHostToDevice));
    CK(cudaMemset(d_bad, 0, bytes));
    CK(cudaMemset(d_fix, 0, bytes));

    for (int off = 0; off < N; off += SLICE) {  // 256 launches
        slice_scale_bias<<<SLICE / THREADS, THREADS>>>(d_x, d_bad, off);
        CK(cudaGetLastError());
    }
    full_scale_bias<<<N / THREADS, THREADS>>>(d_x, d_fix);
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(h_bad, d_bad, bytes, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(h_fix, d_fix, bytes, cudaMemcpyDeviceToHost));

    bool ok = memcmp(h_bad, h_fix, bytes) == 0 && h_fix[N - 1] == fmaf(2.0f, h_x[N - 1], 0.5f);
    double cb = 0, cf = 0;
    for (int i = 0; i < N; ++i) { cb += h_bad[i]; cf += h_fix[i]; }
    printf("%s 12-many-tiny-launches bad=%.6f fixed=%.6f\n", ok ? "ok" : "MISMATCH", cb, cf);
    CK(cudaFree(d_x));
    CK(cudaFree(d_bad));
    CK(cudaFree(d_fix));
    free(h_x); free(h_bad); free(h_fix);
    return ok ? 0 : 1;
}
