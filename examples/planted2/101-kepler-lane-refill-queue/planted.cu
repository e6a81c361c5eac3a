// 101-kepler-lane-refill-queue. Planted: atomic contention. Kepler's equation E - e sin E = M for 12M orbits by
// Newton (1 to 16 steps, more for eccentric orbits) in a persistent grid with per-lane refill: each loop trip
// does one Newton step, and a lane whose orbit has converged takes the next one from a global work counter,
// `i = atomicAdd(&next, 1)`, so the warp stays full whatever the steps per orbit. ptxas merges the refilling
// lanes of a trip into one ATOM (VOTEU/POPC/ATOMG/SHFL), but some lane refills on nearly every trip: ~1.2M
// returning atomics on one address, one per warp per Newton step, and the whole warp waits for its own each trip.
// Fixed twin: the same trips, with lanes refilled from a warp-private batch of 256 orbits (ballot + popc rank);
// lane 0 fetches a new batch with one atomicAdd when it runs short: 49K atomics.
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
#define ORBITS (3 << 22)
#define THREADS 256
#define BATCH 256
#define MAX_STEPS 16
#define FULL 0xffffffffu

struct Orbit { float e, M, E; int steps; };

__device__ __forceinline__ void start(Orbit& o, float2 em) {
    o.e = em.x; o.M = em.y; o.E = em.x < 0.8f ? em.y : copysignf(3.14159265f, em.y); o.steps = 0;
}

// one Newton step on E - e sin E - M; true once converged (or out of steps)
__device__ __forceinline__ bool newton_step(Orbit& o) {
    float s, c;
    __sincosf(o.E, &s, &c);
    const float d = (o.E - o.e * s - o.M) / (1.f - o.e * c);
    o.E -= d;
    return fabsf(d) < 1e-6f || ++o.steps == MAX_STEPS;
}

extern "C" __global__ void kepler_refill_per_lane(const float2* __restrict__ orbits, float* __restrict__ ecc_anom,
                                                  int* next, int n) {
    int i = -1;  // the orbit this lane holds, -1 when it needs one
    Orbit o;
    for (;;) {
        if (i < 0) {
            i = atomicAdd(next, 1);  // PLANTED
            if (i >= n) break;
            start(o, orbits[i]);
        }
        if (newton_step(o)) { ecc_anom[i] = o.E; i = -1; }
    }
}

extern "C" __global__ void kepler_refill_per_warp(const float2* __restrict__ orbits, float* __restrict__ ecc_anom,
                                                  int* next, int n) {
    const int lane = threadIdx.x & 31;
    const unsigned below = (1u << lane) - 1;
    int batch = 0, left = 0;  // warp-uniform: the next orbit of the warp's batch and how many it has left
    int i = -1;               // -1: needs an orbit; >= n: the queue is drained
    Orbit o;
    for (;;) {
        const unsigned want = __ballot_sync(FULL, i < 0);
        if (want) {
            const int cnt = __popc(want), rank = __popc(want & below);
            int idx;
            if (cnt <= left) {
                idx = batch + rank;
                batch += cnt; left -= cnt;
            } else {
                int fresh = 0;
                if (lane == 0) fresh = atomicAdd(next, BATCH);
                fresh = __shfl_sync(FULL, fresh, 0);
                idx = rank < left ? batch + rank : fresh + rank - left;
                batch = fresh + cnt - left; left = BATCH - (cnt - left);
            }
            if (i < 0) {
                i = idx < n ? idx : n;
                if (i < n) start(o, orbits[i]);
            }
        }
        if (__all_sync(FULL, i >= n)) break;
        if (i < n && newton_step(o)) { ecc_anom[i] = o.E; i = -1; }
    }
}

int main() {
    // most orbits nearly circular, a tail up to e = 0.97 (those take the most Newton steps)
    std::vector<float2> ho(ORBITS);
    for (auto& o : ho) { float u = frand(); o.x = 0.97f * u * u * u; o.y = (frand() * 2.f - 1.f) * 3.14159265f; }
    float2* dorb = dcopy(ho);
    float *dbad = dnew<float>(ORBITS), *dfix = dnew<float>(ORBITS);
    int *next_bad = dnew<int>(1), *next_fix = dnew<int>(1);
    int sms = 0, per_sm_bad = 0, per_sm_fix = 0;
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm_bad, kepler_refill_per_lane, THREADS, 0));
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm_fix, kepler_refill_per_warp, THREADS, 0));
    LAUNCH(kepler_refill_per_lane, sms * per_sm_bad, THREADS, dorb, dbad, next_bad, ORBITS);
    LAUNCH(kepler_refill_per_warp, sms * per_sm_fix, THREADS, dorb, dfix, next_fix, ORBITS);
    CK(cudaDeviceSynchronize());
    return verdict("101-kepler-lane-refill-queue", hcopy(dbad, ORBITS), hcopy(dfix, ORBITS), 1e-6);
}
