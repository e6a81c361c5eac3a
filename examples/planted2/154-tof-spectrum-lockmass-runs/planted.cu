// 154-tof-spectrum-lockmass-runs. Planted: FP32 atomics on a handful of hot bins, whole warps on one bin.
// Sums 2048 scans of a time-of-flight mass spectrometer into one 400K-bin spectrum. Each detector event is a
// (time bin, amplitude) pair; the digitizer emits a scan's 4096 events sorted by bin. One thread per event
// loads it, scales the amplitude by the bin's detector gain and adds it to the spectrum with FP32 atomicAdd.
// The continuously infused lock-mass calibrant (22% of all events), three solvent-cluster ions and the
// analyte (65% together) each fall in about 8 bins, so warps in those peaks send 32 updates of one or two bins
// and the L2 slices holding them apply 0.75-1.8M updates each, one after another, while the rest idles.
// Fixed twin: the same loads; equal bins in adjacent lanes (the sorted runs) are summed in the warp by a
// segmented shuffle reduction, and the first lane of each run adds the sum: one atomic per run, not per event.
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
static const int NBIN = 400000, SCANS = 2048, PER_SCAN = 4096;

extern "C" __global__ void tof_accumulate(int n, const unsigned* __restrict__ bin, const float* __restrict__ amp,
                                          const float* __restrict__ gain, float* spec) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    unsigned b = bin[i];
    atomicAdd(&spec[b], amp[i] * gain[b]);  // PLANTED
}

// Twin: sum runs of equal bins within the warp (segmented suffix sums), one atomic per run.
extern "C" __global__ void tof_accumulate_runs(int n, const unsigned* __restrict__ bin, const float* __restrict__ amp,
                                               const float* __restrict__ gain, float* spec) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int lane = threadIdx.x & 31;
    unsigned b = 0xffffffffu;
    float v = 0.f;
    if (i < n) { b = bin[i]; v = amp[i] * gain[b]; }
    unsigned prev = __shfl_up_sync(0xffffffffu, b, 1);
    bool head = lane == 0 || prev != b;
    unsigned heads = __ballot_sync(0xffffffffu, head);
    unsigned above = heads & ~((2u << lane) - 1u);  // run heads after this lane
    int end = above ? __ffs(above) - 1 : 32;        // first lane of the next run
#pragma unroll
    for (int off = 1; off < 32; off <<= 1) {
        float t = __shfl_down_sync(0xffffffffu, v, off);
        if (lane + off < end) v += t;
    }
    if (head && b != 0xffffffffu) atomicAdd(&spec[b], v);
}

// Approximately normal (Irwin-Hall of 4 uniforms), unit variance.
static float gauss() { return (frand() + frand() + frand() + frand() - 2.0f) * 1.7320508f; }

int main() {
    const int n = SCANS * PER_SCAN;
    const int npk = 5;
    const float pk_center[npk] = {121004.f, 48213.f, 77531.f, 201877.f, 306442.f};  // lock mass first
    const float pk_share[npk] = {0.22f, 0.13f, 0.11f, 0.10f, 0.09f};                  // 65% of events
    const int nminor = 2000;                                                          // 25%: minor peaks
    std::vector<float> minor(nminor);                                                 // 10%: uniform noise
    for (auto& c : minor) c = 1000.f + frand() * (NBIN - 2000);
    std::vector<float> gain(NBIN);
    for (auto& g : gain) g = 0.9f + 0.2f * frand();
    std::vector<unsigned> bin(n);
    std::vector<float> amp(n);
    std::vector<unsigned long long> scan(PER_SCAN);
    for (int s = 0; s < SCANS; ++s) {
        for (int k = 0; k < PER_SCAN; ++k) {
            float r = frand(), c = -1.f;
            for (int p = 0; p < npk && c < 0; ++p) { if (r < pk_share[p]) c = pk_center[p]; else r -= pk_share[p]; }
            unsigned b;
            if (c < 0 && r < 0.25f) c = minor[urand() % nminor];
            if (c >= 0) b = (unsigned)lrintf(c + 1.5f * gauss());  // peaks: sigma 1.5 bins
            else b = urand() % NBIN;
            float a = 0.5f + frand();                               // single-ion pulse height
            unsigned abits; memcpy(&abits, &a, 4);
            scan[k] = ((unsigned long long)b << 32) | abits;
        }
        std::sort(scan.begin(), scan.end());  // the digitizer emits a scan in time order
        for (int k = 0; k < PER_SCAN; ++k) {
            bin[(size_t)s * PER_SCAN + k] = (unsigned)(scan[k] >> 32);
            unsigned abits = (unsigned)scan[k];
            memcpy(&amp[(size_t)s * PER_SCAN + k], &abits, 4);
        }
    }
    unsigned* d_bin = dcopy(bin);
    float* d_amp = dcopy(amp);
    float* d_gain = dcopy(gain);
    float* d_s0 = dnew<float>(NBIN);
    float* d_s1 = dnew<float>(NBIN);
    LAUNCH(tof_accumulate, n / 256, 256, n, d_bin, d_amp, d_gain, d_s0);
    LAUNCH(tof_accumulate_runs, n / 256, 256, n, d_bin, d_amp, d_gain, d_s1);
    CK(cudaDeviceSynchronize());
    std::vector<float> s0 = hcopy(d_s0, NBIN), s1 = hcopy(d_s1, NBIN);
    printf("lock-mass bin %d: %.6g\n", (int)pk_center[0], s1[(int)pk_center[0]]);
    return verdict("154-tof-spectrum-lockmass-runs", s0, s1, 1e-3);
}
