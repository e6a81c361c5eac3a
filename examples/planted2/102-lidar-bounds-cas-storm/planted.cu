// 102-lidar-bounds-cas-storm. Planted: atomic contention. The axis-aligned bounds of 16M LiDAR points (x, y, z,
// intensity; 256 MB), computed before voxelization: one block of 128 threads per SM, each thread reducing a
// grid-stride share (16 float4 loads in flight) into a private box in registers; then every thread merges its
// box into the global one with six float min/max CAS loops (atomicCAS on the bit pattern, the usual emulation).
// 16.9K threads x 6 CAS loops on one 32-byte sector: each change of a bound fails every CAS in flight, so
// retries pile up (several a thread and field) in the one L2 slice owning the sector, after DRAM is done.
// Fixed twin: the same loads, then warp shuffles and a shared-memory step reduce the block's box, and one
// thread per field does the CAS loop: 132 x 6 loops in all.
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
#include <cfloat>
#define POINTS (1 << 24)
#define THREADS 128
#define UNROLL 16
#define FULL 0xffffffffu

struct Box { float lo[3], hi[3]; };

__device__ __forceinline__ void grow(float3& lo, float3& hi, float4 p) {
    lo.x = fminf(lo.x, p.x); lo.y = fminf(lo.y, p.y); lo.z = fminf(lo.z, p.z);
    hi.x = fmaxf(hi.x, p.x); hi.y = fmaxf(hi.y, p.y); hi.z = fmaxf(hi.z, p.z);
}

// grid-stride share of the points, UNROLL 16-byte loads in flight per thread (one block of 4 warps per SM)
__device__ __forceinline__ void thread_box(const float4* __restrict__ pts, int n, float3& lo, float3& hi) {
    lo = make_float3(FLT_MAX, FLT_MAX, FLT_MAX);
    hi = make_float3(-FLT_MAX, -FLT_MAX, -FLT_MAX);
    const int stride = gridDim.x * blockDim.x;
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    for (; i + (UNROLL - 1) * stride < n; i += UNROLL * stride) {
        float4 p[UNROLL];
#pragma unroll
        for (int k = 0; k < UNROLL; ++k) p[k] = pts[i + k * stride];
#pragma unroll
        for (int k = 0; k < UNROLL; ++k) grow(lo, hi, p[k]);
    }
    for (; i < n; i += stride) grow(lo, hi, pts[i]);
}

// float min (fields 0-2) / max (fields 3-5) through atomicCAS on the bit pattern, the usual emulation: always one
// CAS, and another each time some other thread changed the word in between
extern "C" __global__ void __launch_bounds__(THREADS, 1) bounds_thread_cas(const float4* __restrict__ pts, int n, Box* box) {
    float3 lo, hi;
    thread_box(pts, n, lo, hi);
    const float v[6] = {lo.x, lo.y, lo.z, hi.x, hi.y, hi.z};
    int* words = reinterpret_cast<int*>(box);
#pragma unroll
    for (int f = 0; f < 6; ++f) {
        int old = words[f], assumed;
        do {
            assumed = old;
            const float cur = __int_as_float(assumed);
            old = atomicCAS(&words[f], assumed, __float_as_int(f < 3 ? fminf(cur, v[f]) : fmaxf(cur, v[f])));  // PLANTED
        } while (old != assumed);
    }
}

extern "C" __global__ void __launch_bounds__(THREADS, 1) bounds_block_cas(const float4* __restrict__ pts, int n, Box* box) {
    __shared__ float part[6][THREADS / 32];
    float3 lo, hi;
    thread_box(pts, n, lo, hi);
    float v[6] = {lo.x, lo.y, lo.z, hi.x, hi.y, hi.z};
#pragma unroll
    for (int off = 16; off > 0; off >>= 1)
#pragma unroll
        for (int f = 0; f < 6; ++f) {
            const float o = __shfl_xor_sync(FULL, v[f], off);
            v[f] = f < 3 ? fminf(v[f], o) : fmaxf(v[f], o);
        }
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0)
#pragma unroll
        for (int f = 0; f < 6; ++f) part[f][warp] = v[f];
    __syncthreads();
    if (threadIdx.x < 6) {
        const int f = threadIdx.x;
        float r = part[f][0];
        for (int w = 1; w < THREADS / 32; ++w) r = f < 3 ? fminf(r, part[f][w]) : fmaxf(r, part[f][w]);
        int* word = reinterpret_cast<int*>(box) + f;
        int old = *word, assumed;
        do {
            assumed = old;
            const float cur = __int_as_float(assumed);
            old = atomicCAS(word, assumed, __float_as_int(f < 3 ? fminf(cur, r) : fmaxf(cur, r)));
        } while (old != assumed);
    }
}

int main() {
    // a sweep around the sensor: range 1-80 m, any azimuth, elevation -25..+15 degrees, plus intensity
    std::vector<float4> hp(POINTS);
    for (auto& p : hp) {
        const float r = 1.f + 79.f * frand(), az = 6.2831853f * frand(), el = (-25.f + 40.f * frand()) * 0.0174533f;
        p = make_float4(r * cosf(el) * cosf(az), r * cosf(el) * sinf(az), 1.8f + r * sinf(el), frand());
    }
    float4* dp = dcopy(hp);
    const Box empty = {{FLT_MAX, FLT_MAX, FLT_MAX}, {-FLT_MAX, -FLT_MAX, -FLT_MAX}};
    Box* dbad = dcopy(std::vector<Box>(1, empty));
    Box* dfix = dcopy(std::vector<Box>(1, empty));
    int sms = 0;
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    LAUNCH(bounds_thread_cas, sms, THREADS, dp, POINTS, dbad);
    LAUNCH(bounds_block_cas, sms, THREADS, dp, POINTS, dfix);
    CK(cudaDeviceSynchronize());
    const Box b = hcopy(dbad, 1)[0], f = hcopy(dfix, 1)[0];
    std::vector<float> vb(b.lo, b.lo + 3), vf(f.lo, f.lo + 3);
    vb.insert(vb.end(), b.hi, b.hi + 3);
    vf.insert(vf.end(), f.hi, f.hi + 3);
    return verdict("102-lidar-bounds-cas-storm", vb, vf, 0.0);
}
