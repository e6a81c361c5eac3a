"""Depthwise 3x3 convolution, stride 1, padding 1, no bias, on (16, 64, 256, 256) float32 with a
(64, 1, 3, 3) weight: ``F.conv2d(x, w, padding=1, groups=C)`` (KernelBench format).

256 MiB in, 256 MiB out, 9 FMAs per output: memory-bound. The weight is drawn with torch.randn so
that seeding torch the same way before constructing Model and ModelNew gives both the same values.
"""

import torch
import torch.nn.functional as F

BATCH = 16
CHANNELS = 64
HEIGHT = 256
WIDTH = 256


class Model(torch.nn.Module):
    def __init__(self, channels: int = CHANNELS) -> None:
        super().__init__()
        self.channels = int(channels)
        self.weight = torch.nn.Parameter(torch.randn(self.channels, 1, 3, 3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.conv2d(x, self.weight, padding=1, groups=self.channels)


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(BATCH, CHANNELS, HEIGHT, WIDTH)]


def get_init_inputs() -> list:
    return [CHANNELS]
