// 41-pointwise-conv-scalar. Planted: a matrix product on the FP32 pipe, one output per thread. A 1x1
// convolution (NCHW, 8 images of 56x56, 256 -> 256 channels) is a GEMM per image (W[256x256] times
// X[256x3136]), written here as one thread per output pixel and channel looping over the 256 input
// channels: every FMA needs a load of x (coalesced, served by L1/L2: the 25.7 MB input sits in L2) and
// a load of the weight (the same address across the warp). Loads, not FMAs, set the pace, and no
// tensor core runs.
// Fixed twin: the same GEMM on the tensor cores (WMMA, TF32 inputs, FP32 accumulation): each warp owns
// a 16x16 output tile and steps over the input channels 8 at a time, so one fragment load feeds 16
// MACs per element instead of one. TF32 rounds the inputs to 10 mantissa bits: the results agree to
// about 1e-3 relative.
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
#include <mma.h>
#define IMGS 8
#define CIN 256
#define COUT 256
#define HW (56 * 56)

extern "C" __global__ void __launch_bounds__(256) conv1x1_thread_per_output(const float* __restrict__ x,
                                                                          const float* __restrict__ w,
                                                                          float* __restrict__ y) {
    unsigned p = blockIdx.x * blockDim.x + threadIdx.x, co = blockIdx.y, n = blockIdx.z;
    if (p >= HW) return;
    const float* xi = x + (size_t)n * CIN * HW + p;
    const float* wr = w + (size_t)co * CIN;
    float acc = 0.0f;
    for (int ci = 0; ci < CIN; ++ci)
        acc = fmaf(wr[ci], xi[(size_t)ci * HW], acc);  // PLANTED
    y[((size_t)n * COUT + co) * HW + p] = acc;
}

using namespace nvcuda;
// one warp per 16x16 tile of Y[n] = W X[n]; blockDim 128 = 4 warps along the pixels
extern "C" __global__ void __launch_bounds__(128) conv1x1_wmma_tf32(const float* __restrict__ x,
                                                                  const float* __restrict__ w,
                                                                  float* __restrict__ y) {
    unsigned warp = threadIdx.x / 32, p0 = (blockIdx.x * 4 + warp) * 16, co0 = blockIdx.y * 16, n = blockIdx.z;
    if (p0 >= HW) return;
    const float* xn = x + (size_t)n * CIN * HW;
    wmma::fragment<wmma::accumulator, 16, 16, 8, float> acc;
    wmma::fill_fragment(acc, 0.0f);
    for (int k = 0; k < CIN; k += 8) {
        wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::row_major> a;
        wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::row_major> b;
        wmma::load_matrix_sync(a, w + (size_t)co0 * CIN + k, CIN);
        wmma::load_matrix_sync(b, xn + (size_t)k * HW + p0, HW);
        for (int i = 0; i < a.num_elements; ++i) a.x[i] = wmma::__float_to_tf32(a.x[i]);
        for (int i = 0; i < b.num_elements; ++i) b.x[i] = wmma::__float_to_tf32(b.x[i]);
        wmma::mma_sync(acc, a, b, acc);
    }
    wmma::store_matrix_sync(y + ((size_t)n * COUT + co0) * HW + p0, acc, HW, wmma::mem_row_major);
}

int main() {
    const size_t nx = (size_t)IMGS * CIN * HW, nw = (size_t)COUT * CIN, ny = (size_t)IMGS * COUT * HW;
    std::vector<float> hx(nx), hw(nw);
    for (auto& v : hx) v = frand();
    for (auto& v : hw) v = frand() - 0.25f;
    float *dx = dcopy(hx), *dw = dcopy(hw), *dbad = dnew<float>(ny), *dfix = dnew<float>(ny);
    LAUNCH(conv1x1_thread_per_output, dim3((HW + 255) / 256, COUT, IMGS), 256, dx, dw, dbad);
    LAUNCH(conv1x1_wmma_tf32, dim3(HW / 64 + (HW % 64 != 0), COUT / 16, IMGS), 128, dx, dw, dfix);
    CK(cudaDeviceSynchronize());
    return verdict("41-pointwise-conv-scalar", hcopy(dbad, ny), hcopy(dfix, ny), 2e-2);
}
