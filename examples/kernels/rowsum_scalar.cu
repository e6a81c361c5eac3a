// rowsum_scalar.cu: each thread sums a row of 16 consecutive floats. The pointer is a plain float*,
// so the compiler cannot prove 16-byte alignment and emits 16 separate 32-bit loads (LDG.E) per
// thread instead of four 128-bit ones: the case the sass.scalar-global-loads rule points at.

#define ROW 16

__global__ void rowsum_scalar(const float* __restrict__ in, float* __restrict__ out, int rows) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) {
        return;
    }
    const float* p = in + r * ROW;
    float s = 0.0f;
#pragma unroll
    for (int j = 0; j < ROW; ++j) {
        s += p[j];
    }
    out[r] = s;
}
