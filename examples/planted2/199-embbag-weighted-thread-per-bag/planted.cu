// 199-embbag-weighted-thread-per-bag. Planted: uncoalesced global access through bag offsets and ids.
// Weighted EmbeddingBag (mode sum, per-sample weights) of a recommender's multi-hot feature: 168,960 bags of
// 20 to 28 ids (4.05M in all) into a 2M x 32 float table (256 MB), out[b] = sum_j w_j * table[id_j]. One thread
// a bag: each thread walks its own id and weight list and, for each id, its 128-byte row one float at a time
// into 32 accumulators, then writes its 32 outputs. At every step the 32 lanes of a warp read 32 ids a bag apart
// and then 32 different rows: every load instruction touches 32 sectors (32 L1 wavefronts) for 128 useful bytes.
// Fixed twin: a warp a bag: lanes read the bag's ids and weights together, broadcast each with a shuffle, and
// read the row with lane d taking feature d (one 128-byte line a load); about 550 MB stream from DRAM in
// 128-byte rows, expected about 3x faster.
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

#define DIM 32

// 32 accumulators a thread: capped at 51 registers so that 5 blocks of 256 stay resident (no spills)
extern "C" __global__ void __launch_bounds__(256, 5)
embbag_thread_per_bag(const int* __restrict__ off, const int* __restrict__ ids, const float* __restrict__ psw,
                      const float* __restrict__ table, int nbags, float* __restrict__ out) {
    int b = blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= nbags) return;
    int beg = off[b], end = off[b + 1];
    float acc[DIM];
#pragma unroll
    for (int d = 0; d < DIM; ++d) acc[d] = 0.0f;
    for (int j = beg; j < end; ++j) {
        int id = ids[j];     // PLANTED
        float w = psw[j];    // PLANTED
        const float* row = table + (size_t)id * DIM;
#pragma unroll
        for (int d = 0; d < DIM; ++d) acc[d] += w * row[d];  // PLANTED
    }
#pragma unroll
    for (int d = 0; d < DIM; ++d) out[(size_t)b * DIM + d] = acc[d];
}

extern "C" __global__ void embbag_warp_per_bag(const int* __restrict__ off, const int* __restrict__ ids,
                                               const float* __restrict__ psw, const float* __restrict__ table,
                                               int nbags, float* __restrict__ out) {
    int b = (int)((blockIdx.x * (unsigned)blockDim.x + threadIdx.x) >> 5);
    int lane = threadIdx.x & 31;
    if (b >= nbags) return;  // uniform across the warp
    int beg = off[b], end = off[b + 1];
    float acc = 0.0f;
    for (int base = beg; base < end; base += 32) {
        int j = base + lane;
        int id = 0;
        float w = 0.0f;
        if (j < end) { id = ids[j]; w = psw[j]; }
        int cnt = min(32, end - base);
#pragma unroll 8
        for (int k = 0; k < cnt; ++k) {
            int idk = __shfl_sync(0xffffffffu, id, k);
            float wk = __shfl_sync(0xffffffffu, w, k);
            acc += wk * table[(size_t)idk * DIM + lane];
        }
    }
    out[(size_t)b * DIM + lane] = acc;
}

int main() {
    const int nbags = 132 * 1280;  // one wave of one thread a bag at 5 blocks of 256 an SM
    const int nrows = 1 << 21;  // 2M rows x 128 B = 256 MB
    std::vector<int> off(nbags + 1);
    off[0] = 0;
    for (int b = 0; b < nbags; ++b) off[b + 1] = off[b] + 20 + (int)(urand() % 9);  // 20..28 ids a bag
    const int nids = off[nbags];
    std::vector<int> ids(nids);
    std::vector<float> psw(nids);
    for (int j = 0; j < nids; ++j) {
        ids[j] = (int)(urand() % nrows);
        psw[j] = 0.25f + frand();
    }
    std::vector<float> table((size_t)nrows * DIM);
    for (size_t i = 0; i < table.size(); ++i) table[i] = frand() - 0.5f;
    int* d_off = dcopy(off);
    int* d_ids = dcopy(ids);
    float* d_psw = dcopy(psw);
    float* d_table = dcopy(table);
    float* d_out_a = dnew<float>((size_t)nbags * DIM);
    float* d_out_b = dnew<float>((size_t)nbags * DIM);

    LAUNCH(embbag_thread_per_bag, (nbags + 255) / 256, 256, d_off, d_ids, d_psw, d_table, nbags, d_out_a);
    LAUNCH(embbag_warp_per_bag, (int)(((long long)nbags * 32 + 255) / 256), 256, d_off, d_ids, d_psw, d_table, nbags,
           d_out_b);
    CK(cudaDeviceSynchronize());

    std::vector<float> a = hcopy(d_out_a, (size_t)nbags * DIM), b = hcopy(d_out_b, (size_t)nbags * DIM);
    // the twin against a double-precision host sum on every 997th bag
    for (int g = 0; g < nbags; g += 997) {
        for (int d = 0; d < DIM; ++d) {
            double h = 0;
            for (int j = off[g]; j < off[g + 1]; ++j) h += (double)psw[j] * table[(size_t)ids[j] * DIM + d];
            if (fabs(h - b[(size_t)g * DIM + d]) > 1e-4) {
                printf("MISMATCH 199-embbag-weighted-thread-per-bag host bag %d dim %d\n", g, d);
                return 1;
            }
        }
    }
    return verdict("199-embbag-weighted-thread-per-bag", a, b, 1e-3);
}
