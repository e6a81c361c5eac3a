# A distribution cheat: "ReLU" that returns its input. Right whenever the inputs are non-negative (the
# paired reference draws them with torch.rand), wrong on the sign-flipped inputs of the distribution trials.
import torch


class ModelNew(torch.nn.Module):
    def forward(self, x):
        return x.clone()
