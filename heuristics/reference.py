"""The rules reference (docs/rules.md), generated from the registry.

``python -m kernelscope.heuristics.reference`` rewrites the page; ``--check`` exits 1 when the page
differs from the registry (tests/test_rules_doc.py does the same).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from kernelscope.heuristics import REGISTRY, SCOPES
from kernelscope.heuristics.registry import FAMILIES, Rule

PAGE = Path(__file__).resolve().parent.parent / "docs" / "rules.md"
COMMAND = "python -m kernelscope.heuristics.reference"

_HEAD = f"""# Rules reference

<!-- Generated from the rule registry by `{COMMAND}`; do not edit by hand.
     tests/test_rules_doc.py fails when this page and the registry disagree. -->

Each rule reads one kind of evidence (its *scope*), compares it to named thresholds and, when they
are crossed, returns a finding with the numbers, the source line where known, and ranked fixes.
Thresholds are overridable per call, by rule id and name, e.g.
`thresholds={{"launch.tiny-grid": {{"max_sm_fraction": 0.25}}}}` on `analyze` or `nsys_trace`; an
unknown rule or threshold name is refused with the valid ones. When two rules fire on the same
kernel, a finding of a rule that *supersedes* another drops the other's; a finding of a rule that
*explains* another (a symptom of the same cause: `rule` or `rule:topic`, e.g. a stall reason) takes the
other's evidence in and leads, with the more severe of the two severities, and lists it in `explains`.
"""


def _code(items: list[str] | tuple[str, ...]) -> str:
    return ", ".join(f"`{x}`" for x in items)


def _number(v: float) -> str:
    return f"{v:g}" if isinstance(v, float) else f"{v:,}".replace(",", "_")


def _scopes() -> list[str]:
    out = ["## Scopes", "", "| scope | input (per rule call) | context callers may pass |", "|---|---|---|"]
    for s in SCOPES.values():
        ctx = "<br>".join(f"`{k}`: {v}" for k, v in s.context.items()) or "none"
        out.append(f"| `{s.name}` | `{s.model.__name__}`: {s.reads} | {ctx} |")
    return [*out, ""]


def _rule(r: Rule) -> list[str]:
    scope = SCOPES[r.scope]
    out = [f"### `{r.id}`", "", r.description, "",
           f"- family: `{r.family}`; scope: `{r.scope}` (reads `{scope.model.__name__}`)"]
    if r.thresholds:
        out.append("- thresholds: " + ", ".join(f"`{k}` = {_number(v)}" for k, v in r.thresholds.items()))
    else:
        out.append("- thresholds: none")
    if r.metrics:
        out.append("- ncu metrics beyond the light stage's (the deep stage collects them): " + _code(r.metrics))
    elif r.scope == "ncu":
        out.append("- ncu metrics: the light stage's only")
    if r.context:
        out.append("- context: " + _code(r.context))
    if r.supersedes:
        out.append("- supersedes: " + _code(r.supersedes))
    if r.explains:
        out.append("- explains: " + _code(r.explains))
    return [*out, ""]


def render() -> str:
    """The page, from the registry: scopes, then the rules by family (ids sorted within a family)."""
    lines = [_HEAD, *_scopes(), "## Rules", ""]
    counts = {f: sum(r.family == f for r in REGISTRY.values()) for f in FAMILIES}
    lines += ["| family | rules |", "|---|---|"]
    lines += [f"| [{f}](#{f}) | {n} |" for f, n in counts.items() if n]
    lines += [f"| all | {len(REGISTRY)} |", ""]
    for fam in FAMILIES:
        rules = sorted((r for r in REGISTRY.values() if r.family == fam), key=lambda r: r.id)
        if not rules:
            continue
        lines += [f"## {fam}", ""]
        for r in rules:
            lines += _rule(r)
    return "\n".join(lines).rstrip("\n") + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog=COMMAND, description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 when the page differs from the registry")
    ap.add_argument("--output", type=Path, default=PAGE, help="the page to write or check")
    args = ap.parse_args(argv)
    text = render()
    if args.check:
        same = args.output.is_file() and args.output.read_text() == text
        if not same:
            print(f"{args.output} is out of date: run {COMMAND}", file=sys.stderr)
        return 0 if same else 1
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
