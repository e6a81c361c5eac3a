"""The second planted suite's benchmark module (benchmarks/planted2.py) for the tests, and its recorded H100
kernels (tests/fixtures/planted2/<case>/deep.ncu-rep.gz), each report read once through the benchmark's own
loader."""

from __future__ import annotations

import importlib.util
import sys
from functools import cache
from pathlib import Path
from types import ModuleType

from kernelscope.models import KernelProfile

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "tests" / "fixtures" / "planted2"


@cache
def suite() -> ModuleType:
    """benchmarks/planted2.py, imported once (as ``planted2_bench``)."""
    spec = importlib.util.spec_from_file_location("planted2_bench", REPO / "benchmarks" / "planted2.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules["planted2_bench"] = mod
    spec.loader.exec_module(mod)
    return mod


@cache
def _kernels(case: str) -> tuple[KernelProfile, ...]:
    return tuple(suite().load_gzipped_report(FIXTURES / case / "deep.ncu-rep.gz").kernels)


def kernel(case: str, name: str) -> KernelProfile:
    """The recorded kernel of ``case`` whose name starts with ``name``."""
    return next(k for k in _kernels(case) if k.name.startswith(name))


def marked(case: str) -> list[int]:
    """The ``// PLANTED`` lines of ``case``'s program (examples/planted2/<case>/planted.cu)."""
    return suite().marked_lines((REPO / "examples" / "planted2" / case / "planted.cu").read_text())
