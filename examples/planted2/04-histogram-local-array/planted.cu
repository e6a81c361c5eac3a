// 04-histogram-local-array. Planted: local-memory traffic. Each thread keeps a private 64-bin
// histogram in an array indexed by the data, which ptxas must place on the stack: every byte read is
// a local load and a local store, and 256 B per thread x 2048 threads per SM overflow the L1.
// Fixed twin: per-warp histograms in shared memory (shared atomics), merged once per block.
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
#define NWORDS (32u << 20)   // 128 MB of bytes, read as 32-bit words
#define THREADS 256
#define BLOCKS (132 * 24)  // whole waves for both kernels (6 and 8 blocks per SM)
#define BINS 64

extern "C" __global__ void hist_private_local(const unsigned* __restrict__ in, unsigned* __restrict__ out) {
    unsigned h[BINS];
    for (int b = 0; b < BINS; ++b) h[b] = 0;
    for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < NWORDS; i += gridDim.x * blockDim.x) {
        unsigned w = in[i];
        for (int s = 0; s < 32; s += 8) h[(w >> (s + 2)) & (BINS - 1)]++;  // PLANTED
    }
    __shared__ unsigned hs[BINS];
    if (threadIdx.x < BINS) hs[threadIdx.x] = 0;
    __syncthreads();
    for (int b = 0; b < BINS; ++b) atomicAdd(&hs[b], h[b]);
    __syncthreads();
    if (threadIdx.x < BINS) atomicAdd(&out[threadIdx.x], hs[threadIdx.x]);
}

extern "C" __global__ void hist_warp_shared(const unsigned* __restrict__ in, unsigned* __restrict__ out) {
    __shared__ unsigned hs[THREADS / 32][BINS];
    for (int j = threadIdx.x; j < THREADS / 32 * BINS; j += blockDim.x) (&hs[0][0])[j] = 0;
    __syncthreads();
    unsigned* mine = hs[threadIdx.x / 32];
    for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < NWORDS; i += gridDim.x * blockDim.x) {
        unsigned w = in[i];
        for (int s = 0; s < 32; s += 8) atomicAdd(&mine[(w >> (s + 2)) & (BINS - 1)], 1u);
    }
    __syncthreads();
    if (threadIdx.x < BINS) {
        unsigned t = 0;
        for (int wp = 0; wp < THREADS / 32; ++wp) t += hs[wp][threadIdx.x];
        atomicAdd(&out[threadIdx.x], t);
    }
}

int main() {
    std::vector<unsigned> hin(NWORDS);
    for (auto& v : hin) v = urand();
    unsigned *din = dcopy(hin), *dbad = dnew<unsigned>(BINS), *dfix = dnew<unsigned>(BINS);
    LAUNCH(hist_private_local, BLOCKS, THREADS, din, dbad);
    LAUNCH(hist_warp_shared, BLOCKS, THREADS, din, dfix);
    CK(cudaDeviceSynchronize());
    std::vector<unsigned> rb = hcopy(dbad, BINS), rf = hcopy(dfix, BINS);
    std::vector<float> b(rb.begin(), rb.end()), f(rf.begin(), rf.end());
    return verdict("04-histogram-local-array", b, f, 0.0);
}
