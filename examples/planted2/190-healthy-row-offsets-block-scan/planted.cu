// 190-healthy-row-offsets-block-scan. Healthy: a batched exclusive scan that turns 16384 rows of 4096 uint32 bucket
// counts (256 MB, one row per partition, as a radix or bucket sort's counting pass leaves them) into per-row
// offsets (256 MB). A block of 256 threads owns a row and issues its four 16-byte loads at once (one per 1024-item
// tile, a warp covering 512 contiguous bytes), then scans the tiles in order: each thread sums its 4 items, a
// 5-step warp-shuffle scan ranks the threads of a warp, lane 31 posts the warp total, one __syncthreads, and each
// warp reads the 8 warp totals into its lanes and scans them with 3 more shuffles to get its offset and the tile
// total, which carries into the next tile. Four barriers a row, about 40 instructions per 16 bytes: the time goes to
// DRAM (512 MB moved), expected at the roof, about 175-190 us.
// Challenger: 512 threads a row, two tiles of 2048 items (16 warp totals a tile), the same loads and scan.
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

#define NROWS 16384
#define NCOLS 4096                                 // counts per row; a row is 16 KB

// One block scans one row in NCOLS / (4 * NT) tiles; thread t of tile k owns items k*4*NT + 4t .. 4t+3.
template <int NT>
__device__ __forceinline__ void scan_row(const uint4* __restrict__ in, uint4* __restrict__ out)
{
    constexpr int NTILE = NCOLS / (4 * NT), NW = NT / 32;
    __shared__ unsigned wsum[NTILE][NW];                              // one slot per tile: no slot is reused
    const int t = threadIdx.x, lane = t & 31, warp = t >> 5;
    const uint4* src = in + (size_t)blockIdx.x * (NCOLS / 4);
    uint4* dst = out + (size_t)blockIdx.x * (NCOLS / 4);
    uint4 v[NTILE];
#pragma unroll
    for (int k = 0; k < NTILE; ++k) v[k] = src[k * NT + t];           // all of the row's loads in flight at once
    unsigned carry = 0;                                               // sum of the earlier tiles
#pragma unroll
    for (int k = 0; k < NTILE; ++k) {
        const unsigned a = v[k].x, b = a + v[k].y, c = b + v[k].z, d = c + v[k].w;
        unsigned s = d;                                               // inclusive scan of thread sums in the warp
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
            const unsigned u = __shfl_up_sync(0xffffffffu, s, o);
            s += lane >= o ? u : 0u;
        }
        if (lane == 31) wsum[k][warp] = s;
        __syncthreads();
        const unsigned x = lane < NW ? wsum[k][lane] : 0u;            // each warp scans the NW warp totals itself
        unsigned p = x;
#pragma unroll
        for (int o = 1; o < NW; o <<= 1) {
            const unsigned u = __shfl_up_sync(0xffffffffu, p, o);
            p += lane >= o ? u : 0u;
        }
        const unsigned before = __shfl_sync(0xffffffffu, p - x, warp); // totals of the warps ahead of this one
        const unsigned total = __shfl_sync(0xffffffffu, p, NW - 1);     // the tile's total
        const unsigned e = carry + before + s - d;                    // exclusive offset of the thread's first item
        dst[k * NT + t] = make_uint4(e, e + a, e + b, e + c);
        carry += total;
    }
}

extern "C" __global__ void __launch_bounds__(256) row_offsets_scan256(const uint4* __restrict__ in, uint4* __restrict__ out)
{
    scan_row<256>(in, out);
}

extern "C" __global__ void __launch_bounds__(512) row_offsets_scan512(const uint4* __restrict__ in, uint4* __restrict__ out)
{
    scan_row<512>(in, out);
}

int main()
{
    const size_t n = (size_t)NROWS * NCOLS;                           // 64M counts, 256 MB
    std::vector<unsigned> h(n);
    for (size_t i = 0; i < n; ++i) {                                  // skewed small counts: many zeros, some large
        const unsigned r = urand();
        const unsigned m = (r >> 28) < 5 ? 0u : (r >> 28) < 13 ? 8u : 64u;
        h[i] = m ? (r >> 8) % m : 0u;
    }
    uint4* din = reinterpret_cast<uint4*>(dcopy(h));
    uint4* dout = reinterpret_cast<uint4*>(dnew<unsigned>(n));

    LAUNCH(row_offsets_scan256, NROWS, 256, din, dout);
    CK(cudaDeviceSynchronize());
    std::vector<unsigned> tested = hcopy(reinterpret_cast<unsigned*>(dout), n);
    CK(cudaMemset(dout, 0, n * sizeof(unsigned)));
    LAUNCH(row_offsets_scan512, NROWS, 512, din, dout);
    CK(cudaDeviceSynchronize());
    std::vector<unsigned> chall = hcopy(reinterpret_cast<unsigned*>(dout), n);

    // Host reference; offsets stay below 4096 * 63 < 2^24, so they are exact as floats for verdict().
    std::vector<float> ref(n), ft(n), fc(n);
    size_t wrong = 0;
    for (size_t row = 0; row < NROWS; ++row) {
        unsigned run = 0;
        for (size_t j = row * NCOLS; j < (row + 1) * NCOLS; ++j) {
            wrong += (tested[j] != run) + (chall[j] != run);
            ref[j] = (float)run; ft[j] = (float)tested[j]; fc[j] = (float)chall[j];
            run += h[j];
        }
    }
    if (wrong) { printf("MISMATCH 190-healthy-row-offsets-block-scan: %zu offsets differ\n", wrong); return 1; }
    int rc = verdict("190-healthy-row-offsets-block-scan", ft, ref, 0.0);
    rc |= verdict("190-healthy-row-offsets-block-scan(challenger)", fc, ref, 0.0);
    CK(cudaFree(din)); CK(cudaFree(dout));
    return rc;
}
