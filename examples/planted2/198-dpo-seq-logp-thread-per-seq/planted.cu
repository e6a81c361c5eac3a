// 198-dpo-seq-logp-thread-per-seq. Planted: uncoalesced global access through ragged-batch offsets.
// Sequence scores of a packed, length-bucketed batch for preference training (DPO-style): 811,008 sequences of
// 32 to 200 tokens (buckets of 256 sequences within 8 tokens of each other, 93M tokens), each with a float
// log-prob per token and a uint8 loss mask (0 over the prompt, 1 over the response); per sequence the masked
// sum of log-probs, and its mean over the response tokens. Feature dimension 1, one thread a sequence: each
// thread walks its own token run, so at every step the lanes of a warp are one sequence (about 460 B of
// log-probs, 115 B of mask) apart: 32 sectors a request for 128 useful bytes of log-probs and 32 for 32 mask bytes.
// Fixed twin: a warp a sequence: lanes read 32 consecutive tokens from an aligned start, and the warp sums with
// shuffles; the same 466 MB stream once from DRAM, expected 4-6x faster.
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

extern "C" __global__ void seq_logp_thread_per_seq(const int* __restrict__ off, const float* __restrict__ logp,
                                                   const unsigned char* __restrict__ mask, int nseq,
                                                   float* __restrict__ sum, float* __restrict__ mean) {
    int s = blockIdx.x * blockDim.x + threadIdx.x;
    if (s >= nseq) return;
    int beg = off[s], end = off[s + 1];
    float acc = 0.0f;
    int n = 0;
    for (int t = beg; t < end; ++t) {
        unsigned m = mask[t];  // PLANTED
        float lp = logp[t];    // PLANTED
        acc += m ? lp : 0.0f;
        n += m;
    }
    sum[s] = acc;
    mean[s] = n > 0 ? acc / (float)n : 0.0f;
}

extern "C" __global__ void seq_logp_warp_per_seq(const int* __restrict__ off, const float* __restrict__ logp,
                                                 const unsigned char* __restrict__ mask, int nseq,
                                                 float* __restrict__ sum, float* __restrict__ mean) {
    int s = (int)((blockIdx.x * (unsigned)blockDim.x + threadIdx.x) >> 5);
    int lane = threadIdx.x & 31;
    if (s >= nseq) return;  // uniform across the warp
    int beg = off[s], end = off[s + 1];
    float acc = 0.0f;
    int n = 0;
    for (int base = beg & ~31; base < end; base += 32) {  // aligned 32-token steps, the same for every lane
        int t = base + lane;
        bool in = t >= beg && t < end;
        unsigned m = in ? mask[t] : 0u;
        float lp = in ? logp[t] : 0.0f;
        acc += m ? lp : 0.0f;
        n += m;
    }
    for (int o = 16; o > 0; o >>= 1) {
        acc += __shfl_xor_sync(0xffffffffu, acc, o);
        n += __shfl_xor_sync(0xffffffffu, n, o);
    }
    if (lane == 0) {
        sum[s] = acc;
        mean[s] = n > 0 ? acc / (float)n : 0.0f;
    }
}

int main() {
    const int nseq = 132 * 2048 * 3;  // three full waves of one thread a sequence
    std::vector<int> off(nseq + 1);
    off[0] = 0;
    for (int s = 0; s < nseq; s += 256) {  // length buckets, as a bucketing sampler forms them
        int base = 32 + (int)(urand() % 161);  // 32..192
        for (int k = s; k < s + 256 && k < nseq; ++k) off[k + 1] = off[k] + base + (int)(urand() % 9);
    }
    const int ntok = off[nseq];
    std::vector<float> logp(ntok);
    std::vector<unsigned char> mask(ntok);
    for (int s = 0; s < nseq; ++s) {
        int len = off[s + 1] - off[s];
        int prompt = (int)(len * (0.2f + 0.6f * frand()));  // prompt share 20-80%, masked out
        for (int t = 0; t < len; ++t) {
            float u = frand();
            logp[off[s] + t] = -12.0f * u * u;  // token log-probs in (-12, 0]
            mask[off[s] + t] = t >= prompt ? 1 : 0;
        }
    }
    int* d_off = dcopy(off);
    float* d_logp = dcopy(logp);
    unsigned char* d_mask = dcopy(mask);
    float* d_sum_a = dnew<float>(nseq);
    float* d_sum_b = dnew<float>(nseq);
    float* d_mean_a = dnew<float>(nseq);
    float* d_mean_b = dnew<float>(nseq);

    LAUNCH(seq_logp_thread_per_seq, (nseq + 255) / 256, 256, d_off, d_logp, d_mask, nseq, d_sum_a, d_mean_a);
    LAUNCH(seq_logp_warp_per_seq, (int)(((long long)nseq * 32 + 255) / 256), 256, d_off, d_logp, d_mask, nseq,
           d_sum_b, d_mean_b);
    CK(cudaDeviceSynchronize());

    std::vector<float> a = hcopy(d_sum_a, nseq), b = hcopy(d_sum_b, nseq);
    std::vector<float> ma = hcopy(d_mean_a, nseq), mb = hcopy(d_mean_b, nseq);
    a.insert(a.end(), ma.begin(), ma.end());
    b.insert(b.end(), mb.begin(), mb.end());
    // the twin against a double-precision host sum on every 997th sequence
    for (int s = 0; s < nseq; s += 997) {
        double h = 0;
        for (int t = off[s]; t < off[s + 1]; ++t) h += mask[t] ? logp[t] : 0.0f;
        if (fabs(h - b[s]) > 1e-4 * (fabs(h) + 1.0)) {
            printf("MISMATCH 198-dpo-seq-logp-thread-per-seq host seq %d: %f vs %f\n", s, h, b[s]);
            return 1;
        }
    }
    return verdict("198-dpo-seq-logp-thread-per-seq", a, b, 1e-3);
}
