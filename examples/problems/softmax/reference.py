"""Row softmax of a (4096, 4096) float32 matrix over dim=1 (KernelBench format).

64 MiB read + 64 MiB written: memory-bound.
"""

import torch

BATCH = 4096
DIM = 4096


class Model(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=1)


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(BATCH, DIM)]


def get_init_inputs() -> list:
    return []
