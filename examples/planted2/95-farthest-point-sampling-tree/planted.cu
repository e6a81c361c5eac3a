// 95-farthest-point-sampling-tree. Planted: barrier-heavy. Farthest point sampling as in PointNet++ (512 clouds of
// 1024 points, 512 samples each): one block of 1024 threads per cloud, a point per thread, its distance to the
// sampled set in a register. Each of the 511 steps updates that distance (a dozen instructions) and then finds the
// farthest point with a shared-memory argmax tree that ends every level with __syncthreads: 11 barriers a step, the
// last five levels run by a single warp while 31 wait. The block's time is a chain of barriers.
// Fixed twin: the same step with a warp-level argmax (__reduce_max_sync / __reduce_min_sync on the distance bits
// and the index), one shared-memory slot per warp and a single barrier; ties go to the lower index in both.
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
#define CLOUDS 512
#define NPTS 1024                // points per cloud = threads per block
#define NSAMP 512                // samples per cloud (the first is point 0)
#define FULL 0xffffffffu

// Stages the cloud (B, N, 3) in shared memory with coalesced loads; each thread keeps its own point in registers.
__device__ __forceinline__ void load_cloud(const float* __restrict__ xyz, float* sp, float& px, float& py, float& pz) {
    for (int k = threadIdx.x; k < 3 * NPTS; k += NPTS) sp[k] = xyz[(size_t)blockIdx.x * 3 * NPTS + k];
    __syncthreads();
    px = sp[3 * threadIdx.x]; py = sp[3 * threadIdx.x + 1]; pz = sp[3 * threadIdx.x + 2];
}

// Writes the chosen indices of the cloud, kept in shared memory while sampling.
__device__ __forceinline__ void store_chosen(const int* chosen, float* __restrict__ idx) {
    __syncthreads();
    for (int k = threadIdx.x; k < NSAMP; k += NPTS) idx[(size_t)blockIdx.x * NSAMP + k] = (float)chosen[k];
}

// Squared distance to the last sample, folded into the distance to the sampled set (same rounding in both kernels).
__device__ __forceinline__ float fold_distance(float md, float px, float py, float pz, const float* sp, int last) {
    const float dx = px - sp[3 * last], dy = py - sp[3 * last + 1], dz = pz - sp[3 * last + 2];
    return fminf(md, fmaf(dx, dx, fmaf(dy, dy, __fmul_rn(dz, dz))));
}

// PointNet++'s __update: slot a keeps the farther of a and b (larger distance, the lower index on a tie).
__device__ __forceinline__ void keep_farther(float* d, int* i, int a, int b) {
    const float d1 = d[a], d2 = d[b];
    const int i1 = i[a], i2 = i[b];
    const bool f = (d2 > d1) | ((d2 == d1) & (i2 < i1));
    d[a] = f ? d2 : d1; i[a] = f ? i2 : i1;
}

extern "C" __global__ void __launch_bounds__(NPTS, 2)
fps_block_tree(const float* __restrict__ xyz, float* __restrict__ idx) {
    __shared__ float sp[3 * NPTS];
    __shared__ float bd[2][NPTS];       // tree of (distance, index), double-buffered by step parity
    __shared__ int bi[2][NPTS];
    __shared__ int chosen[NSAMP];
    const int tid = threadIdx.x;
    float px, py, pz, md = 1e10f;
    load_cloud(xyz, sp, px, py, pz);
    int last = 0;
    if (tid == 0) chosen[0] = 0;
    for (int j = 1; j < NSAMP; ++j) {
        md = fold_distance(md, px, py, pz, sp, last);
        float* d = bd[j & 1];
        int* i = bi[j & 1];
        d[tid] = md; i[tid] = tid;
        __syncthreads();
        for (int s = NPTS / 2; s > 0; s >>= 1) { if (tid < s) keep_farther(d, i, tid, tid + s); __syncthreads(); }  // PLANTED
        last = i[0];
        if (tid == 0) chosen[j] = last;
    }
    store_chosen(chosen, idx);
}

extern "C" __global__ void __launch_bounds__(NPTS, 2)
fps_warp_argmax(const float* __restrict__ xyz, float* __restrict__ idx) {
    __shared__ float sp[3 * NPTS];
    __shared__ unsigned wd[2][32];      // each warp's farthest (distance bits, index), double-buffered by parity
    __shared__ unsigned wi[2][32];
    __shared__ int chosen[NSAMP];
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    float px, py, pz, md = 1e10f;
    load_cloud(xyz, sp, px, py, pz);
    int last = 0;
    if (tid == 0) chosen[0] = 0;
    for (int j = 1; j < NSAMP; ++j) {
        md = fold_distance(md, px, py, pz, sp, last);
        const unsigned key = __float_as_uint(md);   // md >= +0: the bits order like the floats
        const unsigned kmax = __reduce_max_sync(FULL, key);
        const unsigned who = __reduce_min_sync(FULL, key == kmax ? (unsigned)tid : FULL);
        if (lane == 0) { wd[j & 1][warp] = kmax; wi[j & 1][warp] = who; }
        __syncthreads();
        const unsigned k2 = wd[j & 1][lane];
        const unsigned bmax = __reduce_max_sync(FULL, k2);
        last = (int)__reduce_min_sync(FULL, k2 == bmax ? wi[j & 1][lane] : FULL);
        if (tid == 0) chosen[j] = last;
    }
    store_chosen(chosen, idx);
}

int main() {
    std::vector<float> hxyz((size_t)CLOUDS * NPTS * 3);
    for (auto& v : hxyz) v = 2.f * frand() - 1.f;
    float* dxyz = dcopy(hxyz);
    float *dbad = dnew<float>((size_t)CLOUDS * NSAMP), *dfix = dnew<float>((size_t)CLOUDS * NSAMP);
    LAUNCH(fps_block_tree, CLOUDS, NPTS, dxyz, dbad);
    LAUNCH(fps_warp_argmax, CLOUDS, NPTS, dxyz, dfix);
    CK(cudaDeviceSynchronize());
    return verdict("95-farthest-point-sampling-tree", hcopy(dbad, (size_t)CLOUDS * NSAMP),
                   hcopy(dfix, (size_t)CLOUDS * NSAMP), 0.0);
}
