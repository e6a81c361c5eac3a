"""nsys_trace and analyze's trace stage on a real GPU (device machine): programs, Python scripts and
eval candidates through the CUPTI tracer, the system rules on real timelines, and failures as results."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kernelscope.models.requests import AnalyzeRequest, CompileRequest, TraceRequest
from kernelscope.tools.analyze import analyze
from kernelscope.tools.compile import compile_cuda
from kernelscope.tools.nsys_trace import choose_backend, trace

pytestmark = pytest.mark.gpu
REPO = Path(__file__).resolve().parent.parent
SYSTEM = REPO / "examples" / "system"
PROBLEMS = REPO / "examples" / "problems"


def _exe(path: Path) -> str:
    r = compile_cuda(CompileRequest(source=path.read_text(), filename=path.name, output="executable", flags=["-O3"]))
    assert r.success and r.artifact_id, r.log
    return r.artifact_id


def test_backend_choice_is_explained() -> None:
    backend, why = choose_backend("auto")
    if backend == "cupti":  # the H100 machine's nsys cannot build reports
        assert why and ("nsys" in why.lower() or "Nsight Systems" in why)


def test_trace_program_planted_offload_loop() -> None:
    res = trace(TraceRequest(artifact_id=_exe(SYSTEM / "copy_loop.cu"), backend="cupti"))
    assert res.status == "ok", res.explanation
    s = res.summary
    assert s is not None and s.source == "cupti" and s.launches == 32
    assert {c.direction for c in s.copies} == {"HtoD", "DtoH"}
    assert all(c.pageable == c.count and c.synchronous == c.count for c in s.copies)
    fired = {f.rule for f in res.findings}
    assert {"system.copies-in-loop", "system.pageable-copies", "system.allocation-churn"} <= fired
    assert res.trace_id
    from kernelscope.artifacts import get_store

    doc = json.loads(get_store().require(res.trace_id).path("trace").read_text())  # type: ignore[union-attr]
    assert any(e.get("cat") == "kernel" for e in doc["traceEvents"])


def test_trace_program_fixed_twin_is_quiet() -> None:
    res = trace(TraceRequest(artifact_id=_exe(SYSTEM / "copy_loop.cu"), args=["fixed"], backend="cupti"))
    assert res.status == "ok", res.explanation
    fired = {f.rule for f in res.findings}
    assert not fired & {"system.copies-in-loop", "system.pageable-copies", "system.allocation-churn",
                        "system.synchronization", "system.copies-not-overlapped"}, fired
    assert res.summary is not None and (res.summary.copy_compute_overlap_pct or 0) > 50


def test_trace_script_eager_is_launch_bound_and_graph_is_not() -> None:
    eager = trace(TraceRequest(script_path=str(SYSTEM / "small_ops.py"), args=["--steps", "30"]))
    assert eager.status == "ok", (eager.explanation, eager.capture)
    assert eager.summary is not None and "profiler range" in eager.summary.region
    assert eager.summary.launches == 30 * 150
    assert any(n.name == "step" and n.count == 30 for n in eager.summary.nvtx), eager.summary.nvtx
    assert eager.summary.system_class == "launch-bound"
    assert any(f.rule == "system.launch-overhead" for f in eager.findings)
    graph = trace(TraceRequest(script_path=str(SYSTEM / "small_ops.py"), args=["--graph", "--steps", "30"]))
    assert graph.status == "ok" and graph.summary is not None
    assert graph.summary.launches == 30 * 150 and graph.summary.kernels[0].in_graphs > 0
    assert all(f.rule != "system.launch-overhead" for f in graph.findings)


def test_trace_eval_candidate_only() -> None:
    ref = PROBLEMS / "softmax" / "reference.py"
    cand = PROBLEMS / "softmax" / "naive.py"
    if not cand.is_file():
        pytest.skip("examples/problems/softmax/naive.py missing")
    res = trace(TraceRequest(reference_path=str(ref), candidate_path=str(cand), calls=5))
    assert res.status == "ok", (res.explanation, res.notes, res.capture)
    s = res.summary
    assert s is not None and "profiler range" in s.region
    # only the candidate's forward calls: its kernel, once per call, and none of the reference's
    assert [k.name for k in s.kernels] == ["softmax_naive"] and s.kernels[0].count == 5


def test_crashing_program_is_a_result() -> None:
    src = ('__global__ void bad(int* p) { p[threadIdx.x] = 1; }\n'
           'int main() { bad<<<1, 32>>>((int*)0x10); return cudaDeviceSynchronize() == cudaSuccess ? 0 : 3; }\n')
    r = compile_cuda(CompileRequest(source=src, filename="bad.cu", output="executable"))
    assert r.success and r.artifact_id
    res = trace(TraceRequest(artifact_id=r.artifact_id, backend="cupti", timeout_s=60))
    assert res.status in ("program-failed", "no-activity"), res
    assert res.explanation


def test_analyze_many_launches_uses_the_trace_for_counts() -> None:
    res = analyze(AnalyzeRequest(artifact_id=_exe(REPO / "examples/planted/12-many-tiny-launches/planted.cu")))
    assert res.status == "ok", res.explanation
    # the CUPTI run (both stages) counted 257 launches, so the trace ran after it
    assert [(s.name, s.tool) for s in res.stages] == [("light", "cupti"), ("deep", "cupti"), ("trace", "cupti"),
                                                      ("rules", None)], res.notes
    assert res.launches_profiled <= 2  # one per kernel and launch configuration; the trace counted all 257
    by = {k.mangled_name: k for k in res.kernels}
    assert by["slice_scale_bias"].launches == 256
    assert by["slice_scale_bias"].findings[0].rule == "launch.many-small-launches"
    assert res.system is not None and res.system.launches == 257


def test_analyze_on_an_application_profiles_each_launch_configuration_once() -> None:
    """mini_gpt launches 8 kernels 102 times in 2 forward passes, matmul_bias with 4 grid shapes: the light
    stage profiles one launch per kernel and configuration, the trace still counts every launch."""
    res = analyze(AnalyzeRequest(artifact_id=_exe(REPO / "examples/apps/mini_gpt.cu"), args=["2"]))
    assert res.status == "ok", res.explanation
    assert res.system is not None and res.system.launches == 102
    assert res.kernels_total == 8
    assert 8 <= res.launches_profiled <= 12  # one per (kernel, grid, block), not 102
    assert res.kernels and all(k.launches >= 8 for k in res.kernels)  # counts from the trace
    assert [(s.name, s.tool) for s in res.stages] == [("light", "cupti"), ("deep", "cupti"), ("trace", "cupti"),
                                                      ("rules", None)], res.notes
