"""analyze's orchestration on CPU: the GPU steps (the lease, the trace, the collector's run, the ncu runs) answer
with real H100 captures of the planted 257-launch program (tests/fixtures/trace/, collector/ and planted/), and
the orchestration between them runs for real: both stages from one CUPTI run, the trace after it when the program
launched many kernels, Nsight Compute only where the collector could not measure."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from kernelscope.errors import NotAvailable
from kernelscope.measure import collector as metrics_mod
from kernelscope.measure.collector import Collected, load_collected
from kernelscope.measure.stages import COLLECTOR_METRICS, collector_request
from kernelscope.measure.timeline import load_cupti
from kernelscope.measure.trace import Traced, diagnose_timeline
from kernelscope.models import AnalyzeStage, NcuCapture
from kernelscope.models.requests import AnalyzeRequest, CompileRequest
from kernelscope.sandbox.gpu import Lease
from kernelscope.sandbox.process import ProcessResult
from kernelscope.tools import analyze as profiling
from kernelscope.tools.analyze import TraceStage, analyze
from kernelscope.tools.compile import compile_cuda

REPO = Path(__file__).resolve().parent.parent
FIX = Path(__file__).parent / "fixtures"
CASE = "12-many-tiny-launches"


@pytest.fixture(scope="module")
def program() -> str:
    r = compile_cuda(CompileRequest(source=(REPO / "examples" / "planted" / CASE / "planted.cu").read_text(),
                                    filename="planted.cu", output="executable", flags=["-O3"]))
    assert r.success and r.artifact_id, r.log
    return r.artifact_id


class Device:
    """The GPU steps, answered from the captures; records which ran."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, collected: Collected | Exception) -> None:
        self.captures: list[tuple[str, list[str]]] = []
        self.collector_runs = 0
        self.collected = collected

        @contextmanager
        def lease(*_a: Any, **_k: Any) -> Iterator[Lease]:
            yield Lease(index=0, visible="0", waited_s=0.0)

        def trace_stage(*_a: Any, **_k: Any) -> TraceStage:
            tl = load_cupti(FIX / "trace" / "many-tiny-launches")
            stage = AnalyzeStage(name="trace", tool="cupti", wall_s=0.4)
            return TraceStage(stage, Traced(*diagnose_timeline(tl), tl), [])

        def run_collector(argv: list[str], ws: Path, env: dict[str, str], metrics: list[str], *_a: Any,
                          **k: Any) -> tuple[ProcessResult, Collected]:
            self.collector_runs += 1
            assert metrics == COLLECTOR_METRICS and env.get("CUDA_VISIBLE_DEVICES") == "0"
            assert k["deep"] == collector_request()  # what the fixtures were captured with
            if isinstance(self.collected, Exception):
                raise self.collected
            return ProcessResult(argv=argv, returncode=0), self.collected

        def run_capture(_prep: Any, opts: Any, *, ws: Path, name: str, **_k: Any) -> tuple[NcuCapture, Path]:
            self.captures.append((name, list(opts.metrics)))
            report = ws / f"{name}.ncu-rep"
            shutil.copyfile(FIX / "planted" / CASE / ("light.ncu-rep" if name == "stage1" else "deep.ncu-rep"),
                            report)
            return NcuCapture(name=name, wall_s=1.0), report

        monkeypatch.setattr(profiling, "gpu_lease", lease)
        monkeypatch.setattr(profiling, "ncu_binary", lambda: Path("ncu"))
        monkeypatch.setattr(profiling, "tracer_available", lambda: True)
        monkeypatch.setattr(profiling, "_trace_stage", trace_stage)
        monkeypatch.setattr(profiling, "run_capture", run_capture)
        monkeypatch.setattr(metrics_mod, "run_collector", run_collector)


def test_a_program_gets_both_stages_from_one_cupti_run(monkeypatch: pytest.MonkeyPatch, program: str) -> None:
    dev = Device(monkeypatch, load_collected(FIX / "collector" / f"{CASE}.jsonl"))
    res = analyze(AnalyzeRequest(artifact_id=program))
    assert res.status == "ok", (res.explanation, res.notes)
    # the run counted 257 launches, so the trace ran after it for the timeline between them
    assert [(s.name, s.tool) for s in res.stages] == [("light", "cupti"), ("deep", "cupti"), ("trace", "cupti"),
                                                      ("rules", None)]
    assert dev.collector_runs == 1 and dev.captures == []  # no Nsight Compute run at all
    deep = res.stages[1]
    assert "SourceCounters (PC sampling, SASS metrics)" in deep.sections and deep.rule_families and deep.wall_s > 0
    assert res.launches_profiled == 2 and res.report_ids == []
    # what the CUPTI path lacks is said: Nsight Compute's own advice, for every kernel, and how to get it
    [note] = res.notes
    assert "Nsight Compute's own advice is missing" in note and "light='ncu'" in note
    assert all(k.name in note and not k.ncu_rule_titles for k in res.kernels)
    by = {k.mangled_name: k for k in res.kernels}
    assert by["slice_scale_bias"].launches == 256
    assert by["slice_scale_bias"].findings[0].rule == "launch.many-small-launches"
    assert res.system is not None and res.system.launches == 257


def test_without_the_trace_the_collector_counts_the_launches(monkeypatch: pytest.MonkeyPatch, program: str) -> None:
    dev = Device(monkeypatch, load_collected(FIX / "collector" / f"{CASE}.jsonl"))
    res = analyze(AnalyzeRequest(artifact_id=program, trace="never"))
    assert [s.name for s in res.stages] == ["light", "deep", "rules"] and dev.captures == []
    by = {k.mangled_name: k for k in res.kernels}
    assert by["slice_scale_bias"].launches == 256 and by["full_scale_bias"].launches == 1
    assert by["slice_scale_bias"].findings[0].rule == "launch.many-small-launches"


def test_a_top_kernel_without_its_source_passes_gets_nsight_computes_deep_stage(monkeypatch: pytest.MonkeyPatch,
                                                                                program: str) -> None:
    got = load_collected(FIX / "collector" / f"{CASE}.jsonl")
    got.sources = [src for src in got.sources if src.name != "full_scale_bias"]
    dev = Device(monkeypatch, got)
    res = analyze(AnalyzeRequest(artifact_id=program))
    assert [(s.name, s.tool) for s in res.stages] == [("light", "cupti"), ("deep", "cupti"), ("trace", "cupti"),
                                                      ("deep", "ncu"), ("rules", None)]
    assert [name for name, _ in dev.captures] == ["stage2"] and res.stages[3].kernels == ["full_scale_bias"]
    assert len(res.report_ids) == 1
    # Nsight Compute measured full_scale_bias, so only slice_scale_bias lacks its advice
    [note] = [n for n in res.notes if "own advice is missing" in n]
    assert "slice_scale_bias" in note and "full_scale_bias" not in note


def test_both_stages_fall_back_to_nsight_compute_when_the_collector_measures_nothing(
        monkeypatch: pytest.MonkeyPatch, program: str) -> None:
    dev = Device(monkeypatch, Collected(errors=["cuptiProfilerInitialize: CUPTI_ERROR_INSUFFICIENT_PRIVILEGES"]))
    res = analyze(AnalyzeRequest(artifact_id=program))
    assert res.status == "ok"
    assert [name for name, _ in dev.captures] == ["stage1", "stage2"]
    assert [(s.name, s.tool) for s in res.stages] == [("trace", "cupti"), ("light", "ncu"), ("deep", "ncu"),
                                                      ("rules", None)]
    assert res.stages[1].capture is not None
    assert not any("own advice is missing" in n for n in res.notes)  # Nsight Compute measured everything
    assert any("measured nothing" in n and "INSUFFICIENT_PRIVILEGES" in n for n in res.notes), res.notes
    assert len(res.report_ids) == 2


def test_no_collector_here_means_nsight_compute_with_a_note(monkeypatch: pytest.MonkeyPatch, program: str) -> None:
    dev = Device(monkeypatch, NotAvailable("CUPTI metrics", "cupti.h was not found", "install CUPTI"))
    res = analyze(AnalyzeRequest(artifact_id=program))
    assert res.status == "ok" and res.stages[1].tool == "ncu"
    assert any("not available here" in n for n in res.notes), res.notes
    assert [name for name, _ in dev.captures] == ["stage1", "stage2"]


def test_light_ncu_never_starts_the_collector(monkeypatch: pytest.MonkeyPatch, program: str) -> None:
    dev = Device(monkeypatch, load_collected(FIX / "collector" / f"{CASE}.jsonl"))
    res = analyze(AnalyzeRequest(artifact_id=program, light="ncu"))
    assert res.status == "ok" and res.stages[1].tool == "ncu" and dev.collector_runs == 0
    assert [name for name, _ in dev.captures] == ["stage1", "stage2"]


def test_trace_always_runs_the_trace_once_when_the_collector_falls_back(monkeypatch: pytest.MonkeyPatch,
                                                                       program: str) -> None:
    """trace='always' traces before the collector's run; when that run measures nothing, Nsight Compute's stages
    reuse the trace rather than tracing the program again."""
    dev = Device(monkeypatch, Collected(errors=["cuptiProfilerInitialize: CUPTI_ERROR_INSUFFICIENT_PRIVILEGES"]))
    res = analyze(AnalyzeRequest(artifact_id=program, trace="always"))
    assert res.status == "ok" and [name for name, _ in dev.captures] == ["stage1", "stage2"]
    assert [(s.name, s.tool) for s in res.stages] == [("trace", "cupti"), ("light", "ncu"), ("deep", "ncu"),
                                                      ("rules", None)]
    assert res.system is not None and res.system.launches == 257


@pytest.mark.parametrize(("mode", "kid", "count"), [("program", "::regex:^(a|b\\+)$:1", None),
                                                    ("eval", "::regex:^(a|b\\+)$:", 16)])
def test_nsight_computes_deep_capture_picks_the_launches_by_mode(monkeypatch: pytest.MonkeyPatch, mode: str,
                                                                 kid: str, count: int | None) -> None:
    """A program: the first launch of each kernel; eval: their launches in the profiled forward call (8 each)."""
    seen: dict[str, Any] = {}

    def run_capture(_prep: Any, opts: Any, **k: Any) -> tuple[NcuCapture, None]:
        seen.update(kid=k["kernel_id"], count=opts.launch_count, sections=opts.sections, source=opts.import_source)
        return NcuCapture(name=k["name"], wall_s=0.0), None

    monkeypatch.setattr(profiling, "run_capture", run_capture)
    req = AnalyzeRequest(artifact_id="x") if mode == "program" else AnalyzeRequest(reference="r.py", candidate="c.py")
    assert req.mode == mode
    a = SimpleNamespace(prep=None, ws=Path("."), env={}, req=req, cancel=None)
    profiling._ncu_deep_capture(a, ["a", "b+"], ["WarpStateStats"], [])  # type: ignore[arg-type]
    assert seen == {"kid": kid, "count": count, "sections": ["WarpStateStats"], "source": True}
