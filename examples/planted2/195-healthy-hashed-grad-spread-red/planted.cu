// 195-healthy-hashed-grad-spread-red. Healthy: backward pass of a hashed-feature linear model for one minibatch of 768K
// samples with 32 features each: every (sample, feature) entry adds dloss[sample] * value into the gradient of its
// hashed weight, grad[id] += d * v, over a 100M-bucket (400 MB) table. The hash spreads the 24M entries uniformly
// (about 0.25 a bucket, so two atomics rarely meet), and each warp's 32 REDs land in 32 unrelated sectors of a table
// eight times the L2; no mapping of threads to entries coalesces them, only sorting the entries by id could. Ids and
// values come in with one 16-byte load per stream per thread (512 contiguous bytes a warp), 4 fire-and-forget REDs
// follow, 24K blocks of 256 fill the GPU: the L2's sector fills and write-backs to DRAM set the time.
// Challenger: 8 entries a thread (two 16-byte loads per stream, 256 apart in the block's tile, then 8 REDs), same bytes.
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

#define NB 100000000         // hashed gradient buckets
#define FIELDS 32            // features per sample
#define SAMPLES (768 * 1024)

// 4 entries per thread; 8 threads share a sample (FIELDS / 4)
extern "C" __global__ void __launch_bounds__(256) hashed_grad_red4(const int4* __restrict__ ids,
    const float4* __restrict__ vals, const float* __restrict__ dloss, float* __restrict__ grad, int n4)
{
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n4) return;
    int4 c = ids[t];
    float4 v = vals[t];
    float d = dloss[t >> 3];
    atomicAdd(grad + c.x, d * v.x);
    atomicAdd(grad + c.y, d * v.y);
    atomicAdd(grad + c.z, d * v.z);
    atomicAdd(grad + c.w, d * v.w);
}

// challenger: 8 entries per thread, a block takes 512 consecutive int4 (n4 % 512 == 0)
extern "C" __global__ void __launch_bounds__(256) hashed_grad_red8(const int4* __restrict__ ids,
    const float4* __restrict__ vals, const float* __restrict__ dloss, float* __restrict__ grad, int n4)
{
    int t = blockIdx.x * 512 + threadIdx.x;
    if (t + 256 >= n4) return;                                   // never with n4 % 512 == 0
    int4 c0 = ids[t], c1 = ids[t + 256];
    float4 v0 = vals[t], v1 = vals[t + 256];
    float d0 = dloss[t >> 3], d1 = dloss[(t + 256) >> 3];
    atomicAdd(grad + c0.x, d0 * v0.x); atomicAdd(grad + c0.y, d0 * v0.y);
    atomicAdd(grad + c0.z, d0 * v0.z); atomicAdd(grad + c0.w, d0 * v0.w);
    atomicAdd(grad + c1.x, d1 * v1.x); atomicAdd(grad + c1.y, d1 * v1.y);
    atomicAdd(grad + c1.z, d1 * v1.z); atomicAdd(grad + c1.w, d1 * v1.w);
}

int main()
{
    const size_t ne = (size_t)SAMPLES * FIELDS;                  // 24M entries
    const int n4 = (int)(ne / 4);
    std::vector<int> hid(ne);
    std::vector<float> hval(ne), hd(SAMPLES);
    for (auto& x : hd) x = frand() * 2.0f - 1.0f;                // p - y of each sample
    for (size_t i = 0; i < ne; ++i) {                            // fields 0-7 numeric, 8-31 one-hot categorical
        hid[i] = (int)(((unsigned long long)urand() * NB) >> 32);   // hash(field, raw value) mod 1e8: uniform
        hval[i] = (i % FIELDS) < 8 ? frand() * 4.0f : 1.0f;
    }
    std::vector<float> ref(NB, 0.0f);
    for (size_t i = 0; i < ne; ++i) ref[hid[i]] += hd[i / FIELDS] * hval[i];
    int* d_id = dcopy(hid);
    float* d_val = dcopy(hval);
    float* d_d = dcopy(hd);
    float* d_g = dnew<float>(NB);

    LAUNCH(hashed_grad_red4, n4 / 256, 256, (const int4*)d_id, (const float4*)d_val, d_d, d_g, n4);
    CK(cudaDeviceSynchronize());
    std::vector<float> g1 = hcopy(d_g, NB);
    CK(cudaMemset(d_g, 0, (size_t)NB * sizeof(float)));
    LAUNCH(hashed_grad_red8, n4 / 512, 256, (const int4*)d_id, (const float4*)d_val, d_d, d_g, n4);
    CK(cudaDeviceSynchronize());
    std::vector<float> g2 = hcopy(d_g, NB);
    int rc = verdict("195-healthy-hashed-grad-spread-red", g1, ref, 1e-3);
    rc |= verdict("195-healthy-hashed-grad-spread-red challenger", g2, ref, 1e-3);
    CK(cudaFree(d_id)); CK(cudaFree(d_val)); CK(cudaFree(d_d)); CK(cudaFree(d_g));
    return rc;
}
