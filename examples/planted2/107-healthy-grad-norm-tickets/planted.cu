// 107-healthy-grad-norm-tickets. Healthy: fused multi-tensor gradient L2 norm for clipping (120 tensors of a
// 10-layer, d=1024 transformer, 126M floats in one flat 504 MB buffer). One 256-thread block a 16K-float
// chunk (chunk table as in multi-tensor apply) streams its floats with 8 float4 loads in flight a thread and
// writes its sum of squares; a threadfence and an atomic ticket per tensor make the last block of each tensor
// add that tensor's partials in a fixed order (deterministic) and take the norm, and a second ticket makes
// the last tensor finish the total norm and the clip coefficient. DRAM-bound, expected at 85-90% of peak.
// Challenger: the same chunks, each block adding its partial into the tensor's sum with a float atomicAdd.
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
#define D 1024                     // model width
#define LAYERS 10
#define PER_LAYER 12               // tensors a layer: ln1 w/b, qkv w/b, out w/b, ln2 w/b, up w/b, down w/b
#define T (LAYERS * PER_LAYER)
#define CHUNK 16384                // floats a block
#define THREADS 256
#define ITER (CHUNK / (THREADS * 4))
#define MAX_NORM 1.0f
#define FULL 0xffffffffu

__device__ __forceinline__ float block_sum(float v, float* s_red) {  // result valid in thread 0
#pragma unroll
    for (int o = 16; o; o >>= 1) v += __shfl_xor_sync(FULL, v, o);
    if ((threadIdx.x & 31) == 0) s_red[threadIdx.x >> 5] = v;
    __syncthreads();
    v = 0.f;
    if (threadIdx.x < 32) {
        v = threadIdx.x < THREADS / 32 ? s_red[threadIdx.x] : 0.f;
#pragma unroll
        for (int o = 16; o; o >>= 1) v += __shfl_xor_sync(FULL, v, o);
    }
    return v;
}

// Sum of squares of this block's chunk.
__device__ __forceinline__ float chunk_sumsq(const float* __restrict__ grads, int start, int len) {
    const float4* p = reinterpret_cast<const float4*>(grads + start);
    float a0 = 0.f, a1 = 0.f, a2 = 0.f, a3 = 0.f;
#pragma unroll 8
    for (int j = 0; j < ITER; ++j) {
        const int i = j * THREADS + threadIdx.x;
        if (4 * i < len) {
            const float4 g = p[i];
            a0 = fmaf(g.x, g.x, a0); a1 = fmaf(g.y, g.y, a1); a2 = fmaf(g.z, g.z, a2); a3 = fmaf(g.w, g.w, a3);
        }
    }
    return (a0 + a1) + (a2 + a3);
}

// Warp 0: the sum of v[first .. first+n) read through L2 (other blocks wrote them), lane-strided then a tree.
__device__ __forceinline__ float warp_sum_l2(const float* v, int first, int n) {
    float s = 0.f;
    for (int i = threadIdx.x; i < n; i += 32) s += __ldcg(v + first + i);
#pragma unroll
    for (int o = 16; o; o >>= 1) s += __shfl_xor_sync(FULL, s, o);
    return s;
}

// The last block of every tensor (thread 0 knows it) finishes that tensor, the last tensor finishes the total.
__device__ __forceinline__ void finish(bool last_of_tensor, int tensor, float* tensor_sq, float* out,
                                       unsigned* tensor_count, unsigned* tensors_done, float sq_known,
                                       const float* partial, int first_chunk, int nchunks) {
    __shared__ int s_flag, s_last_tensor;
    if (threadIdx.x == 0) s_flag = last_of_tensor;
    __syncthreads();
    if (!s_flag || threadIdx.x >= 32) return;
    __threadfence();
    const float sq = partial ? warp_sum_l2(partial, first_chunk, nchunks) : sq_known;
    if (threadIdx.x == 0) {
        if (partial) tensor_sq[tensor] = sq;
        out[tensor] = sqrtf(sq);
        tensor_count[tensor] = 0;  // ready for the next launch
        __threadfence();
        s_last_tensor = atomicAdd(tensors_done, 1u) == T - 1;
    }
    __syncwarp();
    if (!s_last_tensor) return;
    __threadfence();
    const float total = sqrtf(warp_sum_l2(tensor_sq, 0, T));
    if (threadIdx.x == 0) {
        out[T] = total;
        out[T + 1] = fminf(1.0f, MAX_NORM / (total + 1e-6f));
        *tensors_done = 0;
    }
}

extern "C" __global__ void __launch_bounds__(THREADS) grad_norm_tickets(const float* __restrict__ grads, const int2* __restrict__ chunks,
        const int* __restrict__ tensor_end, const int* __restrict__ tensor_chunk0, float* partial, float* tensor_sq,
        unsigned* tensor_count, unsigned* tensors_done, float* out) {
    __shared__ float s_red[THREADS / 32];
    const int2 c = chunks[blockIdx.x];  // (tensor, first float)
    const int len = min(CHUNK, tensor_end[c.x] - c.y);
    const float ss = block_sum(chunk_sumsq(grads, c.y, len), s_red);
    const int first = tensor_chunk0[c.x], nchunks = tensor_chunk0[c.x + 1] - first;
    bool last = false;
    if (threadIdx.x == 0) {
        partial[blockIdx.x] = ss;
        __threadfence();
        last = atomicAdd(&tensor_count[c.x], 1u) == (unsigned)nchunks - 1;
    }
    finish(last, c.x, tensor_sq, out, tensor_count, tensors_done, 0.f, partial, first, nchunks);
}

extern "C" __global__ void __launch_bounds__(THREADS) grad_norm_atomic(const float* __restrict__ grads, const int2* __restrict__ chunks,
        const int* __restrict__ tensor_end, const int* __restrict__ tensor_chunk0, float* partial, float* tensor_sq,
        unsigned* tensor_count, unsigned* tensors_done, float* out) {
    __shared__ float s_red[THREADS / 32];
    const int2 c = chunks[blockIdx.x];
    const int len = min(CHUNK, tensor_end[c.x] - c.y);
    const float ss = block_sum(chunk_sumsq(grads, c.y, len), s_red);
    const int nchunks = tensor_chunk0[c.x + 1] - tensor_chunk0[c.x];
    bool last = false;
    float sq = 0.f;
    if (threadIdx.x == 0) {
        atomicAdd(&tensor_sq[c.x], ss);
        __threadfence();
        last = atomicAdd(&tensor_count[c.x], 1u) == (unsigned)nchunks - 1;
        if (last) { __threadfence(); sq = __ldcg(&tensor_sq[c.x]); }
    }
    finish(last, c.x, tensor_sq, out, tensor_count, tensors_done, __shfl_sync(FULL, sq, 0), nullptr, 0, 0);
}

int main() {
    const int sizes[PER_LAYER] = {D, D, 3 * D * D, 3 * D, D * D, D, D, D, 4 * D * D, 4 * D, 4 * D * D, D};
    std::vector<int> end(T), chunk0(T + 1);
    std::vector<int2> chunks;
    int total = 0;
    for (int t = 0; t < T; ++t) {
        chunk0[t] = (int)chunks.size();
        for (int s = 0; s < sizes[t % PER_LAYER]; s += CHUNK) chunks.push_back(make_int2(t, total + s));
        total += sizes[t % PER_LAYER];
        end[t] = total;
    }
    chunk0[T] = (int)chunks.size();
    std::vector<float> hg(total);
    std::vector<double> ref_sq(T, 0.0);
    for (int t = 0, i = 0; t < T; ++t) {
        const float scale = 1e-3f * (1 + (t * 7) % 50);
        for (; i < end[t]; ++i) { hg[i] = (frand() - 0.5f) * scale; ref_sq[t] += (double)hg[i] * hg[i]; }
    }
    std::vector<float> ref(T + 2);
    double all = 0;
    for (int t = 0; t < T; ++t) { ref[t] = (float)sqrt(ref_sq[t]); all += ref_sq[t]; }
    ref[T] = (float)sqrt(all);
    ref[T + 1] = std::min(1.0f, MAX_NORM / (ref[T] + 1e-6f));
    const int nblocks = (int)chunks.size();
    float* dg = dcopy(hg);
    int2* dc = dcopy(chunks);
    int *de = dcopy(end), *d0 = dcopy(chunk0);
    float *partial = dnew<float>(nblocks), *sq1 = dnew<float>(T), *sq2 = dnew<float>(T);
    float *out1 = dnew<float>(T + 2), *out2 = dnew<float>(T + 2);
    unsigned *cnt1 = dnew<unsigned>(T + 1), *cnt2 = dnew<unsigned>(T + 1);
    grad_norm_tickets<<<nblocks, THREADS>>>(dg, dc, de, d0, partial, sq1, cnt1, cnt1 + T, out1);
    CK(cudaGetLastError());
    grad_norm_atomic<<<nblocks, THREADS>>>(dg, dc, de, d0, partial, sq2, cnt2, cnt2 + T, out2);
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    std::vector<float> got = hcopy(out1, T + 2);
    double worst = 0;
    for (int t = 0; t < T + 2; ++t) worst = std::max(worst, fabs((double)got[t] - ref[t]) / (fabs((double)ref[t]) + 1e-2));
    if (!(worst <= 1e-4)) { printf("MISMATCH 107-healthy-grad-norm-tickets: grad_norm_tickets vs host max_rel_err=%.3g\n", worst); return 1; }
    return verdict("107-healthy-grad-norm-tickets", hcopy(out2, T + 2), got, 1e-4);
}
