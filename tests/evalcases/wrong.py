import torch


class ModelNew(torch.nn.Module):
    def forward(self, x):
        return (x - x.max(dim=1, keepdim=True).values).exp()  # not normalised
