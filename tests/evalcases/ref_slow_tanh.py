# A deliberately wasteful reference (recomputes tanh 400 times) so that an honest candidate looks
# implausibly fast: the >10x review flag must fire.
import torch


class Model(torch.nn.Module):
    def forward(self, x):
        y = x
        for _ in range(400):
            y = torch.tanh(x)
        return y


def get_inputs():
    return [torch.randn(256, 1024)]


def get_init_inputs():
    return []
