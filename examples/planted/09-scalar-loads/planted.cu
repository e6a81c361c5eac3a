// 09-scalar-loads. Planted: non-vectorized access in a bandwidth-bound kernel. saxpy_scalar computes
// y = a*x + y over 64M floats with a coalesced grid-stride loop of 32-bit loads and stores (LDG.E /
// STG.E), 4x the memory instructions and L1 requests of the 128-bit form.
// Fixed twin: saxpy_float4 does the same element-wise FMAs through float4 loads/stores (LDG.E.128).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>

#define CK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \
    fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); exit(1); } } while (0)

#define N (1 << 26)      // 64M floats: x 256 MB, each y 256 MB
#define THREADS 256
#define BLOCKS 8192      // grid-stride; ~8 waves of 8 blocks/SM on 132 SMs

extern "C" __global__ void saxpy_scalar(float a, const float* __restrict__ x, float* __restrict__ y) {
    for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < N; i += gridDim.x * blockDim.x)
        y[i] = fmaf(a, x[i], y[i]);  // PLANTED
}

extern "C" __global__ void saxpy_float4(float a, const float4* __restrict__ x, float4* __restrict__ y) {
    for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < N / 4; i += gridDim.x * blockDim.x) {
        float4 xv = x[i], yv = y[i];
        yv.x = fmaf(a, xv.x, yv.x);
        yv.y = fmaf(a, xv.y, yv.y);
        yv.z = fmaf(a, xv.z, yv.z);
        yv.w = fmaf(a, xv.w, yv.w);
        y[i] = yv;
    }
}

int main() {
    size_t bytes = (size_t)N * sizeof(float);
    float *h_x = (float*)malloc(bytes), *h_y = (float*)malloc(bytes);
    float *h_bad = (float*)malloc(bytes), *h_fix = (float*)malloc(bytes);
    unsigned s = 9u;
    for (size_t i = 0; i < N; ++i) {
        s = s * 1664525u + 1013904223u; h_x[i] = (s >> 8) * (1.0f / 16777216.0f);
        s = s * 1664525u + 1013904223u; h_y[i] = (s >> 8) * (1.0f / 16777216.0f) - 0.5f;
    }
    float *d_x, *d_ybad, *d_yfix;
    CK(cudaMalloc(&d_x, bytes));
    CK(cudaMalloc(&d_ybad, bytes));
    CK(cudaMalloc(&d_yfix, bytes));
    CK(cudaMemcpy(d_x, h_x, bytes, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d_ybad, h_y, bytes, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d_yfix, h_y, bytes, cudaMemcpyHostToDevice));

    const float a = 2.5f;
    saxpy_scalar<<<BLOCKS, THREADS>>>(a, d_x, d_ybad);
    CK(cudaGetLastError());
    saxpy_float4<<<BLOCKS, THREADS>>>(a, reinterpret_cast<const float4*>(d_x), reinterpret_cast<float4*>(d_yfix));
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(h_bad, d_ybad, bytes, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(h_fix, d_yfix, bytes, cudaMemcpyDeviceToHost));

    bool ok = memcmp(h_bad, h_fix, bytes) == 0 && h_fix[777] == fmaf(a, h_x[777], h_y[777]);
    double cb = 0, cf = 0;
    for (size_t i = 0; i < N; ++i) { cb += h_bad[i]; cf += h_fix[i]; }
    printf("%s 09-scalar-loads bad=%.6f fixed=%.6f\n", ok ? "ok" : "MISMATCH", cb, cf);
    CK(cudaFree(d_x));
    CK(cudaFree(d_ybad));
    CK(cudaFree(d_yfix));
    free(h_x); free(h_y); free(h_bad); free(h_fix);
    return ok ? 0 : 1;
}
