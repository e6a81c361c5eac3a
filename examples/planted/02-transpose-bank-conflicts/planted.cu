// 02-transpose-bank-conflicts. Planted: shared-memory bank conflicts. transpose_conflicted stages
// 32x32 tiles of an 8192x8192 float matrix in float tile[32][32]; the column read tile[tx][ty+j] puts
// all 32 lanes of a warp in the same bank (32-way conflict: 32 wavefronts per shared load).
// Fixed twin: transpose_padded pads the tile to [32][33] so a column read hits 32 distinct banks.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>

#define CK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \
    fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); exit(1); } } while (0)

#define W 8192      // matrix is W x W floats (256 MB)
#define TILE 32
#define ROWS 8      // block is TILE x ROWS threads; each thread moves TILE / ROWS elements

extern "C" __global__ void transpose_conflicted(const float* __restrict__ in, float* __restrict__ out) {
    __shared__ float tile[TILE][TILE];
    unsigned x = blockIdx.x * TILE + threadIdx.x, y = blockIdx.y * TILE + threadIdx.y;
#pragma unroll
    for (int j = 0; j < TILE; j += ROWS)
        tile[threadIdx.y + j][threadIdx.x] = in[(size_t)(y + j) * W + x];
    __syncthreads();
    x = blockIdx.y * TILE + threadIdx.x;
    y = blockIdx.x * TILE + threadIdx.y;
#pragma unroll
    for (int j = 0; j < TILE; j += ROWS)
        out[(size_t)(y + j) * W + x] = tile[threadIdx.x][threadIdx.y + j];  // PLANTED
}

extern "C" __global__ void transpose_padded(const float* __restrict__ in, float* __restrict__ out) {
    __shared__ float tile[TILE][TILE + 1];
    unsigned x = blockIdx.x * TILE + threadIdx.x, y = blockIdx.y * TILE + threadIdx.y;
#pragma unroll
    for (int j = 0; j < TILE; j += ROWS)
        tile[threadIdx.y + j][threadIdx.x] = in[(size_t)(y + j) * W + x];
    __syncthreads();
    x = blockIdx.y * TILE + threadIdx.x;
    y = blockIdx.x * TILE + threadIdx.y;
#pragma unroll
    for (int j = 0; j < TILE; j += ROWS)
        out[(size_t)(y + j) * W + x] = tile[threadIdx.x][threadIdx.y + j];
}

int main() {
    size_t n = (size_t)W * W, bytes = n * sizeof(float);
    float* h_in = (float*)malloc(bytes);
    float* h_bad = (float*)malloc(bytes);
    float* h_fix = (float*)malloc(bytes);
    unsigned s = 2024u;
    for (size_t i = 0; i < n; ++i) { s = s * 1664525u + 1013904223u; h_in[i] = (s >> 8) * (1.0f / 16777216.0f) - 0.25f; }

    float *d_in, *d_bad, *d_fix;
    CK(cudaMalloc(&d_in, bytes));
    CK(cudaMalloc(&d_bad, bytes));
    CK(cudaMalloc(&d_fix, bytes));
    CK(cudaMemcpy(d_in, h_in, bytes, cudaMemcpyHostToDevice));
    CK(cudaMemset(d_bad, 0, bytes));
    CK(cudaMemset(d_fix, 0, bytes));

    dim3 grid(W / TILE, W / TILE), block(TILE, ROWS);
    transpose_conflicted<<<grid, block>>>(d_in, d_bad);
    CK(cudaGetLastError());
    transpose_padded<<<grid, block>>>(d_in, d_fix);
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(h_bad, d_bad, bytes, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(h_fix, d_fix, bytes, cudaMemcpyDeviceToHost));

    bool ok = memcmp(h_bad, h_fix, bytes) == 0;
    for (size_t r = 0; ok && r < W; r += 97)          // spot-check the transpose itself
        for (size_t c = 0; c < W; c += 13)
            if (h_fix[c * W + r] != h_in[r * W + c]) { ok = false; break; }
    double cb = 0, cf = 0;
    for (size_t i = 0; i < n; i += 7) { cb += h_bad[i] * (double)(i % 5 + 1); cf += h_fix[i] * (double)(i % 5 + 1); }
    printf("%s 02-transpose-bank-conflicts bad=%.6f fixed=%.6f\n", ok ? "ok" : "MISMATCH", cb, cf);
    CK(cudaFree(d_in));
    CK(cudaFree(d_bad));
    CK(cudaFree(d_fix));
    free(h_in); free(h_bad); free(h_fix);
    return ok ? 0 : 1;
}
