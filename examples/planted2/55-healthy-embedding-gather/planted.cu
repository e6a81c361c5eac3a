// 55-healthy-embedding-gather. Healthy: an embedding lookup, out[i] = table[idx[i]] for 262144 indices into
// a 65536 x 256 float table (64 MB, so rows are re-read from L2 as well as DRAM), one warp per output row
// copying it as 2 float4 per lane: every row is one contiguous 1 KB read and one 1 KB write. Bound by the
// memory system (256 MB written, the gathered rows read): no warning is expected.
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
#define VOCAB 65536u
#define DIM 256u
#define LOOKUPS 262144u

extern "C" __global__ void gather_rows(const float4* __restrict__ table, const unsigned* __restrict__ idx,
                                       float4* __restrict__ out) {
    unsigned lane = threadIdx.x % 32, row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    const float4* src = table + (size_t)idx[row] * (DIM / 4);
    float4* dst = out + (size_t)row * (DIM / 4);
    float4 a = src[lane], b = src[lane + 32];
    dst[lane] = a;
    dst[lane + 32] = b;
}

int main() {
    std::vector<float> ht((size_t)VOCAB * DIM);
    std::vector<unsigned> hi(LOOKUPS);
    for (auto& v : ht) v = frand();
    for (auto& v : hi) v = urand() % VOCAB;
    std::vector<float> ref((size_t)LOOKUPS * DIM);
    for (size_t r = 0; r < LOOKUPS; ++r)
        for (size_t c = 0; c < DIM; ++c) ref[r * DIM + c] = ht[(size_t)hi[r] * DIM + c];
    float* dt = dcopy(ht);
    unsigned* di = dcopy(hi);
    float* dout = dnew<float>((size_t)LOOKUPS * DIM);
    LAUNCH(gather_rows, LOOKUPS / 8, 256, reinterpret_cast<const float4*>(dt), di, reinterpret_cast<float4*>(dout));
    CK(cudaDeviceSynchronize());
    return verdict("55-healthy-embedding-gather", hcopy(dout, (size_t)LOOKUPS * DIM), ref, 0.0);
}
