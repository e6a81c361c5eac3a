// 136-frame-colour-hist-hot-bins. Planted: global atomic contention. Centre-weighted (Epanechnikov) 16x16x16 colour
// histograms of two 4K video frames (the target model of a mean-shift tracker, or a shot-change detector's
// signature). A thread a pixel adds its weight to its frame's bin with a global float atomic. A natural frame uses
// few colours: about 170 of the 8192 bins are hit, the ten largest (sky, grass, road) take 2-7% of the pixels
// each, and neighbouring pixels share bins, so each of those addresses takes 0.3-1.2M adds one after another.
// Fixed twin: the lanes of a warp that share a bin are combined first (__match_any_sync and a shuffle tree over the
// peers), the leader adds the sum to a per-block shared-memory histogram, and each block adds its non-zero bins
// to its frame's histogram once at the end.
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
#define W 3840
#define H 2160
#define FRAMES 2
#define BINS 4096            // 16 levels of R, G and B
#define NO_BIN BINS          // a pixel outside the kernel's support
#define FULL 0xFFFFFFFFu

__device__ __forceinline__ unsigned colour_bin(unsigned rgba) {
    return ((rgba >> 4) & 0xFu) | ((rgba >> 8) & 0xF0u) | ((rgba >> 12) & 0xF00u);
}

// Epanechnikov profile over the ellipse inscribed in the frame: 1 - r^2 inside, 0 outside
__device__ __forceinline__ float kernel_weight(unsigned x, unsigned y) {
    float dx = (x + 0.5f) * (2.0f / W) - 1.0f, dy = (y + 0.5f) * (2.0f / H) - 1.0f;
    return 1.0f - (dx * dx + dy * dy);
}

// grid (W * H / 256, FRAMES), 256 threads: one pixel a thread
extern "C" __global__ void colour_hist_global(const unsigned* __restrict__ frames, float* __restrict__ hist) {
    unsigned p = blockIdx.x * blockDim.x + threadIdx.x, f = blockIdx.y;
    unsigned y = p / W, x = p - y * W;
    float w = kernel_weight(x, y);
    if (w > 0.0f) atomicAdd(&hist[f * BINS + colour_bin(frames[(size_t)f * W * H + p])], w);  // PLANTED
}

// sum of v over the lanes in peers (which include this lane); the lowest peer ends with the total.
// Each round a lane adds the value of the next peer above it that is still in play; then the peers at odd
// positions drop out and the positions halve, a tree over each group of peers.
__device__ __forceinline__ float sum_over_peers(unsigned peers, float v, unsigned lane) {
    unsigned pos = __popc(peers & ((1u << lane) - 1u));
    unsigned above = peers & (0xFFFFFFFEu << lane);
    while (__any_sync(FULL, above)) {
        int next = __ffs(above) - 1;
        float t = __shfl_sync(FULL, v, next < 0 ? lane : next);
        if (next >= 0) v += t;
        above &= ~__ballot_sync(FULL, pos & 1u);
        pos >>= 1;
    }
    return v;
}

// grid (blocks per frame, FRAMES), 1024 threads: each warp takes 32 neighbouring pixels at a time
extern "C" __global__ void colour_hist_warp_block(const unsigned* __restrict__ frames, float* __restrict__ hist) {
    __shared__ float local[BINS];
    for (unsigned k = threadIdx.x; k < BINS; k += blockDim.x) local[k] = 0.0f;
    __syncthreads();
    const unsigned f = blockIdx.y, lane = threadIdx.x & 31u;
    const unsigned* frame = frames + (size_t)f * W * H;
    const unsigned warps = gridDim.x * (blockDim.x / 32u);
    for (unsigned g = blockIdx.x * (blockDim.x / 32u) + threadIdx.x / 32u; g < W * H / 32u; g += warps) {
        unsigned p = g * 32u + lane, y = p / W, x = p - y * W;
        float w = kernel_weight(x, y);
        unsigned bin = w > 0.0f ? colour_bin(frame[p]) : NO_BIN;
        unsigned peers = __match_any_sync(FULL, bin);
        float s = sum_over_peers(peers, w, lane);
        if (bin != NO_BIN && lane == (unsigned)__ffs(peers) - 1u) atomicAdd(&local[bin], s);
    }
    __syncthreads();
    for (unsigned k = threadIdx.x; k < BINS; k += blockDim.x)
        if (local[k] != 0.0f) atomicAdd(&hist[f * BINS + k], local[k]);
}

// ---- host: a procedural outdoor scene (sky with clouds, hills, grass, a road, two buildings), panning slowly ----
struct ValueNoise {  // smooth noise: random values on a coarse lattice, bilinear in between
    int gw, gh; std::vector<float> v;
    ValueNoise(int gw_, int gh_) : gw(gw_), gh(gh_), v((gw_ + 1) * (gh_ + 1)) { for (auto& e : v) e = frand(); }
    float at(float x, float y) const {
        float fx = x * gw, fy = y * gh;
        int ix = fx < gw - 1 ? (int)fx : gw - 1, iy = fy < gh - 1 ? (int)fy : gh - 1;
        float tx = fx - ix, ty = fy - iy;
        const float* r0 = &v[iy * (gw + 1) + ix]; const float* r1 = r0 + gw + 1;
        return (r0[0] * (1 - tx) + r0[1] * tx) * (1 - ty) + (r1[0] * (1 - tx) + r1[1] * tx) * ty;
    }
};
static unsigned to8(float v) { return v < 0.f ? 0u : v > 255.f ? 255u : (unsigned)v; }

static void render(std::vector<unsigned>& img) {
    ValueNoise clouds(24, 10), grass(96, 54), fine(480, 270), forest(200, 20);
    for (int f = 0; f < FRAMES; ++f)
        for (int y = 0; y < H; ++y)
            for (int x = 0; x < W; ++x) {
                float u = (x + 37.f * f) / (W + 40.f * FRAMES), v = (float)y / H;
                float hill = 0.36f + 0.04f * sinf(6.f * u + 0.2f * f) + 0.02f * sinf(17.f * u), horizon = 0.42f;
                float n = frand() - 0.5f, r, g, b;
                if (v < hill) {  // sky: a vertical gradient with clouds
                    float t = v / hill;
                    r = 62 + 118 * t; g = 112 + 92 * t; b = 204 + 34 * t;
                    float c = clouds.at(u, v / hill);
                    if (c > 0.62f) { float a = fminf(1.f, (c - 0.62f) * 5.f); r += a * (228 - r); g += a * (230 - g); b += a * (236 - b); }
                    r += 6 * n; g += 6 * n; b += 6 * n;
                } else if (v < horizon) {  // wooded hills
                    float s = forest.at(u, (v - hill) / (horizon - hill));
                    r = 38 + 30 * s + 8 * n; g = 66 + 40 * s + 8 * n; b = 48 + 20 * s + 8 * n;
                } else {  // grass, a road in perspective with a dashed centre line, two buildings
                    float d = (v - horizon) / (1 - horizon), half = 0.02f + 0.30f * d, cx = 0.5f + 0.06f * d, ux = (float)x / W;
                    float s = grass.at(u, v), s2 = fine.at(u, v);
                    r = 64 + 40 * s + 20 * s2 + 14 * n; g = 118 + 50 * s + 25 * s2 + 14 * n; b = 36 + 25 * s + 10 * s2 + 14 * n;
                    if (fabsf(ux - cx) < half) {
                        r = 92 + 10 * s2 + 8 * n; g = 93 + 10 * s2 + 8 * n; b = 99 + 10 * s2 + 8 * n;
                        if (fabsf(ux - cx) < 0.004f + 0.01f * d && fmodf(d * 40.f, 1.f) < 0.5f) { r = 232 + 6 * n; g = 232 + 6 * n; b = 226 + 6 * n; }
                    }
                    if (ux > 0.08f && ux < 0.22f && v < horizon + 0.1f) { r = 150 + 20 * s2 + 8 * n; g = 62 + 10 * s2 + 8 * n; b = 44 + 8 * n; }
                    if (ux > 0.70f && ux < 0.86f && v < horizon + 0.14f) { r = 176 + 30 * s + 6 * n; g = 170 + 30 * s + 6 * n; b = 160 + 25 * s + 6 * n; }
                }
                float k = 1.f + 0.03f * f;  // exposure drifts a little from frame to frame
                img[((size_t)f * H + y) * W + x] = to8(r * k) | to8(g * k) << 8 | to8(b * k) << 16 | 255u << 24;
            }
}

int main() {
    std::vector<unsigned> himg((size_t)FRAMES * W * H);
    render(himg);
    unsigned* dimg = dcopy(himg);
    float *dbad = dnew<float>(FRAMES * BINS), *dfix = dnew<float>(FRAMES * BINS);
    int sms = 0;
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));

    colour_hist_global<<<dim3(W * H / 256, FRAMES), 256>>>(dimg, dbad);
    CK(cudaGetLastError());
    // two 1024-thread blocks an SM, the grid split evenly over the frames: one wave
    colour_hist_warp_block<<<dim3(2 * sms / FRAMES, FRAMES), 1024>>>(dimg, dfix);
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    return verdict("136-frame-colour-hist-hot-bins", hcopy(dbad, FRAMES * BINS), hcopy(dfix, FRAMES * BINS), 1e-3);
}
