# An honest candidate for ref_masked_gather.py, written another way.
import torch


class ModelNew(torch.nn.Module):
    def forward(self, x, mask, idx):
        return x.masked_fill(~mask, 0.0).cumsum(1).take_along_dim(idx, 1)
