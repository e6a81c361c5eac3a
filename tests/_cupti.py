"""Building small test programs against CUPTI with nvcc (the collector's and the tracer's CPU tests)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kernelscope.measure.cupti import CuptiPaths


def build_with_cupti(paths: CuptiPaths, where: Path, name: str, source: str, include: Path,
                     libs: tuple[str, ...] = (), timeout_s: float = 600) -> Path:
    """``source`` written as ``where/name.cpp`` and built with nvcc against CUPTI (``paths``: the
    ``cupti_build_paths`` fixture) and the headers in ``include``; the executable. The build must succeed."""
    from kernelscope.toolkit.toolchain import require

    (where / f"{name}.cpp").write_text(source)
    link = where / "link"
    link.mkdir(exist_ok=True)
    if not (link / "libcupti.so").exists():
        (link / "libcupti.so").symlink_to(paths.library)
    b = subprocess.run([str(require("nvcc")), "-std=c++17", "-O1", "-I", str(paths.include_dir), "-I", str(include),
                        f"{name}.cpp", "-o", name, "-L", str(link), "-lcupti", *libs,
                        f"-Xlinker=-rpath,{paths.lib_dir}"],
                       capture_output=True, text=True, cwd=where, timeout=timeout_s)
    assert b.returncode == 0, b.stderr[-3000:]
    return where / name
