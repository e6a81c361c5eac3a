// 144-healthy-pair-energy-scatter. Healthy: scatter with atomics over near-uniform targets, at the DRAM roof.
// Energy readout of an interatomic ML potential: each directed pair (i -> j) of a full neighbour list carries
// a 32-float edge embedding from the previous layer; the pair energy is its dot product with the learned
// filter and half of it is added to atom j (the other half comes from the reverse pair). A warp takes 32
// pairs: their 4 KB as coalesced float4 streaming loads, 8-lane sums by shuffles, one atomicAdd per pair.
// Targets are atoms in unsorted order, about 12 pairs per atom: collisions are rare and the 3M atomics are
// a light load for L2 next to the 400 MB streamed. Challenger: the same readout pulled per atom through a
// CSC permutation (no atomics; the same bytes, read as scattered 128-byte rows).
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
#define ATOMS (1 << 18)
#define PAIRS (3 << 20)
#define NF 32
#define FULL 0xffffffffu

extern "C" __global__ void __launch_bounds__(256) pair_energy_scatter(
        const float4* __restrict__ emb, const int* __restrict__ nbr, const float4* __restrict__ w,
        float* __restrict__ e_atom, int n_pairs) {
    const int lane = threadIdx.x & 31;
    const float4 wq = w[lane & 7];                  // this lane's 4 filter weights
    const int warps = (int)((gridDim.x * blockDim.x) >> 5);
    for (int t = (int)((blockIdx.x * blockDim.x + threadIdx.x) >> 5); t < n_pairs / 32; t += warps) {
        const float4* f = emb + (size_t)t * 256;    // the tile's 32 pairs x 8 float4
        float p[8];
#pragma unroll
        for (int q = 0; q < 8; ++q) {               // float4 q*32 + lane: pair 4q + lane/8, features 4*(lane%8)..
            const float4 x = __ldcs(f + q * 32 + lane);
            p[q] = x.x * wq.x + x.y * wq.y + x.z * wq.z + x.w * wq.w;
        }
        const int j = __ldcs(nbr + t * 32 + lane);  // target atom of pair t*32 + lane
#pragma unroll
        for (int q = 0; q < 8; ++q) {
            p[q] += __shfl_xor_sync(FULL, p[q], 1);
            p[q] += __shfl_xor_sync(FULL, p[q], 2);
            p[q] += __shfl_xor_sync(FULL, p[q], 4);
        }
        float e = 0.f;                              // pair `lane` = 4 * (lane / 4) + lane % 4
#pragma unroll
        for (int q = 0; q < 8; ++q) {
            const float s = __shfl_sync(FULL, p[q], 8 * (lane & 3));
            if ((lane >> 2) == q) e = s;
        }
        atomicAdd(&e_atom[j], 0.5f * e);
    }
}

// challenger: eight lanes per atom walk its incoming pairs (CSC by target) and store the sum
extern "C" __global__ void __launch_bounds__(256) pair_energy_gather(
        const float4* __restrict__ emb, const int* __restrict__ in_ptr, const int* __restrict__ in_pair,
        const float4* __restrict__ w, float* __restrict__ e_atom, int n_atoms) {
    const int lane = threadIdx.x & 31;
    const int a = (int)((blockIdx.x * blockDim.x + threadIdx.x) >> 3);
    const float4 wq = w[lane & 7];
    float acc = 0.f;
    if (a < n_atoms) {
        const int k1 = in_ptr[a + 1];
        for (int k = in_ptr[a]; k < k1; ++k) {
            const float4 x = __ldcs(emb + (size_t)in_pair[k] * 8 + (lane & 7));
            acc += x.x * wq.x + x.y * wq.y + x.z * wq.z + x.w * wq.w;
        }
    }
    acc += __shfl_xor_sync(FULL, acc, 1);
    acc += __shfl_xor_sync(FULL, acc, 2);
    acc += __shfl_xor_sync(FULL, acc, 4);
    if (a < n_atoms && (lane & 7) == 0) e_atom[a] = 0.5f * acc;
}

int main() {
    std::vector<float> hemb((size_t)PAIRS * NF), hw(NF);
    std::vector<int> hn(PAIRS), cnt(ATOMS + 1, 0);
    for (auto& x : hemb) x = frand();
    for (auto& x : hw) x = (0.5f + frand()) / NF;
    for (auto& j : hn) { j = (int)(urand() >> 14); ++cnt[j + 1]; }   // ATOMS = 2^18: the LCG's high bits
    for (int a = 0; a < ATOMS; ++a) cnt[a + 1] += cnt[a];
    std::vector<int> hptr(cnt), hpair(PAIRS);
    for (int k = 0; k < PAIRS; ++k) hpair[cnt[hn[k]]++] = k;
    float4* demb = (float4*)dcopy(hemb);
    float4* dw = (float4*)dcopy(hw);
    int *dn = dcopy(hn), *dptr = dcopy(hptr), *dpair = dcopy(hpair);
    float *e_scatter = dnew<float>(ATOMS), *e_gather = dnew<float>(ATOMS);

    const int threads = 256;
    int sms = 0, per_sm = 0;
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, pair_energy_scatter, threads, 0));
    LAUNCH(pair_energy_scatter, sms * per_sm, threads, demb, dn, dw, e_scatter, PAIRS);
    LAUNCH(pair_energy_gather, ATOMS * 8 / threads, threads, demb, dptr, dpair, dw, e_gather, ATOMS);
    CK(cudaDeviceSynchronize());
    return verdict("144-healthy-pair-energy-scatter", hcopy(e_scatter, ATOMS), hcopy(e_gather, ATOMS), 1e-4);
}
