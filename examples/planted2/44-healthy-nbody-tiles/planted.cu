// 44-healthy-nbody-tiles. Healthy: an all-pairs gravitational N-body step, written as the CUDA samples
// teach it. 32768 bodies (float4: position and mass); each block stages 256 bodies at a time in shared
// memory, every thread reads them as broadcasts and accumulates its body's acceleration with FMAs and
// one rsqrtf per interaction. 32768 threads would not fill an H100, so the other bodies are split 16 ways
// over the grid (2048 blocks, about two waves) and the partial accelerations added with atomicAdd.
// Compute-bound on the FMA and special-function pipes by design: no warning is expected (the rsqrtf is
// the algorithm, not a slow path).
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
#define BODIES 32768u
#define TILE 256
#define EPS2 1e-4f
#define SPLIT 16             // the other bodies in 16 parts: 2048 blocks

extern "C" __global__ void __launch_bounds__(TILE) nbody_accel(const float4* __restrict__ pos, float* __restrict__ acc) {
    __shared__ float4 tile[TILE];
    unsigned i = (blockIdx.x / SPLIT) * TILE + threadIdx.x, part = blockIdx.x % SPLIT;
    float4 me = pos[i];
    float ax = 0.0f, ay = 0.0f, az = 0.0f;
    for (unsigned t = part * (BODIES / SPLIT); t < (part + 1) * (BODIES / SPLIT); t += TILE) {
        tile[threadIdx.x] = pos[t + threadIdx.x];
        __syncthreads();
#pragma unroll 8
        for (int j = 0; j < TILE; ++j) {
            float4 o = tile[j];
            float dx = o.x - me.x, dy = o.y - me.y, dz = o.z - me.z;
            float inv = rsqrtf(fmaf(dx, dx, fmaf(dy, dy, fmaf(dz, dz, EPS2))));
            float s = o.w * inv * inv * inv;
            ax = fmaf(dx, s, ax); ay = fmaf(dy, s, ay); az = fmaf(dz, s, az);
        }
        __syncthreads();
    }
    atomicAdd(&acc[3 * i], ax);
    atomicAdd(&acc[3 * i + 1], ay);
    atomicAdd(&acc[3 * i + 2], az);
}

int main() {
    (void)verdict;  // the suite's element-wise check; this case compares acceleration vectors instead
    std::vector<float4> hp(BODIES);
    for (auto& p : hp) p = make_float4(frand(), frand(), frand(), 0.5f + frand());
    float4* dp = dcopy(hp);
    float* da = dnew<float>(3 * BODIES);
    LAUNCH(nbody_accel, BODIES / TILE * SPLIT, TILE, dp, da);
    CK(cudaDeviceSynchronize());
    std::vector<float> ha = hcopy(da, 3 * BODIES);
    // a CPU reference (double) for every 128th body, compared as vectors: |a_gpu - a_ref| / |a_ref|
    double worst = 0;
    for (unsigned i = 0; i < BODIES; i += 128) {
        double ax = 0, ay = 0, az = 0;
        for (unsigned j = 0; j < BODIES; ++j) {
            double dx = hp[j].x - hp[i].x, dy = hp[j].y - hp[i].y, dz = hp[j].z - hp[i].z;
            double inv = 1.0 / sqrt(dx * dx + dy * dy + dz * dz + EPS2);
            double s = hp[j].w * inv * inv * inv;
            ax += dx * s; ay += dy * s; az += dz * s;
        }
        double ex = ha[3 * i] - ax, ey = ha[3 * i + 1] - ay, ez = ha[3 * i + 2] - az;
        double e = sqrt(ex * ex + ey * ey + ez * ez) / (sqrt(ax * ax + ay * ay + az * az) + 1e-6);
        if (!(e <= worst)) worst = e;  // NaN counts as the worst
    }
    bool ok = worst <= 1e-2;
    printf("%s 44-healthy-nbody-tiles max_rel_err=%.3g\n", ok ? "ok" : "MISMATCH", worst);
    return ok ? 0 : 1;
}
