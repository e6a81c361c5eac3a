// 115-coo-spmv-hub-rows-f64. Planted: atomic contention: one FP64 atomicAdd per nonzero into a few hub rows.
// An FP64 SpMV y += A x on a web-like matrix in COO, sorted by row (1M rows, 2M columns, 14.0M nonzeros): row lengths
// follow a power law (the longest row has 1M nonzeros, the next 500K, 333K, ...; the hub rows sit at random ids). A thread
// per nonzero adds val * x[col] to y[row] with a double atomicAdd, so every warp inside a hub row sends 32 adds to one
// address, and the L2 slice holding y[hub] performs them one after another (1M for the longest row).
// Fixed twin: each warp first sums its lanes' products per row with a segmented shuffle reduction (rows are sorted, so
// equal rows are adjacent lanes) and only the first lane of each run adds the sum: 32 times fewer atomics on a hub row.
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
#include <algorithm>
static unsigned ubelow(unsigned n) { return (unsigned)(((unsigned long long)urand() * n) >> 32); }  // high LCG bits
#define NROW (1024 * 1024)
#define NCOL (2 * 1024 * 1024)
#define HUB 1000000.0  // the longest row's length; the row of rank k has max(1, HUB / (k + 1)) nonzeros
#define THREADS 256

extern "C" __global__ void spmv_coo_atomic(const int* __restrict__ row, const int* __restrict__ col,
                                           const double* __restrict__ val, const double* __restrict__ x,
                                           double* __restrict__ y, int nnz) {
    const int k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= nnz) return;
    atomicAdd(&y[row[k]], val[k] * x[col[k]]);  // PLANTED
}

extern "C" __global__ void spmv_coo_warp_segments(const int* __restrict__ row, const int* __restrict__ col,
                                                  const double* __restrict__ val, const double* __restrict__ x,
                                                  double* __restrict__ y, int nnz) {
    const int k = blockIdx.x * blockDim.x + threadIdx.x, lane = threadIdx.x & 31;
    int r = -1;
    double v = 0.0;
    if (k < nnz) { r = row[k]; v = val[k] * x[col[k]]; }
    for (int d = 1; d < 32; d <<= 1) {  // lane i sums lanes i .. i+2d-1 of its row (rows are sorted: runs are contiguous)
        const double o = __shfl_down_sync(0xffffffffu, v, d);
        const int ro = __shfl_down_sync(0xffffffffu, r, d);
        if (lane + d < 32 && ro == r) v += o;
    }
    const int rp = __shfl_up_sync(0xffffffffu, r, 1);
    if (r >= 0 && (lane == 0 || rp != r)) atomicAdd(&y[r], v);  // one atomic per run of equal rows in the warp
}

int main() {
    std::vector<int> rank(NROW), len(NROW);
    for (int i = 0; i < NROW; ++i) rank[i] = i;
    for (int i = NROW - 1; i > 0; --i) std::swap(rank[i], rank[ubelow(i + 1)]);  // row id -> its rank by length
    size_t nnz = 0;
    for (int i = 0; i < NROW; ++i) { len[i] = std::max(1, (int)(HUB / (rank[i] + 1))); nnz += len[i]; }
    std::vector<int> row(nnz), col(nnz);
    std::vector<double> val(nnz), x(NCOL);
    size_t k = 0;
    for (int i = 0; i < NROW; ++i)
        for (int j = 0; j < len[i]; ++j, ++k) {  // one column in each of len equal slices of [0, NCOL): sorted, distinct
            const long long lo = (long long)j * NCOL / len[i], hi = (long long)(j + 1) * NCOL / len[i];
            row[k] = i;
            col[k] = (int)(lo + ubelow((unsigned)(hi - lo)));
            val[k] = frand() * 2.0 - 1.0;
        }
    for (auto& v : x) v = frand();
    int *drow = dcopy(row), *dcol = dcopy(col);
    double *dval = dcopy(val), *dx = dcopy(x), *dbad = dnew<double>(NROW), *dfix = dnew<double>(NROW);
    const int blocks = (int)((nnz + THREADS - 1) / THREADS);
    LAUNCH(spmv_coo_atomic, blocks, THREADS, drow, dcol, dval, dx, dbad, (int)nnz);
    LAUNCH(spmv_coo_warp_segments, blocks, THREADS, drow, dcol, dval, dx, dfix, (int)nnz);
    CK(cudaDeviceSynchronize());
    std::vector<double> hb = hcopy(dbad, NROW), hf = hcopy(dfix, NROW);
    return verdict("115-coo-spmv-hub-rows-f64", std::vector<float>(hb.begin(), hb.end()),
                   std::vector<float>(hf.begin(), hf.end()), 1e-5);
}
