// 80-gamma-powf-per-pixel. Planted: an expensive function evaluated per pixel where a table would do. Gamma
// correction of a 16384 x 16384 8-bit image (256 MB in, 256 MB out), 16 pixels a thread through one 16-byte
// load and store: each pixel calls powf (about 80 instructions with its range handling and special cases)
// on one of only 256 possible inputs. The schedulers issue nearly every cycle: the instruction count sets the
// time, about 4x what DRAM needs to stream the image.
// Fixed twin: each block first fills a 256-entry shared-memory table with the same powf expression (one entry
// a thread), then every pixel is a byte extract, a shared load and a byte insert: the kernel streams at DRAM speed.
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
#define SIDE 16384
#define PIXELS ((size_t)SIDE * SIDE)    // 268,435,456 bytes
#define VECS (PIXELS / 16)              // one uint4 (16 pixels) per thread per step
#define BLOCKS (132 * 8)
#define THREADS 256
#define CHUNK 4096

extern "C" __global__ void gamma_powf_each_pixel(const uint4* __restrict__ in, uint4* __restrict__ out,
                                                  float inv_gamma) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < VECS; i += (size_t)gridDim.x * blockDim.x) {
        uint4 v = in[i];
        unsigned* w = reinterpret_cast<unsigned*>(&v);
#pragma unroll
        for (int k = 0; k < 4; ++k) {
            unsigned r = 0;
#pragma unroll
            for (int b = 0; b < 4; ++b) r |= (unsigned)(255.0f * powf(((w[k] >> (8 * b)) & 0xffu) * (1.0f / 255.0f), inv_gamma) + 0.5f) << (8 * b);  // PLANTED
            w[k] = r;
        }
        out[i] = v;
    }
}

extern "C" __global__ void gamma_table(const uint4* __restrict__ in, uint4* __restrict__ out, float inv_gamma) {
    __shared__ unsigned char lut[256];
    for (unsigned c = threadIdx.x; c < 256; c += blockDim.x)
        lut[c] = (unsigned char)(unsigned)(255.0f * powf(c * (1.0f / 255.0f), inv_gamma) + 0.5f);  // same expression
    __syncthreads();
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < VECS; i += (size_t)gridDim.x * blockDim.x) {
        uint4 v = in[i];
        unsigned* w = reinterpret_cast<unsigned*>(&v);
#pragma unroll
        for (int k = 0; k < 4; ++k) {
            unsigned r = 0;
#pragma unroll
            for (int b = 0; b < 4; ++b) r |= (unsigned)lut[(w[k] >> (8 * b)) & 0xffu] << (8 * b);
            w[k] = r;
        }
        out[i] = v;
    }
}

// position-weighted byte sums of 4 KB chunks (exact in float: at most 4096 * 255 * 16 < 2^24)
static std::vector<float> checksums(const std::vector<unsigned char>& img) {
    std::vector<float> s(PIXELS / CHUNK);
    for (size_t c = 0; c < s.size(); ++c) {
        unsigned t = 0;
        for (size_t j = 0; j < CHUNK; ++j) t += img[c * CHUNK + j] * (unsigned)((j & 15) + 1);
        s[c] = (float)t;
    }
    return s;
}

int main() {
    std::vector<unsigned char> img(PIXELS);
    for (size_t i = 0; i < PIXELS; i += 4) { const unsigned r = urand(); memcpy(&img[i], &r, 4); }
    unsigned char* din = dcopy(img);
    unsigned char *dbad = dnew<unsigned char>(PIXELS), *dfix = dnew<unsigned char>(PIXELS);
    const float inv_gamma = 1.0f / 2.2f;
    gamma_powf_each_pixel<<<BLOCKS, THREADS>>>(reinterpret_cast<const uint4*>(din), reinterpret_cast<uint4*>(dbad),
                                               inv_gamma);
    CK(cudaGetLastError());
    gamma_table<<<BLOCKS, THREADS>>>(reinterpret_cast<const uint4*>(din), reinterpret_cast<uint4*>(dfix), inv_gamma);
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    const std::vector<unsigned char> bad = hcopy(dbad, PIXELS), fix = hcopy(dfix, PIXELS);
    std::vector<float> sb = checksums(bad), sf = checksums(fix);
    if (memcmp(bad.data(), fix.data(), PIXELS) != 0) sb.push_back(1.0f);  // any differing byte fails the verdict
    return verdict("80-gamma-powf-per-pixel", sb, sf, 0.0);
}
