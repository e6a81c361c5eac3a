import torch


class ModelNew(torch.nn.Module):
    def forward(self, x):
        y = torch.exp(x - x.max(dim=1, keepdim=True).values)
        y = y / y.sum(dim=1, keepdim=True)
        y[0, 0] = float("nan")
        return y
