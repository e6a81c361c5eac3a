// 113-mvcc-undo-chain-walk. Planted: dependent loads: one undo chain walked at a time, each entry's address in the last one.
// An in-memory MVCC table (256K rows of 32 float columns, newest version in place) with an append-only undo log: each
// update appends {commit ts, previous entry of the row, column, old value} (6M entries, 96 MB, in commit order). A reader
// whose snapshot predates most updates rebuilds each row with a warp (lane = column): it walks the row's chain newest
// first, all lanes in step, applying before-images until an entry is visible (~23 loads); each 16-byte load's address
// is the previous entry's link, so a warp has one load in flight. Fixed twin: each warp rebuilds 4 rows and walks their
// 4 chains interleaved (4 independent loads in flight a step), the same entries loaded.
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
#define NROWS (256 * 1024)
#define NCOL 32
#define NUPD (6 * 1024 * 1024)
#define SNAP (NUPD / 16)  // the reader sees updates with commit ts <= SNAP
#define THREADS 256

// undo entry: x = commit ts of the update, y = the row's previous (older) entry, z = column, w = old value. Entry NUPD
// is the chains' common end, never visible (ts 0), so a walk stops on it like on any entry older than the snapshot.
extern "C" __global__ void snapshot_rows_chain(const float* __restrict__ table, const int* __restrict__ head,
                                               const int4* __restrict__ undo, int snap, float* __restrict__ out) {
    const int r = (blockIdx.x * blockDim.x + threadIdx.x) >> 5, lane = threadIdx.x & 31;
    if (r >= NROWS) return;
    float v = table[(size_t)r * NCOL + lane];
    int p = head[r];
    for (;;) { const int4 e = undo[p]; if (e.x <= snap) break; v = e.z == lane ? __int_as_float(e.w) : v; p = e.y; }  // PLANTED
    out[(size_t)r * NCOL + lane] = v;
}

extern "C" __global__ void snapshot_rows_chain_x4(const float* __restrict__ table, const int* __restrict__ head,
                                                  const int4* __restrict__ undo, int snap, float* __restrict__ out) {
    const int g = (blockIdx.x * blockDim.x + threadIdx.x) >> 5, lane = threadIdx.x & 31;
    if (g >= NROWS / 4) return;
    float v[4];
    int p[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) { v[j] = table[(size_t)(4 * g + j) * NCOL + lane]; p[j] = head[4 * g + j]; }
    bool any = true;
    while (any) {  // a finished chain keeps pointing at its stopping entry (reloaded from L1, still not visible)
        int4 e[4];
#pragma unroll
        for (int j = 0; j < 4; ++j) e[j] = undo[p[j]];  // 4 independent loads in flight
        any = false;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const bool live = e[j].x > snap;
            v[j] = live && e[j].z == lane ? __int_as_float(e[j].w) : v[j];
            p[j] = live ? e[j].y : p[j];
            any |= live;
        }
    }
#pragma unroll
    for (int j = 0; j < 4; ++j) out[(size_t)(4 * g + j) * NCOL + lane] = v[j];
}

int main() {
    std::vector<float> table((size_t)NROWS * NCOL), snapshot;
    for (auto& x : table) x = frand();
    std::vector<int> head(NROWS, NUPD);
    std::vector<int4> undo(NUPD + 1);
    undo[NUPD] = make_int4(0, NUPD, 0, 0);
    for (int t = 0; t < NUPD; ++t) {  // the update stream, in commit order: entry t has commit ts t + 1
        if (t == SNAP) snapshot = table;
        const int r = (int)ubelow(NROWS), c = (int)ubelow(NCOL);
        float& cell = table[(size_t)r * NCOL + c];
        int old;
        memcpy(&old, &cell, sizeof old);
        undo[t] = make_int4(t + 1, head[r], c, old);
        head[r] = t;
        cell = frand();
    }
    float* dtable = dcopy(table);
    int* dhead = dcopy(head);
    int4* dundo = dcopy(undo);
    float *dbad = dnew<float>((size_t)NROWS * NCOL), *dfix = dnew<float>((size_t)NROWS * NCOL);
    LAUNCH(snapshot_rows_chain, NROWS * 32 / THREADS, THREADS, dtable, dhead, dundo, SNAP, dbad);
    LAUNCH(snapshot_rows_chain_x4, NROWS / 4 * 32 / THREADS, THREADS, dtable, dhead, dundo, SNAP, dfix);
    CK(cudaDeviceSynchronize());
    std::vector<float> bad = hcopy(dbad, (size_t)NROWS * NCOL), fix = hcopy(dfix, (size_t)NROWS * NCOL);
    if (memcmp(bad.data(), snapshot.data(), bad.size() * sizeof(float)) != 0) {
        printf("MISMATCH 113-mvcc-undo-chain-walk: the rebuilt rows differ from the snapshot taken at ts %d\n", SNAP);
        return 1;
    }
    return verdict("113-mvcc-undo-chain-walk", bad, fix, 0.0);
}
