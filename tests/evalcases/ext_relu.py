# A load_inline candidate (C++ only, so it builds and runs on CPU): the run tool builds it before
# taking the GPU, then the evaluation imports the cached build.
import torch
from torch.utils.cpp_extension import load_inline

_SRC = """
#include <torch/extension.h>
torch::Tensor my_relu(torch::Tensor x) {
    auto y = torch::empty_like(x);
    auto xa = x.contiguous().data_ptr<float>();
    auto ya = y.data_ptr<float>();
    for (int64_t i = 0; i < x.numel(); ++i) ya[i] = xa[i] > 0.f ? xa[i] : 0.f;
    return y;
}
"""
_ext = load_inline(name="ks_test_ext_relu_v1", cpp_sources=[_SRC], functions=["my_relu"], verbose=False)


class ModelNew(torch.nn.Module):
    def forward(self, x):
        return _ext.my_relu(x)
