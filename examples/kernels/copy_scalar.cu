// copy_scalar.cu: the scalar baseline of copy_float4.cu. Each thread moves one float, so the SASS
// holds only 32-bit global loads and stores (LDG.E / STG.E), four times as many instructions per byte.

__global__ void copy_scalar(const float* __restrict__ in, float* __restrict__ out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        out[i] = in[i];
    }
}
