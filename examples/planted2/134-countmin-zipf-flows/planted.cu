// 134-countmin-zipf-flows. Planted: global atomic contention. A byte-weighted count-min sketch (4 rows of 4096
// counters) of 12M packets whose flows follow a Zipf law (s = 1.2 over 1M flows: the largest flow sends 14% of the
// packets, the top ten 41%, the top thousand 80%). One thread a packet adds its length to one counter a row with
// a global atomic, so the counters of the heavy flows, a few thousand warm addresses, take their atomics one after
// another in their L2 slices: about 1.7M serialized adds on each of the hottest four.
// Fixed twin: each block keeps its own copy of the sketch in shared memory (64 KB, native shared integer atomics)
// and adds it to the global sketch once at the end, so no counter receives more than one atomic a block.
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
#define ROWS 4
#define LOG_WIDTH 12
#define WIDTH (1u << LOG_WIDTH)
#define FLOWS (1u << 20)
#define PACKETS (12u << 20)
#define ZIPF_S 1.2

// multiply-shift hashing of the 32-bit flow hash, one multiplier and offset a row
__constant__ unsigned c_mul[ROWS] = {0x9E3779B1u, 0x85EBCA77u, 0xC2B2AE3Du, 0x27D4EB2Fu};
__constant__ unsigned c_add[ROWS] = {0x165667B1u, 0xD3A2646Cu, 0xFD7046C5u, 0xB55A4F09u};

__device__ __forceinline__ unsigned sketch_slot(int row, unsigned flow) {
    return row * WIDTH + ((flow * c_mul[row] + c_add[row]) >> (32 - LOG_WIDTH));
}

// pkt.x: flow hash (5-tuple), pkt.y: length in bytes
extern "C" __global__ void cms_update_global(const uint2* __restrict__ pkts, unsigned* __restrict__ sketch, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    uint2 pkt = pkts[i];
#pragma unroll
    for (int r = 0; r < ROWS; ++r)
        atomicAdd(&sketch[sketch_slot(r, pkt.x)], pkt.y);  // PLANTED
}

extern "C" __global__ void cms_update_block_private(const uint2* __restrict__ pkts, unsigned* __restrict__ sketch, unsigned n) {
    extern __shared__ unsigned local[];  // ROWS * WIDTH counters, this block's packets only
    for (unsigned k = threadIdx.x; k < ROWS * WIDTH; k += blockDim.x) local[k] = 0u;
    __syncthreads();
    for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        uint2 pkt = pkts[i];
#pragma unroll
        for (int r = 0; r < ROWS; ++r)
            atomicAdd(&local[sketch_slot(r, pkt.x)], pkt.y);
    }
    __syncthreads();
    for (unsigned k = threadIdx.x; k < ROWS * WIDTH; k += blockDim.x)
        if (local[k]) atomicAdd(&sketch[k], local[k]);
}

// murmur3 finalizer: a bijection, so distinct flow ranks get distinct, well-spread hashes
static unsigned mix32(unsigned h) {
    h ^= h >> 16; h *= 0x85EBCA6Bu; h ^= h >> 13; h *= 0xC2B2AE35u; h ^= h >> 16; return h;
}

// the sketch's 32-bit counters as exact float halves (low and high 16 bits), for verdict
static std::vector<float> halves(const std::vector<unsigned>& c) {
    std::vector<float> out(2 * c.size());
    for (size_t k = 0; k < c.size(); ++k) { out[2 * k] = (float)(c[k] & 0xFFFFu); out[2 * k + 1] = (float)(c[k] >> 16); }
    return out;
}

int main() {
    // Zipf(s) ranks over FLOWS by inverting the continuous CDF; lengths: MTU-sized data, bare ACKs, and the rest
    std::vector<uint2> hp(PACKETS);
    const double a = pow((double)FLOWS, 1.0 - ZIPF_S);
    for (auto& p : hp) {
        double x = pow((a - 1.0) * frand() + 1.0, 1.0 / (1.0 - ZIPF_S));
        unsigned rank = (unsigned)x - 1u;
        if (rank >= FLOWS) rank = FLOWS - 1;
        float kind = frand();
        unsigned len = kind < 0.55f ? 1500u : kind < 0.85f ? 40u + (urand() >> 28) : 64u + (urand() >> 8) % 1437u;
        p = make_uint2(mix32(rank + 1u), len);
    }
    uint2* dp = dcopy(hp);
    unsigned *dbad = dnew<unsigned>(ROWS * WIDTH), *dfix = dnew<unsigned>(ROWS * WIDTH);

    int sms = 0;
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    const int smem = ROWS * WIDTH * sizeof(unsigned);  // 64 KB: two 1024-thread blocks an SM
    CK(cudaFuncSetAttribute(cms_update_block_private, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));

    LAUNCH(cms_update_global, PACKETS / 256, 256, dp, dbad, PACKETS);
    cms_update_block_private<<<2 * sms, 1024, smem>>>(dp, dfix, PACKETS);
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    return verdict("134-countmin-zipf-flows", halves(hcopy(dbad, ROWS * WIDTH)), halves(hcopy(dfix, ROWS * WIDTH)), 0.0);
}
