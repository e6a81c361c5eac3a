// 172-healthy-dsmc-cell-energy-sorted. Healthy: sampling step of a 2D DSMC flow solver (hypersonic flow past a
// cylinder, 2048x1024 cells): 24M simulator particles, kept sorted by cell for the collision step, add their
// kinetic energy 0.5 m v^2 (species mass from a 4-entry table passed by value) into a float sum per cell. Each
// thread reads 4 consecutive particles with four 16-byte loads (cell ids, vx, vy, vz) and one 4-byte load of
// species (68 bytes), sums the runs of equal cells in registers, and the warp joins the runs that cross lanes
// with a 5-step segmented shuffle scan: one atomicAdd per cell segment (about 12 per 128 particles, one lane per
// address per instruction), on targets spread evenly over 2M cells. About 410 MB are streamed once: the kernel
// should run at the DRAM roof.
// Challenger: one particle per thread with scalar loads and the same segmented scan (more instructions, the same
// bytes and about the same number of atomics).
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

#define NX 2048
#define NY 1024
#define NCELL (NX * NY)

__host__ __device__ inline float kin(float m, float vx, float vy, float vz) { return 0.5f * m * (vx * vx + vy * vy + vz * vz); }
__device__ __forceinline__ float mass_of(float4 m, int s) { return s == 0 ? m.x : (s == 1 ? m.y : (s == 2 ? m.z : m.w)); }

// Inclusive segmented sum over the lanes of a warp, keys ascending: lanes with the same key form one segment.
__device__ __forceinline__ float segmented_scan(float v, int key, int lane)
{
#pragma unroll
    for (int d = 1; d < 32; d <<= 1) {
        float up = __shfl_up_sync(0xffffffffu, v, d);
        int kup = __shfl_up_sync(0xffffffffu, key, d);
        if (lane >= d && kup == key) v += up;
    }
    return v;
}

extern "C" __global__ void sample_cell_energy(const int4* __restrict__ cell4, const float4* __restrict__ vx4,
                                              const float4* __restrict__ vy4, const float4* __restrict__ vz4,
                                              const uchar4* __restrict__ sp4, float4 mass, float* esum, int nq)
{
    int q = blockIdx.x * blockDim.x + threadIdx.x;        // nq is a multiple of 32: whole warps in or out
    if (q >= nq) return;
    const int lane = threadIdx.x & 31;
    int4 c = cell4[q]; float4 x = vx4[q], y = vy4[q], z = vz4[q]; uchar4 s = sp4[q];
    float e0 = kin(mass_of(mass, s.x), x.x, y.x, z.x), e1 = kin(mass_of(mass, s.y), x.y, y.y, z.y);
    float e2 = kin(mass_of(mass, s.z), x.z, y.z, z.z), e3 = kin(mass_of(mass, s.w), x.w, y.w, z.w);
    const int first = c.x, last = c.w;
    float head = 0.0f, tail;
    if (first == last) tail = (e0 + e1) + (e2 + e3);
    else {
        head = e0 + (c.y == first ? e1 : 0.0f) + (c.z == first ? e2 : 0.0f);
        tail = e3 + (c.z == last ? e2 : 0.0f) + (c.y == last ? e1 : 0.0f);
        bool yi = c.y != first && c.y != last, zi = c.z != first && c.z != last;   // cells inside the quad
        if (yi) atomicAdd(&esum[c.y], e1 + (zi && c.z == c.y ? e2 : 0.0f));
        if (zi && c.z != c.y) atomicAdd(&esum[c.z], e2);
    }
    float v = segmented_scan(tail, last, lane);           // tails (whole quads) joined across lanes
    float pv = __shfl_up_sync(0xffffffffu, v, 1);
    int pk = __shfl_up_sync(0xffffffffu, last, 1), nf = __shfl_down_sync(0xffffffffu, first, 1);
    if (first != last) atomicAdd(&esum[first], head + (lane > 0 && pk == first ? pv : 0.0f));
    if (lane == 31 || nf != last) atomicAdd(&esum[last], v);
}

extern "C" __global__ void sample_cell_energy_scan(const int* __restrict__ cell, const float* __restrict__ vx,
                                                   const float* __restrict__ vy, const float* __restrict__ vz,
                                                   const unsigned char* __restrict__ sp, float4 mass, float* esum, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;        // n is a multiple of 32
    if (i >= n) return;
    const int lane = threadIdx.x & 31;
    int c = cell[i];
    float v = segmented_scan(kin(mass_of(mass, sp[i]), vx[i], vy[i], vz[i]), c, lane);
    int nc = __shfl_down_sync(0xffffffffu, c, 1);
    if (lane == 31 || nc != c) atomicAdd(&esum[c], v);
}

static float gauss() { return (frand() + frand() + frand() + frand() - 2.0f) * 1.7320508f; }

static void make_particles(std::vector<int>& cell, std::vector<float>& vx, std::vector<float>& vy,
                           std::vector<float>& vz, std::vector<unsigned char>& sp)
{
    for (int c = 0; c < NCELL; ++c) {                    // cells in order: the particles come out sorted
        float dx = (float)(c % NX) - 600.0f, dy = (float)(c / NX) - 512.0f, r = sqrtf(dx * dx + dy * dy);
        float mean = r < 80.0f ? 0.0f : (dx < 0.0f && r < 130.0f ? 28.0f                      // body, shock layer
                   : (dx > 0.0f && fabsf(dy) < 80.0f + 0.1f * dx ? 6.0f : 13.0f));             // wake, free stream
        float sig = mean == 28.0f ? 0.9f : 0.35f, ux = mean == 28.0f ? 0.3f : 1.6f;            // km/s
        int k = (int)(mean * (0.5f + frand()) + frand());
        for (int j = 0; j < k; ++j) {
            cell.push_back(c); vx.push_back(ux + sig * gauss()); vy.push_back(sig * gauss());
            vz.push_back(sig * gauss()); sp.push_back((unsigned char)(urand() >> 30));
        }
    }
    size_t n = cell.size() & ~(size_t)127;                // whole quads and whole warps
    cell.resize(n); vx.resize(n); vy.resize(n); vz.resize(n); sp.resize(n);
}

int main()
{
    std::vector<int> cell; std::vector<float> vx, vy, vz; std::vector<unsigned char> sp;
    make_particles(cell, vx, vy, vz, sp);
    const int n = (int)cell.size(), nq = n / 4;
    const float m[4] = {1.0f, 1.1428571f, 1.0714286f, 0.5714286f};                            // N2, O2, NO, O
    const float4 mass = make_float4(m[0], m[1], m[2], m[3]);
    std::vector<double> ref(NCELL, 0.0);                                                        // host reference
    for (int i = 0; i < n; ++i) ref[cell[i]] += kin(m[sp[i]], vx[i], vy[i], vz[i]);

    int* d_cell = dcopy(cell); float* d_vx = dcopy(vx); float* d_vy = dcopy(vy); float* d_vz = dcopy(vz);
    unsigned char* d_sp = dcopy(sp);
    float* d_e = dnew<float>(NCELL); float* d_c = dnew<float>(NCELL);
    LAUNCH(sample_cell_energy, (nq + 255) / 256, 256, (const int4*)d_cell, (const float4*)d_vx, (const float4*)d_vy,
           (const float4*)d_vz, (const uchar4*)d_sp, mass, d_e, nq);
    LAUNCH(sample_cell_energy_scan, (n + 255) / 256, 256, d_cell, d_vx, d_vy, d_vz, d_sp, mass, d_c, n);
    CK(cudaDeviceSynchronize());

    std::vector<float> he = hcopy(d_e, NCELL), hc = hcopy(d_c, NCELL), hr(ref.begin(), ref.end());
    printf("particles %d, quads %d\n", n, nq);
    int rc = verdict("172-healthy-dsmc-cell-energy-sorted", he, hr, 1e-4);
    rc |= verdict("172-healthy-dsmc-cell-energy-sorted/challenger", hc, hr, 1e-4);
    return rc;
}
