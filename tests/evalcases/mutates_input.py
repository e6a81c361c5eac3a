import torch


class ModelNew(torch.nn.Module):
    def forward(self, x):
        x.sub_(x.max(dim=1, keepdim=True).values)
        x.exp_()
        return x / x.sum(dim=1, keepdim=True)
