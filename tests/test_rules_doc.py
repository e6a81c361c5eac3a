"""docs/rules.md is generated from the rule registry; it must not drift from it."""

from __future__ import annotations

from pathlib import Path

from kernelscope.heuristics import REGISTRY
from kernelscope.heuristics.reference import COMMAND, PAGE, main, render


def test_rules_page_matches_the_registry() -> None:
    assert PAGE.is_file(), f"docs/rules.md is missing: run {COMMAND}"
    assert PAGE.read_text() == render(), f"docs/rules.md is out of date: run {COMMAND}"


def test_the_page_lists_every_rule_with_its_thresholds() -> None:
    text = render()
    for r in REGISTRY.values():
        assert f"### `{r.id}`" in text and r.description in text
        for name in r.thresholds:
            assert f"`{name}` = " in text


def test_check_mode_reports_drift(tmp_path: Path) -> None:
    page = tmp_path / "rules.md"
    assert main(["--check", "--output", str(page)]) == 1  # missing
    assert main(["--output", str(page)]) == 0 and page.read_text() == render()
    assert main(["--check", "--output", str(page)]) == 0
    page.write_text(page.read_text().replace("= 80", "= 81", 1))
    assert main(["--check", "--output", str(page)]) == 1
