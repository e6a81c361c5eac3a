// 11-pointer-chase. Planted: dependent loads. chase_dependent walks next = perm[next] 128 times per thread
// through a 256 MB permutation (far larger than L2), so every load waits for the previous one. Lane l
// reads word l % 8 of the current 32-byte row, so a warp-step costs one sector and DRAM bandwidth stays
// far from its limit: only latency sets the time. Fixed twin: gather_independent visits the SAME
// addresses (same count, same bytes), computing the row sequence arithmetically, 8 loads in flight.
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

#define CK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \
    fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); exit(1); } } while (0)

#define LOG2ROWS 23                  // 8M rows of 8 int32 (32 bytes): 256 MB
#define ROWS (1u << LOG2ROWS)
#define STEPS 128
#define THREADS 256
#define BLOCKS 2112                  // 2 waves at 8 blocks/SM on 132 SMs

// The permutation of rows: a full-period LCG modulo 2^23 (multiplier = 1 mod 4, odd increment).
__host__ __device__ __forceinline__ unsigned next_row(unsigned r) { return (r * 1664525u + 1013904223u) & (ROWS - 1); }
__device__ __forceinline__ unsigned start_row(unsigned warp) { return (warp * 2654435761u) & (ROWS - 1); }

extern "C" __global__ void chase_dependent(const unsigned* __restrict__ perm, unsigned* __restrict__ out) {
    unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned idx = start_row(t >> 5) * 8 + (threadIdx.x & 7);
    unsigned sum = 0;
#pragma unroll 4
    for (int s = 0; s < STEPS; ++s) {
        idx = perm[idx];  // PLANTED
        sum += idx;
    }
    out[t] = sum;
}

extern "C" __global__ void gather_independent(const unsigned* __restrict__ perm, unsigned* __restrict__ out) {
    unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned r = start_row(t >> 5), w = threadIdx.x & 7;
    unsigned sum = 0;
#pragma unroll 8
    for (int s = 0; s < STEPS; ++s) {  // addresses come from arithmetic, not from loaded values
        sum += perm[r * 8 + w];
        r = next_row(r);
    }
    out[t] = sum;
}

int main() {
    size_t n = (size_t)ROWS * 8, nout = (size_t)BLOCKS * THREADS;
    unsigned* h_perm = (unsigned*)malloc(n * sizeof(unsigned));
    for (unsigned r = 0; r < ROWS; ++r)
        for (unsigned w = 0; w < 8; ++w) h_perm[(size_t)r * 8 + w] = next_row(r) * 8 + w;
    unsigned *h_bad = (unsigned*)malloc(nout * sizeof(unsigned)), *h_fix = (unsigned*)malloc(nout * sizeof(unsigned));
    unsigned *d_perm, *d_bad, *d_fix;
    CK(cudaMalloc(&d_perm, n * sizeof(unsigned)));
    CK(cudaMalloc(&d_bad, nout * sizeof(unsigned)));
    CK(cudaMalloc(&d_fix, nout * sizeof(unsigned)));
    CK(cudaMemcpy(d_perm, h_perm, n * sizeof(unsigned), cudaMemcpyHostToDevice));
    CK(cudaMemset(d_bad, 0, nout * sizeof(unsigned)));
    CK(cudaMemset(d_fix, 0, nout * sizeof(unsigned)));

    chase_dependent<<<BLOCKS, THREADS>>>(d_perm, d_bad);
    CK(cudaGetLastError());
    gather_independent<<<BLOCKS, THREADS>>>(d_perm, d_fix);
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(h_bad, d_bad, nout * sizeof(unsigned), cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(h_fix, d_fix, nout * sizeof(unsigned), cudaMemcpyDeviceToHost));

    bool ok = true;
    unsigned long long cb = 0, cf = 0;
    for (size_t i = 0; i < nout; ++i) { cb += h_bad[i]; cf += h_fix[i]; if (h_bad[i] != h_fix[i]) ok = false; }
    printf("%s 11-pointer-chase bad=%llu fixed=%llu\n", ok ? "ok" : "MISMATCH", cb, cf);
    CK(cudaFree(d_perm));
    CK(cudaFree(d_bad));
    CK(cudaFree(d_fix));
    free(h_perm); free(h_bad); free(h_fix);
    return ok ? 0 : 1;
}
