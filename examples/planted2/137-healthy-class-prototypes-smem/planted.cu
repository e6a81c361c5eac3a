// 137-healthy-class-prototypes-smem. Healthy: class prototypes (the M-step of k-means, or the class means of a
// prototypical network's support set) over 1M 128-d float embeddings with a long-tailed label set (32 classes,
// the largest 100 times the smallest). Each block accumulates its points into a 32x128 shared-memory table (a warp a
// point, a float4 a lane, laid out so a warp's 32 adds hit 32 banks), counts them with a shared integer atomic, and
// adds the table to global memory once at the end: 4096 global atomics a block, spread over 16 KB. The 512 MB of
// embeddings stream at the DRAM roof; the shared atomics (CAS loops) use a fraction of the shared-memory pipe.
// Challenger: the same block tables with the work cut per float4 (a plain grid-stride loop, no batching).
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
#define DIM 128
#define CLASSES 32
#define POINTS (1u << 20)
#define BATCH 2

// table layout: [class][component][lane], so dimension 4 * lane + component sits at class * DIM + component * 32 + lane
__device__ __forceinline__ void add_point(float* table, int cls, unsigned lane, float4 v) {
    float* row = table + cls * DIM + lane;
    atomicAdd(row, v.x); atomicAdd(row + 32, v.y); atomicAdd(row + 64, v.z); atomicAdd(row + 96, v.w);
}

__device__ __forceinline__ void flush_table(const float* table, const unsigned* tcount, float* __restrict__ sums,
                                            unsigned* __restrict__ counts) {
    for (unsigned k = threadIdx.x; k < CLASSES * DIM; k += blockDim.x) {
        unsigned cls = k / DIM, d = k % DIM;
        atomicAdd(&sums[k], table[cls * DIM + (d & 3u) * 32u + (d >> 2)]);
    }
    for (unsigned c = threadIdx.x; c < CLASSES; c += blockDim.x) atomicAdd(&counts[c], tcount[c]);
}

extern "C" __global__ void __launch_bounds__(1024, 2)
class_prototypes_block(const float4* __restrict__ emb, const int* __restrict__ label, float* __restrict__ sums,
                       unsigned* __restrict__ counts, unsigned n) {
    __shared__ float table[CLASSES * DIM];
    __shared__ unsigned tcount[CLASSES];
    for (unsigned k = threadIdx.x; k < CLASSES * DIM; k += blockDim.x) table[k] = 0.0f;
    if (threadIdx.x < CLASSES) tcount[threadIdx.x] = 0u;
    __syncthreads();
    const unsigned lane = threadIdx.x & 31u;
    const unsigned warp = (blockIdx.x * blockDim.x + threadIdx.x) >> 5, warps = (gridDim.x * blockDim.x) >> 5;
    for (unsigned base = warp * BATCH; base < n; base += warps * BATCH) {  // BATCH points a warp, loads first
        float4 v[BATCH];
        int c[BATCH];
#pragma unroll
        for (int j = 0; j < BATCH; ++j) { v[j] = emb[(size_t)(base + j) * (DIM / 4) + lane]; c[j] = label[base + j]; }
#pragma unroll
        for (int j = 0; j < BATCH; ++j) {
            add_point(table, c[j], lane, v[j]);
            if (lane == 0) atomicAdd(&tcount[c[j]], 1u);
        }
    }
    __syncthreads();
    flush_table(table, tcount, sums, counts);
}

extern "C" __global__ void __launch_bounds__(1024, 2)
class_prototypes_flat(const float4* __restrict__ emb, const int* __restrict__ label, float* __restrict__ sums,
                      unsigned* __restrict__ counts, unsigned n) {
    __shared__ float table[CLASSES * DIM];
    __shared__ unsigned tcount[CLASSES];
    for (unsigned k = threadIdx.x; k < CLASSES * DIM; k += blockDim.x) table[k] = 0.0f;
    if (threadIdx.x < CLASSES) tcount[threadIdx.x] = 0u;
    __syncthreads();
    const size_t total = (size_t)n * (DIM / 4);
    for (size_t t = (size_t)blockIdx.x * blockDim.x + threadIdx.x; t < total; t += (size_t)gridDim.x * blockDim.x) {
        unsigned point = (unsigned)(t / (DIM / 4)), lane = (unsigned)(t % (DIM / 4));
        int cls = label[point];
        add_point(table, cls, lane, emb[t]);
        if (lane == 0) atomicAdd(&tcount[cls], 1u);
    }
    __syncthreads();
    flush_table(table, tcount, sums, counts);
}

// class means (and counts) from the sums, the layout verdict compares
static std::vector<float> means(const std::vector<float>& sums, const std::vector<unsigned>& counts) {
    std::vector<float> out(CLASSES * DIM + CLASSES);
    for (int c = 0; c < CLASSES; ++c) {
        for (int d = 0; d < DIM; ++d) out[c * DIM + d] = counts[c] ? sums[c * DIM + d] / counts[c] : 0.0f;
        out[CLASSES * DIM + c] = (float)counts[c];
    }
    return out;
}

int main() {
    // long-tailed labels: P(class c) proportional to 100^(-c / 31); embeddings: a class prototype plus noise
    std::vector<double> cdf(CLASSES);
    double acc = 0;
    for (int c = 0; c < CLASSES; ++c) { acc += pow(100.0, -(double)c / (CLASSES - 1)); cdf[c] = acc; }
    std::vector<float> proto(CLASSES * DIM);
    for (auto& p : proto) p = 2.0f * frand() - 1.0f;
    std::vector<int> hl(POINTS);
    std::vector<float> he((size_t)POINTS * DIM);
    std::vector<double> ref_sum(CLASSES * DIM, 0.0);
    std::vector<unsigned> ref_count(CLASSES, 0u);
    for (size_t i = 0; i < POINTS; ++i) {
        double u = frand() * acc;
        int c = 0;
        while (c < CLASSES - 1 && cdf[c] <= u) ++c;
        hl[i] = c; ref_count[c]++;
        for (int d = 0; d < DIM; ++d) {
            float x = proto[c * DIM + d] + 0.5f * (frand() - 0.5f);
            he[i * DIM + d] = x; ref_sum[c * DIM + d] += x;
        }
    }
    std::vector<float> ref_sumf(ref_sum.begin(), ref_sum.end());
    const std::vector<float> ref = means(ref_sumf, ref_count);

    float4* de = reinterpret_cast<float4*>(dcopy(he));
    int* dl = dcopy(hl);
    float *dsum = dnew<float>(CLASSES * DIM), *dsum2 = dnew<float>(CLASSES * DIM);
    unsigned *dcnt = dnew<unsigned>(CLASSES), *dcnt2 = dnew<unsigned>(CLASSES);
    int sms = 0;
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));

    LAUNCH(class_prototypes_block, 2 * sms, 1024, de, dl, dsum, dcnt, POINTS);      // two blocks an SM: one wave
    LAUNCH(class_prototypes_flat, 2 * sms, 1024, de, dl, dsum2, dcnt2, POINTS);     // challenger
    CK(cudaDeviceSynchronize());

    std::vector<float> got = means(hcopy(dsum, CLASSES * DIM), hcopy(dcnt, CLASSES));
    std::vector<float> got2 = means(hcopy(dsum2, CLASSES * DIM), hcopy(dcnt2, CLASSES));
    double worst2 = 0;
    for (size_t k = 0; k < ref.size(); ++k) worst2 = fmax(worst2, fabs((double)got2[k] - ref[k]) / (fabs((double)ref[k]) + 1e-2));
    if (!(worst2 <= 1e-4)) { printf("MISMATCH 137-healthy-class-prototypes-smem challenger max_rel_err=%.3g\n", worst2); return 1; }
    return verdict("137-healthy-class-prototypes-smem", got, ref, 1e-4);
}
