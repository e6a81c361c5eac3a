// 147-tonemap-tile-moments-f64. Planted: per-pixel double atomics onto the pixel's tile accumulators.
// Local tone mapping statistics: the mean and variance of the luminance of an 8192x4096 linear-RGB HDR frame
// (float RGB, 384 MB) over 64x64 tiles, accumulated in double by one thread per pixel with two global
// atomicAdd(double) (sum and sum of squares). A warp's 32 pixels always lie in one tile, so every RED.F64
// instruction carries 32 updates of one address, and the 128 warps of a tile pile onto the same two words:
// 64M serialized double adds in L2, while DRAM and the SMs mostly wait.
// Fixed twin: one block per tile: each thread sums 16 pixels in registers, the block reduces with shuffles and
// shared memory, and one thread stores the tile's two doubles (no atomics left).
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
#define W 8192
#define H 4096
#define T 64                              // tile side
#define TX (W / T)                        // 128 x 64 tiles
#define NT (TX * (H / T))
#define THREADS 256

__device__ __forceinline__ float luma(float r, float g, float b) { return 0.2126f * r + 0.7152f * g + 0.0722f * b; }

extern "C" __global__ void tile_moments_atomic(const float* __restrict__ rgb, double* __restrict__ sum, double* __restrict__ sumsq) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned x = i % W, y = i / W;
    unsigned t = (y / T) * TX + x / T;
    double v = luma(rgb[3 * i], rgb[3 * i + 1], rgb[3 * i + 2]);
    atomicAdd(&sum[t], v);  // PLANTED
    atomicAdd(&sumsq[t], v * v);  // PLANTED
}

extern "C" __global__ void tile_moments_block(const float* __restrict__ rgb, double* __restrict__ sum, double* __restrict__ sumsq) {
    __shared__ double ps[THREADS / 32], pq[THREADS / 32];
    unsigned t = blockIdx.x, x0 = (t % TX) * T, y0 = (t / TX) * T;
    unsigned c = threadIdx.x & 15, r = threadIdx.x >> 4;  // 4 pixels (3 float4) of rows r, r+16, r+32, r+48
    float s = 0.0f, q = 0.0f;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
        const float4* row = reinterpret_cast<const float4*>(rgb + 3 * ((size_t)(y0 + r + 16 * k) * W + x0));
        float4 a = row[3 * c], b = row[3 * c + 1], d = row[3 * c + 2];
        float l0 = luma(a.x, a.y, a.z), l1 = luma(a.w, b.x, b.y), l2 = luma(b.z, b.w, d.x), l3 = luma(d.y, d.z, d.w);
        s += (l0 + l1) + (l2 + l3);
        q += (l0 * l0 + l1 * l1) + (l2 * l2 + l3 * l3);
    }
    double ds = s, dq = q;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        ds += __shfl_xor_sync(0xffffffffu, ds, o);
        dq += __shfl_xor_sync(0xffffffffu, dq, o);
    }
    if ((threadIdx.x & 31) == 0) { ps[threadIdx.x >> 5] = ds; pq[threadIdx.x >> 5] = dq; }
    __syncthreads();
    if (threadIdx.x == 0) {
        double a = 0, b = 0;
        for (int w = 0; w < THREADS / 32; ++w) { a += ps[w]; b += pq[w]; }
        sum[t] = a;
        sumsq[t] = b;
    }
}

static std::vector<float> mean_var(const double* dsum, const double* dsq) {
    std::vector<double> s = hcopy(dsum, NT), q = hcopy(dsq, NT);
    std::vector<float> out;
    const double n = (double)T * T;
    for (int t = 0; t < NT; ++t) out.push_back((float)(s[t] / n));
    for (int t = 0; t < NT; ++t) out.push_back((float)(q[t] / n - (s[t] / n) * (s[t] / n)));
    return out;
}

int main() {
    std::vector<float> hc((size_t)W * H * 3);
    for (size_t i = 0; i < (size_t)W * H; ++i) {  // smooth exposure gradient times a noisy texture, per channel
        unsigned x = i % W, y = i / W;
        float base = 0.5f + 3.5f * (0.5f + 0.5f * sinf(x * 0.0007f) * cosf(y * 0.0011f));
        for (int ch = 0; ch < 3; ++ch) { float f = frand(); hc[3 * i + ch] = base * f * f * 2.0f; }
    }
    float* dc = dcopy(hc);
    double *sbad = dnew<double>(NT), *qbad = dnew<double>(NT), *sfix = dnew<double>(NT), *qfix = dnew<double>(NT);
    LAUNCH(tile_moments_atomic, W * H / THREADS, THREADS, dc, sbad, qbad);
    LAUNCH(tile_moments_block, NT, THREADS, dc, sfix, qfix);
    CK(cudaDeviceSynchronize());
    return verdict("147-tonemap-tile-moments-f64", mean_var(sbad, qbad), mean_var(sfix, qfix), 1e-4);
}
