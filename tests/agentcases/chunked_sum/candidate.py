"""Knob-annotated candidate: the row sum in CHUNKS column slices (many slices: many small ops, slow;
one slice: one op), each slice summed as a matrix-vector product with ones (not the reference's sum,
which the server's op audit flags invalid). WIDE_ACC accumulates in float64 (slower, same result within
tolerance).

Each slice costs a fixed wall-clock wait (SLICE_WAIT_S) on top of its arithmetic, as the reference's
cost is mostly a wait (50 ms): 256 slices take five times the reference, 16 a third of it, one a
fiftieth; the steps of CHUNKS are a factor of four apart, beyond the timing noise of a busy machine."""

import time

import torch

# @knob CHUNKS 256 64 16 4 1
# @knob WIDE_ACC 1 0
SLICE_WAIT_S = 0.001


class ModelNew(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        time.sleep(CHUNKS * SLICE_WAIT_S)  # noqa: F821
        acc = torch.zeros(x.shape[0], dtype=torch.float64 if WIDE_ACC else x.dtype)  # noqa: F821
        for part in x.chunk(CHUNKS, dim=1):  # noqa: F821
            acc += part @ torch.ones(part.shape[1], dtype=part.dtype)
        return acc.to(x.dtype)
