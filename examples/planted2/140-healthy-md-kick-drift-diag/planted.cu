// 140-healthy-md-kick-drift-diag. Healthy: the kick-drift step of a molecular-dynamics integrator with its
// diagnostics. 6.3M particles in HOOMD-style float4s (position + type, velocity + mass, acceleration): each is
// kicked, drifted and wrapped into the periodic box, and the step's kinetic energy, momentum and largest v^2
// (for the time-step control) are summed per thread, reduced per block with shuffles and added with one atomic
// per block and quantity, in a grid-stride loop over one full wave of blocks. 80 bytes a particle stream
// through DRAM (503 MB); the atomics are a few thousand in all.
// Challenger: the same step one particle a thread (24,576 blocks), each block adding its partial sums.
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
#define NP (6 * 1024 * 1024)
#define THREADS 256
#define FULL 0xffffffffu

struct Diag { float ke, px, py, pz; unsigned v2max; unsigned pad[3]; };

__device__ __forceinline__ void kick_drift(float4& p, float4& v, float4 a, float dt, float box, float inv_box) {
    v.x += a.x * dt; v.y += a.y * dt; v.z += a.z * dt;
    p.x += v.x * dt; p.y += v.y * dt; p.z += v.z * dt;
    p.x -= box * floorf(p.x * inv_box); p.y -= box * floorf(p.y * inv_box); p.z -= box * floorf(p.z * inv_box);
}

// sums ke, px, py, pz and max v2 over the block; thread 0 adds them to d
__device__ __forceinline__ void block_diag(float s[5], Diag* d) {
    __shared__ float part[THREADS / 32][5];
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
#pragma unroll
        for (int k = 0; k < 4; ++k) s[k] += __shfl_xor_sync(FULL, s[k], o);
        s[4] = fmaxf(s[4], __shfl_xor_sync(FULL, s[4], o));
    }
    int w = threadIdx.x >> 5, l = threadIdx.x & 31;
    if (l == 0)
#pragma unroll
        for (int k = 0; k < 5; ++k) part[w][k] = s[k];
    __syncthreads();
    if (w == 0) {
#pragma unroll
        for (int k = 0; k < 5; ++k) s[k] = l < THREADS / 32 ? part[l][k] : 0.f;
#pragma unroll
        for (int o = 4; o > 0; o >>= 1) {
#pragma unroll
            for (int k = 0; k < 4; ++k) s[k] += __shfl_xor_sync(FULL, s[k], o);
            s[4] = fmaxf(s[4], __shfl_xor_sync(FULL, s[4], o));
        }
        if (l == 0) {
            atomicAdd(&d->ke, s[0]); atomicAdd(&d->px, s[1]); atomicAdd(&d->py, s[2]); atomicAdd(&d->pz, s[3]);
            atomicMax(&d->v2max, __float_as_uint(s[4]));   // v2 >= 0: its bits order like the floats
        }
    }
}

extern "C" __global__ void __launch_bounds__(THREADS)
kick_drift_diag(const float4* __restrict__ pos, const float4* __restrict__ vel, const float4* __restrict__ acc,
                float4* __restrict__ pos_out, float4* __restrict__ vel_out, Diag* __restrict__ diag,
                int n, float dt, float box) {
    const float inv_box = 1.0f / box;
    float s[5] = {0.f, 0.f, 0.f, 0.f, 0.f};
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        float4 p = pos[i], v = vel[i];
        kick_drift(p, v, acc[i], dt, box, inv_box);
        pos_out[i] = p; vel_out[i] = v;
        float v2 = v.x * v.x + v.y * v.y + v.z * v.z;
        s[0] += 0.5f * v.w * v2; s[1] += v.w * v.x; s[2] += v.w * v.y; s[3] += v.w * v.z; s[4] = fmaxf(s[4], v2);
    }
    block_diag(s, diag);
}

extern "C" __global__ void __launch_bounds__(THREADS)
kick_drift_diag_flat(const float4* __restrict__ pos, const float4* __restrict__ vel, const float4* __restrict__ acc,
                     float4* __restrict__ pos_out, float4* __restrict__ vel_out, Diag* __restrict__ diag,
                     int n, float dt, float box) {
    const float inv_box = 1.0f / box;
    float s[5] = {0.f, 0.f, 0.f, 0.f, 0.f};
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float4 p = pos[i], v = vel[i];
        kick_drift(p, v, acc[i], dt, box, inv_box);
        pos_out[i] = p; vel_out[i] = v;
        float v2 = v.x * v.x + v.y * v.y + v.z * v.z;
        s[0] = 0.5f * v.w * v2; s[1] = v.w * v.x; s[2] = v.w * v.y; s[3] = v.w * v.z; s[4] = v2;
    }
    block_diag(s, diag);
}

static float bits_to_float(unsigned u) { float f; memcpy(&f, &u, sizeof f); return f; }

int main() {
    const float box = 100.f, dt = 0.005f;
    std::vector<float4> hp(NP), hv(NP), ha(NP);
    for (int i = 0; i < NP; ++i) {
        hp[i] = make_float4(box * frand(), box * frand(), box * frand(), (float)(urand() >> 30));   // w: type
        float m = 1.f + (float)(urand() >> 31);                                                    // mass 1 or 2
        hv[i] = make_float4(0.5f + 2.f * (frand() - 0.5f), -0.2f + 2.f * (frand() - 0.5f), 0.3f + 2.f * (frand() - 0.5f), m);
        ha[i] = make_float4(20.f * (frand() - 0.5f), 20.f * (frand() - 0.5f), 20.f * (frand() - 0.5f), 0.f);
    }
    float4 *dp = dcopy(hp), *dv = dcopy(hv), *da = dcopy(ha);
    float4 *p1 = dnew<float4>(NP), *v1 = dnew<float4>(NP), *p2 = dnew<float4>(NP), *v2 = dnew<float4>(NP);
    Diag *d1 = dnew<Diag>(1), *d2 = dnew<Diag>(1);
    int sms = 0, per_sm = 0;
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kick_drift_diag, THREADS, 0));
    LAUNCH(kick_drift_diag, sms * per_sm, THREADS, dp, dv, da, p1, v1, d1, NP, dt, box);
    LAUNCH(kick_drift_diag_flat, NP / THREADS, THREADS, dp, dv, da, p2, v2, d2, NP, dt, box);
    CK(cudaDeviceSynchronize());
    std::vector<float4> hp1 = hcopy(p1, NP), hv1 = hcopy(v1, NP), hp2 = hcopy(p2, NP), hv2 = hcopy(v2, NP);
    std::vector<Diag> g1 = hcopy(d1, 1), g2 = hcopy(d2, 1);
    std::vector<float> a, b;
    a.reserve(8 * (size_t)NP + 5); b.reserve(8 * (size_t)NP + 5);
    a.insert(a.end(), {g1[0].ke, g1[0].px, g1[0].py, g1[0].pz, bits_to_float(g1[0].v2max)});
    b.insert(b.end(), {g2[0].ke, g2[0].px, g2[0].py, g2[0].pz, bits_to_float(g2[0].v2max)});
    for (int i = 0; i < NP; ++i) {
        a.insert(a.end(), {hp1[i].x, hp1[i].y, hp1[i].z, hp1[i].w, hv1[i].x, hv1[i].y, hv1[i].z, hv1[i].w});
        b.insert(b.end(), {hp2[i].x, hp2[i].y, hp2[i].z, hp2[i].w, hv2[i].x, hv2[i].y, hv2[i].z, hv2[i].w});
    }
    return verdict("140-healthy-md-kick-drift-diag", a, b, 1e-3);
}
