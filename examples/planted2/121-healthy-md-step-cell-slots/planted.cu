// 121-healthy-md-step-cell-slots. Healthy: a fused MD step whose atomics rarely meet: one int atomicAdd per particle
// into a 2M-cell count table, and one double atomicAdd per block for the kinetic energy (summed in the block first).
// 8M particles (float4 position, velocity with mass, force: 48 bytes read, 40 written) take a leapfrog kick and drift
// in a periodic 128^3 box of unit cells, and each takes its slot in its cell (the first pass of a cell-list counting
// sort) from the atomicAdd's old value. A liquid is uniform and the particles are in no order, so about 4 particles
// share a cell and their atomics rarely meet; 88 bytes move per atomic and the kernel runs at the DRAM roof.
// Challenger: persistent blocks with warp-aggregated slots (__match_any_sync); expected the same speed, the
// aggregation finding nothing to merge.
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
#define NP (1 << 23)               // particles
#define NC 128                     // cells per side, unit cells, box 128^3
#define BOX 128.0f
#define FULL 0xffffffffu

// leapfrog kick and drift, periodic wrap, cell index: the same code for both kernels
__device__ __forceinline__ int advance(float4& p, float4& v, float4 f, float dt) {
    float s = dt / v.w;                                             // v.w: mass
    v.x += f.x * s; v.y += f.y * s; v.z += f.z * s;
    p.x += v.x * dt; p.y += v.y * dt; p.z += v.z * dt;
    p.x -= BOX * floorf(p.x * (1.0f / BOX)); p.y -= BOX * floorf(p.y * (1.0f / BOX)); p.z -= BOX * floorf(p.z * (1.0f / BOX));
    int cx = min((int)p.x, NC - 1), cy = min((int)p.y, NC - 1), cz = min((int)p.z, NC - 1);
    return (cz * NC + cy) * NC + cx;
}

__device__ __forceinline__ float block_sum(float x) {             // blockDim.x == 256
    __shared__ float part[8];
#pragma unroll
    for (int d = 16; d > 0; d >>= 1) x += __shfl_xor_sync(FULL, x, d);
    if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = x;
    __syncthreads();
    float s = 0;
    if (threadIdx.x < 32) {
        s = threadIdx.x < 8 ? part[threadIdx.x] : 0.f;
#pragma unroll
        for (int d = 4; d > 0; d >>= 1) s += __shfl_xor_sync(FULL, s, d);
    }
    return s;                                                       // valid in thread 0
}

extern "C" __global__ void nve_step_bin(float4* __restrict__ pos, float4* __restrict__ vel, const float4* __restrict__ force,
                                        int* __restrict__ cell_of, int* __restrict__ slot_of, int* __restrict__ cell_count,
                                        double* __restrict__ kinetic, int n, float dt) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float ke = 0.f;
    if (i < n) {
        float4 p = pos[i], v = vel[i], f = force[i];
        int c = advance(p, v, f, dt);
        pos[i] = p; vel[i] = v; cell_of[i] = c;
        slot_of[i] = atomicAdd(&cell_count[c], 1);
        ke = 0.5f * v.w * (v.x * v.x + v.y * v.y + v.z * v.z);
    }
    float s = block_sum(ke);
    if (threadIdx.x == 0) atomicAdd(kinetic, (double)s);           // the run's total, in double
}

extern "C" __global__ void nve_step_bin_aggregated(float4* __restrict__ pos, float4* __restrict__ vel, const float4* __restrict__ force,
                                                   int* __restrict__ cell_of, int* __restrict__ slot_of, int* __restrict__ cell_count,
                                                   double* __restrict__ kinetic, int n, float dt) {
    float ke = 0.f;
    unsigned lane = threadIdx.x & 31;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {   // n: whole warps
        float4 p = pos[i], v = vel[i], f = force[i];
        int c = advance(p, v, f, dt);
        pos[i] = p; vel[i] = v; cell_of[i] = c;
        unsigned peers = __match_any_sync(FULL, c);
        int leader = __ffs(peers) - 1, base = 0;
        if ((int)lane == leader) base = atomicAdd(&cell_count[c], __popc(peers));
        base = __shfl_sync(FULL, base, leader);
        slot_of[i] = base + __popc(peers & ((1u << lane) - 1));
        ke += 0.5f * v.w * (v.x * v.x + v.y * v.y + v.z * v.z);
    }
    float s = block_sum(ke);
    if (threadIdx.x == 0) atomicAdd(kinetic, (double)s);           // the run's total, in double
}

// every cell's slots are 0..count-1, each taken once
static bool slots_valid(const std::vector<int>& cell, const std::vector<int>& slot, const std::vector<int>& count) {
    std::vector<int> start(count.size() + 1, 0);
    for (size_t c = 0; c < count.size(); ++c) start[c + 1] = start[c] + count[c];
    if (start.back() != (int)cell.size()) return false;
    std::vector<char> seen(cell.size(), 0);
    for (size_t i = 0; i < cell.size(); ++i) {
        int c = cell[i], s = slot[i];
        if (c < 0 || c >= (int)count.size() || s < 0 || s >= count[c] || seen[start[c] + s]) return false;
        seen[start[c] + s] = 1;
    }
    return true;
}

int main() {
    const int n = NP;
    const float dt = 0.005f;
    std::vector<float4> hp(n), hv(n), hf(n);
    for (int i = 0; i < n; ++i) {                                   // uniform liquid, particles in no order
        hp[i] = make_float4(frand() * BOX, frand() * BOX, frand() * BOX, (float)(urand() >> 30));
        float m = 1.0f + (urand() >> 31);                           // two species, masses 1 and 2
        hv[i] = make_float4(2.f * frand() - 1.f, 2.f * frand() - 1.f, 2.f * frand() - 1.f, m);
        hf[i] = make_float4(40.f * frand() - 20.f, 40.f * frand() - 20.f, 40.f * frand() - 20.f, 0.f);
    }
    float4 *dp = dcopy(hp), *dv = dcopy(hv), *df = dcopy(hf);
    int *dcell = dnew<int>(n), *dslot = dnew<int>(n), *dcount = dnew<int>(NC * NC * NC);
    double* dke = dnew<double>(1);
    LAUNCH(nve_step_bin, n / 256, 256, dp, dv, df, dcell, dslot, dcount, dke, n, dt);
    CK(cudaDeviceSynchronize());
    std::vector<float4> p1 = hcopy(dp, n), v1 = hcopy(dv, n);
    std::vector<int> c1 = hcopy(dcell, n), s1 = hcopy(dslot, n), k1 = hcopy(dcount, NC * NC * NC);
    double ke1 = hcopy(dke, 1)[0];
    // the challenger steps the same initial state (restored by copies)
    CK(cudaMemcpy(dp, hp.data(), n * sizeof(float4), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dv, hv.data(), n * sizeof(float4), cudaMemcpyHostToDevice));
    CK(cudaMemset(dcount, 0, NC * NC * NC * sizeof(int)));
    CK(cudaMemset(dke, 0, sizeof(double)));
    int per_sm = 0, sms = 0;                                        // persistent: every block resident at once
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, nve_step_bin_aggregated, 256, 0));
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    LAUNCH(nve_step_bin_aggregated, per_sm * sms, 256, dp, dv, df, dcell, dslot, dcount, dke, n, dt);
    CK(cudaDeviceSynchronize());
    std::vector<float4> p2 = hcopy(dp, n), v2 = hcopy(dv, n);
    std::vector<int> c2 = hcopy(dcell, n), s2 = hcopy(dslot, n), k2 = hcopy(dcount, NC * NC * NC);
    double ke2 = hcopy(dke, 1)[0];
    bool ok1 = slots_valid(c1, s1, k1), ok2 = slots_valid(c2, s2, k2);
    // compared: positions, velocities, cells, counts, kinetic energy; a kernel with invalid slots is all NaN
    std::vector<float> a, b;
    for (int i = 0; i < n; ++i) {
        a.insert(a.end(), {p1[i].x, p1[i].y, p1[i].z, v1[i].x, v1[i].y, v1[i].z, (float)c1[i]});
        b.insert(b.end(), {p2[i].x, p2[i].y, p2[i].z, v2[i].x, v2[i].y, v2[i].z, (float)c2[i]});
    }
    for (int c = 0; c < NC * NC * NC; ++c) { a.push_back((float)k1[c]); b.push_back((float)k2[c]); }
    a.push_back((float)(ke1 * 1e-6)); b.push_back((float)(ke2 * 1e-6));
    if (!ok1) for (auto& x : a) x = NAN;
    if (!ok2) for (auto& x : b) x = NAN;
    return verdict("121-healthy-md-step-cell-slots", a, b, 1e-5);
}
