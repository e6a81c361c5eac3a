// 156-healthy-gc-binned-fragment-depth. Healthy: read-depth counts per genomic bin and GC stratum.
// Copy-number calling counts aligned fragments per 100-kb bin of a 3.1-Gb genome, split by the fragment's GC
// content (61 strata of 5 bases) so that GC bias can be regressed out afterwards: 6.3M paired-end fragments of
// 300 bases, packed 2 bits a base into five 16-byte planes, with a 32-bit position and an 8-bit mapping quality.
// A thread per fragment loads the position and quality, skips fragments under MAPQ 20, streams the 80 bytes
// of bases with coalesced 16-byte loads, counts G/C bases with popcounts and adds 1 to counts[bin * 61 +
// stratum] (1.9M counters, about 200K of them warm, all L2-resident). Fragments come in sequencer order, so
// lanes of a warp almost never share a counter and one atomic per 85 bytes streamed costs L2 little: the
// kernel runs at DRAM speed.
// Challenger: two fragments a thread (all loads issued first) and lanes with equal counters merged with
// __match_any_sync before the atomic.
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

#define NSTRATA 61
#define BIN_BP 100000u
#define MIN_MAPQ 20
static const int NFRAG = 6 << 20;
static const unsigned GENOME = 3100000000u, NBINS = GENOME / BIN_BP;

__device__ __forceinline__ unsigned gc16(unsigned w) { return __popc((w ^ (w >> 1)) & 0x55555555u); }  // C=01, G=10
__device__ __forceinline__ unsigned gc64(uint4 v) { return gc16(v.x) + gc16(v.y) + gc16(v.z) + gc16(v.w); }

extern "C" __global__ void gc_depth(int n, const uint4* __restrict__ seq, const unsigned* __restrict__ pos,
                                    const unsigned char* __restrict__ mapq, unsigned* counts) {
    int f = blockIdx.x * blockDim.x + threadIdx.x;
    if (f >= n) return;
    unsigned p = pos[f];
    if (mapq[f] < MIN_MAPQ) return;
    unsigned gc = 0;
#pragma unroll
    for (int k = 0; k < 5; ++k) gc += gc64(seq[(size_t)k * n + f]);
    atomicAdd(&counts[(p / BIN_BP) * NSTRATA + gc / 5], 1u);
}

// Challenger: fragments t and t + n/2 per thread, loads first, then warp-merged atomics.
extern "C" __global__ void gc_depth_x2_merged(int n, const uint4* __restrict__ seq, const unsigned* __restrict__ pos,
                                              const unsigned char* __restrict__ mapq, unsigned* counts) {
    int h = n / 2;
    int t = blockIdx.x * blockDim.x + threadIdx.x;  // the grid covers h exactly (h % 256 == 0)
    unsigned p0 = pos[t], p1 = pos[t + h];
    unsigned q0 = mapq[t], q1 = mapq[t + h];
    uint4 a[5], b[5];
#pragma unroll
    for (int k = 0; k < 5; ++k) { a[k] = seq[(size_t)k * n + t]; b[k] = seq[(size_t)k * n + t + h]; }
    unsigned g0 = 0, g1 = 0;
#pragma unroll
    for (int k = 0; k < 5; ++k) { g0 += gc64(a[k]); g1 += gc64(b[k]); }
    unsigned key[2] = {q0 >= MIN_MAPQ ? (p0 / BIN_BP) * NSTRATA + g0 / 5 : 0xffffffffu,
                       q1 >= MIN_MAPQ ? (p1 / BIN_BP) * NSTRATA + g1 / 5 : 0xffffffffu};
    int lane = threadIdx.x & 31;
#pragma unroll
    for (int j = 0; j < 2; ++j) {
        unsigned peers = __match_any_sync(0xffffffffu, key[j]);
        if (key[j] != 0xffffffffu && lane == __ffs(peers) - 1) atomicAdd(&counts[key[j]], (unsigned)__popc(peers));
    }
}

static unsigned gc_host(unsigned w) { return __builtin_popcount((w ^ (w >> 1)) & 0x55555555u); }

int main() {
    const int n = NFRAG;
    if (n % 512) return 1;
    std::vector<uint4> seq((size_t)5 * n);
    std::vector<unsigned> pos(n);
    std::vector<unsigned char> mapq(n);
    const size_t ncnt = (size_t)NBINS * NSTRATA;
    std::vector<float> ref(ncnt, 0.f);
    for (int f = 0; f < n; ++f) {
        pos[f] = (unsigned)(((unsigned long long)urand() * GENOME) >> 32);
        mapq[f] = urand() % 10 ? 60 : urand() % 60;
        unsigned gc = 0;
        for (int k = 0; k < 5; ++k) {  // bases 0..299; 300..319 are padding (A, not counted)
            uint4 v = {urand(), urand(), urand(), urand()};
            if (k == 4) { v.z &= 0x00ffffffu; v.w = 0; }
            seq[(size_t)k * n + f] = v;
            gc += gc_host(v.x) + gc_host(v.y) + gc_host(v.z) + gc_host(v.w);
        }
        if (mapq[f] >= MIN_MAPQ) ref[(pos[f] / BIN_BP) * NSTRATA + gc / 5] += 1.f;
    }
    uint4* d_seq = dcopy(seq);
    unsigned* d_pos = dcopy(pos);
    unsigned char* d_mapq = dcopy(mapq);
    unsigned* d_c0 = dnew<unsigned>(ncnt);
    unsigned* d_c1 = dnew<unsigned>(ncnt);
    LAUNCH(gc_depth, n / 256, 256, n, d_seq, d_pos, d_mapq, d_c0);
    LAUNCH(gc_depth_x2_merged, n / 2 / 256, 256, n, d_seq, d_pos, d_mapq, d_c1);
    CK(cudaDeviceSynchronize());
    std::vector<unsigned> c0 = hcopy(d_c0, ncnt), c1 = hcopy(d_c1, ncnt);
    std::vector<float> a(c0.begin(), c0.end()), b(c1.begin(), c1.end());
    int rc = verdict("156-healthy-gc-binned-fragment-depth", a, ref, 0.0);
    rc |= verdict("156-healthy-gc-binned-fragment-depth(challenger)", b, ref, 0.0);
    return rc;
}
