"""Knob-annotated candidate: the row sum in CHUNKS column slices (many slices: many small ops, slow;
one slice: one op). WIDE_ACC accumulates in float64 (slower, same result within tolerance)."""

import torch

# @knob CHUNKS 256 64 16 4 1
# @knob WIDE_ACC 1 0


class ModelNew(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        acc = torch.zeros(x.shape[0], dtype=torch.float64 if WIDE_ACC else x.dtype)  # noqa: F821
        for part in x.chunk(CHUNKS, dim=1):  # noqa: F821
            acc += part.sum(dim=1)
        return acc.to(x.dtype)
