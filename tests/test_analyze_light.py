"""analyze's choice of light stage, on CPU: the GPU steps (the lease, the trace, the collector's run, the ncu
runs) answer with real H100 captures of the planted 257-launch program (tests/fixtures/trace/, collector/ and
planted/), and the orchestration between them runs for real."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from kernelscope.errors import NotAvailable
from kernelscope.models import AnalyzeStage, NcuCapture
from kernelscope.sandbox.gpu import Lease
from kernelscope.sandbox.process import ProcessResult
from kernelscope.tools import metrics as metrics_mod
from kernelscope.tools import profiling
from kernelscope.tools.compile import CompileRequest, compile_cuda
from kernelscope.tools.metrics import Collected, load_collected
from kernelscope.tools.profiling import COLLECTOR_METRICS, AnalyzeRequest, analyze
from kernelscope.tools.timeline import load_cupti
from kernelscope.tools.tracing import diagnose_timeline

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

        def trace_stage(*_a: Any, **_k: Any) -> tuple[AnalyzeStage, Any, list[str]]:
            tl = load_cupti(FIX / "trace" / "many-tiny-launches")
            return AnalyzeStage(name="trace", tool="cupti", wall_s=0.4), (*diagnose_timeline(tl), tl), []

        def run_collector(argv: list[str], ws: Path, env: dict[str, str], metrics: list[str], *_a: Any,
                          **_k: Any) -> tuple[ProcessResult, Collected]:
            self.collector_runs += 1
            assert metrics == COLLECTOR_METRICS and env.get("CUDA_VISIBLE_DEVICES") == "0"
            if isinstance(self.collected, Exception):
                raise self.collected
            return ProcessResult(argv=argv, returncode=0), self.collected

        def run_capture(_prep: Any, opts: Any, *, ws: Path, name: str, **_k: Any) -> tuple[NcuCapture, Path]:
            self.captures.append((name, list(opts.metrics)))
            report = ws / f"{name}.ncu-rep"
            shutil.copyfile(FIX / "planted" / CASE / ("light.ncu-rep" if name == "stage1" else "deep.ncu-rep"),
                            report)
            return NcuCapture(name=name, wall_s=1.0), report

        monkeypatch.setattr(profiling, "_lease", lease)
        monkeypatch.setattr(profiling, "_ncu_binary", lambda: Path("ncu"))
        monkeypatch.setattr(profiling, "tracer_available", lambda: True)
        monkeypatch.setattr(profiling, "_trace_stage", trace_stage)
        monkeypatch.setattr(profiling, "run_capture", run_capture)
        monkeypatch.setattr(metrics_mod, "run_collector", run_collector)


def test_a_traced_program_gets_its_light_stage_from_the_collector(monkeypatch: pytest.MonkeyPatch,
                                                                   program: str) -> None:
    dev = Device(monkeypatch, load_collected(FIX / "collector" / f"{CASE}.jsonl"))
    res = analyze(AnalyzeRequest(artifact_id=program))
    assert res.status == "ok", (res.explanation, res.notes)
    assert [(s.name, s.tool) for s in res.stages] == [("trace", "cupti"), ("light", "cupti"), ("deep", "ncu"),
                                                      ("rules", None)]
    assert dev.collector_runs == 1 and [name for name, _ in dev.captures] == ["stage2"]  # one ncu run, not two
    deep_metrics = dev.captures[0][1]
    assert set(COLLECTOR_METRICS) <= set(deep_metrics)  # the top kernels' numbers are measured again by ncu
    assert res.launches_profiled == 2 and len(res.report_ids) == 1 and not res.notes
    by = {k.mangled_name: k for k in res.kernels}
    assert by["slice_scale_bias"].launches == 256
    assert by["slice_scale_bias"].findings[0].rule == "launch.many-small-launches"


def test_the_light_stage_falls_back_to_nsight_compute_when_the_collector_measures_nothing(
        monkeypatch: pytest.MonkeyPatch, program: str) -> None:
    dev = Device(monkeypatch, Collected(errors=["cuptiProfilerInitialize: CUPTI_ERROR_INSUFFICIENT_PRIVILEGES"]))
    res = analyze(AnalyzeRequest(artifact_id=program))
    assert res.status == "ok"
    assert [name for name, _ in dev.captures] == ["stage1", "stage2"]
    light = res.stages[1]
    assert (light.name, light.tool) == ("light", "ncu") and light.capture is not None
    assert any("measured nothing" in n and "INSUFFICIENT_PRIVILEGES" in n for n in res.notes), res.notes
    assert not set(COLLECTOR_METRICS) <= set(dev.captures[1][1])  # ncu's own light values stand
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
