// 120-healthy-bloom-url-filter. Healthy: a crawler's seen-URL Bloom filter built with one 64-bit atomicOr per URL.
// 4M URLs in fixed-width 128-byte rows (512 MB) go into a register-blocked Bloom filter: 4 bits in one 64-bit word
// of a 16 MB table (2M words, stays in L2). A warp takes 32 URLs: 8 rounds of 4 whole rows (512 contiguous bytes a
// load), 8 lanes hash a row's 16-byte slices and combine them by shuffles, and the hash of URL i ends in lane i, so
// the warp inserts its 32 URLs with one atomicOr each. Distinct URLs hash uniformly: the atomics rarely meet on a word
// and come one per 128 bytes read, so the kernel streams its rows at the DRAM roof.
// Challenger: the plain layout (8 lanes per URL, one load a thread, the group's first lane inserts); expected the
// same speed.
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
#define NKEYS (1 << 22)            // URLs
#define KEY_VEC 8                  // 128-byte rows = 8 uint4, one per lane of a group
#define WORDS (1 << 21)            // 64-bit filter words (16 MB)
#define FULL 0xffffffffu

__device__ __forceinline__ unsigned mix_word(unsigned h, unsigned k) {    // xor, multiply, xorshift
    h = (h ^ k) * 0x9E3779B1u; return h ^ (h >> 15);
}
__device__ __forceinline__ unsigned fmix(unsigned h) {
    h ^= h >> 16; h *= 0x85ebca6bu; h ^= h >> 13; h *= 0xc2b2ae35u; return h ^ (h >> 16);
}
// hash this lane's 16 bytes (seeded by its slice of the row) and xor the 8 slices of the row's lane group
__device__ __forceinline__ unsigned lane_hash(uint4 v, unsigned part) {
    unsigned a = 0x9747b28cu + part * 0x61c88647u;
    a = mix_word(a, v.x); a = mix_word(a, v.y); a = mix_word(a, v.z); a = mix_word(a, v.w);
#pragma unroll
    for (int d = 1; d < KEY_VEC; d <<= 1) a ^= __shfl_xor_sync(FULL, a, d);
    return a;
}
__device__ __forceinline__ unsigned long long block_mask(unsigned h2) {
    return (1ull << (h2 & 63)) | (1ull << ((h2 >> 6) & 63)) | (1ull << ((h2 >> 12) & 63)) | (1ull << ((h2 >> 18) & 63));
}

// a warp per 32 URLs: round r loads rows 4r..4r+3 of the warp's 32, and lane i keeps the hash of row i
extern "C" __global__ void bloom_insert_urls(const uint4* __restrict__ rows, unsigned long long* __restrict__ filter, int nkeys) {
    unsigned lane = threadIdx.x & 31, part = lane & (KEY_VEC - 1);
    size_t key0 = ((size_t)blockIdx.x * blockDim.x + threadIdx.x - lane);   // 32 rows per warp
    if (key0 >= (size_t)nkeys) return;                                     // nkeys is a multiple of 32
    const uint4* base = rows + key0 * KEY_VEC;
    uint4 v[8];
#pragma unroll
    for (int r = 0; r < 8; ++r) v[r] = base[r * 32 + lane];
    unsigned mine = 0;
#pragma unroll
    for (int r = 0; r < 8; ++r) {
        unsigned a = lane_hash(v[r], part);
        unsigned t = __shfl_sync(FULL, a, 8 * (lane & 3));                 // row 4r + (lane & 3) sits in group lane & 3
        if ((lane >> 2) == (unsigned)r) mine = t;
    }
    unsigned h1 = fmix(mine ^ 128u), h2 = fmix(h1 ^ 0x5bd1e995u);
    atomicOr(&filter[h1 & (WORDS - 1)], block_mask(h2));
}

// challenger: 8 lanes per URL, one 16-byte load a thread, the group's first lane inserts
extern "C" __global__ void bloom_insert_urls_groups(const uint4* __restrict__ rows, unsigned long long* __restrict__ filter, int nkeys) {
    size_t g = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (g >= (size_t)nkeys * KEY_VEC) return;                  // whole warps
    unsigned part = threadIdx.x & (KEY_VEC - 1);
    unsigned a = lane_hash(rows[g], part);
    unsigned h1 = fmix(a ^ 128u), h2 = fmix(h1 ^ 0x5bd1e995u);
    if (part == 0) atomicOr(&filter[h1 & (WORDS - 1)], block_mask(h2));
}

int main() {
    // fixed-width rows: "https://" and a host from a small set, then a random path, zero-padded to 128 bytes
    const char* hosts[8] = {"www.example.com/", "cdn.example.org/", "news.example.net/", "shop.example.io/",
                            "blog.example.dev/", "img.example.com/", "api.example.org/", "docs.example.net/"};
    std::vector<uint4> h((size_t)NKEYS * KEY_VEC);
    for (int k = 0; k < NKEYS; ++k) {
        char row[128];
        memset(row, 0, sizeof row);
        int len = snprintf(row, sizeof row, "https://%s", hosts[urand() >> 29]);
        int path = 24 + (int)((urand() >> 8) % 80);          // 24..103 path characters
        for (int c = 0; c < path && len < 127; ++c) {
            unsigned r = urand() >> 26;                         // 64 symbols
            row[len++] = r < 26 ? 'a' + r : r < 52 ? 'A' + (r - 26) : r < 62 ? '0' + (r - 52) : r == 62 ? '/' : '-';
        }
        memcpy(&h[(size_t)k * KEY_VEC], row, sizeof row);
    }
    uint4* drows = dcopy(h);
    unsigned long long *f_main = dnew<unsigned long long>(WORDS), *f_chal = dnew<unsigned long long>(WORDS);
    LAUNCH(bloom_insert_urls, NKEYS / 256, 256, drows, f_main, NKEYS);
    LAUNCH(bloom_insert_urls_groups, (size_t)NKEYS * KEY_VEC / 256, 256, drows, f_chal, NKEYS);
    CK(cudaDeviceSynchronize());
    std::vector<unsigned long long> a = hcopy(f_main, WORDS), b = hcopy(f_chal, WORDS);
    std::vector<float> fa(WORDS), fb(WORDS);                  // bits set per word; a differing word is a NaN
    for (int w = 0; w < WORDS; ++w) {
        fb[w] = (float)__builtin_popcountll(b[w]);
        fa[w] = a[w] == b[w] ? (float)__builtin_popcountll(a[w]) : NAN;
    }
    return verdict("120-healthy-bloom-url-filter", fa, fb, 0.0);
}
