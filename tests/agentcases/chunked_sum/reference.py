"""A CPU-runnable problem for the optimize loop's end-to-end test: row sums of a matrix."""

import torch


class Model(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.sum(dim=1)


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(512, 8192)]


def get_init_inputs() -> list:
    return []
