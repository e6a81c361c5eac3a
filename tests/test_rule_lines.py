"""A finding points at the line of the instruction that carries its cost (issue 29): replayed from the CUPTI
collector's and Nsight Compute's recorded H100 runs of the planted atomic case (tests/fixtures/collector,
tests/fixtures/planted), where the closing brace after the atomic (line 21) holds the kernel's exit and the
warps' drain samples. Changed values are stated in each test."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelscope.heuristics import REGISTRY
from kernelscope.heuristics.memory import has_code
from kernelscope.measure.collector import collected_profile, load_collected
from kernelscope.measure.ncu import load_profile
from kernelscope.models import KernelProfile

FIX = Path(__file__).parent / "fixtures"
CASE = "08-atomic-contention"
SOURCE = Path(__file__).resolve().parent.parent / "examples" / "planted" / CASE / "planted.cu"
ATOMIC, BRACE = 20, 21
THROTTLES = ("smsp__pcsamp_warps_issue_stalled_lg_throttle", "smsp__pcsamp_warps_issue_stalled_membar")
DRAIN = "smsp__pcsamp_warps_issue_stalled_drain"


def _kernel(source: str) -> KernelProfile:
    if source == "collector":
        texts = {"planted.cu": SOURCE.read_text().splitlines()}
        kernels = collected_profile(load_collected(FIX / "collector" / f"{CASE}.jsonl"), texts=texts).kernels
    else:
        kernels = load_profile(FIX / "planted" / CASE / "deep.ncu-rep").kernels
    return next(k for k in kernels if k.name.startswith("contended_atomic_sum"))


def _line_no(label: str | None) -> int:
    assert label is not None
    return int(label.split("  ")[0].rsplit(":", 1)[1])


def _without_throttles(k: KernelProfile, drain_factor: float) -> KernelProfile:
    lines = []
    for s in k.source_lines:
        counters = {c: v for c, v in s.counters.items() if not c.startswith(THROTTLES)}
        if DRAIN in counters:
            counters[DRAIN] *= drain_factor
        lines.append(s.model_copy(update={"counters": counters}))
    return k.model_copy(update={"source_lines": lines})


@pytest.mark.parametrize("source", ["collector", "ncu"])
def test_the_atomic_finding_names_the_atomics_line_not_the_brace_after_it(source: str) -> None:
    k = _kernel(source)
    brace = next(s for s in k.source_lines if s.line == BRACE and s.file.endswith("planted.cu"))
    assert brace.counters.get(DRAIN, 0) > 50_000  # recorded: the warps' drain at the exit lands on the brace
    assert _line_no(REGISTRY["memory.atomic-contention"].run(k)[0].line) == ATOMIC
    # an atomic whose queue never throttles (stated: no lg_throttle/membar samples) with 10x the recorded drain
    # at the brace: the line is still the atomic's, found by the global memory it moves
    quiet = _without_throttles(k, drain_factor=10.0)
    f = REGISTRY["memory.atomic-contention"].run(quiet)[0]
    assert _line_no(f.line) == ATOMIC, f.line


def test_a_drain_stall_is_placed_on_the_stores_not_the_exit() -> None:
    """The collector's run with its stalls stated as mostly drain (the exit waiting for the atomics): the dominant
    stall finding names the line that moves global memory, not the closing brace that holds the exit."""
    k = _kernel("collector")
    k = k.model_copy(update={"stall_reasons": {"drain": 30.0, "long_scoreboard": 5.0, "selected": 1.0}})
    found = REGISTRY["stalls.dominant-stall-reason"].run(k, context={"sass": {}})
    assert found and found[0].topic == "drain"
    assert _line_no(found[0].line) == ATOMIC, found[0].line


def test_a_line_of_braces_holds_no_cost_of_its_own() -> None:
    k = _kernel("collector")
    by_line = {s.line: s for s in k.source_lines if s.file.endswith("planted.cu")}
    assert by_line[BRACE].code == "}" and not has_code(by_line[BRACE])
    assert has_code(by_line[ATOMIC]) and "atomicAdd" in (by_line[ATOMIC].code or "")


def test_findings_cite_the_users_file_not_the_workspace_copy() -> None:
    """The recorded reports name the compile workspace's copy (``.../workspaces/compile-<id>/planted.cu``); the
    rules stage names the file the user compiled (here as a path they gave, stated), and leaves toolkit headers as
    they are."""
    from kernelscope.heuristics.pipeline import diagnose_stages, user_file, user_sources

    d = FIX / "planted" / CASE
    light, deep = load_profile(d / "light.ncu-rep"), load_profile(d / "deep.ncu-rep")
    files = {s.file for k in deep.kernels for s in k.source_lines}
    copy = next(f for f in files if f.endswith("planted.cu"))
    assert "/workspaces/compile-" in copy
    shown = "src/kernels/planted.cu"
    assert user_file(copy, shown) == shown
    header = next(f for f in files if f.endswith(".hpp"))
    assert user_file(header, shown) == header
    assert user_file(copy.replace("planted.cu", "common.cuh"), shown) == "common.cuh"
    diags, _ = diagnose_stages(user_sources(light, shown), user_sources(deep, shown))
    f = next(x for k in diags for x in k.findings if x.rule == "memory.atomic-contention")
    assert f.line is not None and f.line.startswith(f"{shown}:{ATOMIC}") and "workspaces" not in f.diagnosis
    assert all("workspaces" not in line for k in diags for line in k.hot_lines)
