// 84-gp-interpreter-lanes. Planted: warp divergence. Fitness evaluation of a genetic-programming population: 8192
// programs of 32 accumulator instructions (8 opcodes) run on 8192 fitness cases, each thread one program on 256
// cases (8 at once, in registers). Thread t runs program t % 8192, so a warp's 32 lanes run 32 different programs:
// at every step the opcode switch sends the lanes to nearly all 8 cases, which the warp runs one after another
// with 4 lanes on average. The instructions are stored step-major so these per-lane loads coalesce.
// Fixed twin: the same evaluation code with thread t running program t / 32: a warp's lanes run one program on
// 32 groups of cases, every switch uniform; the same errors up to the order of the float atomics.
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
#define P 8192          // programs
#define L 32            // instructions a program
#define D 8192          // fitness cases
#define G 32            // case groups: a thread evaluates cases g, g + G, g + 2G, ... (D / G of them)
#define K 8             // cases evaluated together
#define THREADS 256
#define ALL(expr) _Pragma("unroll") for (int k = 0; k < K; ++k) a[k] = (expr)

// An instruction is 16 bits: the opcode in bits 13-15, a constant (v - 4096) / 4096 in bits 0-12. prog[pc * P + p]
// is program p's instruction pc. err[p] += sum over the thread's cases of (program(x) - y)^2.
__device__ __forceinline__ void evaluate(const unsigned short* __restrict__ prog, const float* __restrict__ xs,
                                         const float* __restrict__ ys, unsigned p, unsigned g, float* __restrict__ err) {
    float e = 0.f;
    for (unsigned b = 0; b < D / G; b += K) {
        float x[K], a[K];
#pragma unroll
        for (int k = 0; k < K; ++k) { x[k] = xs[(b + k) * G + g]; a[k] = x[k]; }
        for (int pc = 0; pc < L; ++pc) {
            unsigned w = prog[pc * P + p];
            float c = (float)((int)(w & 8191) - 4096) * (1.f / 4096.f);
            switch (w >> 13) { case 0: ALL(a[k] + x[k]); break; case 1: ALL(a[k] - x[k]); break; case 2: ALL(a[k] * x[k]); break; case 3: ALL(a[k] + c); break; case 4: ALL(a[k] * c); break; case 5: ALL(fminf(a[k] * a[k], 1e4f)); break; case 6: ALL(fmaxf(a[k], x[k])); break; default: ALL(fmaf(a[k], x[k], c)); }  // PLANTED
        }
#pragma unroll
        for (int k = 0; k < K; ++k) { float d = a[k] - ys[(b + k) * G + g]; e = fmaf(d, d, e); }
    }
    atomicAdd(&err[p], e);
}

extern "C" __global__ void gp_lane_per_program(const unsigned short* __restrict__ prog, const float* __restrict__ xs,
                                               const float* __restrict__ ys, float* __restrict__ err) {
    unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
    evaluate(prog, xs, ys, t % P, t / P, err);
}

extern "C" __global__ void gp_warp_per_program(const unsigned short* __restrict__ prog, const float* __restrict__ xs,
                                               const float* __restrict__ ys, float* __restrict__ err) {
    unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
    evaluate(prog, xs, ys, t / G, t % G, err);
}

int main() {
    std::vector<unsigned short> prog((size_t)L * P);
    for (auto& w : prog) w = (unsigned short)(urand() >> 16);  // 8 opcodes and 8192 constants, uniform
    std::vector<float> xs(D), ys(D);
    for (int d = 0; d < D; ++d) {
        float x = -1.f + 2.f * frand();
        xs[d] = x; ys[d] = x * x * x - 0.5f * x + 0.25f * sinf(3.f * x);
    }
    unsigned short* dprog = dcopy(prog);
    float *dx = dcopy(xs), *dy = dcopy(ys), *dbad = dnew<float>(P), *dfix = dnew<float>(P);
    LAUNCH(gp_lane_per_program, P * G / THREADS, THREADS, dprog, dx, dy, dbad);
    LAUNCH(gp_warp_per_program, P * G / THREADS, THREADS, dprog, dx, dy, dfix);
    CK(cudaDeviceSynchronize());
    return verdict("84-gp-interpreter-lanes", hcopy(dbad, P), hcopy(dfix, P), 1e-3);
}
