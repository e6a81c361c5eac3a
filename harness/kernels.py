"""The candidate's own GPU kernels, by name: the kernels its sources define, and whether a kernel name a
profiler reports (demangled, ``void ns::name<float>(float const*, ...)``, or mangled, ``_ZN2ns4nameIfEvPKf``)
is one of them.

Sources read: the candidate's file (the CUDA strings it hands to ``load_inline``, CuPy's ``RawKernel`` and
``RawModule``, ``kernelscope.fast.CudaKernel``, and its ``@triton.jit`` functions) and the CUDA/C++ files
beside it (what ``torch.utils.cpp_extension.load`` builds). Stdlib only, pure functions.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

#: what is read beside the candidate's file, at most
SIDE_SUFFIXES = (".cu", ".cuh", ".cpp", ".cc", ".h", ".hpp")
MAX_SIDE_BYTES = 4 << 20

_GLOBAL = re.compile(r"__global__\b")
_LAUNCH_BOUNDS = re.compile(r"__launch_bounds__\s*\((?:[^()]|\([^()]*\))*\)")
_IDENT = re.compile(r"[A-Za-z_]\w*")
_TRITON = re.compile(r"@\s*(?:triton\.)?jit\b[^\n]*\n(?:\s*@[^\n]*\n)*\s*def\s+([A-Za-z_]\w*)")
_TRITON_SUFFIX = re.compile(r"_[0-9][0-9a-z]*")  # older Triton's specialisation suffix (add_kernel_0d1d2de)


@dataclass(frozen=True)
class OwnKernels:
    """The kernel names the candidate defines: CUDA ``__global__`` functions, and Triton kernels."""

    cuda: frozenset[str] = field(default_factory=frozenset)
    triton: frozenset[str] = field(default_factory=frozenset)

    def __bool__(self) -> bool:
        return bool(self.cuda or self.triton)

    def matches(self, profiled: str) -> bool:
        """Whether a kernel name as a profiler reports it is one of these."""
        base = base_name(profiled)
        if base in self.cuda or base in self.triton:
            return True
        return any(base.startswith(t) and _TRITON_SUFFIX.fullmatch(base[len(t):]) for t in self.triton)


def defined_kernels(source: str) -> OwnKernels:
    """The kernels a source text defines (a Python file with CUDA strings, or a CUDA file)."""
    cuda: set[str] = set()
    for m in _GLOBAL.finditer(source):
        text = re.sub(r"\\[ntr]", " ", source[m.end():m.end() + 1000])  # a CUDA string's escapes, in repr
        head = _LAUNCH_BOUNDS.sub(" ", text).split("(", 1)[0]
        if ";" in head or "{" in head or len(head) > 400:  # not a declarator: a stray __global__ in text
            continue
        while (bare := re.sub(r"<[^<>]*>", " ", head)) != head:  # template arguments (an instantiation)
            head = bare
        names = _IDENT.findall(head)
        if names:
            cuda.add(names[-1])
    return OwnKernels(frozenset(cuda), frozenset(_TRITON.findall(source)))


def candidate_kernels(candidate_path: str, source: str | None = None) -> OwnKernels:
    """The kernels of the candidate's file and of the CUDA/C++ sources beside it (bounded)."""
    if source is None:
        with open(candidate_path, errors="replace") as f:
            source = f.read()
    own = defined_kernels(source)
    cuda, triton = set(own.cuda), set(own.triton)
    folder, budget = os.path.dirname(os.path.abspath(candidate_path)), MAX_SIDE_BYTES
    try:
        entries = sorted(os.listdir(folder))
    except OSError:
        entries = []
    for name in entries:
        path = os.path.join(folder, name)
        if not name.endswith(SIDE_SUFFIXES) or not os.path.isfile(path):
            continue
        size = os.path.getsize(path)
        if size > budget:
            break
        budget -= size
        with open(path, errors="replace") as f:
            cuda |= defined_kernels(f.read()).cuda
    return OwnKernels(frozenset(cuda), frozenset(triton))


# ------------------------------------------------------------------------------------ profiled names
def _demangled_base(name: str) -> str:
    """The function's own name in an Itanium-mangled symbol (``_Z3fooPf`` -> foo, ``_ZN2ns3fooIfEEvPf`` ->
    foo); the symbol itself where it cannot be read."""
    pos = 2
    if name.startswith("N", pos):
        pos += 1
        while pos < len(name) and name[pos] in "rVKO":  # cv- and ref-qualifiers of a nested name
            pos += 1
    last = ""
    while pos < len(name) and name[pos].isdigit():
        digits = re.match(r"\d+", name[pos:])
        assert digits is not None
        n = int(digits.group())
        pos += len(digits.group())
        last = name[pos:pos + n]
        pos += n
        if not name.startswith("N", 2):  # a plain name: one component
            break
    return last or name


def base_name(profiled: str) -> str:
    """A kernel's own name in a profiler's report: no return type, namespaces, template arguments or
    parameters (``void at::native::reduce_kernel<512, 1, ...>(...)`` -> reduce_kernel)."""
    n = profiled.strip()
    if n.startswith("_Z"):
        return _demangled_base(n)
    n = n.replace("(anonymous namespace)", "anon")
    depth, kept = 0, []
    for ch in n:
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth = max(depth - 1, 0)
        elif ch == "(" and depth == 0:
            break
        elif depth == 0:
            kept.append(ch)
    words = "".join(kept).split()
    return words[-1].split("::")[-1] if words else n
