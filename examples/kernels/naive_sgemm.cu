// naive_sgemm.cu: a shared-memory tiled SGEMM on the CUDA cores. Each thread accumulates 4 outputs,
// so the unrolled inner loop is a long run of FFMA instructions (over 100 static FFMAs, the bulk of
// the kernel) and no tensor-core (HMMA) instruction appears: matmul-shaped work that the
// sass.no-tensor-cores-on-mma-like rule flags (WMMA/mma.sync, or TF32/BF16 inputs, would help).
// Assumes n is a multiple of TILE and a (TILE, TILE / ROWS) thread block.

#define TILE 32
#define ROWS 4  // outputs per thread, strided by TILE / ROWS rows

__global__ void naive_sgemm(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ c,
                            int n) {
    __shared__ float as[TILE][TILE];
    __shared__ float bs[TILE][TILE];
    const int stride = TILE / ROWS;
    int col = blockIdx.x * TILE + threadIdx.x;
    int row0 = blockIdx.y * TILE + threadIdx.y;
    float acc[ROWS] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int t = 0; t < n; t += TILE) {
#pragma unroll
        for (int r = 0; r < ROWS; ++r) {
            int y = threadIdx.y + r * stride;
            as[y][threadIdx.x] = a[(blockIdx.y * TILE + y) * n + t + threadIdx.x];
            bs[y][threadIdx.x] = b[(t + y) * n + col];
        }
        __syncthreads();
#pragma unroll
        for (int k = 0; k < TILE; ++k) {
            float bv = bs[k][threadIdx.x];
#pragma unroll
            for (int r = 0; r < ROWS; ++r) {
                acc[r] += as[threadIdx.y + r * stride][k] * bv;
            }
        }
        __syncthreads();
    }
#pragma unroll
    for (int r = 0; r < ROWS; ++r) {
        c[(row0 + r * stride) * n + col] = acc[r];
    }
}
