// 135-groupby-merchant-skew. Planted: global atomic contention. GROUP BY merchant: SUM(amount) (double) and
// COUNT(*) over 6M card transactions whose merchants follow a Zipf law (s = 1.3 over 1M merchants: the largest
// marketplace takes 19% of the rows, the top five 42%, the top thousand 89%). One thread a row adds its amount and
// 1 with two global atomics, so every big merchant's sum and count take their rows one after another in their L2
// slices: about 1.2M serialized adds each for the largest, hundreds of thousands for the next ones.
// Fixed twin: a warp first combines its rows of the same merchant (__match_any_sync, a shuffle tree), then each
// block aggregates in a shared-memory hash table (4096 slots of key, double sum, count; 8 linear probes); a merchant
// finding no slot goes straight to global memory (cold ones, under 1% of rows), and the block adds its occupied
// slots to the global arrays once at the end.
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
#define MERCHANTS (1u << 20)
#define TXNS (6u << 20)
#define ZIPF_S 1.3
#define LOG_SLOTS 12
#define SLOTS (1u << LOG_SLOTS)
#define MAX_PROBES 8
#define EMPTY_KEY 0xFFFFFFFFu
#define FULL 0xFFFFFFFFu

extern "C" __global__ void groupby_sum_count_atomic(const unsigned* __restrict__ merchant, const double* __restrict__ amount,
                                                    double* __restrict__ total, unsigned* __restrict__ rows, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        unsigned m = merchant[i];
        atomicAdd(&total[m], amount[i]); atomicAdd(&rows[m], 1u);  // PLANTED
    }
}

// sum of v over the lanes in peers (which include this lane); the lowest peer ends with the total.
// Each round a lane adds the value of the next peer above it that is still in play; then the peers at odd
// positions drop out and the positions halve, a tree over each group of peers.
__device__ __forceinline__ double sum_over_peers(unsigned peers, double v, unsigned lane) {
    unsigned pos = __popc(peers & ((1u << lane) - 1u));
    unsigned above = peers & (0xFFFFFFFEu << lane);
    while (__any_sync(FULL, above)) {
        int next = __ffs(above) - 1;
        double t = __shfl_sync(FULL, v, next < 0 ? lane : next);
        if (next >= 0) v += t;
        above &= ~__ballot_sync(FULL, pos & 1u);
        pos >>= 1;
    }
    return v;
}

// n must be a multiple of 32 (whole warps stay in the loop together)
extern "C" __global__ void groupby_sum_count_block_hash(const unsigned* __restrict__ merchant, const double* __restrict__ amount,
                                                        double* __restrict__ total, unsigned* __restrict__ rows, unsigned n) {
    extern __shared__ double smem[];
    double* slot_sum = smem;                                         // SLOTS doubles
    unsigned* slot_key = reinterpret_cast<unsigned*>(smem + SLOTS);  // SLOTS keys
    unsigned* slot_rows = slot_key + SLOTS;                          // SLOTS counts
    for (unsigned s = threadIdx.x; s < SLOTS; s += blockDim.x) { slot_sum[s] = 0.0; slot_key[s] = EMPTY_KEY; slot_rows[s] = 0u; }
    __syncthreads();
    const unsigned lane = threadIdx.x & 31u;
    for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        unsigned m = merchant[i];
        unsigned peers = __match_any_sync(FULL, m);                 // this warp's rows of the same merchant
        double part = sum_over_peers(peers, amount[i], lane);
        if (lane == (unsigned)__ffs(peers) - 1u) {                  // one lane a merchant goes on
            unsigned cnt = __popc(peers), h = (m * 0x9E3779B1u) >> (32 - LOG_SLOTS);
            bool local = false;
            for (unsigned p = 0; p < MAX_PROBES; ++p) {
                unsigned s = (h + p) & (SLOTS - 1);
                unsigned k = reinterpret_cast<volatile unsigned*>(slot_key)[s];
                if (k == EMPTY_KEY) { k = atomicCAS(&slot_key[s], EMPTY_KEY, m); if (k == EMPTY_KEY) k = m; }
                if (k == m) { atomicAdd(&slot_sum[s], part); atomicAdd(&slot_rows[s], cnt); local = true; break; }
            }
            if (!local) { atomicAdd(&total[m], part); atomicAdd(&rows[m], cnt); }  // table full: a cold merchant
        }
    }
    __syncthreads();
    for (unsigned s = threadIdx.x; s < SLOTS; s += blockDim.x) {
        unsigned m = slot_key[s];
        if (m != EMPTY_KEY) { atomicAdd(&total[m], slot_sum[s]); atomicAdd(&rows[m], slot_rows[s]); }
    }
}

int main() {
    // merchants: Zipf(s) ranks (inverse continuous CDF) spread over the id space by an odd multiplier (a bijection
    // mod 2^20); amounts: log-uniform between $1 and about $665, in cents
    std::vector<unsigned> hm(TXNS);
    std::vector<double> ha(TXNS);
    const double zipf_a = pow((double)MERCHANTS, 1.0 - ZIPF_S);
    for (size_t i = 0; i < TXNS; ++i) {
        double x = pow((zipf_a - 1.0) * frand() + 1.0, 1.0 / (1.0 - ZIPF_S));
        unsigned rank = (unsigned)x - 1u;
        if (rank >= MERCHANTS) rank = MERCHANTS - 1;
        hm[i] = (rank * 2654435761u) & (MERCHANTS - 1);
        ha[i] = floor(exp(6.5 * frand()) * 100.0) / 100.0 + 1.0;
    }
    unsigned* dm = dcopy(hm);
    double* da = dcopy(ha);
    double *dsum_bad = dnew<double>(MERCHANTS), *dsum_fix = dnew<double>(MERCHANTS);
    unsigned *drows_bad = dnew<unsigned>(MERCHANTS), *drows_fix = dnew<unsigned>(MERCHANTS);

    int sms = 0;
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    const int smem = SLOTS * (sizeof(double) + 2 * sizeof(unsigned));  // 64 KB: two 1024-thread blocks an SM
    CK(cudaFuncSetAttribute(groupby_sum_count_block_hash, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));

    LAUNCH(groupby_sum_count_atomic, TXNS / 256, 256, dm, da, dsum_bad, drows_bad, TXNS);
    groupby_sum_count_block_hash<<<2 * sms, 1024, smem>>>(dm, da, dsum_fix, drows_fix, TXNS);
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());

    // per merchant: the sum (double, summed in another order by each kernel) and the row count (exact)
    auto sb = hcopy(dsum_bad, MERCHANTS), sf = hcopy(dsum_fix, MERCHANTS);
    auto rb = hcopy(drows_bad, MERCHANTS), rf = hcopy(drows_fix, MERCHANTS);
    std::vector<float> bad(2 * MERCHANTS), fixed(2 * MERCHANTS);
    for (size_t m = 0; m < MERCHANTS; ++m) {
        bad[m] = (float)sb[m]; fixed[m] = (float)sf[m];
        bad[MERCHANTS + m] = (float)rb[m]; fixed[MERCHANTS + m] = (float)rf[m];
    }
    return verdict("135-groupby-merchant-skew", bad, fixed, 1e-5);
}
