"""A CPU-runnable problem for the optimize loop's end-to-end tests: row sums of a matrix.

Most of a call's time is a wall-clock wait (the candidate's grows with its slices), so that candidates
rank the same on a busy machine: a wait does not stretch when other processes take the CPU, where a few
milliseconds of arithmetic can grow tenfold and reorder the search."""

import time

import torch

WAIT_S = 0.05  # the reference's cost per call: long beside the delay a busy machine adds to waking up


class Model(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        time.sleep(WAIT_S)
        return x.sum(dim=1)


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(64, 4096)]


def get_init_inputs() -> list:
    return []
