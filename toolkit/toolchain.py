"""Find the CUDA tools on this host: PATH, CUDA_HOME, the default install, NVIDIA's PyPI wheels and
the Nsight install folders, in that order; ask each for its version through the sandbox."""

from __future__ import annotations

import glob
import os
import re
import shutil
import sys
import sysconfig
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

from kernelscope.models import ToolInfo
from kernelscope.sandbox.process import Limits, build_env, run_process
from kernelscope.sandbox.workspace import Workspace

TOOL_NAMES = ("nvcc", "ptxas", "cuobjdump", "nvdisasm", "ncu", "nsys", "compute-sanitizer", "cu++filt")

_VERSION_ARGS: dict[str, list[str]] = {
    "nvcc": ["--version"],
    "ptxas": ["--version"],
    "cuobjdump": ["--version"],
    "nvdisasm": ["--version"],
    "ncu": ["--version"],
    "nsys": ["--version"],
    "compute-sanitizer": ["--version"],
    "cu++filt": ["_Z1fv"],  # it has no --version: demangling a name proves it works
}

_MISSING_FIX: dict[str, str] = {
    "nvcc": "install the CUDA toolkit, or `pip install 'kernelscope[nvcc]'` for NVIDIA's nvcc wheel",
    "ptxas": "ptxas ships with nvcc: install the CUDA toolkit or NVIDIA's nvcc wheel",
    "cuobjdump": "`pip install nvidia-cuda-cuobjdump` (a kernelscope dependency on Linux)",
    "nvdisasm": "`pip install nvidia-cuda-nvdisasm` (a kernelscope dependency on Linux)",
    "ncu": "install Nsight Compute (CUDA toolkit or the standalone download) and put `ncu` on PATH",
    "nsys": "install Nsight Systems and put `nsys` on PATH; kernelscope falls back to CUPTI tracing",
    "compute-sanitizer": "install the CUDA toolkit's compute-sanitizer",
    "cu++filt": "optional: kernel names are demangled with c++filt instead",
}


def _wheel_bin_dirs() -> list[Path]:
    """bin/ folders of NVIDIA's wheels (nvidia/cu13/bin, nvidia/cuda_nvcc/bin, ...) in every
    site-packages of this interpreter."""
    roots = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"], *sys.path}
    out: list[Path] = []
    for root in roots:
        if not root or not os.path.isdir(os.path.join(root, "nvidia")):
            continue
        for d in sorted(glob.glob(os.path.join(root, "nvidia", "*", "bin")), reverse=True):
            p = Path(d)
            if p not in out:
                out.append(p)
    return out


def _nsight_dirs(name: str) -> list[Path]:
    pats = {
        "ncu": ["/opt/nvidia/nsight-compute/*", "/usr/local/NVIDIA-Nsight-Compute*"],
        "nsys": ["/opt/nvidia/nsight-systems/*/bin", "/opt/nvidia/nsight-compute/*/host/target-linux-x64"],
    }.get(name, [])
    found: list[Path] = []
    for pat in pats:
        found += [Path(p) for p in sorted(glob.glob(pat), reverse=True)]
    return found


def locate(name: str) -> tuple[Path | None, str | None]:
    """Where ``name`` is, and by which route."""
    p = shutil.which(name)
    if p:
        return Path(p), "PATH"
    for var in ("CUDA_HOME", "CUDA_PATH"):
        home = os.environ.get(var)
        if home and (Path(home) / "bin" / name).is_file():
            return Path(home) / "bin" / name, "CUDA_HOME"
    default = Path("/usr/local/cuda/bin") / name
    if default.is_file():
        return default, "default-install"
    for d in _wheel_bin_dirs():
        if (d / name).is_file():
            return d / name, "nvidia-wheel"
    for d in _nsight_dirs(name):
        if (d / name).is_file():
            return d / name, "nsight-install"
    return None, None


def _parse_version(name: str, text: str) -> str | None:
    m = re.search(r"release (\d+\.\d+), V([\d.]+)", text)  # nvcc / ptxas / cuobjdump / nvdisasm
    if m:
        return m.group(2)
    m = re.search(r"Version\s+(\d[\w.\-]*)", text)  # ncu: "Version 2025.3.1.0 (build ...)"
    if m:
        return m.group(1)
    m = re.search(r"(\d+\.\d+(?:\.\d+)*)", text)
    return m.group(1) if m else None


@lru_cache(maxsize=32)
def tool_info(name: str) -> ToolInfo:
    path, origin = locate(name)
    if path is None:
        return ToolInfo(name=name, found=False, note=f"{name} not found; fix: {_MISSING_FIX.get(name, '')}")
    cwd = Path(os.environ.get("TMPDIR", "/tmp"))
    r = run_process(
        [str(path), *_VERSION_ARGS.get(name, ["--version"])],
        cwd=cwd,
        limits=Limits(wall_s=30, output_bytes=64 * 1024),
        env=build_env(),
    )
    text = r.stdout + r.stderr
    version = _parse_version(name, text) if r.returncode == 0 else None
    note = None
    if r.returncode != 0:
        note = f"{name} at {path} did not answer --version ({r.describe_failure()}): {text.strip()[:200]}"
    return ToolInfo(
        name=name, found=True, path=str(path), origin=origin, version=version, usable=r.returncode == 0, note=note
    )


def require(name: str) -> Path:
    """The path of a usable tool, or a ``ToolMissing`` error that says how to get it."""
    info = tool_info(name)
    if not info.usable or info.path is None:
        raise ToolMissing(name, info.note or f"{name} is not usable here")
    return Path(info.path)


class ToolMissing(RuntimeError):
    def __init__(self, name: str, note: str) -> None:
        super().__init__(f"{name} is not available here: {note}")
        self.tool = name
        self.note = note


def demangle(names: Sequence[str]) -> dict[str, str]:
    """Mangled -> demangled with cu++filt or c++filt in one call; names map to themselves on failure."""
    unique = sorted(set(names))
    identity = {n: n for n in unique}
    mangled = [n for n in unique if n.startswith("_Z") and "\n" not in n]
    tool = locate("cu++filt")[0] or locate("c++filt")[0]
    if not mangled or tool is None:
        return identity
    with Workspace(prefix="demangle-") as ws:
        r = run_process(
            [str(tool)], cwd=ws.path, stdin=("\n".join(mangled) + "\n").encode(),
            limits=Limits(wall_s=20, output_bytes=4 << 20), env=build_env(home=ws.path),
        )
    out = r.stdout.splitlines() if r.ok else []
    if len(out) != len(mangled):
        return identity
    identity.update({n: (d.strip() or n) for n, d in zip(mangled, out, strict=True)})
    return identity


def reset_cache() -> None:
    tool_info.cache_clear()
