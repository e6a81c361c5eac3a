# An honest candidate for ref_draws.py: it draws the same numbers the same way.
import torch


class ModelNew(torch.nn.Module):
    def forward(self, x):
        h0 = torch.randn(x.shape[0], x.shape[1], device=x.device)
        return h0.add_(x.tanh())
