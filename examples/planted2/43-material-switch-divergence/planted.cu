// 43-material-switch-divergence. Planted: warp divergence. A stress update for 4M cells of four
// materials, each material with its own constitutive model (a different loop of FMAs). The materials
// are scattered at random, so nearly every warp holds all four and runs the four models one after the
// other with most lanes masked off: about four times the issued work.
// Fixed twin: the same kernel body on cells binned by material (the host sorts the cells by material
// once, as a particle code re-bins its particles): each warp then runs a single model. The results are
// scattered back to the original order on the host before the comparison.
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
#define CELLS (4u << 20)
#define STEPS 48

__device__ __forceinline__ float stress(int mat, float e) {
    float s = 0.0f;
    switch (mat) {  // PLANTED
    case 0:  // linear elastic with a cubic correction, integrated in STEPS increments
        for (int k = 0; k < STEPS; ++k) s = fmaf(0.02f * e, fmaf(e * e, -0.3f, 1.0f), s * 0.999f);
        break;
    case 1:  // power-law hardening: a fixed-point iteration
        s = e;
        for (int k = 0; k < STEPS; ++k) s = fmaf(0.5f, e / (1.0f + s * s) - s, s);
        break;
    case 2:  // viscoelastic: a Maxwell element relaxed over STEPS sub-steps
        for (int k = 0; k < STEPS; ++k) s = fmaf(-0.05f, s, fmaf(0.8f, e, 0.0f) * 0.05f + s);
        break;
    default:  // rate-independent plasticity: return mapping onto a yield surface
        s = 2.0f * e;
        for (int k = 0; k < STEPS; ++k) s = fminf(s, fmaf(0.1f, s, 0.6f)) * fmaf(0.001f, e, 1.0f);
        break;
    }
    return s;
}

extern "C" __global__ void stress_mixed_cells(const int* __restrict__ mat, const float* __restrict__ strain,
                                              float* __restrict__ out) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < CELLS) out[i] = stress(mat[i], strain[i]);
}

extern "C" __global__ void stress_binned_cells(const int* __restrict__ mat, const float* __restrict__ strain,
                                               float* __restrict__ out) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < CELLS) out[i] = stress(mat[i], strain[i]);
}

int main() {
    std::vector<int> hm(CELLS);
    std::vector<float> he(CELLS);
    for (auto& m : hm) m = urand() >> 30;
    for (auto& e : he) e = frand() * 0.01f;
    std::vector<unsigned> order(CELLS);
    for (unsigned i = 0; i < CELLS; ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](unsigned a, unsigned b) { return hm[a] < hm[b]; });
    std::vector<int> sm(CELLS);
    std::vector<float> se(CELLS);
    for (unsigned i = 0; i < CELLS; ++i) { sm[i] = hm[order[i]]; se[i] = he[order[i]]; }
    int *dm = dcopy(hm), *dsm = dcopy(sm);
    float *de = dcopy(he), *dse = dcopy(se), *dbad = dnew<float>(CELLS), *dfix = dnew<float>(CELLS);
    LAUNCH(stress_mixed_cells, CELLS / 256, 256, dm, de, dbad);
    LAUNCH(stress_binned_cells, CELLS / 256, 256, dsm, dse, dfix);
    CK(cudaDeviceSynchronize());
    std::vector<float> fixed_sorted = hcopy(dfix, CELLS), fixed(CELLS);
    for (unsigned i = 0; i < CELLS; ++i) fixed[order[i]] = fixed_sorted[i];
    return verdict("43-material-switch-divergence", hcopy(dbad, CELLS), fixed, 1e-6);
}
