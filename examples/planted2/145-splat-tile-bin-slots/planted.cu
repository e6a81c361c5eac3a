// 145-splat-tile-bin-slots. Planted: same-address slot reservations in tile binning.
// Gaussian-splat tile binning: each projected splat reserves a slot in every 16x16 screen tile its radius touches
// (atomicAdd on the tile's counter) and writes its id there. The splats are stored in Morton order, 512 to a
// tile, so the 32 lanes of a warp reserve on the same one to four counters at once: each ATOM carries up to 32
// same-address updates that an L2 slice applies one after another, while the 16 warps of a tile and its
// neighbours' overlapping splats queue on the same counters. 8M splats, about 4.4 tiles each.
// Fixed twin: warp-aggregated reservation: __match_any_sync groups the lanes by tile, the group's leader reserves
// popc(group) slots with one atomicAdd, and each lane writes at base + its rank in the group.
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
#define SCREEN 2048
#define TILE 16
#define TILES_X (SCREEN / TILE)          // 128 x 128 tiles
#define NTILES (TILES_X * TILES_X)
#define PER_TILE 512
#define NSPLATS (NTILES * PER_TILE)      // 8M splats
#define MAX_R 15.9f                      // radius < 16 px: a splat's box covers at most 3 tiles a side
#define THREADS 256

__device__ __forceinline__ void tile_box(float2 m, float r, int& tx0, int& ty0, int& tx1, int& ty1) {
    tx0 = max(0, (int)floorf((m.x - r) * (1.0f / TILE)));
    ty0 = max(0, (int)floorf((m.y - r) * (1.0f / TILE)));
    tx1 = min(TILES_X - 1, (int)floorf((m.x + r) * (1.0f / TILE)));
    ty1 = min(TILES_X - 1, (int)floorf((m.y + r) * (1.0f / TILE)));
}

extern "C" __global__ void bin_splats_atomic(const float2* __restrict__ mean, const float* __restrict__ radius,
                                             unsigned* __restrict__ count, unsigned* __restrict__ ids, unsigned cap) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    int tx0, ty0, tx1, ty1;
    tile_box(mean[i], radius[i], tx0, ty0, tx1, ty1);
    for (int ty = ty0; ty <= ty1; ++ty)
        for (int tx = tx0; tx <= tx1; ++tx) {
            unsigned t = ty * TILES_X + tx;
            unsigned slot = atomicAdd(&count[t], 1u);  // PLANTED
            if (slot < cap) ids[(size_t)t * cap + slot] = i;
        }
}

extern "C" __global__ void bin_splats_warp(const float2* __restrict__ mean, const float* __restrict__ radius,
                                           unsigned* __restrict__ count, unsigned* __restrict__ ids, unsigned cap) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x, lane = threadIdx.x & 31;
    int tx0, ty0, tx1, ty1;
    tile_box(mean[i], radius[i], tx0, ty0, tx1, ty1);
    unsigned span = __reduce_max_sync(0xffffffffu, (unsigned)max(tx1 - tx0, ty1 - ty0));  // the warp's widest box
    for (int dy = 0; dy <= (int)span; ++dy)
        for (int dx = 0; dx <= (int)span; ++dx) {
            int tx = tx0 + dx, ty = ty0 + dy;
            bool hit = tx <= tx1 && ty <= ty1;
            unsigned t = hit ? ty * TILES_X + tx : 0xffffffffu;
            unsigned peers = __match_any_sync(0xffffffffu, t);
            unsigned leader = __ffs(peers) - 1, base = 0;
            if (hit && lane == leader) base = atomicAdd(&count[t], __popc(peers));
            base = __shfl_sync(0xffffffffu, base, leader);
            unsigned slot = base + __popc(peers & ((1u << lane) - 1u));
            if (hit && slot < cap) ids[(size_t)t * cap + slot] = i;
        }
}

static unsigned demorton(unsigned m) {  // every other bit of m
    unsigned v = 0;
    for (int b = 0; b < 16; ++b) v |= ((m >> (2 * b)) & 1u) << b;
    return v;
}

// per tile: its count, and the sum of the ids in its list (order-free), split in 24-bit halves that floats hold exactly
static std::vector<float> digest(const std::vector<unsigned>& count, const unsigned* dids, unsigned cap) {
    std::vector<unsigned> ids = hcopy(dids, (size_t)NTILES * cap);
    std::vector<float> d;
    for (unsigned t = 0; t < NTILES; ++t) {
        unsigned long long s = 0;
        for (unsigned k = 0; k < count[t] && k < cap; ++k) s += ids[(size_t)t * cap + k];
        d.push_back((float)count[t]);
        d.push_back((float)(s & 0xffffffu));
        d.push_back((float)(s >> 24));
    }
    return d;
}

int main() {
    std::vector<float2> hm(NSPLATS);
    std::vector<float> hr(NSPLATS);
    std::vector<unsigned> ref(NTILES, 0);
    for (unsigned m = 0; m < NTILES; ++m) {  // tiles in Morton order, PER_TILE splats centred in each
        unsigned tx = demorton(m), ty = demorton(m >> 1);
        for (unsigned k = 0; k < PER_TILE; ++k) {
            size_t i = (size_t)m * PER_TILE + k;
            hm[i] = make_float2(tx * TILE + frand() * TILE, ty * TILE + frand() * TILE);
            hr[i] = 2.0f + frand() * (MAX_R - 2.0f);
        }
    }
    for (size_t i = 0; i < NSPLATS; ++i) {  // host count of tile hits, to size the lists
        int tx0 = std::max(0, (int)floorf((hm[i].x - hr[i]) * (1.0f / TILE)));
        int ty0 = std::max(0, (int)floorf((hm[i].y - hr[i]) * (1.0f / TILE)));
        int tx1 = std::min(TILES_X - 1, (int)floorf((hm[i].x + hr[i]) * (1.0f / TILE)));
        int ty1 = std::min(TILES_X - 1, (int)floorf((hm[i].y + hr[i]) * (1.0f / TILE)));
        for (int ty = ty0; ty <= ty1; ++ty)
            for (int tx = tx0; tx <= tx1; ++tx) ref[ty * TILES_X + tx]++;
    }
    unsigned cap = 0;
    for (unsigned c : ref) cap = std::max(cap, c);
    cap = (cap + 63) / 64 * 64;
    float2* dm = dcopy(hm);
    float* dr = dcopy(hr);
    unsigned *cbad = dnew<unsigned>(NTILES), *cfix = dnew<unsigned>(NTILES);
    unsigned* ids = dnew<unsigned>((size_t)NTILES * cap);
    LAUNCH(bin_splats_atomic, NSPLATS / THREADS, THREADS, dm, dr, cbad, ids, cap);
    CK(cudaDeviceSynchronize());
    std::vector<float> bad = digest(hcopy(cbad, NTILES), ids, cap);
    CK(cudaMemset(ids, 0, (size_t)NTILES * cap * sizeof(unsigned)));
    LAUNCH(bin_splats_warp, NSPLATS / THREADS, THREADS, dm, dr, cfix, ids, cap);
    CK(cudaDeviceSynchronize());
    std::vector<float> fixed = digest(hcopy(cfix, NTILES), ids, cap);
    if (hcopy(cfix, NTILES) != ref) { printf("MISMATCH 145-splat-tile-bin-slots: counts differ from the host's\n"); return 1; }
    return verdict("145-splat-tile-bin-slots", bad, fixed, 0.0);
}
