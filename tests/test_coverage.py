"""With default arguments analyze diagnoses every kernel that takes a meaningful share of the GPU time, or says
which it left out and how to ask for them (issue 29). The program here is the planted suite's 24 kernels as
one profile: every launch recorded on the H100 (tests/fixtures/planted/*/light.ncu-rep), put together as if one
program had launched them all (the only thing not recorded)."""

from __future__ import annotations

from functools import cache
from pathlib import Path

from kernelscope.heuristics.pipeline import (
    MIN_DIAGNOSED,
    coverage_note,
    diagnose_stages,
    group_launches,
    other_kernels,
    time_shares,
    top_groups,
)
from kernelscope.measure.ncu import load_profile
from kernelscope.models import Profile
from kernelscope.models.requests import AnalyzeRequest

FIX = Path(__file__).parent / "fixtures" / "planted"


@cache
def program() -> Profile:
    kernels = []
    for d in sorted(p for p in FIX.iterdir() if p.is_dir()):
        kernels += load_profile(d / "light.ncu-rep", top_lines=0).kernels
    return Profile(report="planted suite as one program", kernels=[k.model_copy(update={"id": i})
                                                                  for i, k in enumerate(kernels)])


def test_by_default_every_kernel_over_five_percent_is_diagnosed() -> None:
    assert AnalyzeRequest(artifact_id="0" * 20).deep_kernels is None
    assert AnalyzeRequest(artifact_id="0" * 20).min_time_share_pct == 5.0
    groups = group_launches(program())
    shares = time_shares(groups, None)
    significant = {n for n, _ in groups if shares[n] >= 5.0}
    assert len(groups) == 24 and len(significant) > 3  # more than the old default of 3 would have covered
    diags, _ = diagnose_stages(program(), None)
    assert {d.mangled_name for d in diags} == significant
    assert coverage_note(groups, top_groups(groups, None), None) is None
    rest = other_kernels(groups, len(diags), None)
    assert rest and all("% of GPU time)" in r for r in rest)


def test_a_kernel_left_out_is_named_with_how_to_ask_for_it() -> None:
    groups = group_launches(program())
    top = top_groups(groups, None, deep_kernels=3)
    note = coverage_note(groups, top, None)
    assert note is not None and "deep_kernels" in note and "kernel_regex" in note
    shares = time_shares(groups, None)
    fourth = groups[3]
    assert shares[fourth[0]] >= 5.0 and fourth[1][0].name in note


def test_at_least_the_longest_kernels_when_none_is_significant() -> None:
    groups = group_launches(program())
    assert len(top_groups(groups, None, min_share_pct=90.0)) == MIN_DIAGNOSED
    assert len(top_groups(groups, None, min_share_pct=0.0)) == 20  # at most 20
