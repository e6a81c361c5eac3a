"""The planted suite, replayed on CPU from real H100 captures: for each case the bad kernel gets the
expected bottleneck class and, as its top finding, the planted rule at the planted source line; its
fixed twin does not trigger that rule. The captures are the light and deep reports `analyze` took
(tests/fixtures/planted/regenerate.sh), with the program's ptxas report and SASS statistics."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kernelscope.heuristics.pipeline import diagnose_stages, stage2_plan
from kernelscope.measure.ncu import load_profile
from kernelscope.models import AnalyzeResult, CompileResult, KernelDiagnosis, SassResult

REPO = Path(__file__).resolve().parent.parent
PLANTED = REPO / "examples" / "planted"
FIX = Path(__file__).parent / "fixtures" / "planted"
CASES = sorted(p.name for p in PLANTED.iterdir() if (p / "case.json").is_file())


def test_the_suite_has_twelve_cases_each_with_a_capture() -> None:
    assert len(CASES) >= 12
    for c in CASES:
        assert (FIX / c / "light.ncu-rep").is_file() and (FIX / c / "deep.ncu-rep").is_file(), c


def _planted_line(case: str) -> int:
    lines = (PLANTED / case / "planted.cu").read_text().splitlines()
    marked = [i for i, ln in enumerate(lines, 1) if "// PLANTED" in ln]
    assert len(marked) == 1, f"{case}: exactly one // PLANTED line"
    return marked[0]


def _replay(case: str) -> dict[str, KernelDiagnosis]:
    d = FIX / case
    light, deep = load_profile(d / "light.ncu-rep"), load_profile(d / "deep.ncu-rep")
    comp = CompileResult.model_validate_json((d / "compile.json").read_text())
    sass = SassResult.model_validate_json((d / "sass.json").read_text())
    diags, _ = diagnose_stages(light, deep, deep_kernels=4, sass=sass.kernels, ptxas=comp.kernels)
    return {k.mangled_name: k for k in diags}


@pytest.mark.parametrize("case", CASES)
def test_planted_bottleneck_is_found(case: str) -> None:
    spec = json.loads((PLANTED / case / "case.json").read_text())
    kernels = _replay(case)
    bad, fixed = kernels[spec["bad_kernel"]], kernels[spec["fixed_kernel"]]
    assert bad.bottleneck.cls == spec["expected_class"], (bad.bottleneck.cls, bad.bottleneck.reasoning)
    assert bad.findings, f"{case}: no finding for the bad kernel"
    top = bad.findings[0]
    assert top.rule == spec["expected_rule"], [(f.rule, f.severity, f.impact) for f in bad.findings]
    assert top.diagnosis and top.evidence and top.fixes
    assert all(f.expected_effect for f in top.fixes)
    if spec.get("line_expected", True):
        assert top.line and f"planted.cu:{_planted_line(case)} " in top.line + " ", top.line
    assert all(f.rule != spec["expected_rule"] for f in fixed.findings), fixed.findings
    assert bad.launches == spec.get("bad_launches", 1)


@pytest.mark.parametrize("case", CASES)
def test_recorded_answer_matches_the_replay(case: str) -> None:
    """analyze's own answer on the device (analyze.json) agrees with the replay of its reports."""
    rec = AnalyzeResult.model_validate_json((FIX / case / "analyze.json").read_text())
    kernels = _replay(case)
    for k in rec.kernels:
        assert kernels[k.mangled_name].bottleneck.cls == k.bottleneck.cls
    light = next(s for s in rec.stages if s.name == "light")
    deep = next(s for s in rec.stages if s.name == "deep")
    classes = sorted({entry.rsplit(": ", 1)[1] for entry in light.kernels})  # "name: class" per kernel
    assert deep.sections == stage2_plan(classes)[0]


def test_trace_counts_stand_in_for_a_light_stage_of_first_launches() -> None:
    """analyze's many-launch path: the light stage profiles only each kernel's first launch and the
    CUPTI trace of the same program supplies every launch's count and duration. Replayed from the
    case-12 light capture cut down to one launch per kernel, with the recorded H100 trace."""
    from kernelscope.heuristics.pipeline import trace_totals
    from kernelscope.measure.timeline import load_cupti
    from kernelscope.measure.trace import diagnose_timeline

    d = FIX / "12-many-tiny-launches"
    light, deep = load_profile(d / "light.ncu-rep"), load_profile(d / "deep.ncu-rep")
    seen: set[str] = set()
    firsts = [k for k in light.kernels if not (k.mangled_name in seen or seen.add(k.mangled_name))]
    assert len(firsts) == 2
    traced = (*diagnose_timeline(load_cupti(FIX.parent / "trace" / "many-tiny-launches")), None)
    totals = trace_totals(traced[0])
    assert totals is not None and totals["slice_scale_bias"][0] == 256
    diags, groups = diagnose_stages(light.model_copy(update={"kernels": firsts}), deep, deep_kernels=4,
                                    totals=totals)
    by = {k.mangled_name: k for k in diags}
    assert groups[0][0] == "slice_scale_bias"  # ranked by the trace's total time
    assert by["slice_scale_bias"].launches == 256
    assert by["slice_scale_bias"].total_duration_ns == pytest.approx(totals["slice_scale_bias"][1])
    assert by["slice_scale_bias"].findings[0].rule == "launch.many-small-launches"
    assert all(f.rule != "launch.many-small-launches" for f in by["full_scale_bias"].findings)


def test_light_stage_scope_counts_launch_configurations_from_the_trace() -> None:
    """The recorded 257-launch trace has two kernels, each always launched with one grid and block: the
    light stage then profiles two launches (one per configuration)."""
    from kernelscope.measure.timeline import launch_configs, load_cupti

    tl = load_cupti(FIX.parent / "trace" / "many-tiny-launches")
    assert launch_configs(tl) == {("slice_scale_bias", (16, 1, 1), (256, 1, 1)),
                                   ("full_scale_bias", (4096, 1, 1), (256, 1, 1))}
