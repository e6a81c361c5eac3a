// 96-tile-cg-block-sums. Planted: barrier-heavy. Batched conjugate gradient on 15840 independent 16x16 tiles of a
// screened Poisson problem ((4 + sigma) u - neighbours = b, zero outside the tile; 48 iterations): one block of
// 256 threads per tile, an unknown per thread. Each iteration exchanges p through shared memory and takes two
// dot products with the textbook shared-memory tree (a __syncthreads after every level): 21 barriers an
// iteration around a few dozen instructions, the last levels run by one warp while seven wait.
// Fixed twin: a warp per tile (8 tiles a block), 8 unknowns a lane in registers, neighbours and dot products by
// warp shuffles: no block barrier at all. Same iteration, same order of operations within each unknown.
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
#define TILES 15840              // a 2112 x 1920 field cut into 16x16 tiles
#define TS 16                    // tile side
#define NU (TS * TS)             // unknowns per tile
#define SIGMA 0.5f
#define ITERS 48
#define FULL 0xffffffffu

// (A p) at one unknown: the 5-point screened Laplacian, neighbours outside the tile are zero.
__device__ __forceinline__ float apply_a(float p, float w, float e, float n, float s) {
    return (4.f + SIGMA) * p - ((w + e) + (n + s));
}

// Block-wide sum, the textbook way: shared-memory tree halving the active threads, a barrier after every level.
__device__ __forceinline__ float block_sum_tree(float v, float* red) {
    const int t = threadIdx.x;
    red[t] = v;
    __syncthreads();
    for (int s = NU / 2; s > 0; s >>= 1) { if (t < s) red[t] += red[t + s]; __syncthreads(); }  // PLANTED
    const float total = red[0];
    __syncthreads();
    return total;
}

extern "C" __global__ void __launch_bounds__(NU)
cg_tile_block(const float* __restrict__ b, float* __restrict__ u) {
    __shared__ float ps[NU];
    __shared__ float red[NU];
    const int t = threadIdx.x, row = t / TS, col = t % TS;
    const size_t base = (size_t)blockIdx.x * NU;
    float r = b[base + t], p = r, x = 0.f;
    float rr = block_sum_tree(r * r, red);
    for (int it = 0; it < ITERS; ++it) {
        ps[t] = p;
        __syncthreads();
        const float w = col > 0 ? ps[t - 1] : 0.f, e = col < TS - 1 ? ps[t + 1] : 0.f;
        const float n = row > 0 ? ps[t - TS] : 0.f, s = row < TS - 1 ? ps[t + TS] : 0.f;
        const float ap = apply_a(p, w, e, n, s);
        const float pap = block_sum_tree(p * ap, red);
        const float alpha = pap > 0.f ? rr / pap : 0.f;
        x = fmaf(alpha, p, x);
        r = fmaf(-alpha, ap, r);
        const float rr_new = block_sum_tree(r * r, red);
        const float beta = rr > 0.f ? rr_new / rr : 0.f;
        rr = rr_new;
        p = fmaf(beta, p, r);
    }
    u[base + t] = x;
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(FULL, v, o);
    return v;   // the butterfly leaves the same bits in every lane
}

// Lane l holds row l / 2, columns 8 (l & 1) .. + 7 of its warp's tile.
extern "C" __global__ void __launch_bounds__(256)
cg_tile_warp(const float* __restrict__ b, float* __restrict__ u) {
    const int lane = threadIdx.x & 31, row = lane >> 1, half = lane & 1;
    const size_t base = ((size_t)blockIdx.x * 8 + (threadIdx.x >> 5)) * NU + row * TS + half * 8;
    float r[8], p[8], x[8], ap[8];
    const float4 b0 = *reinterpret_cast<const float4*>(b + base), b1 = *reinterpret_cast<const float4*>(b + base + 4);
    r[0] = b0.x; r[1] = b0.y; r[2] = b0.z; r[3] = b0.w; r[4] = b1.x; r[5] = b1.y; r[6] = b1.z; r[7] = b1.w;
    float acc = 0.f;
#pragma unroll
    for (int e = 0; e < 8; ++e) { p[e] = r[e]; x[e] = 0.f; acc = fmaf(r[e], r[e], acc); }
    float rr = warp_sum(acc);
    for (int it = 0; it < ITERS; ++it) {
        float pw = __shfl_up_sync(FULL, p[7], 1), pe = __shfl_down_sync(FULL, p[0], 1);
        if (half == 0) pw = 0.f;
        if (half == 1) pe = 0.f;
        acc = 0.f;
#pragma unroll
        for (int e = 0; e < 8; ++e) {
            float pn = __shfl_up_sync(FULL, p[e], 2), pso = __shfl_down_sync(FULL, p[e], 2);
            if (row == 0) pn = 0.f;
            if (row == TS - 1) pso = 0.f;
            ap[e] = apply_a(p[e], e > 0 ? p[e - 1] : pw, e < 7 ? p[e + 1] : pe, pn, pso);
            acc = fmaf(p[e], ap[e], acc);
        }
        const float pap = warp_sum(acc);
        const float alpha = pap > 0.f ? rr / pap : 0.f;
        acc = 0.f;
#pragma unroll
        for (int e = 0; e < 8; ++e) {
            x[e] = fmaf(alpha, p[e], x[e]);
            r[e] = fmaf(-alpha, ap[e], r[e]);
            acc = fmaf(r[e], r[e], acc);
        }
        const float rr_new = warp_sum(acc);
        const float beta = rr > 0.f ? rr_new / rr : 0.f;
        rr = rr_new;
#pragma unroll
        for (int e = 0; e < 8; ++e) p[e] = fmaf(beta, p[e], r[e]);
    }
    *reinterpret_cast<float4*>(u + base) = make_float4(x[0], x[1], x[2], x[3]);
    *reinterpret_cast<float4*>(u + base + 4) = make_float4(x[4], x[5], x[6], x[7]);
}

int main() {
    std::vector<float> hb((size_t)TILES * NU);
    for (auto& v : hb) v = 2.f * frand() - 1.f;
    float* db = dcopy(hb);
    float *dbad = dnew<float>((size_t)TILES * NU), *dfix = dnew<float>((size_t)TILES * NU);
    LAUNCH(cg_tile_block, TILES, NU, db, dbad);
    LAUNCH(cg_tile_warp, TILES / 8, 256, db, dfix);
    CK(cudaDeviceSynchronize());
    return verdict("96-tile-cg-block-sums", hcopy(dbad, (size_t)TILES * NU), hcopy(dfix, (size_t)TILES * NU), 1e-3);
}
