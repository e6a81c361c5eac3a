import torch


class ModelNew(torch.nn.Module):
    def forward(self, x):
        e = (x - x.max(dim=1, keepdim=True).values).exp()
        return (e / e.sum(dim=1, keepdim=True)).half()
