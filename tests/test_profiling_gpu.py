"""ncu-profile and analyze on a real GPU (device machine): program and eval targets, the two stages,
report artifacts that the recorded-report tools accept, and the explained failures."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelscope.agent.search.knobs import apply_knobs, default_config, parse_knobs
from kernelscope.models.requests import AnalyzeRequest, CompileRequest, ProfileRequest
from kernelscope.tools.analyze import analyze
from kernelscope.tools.classify import classify_report
from kernelscope.tools.compile import compile_cuda
from kernelscope.tools.ncu_profile import ncu_profile

pytestmark = pytest.mark.gpu
REPO = Path(__file__).resolve().parent.parent
PLANTED = REPO / "examples" / "planted"
PROBLEMS = REPO / "examples" / "problems"


def _exe(case: str) -> str:
    r = compile_cuda(CompileRequest(source=(PLANTED / case / "planted.cu").read_text(), filename="planted.cu",
                                    output="executable", flags=["-O3"]))
    assert r.success and r.artifact_id, r.log
    return r.artifact_id


def test_analyze_program_two_stages_and_the_planted_finding() -> None:
    res = analyze(AnalyzeRequest(artifact_id=_exe("01-strided-copy"), light="ncu"))
    assert res.status == "ok", (res.explanation, res.stages)
    assert [s.name for s in res.stages] == ["trace", "light", "deep", "rules"]
    light, deep = res.stages[1], res.stages[2]
    assert res.system is not None and res.system.launches == 2 and res.trace_id
    assert light.metrics >= 20 and light.wall_s > 0 and light.tool == "ncu"
    assert "MemoryWorkloadAnalysis" in deep.sections and deep.capture and deep.capture.status == "ok"
    by = {k.mangled_name: k for k in res.kernels}
    bad = by["strided_copy"]
    assert bad.bottleneck.cls == "memory-bound"
    assert bad.findings[0].rule == "memory.uncoalesced-global-access"
    assert "planted.cu:" in (bad.findings[0].line or "")
    assert all(f.rule != "memory.uncoalesced-global-access" for f in by["coalesced_copy"].findings)
    assert len(res.report_ids) == 2
    # the reports are artifacts the recorded-report tools accept by id
    again = classify_report(res.report_ids[0], kernel="strided_copy")  # the light report has the SOL
    assert again.kernels and again.kernels[0].bottleneck.cls == "memory-bound"


def test_analyze_measures_both_stages_in_the_programs_own_run() -> None:
    """By default a program's two stages are measured in its own run (the CUPTI collector: light metrics, then
    the deep metrics, stall reasons and source passes of its kernels' first launches): no Nsight Compute run,
    the same classes, findings and source lines."""
    res = analyze(AnalyzeRequest(artifact_id=_exe("01-strided-copy")))
    assert res.status == "ok", (res.explanation, res.stages, res.notes)
    assert [(s.name, s.tool) for s in res.stages] == [("light", "cupti"), ("deep", "cupti"), ("rules", None)], res.notes
    light, deep = res.stages[0], res.stages[1]
    assert light.capture is None and deep.capture is None and deep.wall_s > 0
    assert sorted(light.kernels) == ["coalesced_copy: latency-bound", "strided_copy: memory-bound"], light.kernels
    by = {k.mangled_name: k for k in res.kernels}
    bad = by["strided_copy"]
    assert bad.bottleneck.cls == "memory-bound" and bad.findings[0].rule == "memory.uncoalesced-global-access"
    assert "planted.cu:21" in (bad.findings[0].line or "")
    assert bad.bottleneck.roofline is not None and bad.bottleneck.roofline.dram_bytes
    assert all(f.rule != "memory.uncoalesced-global-access" for f in by["coalesced_copy"].findings)
    assert res.report_ids == []  # nothing from Nsight Compute


def test_ncu_profile_with_chosen_sections_and_a_filter() -> None:
    res = ncu_profile(ProfileRequest(artifact_id=_exe("01-strided-copy"), sections=["SpeedOfLight"],
                                     kernel_regex="^coalesced"))
    assert res.status == "ok" and res.report_id
    assert [k.name for k in res.kernels] == ["coalesced_copy"]
    assert "--clock-control" in res.capture.command and "none" in res.capture.command


def test_filter_matching_nothing_is_explained_with_the_kernel_names() -> None:
    res = ncu_profile(ProfileRequest(artifact_id=_exe("01-strided-copy"), sections=["SpeedOfLight"],
                                     kernel_regex="^no_such_kernel$"))
    assert res.status == "no-kernels" and res.report_id is None
    assert "strided_copy" in (res.explanation or "") and "coalesced_copy" in (res.explanation or "")
    assert any("kernel_regex" in f for f in res.fixes)


def test_crashing_program_is_a_result() -> None:
    src = ('#include <cstdio>\nextern "C" __global__ void boom(int* p){ p[threadIdx.x] = 1; __trap(); }\n'
           "int main(){ boom<<<1,32>>>(nullptr); cudaError_t e = cudaDeviceSynchronize(); "
           'printf("%s\\n", cudaGetErrorString(e)); return e ? 3 : 0; }\n')
    r = compile_cuda(CompileRequest(source=src, output="executable"))
    assert r.success and r.artifact_id
    res = ncu_profile(ProfileRequest(artifact_id=r.artifact_id, sections=["SpeedOfLight"], timeout_s=120))
    assert res.status in ("program-failed", "ncu-error", "ok", "no-kernels")
    assert res.capture.exit_status not in (None, 0) or res.status != "ok"


def test_analyze_eval_mode_profiles_only_the_candidate() -> None:
    res = analyze(AnalyzeRequest(reference_path=str(PROBLEMS / "softmax" / "reference.py"),
                                 candidate_path=str(PROBLEMS / "softmax" / "naive.py")))
    assert res.status == "ok", (res.explanation, res.stages)
    names = [k.name for k in res.kernels] + res.other_kernels
    assert names and all("softmax_naive" in n for n in names), names
    assert res.kernels[0].findings or res.kernels[0].bottleneck.cls


KERNELBENCH = REPO / "tests" / "fixtures" / "kernelbench" / "level1"


@pytest.mark.parametrize(("reference", "candidate", "kernel"), [
    (KERNELBENCH / "19_ReLU.py", REPO / "examples" / "kernelbench" / "level1" / "19_ReLU.py", "relu_knobs"),
    (PROBLEMS / "softmax" / "reference.py", PROBLEMS / "softmax" / "load_inline.py", "softmax_rows"),
], ids=["fast-path", "load_inline"])
def test_analyze_eval_mode_measures_the_candidate_in_its_own_run(reference: Path, candidate: Path,
                                                                 kernel: str) -> None:
    """An eval candidate's two stages come from the CUPTI collector in the harness' own run, gated on its profiler
    range: no Nsight Compute process, the candidate's own kernel diagnosed, and none of the harness' (inputs,
    poisoned outputs, comparison) or the reference's kernels among the kernels."""
    src = candidate.read_text()
    src = apply_knobs(src, default_config(parse_knobs(src)))  # the knob-annotated examples: their first values
    res = analyze(AnalyzeRequest(reference_path=str(reference), candidate=src, timeout_s=600))
    assert res.status == "ok", (res.explanation, res.stages, res.notes)
    measured = [(s.name, s.tool) for s in res.stages if s.name != "trace"]
    assert measured == [("light", "cupti"), ("deep", "cupti"), ("rules", None)], (measured, res.notes)
    assert not any(s.tool == "ncu" or s.capture is not None for s in res.stages) and res.report_ids == []
    assert not any("measured nothing" in n for n in res.notes), res.notes
    # forked from the warm evaluation server: no interpreter start, no torch import for the profile
    assert any("forked from the evaluation fork server" in n for n in res.notes), res.notes
    # every kernel it counted is the candidate's: the light stage's classes and the kernels past the top ones too
    names = [k.mangled_name for k in res.kernels] + res.stages[0].kernels + res.other_kernels
    assert names and all(kernel in n for n in names), names
    assert res.kernels_total == 1 and res.launches_profiled >= 1
    top = res.kernels[0]
    assert top.bottleneck.cls and top.bottleneck.roofline is not None and top.launches >= 1
    assert any("own advice is missing" in n and "light='ncu'" in n for n in res.notes), res.notes
    # the module the kernel ran from (NVRTC's cubin, the extension's) was read against the collector's PCs
    assert any("read from the binary each kernel ran from" in n for n in res.notes), res.notes
    spawned = analyze(AnalyzeRequest(reference_path=str(reference), candidate=src, timeout_s=600, executor="spawn"))
    assert spawned.status == "ok" and not any("fork server" in n for n in spawned.notes), spawned.notes
    assert [k.mangled_name for k in spawned.kernels] == [k.mangled_name for k in res.kernels]
