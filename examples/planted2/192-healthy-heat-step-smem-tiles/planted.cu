// 192-healthy-heat-step-smem-tiles. Healthy: one explicit step of the 2D heat equation (5-point Laplacian, replicated
// edges) on an 8192 x 8192 float grid (256 MB in, 256 MB out) with shared-memory tiles. A block of 256 threads owns a
// 256-column strip 32 rows tall and walks it in two 16-row tiles: it issues the next tile's 18 rows (with the rows
// above and below) as float4 loads and its two halo columns as scalars, all in flight at once, __syncthreads (the
// previous tile's readers are done), stores them into an [18][264] tile, __syncthreads, and then each thread walks
// one column down the tile with the rows above and below in registers and its left and right neighbours from shared
// memory, storing one output a row (a warp writes 128 contiguous bytes). Each input is loaded once from DRAM (the
// halo rows come from L2) and used by five outputs; 6 FLOPs per 8 bytes is far below any compute roof, so the time
// goes to DRAM, expected at the roof, about 175-195 us.
// Challenger: 128-column tiles of 16 rows (128 threads), the same code with twice the halo per output.
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

#define GW 8192
#define GH 8192

// Block: TW threads, a TW-column strip of TPB tiles of TH rows. Shared tile row rho holds grid row y0 + rho - 1,
// columns x0 - 1 .. x0 + TW at indices 3 .. TW + 4 (the interior starts at 4, 16-byte aligned).
template <int TW, int TH, int TPB>
__device__ __forceinline__ void heat_strip(const float* __restrict__ u, float* __restrict__ v, float k)
{
    constexpr int Q = TW / 4, RPP = TW / Q, NP = (TH + 2 + RPP - 1) / RPP;  // float4 a row, rows a pass, passes
    __shared__ __align__(16) float s[TH + 2][TW + 8];
    const int t = threadIdx.x, qc = t % Q, qr = t / Q;
    const int x0 = blockIdx.x * TW;
    const bool halo = t < 2 * (TH + 2);                               // threads loading the left and right columns
    const int hrow = t < TH + 2 ? t : t - (TH + 2);
    const int hcol = t < TH + 2 ? 3 : TW + 4;
    const int hx = t < TH + 2 ? max(x0 - 1, 0) : min(x0 + TW, GW - 1);
    for (int tile = 0; tile < TPB; ++tile) {
        const int y0 = (blockIdx.y * TPB + tile) * TH;
        float4 f[NP];
        float hv = 0.f;
#pragma unroll
        for (int i = 0; i < NP; ++i) {                                // every load of the tile in flight at once
            const int rho = qr + RPP * i;
            f[i] = make_float4(0.f, 0.f, 0.f, 0.f);
            if (rho < TH + 2) {
                const int gy = min(max(y0 + rho - 1, 0), GH - 1);
                f[i] = *reinterpret_cast<const float4*>(u + (size_t)gy * GW + x0 + 4 * qc);
            }
        }
        if (halo) hv = u[(size_t)min(max(y0 + hrow - 1, 0), GH - 1) * GW + hx];
        __syncthreads();                                              // the previous tile is no longer read
#pragma unroll
        for (int i = 0; i < NP; ++i) {
            const int rho = qr + RPP * i;
            if (rho < TH + 2) *reinterpret_cast<float4*>(&s[rho][4 + 4 * qc]) = f[i];
        }
        if (halo) s[hrow][hcol] = hv;
        __syncthreads();                                              // the tile and its halo are in place
        float up = s[0][4 + t], mid = s[1][4 + t];
#pragma unroll 4
        for (int r = 0; r < TH; ++r) {
            const float dn = s[r + 2][4 + t];
            const float lap = (up + dn) + (s[r + 1][3 + t] + s[r + 1][5 + t]) - 4.f * mid;
            v[(size_t)(y0 + r) * GW + x0 + t] = mid + k * lap;
            up = mid; mid = dn;
        }
    }
}

extern "C" __global__ void __launch_bounds__(256) heat_step_tile256(const float* __restrict__ u, float* __restrict__ v, float k)
{
    heat_strip<256, 16, 2>(u, v, k);
}

extern "C" __global__ void __launch_bounds__(128) heat_step_tile128(const float* __restrict__ u, float* __restrict__ v, float k)
{
    heat_strip<128, 16, 2>(u, v, k);
}

int main()
{
    const size_t n = (size_t)GW * GH;                                 // 64M floats, 256 MB
    const float k = 0.2f;                                             // alpha * dt / dx^2, stable below 0.25
    std::vector<float> hu(n);
    for (int y = 0; y < GH; ++y)                                      // a smooth temperature field with noise
        for (int x = 0; x < GW; ++x)
            hu[(size_t)y * GW + x] = 20.f + 0.004f * x + 0.002f * y + 5.f * frand();
    float* du = dcopy(hu);
    float* dv = dnew<float>(n);

    LAUNCH(heat_step_tile256, dim3(GW / 256, GH / 32), 256, du, dv, k);
    CK(cudaDeviceSynchronize());
    std::vector<float> tested = hcopy(dv, n);
    CK(cudaMemset(dv, 0, n * sizeof(float)));
    LAUNCH(heat_step_tile128, dim3(GW / 128, GH / 32), 128, du, dv, k);
    CK(cudaDeviceSynchronize());
    std::vector<float> chall = hcopy(dv, n);

    std::vector<float> ref(n);
    for (int y = 0; y < GH; ++y) {
        const float* c = &hu[(size_t)y * GW];
        const float* a = &hu[(size_t)std::max(y - 1, 0) * GW];
        const float* b = &hu[(size_t)std::min(y + 1, GH - 1) * GW];
        for (int x = 0; x < GW; ++x) {
            const float l = c[std::max(x - 1, 0)], r = c[std::min(x + 1, GW - 1)];
            ref[(size_t)y * GW + x] = c[x] + k * ((a[x] + b[x]) + (l + r) - 4.f * c[x]);
        }
    }
    int rc = verdict("192-healthy-heat-step-smem-tiles", tested, ref, 1e-5);
    rc |= verdict("192-healthy-heat-step-smem-tiles(challenger)", chall, ref, 1e-5);
    CK(cudaFree(du)); CK(cudaFree(dv));
    return rc;
}
