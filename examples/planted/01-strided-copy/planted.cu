// 01-strided-copy. Planted: uncoalesced global access. strided_copy copies 4M floats, but thread t
// handles element (t % 128K) * 32 + t / 128K, so the 32 lanes of a warp touch 32 different 128-byte
// lines (32 sectors per request instead of 4) on both the load and the store.
// Fixed twin: coalesced_copy maps consecutive threads to consecutive floats (same bytes, same result).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>

#define CK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \
    fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); exit(1); } } while (0)

#define LOG2N 22                 // 4M floats = 16 MB per buffer (in + out fit in the 50 MB L2)
#define N (1u << LOG2N)
#define LOG2COLS (LOG2N - 5)     // view the buffer as 32 x (N/32): thread t -> (col t % cols, row t / cols)
#define THREADS 256

extern "C" __global__ void strided_copy(const float* __restrict__ in, float* __restrict__ out) {
    unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned idx = ((t & ((1u << LOG2COLS) - 1)) << 5) | (t >> LOG2COLS);  // neighbours 32 floats apart
    out[idx] = in[idx];  // PLANTED
}

extern "C" __global__ void coalesced_copy(const float* __restrict__ in, float* __restrict__ out) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    out[i] = in[i];
}

int main() {
    size_t bytes = (size_t)N * sizeof(float);
    float* h_in = (float*)malloc(bytes);
    float* h_bad = (float*)malloc(bytes);
    float* h_fix = (float*)malloc(bytes);
    unsigned s = 12345u;
    for (unsigned i = 0; i < N; ++i) { s = s * 1664525u + 1013904223u; h_in[i] = (s >> 8) * (1.0f / 16777216.0f) + 0.5f; }

    float *d_in, *d_bad, *d_fix;
    CK(cudaMalloc(&d_in, bytes));
    CK(cudaMalloc(&d_bad, bytes));
    CK(cudaMalloc(&d_fix, bytes));
    CK(cudaMemcpy(d_in, h_in, bytes, cudaMemcpyHostToDevice));
    CK(cudaMemset(d_bad, 0, bytes));
    CK(cudaMemset(d_fix, 0, bytes));

    strided_copy<<<N / THREADS, THREADS>>>(d_in, d_bad);
    CK(cudaGetLastError());
    coalesced_copy<<<N / THREADS, THREADS>>>(d_in, d_fix);
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(h_bad, d_bad, bytes, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(h_fix, d_fix, bytes, cudaMemcpyDeviceToHost));

    double cb = 0, cf = 0;
    for (unsigned i = 0; i < N; ++i) { cb += h_bad[i]; cf += h_fix[i]; }
    bool ok = memcmp(h_bad, h_fix, bytes) == 0 && memcmp(h_fix, h_in, bytes) == 0;
    printf("%s 01-strided-copy bad=%.6f fixed=%.6f\n", ok ? "ok" : "MISMATCH", cb, cf);
    CK(cudaFree(d_in));
    CK(cudaFree(d_bad));
    CK(cudaFree(d_fix));
    free(h_in); free(h_bad); free(h_fix);
    return ok ? 0 : 1;
}
