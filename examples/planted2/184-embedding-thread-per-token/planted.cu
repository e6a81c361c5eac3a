// 184-embedding-thread-per-token. Planted: uncoalesced global access. The input embedding of a small decoder
// (d_model 128, 512K-entry vocabulary, a 256 MB table) for a batch of 256 sequences of 2048 tokens, scaled by
// sqrt(d_model): out[t][:] = table[tok[t]][:] * 11.3137. The kernel gives each token a thread, which walks its
// 512-byte row one float at a time: the 32 lanes of a warp read 32 different rows and write 32 output rows 512
// bytes apart, so each load and store instruction touches 32 sectors (all in the same L1 bank) for 128 useful
// bytes. L1 keeps the read sectors for the next 7 columns and L2 merges the partial writes, so DRAM traffic stays
// near the 512 MB it needs; the time goes to 8x as many sector transactions and 32-way split wavefronts in L1.
// Fixed twin: a warp per token, a float4 a lane: each warp instruction reads one whole row and writes one whole
// row (16 full sectors), bound by DRAM, expected at least 3x faster.
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

#define VOCAB (1 << 19)   // 524,288 rows
#define DMODEL 128        // 512-byte rows
#define NTOK (1 << 19)    // 256 sequences x 2048 tokens

// a thread per token, walking its row
extern "C" __global__ void __launch_bounds__(256) embed_thread_per_token(const int* __restrict__ tok,
                                                                         const float* __restrict__ table,
                                                                         float* __restrict__ out, float scale) {
    const size_t t = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    const float* row = table + (size_t)tok[t] * DMODEL;
    float* dst = out + t * DMODEL;
    for (int f = 0; f < DMODEL; ++f)
        dst[f] = row[f] * scale;  // PLANTED
}

// fixed twin: a warp per token, a float4 a lane
extern "C" __global__ void __launch_bounds__(256) embed_warp_per_token(const int* __restrict__ tok,
                                                                       const float4* __restrict__ table,
                                                                       float4* __restrict__ out, float scale) {
    const size_t g = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    const size_t t = g >> 5;
    const int q = (int)(g & 31);
    const float4 v = table[(size_t)tok[t] * (DMODEL / 4) + q];
    out[t * (DMODEL / 4) + q] = make_float4(v.x * scale, v.y * scale, v.z * scale, v.w * scale);
}

int main() {
    std::vector<float> h_table((size_t)VOCAB * DMODEL);
    for (auto& v : h_table) v = frand() * 0.2f - 0.1f;
    std::vector<int> h_tok(NTOK);
    for (auto& t : h_tok) t = (int)((urand() >> 8) % VOCAB);
    const float scale = sqrtf((float)DMODEL);
    int* d_tok = dcopy(h_tok);
    float* d_table = dcopy(h_table);
    const size_t no = (size_t)NTOK * DMODEL;
    float* d_out = dnew<float>(no);
    LAUNCH(embed_thread_per_token, NTOK / 256, 256, d_tok, d_table, d_out, scale);
    CK(cudaDeviceSynchronize());
    std::vector<float> bad = hcopy(d_out, no);
    CK(cudaMemset(d_out, 0, no * sizeof(float)));
    LAUNCH(embed_warp_per_token, NTOK / 8, 256, d_tok, (const float4*)d_table, (float4*)d_out, scale);
    CK(cudaDeviceSynchronize());
    std::vector<float> fixed = hcopy(d_out, no);
    int rc = verdict("184-embedding-thread-per-token", bad, fixed, 0.0);
    double worst = 0;  // and the twin against the host on a sample of tokens
    for (size_t t = 0; t < NTOK; t += 1021)
        for (int f = 0; f < DMODEL; ++f) {
            const double r = (double)(h_table[(size_t)h_tok[t] * DMODEL + f] * scale);
            const double e = fabs((double)fixed[t * DMODEL + f] - r) / (fabs(r) + 1e-2);
            if (e > worst) worst = e;
        }
    if (worst > 1e-6) { printf("MISMATCH 184-embedding-thread-per-token host max_rel_err=%.3g\n", worst); rc = 1; }
    CK(cudaFree(d_tok)); CK(cudaFree(d_table)); CK(cudaFree(d_out));
    return rc;
}
