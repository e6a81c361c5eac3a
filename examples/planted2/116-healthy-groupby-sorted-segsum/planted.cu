// 116-healthy-groupby-sorted-segsum. Healthy: GROUP BY key SUM(value) over 64M rows sorted by key, ragged groups.
// Runs of 1 to 80 rows per key (1.66M keys). A warp takes a 128-row tile, 4 contiguous rows a lane (one int4 of keys and
// one float4 of values, 32 bytes in flight per thread), sums runs inside the lane, combines lanes with a segmented
// shuffle scan, and stores each run's sum once; the at most two runs a tile shares with its neighbours are added
// atomically (distinct addresses, no contention). 512 MB read once: it should run at the DRAM roof.
// Challenger: the same tiles taken by a persistent grid (8 blocks an SM, each warp looping over ~62 tiles); expected
// no faster.
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
static unsigned ubelow(unsigned n) { return (unsigned)(((unsigned long long)urand() * n) >> 32); }  // high LCG bits
#define N (64 * 1024 * 1024)
#define TILE 128
#define NTILES (N / TILE)
#define THREADS 256
#define MAXRUN 80

__device__ __forceinline__ void segsum_tile(const int* __restrict__ keys, const float* __restrict__ vals,
                                            float* __restrict__ out, int tile, int lane) {
    const int base = tile * TILE, i0 = base + 4 * lane;
    const int4 k4 = *reinterpret_cast<const int4*>(keys + i0);
    const float4 v4 = *reinterpret_cast<const float4*>(vals + i0);
    const int k[4] = {k4.x, k4.y, k4.z, k4.w};
    const float v[4] = {v4.x, v4.y, v4.z, v4.w};
    int kprev = __shfl_up_sync(0xffffffffu, k[3], 1), knext = __shfl_down_sync(0xffffffffu, k[0], 1);
    if (lane == 0) kprev = base > 0 ? keys[base - 1] : -1;
    if (lane == 31) knext = base + TILE < N ? keys[base + TILE] : -1;
    // this lane's rows: does a run start here, and the sum of its last (open) run
    bool f = false;
    float a = 0.0f;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        if (k[j] != (j ? k[j - 1] : kprev)) { f = true; a = 0.0f; }
        a += v[j];
    }
    // inclusive segmented scan of (f, a) over the lanes: (f1, a1) + (f2, a2) = (f1 | f2, f2 ? a2 : a1 + a2)
#pragma unroll
    for (int d = 1; d < 32; d <<= 1) {
        const float ap = __shfl_up_sync(0xffffffffu, a, d);
        const int fp = __shfl_up_sync(0xffffffffu, (int)f, d);
        if (lane >= d) { if (!f) a += ap; f = f || fp; }
    }
    float s = __shfl_up_sync(0xffffffffu, a, 1);  // the run open when this lane's rows begin, from lanes before it
    bool started = __shfl_up_sync(0xffffffffu, (int)f, 1) != 0;  // did that run start inside this tile?
    if (lane == 0) { s = 0.0f; started = false; }
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        if (k[j] != (j ? k[j - 1] : kprev)) { s = 0.0f; started = true; }
        s += v[j];
        const bool ends = k[j] != (j < 3 ? k[j + 1] : knext);
        if (ends && started) out[k[j]] = s;                             // the whole run is in this tile
        else if (ends || (lane == 31 && j == 3)) atomicAdd(&out[k[j]], s);  // a run shared with a neighbouring tile
    }
}

extern "C" __global__ void groupby_sum_tiles(const int* __restrict__ keys, const float* __restrict__ vals,
                                             float* __restrict__ out) {
    const int tile = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    if (tile < NTILES) segsum_tile(keys, vals, out, tile, threadIdx.x & 31);
}

extern "C" __global__ void groupby_sum_persistent(const int* __restrict__ keys, const float* __restrict__ vals,
                                                  float* __restrict__ out) {
    const int warps = gridDim.x * blockDim.x >> 5;
    for (int tile = (blockIdx.x * blockDim.x + threadIdx.x) >> 5; tile < NTILES; tile += warps)
        segsum_tile(keys, vals, out, tile, threadIdx.x & 31);
}

int main() {
    std::vector<int> keys(N);
    std::vector<float> vals(N);
    int g = 0;
    for (int i = 0; i < N; ++g) {
        const int run = 1 + (int)ubelow(MAXRUN);
        for (int j = 0; j < run && i < N; ++j, ++i) keys[i] = g;
    }
    for (auto& v : vals) v = frand();
    std::vector<double> ref(g, 0.0);
    for (int i = 0; i < N; ++i) ref[keys[i]] += vals[i];
    int* dkeys = dcopy(keys);
    float *dvals = dcopy(vals), *dout = dnew<float>(g), *dch = dnew<float>(g);
    LAUNCH(groupby_sum_tiles, NTILES * 32 / THREADS, THREADS, dkeys, dvals, dout);
    int sms = 0;
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    LAUNCH(groupby_sum_persistent, sms * 8, THREADS, dkeys, dvals, dch);
    CK(cudaDeviceSynchronize());
    std::vector<float> out = hcopy(dout, g), ch = hcopy(dch, g);
    if (verdict("116-healthy-groupby-sorted-segsum (kernel vs host)", out, std::vector<float>(ref.begin(), ref.end()), 1e-4))
        return 1;
    return verdict("116-healthy-groupby-sorted-segsum", out, ch, 1e-5);
}
