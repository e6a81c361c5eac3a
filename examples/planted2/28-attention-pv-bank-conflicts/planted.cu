// 28-attention-pv-bank-conflicts. Two planted problems. O = P V for 64 heads (P: 1024 x 1024
// probabilities, V: 1024 x 64, fp32), a 64x64 output tile per 256-thread block with a 4x4 register
// tile: (1, dominant) the V tile is kept transposed, Vt[d][j], and read as Vt[tx*4+c][j]: the 16
// lanes of a half-warp hit one bank (16-way conflicts), and its transposing store is a 32-way
// conflict; (2) the product runs on FFMAs, not on the tensor cores.
// Fixed twin: the V tile kept as Vs[j][d], read as one float4 per lane (conflict-free).
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
#define BH 64
#define L 1024
#define D 64
#define TI 64
#define TJ 32

extern "C" __global__ void pv_conflicted(const float* __restrict__ p, const float* __restrict__ v,
                                         float* __restrict__ o) {
    __shared__ float ps[TI][TJ + 1], vt[D][TJ];
    const float* pb = p + ((size_t)blockIdx.z * L + blockIdx.x * TI) * L;
    const float* vb = v + (size_t)blockIdx.z * L * D;
    int t = threadIdx.y * 16 + threadIdx.x;
    float acc[4][4] = {};
    for (int j0 = 0; j0 < L; j0 += TJ) {
        for (int e = t; e < TI * TJ; e += 256) ps[e / TJ][e % TJ] = pb[(size_t)(e / TJ) * L + j0 + e % TJ];
        for (int e = t; e < TJ * D; e += 256) vt[e % D][e / D] = vb[(size_t)(j0 + e / D) * D + e % D];
        __syncthreads();
        for (int j = 0; j < TJ; ++j) {
            float a[4], b[4];
            for (int r = 0; r < 4; ++r) a[r] = ps[threadIdx.y * 4 + r][j];
            for (int c = 0; c < 4; ++c) b[c] = vt[threadIdx.x * 4 + c][j];  // PLANTED
            for (int r = 0; r < 4; ++r)
                for (int c = 0; c < 4; ++c) acc[r][c] = fmaf(a[r], b[c], acc[r][c]);
        }
        __syncthreads();
    }
    for (int r = 0; r < 4; ++r)
        *(float4*)(o + ((size_t)blockIdx.z * L + blockIdx.x * TI + threadIdx.y * 4 + r) * D + threadIdx.x * 4) =
            make_float4(acc[r][0], acc[r][1], acc[r][2], acc[r][3]);
}

extern "C" __global__ void pv_rowmajor(const float* __restrict__ p, const float* __restrict__ v,
                                       float* __restrict__ o) {
    __shared__ float ps[TI][TJ + 1];
    __shared__ __align__(16) float vs[TJ][D];
    const float* pb = p + ((size_t)blockIdx.z * L + blockIdx.x * TI) * L;
    const float* vb = v + (size_t)blockIdx.z * L * D;
    int t = threadIdx.y * 16 + threadIdx.x;
    float acc[4][4] = {};
    for (int j0 = 0; j0 < L; j0 += TJ) {
        for (int e = t; e < TI * TJ; e += 256) ps[e / TJ][e % TJ] = pb[(size_t)(e / TJ) * L + j0 + e % TJ];
        for (int e = t; e < TJ * D; e += 256) vs[e / D][e % D] = vb[(size_t)(j0 + e / D) * D + e % D];
        __syncthreads();
        for (int j = 0; j < TJ; ++j) {
            float a[4];
            for (int r = 0; r < 4; ++r) a[r] = ps[threadIdx.y * 4 + r][j];
            float4 b4 = *(const float4*)&vs[j][threadIdx.x * 4];
            float b[4] = {b4.x, b4.y, b4.z, b4.w};
            for (int r = 0; r < 4; ++r)
                for (int c = 0; c < 4; ++c) acc[r][c] = fmaf(a[r], b[c], acc[r][c]);
        }
        __syncthreads();
    }
    for (int r = 0; r < 4; ++r)
        *(float4*)(o + ((size_t)blockIdx.z * L + blockIdx.x * TI + threadIdx.y * 4 + r) * D + threadIdx.x * 4) =
            make_float4(acc[r][0], acc[r][1], acc[r][2], acc[r][3]);
}

int main() {
    size_t np = (size_t)BH * L * L, nv = (size_t)BH * L * D;
    std::vector<float> hp(np), hv(nv);
    for (auto& x : hp) x = frand() * (2.0f / L);
    for (auto& x : hv) x = frand() - 0.5f;
    float *dp = dcopy(hp), *dv = dcopy(hv), *dbad = dnew<float>(nv), *dfix = dnew<float>(nv);
    LAUNCH(pv_conflicted, dim3(L / TI, 1, BH), dim3(16, 16), dp, dv, dbad);
    LAUNCH(pv_rowmajor, dim3(L / TI, 1, BH), dim3(16, 16), dp, dv, dfix);
    CK(cudaDeviceSynchronize());
    return verdict("28-attention-pv-bank-conflicts", hcopy(dbad, nv), hcopy(dfix, nv), 0.0);
}
