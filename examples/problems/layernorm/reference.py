"""LayerNorm over the last dim of a (4096, 4096) float32 matrix, elementwise weight and bias,
eps 1e-5, as ``torch.nn.functional.layer_norm`` (KernelBench format).

The affine parameters are drawn with torch.randn (weight first, then bias) so that seeding torch the
same way before constructing Model and ModelNew gives both the same values.
"""

import torch
import torch.nn.functional as F

BATCH = 4096
DIM = 4096
EPS = 1e-5


class Model(torch.nn.Module):
    def __init__(self, dim: int = DIM, eps: float = EPS) -> None:
        super().__init__()
        self.dim = int(dim)
        self.eps = float(eps)
        self.weight = torch.nn.Parameter(torch.randn(self.dim))
        self.bias = torch.nn.Parameter(torch.randn(self.dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.layer_norm(x, (self.dim,), self.weight, self.bias, self.eps)


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(BATCH, DIM)]


def get_init_inputs() -> list:
    return [DIM, EPS]
