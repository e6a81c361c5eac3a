// 90-tagger-loss-atomic-per-token. Planted: atomic contention. The mean cross-entropy loss of a 32-tag sequence
// labelling head over 2M tokens (logits 2M x 32 fp32, 256 MB): a persistent grid of 1056 blocks, a warp per
// token (one logit a lane, max and sum of exponentials by shuffles, four tokens in flight a warp), and lane 0
// adds each token's loss into the single loss accumulator with atomicAdd: 2M float reductions on one address,
// which one L2 slice applies one after another.
// Fixed twin: the same warps and loop, each keeping its tokens' losses in a register; a shared-memory combine at
// the end and one atomicAdd per block (1056 in all).
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
#define TOKENS (1 << 21)
#define TAGS 32
#define BLOCKS 1056
#define THREADS 256
#define UNROLL 4

// negative log-likelihood of one token's label; every lane of the warp returns it
__device__ __forceinline__ float token_nll(float z, int label) {
    float m = z;
#pragma unroll
    for (int o = 16; o; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    float s = expf(z - m);
#pragma unroll
    for (int o = 16; o; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    return logf(s) + m - __shfl_sync(0xffffffffu, z, label);
}

extern "C" __global__ void tagger_loss_atomic(const float* __restrict__ logits, const int* __restrict__ labels,
                                              float* __restrict__ loss) {
    unsigned lane = threadIdx.x & 31;
    unsigned warp = (blockIdx.x * blockDim.x + threadIdx.x) >> 5, nwarps = (gridDim.x * blockDim.x) >> 5;
    for (unsigned t0 = warp * UNROLL; t0 < TOKENS; t0 += nwarps * UNROLL) {
        float z[UNROLL];
        int y[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) { z[u] = logits[(size_t)(t0 + u) * TAGS + lane]; y[u] = labels[t0 + u]; }
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            float l = token_nll(z[u], y[u]);
            if (lane == 0) atomicAdd(loss, l * (1.0f / TOKENS));  // PLANTED
        }
    }
}

extern "C" __global__ void tagger_loss_block_reduce(const float* __restrict__ logits, const int* __restrict__ labels,
                                                    float* __restrict__ loss) {
    __shared__ float part[THREADS / 32];
    unsigned lane = threadIdx.x & 31;
    unsigned warp = (blockIdx.x * blockDim.x + threadIdx.x) >> 5, nwarps = (gridDim.x * blockDim.x) >> 5;
    float acc = 0.0f;
    for (unsigned t0 = warp * UNROLL; t0 < TOKENS; t0 += nwarps * UNROLL) {
        float z[UNROLL];
        int y[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) { z[u] = logits[(size_t)(t0 + u) * TAGS + lane]; y[u] = labels[t0 + u]; }
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) acc += token_nll(z[u], y[u]) * (1.0f / TOKENS);
    }
    if (lane == 0) part[threadIdx.x >> 5] = acc;
    __syncthreads();
    if (threadIdx.x == 0) {
        float b = 0.0f;
        for (int w = 0; w < THREADS / 32; ++w) b += part[w];
        atomicAdd(loss, b);
    }
}

int main() {
    std::vector<float> hz((size_t)TOKENS * TAGS);
    std::vector<int> hy(TOKENS);
    for (auto& v : hz) v = 8.0f * frand() - 4.0f;
    for (auto& v : hy) v = urand() % TAGS;
    float* dz = dcopy(hz);
    int* dy = dcopy(hy);
    float *lb = dnew<float>(1), *lf = dnew<float>(1);
    LAUNCH(tagger_loss_atomic, BLOCKS, THREADS, dz, dy, lb);
    LAUNCH(tagger_loss_block_reduce, BLOCKS, THREADS, dz, dy, lf);
    CK(cudaDeviceSynchronize());
    return verdict("90-tagger-loss-atomic-per-token", hcopy(lb, 1), hcopy(lf, 1), 1e-3);
}
