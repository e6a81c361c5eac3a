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
stream, so CUDA-event timing and torch's stream semantics hold. kernelscope calls NVRTC itself
(through CuPy's binding) for the device's ``sm_XY``, with line tables (``-lineinfo``: the profilers name a
kernel's lines as ``<kernel>.cu``, counted from the source string's first line; no change to the code), and
caches the cubin by content (source, options, NVRTC version) in ``KERNELSCOPE_NVRTC_CACHE`` (else
``CUPY_CACHE_DIR``'s ``kernelscope-nvrtc``), so a second process that builds the same source pays no NVRTC
cost. The evaluation pool uses this to compile a candidate's kernels on a CPU build worker (:func:`prebuild`,
no GPU needed) while the GPUs evaluate other candidates.

Two options for library and architecture-specific code:

- ``arch="sm_90a"`` compiles for exactly that target instead of the device's ``sm_XY`` (the
  arch-specific targets hold wgmma, setmaxnreg, TMA multicast).
- ``cutlass=True`` adds the CUTLASS/CuTe include folders (NVIDIA's nvidia-cutlass wheel, or
  ``KERNELSCOPE_CUTLASS_ROOT``) and the toolkit's headers (CuTe needs libcu++'s ``cuda/std``);
  without ``arch`` it targets the device, as ``sm_90a`` on compute
  capability 9.0. CuTe compiles under NVRTC (its ``__CUDACC_RTC__`` paths); its host-side helpers
  (``make_tma_copy``) do not exist there, so TMA descriptors come from :func:`tensor_map_2d`.

By-value structs: a NumPy array of size one is passed by value (CuPy's rule), e.g. the 128-byte
``CUtensorMap`` of :func:`tensor_map_2d` for a ``const __grid_constant__ CUtensorMap`` (or
``cute::TmaDescriptor``) parameter. Launches with more than 48 KiB of dynamic shared memory raise the
kernel's limit first (``max_dynamic_shared_size_bytes``).
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import os
import re
import shutil
import threading
import warnings
import weakref
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kernelscope.toolkit.cutlass_headers import configured_root
from kernelscope.toolkit.cutlass_headers import require as require_cutlass
from kernelscope.toolkit.elf import restore_elf_size

_lock = threading.Lock()
_streams: dict[int, Any] = {}
_created: weakref.WeakSet[CudaKernel] = weakref.WeakSet()  # the kernels this process declared, for prebuild()

# C type name -> numpy scalar type, for ``arg_types``.
_CTYPES = {
    "int": "int32", "int32": "int32", "unsigned": "uint32", "uint32": "uint32", "long long": "int64",
    "int64": "int64", "uint64": "uint64", "size_t": "uint64", "float": "float32", "double": "float64",
    "short": "int16", "char": "int8", "bool": "bool_", "long": "int64", "unsigned int": "uint32",
    "unsigned long long": "uint64", "int64_t": "int64", "int32_t": "int32", "uint32_t": "uint32",
    "uint64_t": "uint64", "__half": "float16", "half": "float16",
}
_QUALIFIERS = re.compile(r"\b(const|volatile|__restrict__|__restrict|restrict|struct|signed|__grid_constant__)\b")
_DEFAULT_DYNAMIC_SMEM = 48 * 1024


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
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return cp.cuda.ExternalStream(ptr)


class CompileError(RuntimeError):
    """NVRTC rejected a source compiled for an explicit ``arch``; the message carries NVRTC's log."""


def _normalize_arch(arch: str) -> str:
    a = arch.strip().lower()
    a = a[3:] if a.startswith("sm_") else a
    if not re.fullmatch(r"\d{2,3}[af]?", a):
        raise ValueError(f"arch {arch!r}: use the form sm_90a, sm_90, sm_80, sm_100a ...")
    return f"sm_{a}"


def _device_arch(cutlass: bool) -> str:
    import torch

    major, minor = torch.cuda.get_device_capability()
    # Hopper's wgmma/TMA code (CuTe's SM90 GMMA) exists only in the arch-specific target
    return f"sm_{major}{minor}" + ("a" if cutlass and (major, minor) == (9, 0) else "")


def _cache_dir() -> Path:
    if os.environ.get("KERNELSCOPE_NVRTC_CACHE"):
        return Path(os.environ["KERNELSCOPE_NVRTC_CACHE"])
    base = os.environ.get("CUPY_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cupy", "kernel_cache")
    return Path(base) / "kernelscope-nvrtc"


def nvrtc_cubin(source: str, name: str, options: Sequence[str]) -> Path:
    """Compile ``source`` with NVRTC (CuPy's binding) and the exact ``options`` (which must name the
    target, e.g. ``-arch=sm_90a``); the cubin is cached by content and its path returned."""
    from cupy.cuda import nvrtc

    version = ".".join(str(v) for v in nvrtc.getVersion())
    key = hashlib.sha256("\0".join([version, *options, source]).encode()).hexdigest()[:24]
    path = _cache_dir() / f"{key}.cubin"  # one build serves every kernel of the source
    if path.is_file():
        return path
    prog = nvrtc.createProgram(source, f"{name}.cu", (), ())
    try:
        try:
            nvrtc.compileProgram(prog, list(options))
        except nvrtc.NVRTCError:
            log = nvrtc.getProgramLog(prog)
            raise CompileError(f"NVRTC {version} could not compile {name} with {' '.join(options)}:\n{log}") from None
        cubin = restore_elf_size(nvrtc.getCUBIN(prog))
    finally:
        nvrtc.destroyProgram(prog)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}")
    tmp.write_bytes(cubin)
    os.replace(tmp, path)
    return path


def _leave_source(name: str, source: str) -> None:
    """Where the server asks (``KERNELSCOPE_KERNEL_SOURCES``: a job's own folder), the source as ``<name>.cu``,
    the file NVRTC's line tables name, so a profile's hot lines can show their code. Best effort."""
    folder = os.environ.get("KERNELSCOPE_KERNEL_SOURCES")
    if folder and re.fullmatch(r"[A-Za-z_]\w{0,200}", name):
        with contextlib.suppress(OSError):
            Path(folder, f"{name}.cu").write_text(source)


def cutlass_options() -> list[str]:
    """NVRTC options for CUTLASS/CuTe: its include folders and the toolkit's (libcu++). (NVRTC has no
    --expt-relaxed-constexpr option and needs none: CuTe compiles without it there.) The root is the
    one ``KERNELSCOPE_CUTLASS_ROOT`` names (the server passes its own to candidates), else the wheel's."""
    root = require_cutlass(configured_root())
    opts = [f"-I{d}" for d in root.include_dirs]
    inc = toolkit_include()
    if inc:
        cccl = Path(inc) / "cccl"
        opts += [f"-I{cccl}"] if cccl.is_dir() else []
        opts.append(f"-I{inc}")
    return opts


class CudaKernel:
    """An NVRTC-compiled kernel launched on torch tensors."""

    def __init__(self, source: str, name: str, *, options: Sequence[str] = ("--std=c++17",),
                 arg_types: Sequence[str] | None = None, allow_strided: bool = False, arch: str | None = None,
                 cutlass: bool = False) -> None:
        self.source = source
        self.name = name
        self.options = tuple(options)
        sig = arg_types if arg_types is not None else parse_signature(source, name)
        self.arg_types = tuple(sig) if sig is not None else None
        self.allow_strided = allow_strided
        self.arch = _normalize_arch(arch) if arch is not None else None
        self.cutlass = cutlass
        self.cubin_path: Path | None = None  # the cached cubin, once compiled
        self._kernel: Any = None
        self._max_dynamic_smem = _DEFAULT_DYNAMIC_SMEM
        with _lock:
            _created.add(self)

    def nvrtc_options(self, arch: str) -> list[str]:
        """The exact NVRTC options for a build for ``arch`` (``sm_90`` ...): the cache key with the source."""
        # -lineinfo: line tables for the profilers' source view (no change to the code); lines count from the
        # source string's first line, in a file NVRTC names <kernel>.cu
        options = [*self.options, *(cutlass_options() if self.cutlass else []), f"-arch={arch}",
                   "--device-as-default-execution-space", "-lineinfo"]
        inc = toolkit_include() if not self.cutlass and not any(o.startswith("-I") for o in self.options) else None
        if inc:
            options.append(f"-I{inc}")
        return options

    def target_for(self, device_arch: str) -> str:
        """The target built for a device of ``device_arch`` (``sm_90``): ``arch`` when given, else the
        device's own (``sm_90a`` for CuTe on compute capability 9.0)."""
        if self.arch is not None:
            return self.arch
        return device_arch + ("a" if self.cutlass and device_arch == "sm_90" else "")

    def compile(self) -> Any:
        """Compile now (otherwise the first launch does); returns the CuPy RawKernel."""
        if self._kernel is None:
            cp = _cupy()
            arch = self.arch or _device_arch(self.cutlass)
            self.cubin_path = nvrtc_cubin(self.source, self.name, self.nvrtc_options(arch))
            self._kernel = cp.RawModule(path=str(self.cubin_path)).get_function(self.name)
            _leave_source(self.name, self.source)
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
            if isinstance(a, np.ndarray):  # a struct passed by value (e.g. a CUtensorMap), CuPy's rule
                if a.size != 1:
                    raise ValueError(f"argument {i} of {self.name}: only NumPy arrays of size one are passed "
                                     f"(by value); got shape {a.shape}")
                out.append(a)
            elif isinstance(a, torch.Tensor):
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
        if shared_mem > self._max_dynamic_smem:
            kernel.max_dynamic_shared_size_bytes = shared_mem  # opt in above the 48 KiB default
            self._max_dynamic_smem = shared_mem
        with stream:
            kernel(grid_t, block_t, self._convert(args), shared_mem=shared_mem)


def prebuild(device_arch: str, kernels: Sequence[CudaKernel] | None = None) -> tuple[list[Path], list[str]]:
    """Compile ``kernels`` (by default every kernel this process has declared) for a device of ``device_arch``
    (``sm_90``), with no GPU: the cubins land in the cache where the evaluation on the GPU finds them. Returns
    the cubins and one line per kernel that failed (the evaluation then reports that failure itself)."""
    device_arch = _normalize_arch(device_arch)
    built: list[Path] = []
    failed: list[str] = []
    if kernels is None:
        with _lock:
            kernels = list(_created)
    for k in kernels:
        try:
            built.append(nvrtc_cubin(k.source, k.name, k.nvrtc_options(k.target_for(device_arch))))
        except Exception as e:
            failed.append(f"{k.name}: {str(e).splitlines()[0] if str(e) else type(e).__name__}")
    return built, failed


# ------------------------------------------------------------------------------- TMA descriptors
_TMA_DTYPES = {  # torch dtype name -> CUtensorMapDataType
    "uint8": 0, "int8": 0, "int32": 3, "int64": 5, "float16": 6, "float32": 7, "float64": 8, "bfloat16": 9,
}
_SWIZZLE = {0: 0, 32: 1, 64: 2, 128: 3}  # bytes -> CUtensorMapSwizzle
_libcuda: Any = None


def _driver() -> Any:
    global _libcuda
    if _libcuda is None:
        try:
            lib = ctypes.CDLL("libcuda.so.1")
        except OSError as e:
            raise RuntimeError(f"tensor_map_2d needs the CUDA driver (libcuda.so.1): {e}") from None
        fn = lib.cuTensorMapEncodeTiled
        fn.restype = ctypes.c_int
        fn.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32, ctypes.c_void_p,
                       ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_uint64),
                       ctypes.POINTER(ctypes.c_uint32), ctypes.POINTER(ctypes.c_uint32),
                       ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int]
        _libcuda = lib
    return _libcuda


def tensor_map_2d(tensor: Any, box_rows: int, box_cols: int, *, swizzle: int = 128,
                  l2_promotion: int = 128) -> Any:
    """A TMA descriptor (``CUtensorMap``, 128 bytes) for a row-major 2-D CUDA tensor, as a NumPy
    array of size one that launches pass by value: give it to a ``const __grid_constant__
    CUtensorMap`` (``cute::TmaDescriptor``) parameter.

    Dimension 0 of the map is the tensor's last (contiguous) dimension, so a kernel's TMA copy takes
    coordinates (column, row); a box is ``box_rows x box_cols`` elements, written to shared memory
    row after row with the given swizzle (bytes: 0, 32, 64 or 128; one box row must not exceed it).
    Elements outside the tensor read as zero. Built with the driver's ``cuTensorMapEncodeTiled``,
    the call CUTLASS's host-side ``make_tma_copy`` makes. The descriptor holds the tensor's address:
    keep the tensor alive (and in place) while kernels use it.
    """
    import numpy as np

    dtype = str(tensor.dtype).removeprefix("torch.")
    if dtype not in _TMA_DTYPES:
        raise ValueError(f"tensor_map_2d: dtype {dtype} has no TMA data type; use one of {sorted(_TMA_DTYPES)}")
    if not tensor.is_cuda or tensor.dim() != 2 or tensor.stride(1) != 1:
        raise ValueError("tensor_map_2d needs a 2-D CUDA tensor whose last dimension is contiguous")
    esize = tensor.element_size()
    rows, cols = tensor.shape
    pitch = tensor.stride(0) * esize
    if tensor.data_ptr() % 16 or pitch % 16:
        raise ValueError(f"tensor_map_2d: the address and the row pitch ({pitch} bytes) must be multiples of 16 "
                         "bytes (e.g. a half matrix needs a multiple of 8 columns)")
    if swizzle not in _SWIZZLE:
        raise ValueError("tensor_map_2d: swizzle is 0, 32, 64 or 128 (bytes)")
    if not (1 <= box_rows <= 256 and 1 <= box_cols <= 256) or (box_cols * esize) % 16:
        raise ValueError("tensor_map_2d: box sides are 1..256 elements and a box row a multiple of 16 bytes")
    if swizzle and box_cols * esize > swizzle:
        raise ValueError(f"tensor_map_2d: a box row is {box_cols * esize} bytes, more than the {swizzle}-byte swizzle")
    raw = (ctypes.c_uint8 * 256)()
    offset = (-ctypes.addressof(raw)) % 128  # the driver wants the map 64-byte aligned; CUDA 13 declares 128
    dims = (ctypes.c_uint64 * 2)(cols, rows)
    strides = (ctypes.c_uint64 * 1)(pitch)
    box = (ctypes.c_uint32 * 2)(box_cols, box_rows)
    elem_strides = (ctypes.c_uint32 * 2)(1, 1)
    promo = {0: 0, 64: 1, 128: 2, 256: 3}[l2_promotion]
    err = _driver().cuTensorMapEncodeTiled(ctypes.addressof(raw) + offset, _TMA_DTYPES[dtype], 2,
                                           ctypes.c_void_p(tensor.data_ptr()), dims, strides, box, elem_strides,
                                           0, _SWIZZLE[swizzle], promo, 0)
    if err != 0:
        raise RuntimeError(f"cuTensorMapEncodeTiled failed with CUresult {err} (shape {tuple(tensor.shape)}, "
                           f"box {box_rows}x{box_cols}, swizzle {swizzle})")
    desc = np.frombuffer(bytes(raw)[offset: offset + 128], dtype=np.uint8).copy()
    return desc.view(np.dtype((np.void, 128)))
