# A level-2 style reference: a GEMM (Linear) followed by elementwise work (bias, ReLU, scale).
import torch


class Model(torch.nn.Module):
    def __init__(self, n_in, n_out):
        super().__init__()
        self.linear = torch.nn.Linear(n_in, n_out)

    def forward(self, x):
        return torch.relu(self.linear(x)) * 0.5


def get_inputs():
    return [torch.randn(4096, 2048)]


def get_init_inputs():
    return [2048, 2048]
