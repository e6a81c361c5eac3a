// 153-rve-macro-strain-residual. Planted: every element adds into the same three FP64 entries with atomicAdd.
// One residual evaluation of a periodic RVE in computational homogenization (plane strain, 512x512 quads of
// linear triangles, 524K elements, two phases): u = E.x + a periodic fluctuation, the macro strain E = (Exx,
// Eyy, Gxy) being three extra DOFs at the end of the vector. As generic assembly code does, each element's
// location row (LM) lists its 9 DOFs, 6 nodal and the 3 macro ones; the kernel gathers them, computes the
// strain and stress, and scatters the 9 residual entries with FP64 atomicAdd. The macro entries receive one
// update from every element (1.57M in all, a third of the updates), all in one 32-byte sector: one L2 slice
// applies them one after another while the nodal entries (about 6 updates each) cost next to nothing.
// Fixed twin: the same element loop and nodal atomics; the macro contributions are summed per block (warp
// shuffles, then shared memory) and added once per block: 2048 blocks x 3 atomics instead of 1.57M.
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

#define TPB 256
static const int NX = 512, NY = 512;  // periodic grid of quads, two triangles each

struct Phases { double lam0, mu0, lam1, mu1; };  // matrix and fibre (plane-strain Lame constants)

// Residual of one linear triangle: ue = its 9 DOF values (x,y of 3 nodes, then Exx, Eyy, Gxy);
// re = A B^T sigma at the nodes and A sigma for the macro strain.
__device__ __forceinline__ void cst_residual(int e, int ne, const double* __restrict__ geo,
                                             const unsigned char* __restrict__ mat, Phases ph,
                                             const double ue[9], double re[9]) {
    double b0 = geo[0 * (size_t)ne + e], b1 = geo[1 * (size_t)ne + e], b2 = geo[2 * (size_t)ne + e];
    double c0 = geo[3 * (size_t)ne + e], c1 = geo[4 * (size_t)ne + e], c2 = geo[5 * (size_t)ne + e];
    double A = geo[6 * (size_t)ne + e];
    bool fibre = mat[e] != 0;
    double lam = fibre ? ph.lam1 : ph.lam0, mu = fibre ? ph.mu1 : ph.mu0;
    double exx = b0 * ue[0] + b1 * ue[2] + b2 * ue[4] + ue[6];
    double eyy = c0 * ue[1] + c1 * ue[3] + c2 * ue[5] + ue[7];
    double gxy = c0 * ue[0] + b0 * ue[1] + c1 * ue[2] + b1 * ue[3] + c2 * ue[4] + b2 * ue[5] + ue[8];
    double sxx = A * ((lam + 2 * mu) * exx + lam * eyy);
    double syy = A * (lam * exx + (lam + 2 * mu) * eyy);
    double sxy = A * mu * gxy;
    re[0] = b0 * sxx + c0 * sxy; re[1] = c0 * syy + b0 * sxy;
    re[2] = b1 * sxx + c1 * sxy; re[3] = c1 * syy + b1 * sxy;
    re[4] = b2 * sxx + c2 * sxy; re[5] = c2 * syy + b2 * sxy;
    re[6] = sxx; re[7] = syy; re[8] = sxy;
}

// Generic element assembly: gather through LM, scatter every entry with an atomic.
extern "C" __global__ void rve_residual(int ne, const int* __restrict__ lm, const double* __restrict__ geo,
                                        const unsigned char* __restrict__ mat, const double* __restrict__ u,
                                        double* r, Phases ph) {
    int e = blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= ne) return;
    int dof[9];
    double ue[9], re[9];
#pragma unroll
    for (int k = 0; k < 9; ++k) { dof[k] = lm[(size_t)k * ne + e]; ue[k] = u[dof[k]]; }
    cst_residual(e, ne, geo, mat, ph, ue, re);
#pragma unroll
    for (int k = 0; k < 9; ++k) atomicAdd(&r[dof[k]], re[k]);  // PLANTED
}

// Twin: nodal entries as before; the macro entries (DOFs nmac..nmac+2, shared by every element) summed per block.
extern "C" __global__ void rve_residual_macro_blocksum(int ne, int nmac, const int* __restrict__ lm,
                                                       const double* __restrict__ geo,
                                                       const unsigned char* __restrict__ mat,
                                                       const double* __restrict__ u, double* r, Phases ph) {
    __shared__ double part[3][TPB / 32];
    int e = blockIdx.x * blockDim.x + threadIdx.x;
    double m0 = 0, m1 = 0, m2 = 0;
    if (e < ne) {
        int dof[6];
        double ue[9], re[9];
#pragma unroll
        for (int k = 0; k < 6; ++k) { dof[k] = lm[(size_t)k * ne + e]; ue[k] = u[dof[k]]; }
        ue[6] = u[nmac]; ue[7] = u[nmac + 1]; ue[8] = u[nmac + 2];
        cst_residual(e, ne, geo, mat, ph, ue, re);
#pragma unroll
        for (int k = 0; k < 6; ++k) atomicAdd(&r[dof[k]], re[k]);
        m0 = re[6]; m1 = re[7]; m2 = re[8];
    }
    for (int o = 16; o > 0; o >>= 1) {
        m0 += __shfl_down_sync(0xffffffffu, m0, o);
        m1 += __shfl_down_sync(0xffffffffu, m1, o);
        m2 += __shfl_down_sync(0xffffffffu, m2, o);
    }
    int w = threadIdx.x >> 5, l = threadIdx.x & 31;
    if (l == 0) { part[0][w] = m0; part[1][w] = m1; part[2][w] = m2; }
    __syncthreads();
    if (w == 0) {
        m0 = l < TPB / 32 ? part[0][l] : 0.0;
        m1 = l < TPB / 32 ? part[1][l] : 0.0;
        m2 = l < TPB / 32 ? part[2][l] : 0.0;
        for (int o = TPB / 64; o > 0; o >>= 1) {
            m0 += __shfl_down_sync(0xffffffffu, m0, o);
            m1 += __shfl_down_sync(0xffffffffu, m1, o);
            m2 += __shfl_down_sync(0xffffffffu, m2, o);
        }
        if (l == 0) { atomicAdd(&r[nmac], m0); atomicAdd(&r[nmac + 1], m1); atomicAdd(&r[nmac + 2], m2); }
    }
}

int main() {
    const int nn = NX * NY, ne = 2 * nn, nmac = 2 * nn, ndof = nmac + 3;
    std::vector<float> jx(nn), jy(nn);  // node jitter (periodic)
    for (int n = 0; n < nn; ++n) { jx[n] = 0.25f * (frand() - 0.5f); jy[n] = 0.25f * (frand() - 0.5f); }
    auto node = [&](int i, int j) { return (j % NY) * NX + (i % NX); };
    std::vector<int> lm((size_t)9 * ne);
    std::vector<double> geo((size_t)7 * ne);
    std::vector<unsigned char> mat(ne);
    for (int t = 0; t < 2; ++t)
        for (int j = 0; j < NY; ++j)
            for (int i = 0; i < NX; ++i) {
                int e = t * nn + j * NX + i;  // all lower triangles, then all upper ones
                int ci[3][2] = {{i, j}, {i + 1, j}, {i + 1, j + 1}};
                if (t) { ci[1][0] = i + 1; ci[1][1] = j + 1; ci[2][0] = i; ci[2][1] = j + 1; }
                double x[3], y[3];
                for (int a = 0; a < 3; ++a) {
                    int n = node(ci[a][0], ci[a][1]);
                    x[a] = ci[a][0] + jx[n]; y[a] = ci[a][1] + jy[n];
                    lm[(size_t)(2 * a) * ne + e] = 2 * n; lm[(size_t)(2 * a + 1) * ne + e] = 2 * n + 1;
                }
                for (int c = 0; c < 3; ++c) lm[(size_t)(6 + c) * ne + e] = nmac + c;
                double A2 = (x[1] - x[0]) * (y[2] - y[0]) - (x[2] - x[0]) * (y[1] - y[0]);
                double g[7] = {(y[1] - y[2]) / A2, (y[2] - y[0]) / A2, (y[0] - y[1]) / A2,
                               (x[2] - x[1]) / A2, (x[0] - x[2]) / A2, (x[1] - x[0]) / A2, 0.5 * A2};
                for (int k = 0; k < 7; ++k) geo[(size_t)k * ne + e] = g[k];
                double xc = (x[0] + x[1] + x[2]) / 3, yc = (y[0] + y[1] + y[2]) / 3;
                double dx = fmod(xc, 64.0) - 32, dy = fmod(yc + 32, 64.0) - 32;  // fibres on a 64-cell lattice
                mat[e] = dx * dx + dy * dy < 18.0 * 18.0;
            }
    std::vector<double> u(ndof);
    for (int k = 0; k < nmac; ++k) u[k] = 0.02 * (frand() - 0.5);
    u[nmac] = 0.01; u[nmac + 1] = -0.004; u[nmac + 2] = 0.006;  // prescribed macro strain
    Phases ph = {3.0, 1.5, 40.0, 25.0};

    int* d_lm = dcopy(lm);
    double* d_geo = dcopy(geo);
    unsigned char* d_mat = dcopy(mat);
    double* d_u = dcopy(u);
    double* d_r0 = dnew<double>(ndof + 1);  // +1: the macro sector's fourth slot
    double* d_r1 = dnew<double>(ndof + 1);
    int blocks = (ne + TPB - 1) / TPB;
    LAUNCH(rve_residual, blocks, TPB, ne, d_lm, d_geo, d_mat, d_u, d_r0, ph);
    LAUNCH(rve_residual_macro_blocksum, blocks, TPB, ne, nmac, d_lm, d_geo, d_mat, d_u, d_r1, ph);
    CK(cudaDeviceSynchronize());
    std::vector<double> r0 = hcopy(d_r0, ndof), r1 = hcopy(d_r1, ndof);
    std::vector<float> a(r0.begin(), r0.end()), b(r1.begin(), r1.end());
    printf("macro residual (A*sigma summed): %.6g %.6g %.6g\n", r1[nmac], r1[nmac + 1], r1[nmac + 2]);
    return verdict("153-rve-macro-strain-residual", a, b, 1e-5);
}
