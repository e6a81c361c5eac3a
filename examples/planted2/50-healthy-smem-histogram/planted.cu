// 50-healthy-smem-histogram. Healthy: a 256-bin byte histogram of 512 MB, privatized the standard way:
// each block counts its grid-stride share into a shared-memory histogram with shared atomics (random
// bytes: collisions are rare), then adds its 256 counts to the global histogram with one atomicAdd per bin.
// Bound by DRAM reading the input (uchar4 loads): no warning is expected.
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
#define BYTES (512u << 20)
#define BINS 256
#define BLOCKS 1056   // 132 SMs x 8 blocks of 256 threads: one full wave, grid-stride

extern "C" __global__ void __launch_bounds__(256) histogram_private(const uchar4* __restrict__ data,
                                                                   unsigned* __restrict__ hist) {
    __shared__ unsigned local[BINS];
    local[threadIdx.x] = 0;
    __syncthreads();
    for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < BYTES / 4; i += gridDim.x * blockDim.x) {
        uchar4 v = data[i];
        atomicAdd(&local[v.x], 1u); atomicAdd(&local[v.y], 1u); atomicAdd(&local[v.z], 1u); atomicAdd(&local[v.w], 1u);
    }
    __syncthreads();
    atomicAdd(&hist[threadIdx.x], local[threadIdx.x]);
}

int main() {
    std::vector<unsigned char> hd(BYTES);
    for (auto& v : hd) v = (unsigned char)(urand() >> 24);
    std::vector<float> ref(BINS, 0.0f);
    std::vector<unsigned> count(BINS, 0);
    for (auto v : hd) ++count[v];
    for (int b = 0; b < BINS; ++b) ref[b] = (float)count[b];
    unsigned char* dd = dcopy(hd);
    unsigned* dh = dnew<unsigned>(BINS);
    LAUNCH(histogram_private, BLOCKS, 256, reinterpret_cast<const uchar4*>(dd), dh);
    CK(cudaDeviceSynchronize());
    std::vector<unsigned> got = hcopy(dh, BINS);
    std::vector<float> gotf(got.begin(), got.end());
    return verdict("50-healthy-smem-histogram", gotf, ref, 0.0);
}
