// naive_sgemm.cu: a shared-memory tiled SGEMM on the CUDA cores. The inner product is unrolled into
// a long chain of FFMA instructions and no tensor-core (HMMA) instruction appears: matmul-shaped work
// that the sass.no-tensor-cores-on-mma-like rule flags (WMMA/mma.sync, or TF32/BF16, would help).
// Assumes n is a multiple of TILE and a TILE x TILE thread block.

#define TILE 32

__global__ void naive_sgemm(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ c,
                            int n) {
    __shared__ float as[TILE][TILE];
    __shared__ float bs[TILE][TILE];
    int row = blockIdx.y * TILE + threadIdx.y;
    int col = blockIdx.x * TILE + threadIdx.x;
    float acc = 0.0f;
    for (int t = 0; t < n; t += TILE) {
        as[threadIdx.y][threadIdx.x] = a[row * n + t + threadIdx.x];
        bs[threadIdx.y][threadIdx.x] = b[(t + threadIdx.y) * n + col];
        __syncthreads();
#pragma unroll
        for (int k = 0; k < TILE; ++k) {
            acc += as[threadIdx.y][k] * bs[k][threadIdx.x];
        }
        __syncthreads();
    }
    c[row * n + col] = acc;
}
