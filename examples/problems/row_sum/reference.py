"""Sum over dim=1 of an (8192, 8192) float32 matrix -> (8192,) float32 (KernelBench format).

256 MiB read, 32 KiB written: a pure streaming reduction, memory-bound.
"""

import torch

ROWS = 8192
COLS = 8192


class Model(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sum(x, dim=1)


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(ROWS, COLS)]


def get_init_inputs() -> list:
    return []
