// 32-union-find. Planted: dependent loads. Connected-component labels over 32-pixel tiles: a union-find
// forest of 2M tiles (8 MB parent array, resident in the 50 MB L2) made of 32-tile chains scattered at
// random; every pixel (64M) gets its tile's root. A warp's 32 lanes are one tile's pixels, so each hop is
// one broadcast sector, and its address is the previous hop's value: one L2 round trip after another,
// with the L2 and DRAM far from busy.
// Fixed twin: each thread labels pixels of 8 tiles and follows their 8 chains in lockstep (8 independent
// loads in flight per warp).
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
#define TILE 32
#define TILES (2u << 20)
#define N (TILES * TILE)
#define CHAIN 32
#define WAYS 8
#define THREADS 256

extern "C" __global__ void find_root_one(const unsigned* __restrict__ parent, unsigned* __restrict__ label) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x, x = i / TILE, p;
    while ((p = parent[x]) != x) x = p;  // PLANTED
    label[i] = x;
}

extern "C" __global__ void find_root_eight(const unsigned* __restrict__ parent, unsigned* __restrict__ label) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x, x[WAYS];
#pragma unroll
    for (int j = 0; j < WAYS; ++j) x[j] = (i + j * (N / WAYS)) / TILE;
    for (bool moved = true; moved;) {
        unsigned p[WAYS];
#pragma unroll
        for (int j = 0; j < WAYS; ++j) p[j] = parent[x[j]];
        moved = false;
#pragma unroll
        for (int j = 0; j < WAYS; ++j) { moved |= p[j] != x[j]; x[j] = p[j]; }
    }
#pragma unroll
    for (int j = 0; j < WAYS; ++j) label[i + j * (N / WAYS)] = x[j];
}

int main() {
    std::vector<unsigned> perm(TILES), parent(TILES);
    for (unsigned i = 0; i < TILES; ++i) perm[i] = i;
    for (unsigned i = TILES - 1; i > 0; --i) { unsigned j = urand() % (i + 1); unsigned t = perm[i]; perm[i] = perm[j]; perm[j] = t; }
    for (unsigned g = 0; g < TILES; g += CHAIN)
        for (unsigned k = 0; k < CHAIN; ++k) parent[perm[g + k]] = perm[g + (k + 1 < CHAIN ? k + 1 : k)];
    unsigned *dp = dcopy(parent), *dbad = dnew<unsigned>(N), *dfix = dnew<unsigned>(N);
    LAUNCH(find_root_one, N / THREADS, THREADS, dp, dbad);
    LAUNCH(find_root_eight, N / WAYS / THREADS, THREADS, dp, dfix);
    CK(cudaDeviceSynchronize());
    std::vector<unsigned> rb = hcopy(dbad, N), rf = hcopy(dfix, N);
    return verdict("32-union-find", std::vector<float>(rb.begin(), rb.end()),
                   std::vector<float>(rf.begin(), rf.end()), 0.0);
}
