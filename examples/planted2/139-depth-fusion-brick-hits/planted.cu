// 139-depth-fusion-brick-hits. Planted: global atomic contention on moving targets. The brick-allocation
// pass of a voxel-hashing depth fusion: 64 depth frames (1024x1024, uint16 mm) of a camera walking a room are
// back-projected, one thread a pixel, and each point adds 1 to the hit count of its 16 cm brick (a dense 64^3
// grid of counts). On a wall 2 to 6 m away a brick covers 20 to 55 pixels of a row, so a warp's 32 lanes RED
// one or two counters, and the rows in flight share a few hundred bricks that move on as the frames go by.
// Fixed twin: the same back-projection; __match_any_sync groups the lanes of a warp by brick and one lane of
// each group adds the group's size.
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
#define W 1024
#define H 1024
#define FRAMES 64
#define NPIX (W * H * FRAMES)
#define BRICK 0.16f
#define NB 64
#define THREADS 256
#define FX 700.0f
#define CX 511.5f   // principal point, both axes (cx = cy)

// per frame: camera centre, then the world-frame right, down and forward axes
__constant__ float c_pose[FRAMES][12];

// pixel (u, v) of frame f at depth z (m) -> its brick in the 64^3 grid with its origin at -0.5 m, or -1
__device__ __forceinline__ int brick_of(int f, float u, float v, float z) {
    const float* p = c_pose[f];
    float s = z * (1.0f / FX), x = (u - CX) * s, y = (v - CX) * s;
    float wx = p[0] + x * p[3] + y * p[6] + z * p[9];
    float wy = p[1] + x * p[4] + y * p[7] + z * p[10];
    float wz = p[2] + x * p[5] + y * p[8] + z * p[11];
    int bx = __float2int_rd((wx + 0.5f) * (1.0f / BRICK));
    int by = __float2int_rd((wy + 0.5f) * (1.0f / BRICK));
    int bz = __float2int_rd((wz + 0.5f) * (1.0f / BRICK));
    if ((unsigned)bx >= NB || (unsigned)by >= NB || (unsigned)bz >= NB) return -1;
    return (bz * NB + by) * NB + bx;
}

extern "C" __global__ void brick_hits_atomic(const unsigned short* __restrict__ depth, unsigned* __restrict__ hits) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= NPIX) return;
    unsigned short d = depth[i];
    if (d == 0) return;                                   // no return from the sensor
    int f = i / (W * H), pix = i % (W * H);
    int b = brick_of(f, (float)(pix % W), (float)(pix / W), d * 0.001f);
    if (b >= 0) atomicAdd(&hits[b], 1u);  // PLANTED
}

extern "C" __global__ void brick_hits_match(const unsigned short* __restrict__ depth, unsigned* __restrict__ hits) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    int b = -1;
    if (i < NPIX) {
        unsigned short d = depth[i];
        int f = i / (W * H), pix = i % (W * H);
        if (d != 0) b = brick_of(f, (float)(pix % W), (float)(pix / W), d * 0.001f);
    }
    unsigned peers = __match_any_sync(0xffffffffu, b);    // the lanes of this warp that share my brick
    if (b >= 0 && (threadIdx.x & 31) == __ffs(peers) - 1) atomicAdd(&hits[b], (unsigned)__popc(peers));
}

int main() {
    // a camera 1.4 m up walks half a circle of radius 2 m in an 8 x 3 x 8 m room, looking along its path
    float pose[FRAMES][12];
    for (int f = 0; f < FRAMES; ++f) {
        float phi = 3.14159265f * f / FRAMES, th = phi + 1.5707963f;
        float* p = pose[f];
        p[0] = 4.f + 2.f * cosf(phi); p[1] = 1.4f; p[2] = 4.f + 2.f * sinf(phi);
        p[3] = cosf(th); p[4] = 0.f; p[5] = -sinf(th);       // right
        p[6] = 0.f; p[7] = -1.f; p[8] = 0.f;                  // down
        p[9] = sinf(th); p[10] = 0.f; p[11] = cosf(th);       // forward
    }
    CK(cudaMemcpyToSymbol(c_pose, pose, sizeof(pose)));
    // depth: the ray's exit from the room box, with noise growing as z^2, 1% dropouts and nothing past 7.5 m
    std::vector<unsigned short> hd(NPIX);
    const float lo[3] = {0.f, 0.f, 0.f}, hi[3] = {8.f, 3.f, 8.f};
    for (int f = 0; f < FRAMES; ++f) {
        const float* p = pose[f];
        for (int v = 0; v < H; ++v)
            for (int u = 0; u < W; ++u) {
                float x = (u - CX) / FX, y = (v - CX) / FX;   // the ray at z = 1 in the camera frame
                float d[3] = {x * p[3] + y * p[6] + p[9], x * p[4] + y * p[7] + p[10], x * p[5] + y * p[8] + p[11]};
                float t = 1e30f;
                for (int a = 0; a < 3; ++a)
                    if (d[a] > 1e-6f) t = fminf(t, (hi[a] - p[a]) / d[a]);
                    else if (d[a] < -1e-6f) t = fminf(t, (lo[a] - p[a]) / d[a]);
                float z = t * (1.f + 0.0015f * t * (frand() - 0.5f));
                bool drop = z > 7.5f || (urand() >> 16) % 100u == 0;
                hd[(size_t)f * W * H + (size_t)v * W + u] = drop ? 0 : (unsigned short)(z * 1000.f + 0.5f);
            }
    }
    unsigned short* dd = dcopy(hd);
    unsigned *dbad = dnew<unsigned>(NB * NB * NB), *dfix = dnew<unsigned>(NB * NB * NB);
    LAUNCH(brick_hits_atomic, NPIX / THREADS, THREADS, dd, dbad);
    LAUNCH(brick_hits_match, NPIX / THREADS, THREADS, dd, dfix);
    CK(cudaDeviceSynchronize());
    std::vector<unsigned> bad = hcopy(dbad, NB * NB * NB), fix = hcopy(dfix, NB * NB * NB);
    std::vector<float> fb(bad.begin(), bad.end()), ff(fix.begin(), fix.end());
    return verdict("139-depth-fusion-brick-hits", fb, ff, 0.0);
}
