import torch

torch.backends.cuda.matmul.allow_tf32 = True
torch.set_float32_matmul_precision("medium")


class ModelNew(torch.nn.Module):
    def forward(self, x):
        e = (x - x.max(dim=1, keepdim=True).values).exp()
        return e / e.sum(dim=1, keepdim=True)
