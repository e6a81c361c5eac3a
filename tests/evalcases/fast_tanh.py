import torch


class ModelNew(torch.nn.Module):
    def forward(self, x):
        # clamped: exp(2x) overflows past |x| ~ 44, and tanh is 1.0 in fp32 from |x| ~ 9 (the distribution
        # trials scale the inputs by 1e3)
        e = torch.exp(2 * x.clamp(-15.0, 15.0))
        return (e - 1) / (e + 1)
