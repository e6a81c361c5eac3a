// 181-healthy-sph-reorder-perm64. Healthy: applying a precomputed permutation to 64-byte particle records. An SPH
// code reorders its 4M particles (16 floats each: position and smoothing length, velocity and density, force and
// pressure, mass, id and two spares) into cell order every few steps; the permutation (the source slot of each
// destination slot) comes from a key sort done elsewhere, and as the particles lie at random in memory it is a
// uniform random permutation: the scattered reads are inherent. Each group of 4 lanes moves one record (a float4
// a lane), 8 records per warp instruction, so every random read is a whole 64-byte piece (two full sectors) and
// every write a whole record; the permutation is read as int4 (128 contiguous bytes per warp). 256 MB read at
// random, 256 MB written, 16 MB of indices: bound by DRAM.
// Challenger: a thread per record (the index a scalar load, four float4 loads and four float4 stores a thread).
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

#define NREC (1 << 22)  // 4,194,304 records of 64 bytes (16 floats, 4 float4)

// 4 lanes per record; a warp takes 32 destination slots, group g (lanes 4g..4g+3) the slots 4g..4g+3 of them
extern "C" __global__ void __launch_bounds__(256) reorder_group4(const float4* __restrict__ in,
                                                                 const int4* __restrict__ perm4,
                                                                 float4* __restrict__ out) {
    const int lane = threadIdx.x & 31, part = lane & 3, g = lane >> 2;
    const size_t warp = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const size_t first = warp * 32 + 4 * g;  // this group's four destination slots
    const int4 p = perm4[first >> 2];        // the 4 lanes of a group read the same 16 bytes
    const float4 a = in[(size_t)p.x * 4 + part];
    const float4 b = in[(size_t)p.y * 4 + part];
    const float4 c = in[(size_t)p.z * 4 + part];
    const float4 d = in[(size_t)p.w * 4 + part];
    out[(first + 0) * 4 + part] = a;
    out[(first + 1) * 4 + part] = b;
    out[(first + 2) * 4 + part] = c;
    out[(first + 3) * 4 + part] = d;
}

// the challenger: a thread per record
extern "C" __global__ void __launch_bounds__(256) reorder_thread(const float4* __restrict__ in,
                                                                 const int* __restrict__ perm,
                                                                 float4* __restrict__ out) {
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    const size_t s = (size_t)perm[i] * 4;
    const float4 a = in[s], b = in[s + 1], c = in[s + 2], d = in[s + 3];
    out[i * 4 + 0] = a;
    out[i * 4 + 1] = b;
    out[i * 4 + 2] = c;
    out[i * 4 + 3] = d;
}

int main() {
    const size_t nf = (size_t)NREC * 16;
    std::vector<float> h_in(nf);
    for (size_t k = 0; k < nf; ++k) h_in[k] = frand() * 200.0f - 100.0f;
    std::vector<int> h_perm(NREC);
    for (int i = 0; i < NREC; ++i) h_perm[i] = i;
    for (int i = NREC - 1; i > 0; --i) {  // Fisher-Yates: the source slot of each destination slot
        const int j = (int)((urand() >> 8) % (unsigned)(i + 1));
        const int t = h_perm[i]; h_perm[i] = h_perm[j]; h_perm[j] = t;
    }
    std::vector<float> ref(nf);
    for (size_t i = 0; i < NREC; ++i)
        memcpy(&ref[i * 16], &h_in[(size_t)h_perm[i] * 16], 16 * sizeof(float));

    float* d_in = dcopy(h_in);
    int* d_perm = dcopy(h_perm);
    float* d_out = dnew<float>(nf);
    LAUNCH(reorder_group4, NREC / 256, 256, (const float4*)d_in, (const int4*)d_perm, (float4*)d_out);
    CK(cudaDeviceSynchronize());
    std::vector<float> got = hcopy(d_out, nf);
    CK(cudaMemset(d_out, 0, nf * sizeof(float)));
    LAUNCH(reorder_thread, NREC / 256, 256, (const float4*)d_in, (const int*)d_perm, (float4*)d_out);
    CK(cudaDeviceSynchronize());
    std::vector<float> got2 = hcopy(d_out, nf);
    int rc = verdict("181-healthy-sph-reorder-perm64", got, ref, 0.0);
    rc |= verdict("181-healthy-sph-reorder-perm64:challenger", got2, ref, 0.0);
    CK(cudaFree(d_in)); CK(cudaFree(d_perm)); CK(cudaFree(d_out));
    return rc;
}
