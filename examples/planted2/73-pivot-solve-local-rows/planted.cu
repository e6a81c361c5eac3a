// 73-pivot-solve-local-rows. Planted: local-memory traffic. Batched 8x8 solves (getrf+getrs for many small
// systems, one per thread), written the CPU way: partial pivoting never moves rows, it permutes an index
// vector and every access goes through it (a[perm[r]][c]). A row chosen at run time cannot live in registers,
// so ptxas puts the 8x9 augmented matrix and perm on the stack (320 B a thread, 640 KB an SM at full
// occupancy: L1 overflows), and every elimination update is two local loads and a local store, scattered
// over up to 8 rows per warp because each lane pivots differently.
// Fixed twin: the same elimination with physical row swaps written as selects in fully unrolled loops
// (constant indices: the matrix stays in 72 registers); it then runs at DRAM speed on its 302 MB of input.
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
#define N 8
#define NC (N + 1)            // augmented column: the right-hand side
#define SYSTEMS (1 << 20)
#define THREADS 128

// A[(r * NC + c) * SYSTEMS + s]: entry (r, c) of system s, so a warp's loads of one entry are contiguous
extern "C" __global__ void solve8_rowperm(const float* __restrict__ A, float* __restrict__ X) {
    const int s = blockIdx.x * blockDim.x + threadIdx.x;
    float a[N][NC];
    int perm[N];
    for (int r = 0; r < N; ++r) {
        perm[r] = r;
        for (int c = 0; c < NC; ++c) a[r][c] = A[(size_t)(r * NC + c) * SYSTEMS + s];
    }
    for (int k = 0; k < N; ++k) {
        int p = k;
        for (int r = k + 1; r < N; ++r)
            if (fabsf(a[perm[r]][k]) > fabsf(a[perm[p]][k])) p = r;  // PLANTED
        const int pk = perm[p];
        perm[p] = perm[k];
        perm[k] = pk;
        const float inv = 1.0f / a[pk][k];
        for (int r = k + 1; r < N; ++r) {
            const int pr = perm[r];
            const float f = a[pr][k] * inv;
            for (int c = k + 1; c < NC; ++c) a[pr][c] -= f * a[pk][c];  // PLANTED
        }
    }
    float x[N];
    for (int r = N - 1; r >= 0; --r) {
        const int pr = perm[r];
        float v = a[pr][N];
        for (int c = r + 1; c < N; ++c) v -= a[pr][c] * x[c];
        x[r] = v / a[pr][r];
    }
    for (int r = 0; r < N; ++r) X[(size_t)r * SYSTEMS + s] = x[r];
}

extern "C" __global__ void solve8_rowswap(const float* __restrict__ A, float* __restrict__ X) {
    const int s = blockIdx.x * blockDim.x + threadIdx.x;
    float a[N][NC];
#pragma unroll
    for (int r = 0; r < N; ++r)
#pragma unroll
        for (int c = 0; c < NC; ++c) a[r][c] = A[(size_t)(r * NC + c) * SYSTEMS + s];
#pragma unroll
    for (int k = 0; k < N; ++k) {
        // bring the largest |a[r][k]|, r >= k, to row k (the first of equals, as the search above picks)
#pragma unroll
        for (int r = k + 1; r < N; ++r) {
            const bool sw = fabsf(a[r][k]) > fabsf(a[k][k]);
#pragma unroll
            for (int c = k; c < NC; ++c) {
                const float t = a[k][c];
                a[k][c] = sw ? a[r][c] : t;
                a[r][c] = sw ? t : a[r][c];
            }
        }
        const float inv = 1.0f / a[k][k];
#pragma unroll
        for (int r = k + 1; r < N; ++r) {
            const float f = a[r][k] * inv;
#pragma unroll
            for (int c = k + 1; c < NC; ++c) a[r][c] -= f * a[k][c];
        }
    }
    float x[N];
#pragma unroll
    for (int r = N - 1; r >= 0; --r) {
        float v = a[r][N];
#pragma unroll
        for (int c = r + 1; c < N; ++c) v -= a[r][c] * x[c];
        x[r] = v / a[r][r];
    }
#pragma unroll
    for (int r = 0; r < N; ++r) X[(size_t)r * SYSTEMS + s] = x[r];
}

int main() {
    std::vector<float> ha((size_t)N * NC * SYSTEMS);
    for (size_t s = 0; s < SYSTEMS; ++s)  // one system's 72 entries from consecutive draws
        for (int e = 0; e < N * NC; ++e) ha[(size_t)e * SYSTEMS + s] = 2.0f * frand() - 1.0f;
    float* da = dcopy(ha);
    float *dbad = dnew<float>((size_t)N * SYSTEMS), *dfix = dnew<float>((size_t)N * SYSTEMS);
    LAUNCH(solve8_rowperm, SYSTEMS / THREADS, THREADS, da, dbad);
    LAUNCH(solve8_rowswap, SYSTEMS / THREADS, THREADS, da, dfix);
    CK(cudaDeviceSynchronize());
    return verdict("73-pivot-solve-local-rows", hcopy(dbad, (size_t)N * SYSTEMS), hcopy(dfix, (size_t)N * SYSTEMS), 1e-3);
}
