// 129-varint-encode-chained-wait. Planted: a serialized chain of blocks. LEB128 (varint) encoding of 8M integers,
// 8192 a tile, each block's output offset being the byte count of all earlier tiles: every block first spins until
// its predecessor has published its end offset, and only then loads its own tile, sizes it and publishes its own end.
// Each block's load latency, block scan and flag hand-off thus sit one after another for all 1024 tiles, while the
// other resident blocks wait at the barrier behind their polling warp and DRAM idles.
// Fixed twin: load and size the tile first, publish its byte count as an aggregate, and find the offset with a
// decoupled look-back (32 predecessors polled at once); only the look-back's hand-offs remain serial.
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

#include <algorithm>

#define N (8u << 20)  // 8,388,608 values, 1 to 4 bytes each once encoded
#define THREADS 1024
#define WARPS (THREADS / 32)
#define TILE (THREADS * 8)  // 256 values a warp
#define TILES (N / TILE)
#define FULL 0xffffffffu
#define AGGREGATE 1ull
#define INCLUSIVE 2ull
typedef unsigned long long u64;

// a status word: flag in bits 62-63, a byte count (the tile's, or the running total at its end) in bits 0-31
__device__ __forceinline__ u64 ld_volatile(const u64* p) { return *(const volatile u64*)p; }
__device__ __forceinline__ void st_volatile(u64* p, u64 v) { *(volatile u64*)p = v; }
__device__ __forceinline__ unsigned vlen(unsigned v) {
    return 1u + (v >= (1u << 7)) + (v >= (1u << 14)) + (v >= (1u << 21)) + (v >= (1u << 28)); }

// The warp owns 256 consecutive values, lane l holding values q * 32 + l (staged through shared memory so the
// global loads stay 16 bytes wide); the byte lengths of 4 values a lane are scanned at once in 8-bit fields.
struct Sized { unsigned ex[2], rows[2]; };

__device__ __forceinline__ unsigned size_tile(const unsigned* __restrict__ vals, unsigned tile, unsigned* stage,
                                              Sized& z) {
    const unsigned lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const uint4* src = reinterpret_cast<const uint4*>(vals + (size_t)tile * TILE);
    const uint4 a = src[threadIdx.x], b = src[threadIdx.x + THREADS];
    reinterpret_cast<uint4*>(stage)[threadIdx.x] = a;
    reinterpret_cast<uint4*>(stage)[threadIdx.x + THREADS] = b;
    __syncthreads();
    const unsigned* mine = stage + warp * 256 + lane;
    unsigned total = 0;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        unsigned own = 0;
#pragma unroll
        for (int q = 0; q < 4; ++q) own |= vlen(mine[(4 * h + q) * 32]) << (8 * q);
        unsigned inc = own;
#pragma unroll
        for (int d = 1; d < 32; d <<= 1) { const unsigned t = __shfl_up_sync(FULL, inc, d); if (lane >= d) inc += t; }
        z.ex[h] = inc - own;
        z.rows[h] = __shfl_sync(FULL, inc, 31);  // each field <= 160
        total += (z.rows[h] & 0xffu) + ((z.rows[h] >> 8) & 0xffu) + ((z.rows[h] >> 16) & 0xffu) + (z.rows[h] >> 24);
    }
    return total;
}

// each warp's offset within the tile, and the tile's byte count, from the warps' byte counts
__device__ __forceinline__ unsigned warp_offset(const unsigned* s_warp, unsigned& total) {
    const unsigned lane = threadIdx.x & 31, warp = threadIdx.x >> 5, own = s_warp[lane];
    unsigned inc = own;
#pragma unroll
    for (int d = 1; d < 32; d <<= 1) { const unsigned t = __shfl_up_sync(FULL, inc, d); if (lane >= d) inc += t; }
    total = __shfl_sync(FULL, inc, 31);
    return __shfl_sync(FULL, inc - own, warp);
}

// LEB128: 7 bits a byte, low group first, high bit set on every byte but the last
__device__ __forceinline__ void encode(unsigned char* s_bytes, const unsigned* stage, const Sized& z, unsigned off) {
    const unsigned* mine = stage + (threadIdx.x >> 5) * 256 + (threadIdx.x & 31);
#pragma unroll
    for (int q = 0; q < 8; ++q) {
        const int h = q >> 2, f = 8 * (q & 3);
        unsigned char* p = s_bytes + off + ((z.ex[h] >> f) & 0xffu);
        const unsigned v = mine[q * 32], n = vlen(v);
#pragma unroll
        for (unsigned k = 0; k < 5; ++k)
            if (k < n) p[k] = (unsigned char)(((v >> (7 * k)) & 0x7fu) | (k + 1 < n ? 0x80u : 0u));
        off += (z.rows[h] >> f) & 0xffu;
    }
}

extern "C" __global__ void __launch_bounds__(THREADS, 2)
varint_encode_chained(const unsigned* __restrict__ vals, unsigned char* __restrict__ out, u64* status,
                      unsigned* counter) {
    extern __shared__ __align__(16) unsigned s_stage[];  // the tile's values, then its bytes
    unsigned char* s_bytes = reinterpret_cast<unsigned char*>(s_stage + TILE);
    __shared__ unsigned s_tile, s_base, s_warp[WARPS];
    const unsigned lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (threadIdx.x == 0) s_tile = atomicAdd(counter, 1u);  // tiles in launch order: the wait never deadlocks
    __syncthreads();
    const unsigned tile = s_tile;
    if (warp == 0) {  // where does this tile's output start? wait for the previous tile's end
        u64 s = INCLUSIVE << 62;
        if (tile > 0) while (((s = ld_volatile(&status[tile - 1])) >> 62) != INCLUSIVE) { }  // PLANTED
        if (lane == 0) s_base = (unsigned)s;
    }
    __syncthreads();
    Sized z;
    const unsigned wbytes = size_tile(vals, tile, s_stage, z);
    if (lane == 0) s_warp[warp] = wbytes;
    __syncthreads();
    unsigned total;
    const unsigned woff = warp_offset(s_warp, total), base = s_base;
    if (threadIdx.x == 0) { st_volatile(&status[tile], (INCLUSIVE << 62) | (base + total)); __threadfence(); }
    encode(s_bytes, s_stage, z, woff);
    __syncthreads();
    for (unsigned i = threadIdx.x; i < total; i += THREADS) out[base + i] = s_bytes[i];
}

extern "C" __global__ void __launch_bounds__(THREADS, 2)
varint_encode_lookback(const unsigned* __restrict__ vals, unsigned char* __restrict__ out, u64* status,
                       unsigned* counter) {
    extern __shared__ __align__(16) unsigned s_stage[];
    unsigned char* s_bytes = reinterpret_cast<unsigned char*>(s_stage + TILE);
    __shared__ unsigned s_tile, s_base, s_warp[WARPS];
    const unsigned lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (threadIdx.x == 0) s_tile = atomicAdd(counter, 1u);
    __syncthreads();
    const unsigned tile = s_tile;
    Sized z;
    const unsigned wbytes = size_tile(vals, tile, s_stage, z);
    if (lane == 0) s_warp[warp] = wbytes;
    __syncthreads();
    unsigned total;
    const unsigned woff = warp_offset(s_warp, total);
    if (warp == 0) {
        if (tile == 0) {
            if (lane == 0) { st_volatile(&status[0], (INCLUSIVE << 62) | total); __threadfence(); s_base = 0; }
        } else {
            if (lane == 0) st_volatile(&status[tile], (AGGREGATE << 62) | total);
            unsigned excl = 0;
            int pred = (int)tile - 1;
            while (true) {
                const int idx = pred - (int)lane;
                const u64 s = idx >= 0 ? ld_volatile(&status[idx]) : (INCLUSIVE << 62);
                if (__any_sync(FULL, (s >> 62) == 0)) continue;
                const unsigned inc = __ballot_sync(FULL, (s >> 62) == INCLUSIVE);
                const unsigned stop = inc ? __ffs(inc) - 1 : 31;
                unsigned part = lane <= stop ? (unsigned)s : 0u;
#pragma unroll
                for (int o = 16; o; o >>= 1) part += __shfl_xor_sync(FULL, part, o);
                excl += part;
                if (inc) break;
                pred -= 32;
            }
            if (lane == 0) { st_volatile(&status[tile], (INCLUSIVE << 62) | (excl + total)); __threadfence(); s_base = excl; }
        }
    }
    encode(s_bytes, s_stage, z, woff);
    __syncthreads();
    const unsigned base = s_base;
    for (unsigned i = threadIdx.x; i < total; i += THREADS) out[base + i] = s_bytes[i];
}

int main() {
    std::vector<unsigned> hv(N);
    for (auto& v : hv) { const unsigned sh = 8 + urand() % 24; v = urand() >> sh; }  // 1 to 24 significant bits
    std::vector<unsigned char> ref;
    ref.reserve(5 * (size_t)N);
    for (unsigned v : hv) { while (v >= 0x80u) { ref.push_back((unsigned char)(v | 0x80u)); v >>= 7; } ref.push_back((unsigned char)v); }
    const size_t cap = 5 * (size_t)N, len = ref.size(), cmp = std::min(cap, len + 4096);
    unsigned* dv = dcopy(hv);
    unsigned char *dbad = dnew<unsigned char>(cap), *dfix = dnew<unsigned char>(cap);
    u64 *st_bad = dnew<u64>(TILES), *st_fix = dnew<u64>(TILES);
    unsigned* counters = dnew<unsigned>(2);
    const int smem = TILE * 4 + 5 * TILE;  // 72 KB: two blocks a SM
    CK(cudaFuncSetAttribute(varint_encode_chained, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    CK(cudaFuncSetAttribute(varint_encode_lookback, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    varint_encode_chained<<<TILES, THREADS, smem>>>(dv, dbad, st_bad, counters);
    CK(cudaGetLastError());
    varint_encode_lookback<<<TILES, THREADS, smem>>>(dv, dfix, st_fix, counters + 1);
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    const std::vector<unsigned char> hb = hcopy(dbad, cmp), hf = hcopy(dfix, cmp);
    size_t wrong = 0;
    for (size_t i = 0; i < cmp; ++i) wrong += hf[i] != (i < len ? ref[i] : 0);
    if (wrong) { printf("MISMATCH 129-varint-encode-chained-wait: fixed kernel differs from the host encoding in %zu bytes\n", wrong); return 1; }
    printf("%zu bytes for %u values\n", len, N);
    return verdict("129-varint-encode-chained-wait", std::vector<float>(hb.begin(), hb.end()),
                   std::vector<float>(hf.begin(), hf.end()), 0.0);
}
