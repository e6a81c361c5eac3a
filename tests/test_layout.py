"""The size and import rules of docs/architecture.md, over every module of the package.

The import direction between packages is import-linter's (`lint-imports`, contracts in pyproject.toml);
what it cannot see is checked here: module and function sizes, and imports hidden inside functions.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NOT_PACKAGE = {"tests", "examples", "benchmarks", "docs", "build", "dist"}
MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 80
# Optional or heavy dependencies a module may import where it needs them (the server runs without a GPU
# stack; the harness and the fast path run with one), and nothing else.
LAZY_OK = {"torch", "numpy", "cupy", "pynvml", "ray", "anthropic", "openai", "ncu_report", "playwright"}


def _modules() -> list[Path]:
    return sorted(p for p in ROOT.rglob("*.py")
                  if not (set(p.relative_to(ROOT).parts[:-1]) & NOT_PACKAGE)
                  and not any(part.startswith(".") for part in p.relative_to(ROOT).parts))


MODULES = _modules()


def _functions(tree: ast.AST) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    return [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]


def _imported(node: ast.Import | ast.ImportFrom) -> list[str]:
    if isinstance(node, ast.ImportFrom):
        return ["." * node.level + (node.module or "")]
    return [a.name for a in node.names]


def test_the_package_is_found() -> None:
    names = {p.relative_to(ROOT).as_posix() for p in MODULES}
    assert {"server/app.py", "tools/compile.py", "harness/__main__.py", "heuristics/registry.py"} <= names


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_modules_and_functions_stay_small(path: Path) -> None:
    text = path.read_text()
    assert len(text.splitlines()) <= MAX_MODULE_LINES, f"{path.name}: {len(text.splitlines())} lines"
    for fn in _functions(ast.parse(text)):
        length = fn.end_lineno - fn.lineno + 1  # type: ignore[operator]
        assert length <= MAX_FUNCTION_LINES, f"{path.name}: {fn.name} is {length} lines"


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_imports_inside_functions_are_only_optional_dependencies(path: Path) -> None:
    """A kernelscope import inside a function hides a cycle; a stdlib one hides nothing worth hiding."""
    for fn in _functions(ast.parse(path.read_text())):
        for node in ast.walk(fn):
            if isinstance(node, ast.Import | ast.ImportFrom):
                for name in _imported(node):
                    top = name.split(".")[0]
                    assert top in LAZY_OK, f"{path.name}: {fn.name} imports {name} (line {node.lineno})"
