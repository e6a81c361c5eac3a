// 31-bitonic-sort-smem. Planted: barrier-heavy synchronization. Each 1024-thread block sorts 2048 floats
// in shared memory with a bitonic network and a block-wide __syncthreads after each of its 66
// compare-exchange steps, although every step with a stride of 32 or less stays inside one warp.
// The steps are short (two shared loads, a compare, two stores) and the whole block waits at each one.
// Fixed twin: the same network with 256 threads holding 8 consecutive elements each in registers: steps
// with a stride below 8 run inside a thread, strides 8 to 128 inside a warp with shuffles (no barrier,
// no shared-memory round trip), and only the 6 steps with a stride of 256 or more go through shared
// memory: 9 block barriers, not 66, and a tenth of the shared-memory instructions.
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
#define N (16u << 20)
#define CH 2048

__device__ __forceinline__ void cmp_swap(float* s, unsigned t, unsigned k, unsigned j) {
    unsigned i = 2 * t - (t & (j - 1)), p = i + j;  // i: t with a 0 bit inserted at j
    float a = s[i], b = s[p];
    if ((a > b) == ((i & k) == 0)) { s[i] = b; s[p] = a; }
}

extern "C" __global__ void bitonic_block_barriers(const float* __restrict__ x, float* __restrict__ y) {
    __shared__ float s[CH];
    unsigned t = threadIdx.x, base = blockIdx.x * CH;
    s[t] = x[base + t]; s[t + CH / 2] = x[base + t + CH / 2];
    __syncthreads();
    for (unsigned k = 2; k <= CH; k *= 2)
        for (unsigned j = k / 2; j > 0; j /= 2) {
            cmp_swap(s, t, k, j); __syncthreads();  // PLANTED
        }
    y[base + t] = s[t]; y[base + t + CH / 2] = s[t + CH / 2];
}

#define PER 8               // twin: elements per thread
#define TW (CH / PER)         // twin: threads per block

// the element at index e keeps the smaller of (mine, other) when its pair sorts ascending and e is the
// lower index of the pair, or the pair sorts descending and e is the upper one: cmp_swap's result
__device__ __forceinline__ float keep(float mine, float other, bool keep_min) {
    return keep_min ? fminf(mine, other) : fmaxf(mine, other);
}

extern "C" __global__ void bitonic_warp_steps(const float* __restrict__ x, float* __restrict__ y) {
    __shared__ __align__(16) float s[CH];
    unsigned t = threadIdx.x, lane = t % 32, base = blockIdx.x * CH;
    float v[PER];
    const float4* xi = reinterpret_cast<const float4*>(x + base + PER * t);
    float4 a0 = xi[0], a1 = xi[1];
    v[0] = a0.x; v[1] = a0.y; v[2] = a0.z; v[3] = a0.w; v[4] = a1.x; v[5] = a1.y; v[6] = a1.z; v[7] = a1.w;
#pragma unroll
    for (unsigned k = 2; k <= CH; k *= 2) {
        if (k > TW) {  // strides of 256 and more: through shared memory, a barrier per step
#pragma unroll
            for (int r = 0; r < PER; ++r) s[PER * t + r] = v[r];
            __syncthreads();
            for (unsigned j = k / 2; j >= TW; j /= 2) {
#pragma unroll
                for (unsigned u = 0; u < CH / 2; u += TW) cmp_swap(s, t + u, k, j);
                __syncthreads();
            }
#pragma unroll
            for (int r = 0; r < PER; ++r) v[r] = s[PER * t + r];
        }
#pragma unroll
        for (unsigned j = (k / 2 < TW / 2 ? k / 2 : TW / 2); j >= PER; j /= 2) {  // strides 8..128: shuffles
            bool asc = ((PER * t) & k) == 0, lower = (lane & (j / PER)) == 0;
#pragma unroll
            for (int r = 0; r < PER; ++r) v[r] = keep(v[r], __shfl_xor_sync(0xffffffffu, v[r], j / PER), asc == lower);
        }
#pragma unroll
        for (unsigned j = (k / 2 < PER / 2 ? k / 2 : PER / 2); j > 0; j /= 2)  // strides 1..4: in the thread
#pragma unroll
            for (unsigned r = 0; r < PER; ++r)
                if ((r & j) == 0) {
                    bool asc = ((PER * t + r) & k) == 0;
                    float lo = fminf(v[r], v[r + j]), hi = fmaxf(v[r], v[r + j]);
                    v[r] = asc ? lo : hi; v[r + j] = asc ? hi : lo;
                }
    }
    float4* yo = reinterpret_cast<float4*>(y + base + PER * t);
    yo[0] = make_float4(v[0], v[1], v[2], v[3]); yo[1] = make_float4(v[4], v[5], v[6], v[7]);
}

int main() {
    std::vector<float> hx(N);
    for (auto& v : hx) v = frand();
    float *dx = dcopy(hx), *dbad = dnew<float>(N), *dfix = dnew<float>(N);
    LAUNCH(bitonic_block_barriers, N / CH, CH / 2, dx, dbad);
    LAUNCH(bitonic_warp_steps, N / CH, TW, dx, dfix);
    CK(cudaDeviceSynchronize());
    return verdict("31-bitonic-sort-smem", hcopy(dbad, N), hcopy(dfix, N), 0.0);
}
