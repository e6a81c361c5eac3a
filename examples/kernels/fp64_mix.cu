// fp64_mix.cu: a float kernel that silently does double-precision math. The literals 0.5 and 1.0 are
// doubles, so `x * 0.5 + 1.0` promotes x to double (F2F.F64.F32, DMUL/DFMA/DADD) and converts back.
// FP64 runs at 1/64 of the FP32 rate on consumer GPUs. The fix is the `f` suffix: 0.5f, 1.0f.

__global__ void fp64_mix(const float* __restrict__ in, float* __restrict__ out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float x = in[i];
        out[i] = x * 0.5 + 1.0;
    }
}
