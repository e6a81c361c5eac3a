// 143-cmos-kcl-rail-currents-f64. Planted: atomic contention on the two supply-rail nets (double).
// Residual assembly of a transistor-level circuit simulator (Newton step): a thread per linearized MOSFET
// loads its drain, gate and source nets, gds, gm and the companion current, gathers the three node voltages,
// and adds the channel current into the drain's and the source's KCL residual with atomicAdd(double). The
// netlist is NAND2/NOR2 cells: 3 of every 8 transistors have their source on VDD and 3 on GND, so 1.5M
// additions of the 4M land on each rail's residual, serialized at one L2 slice each.
// Fixed twin: the same loop with each thread summing its rail currents in registers; a warp reduction
// then adds them with one atomic per warp per rail. Every other net keeps its atomics.
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
#define CELLS (1 << 20)
#define DEVS (4 * CELLS)
#define NETS (2 * CELLS + 2)
#define GND 0
#define VDD (NETS - 1)
#define FULL 0xffffffffu

// out(c) = 1 + 2c, mid(c) = 2 + 2c (NAND2: the NMOS stack's middle node; NOR2: the PMOS stack's)
extern "C" __global__ void kcl_residual(const int* __restrict__ dn, const int* __restrict__ gn,
                                        const int* __restrict__ sn, const double* __restrict__ gds,
                                        const double* __restrict__ gm, const double* __restrict__ ieq,
                                        const double* __restrict__ v, double* __restrict__ f, int n) {
    const int k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= n) return;
    const int d = dn[k], g = gn[k], s = sn[k];
    const double vs = v[s];
    const double i = gds[k] * (v[d] - vs) + gm[k] * (v[g] - vs) + ieq[k];   // drain-to-source current
    atomicAdd(&f[d], i);
    atomicAdd(&f[s], -i);  // PLANTED
}

extern "C" __global__ void __launch_bounds__(256) kcl_residual_rail_sums(
        const int* __restrict__ dn, const int* __restrict__ gn, const int* __restrict__ sn,
        const double* __restrict__ gds, const double* __restrict__ gm, const double* __restrict__ ieq,
        const double* __restrict__ v, double* __restrict__ f, int n) {
    double to_gnd = 0.0, to_vdd = 0.0;
    for (int k = blockIdx.x * blockDim.x + threadIdx.x; k < n; k += gridDim.x * blockDim.x) {
        const int d = dn[k], g = gn[k], s = sn[k];
        const double vs = v[s];
        const double i = gds[k] * (v[d] - vs) + gm[k] * (v[g] - vs) + ieq[k];
        atomicAdd(&f[d], i);
        if (s == GND) to_gnd -= i;
        else if (s == VDD) to_vdd -= i;
        else atomicAdd(&f[s], -i);
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        to_gnd += __shfl_down_sync(FULL, to_gnd, o);
        to_vdd += __shfl_down_sync(FULL, to_vdd, o);
    }
    if ((threadIdx.x & 31) == 0) { atomicAdd(&f[GND], to_gnd); atomicAdd(&f[VDD], to_vdd); }
}

int main() {
    // cells in placement order, even ones NAND2, odd ones NOR2; inputs come from nearby earlier cells
    std::vector<int> hd(DEVS), hg(DEVS), hs(DEVS);
    std::vector<double> hgds(DEVS), hgm(DEVS), hieq(DEVS), hv(NETS);
    for (int c = 0; c < CELLS; ++c) {
        const int out = 1 + 2 * c, mid = 2 + 2 * c;
        const int a = 1 + 2 * ((c + CELLS - 1 - (int)((urand() >> 8) % 64)) % CELLS);
        const int b = 1 + 2 * ((c + CELLS - 2 - (int)((urand() >> 8) % 256)) % CELLS);
        // transistor terminals (drain, gate, source): P1 P2 N1 N2
        const int nand[4][3] = {{out, a, VDD}, {out, b, VDD}, {out, a, mid}, {mid, b, GND}};
        const int nor[4][3] = {{mid, a, VDD}, {out, b, mid}, {out, a, GND}, {out, b, GND}};
        const int (*t)[3] = (c & 1) ? nor : nand;
        for (int j = 0; j < 4; ++j) {
            const int k = 4 * c + j;
            hd[k] = t[j][0]; hg[k] = t[j][1]; hs[k] = t[j][2];
            hgds[k] = 0.1 * (1.0 + frand());                // mS, currents in mA
            hgm[k] = 0.4 * (1.0 + frand());
            hieq[k] = 0.02 * (frand() - 0.5);
        }
    }
    for (auto& x : hv) x = 0.8 * frand();
    hv[GND] = 0.0; hv[VDD] = 0.8;
    int *ddn = dcopy(hd), *dgn = dcopy(hg), *dsn = dcopy(hs);
    double *dgds = dcopy(hgds), *dgm = dcopy(hgm), *dieq = dcopy(hieq), *dv = dcopy(hv);
    double *fbad = dnew<double>(NETS), *ffix = dnew<double>(NETS);

    const int threads = 256;
    LAUNCH(kcl_residual, (DEVS + threads - 1) / threads, threads, ddn, dgn, dsn, dgds, dgm, dieq, dv, fbad, DEVS);
    int sms = 0, per_sm = 0;
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kcl_residual_rail_sums, threads, 0));
    LAUNCH(kcl_residual_rail_sums, sms * per_sm, threads, ddn, dgn, dsn, dgds, dgm, dieq, dv, ffix, DEVS);
    CK(cudaDeviceSynchronize());
    std::vector<double> b = hcopy(fbad, NETS), x = hcopy(ffix, NETS);
    std::vector<float> bad(NETS), fix(NETS);
    for (int k = 0; k < NETS; ++k) { bad[k] = (float)b[k]; fix[k] = (float)x[k]; }
    return verdict("143-cmos-kcl-rail-currents-f64", bad, fix, 1e-5);
}
