// 70-healthy-block-softmax. Healthy. Softmax over each 4096-float row of a 32768 x 4096 matrix, one 256-thread
// block per row: each thread holds four float4 of the row in registers, the block takes the row's maximum and
// then its sum of exponentials (warp shuffles, then one value per warp through shared memory, a barrier each),
// and each thread writes its normalized values. One read and one write of 512 MB: DRAM-bound, eight rows in
// flight per SM.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cmath>
#include <vector>
#include <cuda_runtime.h>
#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
    fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); exit(1); } } while (0)
#define LAUNCH(k, g, b, ...) do { k<<<(g), (b)>>>(__VA_ARGS__); CK(cudaGetLastError()); } while (0)
static unsigned g_seed = 12345u;
inline unsigned urand() { g_seed = g_seed * 1664525u + 1013904223u; return g_seed; }
inline float frand() { return (urand() >> 8) * (1.0f / 16777216.0f); }  // [0, 1)
template <class T> static T* dnew(size_t n) {
    T* p; CK(cudaMalloc(&p, n * sizeof(T))); CK(cudaMemset(p, 0, n * sizeof(T))); return p; }
template <class T> static T* dcopy(const std::vector<T>& h) {
    T* p = dnew<T>(h.size()); CK(cudaMemcpy(p, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice)); return p; }
template <class T> static std::vector<T> hcopy(const T* d, size_t n) {
    std::vector<T> h(n); CK(cudaMemcpy(h.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost)); return h; }
// "ok <case> ..." and 0 when every element of a (bad or tested) matches b (fixed or reference) within tol
static int verdict(const char* name, const std::vector<float>& a, const std::vector<float>& b, double tol) {
    double sa = 0, sb = 0, worst = a.size() == b.size() ? 0 : 1e30;
    for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
        sa += a[i]; sb += b[i];
        double e = fabs((double)a[i] - b[i]) / (fabs((double)b[i]) + 1e-2);
        if (std::isnan(e) || e > worst) worst = std::isnan(e) ? 1e30 : e;
    }
    bool ok = worst <= tol;
    printf("%s %s bad=%.6g fixed=%.6g max_rel_err=%.3g\n", ok ? "ok" : "MISMATCH", name, sa, sb, worst);
    return ok ? 0 : 1;
}
#define ROWS 32768
#define COLS 4096
#define THREADS 256
#define PER (COLS / 4 / THREADS)  // float4 per thread

__device__ __forceinline__ float block_reduce(float v, bool is_max, float* ws) {
    for (int o = 16; o > 0; o /= 2) {
        float u = __shfl_xor_sync(0xffffffffu, v, o);
        v = is_max ? fmaxf(v, u) : v + u;
    }
    if (threadIdx.x % 32 == 0) ws[threadIdx.x / 32] = v;
    __syncthreads();
    float r = ws[0];
    for (int w = 1; w < THREADS / 32; ++w) r = is_max ? fmaxf(r, ws[w]) : r + ws[w];
    __syncthreads();
    return r;
}

extern "C" __global__ void __launch_bounds__(THREADS) softmax_block_row(const float4* __restrict__ x, float4* __restrict__ y) {
    __shared__ float ws[THREADS / 32];
    const size_t row = (size_t)blockIdx.x * (COLS / 4);
    float4 v[PER];
#pragma unroll
    for (int k = 0; k < PER; ++k) v[k] = x[row + threadIdx.x + k * THREADS];
    float m = -INFINITY;
#pragma unroll
    for (int k = 0; k < PER; ++k) m = fmaxf(m, fmaxf(fmaxf(v[k].x, v[k].y), fmaxf(v[k].z, v[k].w)));
    m = block_reduce(m, true, ws);
    float s = 0.0f;
#pragma unroll
    for (int k = 0; k < PER; ++k) {
        v[k] = make_float4(__expf(v[k].x - m), __expf(v[k].y - m), __expf(v[k].z - m), __expf(v[k].w - m));
        s += (v[k].x + v[k].y) + (v[k].z + v[k].w);
    }
    const float inv = 1.0f / block_reduce(s, false, ws);
#pragma unroll
    for (int k = 0; k < PER; ++k)
        y[row + threadIdx.x + k * THREADS] = make_float4(v[k].x * inv, v[k].y * inv, v[k].z * inv, v[k].w * inv);
}

int main() {
    const size_t n = (size_t)ROWS * COLS;
    std::vector<float> h(n);
    for (auto& v : h) v = frand() * 8.0f - 4.0f;
    float *dx = dcopy(h), *dy = dnew<float>(n);
    LAUNCH(softmax_block_row, ROWS, THREADS, (const float4*)dx, (float4*)dy);
    CK(cudaDeviceSynchronize());
    std::vector<float> got = hcopy(dy, n), want(n);
    for (size_t r = 0; r < ROWS; r += 97) {  // every 97th row, in double
        double m = -1e30, s = 0;
        for (size_t c = 0; c < COLS; ++c) m = std::max(m, (double)h[r * COLS + c]);
        for (size_t c = 0; c < COLS; ++c) s += exp((double)h[r * COLS + c] - m);
        for (size_t c = 0; c < COLS; ++c) want[r * COLS + c] = (float)(exp((double)h[r * COLS + c] - m) / s);
    }
    for (size_t r = 0; r < ROWS; ++r)
        if (r % 97) for (size_t c = 0; c < COLS; ++c) want[r * COLS + c] = got[r * COLS + c];
    return verdict("70-healthy-block-softmax", got, want, 1e-3);
}
