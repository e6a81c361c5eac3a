// 141-gcn-item-push-hub-rows. Planted: atomic contention on the popular items' rows.
// One GCN (symmetric-normalized) propagation step on a user-item graph, pushed from the user side: a warp
// takes 32 interactions, loads their user and item ids and both degree normalizers, then the users' 32-float
// rows (8 in flight), and adds each scaled row into its item's row, one atomicAdd per lane. Item popularity
// is Zipf (s = 1) over 32K items: the top item gets 382K of the 4.2M interactions, the top 64 together 43%,
// so a few warm rows take most additions and L2 applies each row's additions one request after another.
// Fixed twin: the same loop, but the 64 most popular items (ids 0..63, the catalogue is numbered by
// popularity) are summed in a per-block shared-memory copy, added to global memory once per block.
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
#define USERS (1 << 20)
#define ITEMS 32768
#define F 32
#define HOT 64
#define BATCH 8
#define FULL 0xffffffffu

// A warp takes 32 interactions at a time: one coalesced load of their ids and normalizers, then the user
// rows BATCH at a time (all loads of a batch in flight together), then the batch's additions into item rows.
extern "C" __global__ void __launch_bounds__(256) gcn_item_push(
        const int* __restrict__ eu, const int* __restrict__ ei, const float* __restrict__ dinv_u,
        const float* __restrict__ dinv_i, const float* __restrict__ xu, float* __restrict__ yi, int n_edges) {
    const int lane = threadIdx.x & 31;
    const int warps = (int)((gridDim.x * blockDim.x) >> 5);
    for (int base = (int)((blockIdx.x * blockDim.x + threadIdx.x) >> 5) * 32; base < n_edges; base += warps * 32) {
        const int e = base + lane;
        int u = 0, i = ITEMS - 1;
        float c = 0.f;                                  // past the end: adds 0 to a cold row
        if (e < n_edges) { u = eu[e]; i = ei[e]; c = dinv_u[u] * dinv_i[i]; }
        for (int k0 = 0; k0 < 32; k0 += BATCH) {
            float m[BATCH];
            int it[BATCH];
#pragma unroll
            for (int j = 0; j < BATCH; ++j) {
                const int uk = __shfl_sync(FULL, u, k0 + j);
                it[j] = __shfl_sync(FULL, i, k0 + j);
                m[j] = __shfl_sync(FULL, c, k0 + j) * xu[(size_t)uk * F + lane];
            }
#pragma unroll
            for (int j = 0; j < BATCH; ++j) atomicAdd(&yi[(size_t)it[j] * F + lane], m[j]);  // PLANTED
        }
    }
}

extern "C" __global__ void __launch_bounds__(256) gcn_item_push_hot_smem(
        const int* __restrict__ eu, const int* __restrict__ ei, const float* __restrict__ dinv_u,
        const float* __restrict__ dinv_i, const float* __restrict__ xu, float* __restrict__ yi, int n_edges) {
    __shared__ float hot[HOT * F];                      // rows of the HOT most popular items, this block's share
    for (int k = threadIdx.x; k < HOT * F; k += blockDim.x) hot[k] = 0.f;
    __syncthreads();
    const int lane = threadIdx.x & 31;
    const int warps = (int)((gridDim.x * blockDim.x) >> 5);
    for (int base = (int)((blockIdx.x * blockDim.x + threadIdx.x) >> 5) * 32; base < n_edges; base += warps * 32) {
        const int e = base + lane;
        int u = 0, i = ITEMS - 1;
        float c = 0.f;
        if (e < n_edges) { u = eu[e]; i = ei[e]; c = dinv_u[u] * dinv_i[i]; }
        for (int k0 = 0; k0 < 32; k0 += BATCH) {
            float m[BATCH];
            int it[BATCH];
#pragma unroll
            for (int j = 0; j < BATCH; ++j) {
                const int uk = __shfl_sync(FULL, u, k0 + j);
                it[j] = __shfl_sync(FULL, i, k0 + j);
                m[j] = __shfl_sync(FULL, c, k0 + j) * xu[(size_t)uk * F + lane];
            }
#pragma unroll
            for (int j = 0; j < BATCH; ++j) {
                if (it[j] < HOT) atomicAdd(&hot[it[j] * F + lane], m[j]);
                else atomicAdd(&yi[(size_t)it[j] * F + lane], m[j]);
            }
        }
    }
    __syncthreads();
    for (int k = threadIdx.x; k < HOT * F; k += blockDim.x) {
        const float s = hot[k];
        if (s != 0.f) atomicAdd(&yi[k], s);
    }
}

int main() {
    // Zipf(1) popularity over item ranks; the catalogue numbers items by popularity rank
    std::vector<double> cdf(ITEMS);
    double acc = 0;
    for (int r = 0; r < ITEMS; ++r) { acc += 1.0 / (r + 1); cdf[r] = acc; }
    for (auto& v : cdf) v /= acc;
    std::vector<int> hu, hi;
    hu.reserve(4300000); hi.reserve(4300000);
    std::vector<int> deg_u(USERS), deg_i(ITEMS, 0);
    for (int u = 0; u < USERS; ++u) {               // interactions grouped by user, as logged
        deg_u[u] = 1 + (int)((urand() >> 8) % 7);
        for (int k = 0; k < deg_u[u]; ++k) {
            const double p = (urand() >> 8) * (1.0 / 16777216.0);
            int i = (int)(std::lower_bound(cdf.begin(), cdf.end(), p) - cdf.begin());
            if (i >= ITEMS) i = ITEMS - 1;
            hu.push_back(u); hi.push_back(i); ++deg_i[i];
        }
    }
    const int n_edges = (int)hu.size();
    std::vector<float> hdu(USERS), hdi(ITEMS), hx((size_t)USERS * F);
    for (int u = 0; u < USERS; ++u) hdu[u] = 1.0f / sqrtf((float)deg_u[u]);
    for (int i = 0; i < ITEMS; ++i) hdi[i] = deg_i[i] ? 1.0f / sqrtf((float)deg_i[i]) : 0.f;
    for (auto& v : hx) v = frand();
    int *deu = dcopy(hu), *dei = dcopy(hi);
    float *ddu = dcopy(hdu), *ddi = dcopy(hdi), *dx = dcopy(hx);
    float *ybad = dnew<float>((size_t)ITEMS * F), *yfix = dnew<float>((size_t)ITEMS * F);

    // both kernels: one resident wave of blocks, warps striding over tiles of 32 interactions
    const int threads = 256;
    int sms = 0, per_bad = 0, per_fix = 0;
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_bad, gcn_item_push, threads, 0));
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_fix, gcn_item_push_hot_smem, threads, 0));
    LAUNCH(gcn_item_push, sms * per_bad, threads, deu, dei, ddu, ddi, dx, ybad, n_edges);
    LAUNCH(gcn_item_push_hot_smem, sms * per_fix, threads, deu, dei, ddu, ddi, dx, yfix, n_edges);
    CK(cudaDeviceSynchronize());
    return verdict("141-gcn-item-push-hub-rows", hcopy(ybad, (size_t)ITEMS * F), hcopy(yfix, (size_t)ITEMS * F), 1e-3);
}
