"""The second planted suite (examples/planted2/): its cases and expectations, the dev/validation split,
the replay of its recorded H100 captures through the rules, and the accuracy table per part.

    python benchmarks/planted2.py                   # replay tests/fixtures/planted2, print both parts
    python benchmarks/planted2.py --part validation --json out.json
    python benchmarks/planted2.py --write-split     # rewrite examples/planted2/split.json from the rule

CPU only: the captures come from benchmarks/capture_planted2.py (one command on a GPU host). The
discipline that goes with the split is in docs/planted.md: rules change against `dev` only, both
parts are reported, and a change that helps dev and hurts validation is not kept.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import math
import re
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

REPO = Path(__file__).resolve().parent.parent
SUITE = REPO / "examples" / "planted2"
FIXTURES = REPO / "tests" / "fixtures" / "planted2"
SPLIT_FILE = SUITE / "split.json"
WARNING_OR_WORSE = {"warning", "high", "critical"}
CONFIRM_SPEEDUP = 1.2  # the fixed twin must be at least this much faster, or the plant is unconfirmed
ROOF_PCT = 60.0  # a healthy kernel's busiest unit (speed of light, measured) runs at least this close to its peak
SPLIT_RULE = ("Strata are the cases' families (the expected rule's family; 'healthy' and 'system' are their "
              "own) within a wave (the batch a case was added in). Within a stratum the cases are ordered by "
              "the SHA-256 of their id; the first ceil(n/3) go to validation, the rest to dev. A stratum of one "
              "case stays in dev. Each wave is split on its own, so adding cases never moves an earlier case.")
Part = Literal["dev", "validation"]


def _listed(v: str | list[str] | None) -> list[str]:
    """A field that holds one name or several, as a list."""
    return [] if v is None else [v] if isinstance(v, str) else list(v)


class PlantedCase(BaseModel):
    """One case's expectations (examples/planted2/<id>/case.json)."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(pattern=r"^\d{2,3}-[a-z0-9-]+$")  # numbered in the order written
    title: str
    kind: Literal["planted", "healthy", "system"]
    family: str  # the expected rule's family; "healthy" for healthy kernels
    kernel: str  # the kernel under test (bad or healthy); for system cases a kernel of the program
    fixed_kernel: str | None = None  # the fixed twin (planted cases)
    # healthy cases: the same work done differently (one kernel, or several: the fastest counts); a challenger
    # CONFIRM_SPEEDUP x faster refutes the label
    challenger: str | list[str] | None = None
    expected_class: str | list[str] | None = None  # a class, or the classes accepted where two are defensible
    expected_rule: str | None = None  # the top finding (system: the top system finding); None: healthy
    also_accept: list[str] = Field(default_factory=list)  # other rules accepted on top (same cause)
    also_expected: list[str] = Field(default_factory=list)  # the second problem: must be among the findings
    must_not: list[str] = Field(default_factory=list)  # must not appear at all on the kernel under test
    lines: list[int] = Field(default_factory=list)  # the planted lines (// PLANTED); empty: no line expected
    launches: int = Field(1, ge=1)
    wave: int = Field(1, ge=1)  # the batch the case was added in: each wave is split on its own
    notes: str = ""

    @model_validator(mode="after")
    def _shape(self) -> PlantedCase:
        healthy_shape = not (self.expected_rule or self.fixed_kernel or self.lines) and self.family == "healthy"
        if self.kind == "healthy" and not healthy_shape:
            raise ValueError(f"{self.id}: a healthy case has no rule, twin or line, and family 'healthy'")
        if self.challenger and self.kind != "healthy":
            raise ValueError(f"{self.id}: only a healthy case has a challenger (a planted case has its fixed twin)")
        if self.kind == "planted" and not (self.expected_rule and self.fixed_kernel and self.expected_class):
            raise ValueError(f"{self.id}: a planted case needs expected_rule, fixed_kernel and expected_class")
        if self.kind == "system" and (self.expected_class or not (self.expected_rule or "").startswith("system.")):
            raise ValueError(f"{self.id}: a system case has a system.* rule and no class")
        return self

    @property
    def classes(self) -> list[str]:
        return _listed(self.expected_class)

    @property
    def challengers(self) -> list[str]:
        return _listed(self.challenger)

    @property
    def top_rules(self) -> set[str]:
        return {r for r in [self.expected_rule, *self.also_accept] if r}

    def rule_ids(self) -> set[str]:
        """Every rule id the expectations name."""
        return self.top_rules | set(self.also_expected) | set(self.must_not)


def _number(d: Path) -> tuple[int, str]:
    head = d.name.split("-", 1)[0]
    return (int(head) if head.isdigit() else 10**6, d.name)


def load_cases(root: Path = SUITE) -> list[PlantedCase]:
    return [PlantedCase.model_validate_json((d / "case.json").read_text())
            for d in sorted(root.iterdir(), key=_number) if (d / "case.json").is_file()]


def marked_lines(source: str) -> list[int]:
    return [i for i, ln in enumerate(source.splitlines(), 1) if "// PLANTED" in ln]


# ------------------------------------------------------------------------------------------ the split
def split_of(cases: Iterable[PlantedCase]) -> dict[str, Part]:
    """The deterministic split (:data:`SPLIT_RULE`): case id -> dev or validation."""
    strata: dict[tuple[int, str], list[str]] = {}
    for c in cases:
        strata.setdefault((c.wave, c.family), []).append(c.id)
    out: dict[str, Part] = {}
    for ids in strata.values():
        ids.sort(key=lambda i: hashlib.sha256(i.encode()).hexdigest())
        n_val = math.ceil(len(ids) / 3) if len(ids) > 1 else 0
        out.update({i: ("validation" if k < n_val else "dev") for k, i in enumerate(ids)})
    return dict(sorted(out.items()))


def split_manifest(cases: list[PlantedCase]) -> dict[str, Any]:
    split = split_of(cases)
    return {"rule": SPLIT_RULE, "dev": [i for i, p in split.items() if p == "dev"],
            "validation": [i for i, p in split.items() if p == "validation"]}


def read_split(path: Path = SPLIT_FILE) -> dict[str, Part]:
    data = json.loads(path.read_text())
    return {**{i: "dev" for i in data["dev"]}, **{i: "validation" for i in data["validation"]}}


# ------------------------------------------------------------------------------------------ scoring
class Score(BaseModel):
    """One case's result against its expectations; ``misses`` says, in words, what went wrong."""

    case: str
    part: Part
    kind: str
    cls: str | None = None
    top: str | None = None
    line: str | None = None
    class_ok: bool | None = None  # None: the case expects no class (system)
    top_ok: bool = False  # healthy: no finding of severity warning or above
    line_ok: bool | None = None  # None: no line expected
    also_ok: bool = True
    must_not_ok: bool = True
    twin_ok: bool | None = None
    twin_speedup: float | None = None  # measured, no rule involved: planted total time / the twin's
    confirmed: bool | None = None  # twin_speedup >= CONFIRM_SPEEDUP; None: no twin measured (healthy, system)
    roof_pct: float | None = None  # healthy: its busiest unit's throughput, % of peak (measured, no rule)
    challenger_speedup: float | None = None  # healthy: the kernel's total time / its challenger's (measured)
    refuted: bool | None = None  # healthy: the challenger ran CONFIRM_SPEEDUP x faster, so the label is wrong
    misses: list[str] = Field(default_factory=list)

    @property
    def all_ok(self) -> bool:
        return not self.misses


def _line_numbers(line: str | None) -> list[int]:
    return [int(n) for n in re.findall(r"planted\.cu:(\d+)", line or "")]


def score_findings(case: PlantedCase, part: Part, cls: str | None, findings: list[Any],
                   twin: list[Any] | None) -> Score:
    """Score the findings (ranked, as analyze answers) of the kernel (or program) under test."""
    s = Score(case=case.id, part=part, kind=case.kind, cls=cls)
    rules = [f.rule for f in findings]
    top = findings[0] if findings else None
    s.top, s.line = (top.rule, top.line) if top else (None, None)
    if case.classes:
        s.class_ok = cls in case.classes
        if not s.class_ok:
            s.misses.append(f"class {cls}, expected {' or '.join(case.classes)}")
    if case.kind == "healthy":
        loud = [f"{f.rule} ({f.severity})" for f in findings if f.severity in WARNING_OR_WORSE]
        s.top_ok = not loud
        if loud:
            s.misses.append("healthy kernel warned: " + ", ".join(loud))
    else:
        s.top_ok = top is not None and top.rule in case.top_rules
        if not s.top_ok:
            s.misses.append(f"top finding {s.top}, expected {case.expected_rule} (ranked: {', '.join(rules[:5])})")
    if case.lines:
        got = _line_numbers(s.line)
        s.line_ok = s.top_ok and bool(got) and got[0] in case.lines
        if s.top_ok and not s.line_ok:
            s.misses.append(f"line {s.line!r}, expected planted.cu:{'/'.join(map(str, case.lines))}")
    missing = [r for r in case.also_expected if r not in rules]
    s.also_ok = not missing
    if missing:
        s.misses.append("second problem not found: " + ", ".join(missing))
    present = [r for r in case.must_not if r in rules]
    s.must_not_ok = not present
    if present:
        s.misses.append("must not appear: " + ", ".join(present))
    if twin is not None and case.expected_rule:  # raised: as a problem (a note saying it costs nothing is not)
        s.twin_ok = all(f.rule != case.expected_rule or f.severity not in WARNING_OR_WORSE for f in twin)
        if not s.twin_ok:
            s.misses.append(f"fixed twin still raises {case.expected_rule}")
    return s


# ------------------------------------------------------------------------------------------ replay
def fixture_state(case: PlantedCase, root: Path = FIXTURES) -> str | None:
    """None when the case's captures are all there, else what is missing (in words)."""
    d = root / case.id
    need = (["trace-bad", "trace-fixed"] if case.kind == "system" else ["deep.ncu-rep.gz", "compile.json", "sass.json"])
    missing = [n for n in need if not (d / n).exists()]
    return f"{case.id}: no {', '.join(missing)} under {d.relative_to(REPO)}" if missing else None


def load_gzipped_report(path: Path) -> Any:
    """A recorded Nsight Compute report kept gzipped (``*.ncu-rep.gz``: a seventh of the size), read as analyze
    reads its own captures."""
    from kernelscope.measure.ncu import load_profile

    with tempfile.TemporaryDirectory(prefix="planted2-") as tmp:
        rep = Path(tmp) / path.name.removesuffix(".gz")
        rep.write_bytes(gzip.decompress(path.read_bytes()))
        return load_profile(rep)


def load_reports(d: Path) -> tuple[Any, Any]:
    """A case's recorded (light, deep) reports. ``light.ncu-rep.gz`` is absent where the deep capture (every
    launch) also carries the light metrics; then the deep report is both. A report kept plain (``.ncu-rep``,
    as the first suite's are) is read as it is."""
    def one(stage: str) -> Any:
        plain = d / f"{stage}.ncu-rep"
        if plain.is_file() and not (d / f"{stage}.ncu-rep.gz").is_file():
            from kernelscope.measure.ncu import load_profile
            return load_profile(plain)
        return load_gzipped_report(d / f"{stage}.ncu-rep.gz")
    deep = one("deep")
    has_light = (d / "light.ncu-rep.gz").is_file() or (d / "light.ncu-rep").is_file()
    return (one("light") if has_light else deep), deep


def twin_speedup(case: PlantedCase, light: Any, other: str | None = None) -> float | None:
    """How much faster the fixed twin (or ``other``: a healthy case's challenger) ran than the kernel under test,
    from the measured durations alone (no rule output): ``launches`` x the kernel's mean gpu__time_duration over
    the twin's total, both read from the report that holds every launch (the light one). None when either was
    not measured."""
    def durations(name: str | None) -> list[float]:
        return [k.duration_ns for k in light.kernels if k.mangled_name == name and k.duration_ns]
    bad, fixed = durations(case.kernel), durations(other or case.fixed_kernel)
    if not bad or not fixed:
        return None
    return case.launches * (sum(bad) / len(bad)) / sum(fixed)


def replay_kernels(d: Path, reports: tuple[Any, Any] | None = None) -> dict[str, Any]:
    """The kernels' diagnoses from a case's recorded reports (:func:`load_reports`), through the code analyze
    runs."""
    from kernelscope.heuristics.pipeline import diagnose_stages
    from kernelscope.models import CompileResult, SassResult

    light, deep = reports or load_reports(d)
    comp = CompileResult.model_validate_json((d / "compile.json").read_text())
    sass = SassResult.model_validate_json((d / "sass.json").read_text())
    diags, _ = diagnose_stages(light, deep, deep_kernels=4, sass=sass.kernels, ptxas=comp.kernels)
    return {k.mangled_name: k for k in diags}


def replay_system(trace_dir: Path) -> list[Any]:
    """The ranked system findings of a recorded CUPTI timeline."""
    from kernelscope.measure.timeline import load_cupti
    from kernelscope.measure.trace import diagnose_timeline

    return list(diagnose_timeline(load_cupti(trace_dir)).findings)


def score_case(case: PlantedCase, part: Part, root: Path = FIXTURES) -> Score:
    d = root / case.id
    if case.kind == "system":
        return score_findings(case, part, None, replay_system(d / "trace-bad"), replay_system(d / "trace-fixed"))
    reports = load_reports(d)
    kernels = replay_kernels(d, reports)
    speedup = twin_speedup(case, reports[0]) if case.fixed_kernel else None
    measured = {"twin_speedup": speedup, "confirmed": None if speedup is None else speedup >= CONFIRM_SPEEDUP}
    k = kernels.get(case.kernel)
    if k is None:
        s = Score(case=case.id, part=part, kind=case.kind, **measured)
        s.misses.append(f"kernel {case.kernel} not among the diagnosed ({', '.join(kernels)})")
        return s
    twin = kernels.get(case.fixed_kernel) if case.fixed_kernel else None
    s = score_findings(case, part, k.bottleneck.cls, list(k.findings),
                       list(twin.findings) if twin is not None else None)
    s.twin_speedup, s.confirmed = measured["twin_speedup"], measured["confirmed"]
    if case.kind == "healthy":
        units = [v for v in (k.bottleneck.sm_throughput_pct, k.bottleneck.memory_throughput_pct) if v is not None]
        s.roof_pct = max(units) if units else None
        if case.challengers:
            measured = [v for v in (twin_speedup(case, reports[0], c) for c in case.challengers) if v is not None]
            s.challenger_speedup = max(measured) if measured else None
            s.refuted = None if s.challenger_speedup is None else s.challenger_speedup >= CONFIRM_SPEEDUP
    if case.fixed_kernel and twin is None:
        s.twin_ok = False
        s.misses.append(f"fixed twin {case.fixed_kernel} not diagnosed")
    if k.launches != case.launches:
        s.misses.append(f"{k.launches} launches counted, expected {case.launches}")
    return s


# ------------------------------------------------------------------------------------------ the table
def summary(scores: list[Score]) -> dict[str, Any]:
    """Counts per measure: class, top finding, line, healthy silence, everything."""
    def frac(vals: list[bool | None]) -> list[int]:
        v = [x for x in vals if x is not None]
        return [sum(v), len(v)]
    return {"cases": len(scores),
            "class": frac([s.class_ok for s in scores]),
            "top": frac([s.top_ok for s in scores if s.kind != "healthy"]),
            "line": frac([s.line_ok for s in scores]),
            "healthy_silent": frac([s.top_ok for s in scores if s.kind == "healthy"]),
            # the healthy kernels whose label no measurement refuted (a challenger ran CONFIRM_SPEEDUP x faster)
            "healthy_silent_unrefuted": frac([s.top_ok for s in scores if s.kind == "healthy" and not s.refuted]),
            "twin": frac([s.twin_ok for s in scores]),
            "all": frac([s.all_ok for s in scores]),
            "confirmed": frac([s.confirmed for s in scores]),
            "unconfirmed": [s.case for s in scores if s.confirmed is False],
            "below_roof": [f"{s.case} ({s.roof_pct:.2f}%)" for s in scores if below_roof(s)],
            "refuted": [f"{s.case} ({s.challenger_speedup:.2f}x, {'warned' if not s.top_ok else 'silent'})"
                        for s in scores if s.refuted]}


def below_roof(s: Score) -> bool:
    """A healthy kernel whose busiest unit runs under ROOF_PCT of its peak: measured, no rule involved, so its
    'healthy' label is doubtful (there is time to win somewhere)."""
    return s.kind == "healthy" and s.roof_pct is not None and s.roof_pct < ROOF_PCT


def render(scores: list[Score]) -> str:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from _common import table

    out = []
    for part in ("dev", "validation"):
        rows = [s for s in scores if s.part == part]
        if not rows:
            continue
        out.append(f"\n## {part} ({len(rows)} cases)\n")
        out.append(table(["case", "class", "top finding", "class", "top", "line", "twin x", "misses"],
                         [[s.case, s.cls or "-", s.top or "-", _mark(s.class_ok), _mark(s.top_ok), _mark(s.line_ok),
                           _twin(s), "; ".join(s.misses)[:160] or "-"] for s in rows]))
        sm = summary(rows)
        out.append("\n" + ", ".join(f"{k} {v[0]}/{v[1]}" for k, v in sm.items()
                                    if isinstance(v, list) and k not in ("unconfirmed", "below_roof", "refuted")))
        if sm["unconfirmed"]:
            out.append(f"unconfirmed (twin not {CONFIRM_SPEEDUP}x faster; still scored): "
                       + ", ".join(sm["unconfirmed"]))
        if sm["below_roof"]:
            out.append(f"healthy kernels below any roof (busiest unit under {ROOF_PCT:.0f}% of its peak; the label is "
                       "doubtful, still scored): " + ", ".join(sm["below_roof"]))
        if sm["refuted"]:
            out.append("healthy labels refuted by measurement (a challenger doing the same work ran "
                       f"{CONFIRM_SPEEDUP}x faster or more; counted in healthy_silent, left out of "
                       "healthy_silent_unrefuted): "
                       + ", ".join(sm["refuted"]))
    return "\n".join(out)


def _twin(s: Score) -> str:
    if s.challenger_speedup is not None:
        return f"{s.challenger_speedup:.2f} " + ("refuted" if s.refuted else "challenged")
    if s.twin_speedup is None:
        return "-"
    return f"{s.twin_speedup:.2f}" + ("" if s.confirmed else " unconfirmed")


def _mark(v: bool | None) -> str:
    return "-" if v is None else "ok" if v else "WRONG"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fixtures", type=Path, default=FIXTURES, help="where the captures are")
    ap.add_argument("--part", choices=["dev", "validation", "both"], default="both")
    ap.add_argument("--json", type=Path, help="write the scores as JSON here")
    ap.add_argument("--write-split", action="store_true", help="rewrite examples/planted2/split.json")
    args = ap.parse_args(argv)
    cases = load_cases()
    if args.write_split:
        SPLIT_FILE.write_text(json.dumps(split_manifest(cases), indent=1) + "\n")
        print(f"wrote {SPLIT_FILE.relative_to(REPO)}")
        return 0
    split = read_split()
    todo = [c for c in cases if args.part in ("both", split[c.id])]
    missing = [m for c in todo if (m := fixture_state(c, args.fixtures))]
    if missing:
        print("captures missing (run benchmarks/capture_planted2.py on a GPU host):\n  " + "\n  ".join(missing),
              file=sys.stderr)
        todo = [c for c in todo if fixture_state(c, args.fixtures) is None]
    scores = [score_case(c, split[c.id], args.fixtures) for c in todo]
    print(render(scores))
    if args.json:
        args.json.write_text(json.dumps({"scores": [s.model_dump() for s in scores],
                                         "summary": {p: summary([s for s in scores if s.part == p])
                                                     for p in ("dev", "validation")}}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
