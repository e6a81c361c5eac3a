// 182-healthy-gcn-messages-csc-slots. Healthy: a graph push where each edge writes its own slot of a precomputed
// destination-ordered output. A deterministic GCN layer (no float atomics) first materializes each edge's message,
// w_e * x[src_e] (32 floats, 128 bytes), at the edge's slot in destination (CSC) order, pos_e, given by a counting
// pass done elsewhere; a segmented sum then reduces each destination's contiguous messages. 256K nodes, 3.1M edges
// stored in source order (average out-degree 12), destinations uniform at random: the 402 MB of message writes go
// to random 128-byte rows, which is inherent to the job. Each group of 8 lanes moves a whole row (a float4 a lane),
// 4 rows per warp instruction; each group takes 4 edges and reads their source, weight and slot as one int4, float4
// and int4 (64 contiguous bytes of each stream per warp instruction). The x rows are read in source order (32 MB,
// reused through L1). About 470 MB of DRAM traffic, mostly full-line writes: bound by DRAM.
// Challenger: a group of 8 lanes per edge, its source, weight and slot read as scalars (one edge per group).
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

#define NNODE (1 << 18)   // 262,144 nodes
#define FEAT 32           // features per node: 128-byte rows, 8 float4
#define NEDGE (3 << 20)   // 3,145,728 edges

// a warp takes 16 edges: group g (lanes 8g..8g+7) the edges 4k..4k+3 with k = 4*warp + g, one row column q a lane
extern "C" __global__ void __launch_bounds__(256) gcn_messages_group8(const float4* __restrict__ x,
                                                                      const int4* __restrict__ src4,
                                                                      const float4* __restrict__ w4,
                                                                      const int4* __restrict__ pos4,
                                                                      float4* __restrict__ msg) {
    const int lane = threadIdx.x & 31, q = lane & 7, g = lane >> 3;
    const size_t k = (((size_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5) * 4 + g;
    const int4 s = src4[k];
    const float4 w = w4[k];
    const int4 p = pos4[k];
    const float4 a = x[(size_t)s.x * (FEAT / 4) + q];
    const float4 b = x[(size_t)s.y * (FEAT / 4) + q];
    const float4 c = x[(size_t)s.z * (FEAT / 4) + q];
    const float4 d = x[(size_t)s.w * (FEAT / 4) + q];
    msg[(size_t)p.x * (FEAT / 4) + q] = make_float4(w.x * a.x, w.x * a.y, w.x * a.z, w.x * a.w);
    msg[(size_t)p.y * (FEAT / 4) + q] = make_float4(w.y * b.x, w.y * b.y, w.y * b.z, w.y * b.w);
    msg[(size_t)p.z * (FEAT / 4) + q] = make_float4(w.z * c.x, w.z * c.y, w.z * c.z, w.z * c.w);
    msg[(size_t)p.w * (FEAT / 4) + q] = make_float4(w.w * d.x, w.w * d.y, w.w * d.z, w.w * d.w);
}

// the challenger: a group of 8 lanes per edge
extern "C" __global__ void __launch_bounds__(256) gcn_messages_edge8(const float4* __restrict__ x,
                                                                     const int* __restrict__ src,
                                                                     const float* __restrict__ w,
                                                                     const int* __restrict__ pos,
                                                                     float4* __restrict__ msg) {
    const size_t t = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    const size_t e = t >> 3;
    const int q = (int)(t & 7);
    const int s = src[e], p = pos[e];
    const float we = w[e];
    const float4 a = x[(size_t)s * (FEAT / 4) + q];
    msg[(size_t)p * (FEAT / 4) + q] = make_float4(we * a.x, we * a.y, we * a.z, we * a.w);
}

int main() {
    std::vector<float> h_x((size_t)NNODE * FEAT);
    for (auto& v : h_x) v = frand() * 2.0f - 1.0f;
    std::vector<int> h_src(NEDGE), h_dst(NEDGE), h_pos(NEDGE), outdeg(NNODE, 0), indeg(NNODE, 0);
    int cur = 0;
    for (int e = 0; e < NEDGE; ++e) {  // source order, geometric out-degrees (mean 12)
        h_src[e] = cur;
        if (frand() < 1.0f / 12.0f && cur < NNODE - 1) ++cur;
        h_dst[e] = (int)((urand() >> 8) % NNODE);
        ++outdeg[h_src[e]]; ++indeg[h_dst[e]];
    }
    std::vector<float> h_w(NEDGE);
    for (int e = 0; e < NEDGE; ++e) h_w[e] = 1.0f / sqrtf((float)outdeg[h_src[e]] * (float)indeg[h_dst[e]]);
    std::vector<int> off(NNODE + 1, 0);  // the counting pass: each edge's slot in destination order
    for (int v = 0; v < NNODE; ++v) off[v + 1] = off[v] + indeg[v];
    for (int e = 0; e < NEDGE; ++e) h_pos[e] = off[h_dst[e]]++;
    const size_t nm = (size_t)NEDGE * FEAT;
    std::vector<float> ref(nm);
    for (int e = 0; e < NEDGE; ++e)
        for (int f = 0; f < FEAT; ++f)
            ref[(size_t)h_pos[e] * FEAT + f] = h_w[e] * h_x[(size_t)h_src[e] * FEAT + f];

    float* d_x = dcopy(h_x);
    int* d_src = dcopy(h_src);
    float* d_w = dcopy(h_w);
    int* d_pos = dcopy(h_pos);
    float* d_msg = dnew<float>(nm);
    LAUNCH(gcn_messages_group8, NEDGE / 128, 256, (const float4*)d_x, (const int4*)d_src, (const float4*)d_w,
           (const int4*)d_pos, (float4*)d_msg);
    CK(cudaDeviceSynchronize());
    std::vector<float> got = hcopy(d_msg, nm);
    CK(cudaMemset(d_msg, 0, nm * sizeof(float)));
    LAUNCH(gcn_messages_edge8, NEDGE / 32, 256, (const float4*)d_x, (const int*)d_src, (const float*)d_w,
           (const int*)d_pos, (float4*)d_msg);
    CK(cudaDeviceSynchronize());
    std::vector<float> got2 = hcopy(d_msg, nm);
    int rc = verdict("182-healthy-gcn-messages-csc-slots", got, ref, 1e-6);
    rc |= verdict("182-healthy-gcn-messages-csc-slots:challenger", got2, ref, 1e-6);
    CK(cudaFree(d_x)); CK(cudaFree(d_src)); CK(cudaFree(d_w)); CK(cudaFree(d_pos)); CK(cudaFree(d_msg));
    return rc;
}
