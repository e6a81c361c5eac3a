// 26-colsum-atomic-strided. Two planted problems. Column sums of a 16384 x 1024 matrix with one thread
// per element: (1, dominant) each thread atomicAdds its element into colsum[c], and the 32 lanes of a
// warp share one column, so 16M reductions pile onto 1024 addresses; (2) consecutive lanes take
// consecutive rows, 4 KB apart, so every load touches 32 sectors (uncoalesced).
// Fixed twin: 32 columns x 8 row-threads per block, each thread sums 32 rows of its column
// (coalesced across the columns), a shared-memory combine and one atomicAdd per column per block.
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
#define R 16384
#define C 1024
#define THREADS 256

extern "C" __global__ void colsum_atomic(const float* __restrict__ x, float* __restrict__ colsum) {
    unsigned t = blockIdx.x * blockDim.x + threadIdx.x, r = t % R, c = t / R;
    atomicAdd(&colsum[c], x[(size_t)r * C + c]);  // PLANTED
}

extern "C" __global__ void colsum_tiled(const float* __restrict__ x, float* __restrict__ colsum) {
    __shared__ float part[8][32];
    unsigned c = blockIdx.x * 32 + threadIdx.x % 32, ty = threadIdx.x / 32, r0 = blockIdx.y * 256;
    float s = 0.0f;
    for (unsigned r = r0 + ty; r < r0 + 256; r += 8) s += x[(size_t)r * C + c];
    part[ty][threadIdx.x % 32] = s;
    __syncthreads();
    if (ty == 0) {
        for (int k = 1; k < 8; ++k) s += part[k][threadIdx.x];
        atomicAdd(&colsum[c], s);
    }
}

int main() {
    std::vector<float> hx((size_t)R * C);
    for (auto& v : hx) v = frand();
    float *dx = dcopy(hx), *dbad = dnew<float>(C), *dfix = dnew<float>(C);
    LAUNCH(colsum_atomic, (size_t)R * C / THREADS, THREADS, dx, dbad);
    LAUNCH(colsum_tiled, dim3(C / 32, R / 256), THREADS, dx, dfix);
    CK(cudaDeviceSynchronize());
    return verdict("26-colsum-atomic-strided", hcopy(dbad, C), hcopy(dfix, C), 1e-3);
}
