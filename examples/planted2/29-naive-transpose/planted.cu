// 29-naive-transpose. Planted: uncoalesced global access. An 8192 x 8192 float transpose that reads
// rows and writes columns directly: the loads are coalesced, but the 32 lanes of a warp store to 32
// rows 32 KB apart (32 sectors per request for 128 useful bytes).
// Fixed twin: a 32x32 tile through shared memory padded to 33 columns; both sides coalesced.
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
#define NX 8192
#define NY 8192

extern "C" __global__ void transpose_naive(const float* __restrict__ in, float* __restrict__ out) {
    unsigned x = blockIdx.x * 32 + threadIdx.x;
    for (unsigned y = blockIdx.y * 32 + threadIdx.y; y < blockIdx.y * 32 + 32; y += 8)
        out[(size_t)x * NY + y] = in[(size_t)y * NX + x];  // PLANTED
}

extern "C" __global__ void transpose_tiled(const float* __restrict__ in, float* __restrict__ out) {
    __shared__ float tile[32][33];
    unsigned x = blockIdx.x * 32 + threadIdx.x, y0 = blockIdx.y * 32;
    for (unsigned dy = threadIdx.y; dy < 32; dy += 8) tile[dy][threadIdx.x] = in[(size_t)(y0 + dy) * NX + x];
    __syncthreads();
    unsigned ox = y0 + threadIdx.x, oy0 = blockIdx.x * 32;
    for (unsigned dy = threadIdx.y; dy < 32; dy += 8) out[(size_t)(oy0 + dy) * NY + ox] = tile[threadIdx.x][dy];
}

int main() {
    size_t n = (size_t)NX * NY;
    std::vector<float> hin(n);
    for (auto& v : hin) v = frand();
    float *din = dcopy(hin), *dbad = dnew<float>(n), *dfix = dnew<float>(n);
    LAUNCH(transpose_naive, dim3(NX / 32, NY / 32), dim3(32, 8), din, dbad);
    LAUNCH(transpose_tiled, dim3(NX / 32, NY / 32), dim3(32, 8), din, dfix);
    CK(cudaDeviceSynchronize());
    return verdict("29-naive-transpose", hcopy(dbad, n), hcopy(dfix, n), 0.0);
}
