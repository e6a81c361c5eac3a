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


# The scripts outside the package that import it and run only where a GPU is (the fixtures' regenerate scripts,
# the benchmarks): CI never runs them, so a rename in the package would leave them broken unseen.
SCRIPTS = sorted([*ROOT.glob("benchmarks/*.py"), *(p for p in ROOT.glob("tests/fixtures/**/*.py")
                                                   if "kernelbench/level" not in p.as_posix())])


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_scripts_import_only_names_the_package_has(path: Path) -> None:
    """Every `from kernelscope.x import y` in a benchmark or fixture script names a module and a name that
    exist, wherever in the script it stands."""
    import importlib
    import importlib.util

    missing = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("kernelscope"):
            try:
                mod = importlib.import_module(node.module or "")
            except ImportError as e:
                missing.append(f"line {node.lineno}: {node.module}: {e}")
                continue
            missing += [f"line {node.lineno}: {node.module}.{a.name}" for a in node.names
                        if not hasattr(mod, a.name) and importlib.util.find_spec(f"{node.module}.{a.name}") is None]
    assert not missing, f"{path.relative_to(ROOT)} imports what the package does not have:\n" + "\n".join(missing)
