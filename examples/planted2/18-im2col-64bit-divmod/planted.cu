// 18-im2col-64bit-divmod. Planted: issue-bound index arithmetic. im2col with one thread per element
// of the 1152 x 16384 column matrix, decoding the flat index into (channel, kh, kw, oh, ow) with
// 64-bit divisions and remainders by runtime sizes: each is a long instruction sequence, so integer
// instructions, not the 8 bytes each thread moves, set the time.
// Fixed twin: a 2-D grid (one row of the column matrix per blockIdx.y), 32-bit arithmetic with the
// shape known at compile time: shifts and one small division per thread.
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
#define C 128
#define H 130
#define OH 128
#define KS 3
#define THREADS 256

extern "C" __global__ void im2col_flat(const float* __restrict__ in, float* __restrict__ out,
                                       size_t channels, size_t height, size_t oh, size_t ks) {
    size_t e = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    size_t ow = e % oh, t = e / oh, y = t % oh; t /= oh;  // PLANTED
    size_t kw = t % ks; t /= ks;
    size_t kh = t % ks, c = t / ks;
    if (c < channels) out[e] = in[(c * height + y + kh) * height + ow + kw];
}

extern "C" __global__ void im2col_2d(const float* __restrict__ in, float* __restrict__ out) {
    unsigned row = blockIdx.y, c = row / (KS * KS), kh = row / KS % KS, kw = row % KS;
    unsigned p = blockIdx.x * blockDim.x + threadIdx.x, y = p / OH, x = p % OH;
    out[(size_t)row * OH * OH + p] = in[(c * H + y + kh) * H + x + kw];
}

int main() {
    size_t n_in = (size_t)C * H * H, rows = (size_t)C * KS * KS, n_out = rows * OH * OH;
    std::vector<float> hin(n_in);
    for (auto& v : hin) v = frand();
    float *din = dcopy(hin), *dbad = dnew<float>(n_out), *dfix = dnew<float>(n_out);
    LAUNCH(im2col_flat, n_out / THREADS, THREADS, din, dbad, (size_t)C, (size_t)H, (size_t)OH, (size_t)KS);
    LAUNCH(im2col_2d, dim3(OH * OH / THREADS, rows), THREADS, din, dfix);
    CK(cudaDeviceSynchronize());
    return verdict("18-im2col-64bit-divmod", hcopy(dbad, n_out), hcopy(dfix, n_out), 0.0);
}
