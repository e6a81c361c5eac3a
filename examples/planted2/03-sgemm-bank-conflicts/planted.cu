// 03-sgemm-bank-conflicts. Planted: shared-memory bank conflicts. A 32x32-tiled SGEMM stores the B
// tile transposed (Bs[col][k]) and its inner loop reads Bs[tx][k]: the 32 lanes of a warp read one
// column, 32 floats apart, so every shared load of B is a 32-way conflict (32 wavefronts).
// Fixed twin: the same kernel with the tile padded to Bs[32][33] (conflict-free).
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
#define M 1024
#define N 1024
#define K 512
#define T 32

extern "C" __global__ void sgemm_conflicted(const float* __restrict__ A, const float* __restrict__ B,
                                            float* __restrict__ C) {
    __shared__ float As[T][T], Bs[T][T];
    int tx = threadIdx.x, ty = threadIdx.y, row = blockIdx.y * T + ty, col = blockIdx.x * T + tx;
    float acc = 0.0f;
    for (int t = 0; t < K; t += T) {
        As[ty][tx] = A[row * K + t + tx];
        Bs[tx][ty] = B[(t + ty) * N + col];
        __syncthreads();
        for (int k = 0; k < T; ++k) acc += As[ty][k] * Bs[tx][k];  // PLANTED
        __syncthreads();
    }
    C[row * N + col] = acc;
}

extern "C" __global__ void sgemm_padded(const float* __restrict__ A, const float* __restrict__ B,
                                        float* __restrict__ C) {
    __shared__ float As[T][T], Bs[T][T + 1];
    int tx = threadIdx.x, ty = threadIdx.y, row = blockIdx.y * T + ty, col = blockIdx.x * T + tx;
    float acc = 0.0f;
    for (int t = 0; t < K; t += T) {
        As[ty][tx] = A[row * K + t + tx];
        Bs[tx][ty] = B[(t + ty) * N + col];
        __syncthreads();
        for (int k = 0; k < T; ++k) acc += As[ty][k] * Bs[tx][k];
        __syncthreads();
    }
    C[row * N + col] = acc;
}

int main() {
    std::vector<float> ha((size_t)M * K), hb((size_t)K * N);
    for (auto& v : ha) v = frand() - 0.5f;
    for (auto& v : hb) v = frand() - 0.5f;
    float *da = dcopy(ha), *db = dcopy(hb), *dbad = dnew<float>((size_t)M * N), *dfix = dnew<float>((size_t)M * N);
    dim3 grid(N / T, M / T), block(T, T);
    LAUNCH(sgemm_conflicted, grid, block, da, db, dbad);
    LAUNCH(sgemm_padded, grid, block, da, db, dfix);
    CK(cudaDeviceSynchronize());
    return verdict("03-sgemm-bank-conflicts", hcopy(dbad, (size_t)M * N), hcopy(dfix, (size_t)M * N), 0.0);
}
