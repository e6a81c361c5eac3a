// 01-aos-particles. Planted: uncoalesced global access. Particles are stored as an array of 32-byte
// structs and the position update reads only x and vx: each lane of a warp touches its own 32-byte
// sector, so a warp request moves 32 sectors for 128 useful bytes (and the store likewise).
// Fixed twin: the same update over structure-of-arrays x[] and vx[], four particles per thread.
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
#define N (8u << 20)   // 8M particles: 256 MB as structs, 32 MB per SoA field
#define THREADS 256

struct Particle { float x, y, z, vx, vy, vz, m, q; };

extern "C" __global__ void advance_aos(Particle* p, float dt) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < N) p[i].x += p[i].vx * dt;  // PLANTED
}

extern "C" __global__ void advance_soa(float4* __restrict__ x, const float4* __restrict__ vx, float dt) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < N / 4) {
        float4 a = x[i], v = vx[i];
        a.x += v.x * dt; a.y += v.y * dt; a.z += v.z * dt; a.w += v.w * dt;
        x[i] = a;
    }
}

int main() {
    std::vector<Particle> hp(N);
    std::vector<float> hx(N), hv(N);
    for (unsigned i = 0; i < N; ++i) {
        hp[i] = Particle{frand(), frand(), frand(), frand() - 0.5f, frand() - 0.5f, frand() - 0.5f, 1.0f, 0.0f};
        hx[i] = hp[i].x; hv[i] = hp[i].vx;
    }
    Particle* dp = dcopy(hp);
    float* dx = dcopy(hx);
    float* dv = dcopy(hv);
    LAUNCH(advance_aos, N / THREADS, THREADS, dp, 0.01f);
    LAUNCH(advance_soa, N / 4 / THREADS, THREADS, (float4*)dx, (const float4*)dv, 0.01f);
    CK(cudaDeviceSynchronize());
    std::vector<Particle> rp = hcopy(dp, N);
    std::vector<float> bad(N), fixed = hcopy(dx, N);
    for (unsigned i = 0; i < N; ++i) bad[i] = rp[i].x;
    return verdict("01-aos-particles", bad, fixed, 0.0);
}
