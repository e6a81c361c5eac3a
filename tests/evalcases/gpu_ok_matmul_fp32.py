import torch


class ModelNew(torch.nn.Module):
    def forward(self, a, b):
        return torch.mm(a, b)
