"""Where the CUTLASS/CuTe headers are on this host, and what compiling against them needs.

The headers come from NVIDIA's ``nvidia-cutlass`` wheel (``pip install 'kernelscope[cutlass]'``: it
ships ``cutlass_library/source/{include,examples,tools}``) or from a CUTLASS checkout named by
``KERNELSCOPE_CUTLASS_ROOT`` (the checkout's root, or its ``include`` folder), which wins when set.

Standard library only (and :mod:`kernelscope.errors`), because ``kernelscope.fast`` imports it inside
candidate processes, where importing the server's settings and models would cost every candidate
their import time. Callers pass the configured root (``Settings.cutlass_root``, or the environment
variable in a candidate). The search index over these sources is :mod:`kernelscope.toolkit.cutlass_index`;
the ``search_cutlass`` and ``read_cutlass_file`` verbs are :mod:`kernelscope.tools.cutlass`.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from kernelscope.errors import NotAvailable

ENV_VAR = "KERNELSCOPE_CUTLASS_ROOT"
CUTLASS_FIX = ("`pip install 'kernelscope[cutlass]'` (NVIDIA's nvidia-cutlass wheel, which ships the headers and "
               f"examples), or set {ENV_VAR} to a CUTLASS checkout (the folder holding include/cute)")
# Folders of a root that hold sources, relative to it, and their weight in the search ranking.
AREAS: tuple[tuple[str, int], ...] = (("include", 3), ("examples", 2), ("tools/util/include", 1))


# ------------------------------------------------------------------------------------ discovery
@dataclass(frozen=True)
class CutlassRoot:
    root: Path
    origin: Literal["env", "wheel"]
    version: str | None
    include_dirs: tuple[Path, ...]
    areas: tuple[str, ...]  # indexed folders that exist here

    @property
    def has_examples(self) -> bool:
        return "examples" in self.areas


def _version(include: Path) -> str | None:
    try:
        text = (include / "cutlass" / "version.h").read_text(errors="replace")
    except OSError:
        return None
    parts = [re.search(rf"#define\s+CUTLASS_{k}\s+(\d+)", text) for k in ("MAJOR", "MINOR", "PATCH")]
    return ".".join(m.group(1) for m in parts) if all(parts) else None  # type: ignore[union-attr]


def _valid(root: Path) -> bool:
    inc = root / "include"
    return (inc / "cute" / "tensor.hpp").is_file() and (inc / "cutlass" / "cutlass.h").is_file()


def _make(root: Path, origin: Literal["env", "wheel"]) -> CutlassRoot:
    include = root / "include"
    incs = [include]
    util = root / "tools" / "util" / "include"
    if util.is_dir():
        incs.append(util)
    areas = tuple(a for a, _ in AREAS if (root / a).is_dir())
    return CutlassRoot(root=root, origin=origin, version=_version(include), include_dirs=tuple(incs), areas=areas)


def _wheel_root() -> Path | None:
    """``cutlass_library/source`` of the nvidia-cutlass wheel, found without importing the package."""
    try:
        spec = importlib.util.find_spec("cutlass_library")
    except (ImportError, ValueError):
        spec = None
    for loc in (spec.submodule_search_locations or []) if spec is not None else []:
        cand = Path(loc) / "source"
        if _valid(cand):
            return cand.resolve()
    return None



_locate_lock = threading.Lock()
_located: dict[str, tuple[CutlassRoot | None, str | None]] = {}


def configured_root() -> Path | None:
    """The root ``KERNELSCOPE_CUTLASS_ROOT`` names, as the server's settings read it (for processes
    without those settings, such as candidates)."""
    value = os.environ.get(ENV_VAR)
    return Path(value).expanduser() if value else None


def locate(configured: Path | None) -> tuple[CutlassRoot | None, str | None]:
    """The CUTLASS root to use (``configured``, else the wheel's) and, when there is none (or the
    configured one is unusable), why."""
    key = str(configured or "")
    with _locate_lock:
        if key in _located:
            return _located[key]
        result: tuple[CutlassRoot | None, str | None]
        if configured is not None:
            given = Path(configured).expanduser()
            cands = [given, given.parent] if given.name == "include" else [given]
            root = next((c.resolve() for c in cands if _valid(c)), None)
            if root is None:
                result = (None, f"{ENV_VAR}={given} holds no include/cute/tensor.hpp and include/cutlass/cutlass.h; "
                                f"fix: point it at a CUTLASS checkout, or unset it to use the nvidia-cutlass wheel")
            else:
                result = (_make(root, "env"), None)
        else:
            wheel = _wheel_root()
            result = (_make(wheel, "wheel"), None) if wheel else (
                None, f"the CUTLASS/CuTe headers were not found; fix: {CUTLASS_FIX}")
        _located[key] = result
        return result


def require(configured: Path | None) -> CutlassRoot:
    """The CUTLASS root, or :class:`NotAvailable` saying why there is none and the fix."""
    root, note = locate(configured)
    if root is None:
        why, _, fix = (note or "").partition("; fix: ")
        raise NotAvailable("CUTLASS/CuTe", why or "the headers were not found", fix or CUTLASS_FIX)
    return root


def reset_cache() -> None:
    with _locate_lock:
        _located.clear()


# ------------------------------------------------------------------------------------ compiling
def compile_flags(root: CutlassRoot) -> list[str]:
    """nvcc flags for CUTLASS: its include folders (as -I, added by kernelscope itself)."""
    return [f"-I{d}" for d in root.include_dirs]


def headers_fingerprint(root: CutlassRoot) -> str:
    """A hash of the root, its version and the names, sizes and times of its headers: part of the
    compile cache key, so editing a checkout's headers is never a stale cache hit."""
    h = hashlib.sha256(f"{root.root}\0{root.version}".encode())
    for inc in root.include_dirs:
        for dirpath, dirnames, filenames in os.walk(inc):
            dirnames.sort()
            for fn in sorted(filenames):
                try:
                    st = os.stat(os.path.join(dirpath, fn))
                except OSError:
                    continue
                h.update(f"{dirpath}/{fn}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return h.hexdigest()[:20]


def shorten_paths(text: str, root: CutlassRoot) -> str:
    """Write the CUTLASS root as ``<cutlass>`` in compiler output."""
    return text.replace(str(root.root) + "/", "<cutlass>/")
