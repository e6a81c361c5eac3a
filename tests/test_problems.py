"""examples/problems: KernelBench-format problems with a naive and a better fast-path candidate each.

Off the GPU: the layout; every reference on small CPU inputs; the full-size inputs' shapes and
dtypes (built on the meta device, so nothing is allocated); same-seed parameters; a dry run of every
candidate's launches (``CudaKernel.__call__`` recorded, not run: argument counts and types against
the kernel signature, grid and block limits, the output passed to a kernel); nvcc compiles every
CUDA source for sm_90 without spills (and NVRTC too, where a libnvrtc is found); candidates call no
torch compute ops. On a GPU (``gpu``): every candidate against its reference at the full size and at
an awkward small size that takes the scalar and tail paths, outputs poisoned first.
"""

from __future__ import annotations

import ast
import contextlib
import ctypes
import ctypes.util
import functools
import glob
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

# Every test here loads the problems' modules, which import torch (its CPU build is enough).
torch = pytest.importorskip("torch", reason="the example problems need torch (its CPU build is enough)")

from kernelscope.fast import CudaKernel  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
PROBLEMS_DIR = REPO / "examples" / "problems"
VARIANTS = ("naive", "better")
F32, F16 = torch.float32, torch.float16

# inputs / out: full-size shapes and dtypes; small: constants for CPU checks and dry runs; odd: the
# GPU test's awkward size (lengths not multiples of 4 or of the tiles); tol: the GPU comparison.
SPECS: dict[str, dict[str, Any]] = {
    "softmax": {
        "inputs": [((4096, 4096), F32)], "out": ((4096, 4096), F32), "init": [],
        "small": {"BATCH": 5, "DIM": 37}, "odd": {"BATCH": 33, "DIM": 1001},
        # Outputs are ~1/DIM, so atol=1e-4 would check nothing: a relative check with a tiny atol.
        "tol": {"rtol": 1e-4, "atol": 1e-7},
    },
    "layernorm": {
        "inputs": [((4096, 4096), F32)], "out": ((4096, 4096), F32), "init": [4096, 1e-5],
        "small": {"BATCH": 5, "DIM": 40}, "odd": {"BATCH": 33, "DIM": 1001},
        "tol": {"rtol": 1e-4, "atol": 1e-4},
    },
    "row_sum": {
        "inputs": [((8192, 8192), F32)], "out": ((8192,), F32), "init": [],
        "small": {"ROWS": 6, "COLS": 40}, "odd": {"ROWS": 37, "COLS": 1001},
        # Sums have std ~90. A plain sequential float sum would be off by up to ~1e-3 (simulated on the
        # CPU: a few of 8192 rows fail rtol=atol=1e-4), hence the Kahan sum in naive.py.
        "tol": {"rtol": 1e-4, "atol": 1e-4},
    },
    "elementwise_chain": {
        "inputs": [((8192, 8192), F32)], "out": ((8192, 8192), F32), "init": [1.5, 0.25],
        "small": {"ROWS": 3, "COLS": 41}, "odd": {"ROWS": 3, "COLS": 1001},
        "tol": {"rtol": 1e-5, "atol": 1e-5},
    },
    "matmul_fp16": {
        "inputs": [((4096, 4096), F16), ((4096, 4096), F16)], "out": ((4096, 4096), F16), "init": [],
        "small": {"M": 24, "K": 16, "N": 40}, "odd": {"M": 200, "K": 72, "N": 136},
        "tol": {"rtol": 1e-2, "atol": 1e-2},
    },
    "depthwise_conv2d": {
        "inputs": [((16, 64, 256, 256), F32)], "out": ((16, 64, 256, 256), F32), "init": [64],
        "small": {"BATCH": 2, "CHANNELS": 3, "HEIGHT": 9, "WIDTH": 11},
        "odd": {"BATCH": 2, "CHANNELS": 3, "HEIGHT": 45, "WIDTH": 70},
        "tol": {"rtol": 1e-5, "atol": 1e-5},
    },
}
PROBLEMS = list(SPECS)
CASES = [(p, v) for p in PROBLEMS for v in VARIANTS]

# torch names a candidate may use: construction, allocation, dtypes, device queries.
ALLOWED_TORCH_ATTRS = {"nn", "Tensor", "empty", "empty_like", "float16", "float32", "device", "cuda", "randn"}
FORBIDDEN_METHODS = {
    "sum", "mean", "softmax", "log_softmax", "exp", "matmul", "mm", "bmm", "addmm", "einsum", "conv2d",
    "layer_norm", "sigmoid", "tanh", "gelu", "var", "std", "max", "amax", "min", "logsumexp", "norm",
    "cumsum", "prod", "mul", "add", "div", "sub", "relu", "half", "float", "double", "bfloat16", "to",
}


@functools.cache
def load(problem: str, variant: str) -> ModuleType:
    path = PROBLEMS_DIR / problem / f"{variant}.py"
    name = f"ks_problem_{problem}_{variant}"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def patch_sizes(monkeypatch: pytest.MonkeyPatch, problem: str, which: str) -> ModuleType:
    ref = load(problem, "reference")
    for name, value in SPECS[problem][which].items():
        assert hasattr(ref, name), f"{problem}/reference.py has no size constant {name}"
        monkeypatch.setattr(ref, name, value)
    return ref


# ---------------------------------------------------------------------------------------------------
# Layout and references


def test_layout() -> None:
    dirs = sorted(p.name for p in PROBLEMS_DIR.iterdir() if p.is_dir() and not p.name.startswith("__"))
    assert dirs == sorted(PROBLEMS)
    for problem in PROBLEMS:
        for f in ("reference.py", "naive.py", "better.py"):
            assert (PROBLEMS_DIR / problem / f).is_file(), f"{problem}/{f}"
    assert (PROBLEMS_DIR / "softmax" / "load_inline.py").is_file()
    readme = (PROBLEMS_DIR / "README.md").read_text()
    for problem in PROBLEMS:
        assert f"`{problem}`" in readme


@pytest.mark.parametrize("problem", PROBLEMS)
def test_full_size_inputs(problem: str) -> None:
    spec = SPECS[problem]
    ref = load(problem, "reference")
    with torch.device("meta"):
        inputs = ref.get_inputs()
    assert [(tuple(t.shape), t.dtype) for t in inputs] == spec["inputs"]
    assert ref.get_init_inputs() == spec["init"]


@pytest.mark.parametrize("problem", PROBLEMS)
def test_reference_runs_on_small_cpu_inputs(problem: str, monkeypatch: pytest.MonkeyPatch) -> None:
    ref = patch_sizes(monkeypatch, problem, "small")
    torch.manual_seed(0)
    inputs = ref.get_inputs()
    for t in inputs:
        assert t.device.type == "cpu"
        assert t.float().std() > 0.01, "inputs must be random, not zeros or constants"
    model = ref.Model(*ref.get_init_inputs())
    with torch.no_grad():
        out = model(*inputs)
    dtype = SPECS[problem]["out"][1]
    assert out.dtype == dtype
    assert len(out.shape) == len(SPECS[problem]["out"][0])
    assert torch.isfinite(out).all()
    assert out.float().std() > 0


@pytest.mark.parametrize(("problem", "variant"), CASES)
def test_parameters_match_under_same_seed(problem: str, variant: str) -> None:
    ref = load(problem, "reference")
    cand = load(problem, variant)
    init = ref.get_init_inputs()
    torch.manual_seed(1234)
    model = ref.Model(*init)
    torch.manual_seed(1234)
    new = cand.ModelNew(*init)
    ref_params = dict(model.named_parameters())
    new_params = dict(new.named_parameters())
    assert list(ref_params) == list(new_params)
    for name, p in ref_params.items():
        assert torch.equal(p, new_params[name]), name
        assert p.float().std() > 0.1, f"{name} should be random"


# ---------------------------------------------------------------------------------------------------
# Dry-run launches

INT32_MAX = 2**31 - 1
INT_TYPES = {"int", "int32", "int32_t", "unsigned", "unsigned int", "uint32", "uint32_t", "long long",
             "int64", "int64_t", "long", "size_t", "unsigned long long", "uint64", "uint64_t"}
FLOAT_TYPES = {"float", "double"}


def _check_launch(kernel: CudaKernel, grid: Any, block: Any, args: Any, shared_mem: int, device: str) -> None:
    assert kernel.arg_types is not None, f"cannot read the signature of {kernel.name}"
    assert len(args) == len(kernel.arg_types), f"{kernel.name}: {len(args)} args for {kernel.arg_types}"
    for i, (a, t) in enumerate(zip(args, kernel.arg_types, strict=True)):
        if t == "*":
            assert isinstance(a, torch.Tensor), f"{kernel.name} arg {i}: pointer parameter given {type(a)}"
            assert a.device.type == device and a.is_contiguous()
        elif t in INT_TYPES:
            assert isinstance(a, int) and not isinstance(a, bool), f"{kernel.name} arg {i}: {t} given {a!r}"
            if t in {"int", "int32", "int32_t"}:
                assert -(2**31) <= a <= INT32_MAX, f"{kernel.name} arg {i}: {a} overflows int"
        elif t in FLOAT_TYPES:
            assert isinstance(a, float), f"{kernel.name} arg {i}: {t} given {a!r}"
        else:
            raise AssertionError(f"{kernel.name} arg {i}: unexpected parameter type {t}")
    grid_t = (grid,) if isinstance(grid, int) else tuple(grid)
    block_t = (block,) if isinstance(block, int) else tuple(block)
    assert 1 <= len(grid_t) <= 3 and 1 <= len(block_t) <= 3
    assert all(isinstance(g, int) and g >= 1 for g in grid_t), grid_t
    assert grid_t[0] <= INT32_MAX and all(g <= 65535 for g in grid_t[1:]), grid_t
    threads = 1
    for b in block_t:
        threads *= b
    assert threads <= 1024 and threads % 32 == 0, block_t  # the kernels' shuffles assume whole warps
    assert len(block_t) < 3 or block_t[2] <= 64
    assert shared_mem <= 48 * 1024


@pytest.mark.parametrize("size", ["small", "full"])
@pytest.mark.parametrize(("problem", "variant"), CASES)
def test_dry_run_launches(problem: str, variant: str, size: str, monkeypatch: pytest.MonkeyPatch) -> None:
    launches: list[tuple[Any, ...]] = []

    def fake_call(self: CudaKernel, grid: Any, block: Any, args: Any, shared_mem: int = 0) -> None:
        launches.append((self, grid, block, tuple(args), shared_mem))

    monkeypatch.setattr(CudaKernel, "__call__", fake_call)
    cand = load(problem, variant)
    if size == "small":
        ref = patch_sizes(monkeypatch, problem, "small")
        device = "cpu"
    else:
        ref = load(problem, "reference")
        device = "meta"
    with torch.device(device):
        torch.manual_seed(0)
        inputs = ref.get_inputs()
        init = ref.get_init_inputs()
        model = ref.Model(*init)
        new = cand.ModelNew(*init)
    with torch.no_grad():
        out = new(*inputs)
        expected = model(*inputs)
    assert out.shape == expected.shape and out.dtype == expected.dtype
    assert out.device.type == device
    assert launches, "ModelNew.forward launched no kernel"
    for kernel, grid, block, args, shared_mem in launches:
        assert any(kernel is k for k in cand.KERNELS), f"{kernel.name} is not in KERNELS"
        _check_launch(kernel, grid, block, args, shared_mem, device)
    assert any(a is out for launch in launches for a in launch[3]), "the returned tensor is no kernel's argument"
    assert all(out is not t for t in inputs), "the output must not be an input"


# ---------------------------------------------------------------------------------------------------
# Static checks of the candidates


def _dotted(node: ast.AST) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


@pytest.mark.parametrize(("problem", "variant"), CASES)
def test_candidates_use_no_torch_compute(problem: str, variant: str) -> None:
    tree = ast.parse((PROBLEMS_DIR / problem / f"{variant}.py").read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                assert alias.name in {"torch", "functools"}, f"import {alias.name}"
        elif isinstance(node, ast.ImportFrom):
            assert node.module == "kernelscope.fast", f"from {node.module} import ..."
        elif isinstance(node, ast.Attribute):
            dotted = _dotted(node)
            if dotted and dotted.startswith("torch."):
                assert dotted.split(".")[1] in ALLOWED_TORCH_ATTRS, dotted
                assert not dotted.startswith("torch.nn.functional"), dotted
            if isinstance(node.ctx, ast.Load) and node.attr in FORBIDDEN_METHODS:
                raise AssertionError(f"{problem}/{variant}.py uses .{node.attr}")
        elif isinstance(node, ast.BinOp):
            assert not isinstance(node.op, ast.MatMult), "uses @"
        elif isinstance(node, ast.Try):
            raise AssertionError("no try/except fallbacks in candidates")
    module = load(problem, variant)
    assert isinstance(module.CUDA_SRC, str)
    assert module.KERNELS and all(isinstance(k, CudaKernel) for k in module.KERNELS)
    for k in module.KERNELS:
        assert k.source == module.CUDA_SRC
        assert re.search(rf'extern\s+"C"\s+__global__\s+void\s+(__launch_bounds__\s*\([^)]*\)\s*)?{k.name}\s*\(',
                         k.source), f"{k.name} must be an extern \"C\" __global__ function"
        assert k.arg_types is not None
        # Host headers are not there under NVRTC.
        for header in re.findall(r"#include\s*<([^>]+)>", k.source):
            assert header in {"cuda_fp16.h", "mma.h"}, header


def _load_inline_sources() -> dict[str, str]:
    tree = ast.parse((PROBLEMS_DIR / "softmax" / "load_inline.py").read_text())
    found: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
            if name in {"KERNEL_SRC", "LAUNCHER_SRC", "CPP_SRC"}:
                found[name] = ast.literal_eval(node.value)
    return found


def test_load_inline_softmax_is_the_better_kernel() -> None:
    # Importing load_inline.py builds the extension, so read it without importing.
    src = _load_inline_sources()
    assert src["KERNEL_SRC"] == load("softmax", "better").CUDA_SRC
    assert "softmax_rows<<<" in src["LAUNCHER_SRC"]
    assert "torch::Tensor softmax_forward(torch::Tensor x)" in src["LAUNCHER_SRC"]
    assert src["CPP_SRC"].strip() == "torch::Tensor softmax_forward(torch::Tensor x);"
    text = (PROBLEMS_DIR / "softmax" / "load_inline.py").read_text()
    assert "hashlib.sha256" in text and "name=EXTENSION_NAME" in text


# ---------------------------------------------------------------------------------------------------
# Compiling the CUDA sources

ARCH = "sm_90"


def _all_kernels() -> list[tuple[str, str, CudaKernel]]:
    return [(p, v, k) for p, v in CASES for k in load(p, v).KERNELS]


@pytest.fixture(scope="module")
def nvcc_results() -> dict[str, tuple[int, str, bytes]]:
    """source -> (returncode, compiler output, cubin bytes), compiled in parallel with nvcc."""
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc is not on PATH")
    sources = sorted({k.source for _, _, k in _all_kernels()})
    with tempfile.TemporaryDirectory() as tmp:

        def build(i: int) -> tuple[int, str, bytes]:
            cu = Path(tmp) / f"k{i}.cu"
            cubin = Path(tmp) / f"k{i}.cubin"
            cu.write_text(sources[i])
            proc = subprocess.run([nvcc, "-cubin", f"-arch={ARCH}", "-std=c++17", "-Xptxas", "-v",
                                   "-o", str(cubin), str(cu)], capture_output=True, text=True, timeout=300)
            data = cubin.read_bytes() if proc.returncode == 0 else b""
            return proc.returncode, proc.stdout + proc.stderr, data

        with ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2)) as pool:
            results = list(pool.map(build, range(len(sources))))
    return dict(zip(sources, results, strict=True))


@pytest.mark.parametrize(("problem", "variant"), CASES)
def test_nvcc_compiles(problem: str, variant: str, nvcc_results: dict[str, tuple[int, str, bytes]]) -> None:
    for kernel in load(problem, variant).KERNELS:
        rc, log, cubin = nvcc_results[kernel.source]
        assert rc == 0, f"{problem}/{variant}.py {kernel.name}:\n{log}"
        # extern "C": the plain name is a symbol of its own in the string table.
        assert b"\0" + kernel.name.encode() + b"\0" in cubin, f"{kernel.name} not found unmangled"
        spills = re.findall(r"(\d+) bytes spill stores, (\d+) bytes spill loads", log)
        assert spills and all(s == ("0", "0") for s in spills), f"{kernel.name} spills:\n{log}"
        smem = [int(s) for s in re.findall(r"(\d+) bytes smem", log)]
        assert all(s <= 48 * 1024 for s in smem), smem


def _find_nvrtc() -> tuple[str, str] | None:
    """(libnvrtc path, CUDA include dir), or None. KERNELSCOPE_NVRTC_LIB / KERNELSCOPE_CUDA_INCLUDE
    override; otherwise NVIDIA's wheels (nvidia.cu13 / nvidia.cuda_nvrtc), the linker's search path
    and the toolkit beside nvcc."""
    lib = os.environ.get("KERNELSCOPE_NVRTC_LIB")
    if not lib:
        candidates: list[str] = []
        with contextlib.suppress(ImportError):
            import nvidia

            for base in nvidia.__path__:
                candidates += sorted(glob.glob(os.path.join(base, "*", "lib", "libnvrtc.so.*[0-9]")))
        found = ctypes.util.find_library("nvrtc")
        if found:
            candidates.append(found)
        nvcc = shutil.which("nvcc")
        if nvcc:
            root = os.path.dirname(os.path.dirname(os.path.realpath(nvcc)))
            candidates += sorted(glob.glob(os.path.join(root, "lib*", "libnvrtc.so*")))
        candidates = [c for c in candidates if "builtins" not in c and ".alt." not in c]
        if not candidates:
            return None
        lib = candidates[0]
    include = os.environ.get("KERNELSCOPE_CUDA_INCLUDE")
    if not include:
        nvcc = shutil.which("nvcc")
        roots = [os.environ.get("CUDA_PATH", ""), os.path.dirname(os.path.dirname(os.path.realpath(nvcc))) if nvcc
                 else "", "/usr/local/cuda"]
        include = next((os.path.join(r, "include") for r in roots
                        if r and os.path.isfile(os.path.join(r, "include", "crt", "mma.h"))), "")
    if not include:
        return None
    return lib, include


def _nvrtc_compile(lib: ctypes.CDLL, source: str, options: list[str]) -> tuple[int, str]:
    prog = ctypes.c_void_p()
    assert lib.nvrtcCreateProgram(ctypes.byref(prog), source.encode(), b"kernel.cu", 0, None, None) == 0
    try:
        opts = (ctypes.c_char_p * len(options))(*[o.encode() for o in options])
        rc = lib.nvrtcCompileProgram(prog, len(options), opts)
        size = ctypes.c_size_t()
        lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
        log = ctypes.create_string_buffer(size.value)
        lib.nvrtcGetProgramLog(prog, log)
        return rc, log.value.decode(errors="replace")
    finally:
        lib.nvrtcDestroyProgram(ctypes.byref(prog))


def test_nvrtc_compiles() -> None:
    """What the fast path does: NVRTC with CudaKernel's options and the CUDA include directory that
    CuPy adds. Skipped where no libnvrtc is found (set KERNELSCOPE_NVRTC_LIB to one)."""
    found = _find_nvrtc()
    if found is None:
        pytest.skip("no libnvrtc found (set KERNELSCOPE_NVRTC_LIB and KERNELSCOPE_CUDA_INCLUDE)")
    lib_path, include = found
    for builtins in sorted(glob.glob(os.path.join(os.path.dirname(lib_path), "libnvrtc-builtins.so.*"))):
        if ".alt." not in builtins:
            ctypes.CDLL(builtins, mode=ctypes.RTLD_GLOBAL)
    lib = ctypes.CDLL(lib_path)
    failures = []
    for source in sorted({k.source for _, _, k in _all_kernels()}):
        options = [*CudaKernel(source, "x").options, f"-arch={ARCH}", f"-I{include}"]
        rc, log = _nvrtc_compile(lib, source, options)
        if rc != 0:
            failures.append(f"{source[:200]}...\n{log}")
    assert not failures, "\n\n".join(failures)


# ---------------------------------------------------------------------------------------------------
# On the GPU


@pytest.fixture
def exact_fp32_references() -> Iterator[None]:
    # torch's backend flags are properties: set and restore them by hand (monkeypatch would try to
    # delete them on undo)
    m, c = torch.backends.cuda.matmul, torch.backends.cudnn
    saved = (m.allow_tf32, c.allow_tf32, m.allow_fp16_reduced_precision_reduction)
    m.allow_tf32, c.allow_tf32, m.allow_fp16_reduced_precision_reduction = False, False, False
    yield
    m.allow_tf32, c.allow_tf32, m.allow_fp16_reduced_precision_reduction = saved


def _compare_on_gpu(ref: ModuleType, make_new: Any, problem: str, seed: int = 42) -> None:
    init = ref.get_init_inputs()
    torch.manual_seed(seed)
    model = ref.Model(*init).cuda()
    torch.manual_seed(seed)
    new = make_new(*init).cuda()
    torch.manual_seed(seed + 1)
    inputs = [t.cuda() for t in ref.get_inputs()]
    saved = [t.clone() for t in inputs]
    with torch.no_grad():
        expected = model(*inputs)
        # Poison: a freed NaN block of the output's size is what the caching allocator hands out next.
        poison = torch.full_like(expected, float("nan"))
        del poison
        out = new(*inputs)
    torch.cuda.synchronize()
    assert out.shape == expected.shape and out.dtype == expected.dtype and out.is_cuda
    assert torch.isfinite(out).all(), "unwritten (poisoned) or non-finite outputs"
    torch.testing.assert_close(out, expected, **SPECS[problem]["tol"])
    for t, s in zip(inputs, saved, strict=True):
        assert torch.equal(t, s), "the candidate wrote to its inputs"


@pytest.mark.gpu
@pytest.mark.parametrize("size", ["full", "odd"])
@pytest.mark.parametrize(("problem", "variant"), CASES)
def test_candidate_matches_reference_on_gpu(problem: str, variant: str, size: str, monkeypatch: pytest.MonkeyPatch,
                                            exact_fp32_references: None) -> None:
    pytest.importorskip("cupy")
    ref = patch_sizes(monkeypatch, problem, "odd") if size == "odd" else load(problem, "reference")
    _compare_on_gpu(ref, load(problem, variant).ModelNew, problem)


@pytest.mark.gpu
@pytest.mark.slow
def test_load_inline_softmax_on_gpu(exact_fp32_references: None) -> None:
    module = load("softmax", "load_inline")  # builds the extension (a minute or two the first time)
    _compare_on_gpu(load("softmax", "reference"), module.ModelNew, "softmax")
