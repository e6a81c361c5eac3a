// 110-edit-distance-diagonal-syncs. Planted: barrier-bound wavefront. Levenshtein distances of 24576 read /
// reference-window pairs (128 bases each, the verification step of a read mapper), one 128-thread block a pair
// and a thread a DP row: the block sweeps the 255 anti-diagonals with a __syncthreads after each, and a thread's
// work between two barriers is one cell (four shared loads, two mins, a store), with half the rows idle on
// average (the triangle ends). The warps spend most of their time waiting at the barrier.
// Fixed twin: the same cells in the same dependency order, one warp a pair: a lane owns 4 rows and sweeps the
// columns one step behind the lane above, handing its bottom cell down with a shuffle (no barrier).
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
#define PAIRS 24576
#define LEN 128                    // query and target length
#define FULL 0xffffffffu

extern "C" __global__ void __launch_bounds__(LEN) edit_distance_diagonals(const char* __restrict__ q, const char* __restrict__ t,
                                                                          int* __restrict__ dist) {
    __shared__ int diag[3][LEN + 1];  // anti-diagonal d holds H[i][d - i] at diag[d % 3][i]
    __shared__ char ts[LEN];
    const int i = threadIdx.x + 1;    // this thread's DP row
    const char qc = q[(size_t)blockIdx.x * LEN + threadIdx.x];
    ts[threadIdx.x] = t[(size_t)blockIdx.x * LEN + threadIdx.x];
    if (threadIdx.x == 0) { diag[0][0] = 0; diag[1][0] = 1; diag[1][1] = 1; }
    __syncthreads();
    for (int d = 2; d <= 2 * LEN; ++d) {
        int* cur = diag[d % 3];
        const int* p1 = diag[(d + 2) % 3];
        const int* p2 = diag[(d + 1) % 3];
        const int j = d - i;
        if (j >= 1 && j <= LEN) cur[i] = min(min(p1[i - 1], p1[i]) + 1, p2[i - 1] + (qc != ts[j - 1]));
        else if (j == 0) cur[i] = i;
        if (threadIdx.x == 0 && d <= LEN) cur[0] = d;
        __syncthreads();  // PLANTED
    }
    if (threadIdx.x == LEN - 1) dist[blockIdx.x] = diag[(2 * LEN) % 3][LEN];
}

extern "C" __global__ void __launch_bounds__(256) edit_distance_lanes(const char* __restrict__ q, const char* __restrict__ t,
                                                                     int* __restrict__ dist) {
    const int lane = threadIdx.x & 31, pair = blockIdx.x * 8 + (threadIdx.x >> 5);
    const unsigned qw = reinterpret_cast<const unsigned*>(q + (size_t)pair * LEN)[lane];  // rows 4*lane+1 .. +4
    const unsigned tw = reinterpret_cast<const unsigned*>(t + (size_t)pair * LEN)[lane];  // t[4*lane .. 4*lane+3]
    int left[4];                    // H[row][j - 1] of this lane's rows
#pragma unroll
    for (int r = 0; r < 4; ++r) left[r] = 4 * lane + r + 1;
    int up_left = 4 * lane;         // H[4*lane][j - 1], the row above this lane's first row
    int bottom = 0;                 // H[4*lane + 4][j] of the last column done, for the lane below
    for (int s = 0; s < LEN + 31; ++s) {
        const int j = s - lane + 1;  // this lane's column at step s
        int up = __shfl_up_sync(FULL, bottom, 1);
        const unsigned tj = __shfl_sync(FULL, tw, ((j - 1) >> 2) & 31);
        if (lane == 0) up = j;
        if (j >= 1 && j <= LEN) {
            const int tc = (tj >> (8 * ((j - 1) & 3))) & 0xff;
            int dg = up_left, above = up;
#pragma unroll
            for (int r = 0; r < 4; ++r) {
                const int h = min(min(above, left[r]) + 1, dg + (int)(((qw >> (8 * r)) & 0xff) != (unsigned)tc));
                dg = left[r];
                left[r] = h;
                above = h;
            }
            up_left = up;
            bottom = above;
        }
    }
    if (lane == 31) dist[pair] = bottom;
}

static int host_distance(const char* a, const char* b) {
    int h[LEN + 1];
    for (int j = 0; j <= LEN; ++j) h[j] = j;
    for (int i = 1; i <= LEN; ++i) {
        int dg = h[0];
        h[0] = i;
        for (int j = 1; j <= LEN; ++j) {
            const int up = h[j];
            h[j] = std::min(std::min(up, h[j - 1]) + 1, dg + (a[i - 1] != b[j - 1]));
            dg = up;
        }
    }
    return h[LEN];
}

int main() {
    const char bases[4] = {'A', 'C', 'G', 'T'};
    std::vector<char> hq((size_t)PAIRS * LEN), ht((size_t)PAIRS * LEN);
    for (int p = 0; p < PAIRS; ++p) {  // the window is the read with about 8% substitutions, insertions, deletions
        char* a = &hq[(size_t)p * LEN];
        char* b = &ht[(size_t)p * LEN];
        for (int i = 0; i < LEN; ++i) a[i] = bases[urand() >> 30];
        for (int i = 0, j = 0; j < LEN;) {
            const unsigned e = (urand() >> 8) % 100;
            if (e < 3) b[j++] = bases[urand() >> 30];                      // insertion
            else if (e < 5) ++i;                                            // deletion
            else if (e < 8) { b[j++] = bases[urand() >> 30]; ++i; }         // substitution
            else b[j++] = i < LEN ? a[i++] : bases[urand() >> 30];
        }
    }
    char *dq = dcopy(hq), *dt = dcopy(ht);
    int *d1 = dnew<int>(PAIRS), *d2 = dnew<int>(PAIRS);
    edit_distance_diagonals<<<PAIRS, LEN>>>(dq, dt, d1);
    CK(cudaGetLastError());
    edit_distance_lanes<<<PAIRS / 8, 256>>>(dq, dt, d2);
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    std::vector<int> r1 = hcopy(d1, PAIRS), r2 = hcopy(d2, PAIRS);
    for (int p = 0; p < PAIRS; p += 101)
        if (r1[p] != host_distance(&hq[(size_t)p * LEN], &ht[(size_t)p * LEN])) {
            printf("MISMATCH 110-edit-distance-diagonal-syncs: pair %d distance %d, host %d\n", p, r1[p],
                   host_distance(&hq[(size_t)p * LEN], &ht[(size_t)p * LEN]));
            return 1;
        }
    return verdict("110-edit-distance-diagonal-syncs", std::vector<float>(r1.begin(), r1.end()),
                   std::vector<float>(r2.begin(), r2.end()), 0.0);
}
