// 197-csr-row-equilibrate-thread-per-row. Planted: uncoalesced global access through CSR row offsets.
// Row-equilibration statistics of an 811,008-row sparse matrix in CSR (48 to 80 nonzeros a row, 51.9M in all,
// 415 MB of float values and int column indices): for each row the scale 1/max|a_ij| and the lowest and highest
// column it touches (its band), one thread a row (CSR-scalar). Each thread walks its own row, so at every step
// the 32 lanes of a warp read 32 values about 256 B apart (one 32-byte sector each for 4 useful bytes) and the
// same for the columns: 32 sectors a request where 4 would do, one L1 wavefront a lane, and with 2048 threads
// an SM each holding two 128-byte lines (512 KB) L1 cannot keep every line until its other 7 values are read.
// Fixed twin: a warp a row (CSR-vector): lanes read 32 consecutive values and columns from a 128-byte-aligned
// start (predicated at the row's ends) and reduce with shuffles; the same bytes stream once, about 3-5x faster.
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
#include <climits>
#include <algorithm>

extern "C" __global__ void rowstats_thread_per_row(const int* __restrict__ row_ptr, const float* __restrict__ vals,
                                                   const int* __restrict__ cols, int nrows, float* __restrict__ scale,
                                                   int* __restrict__ lo, int* __restrict__ hi) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= nrows) return;
    int beg = row_ptr[r], end = row_ptr[r + 1];
    float amax = 0.0f;
    int cmin = INT_MAX, cmax = -1;
    for (int i = beg; i < end; ++i) {
        amax = fmaxf(amax, fabsf(vals[i]));  // PLANTED
        int c = cols[i];                     // PLANTED
        cmin = min(cmin, c);
        cmax = max(cmax, c);
    }
    scale[r] = amax > 0.0f ? 1.0f / amax : 1.0f;
    lo[r] = cmin;
    hi[r] = cmax;
}

extern "C" __global__ void rowstats_warp_per_row(const int* __restrict__ row_ptr, const float* __restrict__ vals,
                                                 const int* __restrict__ cols, int nrows, float* __restrict__ scale,
                                                 int* __restrict__ lo, int* __restrict__ hi) {
    int r = (int)((blockIdx.x * (unsigned)blockDim.x + threadIdx.x) >> 5);
    int lane = threadIdx.x & 31;
    if (r >= nrows) return;  // uniform across the warp
    int beg = row_ptr[r], end = row_ptr[r + 1];
    float amax = 0.0f;
    int cmin = INT_MAX, cmax = -1;
    for (int base = beg & ~31; base < end; base += 32) {  // 128-byte-aligned steps, the same for every lane
        int i = base + lane;
        bool in = i >= beg && i < end;
        float v = in ? fabsf(vals[i]) : 0.0f;
        int c = in ? cols[i] : -1;
        amax = fmaxf(amax, v);
        if (in) { cmin = min(cmin, c); cmax = max(cmax, c); }
    }
    for (int o = 16; o > 0; o >>= 1) {
        amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
        cmin = min(cmin, __shfl_xor_sync(0xffffffffu, cmin, o));
        cmax = max(cmax, __shfl_xor_sync(0xffffffffu, cmax, o));
    }
    if (lane == 0) {
        scale[r] = amax > 0.0f ? 1.0f / amax : 1.0f;
        lo[r] = cmin;
        hi[r] = cmax;
    }
}

int main() {
    const int nrows = 132 * 2048 * 3;  // three full waves of one thread a row
    const int halfband = 1500;
    std::vector<int> row_ptr(nrows + 1);
    row_ptr[0] = 0;
    for (int r = 0; r < nrows; ++r) row_ptr[r + 1] = row_ptr[r] + 48 + (int)(urand() % 33);  // 48..80 a row
    const int nnz = row_ptr[nrows];
    std::vector<float> vals(nnz);
    std::vector<int> cols(nnz);
    for (int r = 0; r < nrows; ++r) {
        float mag = 0.01f + 100.0f * frand();  // rows of very different scales: why one equilibrates
        for (int i = row_ptr[r]; i < row_ptr[r + 1]; ++i) {
            int c = r - halfband + (int)(urand() % (2 * halfband + 1));
            cols[i] = c < 0 ? 0 : (c >= nrows ? nrows - 1 : c);
            vals[i] = mag * (2.0f * frand() - 1.0f);
        }
    }
    int* d_ptr = dcopy(row_ptr);
    float* d_vals = dcopy(vals);
    int* d_cols = dcopy(cols);
    float* d_scale_a = dnew<float>(nrows);
    float* d_scale_b = dnew<float>(nrows);
    int* d_lo_a = dnew<int>(nrows);
    int* d_lo_b = dnew<int>(nrows);
    int* d_hi_a = dnew<int>(nrows);
    int* d_hi_b = dnew<int>(nrows);

    LAUNCH(rowstats_thread_per_row, (nrows + 255) / 256, 256, d_ptr, d_vals, d_cols, nrows, d_scale_a, d_lo_a, d_hi_a);
    LAUNCH(rowstats_warp_per_row, (int)(((long long)nrows * 32 + 255) / 256), 256, d_ptr, d_vals, d_cols, nrows,
           d_scale_b, d_lo_b, d_hi_b);
    CK(cudaDeviceSynchronize());

    std::vector<float> sa = hcopy(d_scale_a, nrows), sb = hcopy(d_scale_b, nrows);
    std::vector<int> la = hcopy(d_lo_a, nrows), lb = hcopy(d_lo_b, nrows);
    std::vector<int> ha = hcopy(d_hi_a, nrows), hb = hcopy(d_hi_b, nrows);
    std::vector<float> a, b;  // scales, then columns (all below 2^24, exact as floats)
    a.reserve(3 * (size_t)nrows);
    b.reserve(3 * (size_t)nrows);
    for (int r = 0; r < nrows; ++r) { a.push_back(sa[r]); b.push_back(sb[r]); }
    for (int r = 0; r < nrows; ++r) { a.push_back((float)la[r]); b.push_back((float)lb[r]); }
    for (int r = 0; r < nrows; ++r) { a.push_back((float)(ha[r] - la[r])); b.push_back((float)(hb[r] - lb[r])); }
    // spot-check the twin against the host on every 997th row
    for (int r = 0; r < nrows; r += 997) {
        float m = 0.0f;
        int mn = INT_MAX, mx = -1;
        for (int i = row_ptr[r]; i < row_ptr[r + 1]; ++i) {
            m = fmaxf(m, fabsf(vals[i]));
            mn = std::min(mn, cols[i]);
            mx = std::max(mx, cols[i]);
        }
        if (1.0f / m != sb[r] || mn != lb[r] || mx != hb[r]) {
            printf("MISMATCH 197-csr-row-equilibrate-thread-per-row host row %d\n", r);
            return 1;
        }
    }
    return verdict("197-csr-row-equilibrate-thread-per-row", a, b, 1e-6);
}
