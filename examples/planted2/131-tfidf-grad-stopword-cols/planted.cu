// 131-tfidf-grad-stopword-cols. Planted: atomic contention on many warm destinations. The gradient X^T r of a
// logistic regression over a 600K-document TF-IDF matrix (CSR by document, 20-32 distinct terms each, 15.6M
// nonzeros), one warp a document, one float atomicAdd per nonzero into grad[word]. Word frequencies are Zipf(1.0)
// and the vocabulary is numbered by frequency, as tokenizers do: word 0 is in 85% of the documents, words 0-7 share
// one 32-byte sector and take 13% of the nonzeros, the first 128-byte line 22.5%. Those few L2 lines serialize.
// Fixed twin: the transposed copy (by word, kept by the solver), a warp per 1024-nonzero chunk, a shuffle
// segmented sum per word and one atomic per word per chunk.
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
#include <algorithm>
#include <climits>
#define NDOCS 600000
#define VOCAB (1 << 20)
#define MINLEN 20
#define MAXLEN 32
#define CHUNK 1024              // nonzeros a warp in the twin

extern "C" __global__ void xt_resid_by_doc(const int* __restrict__ rowptr, const int* __restrict__ col,
                                           const float* __restrict__ val, const float* __restrict__ resid,
                                           float* __restrict__ grad, int ndocs) {
    int lane = threadIdx.x & 31;
    for (int d = (blockIdx.x * blockDim.x + threadIdx.x) >> 5; d < ndocs; d += (gridDim.x * blockDim.x) >> 5) {
        float r = resid[d];
        for (int k = rowptr[d] + lane; k < rowptr[d + 1]; k += 32)
            atomicAdd(&grad[col[k]], val[k] * r);  // PLANTED
    }
}

extern "C" __global__ void xt_resid_by_word(const int* __restrict__ ccol, const int* __restrict__ crow,
                                            const float* __restrict__ cval, const float* __restrict__ resid,
                                            float* __restrict__ grad, int nnz) {
    int lane = threadIdx.x & 31;
    int beg = ((blockIdx.x * blockDim.x + threadIdx.x) >> 5) * CHUNK;
    if (beg >= nnz) return;
    int end = min(beg + CHUNK, nnz);
    int ckey = -1;                                   // carried open segment (warp-uniform)
    float csum = 0.f;
    for (int base = beg; base < end; base += 128) {  // four rounds of 32 nonzeros, loads issued together
        int key[4], row[4];
        float x[4];
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            int e = base + 32 * j + lane;
            key[j] = e < end ? ccol[e] : INT_MAX;
            row[j] = e < end ? crow[e] : 0;
            x[j] = e < end ? cval[e] : 0.f;
        }
#pragma unroll
        for (int j = 0; j < 4; ++j) x[j] *= resid[row[j]];
#pragma unroll
        for (int j = 0; j < 4; ++j) {
#pragma unroll
            for (int off = 1; off < 32; off <<= 1) { // segmented inclusive sum (keys are sorted)
                float y = __shfl_up_sync(0xffffffffu, x[j], off);
                int k = __shfl_up_sync(0xffffffffu, key[j], off);
                if (lane >= off && k == key[j]) x[j] += y;
            }
            if (key[j] == ckey) x[j] += csum;        // lanes continuing the carried word
            else if (lane == 0 && ckey >= 0 && ckey != INT_MAX) atomicAdd(&grad[ckey], csum);
            int next = __shfl_down_sync(0xffffffffu, key[j], 1);
            if (key[j] != INT_MAX && lane < 31 && next != key[j]) atomicAdd(&grad[key[j]], x[j]);
            ckey = __shfl_sync(0xffffffffu, key[j], 31);
            csum = __shfl_sync(0xffffffffu, x[j], 31);
        }
    }
    if (lane == 0 && ckey >= 0 && ckey != INT_MAX) atomicAdd(&grad[ckey], csum);
}

// uniform in [0, n) from the generator's high bits (its low bits have short periods)
static unsigned below(unsigned n) { return (unsigned)(((unsigned long long)urand() * n) >> 32); }

int main() {
    // Zipf(1.0) word frequencies; word id = frequency rank
    std::vector<double> cdf(VOCAB);
    double tot = 0;
    for (int r = 0; r < VOCAB; ++r) { tot += 1.0 / (r + 1); cdf[r] = tot; }
    for (auto& c : cdf) c /= tot;
    std::vector<int> rowptr(NDOCS + 1, 0), col;
    std::vector<float> val, resid(NDOCS);
    col.reserve((size_t)NDOCS * 27); val.reserve((size_t)NDOCS * 27);
    for (int d = 0; d < NDOCS; ++d) {
        int len = MINLEN + below(MAXLEN - MINLEN + 1), words[MAXLEN], n = 0;
        while (n < len) {
            double x = (urand() >> 8) * (1.0 / 16777216.0) + (urand() >> 8) * (1.0 / 16777216.0 / 16777216.0);
            int w = std::min((int)(std::upper_bound(cdf.begin(), cdf.end(), x) - cdf.begin()), VOCAB - 1);
            bool dup = false;
            for (int i = 0; i < n; ++i) dup |= words[i] == w;
            if (!dup) words[n++] = w;
        }
        std::sort(words, words + n);
        for (int i = 0; i < n; ++i) {
            col.push_back(words[i]);
            val.push_back((1 + below(4)) * 0.1f * logf(2.0f + words[i]));  // tf * idf
        }
        rowptr[d + 1] = (int)col.size();
        resid[d] = 1.5f * frand() - 0.5f;                                         // p - y
    }
    const int nnz = (int)col.size();
    // the transposed copy, by word (doc ids ascending within a word)
    std::vector<int> cptr(VOCAB + 1, 0), ccol(nnz), crow(nnz);
    std::vector<float> cval(nnz);
    for (int k = 0; k < nnz; ++k) cptr[col[k] + 1]++;
    for (int w = 0; w < VOCAB; ++w) cptr[w + 1] += cptr[w];
    {
        std::vector<int> fill(cptr.begin(), cptr.end() - 1);
        for (int d = 0; d < NDOCS; ++d)
            for (int k = rowptr[d]; k < rowptr[d + 1]; ++k) {
                int p = fill[col[k]]++;
                ccol[p] = col[k]; crow[p] = d; cval[p] = val[k];
            }
    }
    printf("nnz %d; word 0 in %.1f%% of docs; words 0-7 take %.1f%% of nnz, words 0-31 %.1f%%\n", nnz,
           100.0 * cptr[1] / NDOCS, 100.0 * cptr[8] / nnz, 100.0 * cptr[32] / nnz);

    int *drp = dcopy(rowptr), *dcol = dcopy(col), *dccol = dcopy(ccol), *dcrow = dcopy(crow);
    float *dval = dcopy(val), *dcval = dcopy(cval), *dres = dcopy(resid);
    float *dbad = dnew<float>(VOCAB), *dfix = dnew<float>(VOCAB);
    LAUNCH(xt_resid_by_doc, 132 * 8, 256, drp, dcol, dval, dres, dbad, NDOCS);
    const int warps = (nnz + CHUNK - 1) / CHUNK;
    LAUNCH(xt_resid_by_word, (warps + 7) / 8, 256, dccol, dcrow, dcval, dres, dfix, nnz);
    CK(cudaDeviceSynchronize());
    return verdict("131-tfidf-grad-stopword-cols", hcopy(dbad, VOCAB), hcopy(dfix, VOCAB), 1e-3);
}
