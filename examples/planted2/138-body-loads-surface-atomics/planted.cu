// 138-body-loads-surface-atomics. Planted: global atomic contention on moving targets. Resolved-particle flow:
// the pressure force and torque on each of 768 rigid bodies is integrated over its surface triangles (6.3M
// triangles, sorted by body, 4K to 12K a body). One thread a triangle adds its 6 components into its body's
// double accumulators: all 32 lanes of a warp RED the same address, 6 times, and the ~40 bodies in flight at
// once (a few hundred addresses, moving on as the grid advances) take every warp's atomics one lane at a time.
// Fixed twin: the same triangle math, summed over the warp with shuffles (the triangles are sorted by body),
// one lane adding each component once; warps that straddle two bodies fall back to per-lane atomics.
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
#define NTRI (6 * 1024 * 1024)
#define NBODY 768
#define THREADS 256
#define FULL 0xffffffffu

// One surface triangle's pressure load on its body: F = -p A n (A n = half the edge cross product, p the mean
// of the vertex pressures), T = (centroid - body centre) x F.
__device__ __forceinline__ void triangle_load(float4 a, float4 b, float4 c, float4 ctr, float v[6]) {
    float e1x = b.x - a.x, e1y = b.y - a.y, e1z = b.z - a.z;
    float e2x = c.x - a.x, e2y = c.y - a.y, e2z = c.z - a.z;
    float p = (a.w + b.w + c.w) * (-0.5f / 3.0f);
    float fx = p * (e1y * e2z - e1z * e2y), fy = p * (e1z * e2x - e1x * e2z), fz = p * (e1x * e2y - e1y * e2x);
    float rx = (a.x + b.x + c.x) * (1.0f / 3.0f) - ctr.x;
    float ry = (a.y + b.y + c.y) * (1.0f / 3.0f) - ctr.y;
    float rz = (a.z + b.z + c.z) * (1.0f / 3.0f) - ctr.z;
    v[0] = fx; v[1] = fy; v[2] = fz;
    v[3] = ry * fz - rz * fy; v[4] = rz * fx - rx * fz; v[5] = rx * fy - ry * fx;
}

// loads[body * 8 + k]: fx fy fz tx ty tz (and two pad words: 64 bytes a body)
extern "C" __global__ void body_loads_atomic(const float4* __restrict__ va, const float4* __restrict__ vb,
                                             const float4* __restrict__ vc, const int* __restrict__ body,
                                             const float4* __restrict__ center, double* __restrict__ loads, int n) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n) return;
    int b = body[t];
    float v[6];
    triangle_load(va[t], vb[t], vc[t], center[b], v);
#pragma unroll
    for (int k = 0; k < 6; ++k) atomicAdd(&loads[b * 8 + k], (double)v[k]);  // PLANTED
}

extern "C" __global__ void body_loads_warp_sum(const float4* __restrict__ va, const float4* __restrict__ vb,
                                               const float4* __restrict__ vc, const int* __restrict__ body,
                                               const float4* __restrict__ center, double* __restrict__ loads, int n) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    bool live = t < n;
    int b = live ? body[t] : -1;
    float v[6] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
    if (live) triangle_load(va[t], vb[t], vc[t], center[b], v);
    int b0 = __shfl_sync(FULL, b, 0);
    if (__all_sync(FULL, b == b0)) {
        // the whole warp is on one body (all but the warps at a body boundary): reduce, then one atomic each
#pragma unroll
        for (int k = 0; k < 6; ++k)
#pragma unroll
            for (int o = 16; o > 0; o >>= 1) v[k] += __shfl_xor_sync(FULL, v[k], o);
        if ((threadIdx.x & 31) == 0 && b0 >= 0)
#pragma unroll
            for (int k = 0; k < 6; ++k) atomicAdd(&loads[b0 * 8 + k], (double)v[k]);
    } else if (live) {
#pragma unroll
        for (int k = 0; k < 6; ++k) atomicAdd(&loads[b * 8 + k], (double)v[k]);
    }
}

int main() {
    // bodies: spheres of radius 0.5 to 1.5 in a 40^3 box; triangle counts 4K to 12K, summing to NTRI
    std::vector<float4> hc(NBODY);
    std::vector<int> count(NBODY);
    std::vector<double> w(NBODY);
    double wsum = 0;
    for (int i = 0; i < NBODY; ++i) {
        hc[i] = make_float4(40.f * frand(), 40.f * frand(), 40.f * frand(), 0.5f + frand());
        w[i] = 4096.0 + (double)(urand() % 8193u); wsum += w[i];
    }
    long left = NTRI;
    for (int i = 0; i < NBODY; ++i) { count[i] = (int)(w[i] * NTRI / wsum); left -= count[i]; }
    for (int i = 0; left > 0; ++i, --left) ++count[i];
    std::vector<float4> ha(NTRI), hb(NTRI), hcc(NTRI);
    std::vector<int> hbody(NTRI);
    // each triangle: a small patch on its body's sphere; pressure = hydrostatic + a dynamic part + noise
    size_t t = 0;
    for (int i = 0; i < NBODY; ++i) {
        float4 c = hc[i];
        float h = 6.0f * c.w / sqrtf((float)count[i]);   // patch size ~ the mean triangle edge
        for (int k = 0; k < count[i]; ++k, ++t) {
            float z = 2.f * frand() - 1.f, ph = 6.2831853f * frand(), s = sqrtf(1.f - z * z);
            float nx = s * cosf(ph), ny = s * sinf(ph), nz = z;
            float px = c.x + c.w * nx, py = c.y + c.w * ny, pz = c.z + c.w * nz;
            float4 p[3];
            for (int j = 0; j < 3; ++j) {
                float x = px + h * (frand() - 0.5f), y = py + h * (frand() - 0.5f), zz = pz + h * (frand() - 0.5f);
                float pr = 1000.f - 9.81f * zz + 50.f * nx + 5.f * (frand() - 0.5f);
                p[j] = make_float4(x, y, zz, pr);
            }
            ha[t] = p[0]; hb[t] = p[1]; hcc[t] = p[2]; hbody[t] = i;
        }
    }
    float4 *da = dcopy(ha), *db = dcopy(hb), *dc = dcopy(hcc), *dctr = dcopy(hc);
    int* dbody = dcopy(hbody);
    double *dbad = dnew<double>(NBODY * 8), *dfix = dnew<double>(NBODY * 8);
    const int blocks = (NTRI + THREADS - 1) / THREADS;
    LAUNCH(body_loads_atomic, blocks, THREADS, da, db, dc, dbody, dctr, dbad, NTRI);
    LAUNCH(body_loads_warp_sum, blocks, THREADS, da, db, dc, dbody, dctr, dfix, NTRI);
    CK(cudaDeviceSynchronize());
    std::vector<double> bad = hcopy(dbad, NBODY * 8), fix = hcopy(dfix, NBODY * 8);
    std::vector<float> fb(bad.begin(), bad.end()), ff(fix.begin(), fix.end());
    return verdict("138-body-loads-surface-atomics", fb, ff, 1e-3);
}
