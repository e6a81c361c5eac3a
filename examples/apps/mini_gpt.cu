// A small GPT-style forward pass in plain CUDA, as an application would write it: token embedding,
// then per layer layernorm -> QKV projection -> causal attention (scores, softmax, weighted sum) ->
// output projection -> residual -> layernorm -> MLP (GELU) -> residual, then a final layernorm and
// the logits. Eight distinct kernels, 51 launches per forward pass; `./mini_gpt [steps]` runs `steps`
// forward passes (default 2) and prints a checksum of the logits.
//
// It is the "realistic program" of benchmarks/analyze_planted.py --apps: a program that launches its
// kernels many times, where profiling every launch with every section is what costs.
//
//     nvcc -O3 -arch=sm_90 -lineinfo -o mini_gpt mini_gpt.cu && ./mini_gpt 2
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CHECK(x)                                                                          \
    do {                                                                                  \
        cudaError_t e_ = (x);                                                             \
        if (e_ != cudaSuccess) {                                                          \
            std::fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); \
            std::exit(1);                                                                 \
        }                                                                                 \
    } while (0)

constexpr int T = 256;     // tokens
constexpr int C = 384;     // model width
constexpr int H = 6;       // heads
constexpr int D = C / H;   // head width
constexpr int L = 4;       // layers
constexpr int V = 4096;    // vocabulary
constexpr int TILE = 16;

__global__ void embed(const int* tokens, const float* wte, const float* wpe, float* x) {
    int t = blockIdx.x, c = threadIdx.x;
    for (; c < C; c += blockDim.x) x[t * C + c] = wte[tokens[t] * C + c] + wpe[t * C + c];
}

// one block per row; a shared-memory tree for the mean and the variance
__global__ void layernorm(const float* x, const float* g, const float* b, float* y) {
    __shared__ float s[256];
    const float* r = x + blockIdx.x * C;
    float sum = 0.f;
    for (int c = threadIdx.x; c < C; c += blockDim.x) sum += r[c];
    s[threadIdx.x] = sum;
    __syncthreads();
    for (int k = blockDim.x / 2; k > 0; k >>= 1) {
        if (threadIdx.x < k) s[threadIdx.x] += s[threadIdx.x + k];
        __syncthreads();
    }
    float mean = s[0] / C;
    __syncthreads();
    float var = 0.f;
    for (int c = threadIdx.x; c < C; c += blockDim.x) var += (r[c] - mean) * (r[c] - mean);
    s[threadIdx.x] = var;
    __syncthreads();
    for (int k = blockDim.x / 2; k > 0; k >>= 1) {
        if (threadIdx.x < k) s[threadIdx.x] += s[threadIdx.x + k];
        __syncthreads();
    }
    float inv = rsqrtf(s[0] / C + 1e-5f);
    for (int c = threadIdx.x; c < C; c += blockDim.x) y[blockIdx.x * C + c] = (r[c] - mean) * inv * g[c] + b[c];
}

// y[M,N] = x[M,K] @ w[K,N] + bias[N]: 16x16 shared-memory tiles, FP32 FMA
__global__ void matmul_bias(const float* x, const float* w, const float* bias, float* y, int M, int N, int K) {
    __shared__ float a[TILE][TILE], bt[TILE][TILE];
    int row = blockIdx.y * TILE + threadIdx.y, col = blockIdx.x * TILE + threadIdx.x;
    float acc = 0.f;
    for (int k0 = 0; k0 < K; k0 += TILE) {
        a[threadIdx.y][threadIdx.x] = (row < M && k0 + threadIdx.x < K) ? x[row * K + k0 + threadIdx.x] : 0.f;
        bt[threadIdx.y][threadIdx.x] = (col < N && k0 + threadIdx.y < K) ? w[(k0 + threadIdx.y) * N + col] : 0.f;
        __syncthreads();
        for (int k = 0; k < TILE; ++k) acc += a[threadIdx.y][k] * bt[k][threadIdx.x];
        __syncthreads();
    }
    if (row < M && col < N) y[row * N + col] = acc + (bias ? bias[col] : 0.f);
}

// att[h, i, j] = q_i . k_j / sqrt(D) for j <= i, else -inf; qkv rows are [q | k | v]
__global__ void attn_scores(const float* qkv, float* att) {
    int h = blockIdx.z, i = blockIdx.y * TILE + threadIdx.y, j = blockIdx.x * TILE + threadIdx.x;
    if (i >= T || j >= T) return;
    float s = -INFINITY;
    if (j <= i) {
        const float* q = qkv + i * 3 * C + h * D;
        const float* k = qkv + j * 3 * C + C + h * D;
        s = 0.f;
        for (int d = 0; d < D; ++d) s += q[d] * k[d];
        s *= rsqrtf((float)D);
    }
    att[(h * T + i) * T + j] = s;
}

// in place over each row of T scores: one warp per row
__global__ void softmax_rows(float* att, int rows) {
    int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (row >= rows) return;
    float* r = att + (size_t)row * T;
    float m = -INFINITY;
    for (int j = lane; j < T; j += 32) m = fmaxf(m, r[j]);
    for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffff, m, o));
    float sum = 0.f;
    for (int j = lane; j < T; j += 32) sum += __expf(r[j] - m);
    for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffff, sum, o);
    for (int j = lane; j < T; j += 32) r[j] = __expf(r[j] - m) / sum;
}

// out[i, h*D + d] = sum_j att[h, i, j] * v_j[d]
__global__ void attn_values(const float* att, const float* qkv, float* out) {
    int h = blockIdx.y, i = blockIdx.x, d = threadIdx.x;
    if (d >= D) return;
    const float* p = att + (h * T + i) * T;
    float acc = 0.f;
    for (int j = 0; j <= i; ++j) acc += p[j] * qkv[j * 3 * C + 2 * C + h * D + d];
    out[i * C + h * D + d] = acc;
}

__global__ void gelu(float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = x[i];
        x[i] = 0.5f * v * (1.f + tanhf(0.7978845608f * (v + 0.044715f * v * v * v)));
    }
}

__global__ void residual_add(float* x, const float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] += y[i];
}

struct Layer {
    float *ln1g, *ln1b, *wqkv, *bqkv, *wo, *bo, *ln2g, *ln2b, *wfc, *bfc, *wpr, *bpr;
};

static float* upload(size_t n, float scale, float offset, unsigned& seed) {
    std::vector<float> h(n);
    for (auto& v : h) {
        seed = seed * 1664525u + 1013904223u;
        v = offset + scale * ((seed >> 8) / 16777216.0f - 0.5f);
    }
    float* d;
    CHECK(cudaMalloc(&d, n * sizeof(float)));
    CHECK(cudaMemcpy(d, h.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    return d;
}

static void matmul(const float* x, const float* w, const float* b, float* y, int M, int N, int K) {
    dim3 grid((N + TILE - 1) / TILE, (M + TILE - 1) / TILE), block(TILE, TILE);
    matmul_bias<<<grid, block>>>(x, w, b, y, M, N, K);
}

int main(int argc, char** argv) {
    int steps = argc > 1 ? std::atoi(argv[1]) : 2;
    if (steps < 1 || steps > 1000) {
        std::fprintf(stderr, "usage: %s [steps 1..1000]\n", argv[0]);
        return 2;
    }
    unsigned seed = 1234;
    float* wte = upload((size_t)V * C, 0.04f, 0.f, seed);
    float* wpe = upload((size_t)T * C, 0.02f, 0.f, seed);
    std::vector<Layer> layers(L);
    for (auto& l : layers) {
        l.ln1g = upload(C, 0.f, 1.f, seed), l.ln1b = upload(C, 0.f, 0.f, seed);
        l.wqkv = upload((size_t)C * 3 * C, 0.1f, 0.f, seed), l.bqkv = upload(3 * C, 0.02f, 0.f, seed);
        l.wo = upload((size_t)C * C, 0.1f, 0.f, seed), l.bo = upload(C, 0.02f, 0.f, seed);
        l.ln2g = upload(C, 0.f, 1.f, seed), l.ln2b = upload(C, 0.f, 0.f, seed);
        l.wfc = upload((size_t)C * 4 * C, 0.1f, 0.f, seed), l.bfc = upload(4 * C, 0.02f, 0.f, seed);
        l.wpr = upload((size_t)4 * C * C, 0.05f, 0.f, seed), l.bpr = upload(C, 0.02f, 0.f, seed);
    }
    float* lnfg = upload(C, 0.f, 1.f, seed);
    float* lnfb = upload(C, 0.f, 0.f, seed);
    float* wlm = upload((size_t)C * V, 0.1f, 0.f, seed);
    std::vector<int> htok(T);
    for (int t = 0; t < T; ++t) htok[t] = (t * 7919) % V;
    int* tokens;
    CHECK(cudaMalloc(&tokens, T * sizeof(int)));
    CHECK(cudaMemcpy(tokens, htok.data(), T * sizeof(int), cudaMemcpyHostToDevice));
    float *x, *xn, *qkv, *att, *y, *h, *logits;
    CHECK(cudaMalloc(&x, T * C * sizeof(float)));
    CHECK(cudaMalloc(&xn, T * C * sizeof(float)));
    CHECK(cudaMalloc(&qkv, T * 3 * C * sizeof(float)));
    CHECK(cudaMalloc(&att, (size_t)H * T * T * sizeof(float)));
    CHECK(cudaMalloc(&y, T * C * sizeof(float)));
    CHECK(cudaMalloc(&h, T * 4 * C * sizeof(float)));
    CHECK(cudaMalloc(&logits, (size_t)T * V * sizeof(float)));

    for (int s = 0; s < steps; ++s) {
        embed<<<T, 128>>>(tokens, wte, wpe, x);
        for (const auto& l : layers) {
            layernorm<<<T, 128>>>(x, l.ln1g, l.ln1b, xn);
            matmul(xn, l.wqkv, l.bqkv, qkv, T, 3 * C, C);
            attn_scores<<<dim3(T / TILE, T / TILE, H), dim3(TILE, TILE)>>>(qkv, att);
            softmax_rows<<<H * T / 4, 128>>>(att, H * T);
            attn_values<<<dim3(T, H), 64>>>(att, qkv, y);
            matmul(y, l.wo, l.bo, xn, T, C, C);
            residual_add<<<(T * C + 255) / 256, 256>>>(x, xn, T * C);
            layernorm<<<T, 128>>>(x, l.ln2g, l.ln2b, xn);
            matmul(xn, l.wfc, l.bfc, h, T, 4 * C, C);
            gelu<<<(T * 4 * C + 255) / 256, 256>>>(h, T * 4 * C);
            matmul(h, l.wpr, l.bpr, xn, T, C, 4 * C);
            residual_add<<<(T * C + 255) / 256, 256>>>(x, xn, T * C);
        }
        layernorm<<<T, 128>>>(x, lnfg, lnfb, xn);
        matmul(xn, wlm, nullptr, logits, T, V, C);
    }
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());
    std::vector<float> out((size_t)T * V);
    CHECK(cudaMemcpy(out.data(), logits, out.size() * sizeof(float), cudaMemcpyDeviceToHost));
    double sum = 0.0, asum = 0.0;
    for (float v : out) sum += v, asum += std::fabs(v);
    std::printf("mini_gpt: %d forward pass(es), %d launches each; logits sum %.6e, mean |logit| %.6e\n", steps,
                3 + 12 * L, sum, asum / out.size());
    return std::isfinite(sum) ? 0 : 1;
}
