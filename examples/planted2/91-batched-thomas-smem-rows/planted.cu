// 91-batched-thomas-smem-rows. Planted: shared-memory bank conflicts. A batched tridiagonal solver (Thomas
// algorithm) for the 512K line systems of an implicit diffusion step, n = 32 unknowns each (a generic solver: n is
// a kernel argument). Each warp stages the three diagonals and right-hand sides of its 32 systems in shared memory
// (coalesced), then each lane solves one system, walking its own row: rows are n = 32 floats apart, so at every
// step the 32 lanes hit one bank: each shared load and store of the two sweeps is a 32-way conflict.
// Fixed twin: the same kernel with a row stride of n + 1 floats: lane l's element i sits in bank (l + i) % 32,
// conflict-free.
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
#define SYSTEMS (1 << 19)
#define NEQ 32
#define WARPS 4
#define THREADS (32 * WARPS)

// a: sub-diagonal (a[0] = 0), b: diagonal, c: super-diagonal (c[n-1] = 0), d: right-hand side; system s occupies
// [s * n, s * n + n) of each array. Each warp solves 32 consecutive systems; rows of ld floats in shared memory.
__device__ __forceinline__ void thomas_warp(const float* __restrict__ a, const float* __restrict__ b,
                                            const float* __restrict__ c, const float* __restrict__ d,
                                            float* __restrict__ x, int n, int ld, float* sm) {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    float* sa = sm + (size_t)warp * 4 * 32 * ld;
    float* sb = sa + 32 * ld;
    float* sc = sb + 32 * ld;
    float* sd = sc + 32 * ld;
    const size_t sys0 = ((size_t)blockIdx.x * WARPS + warp) * 32;
    for (int i = lane; i < n; i += 32)
#pragma unroll 8
        for (int s = 0; s < 32; ++s) {
            size_t g = (sys0 + s) * n + i;
            sa[s * ld + i] = a[g]; sb[s * ld + i] = b[g]; sc[s * ld + i] = c[g]; sd[s * ld + i] = d[g];
        }
    __syncwarp();
    float *ra = sa + lane * ld, *rb = sb + lane * ld, *rc = sc + lane * ld, *rd = sd + lane * ld;
    float cp = 0.0f, dp = 0.0f;
    for (int i = 0; i < n; ++i) {  // forward elimination: c' and d' overwrite c and d
        float ai = ra[i], m = 1.0f / (rb[i] - ai * cp); cp = rc[i] * m; dp = (rd[i] - ai * dp) * m; rc[i] = cp; rd[i] = dp;  // PLANTED
    }
    float xi = 0.0f;  // back substitution: x overwrites d
    for (int i = n - 1; i >= 0; --i) { xi = rd[i] - rc[i] * xi; rd[i] = xi; }  // PLANTED
    __syncwarp();
    for (int i = lane; i < n; i += 32)
#pragma unroll 8
        for (int s = 0; s < 32; ++s) x[(sys0 + s) * n + i] = sd[s * ld + i];
}

extern "C" __global__ void thomas_rows_packed(const float* __restrict__ a, const float* __restrict__ b,
                                              const float* __restrict__ c, const float* __restrict__ d,
                                              float* __restrict__ x, int n) {
    extern __shared__ float sm[];
    thomas_warp(a, b, c, d, x, n, n, sm);  // row stride n: 32 floats
}

extern "C" __global__ void thomas_rows_padded(const float* __restrict__ a, const float* __restrict__ b,
                                              const float* __restrict__ c, const float* __restrict__ d,
                                              float* __restrict__ x, int n) {
    extern __shared__ float sm[];
    thomas_warp(a, b, c, d, x, n, n + 1, sm);  // row stride n + 1: 33 floats
}

int main() {
    const size_t total = (size_t)SYSTEMS * NEQ;
    std::vector<float> ha(total), hb(total), hc(total), hd(total);
    for (size_t k = 0; k < total; ++k) {
        int i = (int)(k % NEQ);
        ha[k] = i == 0 ? 0.0f : -frand();
        hc[k] = i == NEQ - 1 ? 0.0f : -frand();
        hb[k] = 2.5f + frand();  // diagonally dominant
        hd[k] = 2.0f * frand() - 1.0f;
    }
    float *da = dcopy(ha), *db = dcopy(hb), *dc = dcopy(hc), *dd = dcopy(hd);
    float *xb = dnew<float>(total), *xf = dnew<float>(total);
    const int smem_packed = WARPS * 4 * 32 * NEQ * sizeof(float);         // 64 KB
    const int smem_padded = WARPS * 4 * 32 * (NEQ + 1) * sizeof(float);   // 66 KB
    CK(cudaFuncSetAttribute(thomas_rows_packed, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_packed));
    CK(cudaFuncSetAttribute(thomas_rows_padded, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_padded));
    const int blocks = SYSTEMS / (32 * WARPS);
    thomas_rows_packed<<<blocks, THREADS, smem_packed>>>(da, db, dc, dd, xb, NEQ);
    CK(cudaGetLastError());
    thomas_rows_padded<<<blocks, THREADS, smem_padded>>>(da, db, dc, dd, xf, NEQ);
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    return verdict("91-batched-thomas-smem-rows", hcopy(xb, total), hcopy(xf, total), 1e-5);
}
