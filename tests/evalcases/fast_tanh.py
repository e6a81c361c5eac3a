import torch


class ModelNew(torch.nn.Module):
    def forward(self, x):
        e = torch.exp(2 * x)
        return (e - 1) / (e + 1)
