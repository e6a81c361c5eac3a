// 39-healthy-online-softmax. Healthy: a row softmax over 65536 rows x 512 floats (attention-sized
// rows), one warp per row, the row held in registers after one pass of 16-byte loads, max and sum by
// shuffles, one pass of 16-byte stores. Memory-bound at bandwidth.
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
#define ROWS 65536
#define COLS 512
#define THREADS 256
#define PER (COLS / 32 / 4)

extern "C" __global__ void softmax_rows(const float4* __restrict__ x, float4* __restrict__ y) {
    unsigned r = (blockIdx.x * blockDim.x + threadIdx.x) / 32, lane = threadIdx.x % 32;
    float4 v[PER];
    float m = -INFINITY;
    for (int j = 0; j < PER; ++j) {
        v[j] = x[(size_t)r * (COLS / 4) + j * 32 + lane];
        m = fmaxf(m, fmaxf(fmaxf(v[j].x, v[j].y), fmaxf(v[j].z, v[j].w)));
    }
    for (int o = 16; o > 0; o /= 2) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    float s = 0.0f;
    for (int j = 0; j < PER; ++j) {
        v[j] = make_float4(__expf(v[j].x - m), __expf(v[j].y - m), __expf(v[j].z - m), __expf(v[j].w - m));
        s += v[j].x + v[j].y + v[j].z + v[j].w;
    }
    for (int o = 16; o > 0; o /= 2) s += __shfl_xor_sync(0xffffffffu, s, o);
    float inv = 1.0f / s;
    for (int j = 0; j < PER; ++j)
        y[(size_t)r * (COLS / 4) + j * 32 + lane] = make_float4(v[j].x * inv, v[j].y * inv, v[j].z * inv, v[j].w * inv);
}

int main() {
    size_t n = (size_t)ROWS * COLS;
    std::vector<float> hx(n), ref(n);
    for (auto& v : hx) v = 8.0f * frand() - 4.0f;
    for (size_t r = 0; r < ROWS; ++r) {
        double m = -1e30, s = 0;
        for (int c = 0; c < COLS; ++c) m = fmax(m, hx[r * COLS + c]);
        for (int c = 0; c < COLS; ++c) s += exp(hx[r * COLS + c] - m);
        for (int c = 0; c < COLS; ++c) ref[r * COLS + c] = (float)(exp(hx[r * COLS + c] - m) / s);
    }
    float *dx = dcopy(hx), *dy = dnew<float>(n);
    LAUNCH(softmax_rows, ROWS * 32 / THREADS, THREADS, (const float4*)dx, (float4*)dy);
    CK(cudaDeviceSynchronize());
    return verdict("39-healthy-online-softmax", hcopy(dy, n), ref, 1e-4);
}
