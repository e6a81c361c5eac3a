// 111-unpad-rows-thread-per-token. Planted: uncoalesced row copy. Removing the padding of a right-padded batch
// (FlashAttention's unpad_input: 512 sequences x 1024 positions, 128 floats a token, about 62% kept): a
// 128-token tile a block, kept flags counted with ballots and the tile's output offset found by decoupled
// look-back (ticket order), then each thread copies its own token's row, so the 32 lanes of every load and store
// instruction touch 32 rows 512 bytes apart: 32 sectors a request where 4 would do, for the reads and the writes.
// Fixed twin: the same scan; the tile's kept tokens are listed in shared memory and each warp copies whole rows,
// lane c taking floats c, c+32, ...: the same 4-byte accesses, 4 sectors a request.
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
#define BATCH 512
#define SEQ 1024
#define TOKENS (BATCH * SEQ)
#define D 128                      // floats a token
#define TILE 128                   // tokens a block, a thread a token
#define TILES (TOKENS / TILE)
#define FULL 0xffffffffu
#define ST_AGG 1ull                // descriptor high word: 0 not ready, 1 aggregate, 2 inclusive prefix
#define ST_PRE 2ull

__device__ __forceinline__ unsigned long long ld_desc(const unsigned long long* d, int t) {
    return *(const volatile unsigned long long*)&d[t];
}
__device__ __forceinline__ void st_desc(unsigned long long* d, int t, unsigned long long st, unsigned v) {
    *(volatile unsigned long long*)&d[t] = (st << 32) | v;
}

// Warp 0: the number of kept tokens in the tiles before `tile`.
__device__ unsigned look_back(const unsigned long long* desc, int tile) {
    const int lane = threadIdx.x & 31;
    unsigned excl = 0;
    for (int base = tile - 32;; base -= 32) {
        const int t = base + lane;
        unsigned long long d = t < 0 ? ST_PRE << 32 : ld_desc(desc, t);
        for (int ns = 8; (d >> 32) == 0; ns = min(ns * 2, 256)) { __nanosleep(ns); d = ld_desc(desc, t); }
        const unsigned pre = __ballot_sync(FULL, (d >> 32) == ST_PRE);
        const int top = pre ? 31 - __clz(pre) : 0;
        unsigned v = lane >= top ? (unsigned)d : 0u;
#pragma unroll
        for (int o = 16; o; o >>= 1) v += __shfl_xor_sync(FULL, v, o);
        excl += v;
        if (pre) return excl;
    }
}

// This thread's token and whether it is kept, its output row, the tile's first output row and kept count;
// writes indices[] and lists the tile's kept tokens in order in s_tok.
__device__ __forceinline__ void unpad_scan(const unsigned char* __restrict__ mask, unsigned long long* desc, unsigned* ticket,
                                           int* __restrict__ indices, int* total, int* s_tok,
                                           int& token, bool& keep, int& row, int& first_row, int& kept) {
    __shared__ int s_tile, s_warp[TILE / 32];
    __shared__ unsigned s_prefix;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (threadIdx.x == 0) s_tile = atomicAdd(ticket, 1u);
    __syncthreads();
    const int tile = s_tile;
    token = tile * TILE + threadIdx.x;
    keep = mask[token] != 0;
    const unsigned b = __ballot_sync(FULL, keep);
    if (lane == 0) s_warp[warp] = __popc(b);
    __syncthreads();
    int off = 0;
    kept = 0;
#pragma unroll
    for (int w = 0; w < TILE / 32; ++w) { const int c = s_warp[w]; off += w < warp ? c : 0; kept += c; }
    const int local = off + __popc(b & ((1u << lane) - 1u));
    if (keep) s_tok[local] = token;
    if (warp == 0) {
        unsigned excl = 0;
        if (tile == 0) {
            if (lane == 0) st_desc(desc, 0, ST_PRE, kept);
        } else {
            if (lane == 0) st_desc(desc, tile, ST_AGG, kept);
            excl = look_back(desc, tile);
            if (lane == 0) st_desc(desc, tile, ST_PRE, excl + kept);
        }
        if (lane == 0) s_prefix = excl;
    }
    __syncthreads();
    first_row = (int)s_prefix;
    row = first_row + local;
    if (keep) indices[row] = token;
    if (tile == TILES - 1 && threadIdx.x == 0) *total = first_row + kept;
}

extern "C" __global__ void __launch_bounds__(TILE) unpad_rows_per_thread(const float* __restrict__ hidden, const unsigned char* __restrict__ mask,
        float* __restrict__ out, int* __restrict__ indices, unsigned long long* desc, unsigned* ticket, int* total) {
    __shared__ int s_tok[TILE];
    int token, row, first_row, kept;
    bool keep;
    unpad_scan(mask, desc, ticket, indices, total, s_tok, token, keep, row, first_row, kept);
    if (keep)
        for (int c = 0; c < D; ++c) out[(size_t)row * D + c] = hidden[(size_t)token * D + c];  // PLANTED
}

extern "C" __global__ void __launch_bounds__(TILE) unpad_rows_per_warp(const float* __restrict__ hidden, const unsigned char* __restrict__ mask,
        float* __restrict__ out, int* __restrict__ indices, unsigned long long* desc, unsigned* ticket, int* total) {
    __shared__ int s_tok[TILE];
    int token, row, first_row, kept;
    bool keep;
    unpad_scan(mask, desc, ticket, indices, total, s_tok, token, keep, row, first_row, kept);
    const int lane = threadIdx.x & 31;
#pragma unroll 2
    for (int k = threadIdx.x >> 5; k < kept; k += TILE / 32) {
        const float* src = hidden + (size_t)s_tok[k] * D;
        float* dst = out + (size_t)(first_row + k) * D;
#pragma unroll
        for (int c = lane; c < D; c += 32) dst[c] = src[c];
    }
}

int main() {
    std::vector<unsigned char> hm(TOKENS);
    std::vector<int> ref_idx;
    for (int b = 0; b < BATCH; ++b) {  // right padding: lengths from SEQ/4 to SEQ
        const int len = SEQ / 4 + (int)((urand() >> 8) % (3 * SEQ / 4 + 1));
        for (int p = 0; p < SEQ; ++p) {
            hm[(size_t)b * SEQ + p] = p < len;
            if (p < len) ref_idx.push_back(b * SEQ + p);
        }
    }
    const int kept = (int)ref_idx.size();
    std::vector<float> hh((size_t)TOKENS * D);
    for (auto& v : hh) v = frand() - 0.5f;
    float* dh = dcopy(hh);
    unsigned char* dm = dcopy(hm);
    float *o1 = dnew<float>((size_t)kept * D), *o2 = dnew<float>((size_t)kept * D);
    int *i1 = dnew<int>(kept), *i2 = dnew<int>(kept), *tot = dnew<int>(2);
    unsigned long long *desc1 = dnew<unsigned long long>(TILES), *desc2 = dnew<unsigned long long>(TILES);
    unsigned* tickets = dnew<unsigned>(2);
    unpad_rows_per_thread<<<TILES, TILE>>>(dh, dm, o1, i1, desc1, tickets, tot);
    CK(cudaGetLastError());
    unpad_rows_per_warp<<<TILES, TILE>>>(dh, dm, o2, i2, desc2, tickets + 1, tot + 1);
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    std::vector<int> t = hcopy(tot, 2), idx = hcopy(i1, kept);
    std::vector<float> r1 = hcopy(o1, (size_t)kept * D), r2 = hcopy(o2, (size_t)kept * D);
    bool ok = t[0] == kept && t[1] == kept && idx == ref_idx;
    for (int r = 0; ok && r < kept; r += 1009) ok = !memcmp(&r1[(size_t)r * D], &hh[(size_t)ref_idx[r] * D], D * sizeof(float));
    if (!ok) { printf("MISMATCH 111-unpad-rows-thread-per-token: per-thread kernel differs from the host (kept %d %d of %d)\n", t[0], t[1], kept); return 1; }
    std::vector<int> idx2 = hcopy(i2, kept);
    r1.reserve(r1.size() + kept);
    r2.reserve(r2.size() + kept);
    for (int r = 0; r < kept; ++r) { r1.push_back((float)idx[r]); r2.push_back((float)idx2[r]); }
    return verdict("111-unpad-rows-thread-per-token", r1, r2, 0.0);
}
