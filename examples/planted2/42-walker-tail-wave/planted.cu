// 42-walker-tail-wave. Planted: tail effect. 84,480 random walkers each take 4096 steps through a
// transition table of 32K entries that every block stages in shared memory (128 KB, so one block fits
// per SM). Each step is a load that depends on the one before: a walker's time is latency, the same
// whether its SM runs one block or several. 165 blocks of 512 threads make 1.25 waves: the first 132
// blocks run, then 33 blocks run alone on a quarter of the SMs for as long again.
// Fixed twin: the same walkers and the same per-thread code in 132 blocks of 640 threads: one block per
// SM, a single full wave.
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
#define TABLE 32768u        // entries (128 KB of shared memory: one block per SM)
#define WALKERS (165u * 512u)
#define STEPS 4096

__device__ __forceinline__ unsigned walk(const unsigned* __restrict__ table, unsigned* tab, unsigned start) {
    for (unsigned j = threadIdx.x; j < TABLE; j += blockDim.x) tab[j] = table[j];
    __syncthreads();
    unsigned s = start;
    for (int t = 0; t < STEPS; ++t) s = tab[(s + t) & (TABLE - 1)];
    return s;
}

extern "C" __global__ void walk_small_blocks(const unsigned* __restrict__ table, const unsigned* __restrict__ start,
                                             float* __restrict__ out) {
    extern __shared__ unsigned tab[];
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned s = walk(table, tab, start[i]);  // PLANTED
    out[i] = (float)(s & 0xffffu);
}

extern "C" __global__ void walk_full_wave(const unsigned* __restrict__ table, const unsigned* __restrict__ start,
                                          float* __restrict__ out) {
    extern __shared__ unsigned tab[];
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned s = walk(table, tab, start[i]);
    out[i] = (float)(s & 0xffffu);
}

int main() {
    std::vector<unsigned> ht(TABLE), hs(WALKERS);
    for (auto& v : ht) v = urand();
    for (auto& v : hs) v = urand();
    unsigned *dt = dcopy(ht), *ds = dcopy(hs);
    float *dbad = dnew<float>(WALKERS), *dfix = dnew<float>(WALKERS);
    const int smem = TABLE * sizeof(unsigned);
    CK(cudaFuncSetAttribute(walk_small_blocks, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    CK(cudaFuncSetAttribute(walk_full_wave, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    walk_small_blocks<<<WALKERS / 512, 512, smem>>>(dt, ds, dbad);
    CK(cudaGetLastError());
    walk_full_wave<<<WALKERS / 640, 640, smem>>>(dt, ds, dfix);
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    return verdict("42-walker-tail-wave", hcopy(dbad, WALKERS), hcopy(dfix, WALKERS), 0.0);
}
