// 72-lookup-tail-blocks. Planted: tail effect. 191 blocks of 1024 threads; each block stages a 32K-entry table
// (128 KB of shared memory, so one block fits per SM) and each thread follows four hashed lookup sequences,
// 8 interleaved, a shared load and a few integer operations a step: the shared-memory pipe is busy while an
// SM runs, with the schedulers issuing in well under 80% of its cycles. 132 blocks run, then 59 (1.45 waves,
// about 28% of the SM time idle).
// Fixed twin: the same sequences in 132 blocks, taken by grid stride: one round of 5 or 6 a thread instead of
// two rounds of 4.
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
#define BLOCKS 191
#define THREADS 1024
#define PER_THREAD 4
#define ITEMS (BLOCKS * THREADS * PER_THREAD)
#define TABLE 32768u
#define LANES 8
#define STEPS 256

__device__ __forceinline__ float lookups(const unsigned* tab, unsigned w) {
    unsigned h[LANES], acc = 0;
#pragma unroll
    for (int j = 0; j < LANES; ++j) h[j] = (w * LANES + j) * 2654435761u;
    for (int t = 0; t < STEPS; ++t)
#pragma unroll
        for (int j = 0; j < LANES; ++j) { h[j] = tab[(h[j] ^ (h[j] >> 15)) & (TABLE - 1)] + h[j] * 33u; acc += h[j] >> 28; }
    return (float)acc;
}

__device__ __forceinline__ void stage(const unsigned* __restrict__ table, unsigned* tab) {
    for (unsigned k = threadIdx.x; k < TABLE; k += blockDim.x) tab[k] = table[k];
    __syncthreads();
}

extern "C" __global__ void lookup_wide_blocks(const unsigned* __restrict__ table, float* __restrict__ out) {
    extern __shared__ unsigned tab[];
    stage(table, tab);
    unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
    for (unsigned q = 0; q < PER_THREAD; ++q) out[q * (BLOCKS * THREADS) + t] = lookups(tab, q * (BLOCKS * THREADS) + t);  // PLANTED
}

extern "C" __global__ void lookup_one_wave(const unsigned* __restrict__ table, float* __restrict__ out) {
    extern __shared__ unsigned tab[];
    stage(table, tab);
    for (unsigned w = blockIdx.x * blockDim.x + threadIdx.x; w < ITEMS; w += gridDim.x * blockDim.x)
        out[w] = lookups(tab, w);
}

int main() {
    std::vector<unsigned> ht(TABLE);
    for (auto& v : ht) v = urand();
    unsigned* dt = dcopy(ht);
    float *dbad = dnew<float>(ITEMS), *dfix = dnew<float>(ITEMS);
    const int smem = TABLE * sizeof(unsigned);
    CK(cudaFuncSetAttribute(lookup_wide_blocks, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    CK(cudaFuncSetAttribute(lookup_one_wave, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    lookup_wide_blocks<<<BLOCKS, THREADS, smem>>>(dt, dbad);
    CK(cudaGetLastError());
    lookup_one_wave<<<132, THREADS, smem>>>(dt, dfix);
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    return verdict("72-lookup-tail-blocks", hcopy(dbad, ITEMS), hcopy(dfix, ITEMS), 0.0);
}
