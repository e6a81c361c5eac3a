// 196-healthy-join-payload-gather-f64. Healthy: late materialization after a hash join: for each of 32M result rows,
// fetch the 8-byte payload (a double price column, 2^25 rows, 256 MB) of the build row it matched, out[i] = price[
// build_row[i]]. The probe side hits build rows in random order, so a warp's 32 gathers land in 32 unrelated sectors of a
// column five times the L2 and use 8 of each sector's 32 bytes; no mapping of threads to rows can coalesce them, only
// sorting the matches by build row could, which is the join's business, not this gather's. Each thread reads two int2
// pairs of row ids (256 apart in the block's tile, 8-byte loads, a warp reading 256 contiguous bytes), issues its 4
// gathers at once and writes two 16-byte pairs; 32K blocks of 256 fill the GPU: DRAM's sector rate is the roof.
// Challenger: one pair a thread (one int2 load, 2 gathers, one 16-byte store), twice the blocks, same bytes.
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

#define NOUT (1 << 25)       // join result rows
#define NBUILD (1 << 25)     // build-side rows (payload column of 256 MB)

// 4 rows per thread: pairs t and t + 256 of the block's 512-pair tile (npairs % 512 == 0)
extern "C" __global__ void __launch_bounds__(256) payload_gather_2x2(const int2* __restrict__ build_row,
    const double* __restrict__ price, double2* __restrict__ out, int npairs)
{
    int t = blockIdx.x * 512 + threadIdx.x;
    if (t + 256 >= npairs) return;                               // never with npairs % 512 == 0
    int2 r0 = build_row[t], r1 = build_row[t + 256];
    double a = price[r0.x], b = price[r0.y], c = price[r1.x], d = price[r1.y];
    out[t] = make_double2(a, b);
    out[t + 256] = make_double2(c, d);
}

// challenger: 2 rows per thread
extern "C" __global__ void __launch_bounds__(256) payload_gather_2(const int2* __restrict__ build_row,
    const double* __restrict__ price, double2* __restrict__ out, int npairs)
{
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= npairs) return;
    int2 r = build_row[t];
    out[t] = make_double2(price[r.x], price[r.y]);
}

static int exact_then_verdict(const char* name, const std::vector<double>& a, const std::vector<double>& b)
{
    size_t bad = a.size() == b.size() ? 0 : 1;
    for (size_t i = 0; i < a.size() && i < b.size(); ++i) bad += memcmp(&a[i], &b[i], sizeof(double)) != 0;
    if (bad) { printf("MISMATCH %s %zu of %zu values differ\n", name, bad, b.size()); return 1; }
    std::vector<float> fa(a.begin(), a.end()), fb(b.begin(), b.end());
    return verdict(name, fa, fb, 0.0);
}

int main()
{
    const int n = NOUT, npairs = NOUT / 2;
    std::vector<double> price(NBUILD);
    for (auto& x : price) x = (double)(urand() >> 8) * 0.01 + (double)(urand() >> 20) * 1e-9;   // cents, jittered
    std::vector<int> row(n);
    for (auto& r : row) r = (int)(urand() >> 7);                 // matched build row: uniform over 2^25
    std::vector<double> ref(n);
    for (int i = 0; i < n; ++i) ref[i] = price[row[i]];
    int* d_row = dcopy(row);
    double* d_price = dcopy(price);
    double* d_out = dnew<double>(n);

    LAUNCH(payload_gather_2x2, npairs / 512, 256, (const int2*)d_row, d_price, (double2*)d_out, npairs);
    CK(cudaDeviceSynchronize());
    std::vector<double> h1 = hcopy(d_out, n);
    CK(cudaMemset(d_out, 0, (size_t)n * sizeof(double)));
    LAUNCH(payload_gather_2, npairs / 256, 256, (const int2*)d_row, d_price, (double2*)d_out, npairs);
    CK(cudaDeviceSynchronize());
    std::vector<double> h2 = hcopy(d_out, n);
    int rc = exact_then_verdict("196-healthy-join-payload-gather-f64", h1, ref);
    rc |= exact_then_verdict("196-healthy-join-payload-gather-f64 challenger", h2, ref);
    CK(cudaFree(d_row)); CK(cudaFree(d_price)); CK(cudaFree(d_out));
    return rc;
}
