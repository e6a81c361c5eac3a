// 133-healthy-voxel-pool-scatter-f4. Healthy: sum-pooling 2M point features (32 floats each, 256 MB) into a
// 2M-row hashed voxel table (256 MB, well past L2) with float4 global atomics. Voxel hashes are near-uniform:
// about one point a voxel, at most a handful, and the repeats far apart in time, so no address is contended.
// Eight lanes a point, two points a thread with all loads issued before the atomics: the features stream in,
// each touched table line is read once and written back once by L2, and DRAM should run near its roof.
// Challenger: the same pooling a warp a point, one channel a lane, four points in flight, scalar atomics.
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
#define NPTS (1 << 21)          // points
#define NVOX (1 << 21)          // voxel table rows
#define CH 32                   // channels a point (one 128-byte line)

extern "C" __global__ void voxel_pool_f4(const float4* __restrict__ feat, const int* __restrict__ vox,
                                         float4* __restrict__ table, int npts) {
    const int sub = threadIdx.x & 7;                                  // float4 of the row
    const int grp = (blockIdx.x * blockDim.x + threadIdx.x) >> 3;     // eight lanes a point
    const int ngrp = (gridDim.x * blockDim.x) >> 3;
    for (int p = grp; p < npts; p += 2 * ngrp) {
        const int q = p + ngrp;
        const int v0 = vox[p], v1 = q < npts ? vox[q] : -1;
        const float4 a0 = feat[(size_t)p * (CH / 4) + sub];
        const float4 a1 = q < npts ? feat[(size_t)q * (CH / 4) + sub] : make_float4(0.f, 0.f, 0.f, 0.f);
        atomicAdd(&table[(size_t)v0 * (CH / 4) + sub], a0);
        if (v1 >= 0) atomicAdd(&table[(size_t)v1 * (CH / 4) + sub], a1);
    }
}

extern "C" __global__ void voxel_pool_scalar(const float* __restrict__ feat, const int* __restrict__ vox,
                                             float* __restrict__ table, int npts) {
    const int lane = threadIdx.x & 31;
    const int w = (blockIdx.x * blockDim.x + threadIdx.x) >> 5, nw = (gridDim.x * blockDim.x) >> 5;
    for (int p = w; p < npts; p += 4 * nw) {
        int v[4];
        float a[4];
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const int q = p + j * nw;
            v[j] = q < npts ? vox[q] : -1;
            a[j] = q < npts ? feat[(size_t)q * CH + lane] : 0.f;
        }
#pragma unroll
        for (int j = 0; j < 4; ++j)
            if (v[j] >= 0) atomicAdd(&table[(size_t)v[j] * CH + lane], a[j]);
    }
}

// uniform in [0, n) from the generator's high bits (its low bits have short periods)
static unsigned below(unsigned n) { return (unsigned)(((unsigned long long)urand() * n) >> 32); }

int main() {
    std::vector<float> hfeat((size_t)NPTS * CH);
    for (auto& x : hfeat) x = 2.f * frand() - 0.5f;
    std::vector<int> hvox(NPTS), occ(NVOX, 0);
    for (int p = 0; p < NPTS; ++p) { hvox[p] = below(NVOX); occ[hvox[p]]++; }   // hashed voxel coordinates
    int most = 0;
    for (int c : occ) most = std::max(most, c);
    printf("busiest voxel holds %d points\n", most);
    float* dfeat = dcopy(hfeat);
    int* dvox = dcopy(hvox);
    float *dtab = dnew<float>((size_t)NVOX * CH), *dchal = dnew<float>((size_t)NVOX * CH);
    LAUNCH(voxel_pool_f4, 132 * 8, 256, (const float4*)dfeat, dvox, (float4*)dtab, NPTS);
    LAUNCH(voxel_pool_scalar, 132 * 8, 256, dfeat, dvox, dchal, NPTS);
    CK(cudaDeviceSynchronize());
    return verdict("133-healthy-voxel-pool-scatter-f4", hcopy(dtab, (size_t)NVOX * CH), hcopy(dchal, (size_t)NVOX * CH), 1e-4);
}
