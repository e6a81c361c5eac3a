# A reference with a boolean mask and integer indices among its inputs (as KernelBench's masked cumsum and
# cross-entropy problems): every input, not only the floating-point ones, decides the output.
import torch


class Model(torch.nn.Module):
    def forward(self, x, mask, idx):
        return torch.cumsum(x * mask, dim=1).gather(1, idx)


def get_inputs():
    return [torch.randn(32, 400), torch.rand(32, 400) > 0.5, torch.randint(0, 400, (32, 16))]


def get_init_inputs():
    return []
