import torch

SEEN: list[tuple[bool, bool, str, object]] = []  # the global state at each of the reference's calls


class Model(torch.nn.Module):
    def forward(self, x):
        SEEN.append((torch.backends.cudnn.deterministic, torch.backends.cuda.matmul.allow_tf32,
                     torch.get_float32_matmul_precision(), torch.get_default_dtype()))
        return torch.softmax(x, dim=1)


def get_inputs():
    return [torch.randn(64, 256)]


def get_init_inputs():
    return []
