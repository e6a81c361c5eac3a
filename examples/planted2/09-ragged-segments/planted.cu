// 09-ragged-segments. Planted: achieved occupancy far below theoretical. A segmented sum of a per-element
// feature (a 64-step FMA recurrence) with one warp per segment and 32 segments per 1024-thread block,
// where the first segment of every block is 16x longer than the other 31: a block stays resident until its
// long warp finishes, so for most of the kernel each SM runs 2 warps of the 64 it could hold. Each warp's
// loop is one dependent chain (the element's load, then 64 dependent FMAs), so a lone warp leaves the SM
// idle: time is set by how many warps are resident, not by DRAM or the issue slots.
// Fixed twin: one warp per 256-element chunk (long segments split into 16), one atomicAdd per chunk, 256
// threads per block: all 64 warp slots busy until the end.
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
#define SEGS_PER_BLOCK 32
#define BLOCKS (132 * 26)
#define SEGS (BLOCKS * SEGS_PER_BLOCK)
#define SHORT 256
#define LONG (16 * SHORT)
#define THREADS (SEGS_PER_BLOCK * 32)   // one warp per segment
#define TWIN_THREADS 256

__host__ __device__ inline unsigned seg_len(unsigned s) { return s % SEGS_PER_BLOCK == 0 ? LONG : SHORT; }
__host__ __device__ inline size_t seg_start(unsigned s) {
    unsigned b = s / SEGS_PER_BLOCK, k = s % SEGS_PER_BLOCK;
    return (size_t)b * (LONG + (SEGS_PER_BLOCK - 1) * SHORT) + (k == 0 ? 0 : LONG + (k - 1) * SHORT);
}

__device__ __forceinline__ float feature(float v) {  // a 64-step recurrence: one dependent chain
#pragma unroll
    for (int k = 0; k < 64; ++k) v = fmaf(v, 0.99f, 0.004f);
    return v;
}

extern "C" __global__ void segsum_warp_per_segment(const float* __restrict__ x, float* __restrict__ out) {
    unsigned s = (blockIdx.x * blockDim.x + threadIdx.x) / 32, lane = threadIdx.x % 32;
    const float* p = x + seg_start(s);
    float acc = 0.0f;
#pragma unroll 1
    for (unsigned i = lane; i < seg_len(s); i += 32) acc += feature(p[i]);  // PLANTED
    for (int o = 16; o > 0; o /= 2) acc += __shfl_xor_sync(0xffffffffu, acc, o);
    if (lane == 0) out[s] = acc;
}

extern "C" __global__ void segsum_warp_per_chunk(const float* __restrict__ x, const unsigned* __restrict__ chunk_seg,
                                                 const unsigned* __restrict__ chunk_off, unsigned chunks,
                                                 float* __restrict__ out) {
    unsigned c = (blockIdx.x * blockDim.x + threadIdx.x) / 32, lane = threadIdx.x % 32;
    if (c >= chunks) return;
    const float* p = x + chunk_off[c];
    float acc = 0.0f;
#pragma unroll 1
    for (unsigned i = lane; i < SHORT; i += 32) acc += feature(p[i]);
    for (int o = 16; o > 0; o /= 2) acc += __shfl_xor_sync(0xffffffffu, acc, o);
    if (lane == 0) atomicAdd(&out[chunk_seg[c]], acc);
}

int main() {
    size_t n = seg_start(SEGS);
    std::vector<float> hx(n);
    for (auto& v : hx) v = frand();
    std::vector<unsigned> cseg, coff;
    for (unsigned s = 0; s < SEGS; ++s)
        for (unsigned o = 0; o < seg_len(s); o += SHORT) { cseg.push_back(s); coff.push_back(seg_start(s) + o); }
    float *dx = dcopy(hx), *dbad = dnew<float>(SEGS), *dfix = dnew<float>(SEGS);
    unsigned *dseg = dcopy(cseg), *doff = dcopy(coff), chunks = cseg.size();
    LAUNCH(segsum_warp_per_segment, BLOCKS, THREADS, dx, dbad);
    LAUNCH(segsum_warp_per_chunk, (chunks * 32 + TWIN_THREADS - 1) / TWIN_THREADS, TWIN_THREADS, dx, dseg, doff, chunks,
           dfix);
    CK(cudaDeviceSynchronize());
    return verdict("09-ragged-segments", hcopy(dbad, SEGS), hcopy(dfix, SEGS), 1e-4);
}
