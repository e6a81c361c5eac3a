"""Problems of a suite as `kernelscope bench` takes them: a KernelBench checkout, or any folder of problems.

KernelBench keeps one module per problem, ``KernelBench/level{1,2,3,4}/NN_Name.py``, each defining
``Model``, ``get_inputs`` and ``get_init_inputs``; ``NN`` is the problem id within its level. Any other
folder works too: its ``*.py`` modules (and sub-directories holding a ``reference.py``) are the problems,
in a ``levelN`` sub-folder or at its top. Nothing is imported here: the files are only parsed, so a broken
problem is reported as such by the `run` tool, not by the reader.

A starting candidate for a problem (for the offline knob proposer, or to start an LLM from) is looked up
in a candidates folder by the problem's file name: ``DIR/levelN/NN_Name.py``, else ``DIR/NN_Name.py``.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from pydantic import BaseModel, Field

LEVEL_DIR = re.compile(r"^level(\d+)$")
PROBLEM_FILE = re.compile(r"^(\d+)_(\w+)\.py$")
REQUIRED = ("Model", "get_inputs", "get_init_inputs")
MAX_IDS = 100_000


class SuiteProblem(BaseModel):
    """One problem of a suite: where its reference is, and how the suite names it."""

    key: str = Field(description="The problem's name in the suite and its run directory: level1/19_ReLU, or the "
                                 "module name outside levels.")
    level: int | None = None
    pid: int | None = Field(None, description="The problem id (KernelBench's NN), when the file name has one.")
    name: str
    reference: Path
    candidate: Path | None = None


def parse_ids(spec: str | None) -> set[int] | None:
    """``"1-10,19"`` as a set of problem ids (None: every problem)."""
    if spec is None or not spec.strip():
        return None
    ids: set[int] = set()
    for part in spec.split(","):
        part = part.strip()
        m = re.fullmatch(r"(\d+)(?:\s*-\s*(\d+))?", part)
        if m is None:
            raise ValueError(f"--problems {spec!r}: {part!r} is not an id or a range like 3-7 (ids start at 1)")
        lo, hi = int(m.group(1)), int(m.group(2) or m.group(1))
        if hi < lo:
            raise ValueError(f"--problems {spec!r}: the range {part!r} runs backwards")
        if hi - lo + len(ids) > MAX_IDS:
            raise ValueError(f"--problems {spec!r}: more than {MAX_IDS} ids")
        ids.update(range(lo, hi + 1))
    return ids


def problems_root(path: Path) -> Path:
    """The folder holding the levels: a KernelBench checkout's ``KernelBench/``, else ``path`` itself."""
    if not path.is_dir():
        raise ValueError(f"{path} is not a directory (a KernelBench checkout, or a folder of problem modules)")
    inner = path / "KernelBench"
    return inner if inner.is_dir() and any(LEVEL_DIR.match(p.name) for p in inner.iterdir()) else path


def check_problem(path: Path) -> None:
    """That ``path`` parses and defines Model, get_inputs and get_init_inputs (read, never imported)."""
    try:
        tree = ast.parse(path.read_text(), filename=str(path))
    except (SyntaxError, UnicodeDecodeError, ValueError) as e:
        raise ValueError(f"{path}: not a Python module ({e})") from None
    names = {n.name for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef))}
    names |= {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
    missing = [n for n in REQUIRED if n not in names]
    if missing:
        raise ValueError(f"{path}: not a KernelBench-style problem (it does not define {', '.join(missing)})")


def _in_folder(folder: Path, level: int | None, prefix: str) -> list[SuiteProblem]:
    out: list[SuiteProblem] = []
    for p in sorted(folder.iterdir()):
        if p.is_file() and p.suffix == ".py" and not p.name.startswith("_"):
            m = PROBLEM_FILE.match(p.name)
            out.append(SuiteProblem(key=prefix + p.stem, level=level, pid=int(m.group(1)) if m else None,
                                    name=m.group(2) if m else p.stem, reference=p))
        elif p.is_dir() and (p / "reference.py").is_file():
            cand = next((p / n for n in ("candidate.py", "naive.py") if (p / n).is_file()), None)
            m = re.match(r"^(\d+)_(\w+)$", p.name)
            out.append(SuiteProblem(key=prefix + p.name, level=level, pid=int(m.group(1)) if m else None,
                                    name=m.group(2) if m else p.name, reference=p / "reference.py",
                                    candidate=cand))
    return out


def find_problems(path: Path, levels: list[int] | None = None, ids: str | None = None,
                  candidates: Path | None = None) -> list[SuiteProblem]:
    """The problems under ``path`` (a KernelBench checkout or a folder), in the given levels (None: all) and
    with the given ids (``"1-10,19"``; None: all), ordered by level and id; each checked to define the
    three names, and given its starting candidate from ``candidates`` where one is there."""
    root = problems_root(path)
    level_dirs = {int(m.group(1)): p for p in root.iterdir() if p.is_dir() and (m := LEVEL_DIR.match(p.name))}
    found: list[SuiteProblem] = []
    if level_dirs:
        for lv in sorted(level_dirs):
            if levels is None or lv in levels:
                found += _in_folder(level_dirs[lv], lv, f"level{lv}/")
        if levels:
            absent = sorted(set(levels) - set(level_dirs))
            if absent:
                raise ValueError(f"{root} has no level {', '.join(map(str, absent))} (levels there: "
                                 f"{', '.join(map(str, sorted(level_dirs)))})")
    else:
        if levels:
            raise ValueError(f"{root} has no levelN folders: --level applies to a KernelBench checkout")
        found = _in_folder(root, None, "")
    wanted = parse_ids(ids)
    if wanted is not None:
        found = [p for p in found if p.pid in wanted]
    if not found:
        raise ValueError(f"no problems under {path}" + (f" with ids {ids}" if ids else "")
                         + (f" in level {', '.join(map(str, levels))}" if levels else ""))
    for p in found:
        check_problem(p.reference)
        if candidates is not None:
            p.candidate = find_candidate(candidates, p) or p.candidate
    return sorted(found, key=lambda p: (p.level or 0, p.pid if p.pid is not None else MAX_IDS, p.key))


def find_candidate(folder: Path, problem: SuiteProblem) -> Path | None:
    """A problem's starting candidate in ``folder``: ``levelN/<file name>``, else ``<file name>``."""
    name = problem.reference.name if problem.reference.name != "reference.py" else problem.reference.parent.name + \
        ".py"
    tries = ([folder / f"level{problem.level}" / name] if problem.level is not None else []) + [folder / name]
    return next((t for t in tries if t.is_file()), None)
