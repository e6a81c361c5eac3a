// 03-register-spills. Planted: local-memory traffic from register spills. Each thread keeps 64 running
// values live across a loop; spilling_recurrence is declared __launch_bounds__(1024, 2), which caps
// ptxas at 32 registers, so most of acc[] lives in local memory (STL/LDL every iteration).
// Fixed twin: registered_recurrence is the same code under __launch_bounds__(256): no cap, no spills.
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <cuda_runtime.h>

#define CK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \
    fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); exit(1); } } while (0)

#define LIVE 64              // values each thread keeps live
#define ITERS 32             // loop trips; each touches all LIVE values
#define NIN (1u << 20)       // input table: 4 MB of floats (L2-resident)
#define THREADS 256
#define BLOCKS 2112          // 540K threads: two waves even at 8 blocks/SM

extern "C" __global__ void __launch_bounds__(1024, 2)
spilling_recurrence(const float* __restrict__ in, float* __restrict__ out) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    float acc[LIVE];
#pragma unroll
    for (int j = 0; j < LIVE; ++j) acc[j] = in[(i + j * 97u) & (NIN - 1)];
#pragma unroll 1
    for (int it = 0; it < ITERS; ++it) {
        float x = in[(i + it * 131u) & (NIN - 1)];
#pragma unroll
        for (int j = 0; j < LIVE; ++j)
            acc[j] = fmaf(acc[j], x, acc[(j + 1) % LIVE]);  // PLANTED
    }
    float s = 0.0f;
#pragma unroll
    for (int j = 0; j < LIVE; ++j) s += acc[j];
    out[i] = s;
}

extern "C" __global__ void __launch_bounds__(256)
registered_recurrence(const float* __restrict__ in, float* __restrict__ out) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    float acc[LIVE];
#pragma unroll
    for (int j = 0; j < LIVE; ++j) acc[j] = in[(i + j * 97u) & (NIN - 1)];
#pragma unroll 1
    for (int it = 0; it < ITERS; ++it) {
        float x = in[(i + it * 131u) & (NIN - 1)];
#pragma unroll
        for (int j = 0; j < LIVE; ++j)
            acc[j] = fmaf(acc[j], x, acc[(j + 1) % LIVE]);
    }
    float s = 0.0f;
#pragma unroll
    for (int j = 0; j < LIVE; ++j) s += acc[j];
    out[i] = s;
}

int main() {
    const size_t nout = (size_t)BLOCKS * THREADS;
    float* h_in = (float*)malloc(NIN * sizeof(float));
    float* h_bad = (float*)malloc(nout * sizeof(float));
    float* h_fix = (float*)malloc(nout * sizeof(float));
    unsigned s = 777u;
    for (unsigned i = 0; i < NIN; ++i) { s = s * 1664525u + 1013904223u; h_in[i] = (s >> 8) * (1.0f / 16777216.0f) * 0.5f; }

    float *d_in, *d_bad, *d_fix;
    CK(cudaMalloc(&d_in, NIN * sizeof(float)));
    CK(cudaMalloc(&d_bad, nout * sizeof(float)));
    CK(cudaMalloc(&d_fix, nout * sizeof(float)));
    CK(cudaMemcpy(d_in, h_in, NIN * sizeof(float), cudaMemcpyHostToDevice));
    CK(cudaMemset(d_bad, 0, nout * sizeof(float)));
    CK(cudaMemset(d_fix, 0, nout * sizeof(float)));

    spilling_recurrence<<<BLOCKS, THREADS>>>(d_in, d_bad);
    CK(cudaGetLastError());
    registered_recurrence<<<BLOCKS, THREADS>>>(d_in, d_fix);
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(h_bad, d_bad, nout * sizeof(float), cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(h_fix, d_fix, nout * sizeof(float), cudaMemcpyDeviceToHost));

    bool ok = true;
    double cb = 0, cf = 0;
    for (size_t i = 0; i < nout; ++i) {
        cb += h_bad[i]; cf += h_fix[i];
        if (!(fabs((double)h_bad[i] - h_fix[i]) <= 1e-5 * fabs((double)h_fix[i]) + 1e-6)) ok = false;
    }
    printf("%s 03-register-spills bad=%.6e fixed=%.6e\n", ok ? "ok" : "MISMATCH", cb, cf);
    CK(cudaFree(d_in));
    CK(cudaFree(d_bad));
    CK(cudaFree(d_fix));
    free(h_in); free(h_bad); free(h_fix);
    return ok ? 0 : 1;
}
