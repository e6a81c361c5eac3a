// 117-healthy-star-join-bucket-probe. Healthy: a star-join probe of 16M fact rows into a bucketized hash table.
// The dimension side (512K products and their price rates) is a hash table of 512K 32-byte buckets of 4 key/value slots
// (16 MB, load 0.25, murmur finalizer, linear probing by bucket: over 99% of probes read one bucket). Two lanes take a fact
// row: each loads 8 of its 16 bytes (coalesced) and then 16 of its bucket's 32 bytes, so every sector fetched is used;
// each pair probes two rows, both first buckets in flight at once. Fact rows stream from DRAM once (16 B in, 8 B out),
// the buckets come from L2: it should run near the DRAM roof with L2 busy too.
// Challenger: one thread a row (one 16-byte row load, two 16-byte bucket loads, one float2 store); expected no faster.
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
#define NFACT (16 * 1024 * 1024)
#define NDIM (512 * 1024)
#define NBUCKET (512 * 1024)  // power of two; 4 slots each
#define EMPTY (-1)
#define THREADS 256

__host__ __device__ __forceinline__ unsigned fmix32(unsigned h) {
    h ^= h >> 16; h *= 0x85ebca6bu; h ^= h >> 13; h *= 0xc2b2ae35u; h ^= h >> 16; return h;
}

// half a bucket (slots 2*half, 2*half+1 as key, value, key, value) is in s; the pair's other lane holds the other half
__device__ __forceinline__ float probe_pair(const int4* __restrict__ table, int4 s, unsigned b, int key, int half,
                                            unsigned pm) {
    for (;;) {
        const bool hit = s.x == key || s.z == key;
        const int val = s.x == key ? s.y : s.w;
        const bool empty = s.x == EMPTY || s.z == EMPTY;
        const bool ohit = __shfl_xor_sync(pm, (int)hit, 1) != 0;
        const int oval = __shfl_xor_sync(pm, val, 1);
        const bool oempty = __shfl_xor_sync(pm, (int)empty, 1) != 0;
        if (hit || ohit) return __int_as_float(hit ? val : oval);
        if (empty || oempty) return 0.0f;  // not in the table
        b = (b + 1) & (NBUCKET - 1);
        s = table[2 * b + half];
    }
}

// fact row: x = product key, y = quantity, z = price (float bits), w = discount (float bits)
// out row: x = quantity * rate, y = price * (1 - discount) * rate
extern "C" __global__ void join_probe_pairs(const int2* __restrict__ fact, const int4* __restrict__ table,
                                            float* __restrict__ out) {
    const int lane = threadIdx.x & 31, half = lane & 1;
    const int w = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    if (w >= NFACT / 32) return;
    const int r1 = 32 * w + (lane >> 1), r2 = r1 + 16;  // a warp takes 32 rows, a pair rows r1 and r2
    const int2 a1 = fact[2 * r1 + half], a2 = fact[2 * r2 + half];
    const unsigned pm = 3u << (lane & ~1);
    const int key1 = __shfl_sync(0xffffffffu, a1.x, lane & ~1), key2 = __shfl_sync(0xffffffffu, a2.x, lane & ~1);
    const unsigned b1 = fmix32((unsigned)key1) & (NBUCKET - 1), b2 = fmix32((unsigned)key2) & (NBUCKET - 1);
    const int4 s1 = table[2 * b1 + half], s2 = table[2 * b2 + half];
    const float rate1 = probe_pair(table, s1, b1, key1, half, pm);
    const float rate2 = probe_pair(table, s2, b2, key2, half, pm);
    out[2 * r1 + half] = half ? __int_as_float(a1.x) * (1.0f - __int_as_float(a1.y)) * rate1 : (float)a1.y * rate1;
    out[2 * r2 + half] = half ? __int_as_float(a2.x) * (1.0f - __int_as_float(a2.y)) * rate2 : (float)a2.y * rate2;
}

extern "C" __global__ void join_probe_thread_row(const int4* __restrict__ fact, const int4* __restrict__ table,
                                                 float2* __restrict__ out) {
    const int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= NFACT) return;
    const int4 a = fact[r];
    unsigned b = fmix32((unsigned)a.x) & (NBUCKET - 1);
    float rate = 0.0f;
    for (;;) {
        const int4 lo = table[2 * b], hi = table[2 * b + 1];
        if (lo.x == a.x) { rate = __int_as_float(lo.y); break; }
        if (lo.z == a.x) { rate = __int_as_float(lo.w); break; }
        if (hi.x == a.x) { rate = __int_as_float(hi.y); break; }
        if (hi.z == a.x) { rate = __int_as_float(hi.w); break; }
        if (lo.x == EMPTY || lo.z == EMPTY || hi.x == EMPTY || hi.z == EMPTY) break;
        b = (b + 1) & (NBUCKET - 1);
    }
    out[r] = make_float2((float)a.y * rate, __int_as_float(a.z) * (1.0f - __int_as_float(a.w)) * rate);
}

int main() {
    std::vector<int> dkey(NDIM), table(NBUCKET * 8, EMPTY);
    for (int i = 0; i < NDIM; ++i) dkey[i] = 2 * (i * 1024 + (int)ubelow(1024));  // distinct even keys
    int longest = 1;
    for (int i = 0; i < NDIM; ++i) {
        unsigned b = fmix32((unsigned)dkey[i]) & (NBUCKET - 1);
        int probes = 1, j = 0;
        for (;; b = (b + 1) & (NBUCKET - 1), ++probes) {  // the first bucket with a free slot
            for (j = 0; j < 4 && table[8 * b + 2 * j] != EMPTY; ++j) {}
            if (j < 4) break;
        }
        table[8 * b + 2 * j] = dkey[i];
        const float rate = 0.5f + frand();
        memcpy(&table[8 * b + 2 * j + 1], &rate, 4);
        longest = std::max(longest, probes);
    }
    std::vector<int> fact(4 * (size_t)NFACT);
    for (size_t r = 0; r < NFACT; ++r) {
        const bool miss = ubelow(10) == 0;  // 10% of the rows name no product (odd keys are never in the table)
        fact[4 * r] = miss ? 2 * (int)ubelow(1u << 30) + 1 : dkey[ubelow(NDIM)];
        fact[4 * r + 1] = 1 + (int)ubelow(20);
        const float price = 1.0f + 99.0f * frand(), disc = 0.3f * frand();
        memcpy(&fact[4 * r + 2], &price, 4);
        memcpy(&fact[4 * r + 3], &disc, 4);
    }
    int *dfact = dcopy(fact), *dtab = dcopy(table);
    float *dout = dnew<float>(2 * (size_t)NFACT), *dch = dnew<float>(2 * (size_t)NFACT);
    LAUNCH(join_probe_pairs, NFACT / 32 * 32 / THREADS, THREADS, reinterpret_cast<const int2*>(dfact),
           reinterpret_cast<const int4*>(dtab), dout);
    LAUNCH(join_probe_thread_row, NFACT / THREADS, THREADS, reinterpret_cast<const int4*>(dfact),
           reinterpret_cast<const int4*>(dtab), reinterpret_cast<float2*>(dch));
    CK(cudaDeviceSynchronize());
    printf("longest insert probe: %d buckets\n", longest);
    return verdict("117-healthy-star-join-bucket-probe", hcopy(dout, 2 * (size_t)NFACT), hcopy(dch, 2 * (size_t)NFACT), 1e-6);
}
