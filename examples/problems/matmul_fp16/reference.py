"""C = A @ B in half precision, A (4096, 4096), B (4096, 4096), C (4096, 4096) float16
(KernelBench format). 137 GFLOP: compute-bound, a tensor-core problem.

Inputs are randn / 8, so each output is a sum of 4096 products of variance 1/4096: C has unit
standard deviation, far inside half range, and a tolerance of 1e-2 is relative to that scale.
"""

import torch

M = 4096
K = 4096
N = 4096


class Model(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.matmul(a, b)


def get_inputs() -> list[torch.Tensor]:
    a = (torch.randn(M, K) / 8).to(torch.float16)
    b = (torch.randn(K, N) / 8).to(torch.float16)
    return [a, b]


def get_init_inputs() -> list:
    return []
