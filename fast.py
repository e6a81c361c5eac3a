"""The fast path: plain ``extern "C" __global__`` CUDA compiled by NVRTC (through CuPy) and launched
on torch tensors, with no C++ extension build.

A candidate in KernelBench format uses it like this::

    import torch
    from kernelscope.fast import CudaKernel

    relu = CudaKernel(r'''
    extern "C" __global__ void relu(const float* x, float* y, long long n) {
        long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
        if (i < n) y[i] = x[i] > 0.f ? x[i] : 0.f;
    }''', "relu")

    class ModelNew(torch.nn.Module):
        def forward(self, x):
            y = torch.empty_like(x)
            n = x.numel()
            relu(grid=((n + 255) // 256,), block=(256,), args=(x, y, n))
            return y

Arguments are converted by the kernel's own parameter list, read from the source: torch tensors to
device pointers (on the GPU, contiguous unless ``allow_strided``), Python numbers to the declared
C type (``int``, ``long long``, ``float``, ``double``, ``unsigned``, ``size_t`` ...). Where the
signature cannot be read, give ``arg_types`` (C type names, ``"*"`` for pointers); unknown scalars
default to ``int`` / ``float``. Launches go to torch's current
stream, so CUDA-event timing and torch's stream semantics hold. Compilation is cached by CuPy by
content (``CUPY_CACHE_DIR``), so a second process that builds the same source pays no NVRTC cost.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Sequence
from typing import Any

_lock = threading.Lock()
_streams: dict[int, Any] = {}

# C type name -> numpy scalar type, for ``arg_types``.
_CTYPES = {
    "int": "int32", "int32": "int32", "unsigned": "uint32", "uint32": "uint32", "long long": "int64",
    "int64": "int64", "uint64": "uint64", "size_t": "uint64", "float": "float32", "double": "float64",
    "short": "int16", "char": "int8", "bool": "bool_", "long": "int64", "unsigned int": "uint32",
    "unsigned long long": "uint64", "int64_t": "int64", "int32_t": "int32", "uint32_t": "uint32",
    "uint64_t": "uint64", "__half": "float16", "half": "float16",
}
_QUALIFIERS = re.compile(r"\b(const|volatile|__restrict__|__restrict|restrict|struct|signed)\b")


def parse_signature(source: str, name: str) -> list[str] | None:
    """The C types of ``name``'s parameters (``"*"`` for any pointer), or None if not found."""
    m = re.search(rf"__global__\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?void\s+"
                  rf"(?:__launch_bounds__\s*\([^)]*\)\s*)?{re.escape(name)}\s*\(([^)]*)\)", source)
    if not m:
        return None
    params = [p.strip() for p in m.group(1).split(",") if p.strip()]
    types: list[str] = []
    for p in params:
        if p == "void":
            continue
        if "*" in p or "[" in p:
            types.append("*")
            continue
        words = _QUALIFIERS.sub(" ", p).split()
        ctype = " ".join(words[:-1]) if len(words) > 1 else words[0]
        types.append(ctype)
    return types


def _cupy() -> Any:
    try:
        import cupy
    except ImportError as e:  # pragma: no cover - depends on the host
        raise RuntimeError(
            "kernelscope.fast needs CuPy (pip install 'kernelscope[gpu]', i.e. cupy-cuda12x) on a CUDA machine"
        ) from e
    return cupy


def toolkit_include() -> str | None:
    """The CUDA toolkit's include directory if it has the headers NVRTC needs for WMMA (crt/mma.h);
    CuPy's own include path (NVIDIA's runtime wheel) lacks them."""
    import os
    import shutil
    from pathlib import Path

    cands = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"]
    nvcc = shutil.which("nvcc")
    if nvcc:
        cands.append(str(Path(nvcc).resolve().parent.parent))
    for c in cands:
        if c and (Path(c) / "include" / "crt" / "mma.h").is_file():
            return str(Path(c) / "include")
    return None


def _external_stream(cp: Any, ptr: int) -> Any:
    """A CuPy view of torch's stream ``ptr`` (CuPy 14 deprecates ExternalStream for from_external)."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return cp.cuda.ExternalStream(ptr)


class CudaKernel:
    """An NVRTC-compiled kernel launched on torch tensors."""

    def __init__(self, source: str, name: str, *, options: Sequence[str] = ("--std=c++17",),
                 arg_types: Sequence[str] | None = None, allow_strided: bool = False) -> None:
        self.source = source
        self.name = name
        self.options = tuple(options)
        sig = arg_types if arg_types is not None else parse_signature(source, name)
        self.arg_types = tuple(sig) if sig is not None else None
        self.allow_strided = allow_strided
        self._kernel: Any = None

    def compile(self) -> Any:
        """Compile now (otherwise the first launch does); returns the CuPy RawKernel."""
        if self._kernel is None:
            cp = _cupy()
            options = self.options
            inc = toolkit_include()
            if inc and not any(o.startswith("-I") for o in options):
                options = (*options, f"-I{inc}")
            k = cp.RawKernel(self.source, self.name, options=options, backend="nvrtc")
            k.compile()
            self._kernel = k
        return self._kernel

    @property
    def attributes(self) -> dict[str, Any]:
        """Registers, shared memory and so on of the compiled function (CuPy's view of them)."""
        return dict(self.compile().attributes)

    def _convert(self, args: Sequence[Any]) -> tuple[Any, ...]:
        import numpy as np
        import torch

        out: list[Any] = []
        for i, a in enumerate(args):
            declared = self.arg_types[i] if self.arg_types is not None and i < len(self.arg_types) else None
            if isinstance(a, torch.Tensor):
                if not a.is_cuda:
                    raise ValueError(f"argument {i} of {self.name} is a CPU tensor; move it to the GPU")
                if not self.allow_strided and not a.is_contiguous():
                    raise ValueError(f"argument {i} of {self.name} is not contiguous; call .contiguous()")
                out.append(np.uint64(a.data_ptr()))
            elif isinstance(a, np.generic):
                out.append(a)
            elif declared is not None and declared != "*":
                if declared not in _CTYPES:
                    raise TypeError(f"argument {i} of {self.name}: unsupported parameter type {declared!r}; "
                                    "pass a numpy scalar of the right width")
                out.append(getattr(np, _CTYPES[declared])(a))
            elif isinstance(a, bool):
                out.append(np.bool_(a))
            elif isinstance(a, int):
                out.append(np.int32(a))
            elif isinstance(a, float):
                out.append(np.float32(a))
            else:
                raise TypeError(f"argument {i} of {self.name}: cannot pass {type(a).__name__} to a CUDA kernel")
        return tuple(out)

    def __call__(self, grid: Sequence[int] | int, block: Sequence[int] | int, args: Sequence[Any],
                 shared_mem: int = 0) -> None:
        import torch

        cp = _cupy()
        kernel = self.compile()
        grid_t = (grid,) if isinstance(grid, int) else tuple(grid)
        block_t = (block,) if isinstance(block, int) else tuple(block)
        ptr = torch.cuda.current_stream().cuda_stream
        with _lock:
            stream = _streams.get(ptr)
            if stream is None:
                stream = _streams[ptr] = _external_stream(cp, ptr)
        with stream:
            kernel(grid_t, block_t, self._convert(args), shared_mem=shared_mem)
