"""Problems as `kernelscope optimize` takes them: a reference module, or a directory with
``reference.py`` and a starting candidate."""

from __future__ import annotations

from pathlib import Path


def resolve_problem(problem: Path, candidate: Path | None = None) -> tuple[Path, Path | None]:
    """A problem is a reference module file, or a directory holding ``reference.py`` and a starting
    candidate (``candidate.py``, the knob-annotated one, else ``naive.py``)."""
    if problem.is_dir():
        ref = problem / "reference.py"
        if not ref.is_file():
            raise ValueError(f"{problem} is a directory without reference.py (Model, get_inputs, get_init_inputs)")
        if candidate is None:
            candidate = next((problem / n for n in ("candidate.py", "naive.py") if (problem / n).is_file()), None)
        return ref, candidate
    if not problem.is_file():
        raise ValueError(f"{problem} is not a file or a problem directory")
    return problem, candidate


def reference_as_candidate(reference: str) -> str:
    """The reference module as a candidate (``ModelNew`` is ``Model``): where an LLM starts without one."""
    return reference.rstrip() + "\n\n\nclass ModelNew(Model):  # the reference itself: the baseline\n    pass\n"


def problem_name(reference: Path) -> str:
    """A problem directory's name for its reference.py, else the reference module's own name."""
    return reference.parent.name if reference.name == "reference.py" else reference.stem
