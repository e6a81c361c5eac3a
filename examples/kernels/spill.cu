// spill.cu: register pressure that forces local memory. Each thread keeps 64 running sums live
// across a loop; compiled with -maxrregcount=32, ptxas must spill them to local memory, and the SASS
// shows STL/LDL instructions (the sass.local-memory finding). Without the register cap it fits in
// registers.

#define LIVE 64

__global__ void spill(const float* __restrict__ in, float* __restrict__ out, int n, int iters) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) {
        return;
    }
    float acc[LIVE];
#pragma unroll
    for (int j = 0; j < LIVE; ++j) {
        acc[j] = in[(i + j * 97) % n];
    }
    for (int it = 0; it < iters; ++it) {
        float x = in[(i + it) % n];
#pragma unroll
        for (int j = 0; j < LIVE; ++j) {
            acc[j] = acc[j] * x + acc[(j + 1) % LIVE];
        }
    }
    float s = 0.0f;
#pragma unroll
    for (int j = 0; j < LIVE; ++j) {
        s += acc[j];
    }
    out[i] = s;
}
