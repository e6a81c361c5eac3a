// 194-healthy-sort-apply-ranks-scatter. Healthy: the last step of a sort-by-key with a separate payload column: each of
// 32M 4-byte payload values goes to the rank its row got from sorting another key, out[rank[i]] = payload[i] (128 MB
// each). The ranks are a random permutation (the payload's order has nothing to do with the sort key), so each warp's
// 32 stores hit 32 unrelated sectors of a 128 MB output, 2.6 times the L2, and no mapping of threads to rows can help;
// only the data order could. Ranks and payload are read with one 16-byte load per stream per thread (a warp reads 512
// contiguous bytes), 4 independent stores follow, and 32K blocks of 256 fill the GPU: L2/DRAM's sector rate is the roof.
// Challenger: 8 rows a thread (two 16-byte loads per stream, 256 apart in the block's tile, then 8 stores), same bytes.
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

#define N (1 << 25)   // rows

// 4 rows per thread
extern "C" __global__ void __launch_bounds__(256) apply_ranks_vec4(const uint4* __restrict__ rank,
    const uint4* __restrict__ payload, unsigned* __restrict__ out, int n4)
{
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n4) return;
    uint4 r = rank[t];
    uint4 p = payload[t];
    out[r.x] = p.x;
    out[r.y] = p.y;
    out[r.z] = p.z;
    out[r.w] = p.w;
}

// challenger: 8 rows per thread, a block takes 512 consecutive uint4 (n4 % 512 == 0)
extern "C" __global__ void __launch_bounds__(256) apply_ranks_vec4x2(const uint4* __restrict__ rank,
    const uint4* __restrict__ payload, unsigned* __restrict__ out, int n4)
{
    int t = blockIdx.x * 512 + threadIdx.x;
    if (t + 256 >= n4) return;                                 // never with n4 % 512 == 0
    uint4 r0 = rank[t], r1 = rank[t + 256];
    uint4 p0 = payload[t], p1 = payload[t + 256];
    out[r0.x] = p0.x; out[r0.y] = p0.y; out[r0.z] = p0.z; out[r0.w] = p0.w;
    out[r1.x] = p1.x; out[r1.y] = p1.y; out[r1.z] = p1.z; out[r1.w] = p1.w;
}

static int exact_then_verdict(const char* name, const std::vector<unsigned>& a, const std::vector<unsigned>& b)
{
    size_t bad = a.size() == b.size() ? 0 : 1;
    for (size_t i = 0; i < a.size() && i < b.size(); ++i) bad += a[i] != b[i];
    if (bad) { printf("MISMATCH %s %zu of %zu values differ\n", name, bad, b.size()); return 1; }
    std::vector<float> fa(a.begin(), a.end()), fb(b.begin(), b.end());
    return verdict(name, fa, fb, 0.0);
}

int main()
{
    const int n = N, n4 = N / 4;
    std::vector<unsigned> rank(n), payload(n), ref(n);
    for (int i = 0; i < n; ++i) { rank[i] = (unsigned)i; payload[i] = urand(); }
    for (int i = n - 1; i > 0; --i) {                            // Fisher-Yates on the LCG's high bits
        int j = (int)(((unsigned long long)urand() * (unsigned)(i + 1)) >> 32);
        unsigned tmp = rank[i]; rank[i] = rank[j]; rank[j] = tmp;
    }
    for (int i = 0; i < n; ++i) ref[rank[i]] = payload[i];
    unsigned* d_rank = dcopy(rank);
    unsigned* d_pay = dcopy(payload);
    unsigned* d_out = dnew<unsigned>(n);

    LAUNCH(apply_ranks_vec4, n4 / 256, 256, (const uint4*)d_rank, (const uint4*)d_pay, d_out, n4);
    CK(cudaDeviceSynchronize());
    std::vector<unsigned> h1 = hcopy(d_out, n);
    CK(cudaMemset(d_out, 0, (size_t)n * sizeof(unsigned)));
    LAUNCH(apply_ranks_vec4x2, n4 / 512, 256, (const uint4*)d_rank, (const uint4*)d_pay, d_out, n4);
    CK(cudaDeviceSynchronize());
    std::vector<unsigned> h2 = hcopy(d_out, n);
    int rc = exact_then_verdict("194-healthy-sort-apply-ranks-scatter", h1, ref);
    rc |= exact_then_verdict("194-healthy-sort-apply-ranks-scatter challenger", h2, ref);
    CK(cudaFree(d_rank)); CK(cudaFree(d_pay)); CK(cudaFree(d_out));
    return rc;
}
