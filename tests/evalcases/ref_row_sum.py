# A level-1 style problem with a single main operator: row sums (examples/problems/row_sum, smaller).
import torch


class Model(torch.nn.Module):
    def forward(self, x):
        return torch.sum(x, dim=1)


def get_inputs():
    return [torch.randn(512, 1024)]


def get_init_inputs():
    return []
