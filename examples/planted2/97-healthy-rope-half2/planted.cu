// 97-healthy-rope-half2. Healthy: rotary position embedding (GPT-J interleaved pairs) on a half tensor
// [4 x 4096 tokens][48 heads][128], out of place, 192 MB in and 192 MB out. Each thread moves one 16-byte
// uint4 (4 half2 pairs), reads its token's position, a float4 of cosines and a float4 of sines from a 2 MB
// cos|sin cache [position][64 cos, 64 sin] that L1 and L2 serve, rotates in float and stores one uint4: about
// 4 bytes of DRAM traffic per element and a few FMAs, so DRAM bandwidth (expected 85%+ of peak) is the roof.
// Challenger: the same rotation with one half2 (4 bytes) per thread and two 4-byte cache loads; the same DRAM
// bytes, 4x the instructions and a quarter of the bytes in flight a thread: expected no faster.
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
#include <cuda_fp16.h>
#define BATCH 4
#define SEQ 4096
#define HEADS 48
#define HDIM 128
#define TOKENS (BATCH * SEQ)
#define ROW (HEADS * HDIM)                      // halves per token
#define NELEM ((size_t)TOKENS * ROW)            // 100,663,296 halves
#define CHUNKS (unsigned)(NELEM / 8)            // uint4 chunks of 8 halves
#define PAIRS (unsigned)(NELEM / 2)
#define THREADS 256

// (x0, x1) -> (x0 cos - x1 sin, x0 sin + x1 cos) on one half2 held as 32 bits
__device__ __forceinline__ unsigned rotate(unsigned u, float c, float s) {
    __half2 h; memcpy(&h, &u, 4);
    const float2 f = __half22float2(h);
    const __half2 r = __floats2half2_rn(f.x * c - f.y * s, f.x * s + f.y * c);
    unsigned o; memcpy(&o, &r, 4); return o;
}

extern "C" __global__ void rope_half2_vec8(const uint4* __restrict__ x, const int* __restrict__ positions,
                                           const float* __restrict__ cs, uint4* __restrict__ y) {
    const unsigned c = blockIdx.x * blockDim.x + threadIdx.x;   // 8 halves: pairs p0 .. p0+3 of one head
    if (c >= CHUNKS) return;
    const unsigned tok = c / (ROW / 8);
    const unsigned p0 = (c % (HDIM / 8)) * 4;
    const uint4 v = x[c];
    const float* t = cs + (size_t)positions[tok] * HDIM + p0;
    const float4 co = *reinterpret_cast<const float4*>(t), si = *reinterpret_cast<const float4*>(t + HDIM / 2);
    y[c] = make_uint4(rotate(v.x, co.x, si.x), rotate(v.y, co.y, si.y),
                      rotate(v.z, co.z, si.z), rotate(v.w, co.w, si.w));
}

extern "C" __global__ void rope_half2_scalar(const unsigned* __restrict__ x, const int* __restrict__ positions,
                                             const float* __restrict__ cs, unsigned* __restrict__ y) {
    const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;   // one pair
    if (i >= PAIRS) return;
    const unsigned tok = i / (ROW / 2);
    const unsigned p = i % (HDIM / 2);
    const float* t = cs + (size_t)positions[tok] * HDIM + p;
    y[i] = rotate(x[i], t[0], t[HDIM / 2]);
}

int main() {
    std::vector<__half> hx(NELEM);
    for (auto& v : hx) v = __float2half(frand() * 4.0f - 2.0f);
    std::vector<int> hpos(TOKENS);
    for (int t = 0; t < TOKENS; ++t) hpos[t] = t % SEQ;
    std::vector<float> hcs((size_t)SEQ * HDIM);     // [pos][64 cos, 64 sin], theta = 10000
    for (int s = 0; s < SEQ; ++s)
        for (int p = 0; p < HDIM / 2; ++p) {
            const double ang = s * pow(10000.0, -2.0 * p / HDIM);
            hcs[(size_t)s * HDIM + p] = (float)cos(ang);
            hcs[(size_t)s * HDIM + HDIM / 2 + p] = (float)sin(ang);
        }
    __half* dx = dcopy(hx);
    int* dpos = dcopy(hpos);
    float* dcs = dcopy(hcs);
    __half *dy = dnew<__half>(NELEM), *dz = dnew<__half>(NELEM);
    LAUNCH(rope_half2_vec8, CHUNKS / THREADS, THREADS, (const uint4*)dx, dpos, dcs, (uint4*)dy);
    LAUNCH(rope_half2_scalar, PAIRS / THREADS, THREADS, (const unsigned*)dx, dpos, dcs, (unsigned*)dz);
    CK(cudaDeviceSynchronize());
    const std::vector<__half> hy = hcopy(dy, NELEM), hz = hcopy(dz, NELEM);
    std::vector<float> fy(NELEM), fz(NELEM);
    double worst = 0;   // the vectorized kernel against a CPU reference on every 97th pair
    for (size_t i = 0; i < NELEM; ++i) { fy[i] = __half2float(hy[i]); fz[i] = __half2float(hz[i]); }
    for (size_t q = 0; q < NELEM / 2; q += 97) {
        const size_t tok = q / (ROW / 2), p = q % (HDIM / 2);
        const float c = hcs[(size_t)hpos[tok] * HDIM + p], s = hcs[(size_t)hpos[tok] * HDIM + HDIM / 2 + p];
        const double x0 = __half2float(hx[2 * q]), x1 = __half2float(hx[2 * q + 1]);
        const double r0 = x0 * c - x1 * s, r1 = x0 * s + x1 * c;
        worst = fmax(worst, fabs(fy[2 * q] - r0) / (fabs(r0) + 1e-2));
        worst = fmax(worst, fabs(fy[2 * q + 1] - r1) / (fabs(r1) + 1e-2));
    }
    printf("reference (every 97th pair): max_rel_err=%.3g\n", worst);
    return verdict("97-healthy-rope-half2", fy, fz, 1e-3) | (worst > 2e-3);
}
