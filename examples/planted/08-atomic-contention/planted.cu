// 08-atomic-contention. Planted: every thread atomicAdd()s each of its elements into the same global
// float (out[0]): 2M same-address reductions that the L2 must apply one after another.
// Fixed twin: block_reduced_sum sums in registers, reduces each warp with __shfl_down_sync and each
// block through shared memory, then issues one atomicAdd per block (2048 in total).
// Inputs are multiples of 0.25 with a sum below 2^21, so every ordering gives the exact same float.
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <cuda_runtime.h>

#define CK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \
    fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); exit(1); } } while (0)

#define N (1 << 21)      // 2M floats
#define THREADS 256
#define BLOCKS 2048      // grid-stride: 4 elements per thread; ~2 waves

extern "C" __global__ void contended_atomic_sum(const float* __restrict__ in, float* __restrict__ out) {
    for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < N; i += gridDim.x * blockDim.x)
        atomicAdd(out, in[i]);  // PLANTED
}

extern "C" __global__ void block_reduced_sum(const float* __restrict__ in, float* __restrict__ out) {
    __shared__ float warp_sums[THREADS / 32];
    float s = 0.0f;
    for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < N; i += gridDim.x * blockDim.x) s += in[i];
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) s += __shfl_down_sync(0xffffffffu, s, o);
    unsigned lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) warp_sums[warp] = s;
    __syncthreads();
    if (warp == 0) {
        s = lane < THREADS / 32 ? warp_sums[lane] : 0.0f;
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) s += __shfl_down_sync(0xffffffffu, s, o);
        if (lane == 0) atomicAdd(out, s);
    }
}

int main() {
    float* h_in = (float*)malloc((size_t)N * sizeof(float));
    unsigned s = 8u;
    double ref = 0;
    for (int i = 0; i < N; ++i) { s = s * 1664525u + 1013904223u; h_in[i] = 0.25f * (float)((s >> 20) & 3); ref += h_in[i]; }
    float *d_in, *d_out;
    CK(cudaMalloc(&d_in, (size_t)N * sizeof(float)));
    CK(cudaMalloc(&d_out, 2 * sizeof(float)));
    CK(cudaMemcpy(d_in, h_in, (size_t)N * sizeof(float), cudaMemcpyHostToDevice));
    CK(cudaMemset(d_out, 0, 2 * sizeof(float)));

    contended_atomic_sum<<<BLOCKS, THREADS>>>(d_in, d_out);
    CK(cudaGetLastError());
    block_reduced_sum<<<BLOCKS, THREADS>>>(d_in, d_out + 1);
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    float h_out[2];
    CK(cudaMemcpy(h_out, d_out, 2 * sizeof(float), cudaMemcpyDeviceToHost));

    bool ok = fabs((double)h_out[0] - h_out[1]) <= 1e-6 * fabs(ref) && fabs((double)h_out[1] - ref) <= 1e-6 * fabs(ref);
    printf("%s 08-atomic-contention bad=%.2f fixed=%.2f\n", ok ? "ok" : "MISMATCH", h_out[0], h_out[1]);
    CK(cudaFree(d_in));
    CK(cudaFree(d_out));
    free(h_in);
    return ok ? 0 : 1;
}
