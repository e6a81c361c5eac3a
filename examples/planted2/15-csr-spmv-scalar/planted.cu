// 15-csr-spmv-scalar. Two planted problems. A CSR sparse matrix-vector product with one thread per
// row: (1, dominant) the lanes of a warp walk 32 different rows, so every load of values and column
// indices touches up to 32 sectors (uncoalesced); (2) rows hold 8 to 56 entries, so the lanes of a
// warp leave the loop at different trips (divergence).
// Fixed twin: one warp per row (vector CSR): consecutive lanes read consecutive entries.
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
#define ROWS (1u << 20)
#define COLS (1u << 20)
#define THREADS 256

extern "C" __global__ void spmv_csr_scalar(const unsigned* __restrict__ rowptr, const unsigned* __restrict__ col,
                                           const float* __restrict__ val, const float* __restrict__ x,
                                           float* __restrict__ y) {
    unsigned r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= ROWS) return;
    float s = 0.0f;
    for (unsigned k = rowptr[r]; k < rowptr[r + 1]; ++k) s += val[k] * x[col[k]];  // PLANTED
    y[r] = s;
}

extern "C" __global__ void spmv_csr_vector(const unsigned* __restrict__ rowptr, const unsigned* __restrict__ col,
                                           const float* __restrict__ val, const float* __restrict__ x,
                                           float* __restrict__ y) {
    unsigned r = (blockIdx.x * blockDim.x + threadIdx.x) / 32, lane = threadIdx.x % 32;
    if (r >= ROWS) return;
    float s = 0.0f;
    for (unsigned k = rowptr[r] + lane; k < rowptr[r + 1]; k += 32) s += val[k] * x[col[k]];
    for (int o = 16; o > 0; o /= 2) s += __shfl_xor_sync(0xffffffffu, s, o);
    if (lane == 0) y[r] = s;
}

int main() {
    std::vector<unsigned> rowptr(ROWS + 1, 0), col;
    std::vector<float> val, hx(COLS);
    for (unsigned r = 0; r < ROWS; ++r) {
        unsigned len = 8 + urand() % 49;
        for (unsigned k = 0; k < len; ++k) { col.push_back(urand() % COLS); val.push_back(frand() - 0.5f); }
        rowptr[r + 1] = rowptr[r] + len;
    }
    for (auto& v : hx) v = frand();
    unsigned *drp = dcopy(rowptr), *dcol = dcopy(col);
    float *dval = dcopy(val), *dx = dcopy(hx), *dbad = dnew<float>(ROWS), *dfix = dnew<float>(ROWS);
    LAUNCH(spmv_csr_scalar, ROWS / THREADS, THREADS, drp, dcol, dval, dx, dbad);
    LAUNCH(spmv_csr_vector, ROWS * 32 / THREADS, THREADS, drp, dcol, dval, dx, dfix);
    CK(cudaDeviceSynchronize());
    return verdict("15-csr-spmv-scalar", hcopy(dbad, ROWS), hcopy(dfix, ROWS), 1e-3);
}
