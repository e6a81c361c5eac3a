// mufu_heavy.cu: a transcendental-heavy loop. The fast intrinsics __sinf, __cosf and __expf each
// compile to one MUFU (special function unit) instruction plus a little FP32 work, so MUFU makes up
// a large share of the kernel: the sass.mufu-heavy rule's case. The SFU issues at a fraction of the
// FP32 rate, so such loops can be bound by it.

#define STEPS 8

__global__ void mufu_heavy(const float* __restrict__ in, float* __restrict__ out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) {
        return;
    }
    float x = in[i];
#pragma unroll
    for (int j = 1; j <= STEPS; ++j) {
        x = __sinf(x * j) * __cosf(x + j) + __expf(-x);
    }
    out[i] = x;
}
