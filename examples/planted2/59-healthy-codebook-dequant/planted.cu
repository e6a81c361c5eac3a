// 59-healthy-codebook-dequant. Healthy. Dequantizes 4-bit codes (eight per 32-bit word) through a 16-entry
// float codebook per group of 2048 outputs, the layout of group-wise quantized weights. Each block stages its
// group's codebook in shared memory (one barrier), reads one word per thread and writes its eight floats as
// two float4 stores. 16 entries sit in 16 distinct banks, so lookups never conflict. Output bytes dominate
// (1 GB written, 128 MB read): DRAM-bound.
// Challenger (added 2026-11-27, after the capture measured L2 at 90% and DRAM at 54%, to test the healthy label
// by measurement): the same outputs, but each of a thread's two float4 stores lands next to its neighbours'
// (thread t writes float4 t and t + 256 of its block's 512). If it runs 1.2x faster or more, the label is refuted.
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
#define N (256u << 20)          // outputs
#define GROUP 2048u             // outputs per codebook (one block: 256 threads x 8)

extern "C" __global__ void dequant_codebook(const unsigned* __restrict__ codes, const float* __restrict__ books,
                                            float4* __restrict__ out) {
    __shared__ float book[16];
    if (threadIdx.x < 16) book[threadIdx.x] = books[blockIdx.x * 16 + threadIdx.x];
    __syncthreads();
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned w = codes[i];
    out[2 * i] = make_float4(book[w & 15u], book[(w >> 4) & 15u], book[(w >> 8) & 15u], book[(w >> 12) & 15u]);
    out[2 * i + 1] = make_float4(book[(w >> 16) & 15u], book[(w >> 20) & 15u], book[(w >> 24) & 15u], book[w >> 28]);
}

extern "C" __global__ void dequant_codebook_coalesced(const unsigned* __restrict__ codes,
                                                      const float* __restrict__ books, float4* __restrict__ out) {
    __shared__ float book[16];
    if (threadIdx.x < 16) book[threadIdx.x] = books[blockIdx.x * 16 + threadIdx.x];
    __syncthreads();
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const unsigned q = threadIdx.x + h * 256u;  // the float4 of the block: outputs 4q .. 4q + 3
        const unsigned w = codes[blockIdx.x * 256u + q / 2] >> (16 * (q % 2));
        out[blockIdx.x * 512u + q] = make_float4(book[w & 15u], book[(w >> 4) & 15u], book[(w >> 8) & 15u],
                                                 book[(w >> 12) & 15u]);
    }
}

int main() {
    std::vector<unsigned> hc(N / 8);
    std::vector<float> hb((N / GROUP) * 16);
    for (auto& v : hc) v = urand();
    for (auto& v : hb) v = frand() * 2.0f - 1.0f;
    unsigned* dc = dcopy(hc);
    float *db = dcopy(hb), *dout = dnew<float>(N), *dch = dnew<float>(N);
    LAUNCH(dequant_codebook, N / GROUP, GROUP / 8, dc, db, (float4*)dout);
    LAUNCH(dequant_codebook_coalesced, N / GROUP, GROUP / 8, dc, db, (float4*)dch);
    CK(cudaDeviceSynchronize());
    std::vector<float> got = hcopy(dout, N), want(N);
    for (size_t i = 0; i < N; ++i) want[i] = hb[(i / GROUP) * 16 + ((hc[i / 8] >> (4 * (i % 8))) & 15u)];
    return verdict("59-healthy-codebook-dequant", got, want, 0.0) |
           verdict("59-healthy-codebook-dequant challenger", hcopy(dch, N), want, 0.0);
}
