// 06-histogram-global-atomics. Planted: atomic contention. A 16-bin histogram where every element
// does atomicAdd on the global bin: 8M reductions onto 16 addresses serialize in a few L2 slices.
// Fixed twin: a privatized histogram in shared memory, 16 global atomics per block.
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
#define N (8u << 20)
#define BINS 16
#define THREADS 256

extern "C" __global__ void hist16_global_atomics(const unsigned* __restrict__ in, unsigned* __restrict__ out) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < N) {
        unsigned bin = (in[i] >> 7) % BINS;
        atomicAdd(&out[bin], 1u);  // PLANTED
    }
}

extern "C" __global__ void hist16_shared(const unsigned* __restrict__ in, unsigned* __restrict__ out) {
    __shared__ unsigned hs[BINS];
    if (threadIdx.x < BINS) hs[threadIdx.x] = 0;
    __syncthreads();
    for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < N; i += gridDim.x * blockDim.x)
        atomicAdd(&hs[(in[i] >> 7) % BINS], 1u);
    __syncthreads();
    if (threadIdx.x < BINS) atomicAdd(&out[threadIdx.x], hs[threadIdx.x]);
}

int main() {
    std::vector<unsigned> hin(N);
    for (auto& v : hin) v = urand();
    unsigned *din = dcopy(hin), *dbad = dnew<unsigned>(BINS), *dfix = dnew<unsigned>(BINS);
    LAUNCH(hist16_global_atomics, N / THREADS, THREADS, din, dbad);
    LAUNCH(hist16_shared, 132 * 8, THREADS, din, dfix);
    CK(cudaDeviceSynchronize());
    std::vector<unsigned> rb = hcopy(dbad, BINS), rf = hcopy(dfix, BINS);
    return verdict("06-histogram-global-atomics", std::vector<float>(rb.begin(), rb.end()),
                   std::vector<float>(rf.begin(), rf.end()), 0.0);
}
