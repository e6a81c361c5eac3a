"""The generated tool reference (docs/tools/) matches the server's tools/list, and the front door stays short."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parent.parent
DOCS = REPO / "docs"
ALL_TOOLS = {"capabilities", "compile", "sass", "run", "analyze", "ncu_profile", "bottleneck_classify", "compare",
             "nsys_trace", "search_cutlass", "read_cutlass_file"}


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_generate", DOCS / "generate.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def gen() -> ModuleType:
    return _generator()


@pytest.mark.anyio
async def test_tool_pages_match_the_schemas(gen: ModuleType) -> None:
    expected = gen.pages(await gen.list_tools())
    assert {name.removesuffix(".md") for name in expected} >= ALL_TOOLS
    problems = gen.drift(expected)
    assert not problems, "docs/tools/ is out of date, run python docs/generate.py: " + ", ".join(problems)


@pytest.mark.anyio
async def test_a_page_has_every_argument_and_output_field(gen: ModuleType) -> None:
    tools = {t.name: t for t in await gen.list_tools()}
    page = gen.render(tools["run"])
    for arg in tools["run"].input_schema["properties"]:
        assert f"| `{arg}` |" in page
    assert "| `eval` |" in page and "read-only: no" in page
    assert "`0.5`" in page and "> 0; <= 60" in page  # timing_budget_s: default and bounds


def test_types_and_constraints_follow_refs(gen: ModuleType) -> None:
    root = {"$defs": {"Target": {"title": "Target", "type": "object", "properties": {"a": {"type": "string"}}},
                      "Kind": {"enum": ["x", "y"], "type": "string"}}}
    assert gen.type_of({"$ref": "#/$defs/Target"}, root) == "Target"
    assert gen.type_of({"$ref": "#/$defs/Kind"}, root) == '"x" | "y"'
    assert gen.type_of({"anyOf": [{"type": "integer", "minimum": 1}, {"type": "null"}]}, root) == "integer | null"
    assert gen.constraints_of({"anyOf": [{"type": "integer", "minimum": 1}, {"type": "null"}]}, root) == ">= 1"
    assert gen.type_of({"type": "array", "items": {"type": "string"}}, root) == "array of string"


def test_drift_names_missing_changed_and_stale_pages(gen: ModuleType, tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("old")
    (tmp_path / "gone.md").write_text("x")
    assert gen.drift({"a.md": "new", "b.md": "b"}, tmp_path) == ["a.md: differs", "b.md: missing",
                                                                 "gone.md: no such tool"]
    gen.write({"a.md": "new", "b.md": "b"}, tmp_path)
    assert gen.drift({"a.md": "new", "b.md": "b"}, tmp_path) == []


def test_readme_is_a_short_front_door() -> None:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    lines = text.splitlines()
    assert len(lines) <= 160, f"README.md has {len(lines)} lines; move detail into docs/"
    long = [i + 1 for i, line in enumerate(lines) if len(line) > 110]
    assert not long, f"README.md lines over 110 characters: {long}"
    for tool in ALL_TOOLS:
        assert f"`{tool}`" in text, f"the README's tool table misses {tool}"
    assert "python -m pytest -q" in text


def test_docs_links_resolve() -> None:
    """Relative links in README.md and docs/*.md point at files that exist (pages other engineers write
    are allowed to be missing only while they are listed in PENDING)."""
    pending = {"architecture.md", "analyze.md", "pool.md", "harness.md", "optimize.md", "configuration.md",
               "cutlass.md", "server.md", "rules.md"}
    broken = []
    for page in [REPO / "README.md", REPO / "BENCHMARKS.md", *DOCS.glob("*.md")]:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text(encoding="utf-8")):
            if "://" in target or target.startswith("mailto:"):
                continue
            path = (page.parent / target).resolve()
            if not path.exists() and path.name not in pending:
                broken.append(f"{page.relative_to(REPO)} -> {target}")
    assert not broken, broken
