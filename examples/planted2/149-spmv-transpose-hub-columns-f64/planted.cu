// 149-spmv-transpose-hub-columns-f64. Planted: atomic contention. y = A^T x for a CSR matrix of 384K rows by 1M
// columns with 16-48 nonzeros a row (12.6M in all) and FP64 values, the push form used where only A is stored
// (PageRank-style link matrices, least-squares gradients). Column popularity follows Zipf(1) and the columns are
// numbered by popularity (after a degree sort), so column 0 appears in ~88% of the rows and columns 0-15, one
// 128-byte line of y, take ~2M additions. One warp a row loads the row's column ids and values (coalesced) and
// adds val * x[row] into y[col] with a double atomicAdd; L2 applies the hub columns' additions one after another.
// Fixed twin: the same loads and loop in 528 blocks that keep columns 0..2047 in a 16 KB shared copy (the columns
// of a row are distinct, so no two lanes collide) and flush it once per block, other columns unchanged.
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

constexpr int M = 384 * 1024, N = 1 << 20, HOT = 2048;
constexpr int TWIN_BLOCKS = 132 * 4, TWIN_THREADS = 512;

// One warp a row: y[col[k]] += val[k] * x[row] for the row's nonzeros.
extern "C" __global__ void spmv_t_push(const int* __restrict__ rowptr, const int* __restrict__ col,
                                       const double* __restrict__ val, const double* __restrict__ x,
                                       double* y, int m) {
    int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x & 31;
    if (row >= m) return;
    int b = rowptr[row], e = rowptr[row + 1];
    double xi = x[row];
    for (int k = b + lane; k < e; k += 32)
        atomicAdd(&y[col[k]], val[k] * xi);  // PLANTED
}

// Same product; the hub columns (0..HOT-1) are summed in a per-block shared copy, flushed once per block.
extern "C" __global__ void spmv_t_push_hot_smem(const int* __restrict__ rowptr, const int* __restrict__ col,
                                                const double* __restrict__ val, const double* __restrict__ x,
                                                double* y, int m) {
    __shared__ double hot[HOT];
    for (int i = threadIdx.x; i < HOT; i += blockDim.x) hot[i] = 0.0;
    __syncthreads();
    int warps = blockDim.x / 32, lane = threadIdx.x & 31;
    for (int row = blockIdx.x * warps + threadIdx.x / 32; row < m; row += gridDim.x * warps) {
        int b = rowptr[row], e = rowptr[row + 1];
        double xi = x[row];
        for (int k = b + lane; k < e; k += 32) {
            int j = col[k];
            double p = val[k] * xi;
            if (j < HOT) atomicAdd(&hot[j], p);
            else atomicAdd(&y[j], p);
        }
    }
    __syncthreads();
    for (int i = threadIdx.x; i < HOT; i += blockDim.x)
        if (hot[i] != 0.0) atomicAdd(&y[i], hot[i]);
}

int main() {
    // Zipf(1) over the columns: P(col = j) proportional to 1 / (j + 1).
    std::vector<double> cdf(N);
    double s = 0;
    for (int j = 0; j < N; ++j) { s += 1.0 / (j + 1); cdf[j] = s; }
    for (double& c : cdf) c /= s;
    std::vector<int> rowptr(M + 1, 0), col;
    std::vector<double> val, x(M);
    col.reserve((size_t)M * 33); val.reserve((size_t)M * 33);
    int buf[48];
    for (int r = 0; r < M; ++r) {
        int len = 16 + (int)((urand() >> 12) % 33), got = 0;  // 16..48 distinct columns
        while (got < len) {
            double u = (urand() >> 8) * (1.0 / 16777216.0) + (urand() >> 8) * (1.0 / 281474976710656.0);
            int j = (int)(std::lower_bound(cdf.begin(), cdf.end(), u) - cdf.begin());
            if (j >= N) j = N - 1;
            bool dup = false;
            for (int t = 0; t < got; ++t) dup |= buf[t] == j;
            if (!dup) buf[got++] = j;
        }
        std::sort(buf, buf + len);
        for (int t = 0; t < len; ++t) { col.push_back(buf[t]); val.push_back(0.5 + frand()); }
        rowptr[r + 1] = (int)col.size();
        x[r] = frand();
    }
    size_t nnz = col.size();
    int* d_rowptr = dcopy(rowptr);
    int* d_col = dcopy(col);
    double* d_val = dcopy(val);
    double* d_x = dcopy(x);
    double* d_ybad = dnew<double>(N);
    double* d_yfix = dnew<double>(N);

    LAUNCH(spmv_t_push, M / 8, 256, d_rowptr, d_col, d_val, d_x, d_ybad, M);
    CK(cudaDeviceSynchronize());
    LAUNCH(spmv_t_push_hot_smem, TWIN_BLOCKS, TWIN_THREADS, d_rowptr, d_col, d_val, d_x, d_yfix, M);
    CK(cudaDeviceSynchronize());

    std::vector<double> ybad = hcopy(d_ybad, N), yfix = hcopy(d_yfix, N), yref(N, 0.0);
    for (int r = 0; r < M; ++r)
        for (int k = rowptr[r]; k < rowptr[r + 1]; ++k) yref[col[k]] += val[k] * x[r];
    double worst = 0;
    for (int j = 0; j < N; ++j) worst = std::max(worst, fabs(yfix[j] - yref[j]) / (fabs(yref[j]) + 1e-9));
    std::vector<float> a(ybad.begin(), ybad.end()), b(yfix.begin(), yfix.end());
    printf("nnz=%zu y[0]=%.6f (reference %.6f)\n", nnz, yfix[0], yref[0]);
    int rc = verdict("149-spmv-transpose-hub-columns-f64", a, b, 1e-5);
    if (worst > 1e-9) { printf("MISMATCH fixed vs host reference: max_rel_err=%.3g\n", worst); rc = 1; }
    CK(cudaFree(d_rowptr)); CK(cudaFree(d_col)); CK(cudaFree(d_val)); CK(cudaFree(d_x));
    CK(cudaFree(d_ybad)); CK(cudaFree(d_yfix));
    return rc;
}
