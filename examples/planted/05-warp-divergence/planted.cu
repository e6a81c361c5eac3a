// 05-warp-divergence. Planted: a branch that splits every warp. divergent_paths runs path B (on b[j])
// in odd lanes and path A (on a[j]) in even lanes, both long FMA loops, so every warp issues both loops
// with half its lanes masked off. Marked: the branch that splits the warps, the cause a divergence
// finding names (it once marked path B's loop). Fixed twin: uniform_paths gives whole warps one path
// ((warp index) & 1) and maps j so each warp's loads stay contiguous: the results are bit-identical.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>

#define CK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \
    fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); exit(1); } } while (0)

#define NHALF (1u << 21)   // elements per path; 2 * NHALF threads
#define ITER 256           // FMA-loop trips per element
#define THREADS 256

extern "C" __global__ void divergent_paths(const float* __restrict__ a, const float* __restrict__ b,
                                           float* __restrict__ oa, float* __restrict__ ob) {
    unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned j = t >> 1;
    if (t & 1) {                                   // PLANTED: odd lanes take path B, even lanes path A
        float x = b[j], y = 1.0f;
        for (int k = 0; k < ITER; ++k) { x = fmaf(x * x, -0.5f, 0.75f); y = fmaf(y, 0.25f, x); }
        ob[j] = y;
    } else {                                       // even lanes: path A
        float x = a[j], y = 0.0f;
        for (int k = 0; k < ITER; ++k) { x = fmaf(x, 0.999f, 0.01f); y = fmaf(y, 0.5f, x * 0.75f); }
        oa[j] = y;
    }
}

extern "C" __global__ void uniform_paths(const float* __restrict__ a, const float* __restrict__ b,
                                         float* __restrict__ oa, float* __restrict__ ob) {
    unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned w = t >> 5, lane = t & 31;
    unsigned j = ((w >> 1) << 5) | lane;           // warp pair (2p, 2p+1) covers elements 32p .. 32p+31
    if (w & 1) {                                   // odd warps: path B
        float x = b[j], y = 1.0f;
        for (int k = 0; k < ITER; ++k) { x = fmaf(x * x, -0.5f, 0.75f); y = fmaf(y, 0.25f, x); }
        ob[j] = y;
    } else {                                       // even warps: path A
        float x = a[j], y = 0.0f;
        for (int k = 0; k < ITER; ++k) { x = fmaf(x, 0.999f, 0.01f); y = fmaf(y, 0.5f, x * 0.75f); }
        oa[j] = y;
    }
}

int main() {
    size_t bytes = (size_t)NHALF * sizeof(float);
    float *h_a = (float*)malloc(bytes), *h_b = (float*)malloc(bytes);
    float *h_oa[2], *h_ob[2];
    unsigned s = 99u;
    for (unsigned i = 0; i < NHALF; ++i) {
        s = s * 1664525u + 1013904223u; h_a[i] = (s >> 8) * (1.0f / 16777216.0f);
        s = s * 1664525u + 1013904223u; h_b[i] = (s >> 8) * (1.0f / 16777216.0f);
    }
    float *d_a, *d_b, *d_oa[2], *d_ob[2];
    CK(cudaMalloc(&d_a, bytes));
    CK(cudaMalloc(&d_b, bytes));
    CK(cudaMemcpy(d_a, h_a, bytes, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d_b, h_b, bytes, cudaMemcpyHostToDevice));
    for (int v = 0; v < 2; ++v) {
        h_oa[v] = (float*)malloc(bytes);
        h_ob[v] = (float*)malloc(bytes);
        CK(cudaMalloc(&d_oa[v], bytes));
        CK(cudaMalloc(&d_ob[v], bytes));
        CK(cudaMemset(d_oa[v], 0, bytes));
        CK(cudaMemset(d_ob[v], 0, bytes));
    }

    unsigned blocks = 2 * NHALF / THREADS;
    divergent_paths<<<blocks, THREADS>>>(d_a, d_b, d_oa[0], d_ob[0]);
    CK(cudaGetLastError());
    uniform_paths<<<blocks, THREADS>>>(d_a, d_b, d_oa[1], d_ob[1]);
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    for (int v = 0; v < 2; ++v) {
        CK(cudaMemcpy(h_oa[v], d_oa[v], bytes, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(h_ob[v], d_ob[v], bytes, cudaMemcpyDeviceToHost));
    }

    bool ok = memcmp(h_oa[0], h_oa[1], bytes) == 0 && memcmp(h_ob[0], h_ob[1], bytes) == 0;
    double c[2] = {0, 0};
    for (int v = 0; v < 2; ++v)
        for (unsigned i = 0; i < NHALF; ++i) c[v] += h_oa[v][i] + 2.0 * h_ob[v][i];
    printf("%s 05-warp-divergence bad=%.6f fixed=%.6f\n", ok ? "ok" : "MISMATCH", c[0], c[1]);
    CK(cudaFree(d_a));
    CK(cudaFree(d_b));
    for (int v = 0; v < 2; ++v) {
        CK(cudaFree(d_oa[v]));
        CK(cudaFree(d_ob[v]));
        free(h_oa[v]); free(h_ob[v]);
    }
    free(h_a); free(h_b);
    return ok ? 0 : 1;
}
