"""y = gelu_tanh(x * scale + bias) * sigmoid(x) over 64M float32 elements, (8192, 8192)
(KernelBench format). ``scale`` and ``bias`` are Python floats passed as init inputs.

PyTorch runs this as five elementwise kernels (mul, add, gelu, sigmoid, mul), each a full pass over
256 MiB in and out; a fused kernel reads x once and writes y once.
"""

import torch
import torch.nn.functional as F

ROWS = 8192
COLS = 8192
SCALE = 1.5
BIAS = 0.25


class Model(torch.nn.Module):
    def __init__(self, scale: float = SCALE, bias: float = BIAS) -> None:
        super().__init__()
        self.scale = float(scale)
        self.bias = float(bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        z = x * self.scale + self.bias
        return F.gelu(z, approximate="tanh") * torch.sigmoid(x)


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(ROWS, COLS)]


def get_init_inputs() -> list:
    return [SCALE, BIAS]
