// 31-bitonic-sort-smem. Planted: barrier-heavy synchronization. Each 1024-thread block sorts 2048 floats
// in shared memory with a bitonic network and a block-wide __syncthreads after each of its 66
// compare-exchange steps, although every step with a stride of 32 or less stays inside one warp.
// Fixed twin: the same network, __syncwarp between two warp-local steps: 21 block barriers, not 66.
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
#define N (16u << 20)
#define CH 2048

__device__ __forceinline__ void cmp_swap(float* s, unsigned t, unsigned k, unsigned j) {
    unsigned i = 2 * t - (t & (j - 1)), p = i + j;  // i: t with a 0 bit inserted at j
    float a = s[i], b = s[p];
    if ((a > b) == ((i & k) == 0)) { s[i] = b; s[p] = a; }
}

extern "C" __global__ void bitonic_block_barriers(const float* __restrict__ x, float* __restrict__ y) {
    __shared__ float s[CH];
    unsigned t = threadIdx.x, base = blockIdx.x * CH;
    s[t] = x[base + t]; s[t + CH / 2] = x[base + t + CH / 2];
    __syncthreads();
    for (unsigned k = 2; k <= CH; k *= 2)
        for (unsigned j = k / 2; j > 0; j /= 2) {
            cmp_swap(s, t, k, j); __syncthreads();  // PLANTED
        }
    y[base + t] = s[t]; y[base + t + CH / 2] = s[t + CH / 2];
}

extern "C" __global__ void bitonic_warp_steps(const float* __restrict__ x, float* __restrict__ y) {
    __shared__ float s[CH];
    unsigned t = threadIdx.x, base = blockIdx.x * CH;
    s[t] = x[base + t]; s[t + CH / 2] = x[base + t + CH / 2];
    __syncthreads();
    for (unsigned k = 2; k <= CH; k *= 2)
        for (unsigned j = k / 2; j > 0; j /= 2) {
            cmp_swap(s, t, k, j);
            unsigned next = j > 1 ? j / 2 : k;  // the next step's stride (k * 2 / 2 at the next k)
            if (j >= 64 || next >= 64) __syncthreads(); else __syncwarp();  // warp-local otherwise
        }
    __syncthreads();
    y[base + t] = s[t]; y[base + t + CH / 2] = s[t + CH / 2];
}

int main() {
    std::vector<float> hx(N);
    for (auto& v : hx) v = frand();
    float *dx = dcopy(hx), *dbad = dnew<float>(N), *dfix = dnew<float>(N);
    LAUNCH(bitonic_block_barriers, N / CH, CH / 2, dx, dbad);
    LAUNCH(bitonic_warp_steps, N / CH, CH / 2, dx, dfix);
    CK(cudaDeviceSynchronize());
    return verdict("31-bitonic-sort-smem", hcopy(dbad, N), hcopy(dfix, N), 0.0);
}
