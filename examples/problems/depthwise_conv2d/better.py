"""Depthwise 3x3 conv, better: a 32x32 output tile per 32x8-thread block, staged with its 1-pixel
halo in a (34 x 34) shared-memory tile (zero padding written there, so the inner loop has no
bounds checks); the 9 weights of the block's channel live in registers. Each thread computes a
column of 4 outputs, sliding a 3-row window down the shared tile, so it reads 6 rows of shared
memory for 4 outputs instead of 12. A warp reads 32 consecutive floats of one shared row: no bank
conflicts. Global traffic is the input once (plus ~13% halo) and the output once.

Accumulation order matches PyTorch's depthwise kernel (ky outer, kx inner, from 0), and the zero
padding contributes exact zeros, so results agree to the last bit or two.
"""

import torch

from kernelscope.fast import CudaKernel

CUDA_SRC = r"""
#define TILE_W 32
#define TILE_H 32
#define BLOCK_Y 8
#define ROWS_PER_THREAD (TILE_H / BLOCK_Y)
#define SH_W (TILE_W + 2)
#define SH_H (TILE_H + 2)

extern "C" __global__ void __launch_bounds__(TILE_W * BLOCK_Y)
dwconv3x3_tiled(const float* __restrict__ x, const float* __restrict__ w, float* __restrict__ y,
                int c, int h, int wd) {
    __shared__ float tile[SH_H][SH_W];
    const long long plane = blockIdx.z;
    const int ch = (int)(plane % c);
    const float* xp = x + plane * h * wd;
    float* yp = y + plane * h * wd;
    const int x0 = blockIdx.x * TILE_W;
    const int y0 = blockIdx.y * TILE_H;
    const int tx = threadIdx.x;
    const int ty = threadIdx.y;

    for (int i = ty * TILE_W + tx; i < SH_H * SH_W; i += TILE_W * BLOCK_Y) {
        const int r = i / SH_W;
        const int cc = i - r * SH_W;
        const int gy = y0 + r - 1;
        const int gx = x0 + cc - 1;
        tile[r][cc] = (gy >= 0 && gy < h && gx >= 0 && gx < wd) ? xp[(long long)gy * wd + gx] : 0.0f;
    }
    float k[9];
#pragma unroll
    for (int i = 0; i < 9; ++i) k[i] = w[ch * 9 + i];
    __syncthreads();

    const int ox = x0 + tx;
    const int r0 = ty * ROWS_PER_THREAD;  // first output row of this thread, within the tile
    float win[3][3];
#pragma unroll
    for (int ry = 0; ry < 2; ++ry)
#pragma unroll
        for (int kx = 0; kx < 3; ++kx) win[ry][kx] = tile[r0 + ry][tx + kx];
#pragma unroll
    for (int j = 0; j < ROWS_PER_THREAD; ++j) {
#pragma unroll
        for (int kx = 0; kx < 3; ++kx) win[(j + 2) % 3][kx] = tile[r0 + j + 2][tx + kx];
        float acc = 0.0f;
#pragma unroll
        for (int ky = 0; ky < 3; ++ky)
#pragma unroll
            for (int kx = 0; kx < 3; ++kx) acc += k[ky * 3 + kx] * win[(j + ky) % 3][kx];
        const int oy = y0 + r0 + j;
        if (oy < h && ox < wd) yp[(long long)oy * wd + ox] = acc;
    }
}
"""

KERNEL = CudaKernel(CUDA_SRC, "dwconv3x3_tiled")
KERNELS = [KERNEL]
TILE_W = 32
TILE_H = 32
BLOCK_Y = 8


class ModelNew(torch.nn.Module):
    def __init__(self, channels: int = 64) -> None:
        super().__init__()
        self.channels = int(channels)
        self.weight = torch.nn.Parameter(torch.randn(self.channels, 1, 3, 3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        n, c, h, w = x.shape
        if c != self.channels:
            raise ValueError(f"expected {self.channels} channels, got {c}")
        if n * c > 65535:
            raise ValueError(f"N*C = {n * c} exceeds the grid's z limit (65535)")
        y = torch.empty_like(x)
        grid = ((w + TILE_W - 1) // TILE_W, (h + TILE_H - 1) // TILE_H, n * c)
        KERNEL(grid=grid, block=(TILE_W, BLOCK_Y), args=(x, self.weight, y, c, h, w))
        return y
