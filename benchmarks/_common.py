"""Shared helpers for the benchmark scripts (each one command, printing a table)."""

from __future__ import annotations

import platform
import statistics
import tempfile
from collections.abc import Sequence
from datetime import date
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PROBLEMS = REPO / "examples" / "problems"


def use_private_store(extra_roots: Sequence[Path] = ()) -> Path:
    from kernelscope.config import set_settings, settings_from_env

    home = Path(tempfile.mkdtemp(prefix="ks-bench-"))
    set_settings(settings_from_env(home=home, roots=[str(REPO), *map(str, extra_roots)]))
    return home


def device_line() -> str:
    try:
        import torch

        gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU"
    except ImportError:
        gpu = "torch missing"
    return f"{date.today()} · {gpu} · {platform.node()} · Python {platform.python_version()}"


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    cells = [[str(h) for h in headers]] + [[f"{c:.4g}" if isinstance(c, float) else str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    out = ["| " + " | ".join(c.ljust(w) for c, w in zip(cells[0], widths, strict=True)) + " |",
           "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    out += ["| " + " | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) + " |" for r in cells[1:]]
    return "\n".join(out)


def median(xs: Sequence[float]) -> float:
    return statistics.median(xs)
