"""The CUPTI activity tracer: find CUPTI, build ``native/cupti_trace.cpp`` into an injection library.

The library is loaded into any CUDA process through ``CUDA_INJECTION64_PATH`` (the driver calls its
``InitializeInjection`` from ``cuInit``) and writes one JSON Lines file per traced process into
``$KERNELSCOPE_TRACE_DIR``; ``kernelscope.measure.timeline.load_cupti`` reads them back.

CUPTI's headers and ``libcupti.so`` are looked for next to the CUDA toolkit whose ``nvcc`` we compile
with, then in NVIDIA's PyPI wheels (``nvidia/cuda_cupti``, ``nvidia/cu13``, ...). Builds are cached
under ``<home>/cache/cupti/<key>/``, keyed by the source, the compiler version and the CUPTI library.
"""

from __future__ import annotations

import glob
import hashlib
import os
import re
import shutil
import sys
import sysconfig
import tempfile
import threading
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from kernelscope.config import Settings, ensure_dirs
from kernelscope.errors import NotAvailable
from kernelscope.sandbox.process import Limits, ProcessResult, build_env, run_process
from kernelscope.toolkit.toolchain import ToolMissing, require, tool_info

SOURCE = Path(__file__).resolve().parent / "native" / "cupti_trace.cpp"
LIBRARY_NAME = "libkernelscope_trace.so"
# the in-process metric collector (CUPTI's Range Profiler), built the same way: see measure/collector.py
METRICS_SOURCE = Path(__file__).resolve().parent / "native" / "cupti_metrics.cpp"
METRICS_LIBRARY_NAME = "libkernelscope_metrics.so"
BUILD_TIMEOUT_S = 300.0
CUPTI_FIX = (
    "install the CUDA toolkit's CUPTI component (cupti.h and libcupti.so, in <cuda>/include and <cuda>/lib64 "
    "or <cuda>/extras/CUPTI), or `pip install nvidia-cuda-cupti` into kernelscope's environment"
)

_build_lock = threading.Lock()
_SO_VERSIONED = re.compile(r"^libcupti\.so\.(\d+(?:\.\d+)*)$")


@dataclass(frozen=True)
class CuptiPaths:
    """Where CUPTI is: the folder with ``cupti.h``, the folder with the library, and the library."""

    include_dir: Path
    lib_dir: Path
    library: Path


# ---------------------------------------------------------------------------------------- discovery
@lru_cache(maxsize=8)
def _nvcc_top(nvcc: Path) -> Path | None:
    """The toolkit root nvcc itself reports (``#$ TOP=...`` of a dry run): right even when the nvcc
    on PATH is a wrapper script rather than a link into the toolkit."""
    r = _run([str(nvcc), "--dryrun", "-x", "cu", "-E", os.devnull], Path(tempfile.gettempdir()), 30)
    if r.returncode is None or r.timed_out or _not_started(r):
        return None
    m = re.search(r"^#\$ TOP=(.+)$", r.stdout + r.stderr, re.MULTILINE)
    return Path(m.group(1).strip()).resolve() if m else None


def _toolkit_roots() -> list[Path]:
    """Roots of the CUDA toolkit that holds the nvcc we compile with (none if there is no nvcc)."""
    try:
        nvcc = require("nvcc")
    except ToolMissing:
        return []
    roots = [nvcc.resolve().parent.parent]
    if not _cupti_include_dir(roots[0]):
        top = _nvcc_top(nvcc)
        if top is not None and top not in roots:
            roots.append(top)
    return roots


def _wheel_roots() -> list[Path]:
    """Package folders of NVIDIA's wheels (``nvidia/cuda_cupti``, ``nvidia/cu13``, ...) on sys.path."""
    sites = [sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"], *sys.path]
    out: list[Path] = []
    for site in dict.fromkeys(sites):
        if not site or not os.path.isdir(os.path.join(site, "nvidia")):
            continue
        for d in sorted(glob.glob(os.path.join(site, "nvidia", "*")), reverse=True):
            p = Path(d)
            if p.is_dir() and p not in out:
                out.append(p)
    return out


def _cupti_include_dir(root: Path) -> Path | None:
    cands = [root / "include", root / "extras" / "CUPTI" / "include"]
    cands += [Path(p) for p in sorted(glob.glob(str(root / "targets" / "*" / "include")))]
    return next((d for d in cands if (d / "cupti.h").is_file()), None)


def _cupti_library(root: Path) -> Path | None:
    """``libcupti.so`` in one of the root's library folders, else the newest ``libcupti.so.<N>``."""
    dirs = [root / "extras" / "CUPTI" / "lib64", root / "lib64", root / "lib"]
    dirs += [Path(p) for p in sorted(glob.glob(str(root / "targets" / "*" / "lib")))]
    for d in dirs:
        if (d / "libcupti.so").is_file():
            return d / "libcupti.so"
        versioned = [(v, p) for p in d.glob("libcupti.so.*") if p.is_file() and (v := _so_version(p.name))]
        if versioned:
            return max(versioned)[1]
    return None


def _so_version(name: str) -> tuple[int, ...] | None:
    m = _SO_VERSIONED.match(name)
    return tuple(int(x) for x in m.group(1).split(".")) if m else None


def cupti_paths() -> CuptiPaths:
    """CUPTI's include folder and library, from the nvcc toolkit first and NVIDIA's wheels second.

    The headers and the library are taken from the same root where one has both; otherwise from the
    first root that has each. Raises ``NotAvailable`` (with the fix) when either is missing.
    """
    roots = [*_toolkit_roots(), *_wheel_roots()]
    found = [(r, _cupti_include_dir(r), _cupti_library(r)) for r in roots]
    for _root, inc, lib in found:
        if inc is not None and lib is not None:
            return CuptiPaths(include_dir=inc, lib_dir=lib.parent, library=lib)
    inc = next((i for _, i, _ in found if i is not None), None)
    lib = next((b for _, _, b in found if b is not None), None)
    if inc is not None and lib is not None:
        return CuptiPaths(include_dir=inc, lib_dir=lib.parent, library=lib)
    where = ", ".join(str(r) for r in roots) or "no CUDA toolkit (nvcc not found) and no NVIDIA wheels"
    missing = " and ".join(x for x, v in (("cupti.h", inc), ("libcupti.so", lib)) if v is None)
    raise NotAvailable("CUPTI tracing", f"{missing} was not found (searched: {where})", CUPTI_FIX)


# ---------------------------------------------------------------------------------------- building
def _run(argv: list[str], cwd: Path, timeout_s: float) -> ProcessResult:
    """A build step (nvcc, the load probe) through the sandbox's launcher, in the server's CUDA environment."""
    return run_process(argv, cwd=cwd, env=build_env(), limits=Limits(wall_s=timeout_s, output_bytes=4 << 20))


def _not_started(r: ProcessResult) -> bool:
    """The launcher could not execute the command (it exits 127 and says so)."""
    return r.returncode == 127 and "kernelscope sandbox: cannot execute" in r.stderr


def _build_key(source: bytes, nvcc_version: str, library: Path) -> str:
    h = hashlib.sha256()
    for part in (source, nvcc_version.encode(), str(library).encode()):
        h.update(len(part).to_bytes(8, "little"))
        h.update(part)
    return h.hexdigest()[:16]


def _compile(nvcc: Path, paths: CuptiPaths, out_dir: Path, source: Path, library_name: str, what: str) -> None:
    """nvcc source -> out_dir/library_name, linked against (and with an rpath to) CUPTI."""
    link_dir = paths.lib_dir
    if paths.library.name != "libcupti.so":  # wheels ship only libcupti.so.<N>: give -lcupti a name to find
        link_dir = out_dir / "link"
        link_dir.mkdir()
        (link_dir / "libcupti.so").symlink_to(paths.library)
    argv = [str(nvcc), "-shared", "-Xcompiler", "-fPIC", "-Xcompiler", "-fvisibility=hidden", "-O2", "-std=c++17",
            "-I", str(paths.include_dir), str(source), "-o", str(out_dir / library_name),
            "-L", str(link_dir), "-lcupti", "-ldl", f"-Xlinker=-rpath,{paths.lib_dir}"]
    r = _run(argv, out_dir, BUILD_TIMEOUT_S)
    if r.timed_out:
        raise NotAvailable(what, f"building {library_name} took longer than {BUILD_TIMEOUT_S:.0f} s",
                           "retry on a less loaded machine")
    if r.returncode is None or _not_started(r):
        raise NotAvailable(what, f"nvcc could not be started ({r.stderr.strip()[:300]})",
                           "check the CUDA toolkit install")
    if r.returncode != 0 or not (out_dir / library_name).is_file():
        head = "\n".join((r.stderr + r.stdout).strip().splitlines()[:15]) or f"exit status {r.returncode}"
        raise NotAvailable(what, f"{library_name} did not build:\n{head}\n",
                           "check that cupti.h and libcupti.so come from the same CUDA version as nvcc")
    if link_dir != paths.lib_dir:
        shutil.rmtree(link_dir, ignore_errors=True)
    # the driver loads an injection library silently: one that cannot load (an unresolved symbol) would
    # collect nothing and say nothing, so it is loaded once here, in a child process, before it is used
    probe = "import ctypes, sys; ctypes.CDLL(sys.argv[1])"
    r = _run([sys.executable, "-c", probe, str(out_dir / library_name)], out_dir, 60)
    if r.returncode != 0:
        err = (r.stderr.strip().splitlines() or [f"exit status {r.returncode}"])[-1]
        raise NotAvailable(what, f"{library_name} built but does not load ({err[:300]})",
                           "check that cupti.h and libcupti.so come from the same CUDA version as nvcc")


def build_tracer(settings: Settings | None = None) -> Path:
    """The activity tracer's injection library (``native/cupti_trace.cpp``), built once and cached."""
    return _build(settings, SOURCE, LIBRARY_NAME, "CUPTI tracing")


def build_metrics_collector(settings: Settings | None = None) -> Path:
    """The metric collector's injection library (``native/cupti_metrics.cpp``), built once and cached."""
    return _build(settings, METRICS_SOURCE, METRICS_LIBRARY_NAME, "CUPTI metrics")


def _build(settings: Settings | None, source_path: Path, library_name: str, what: str) -> Path:
    """An injection library, built once per (source, nvcc version, CUPTI library) and cached.

    The build goes to a temporary folder next to its final place and is renamed into place, so
    concurrent builders (threads or processes) never see a half-written library.
    """
    s = ensure_dirs(settings)
    try:
        nvcc = require("nvcc")
    except ToolMissing as e:
        raise NotAvailable(what, f"nvcc, which builds {library_name}, was not found", e.note) from None
    paths = cupti_paths()
    try:
        source = source_path.read_bytes()
    except OSError as e:
        raise NotAvailable(what, f"the source {source_path.name} is missing from this install ({e})",
                           f"reinstall kernelscope (the wheel ships measure/native/{source_path.name})") from None
    version = tool_info("nvcc").version or "unknown"
    parent = s.home / "cache" / "cupti"
    final_dir = parent / _build_key(source, version, paths.library)
    lib = final_dir / library_name
    with _build_lock:
        if lib.is_file():
            return lib
        parent.mkdir(parents=True, exist_ok=True)
        if final_dir.exists():  # left by a build that died halfway
            shutil.rmtree(final_dir, ignore_errors=True)
        tmp = Path(tempfile.mkdtemp(prefix=".build-", dir=parent))
        try:
            _compile(nvcc, paths, tmp, source_path, library_name, what)
            try:
                tmp.rename(final_dir)
            except OSError:
                if not lib.is_file():  # not another process' finished build: a real failure
                    raise
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return lib


def tracer_env(lib: Path, trace_dir: Path) -> dict[str, str]:
    """Environment variables that load the tracer into a CUDA process and route NVTX ranges to CUPTI."""
    return {
        "CUDA_INJECTION64_PATH": str(lib),
        # the tracer forwards NVTX's entry point to the CUPTI it is linked with (see the source)
        "NVTX_INJECTION64_PATH": str(lib),
        "KERNELSCOPE_TRACE_DIR": str(trace_dir),
    }
