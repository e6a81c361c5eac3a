// 146-trip-speed-grid-runs. Planted: same-address float and counter atomics from time-ordered GPS points.
// Traffic speed map: 16M telematics fixes (16K vehicle trips of 1024 one-second fixes, stored trip by trip in
// time order) are binned into a 512x512 grid of 500 m cells; each fix adds a hit, its speed and its squared
// speed to its cell with three global atomics. A vehicle stays in a cell for about 40 fixes, so a warp's 32
// consecutive fixes fall in one or two cells and every atomic instruction carries up to 32 updates of the same
// word, which the L2 applies one after another: 48M serialized updates for 192 MB of input.
// Fixed twin: run-length aggregation: the warp finds the runs of equal cells (ballot of run heads), sums each
// run with a segmented shuffle scan, and only the last lane of each run adds the run's totals.
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
#define TRIPS 16384
#define FIXES 1024                        // one-second fixes per trip
#define NPTS (TRIPS * FIXES)              // 16M
#define GRID 512
#define CELL 500.0f                       // metres
#define EXTENT (GRID * CELL)              // 256 km
#define THREADS 256

__device__ __forceinline__ unsigned cell_of(float2 p) {
    int cx = min(GRID - 1, max(0, (int)(p.x * (1.0f / CELL))));
    int cy = min(GRID - 1, max(0, (int)(p.y * (1.0f / CELL))));
    return cy * GRID + cx;
}

extern "C" __global__ void speed_grid_atomic(const float2* __restrict__ pos, const float* __restrict__ speed, int n,
                                             unsigned* __restrict__ hits, float* __restrict__ sum, float* __restrict__ sumsq) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    unsigned c = cell_of(pos[i]);
    float s = speed[i];
    atomicAdd(&hits[c], 1u);  // PLANTED
    atomicAdd(&sum[c], s);  // PLANTED
    atomicAdd(&sumsq[c], s * s);  // PLANTED
}

extern "C" __global__ void speed_grid_runs(const float2* __restrict__ pos, const float* __restrict__ speed, int n,
                                           unsigned* __restrict__ hits, float* __restrict__ sum, float* __restrict__ sumsq) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned lane = threadIdx.x & 31;
    bool ok = i < n;
    unsigned c = ok ? cell_of(pos[i]) : 0xffffffffu;
    float a = ok ? speed[i] : 0.0f, q = a * a;
    unsigned prev = __shfl_up_sync(0xffffffffu, c, 1);
    unsigned heads = __ballot_sync(0xffffffffu, lane == 0 || prev != c);
    unsigned start = 31 - __clz(heads & (0xffffffffu >> (31 - lane)));  // first lane of this lane's run
#pragma unroll
    for (int d = 1; d < 32; d <<= 1) {  // segmented inclusive scan over the run
        float a2 = __shfl_up_sync(0xffffffffu, a, d), q2 = __shfl_up_sync(0xffffffffu, q, d);
        if (lane >= start + d) { a += a2; q += q2; }
    }
    bool last = lane == 31 || ((heads >> (lane + 1)) & 1u);
    if (ok && last) {
        atomicAdd(&hits[c], lane - start + 1);
        atomicAdd(&sum[c], a);
        atomicAdd(&sumsq[c], q);
    }
}

int main() {
    std::vector<float2> hp(NPTS);
    std::vector<float> hs(NPTS);
    for (int t = 0; t < TRIPS; ++t) {  // a vehicle: cruise speed, slowly turning heading, bouncing off the map's edge
        float x = frand() * EXTENT, y = frand() * EXTENT, h = frand() * 6.2831853f;
        float cruise = 4.0f + 16.0f * frand(), v = cruise;
        for (int k = 0; k < FIXES; ++k) {
            v += 0.1f * (cruise - v) + (frand() - 0.5f) * 2.0f;
            v = std::min(30.0f, std::max(0.0f, v));
            h += (frand() - 0.5f) * 0.1f;
            x += v * cosf(h);
            y += v * sinf(h);
            if (x < 0 || x >= EXTENT) { h = 3.14159265f - h; x = std::min(EXTENT - 1.0f, std::max(0.0f, x)); }
            if (y < 0 || y >= EXTENT) { h = -h; y = std::min(EXTENT - 1.0f, std::max(0.0f, y)); }
            hp[(size_t)t * FIXES + k] = make_float2(x, y);
            hs[(size_t)t * FIXES + k] = v;
        }
    }
    float2* dp = dcopy(hp);
    float* ds = dcopy(hs);
    const int cells = GRID * GRID;
    unsigned *hbad = dnew<unsigned>(cells), *hfix = dnew<unsigned>(cells);
    float *sbad = dnew<float>(cells), *sfix = dnew<float>(cells), *qbad = dnew<float>(cells), *qfix = dnew<float>(cells);
    LAUNCH(speed_grid_atomic, NPTS / THREADS, THREADS, dp, ds, NPTS, hbad, sbad, qbad);
    LAUNCH(speed_grid_runs, NPTS / THREADS, THREADS, dp, ds, NPTS, hfix, sfix, qfix);
    CK(cudaDeviceSynchronize());
    std::vector<float> bad, fixed;
    for (unsigned h : hcopy(hbad, cells)) bad.push_back((float)h);
    for (unsigned h : hcopy(hfix, cells)) fixed.push_back((float)h);
    for (float v : hcopy(sbad, cells)) bad.push_back(v);
    for (float v : hcopy(sfix, cells)) fixed.push_back(v);
    for (float v : hcopy(qbad, cells)) bad.push_back(v);
    for (float v : hcopy(qfix, cells)) fixed.push_back(v);
    return verdict("146-trip-speed-grid-runs", bad, fixed, 1e-3);
}
