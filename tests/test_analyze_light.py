"""analyze's orchestration on CPU: the GPU steps (the lease, the trace, the collector's run, the ncu runs) answer
with real H100 captures of the planted 257-launch program (tests/fixtures/trace/, collector/ and planted/), and
the orchestration between them runs for real: both stages from one CUPTI run, the trace after it when the program
launched many kernels, Nsight Compute only where the collector could not measure."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterator
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
        self.gated: list[bool] = []
        self.forked: list[bool] = []  # per collector run: on the (stand-in) evaluation fork server
        self.collected = collected
        self.first: list[Collected] = []  # answered, in order, before ``collected``
        self.harness_notes: list[str] = []  # what the eval harness' result.json says, in the measured runs
        self.in_run: Callable[[Path], None] = lambda _ws: None  # what the measured job leaves in its workspace

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
            self.gated.append(k["gated"])
            self.forked.append(k.get("runner") is not None)
            if isinstance(self.collected, Exception):
                raise self.collected
            if self.first:
                return ProcessResult(argv=argv, returncode=-9), self.first.pop(0)
            self.harness_answer(ws)
            self.in_run(ws)
            return ProcessResult(argv=argv, returncode=0), self.collected

        def run_capture(_prep: Any, opts: Any, *, ws: Path, name: str, **_k: Any) -> tuple[NcuCapture, Path]:
            self.captures.append((name, list(opts.metrics)))
            self.harness_answer(ws)
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
        monkeypatch.setattr(profiling, "get_fork_server", lambda *_a, **_k: object())  # never started here

    def harness_answer(self, ws: Path) -> None:
        if self.harness_notes and (ws / "config.json").is_file():  # an eval target: the harness ran in ws
            (ws / "result.json").write_text(json.dumps({"status": "ok", "verdict": "inconclusive",
                                                        "notes": self.harness_notes}))


def test_a_program_gets_both_stages_from_one_cupti_run(monkeypatch: pytest.MonkeyPatch, program: str) -> None:
    dev = Device(monkeypatch, load_collected(FIX / "collector" / f"{CASE}.jsonl"))
    res = analyze(AnalyzeRequest(artifact_id=program))
    assert res.status == "ok", (res.explanation, res.notes)
    # the run counted 257 launches, so the trace ran after it for the timeline between them
    assert [(s.name, s.tool) for s in res.stages] == [("light", "cupti"), ("deep", "cupti"), ("trace", "cupti"),
                                                      ("rules", None)]
    assert dev.collector_runs == 1 and dev.captures == []  # no Nsight Compute run at all
    assert dev.gated == [False]  # a program: every launch of its run
    deep = res.stages[1]
    assert "SourceCounters (PC sampling, SASS metrics)" in deep.sections and deep.rule_families and deep.wall_s > 0
    assert res.launches_profiled == 2 and res.report_ids == []
    # what the CUPTI path lacks is said: Nsight Compute's own advice, for every kernel, and how to get it
    [note] = res.notes
    assert "Nsight Compute's own advice is missing" in note and "light='ncu'" in note
    assert all(k.name in note and not k.ncu_rule_titles for k in res.kernels)
    assert "read from the binary each kernel ran from" in note  # the SASS read against the collector's PCs
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


# ---------------------------------------------------------------------------------------- eval mode
KB = FIX / "kernelbench" / "level1" / "19_ReLU.py"
CANDIDATE = (REPO / "examples" / "kernelbench" / "level1" / "19_ReLU.py").read_text()


def _eval(**k: Any) -> AnalyzeRequest:
    return AnalyzeRequest(reference=KB.read_text(), candidate=CANDIDATE, **k)


def test_an_eval_candidate_gets_both_stages_from_one_gated_cupti_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """The collector runs the harness once, counting and profiling only the launches inside its profiler range
    (the candidate's profiled forward calls); no Nsight Compute process; the harness' notes reach the answer."""
    dev = Device(monkeypatch, load_collected(FIX / "collector" / f"{CASE}.jsonl"))
    dev.harness_notes = ["the candidate's output did not match the reference in the profiled run: x"]
    res = analyze(_eval())
    assert res.status == "ok" and res.mode == "eval", (res.explanation, res.notes)
    assert dev.gated == [True] and dev.forked == [True] and dev.captures == []
    assert any("forked from the evaluation fork server" in n for n in res.notes), res.notes
    # the run counted 257 launches in the range, so the trace ran after it, as under Nsight Compute
    assert [(s.name, s.tool) for s in res.stages] == [("light", "cupti"), ("deep", "cupti"), ("trace", "cupti"),
                                                      ("rules", None)]
    assert res.report_ids == [] and res.launches_profiled == 2
    assert dev.harness_notes[0] in res.notes
    [advice] = [n for n in res.notes if "own advice is missing" in n]  # item 5: said for eval too
    assert "light='ncu'" in advice and all(k.name in advice for k in res.kernels)
    assert {k.mangled_name for k in res.kernels} == {"slice_scale_bias", "full_scale_bias"}


@pytest.mark.parametrize(("collected", "why"), [
    (Collected(ended=True, gated=True, gate_opened=0), "never opened"),
    (Collected(ended=True, gated=True, gate_opened=1, launches_seen=0), "launched no kernel in its profiled"),
])
def test_an_eval_candidate_falls_back_to_nsight_compute_saying_why(monkeypatch: pytest.MonkeyPatch,
                                                                   collected: Collected, why: str) -> None:
    dev = Device(monkeypatch, collected)
    dev.harness_notes = ["a note of the harness"]
    res = analyze(_eval())
    assert res.status == "ok" and dev.gated == [True]  # the collector ran to its end: no second try, spawned
    assert [name for name, _ in dev.captures] == ["stage1", "stage2"]
    # eval under Nsight Compute as before: no trace first (the 257 launches call it after the light stage)
    assert [(s.name, s.tool) for s in res.stages] == [("light", "ncu"), ("trace", "cupti"), ("deep", "ncu"),
                                                      ("rules", None)]
    [note] = [n for n in res.notes if "measured nothing" in n]
    assert why in note and "Nsight Compute measured instead" in note
    assert "a note of the harness" in res.notes and not any("own advice is missing" in n for n in res.notes)


def test_a_forked_run_whose_collector_never_finished_is_measured_again_spawned(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """On the fork server the collector wrote nothing (it never loaded, or the job died): the candidate is
    measured once more in a freshly started interpreter, with a note, and both stages come from that run."""
    dev = Device(monkeypatch, load_collected(FIX / "collector" / f"{CASE}.jsonl"))
    dev.first = [Collected()]
    res = analyze(_eval())
    assert res.status == "ok" and dev.forked == [True, False] and dev.gated == [True, True], res.notes
    assert [(s.name, s.tool) for s in res.stages][:2] == [("light", "cupti"), ("deep", "cupti")]
    assert any("on the evaluation fork server" in n and "fresh interpreter" in n for n in res.notes), res.notes
    assert not any("forked from the evaluation fork server" in n for n in res.notes)


def test_spawn_never_uses_the_fork_server(monkeypatch: pytest.MonkeyPatch) -> None:
    dev = Device(monkeypatch, load_collected(FIX / "collector" / f"{CASE}.jsonl"))
    res = analyze(_eval(executor="spawn"))
    assert res.status == "ok" and dev.forked == [False] and not any("fork server" in n for n in res.notes)


def test_light_ncu_keeps_an_eval_candidate_under_nsight_compute(monkeypatch: pytest.MonkeyPatch) -> None:
    dev = Device(monkeypatch, load_collected(FIX / "collector" / f"{CASE}.jsonl"))
    res = analyze(_eval(light="ncu"))
    assert res.status == "ok" and dev.collector_runs == 0 and [n for n, _ in dev.captures] == ["stage1", "stage2"]
    assert {s.tool for s in res.stages if s.name in ("light", "deep")} == {"ncu"}


def test_an_eval_candidates_hot_lines_get_their_code_from_its_own_files_only(monkeypatch: pytest.MonkeyPatch,
                                                                             tmp_path: Path) -> None:
    """An eval target has no compiled artifact: the code of a hot line comes from the file the cubin's line
    information names where that file lies in the job's own folders (load_inline writes the CUDA source it
    compiles into the candidate's extension build folder), never from elsewhere, a link out included."""
    got = load_collected(FIX / "collector" / f"{CASE}.jsonl")
    planted = REPO / "examples" / "planted" / CASE / "planted.cu"
    outside = tmp_path / "elsewhere.cu"
    shutil.copyfile(planted, outside)

    def compiled_in(ws: Path) -> None:  # the job's build, as its line information names it
        (ws / "ext").mkdir()
        shutil.copyfile(planted, ws / "ext" / "planted.cu")
        (ws / "ext" / "link.cu").symlink_to(outside)
        for src in got.sources:
            for pc in src.pcs:
                pc.file = str(ws / "ext" / ("planted.cu" if src.name == "slice_scale_bias" else "link.cu"))

    dev = Device(monkeypatch, got)
    dev.in_run = compiled_in
    res = analyze(_eval(trace="never"))
    assert res.status == "ok" and dev.captures == []
    by = {k.mangled_name: k for k in res.kernels}
    code = planted.read_text().splitlines()
    [first, *_] = by["slice_scale_bias"].hot_lines
    path, _, rest = first.partition(":")
    line = int(rest.split()[0])
    assert path == "ext/planted.cu" and f"`{code[line - 1].strip()}`" in first  # named inside the job's folder
    assert by["full_scale_bias"].hot_lines and all("`" not in h for h in by["full_scale_bias"].hot_lines)


@pytest.mark.parametrize("left", ["cubin", "nothing", "link"])
def test_an_eval_candidates_sass_comes_from_the_module_it_ran_from(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                                   left: str) -> None:
    """An eval candidate has no compiled artifact: its kernel's SASS comes from the module the collector wrote
    beside its output (an NVRTC-built fast-path kernel, recorded on the H100), and the answer says whether it was
    read; a link in its place is not followed."""
    rec = FIX / "collector" / "eval" / "row-sum-nvrtc"
    got = load_collected(rec)
    [cubin] = rec.glob("cubin-*.cubin")
    naive = (REPO / "examples" / "problems" / "row_sum" / "naive.py").read_text()
    kernel_source = naive.split('CUDA_SRC = r"""', 1)[1].split('"""', 1)[0]  # the candidate's kernel source

    def wrote(ws: Path) -> None:  # what the collector leaves in the job's output folder
        for src in got.sources:  # NVRTC names <kernel>.cu in the folder of the job that built it: run's, here
            for pc in src.pcs:
                pc.file = str(tmp_path / "workspaces" / "eval-1" / Path(pc.file).name) if pc.file else ""
        (ws / "row_sum_naive.cu").write_text(kernel_source)  # what kernelscope.fast leaves in this job's folder
        (ws / "metrics").mkdir(exist_ok=True)
        if left == "cubin":
            shutil.copyfile(cubin, ws / "metrics" / cubin.name)
        elif left == "link":
            shutil.copyfile(cubin, tmp_path / cubin.name)
            (ws / "metrics" / cubin.name).symlink_to(tmp_path / cubin.name)

    dev = Device(monkeypatch, got)
    dev.in_run = wrote
    res = analyze(_eval(trace="never"))
    assert res.status == "ok" and dev.captures == [] and [k.name for k in res.kernels] == ["row_sum_naive"]
    [advice] = [n for n in res.notes if "own advice is missing" in n]
    hot = res.kernels[0].hot_lines[0]  # named in the job's folder, never by the server's path, with its code
    assert hot.startswith("row_sum_naive.cu:8 ") and "`float v = xr[j] - comp;`" in hot, hot
    if left == "cubin":
        assert "read from the binary each kernel ran from" in advice and "spinning" not in advice
    else:
        assert "could not give for row_sum_naive" in advice and "that reading" in advice


def test_line_texts_reads_relative_names_inside_the_roots_and_nothing_too_large(tmp_path: Path) -> None:
    got = load_collected(FIX / "collector" / f"{CASE}.jsonl")
    planted = REPO / "examples" / "planted" / CASE / "planted.cu"
    size = planted.stat().st_size
    root = tmp_path / "ext"
    root.mkdir()
    shutil.copyfile(planted, root / "planted.cu")
    (root / "big.cu").write_text("x" * (size + 1))
    names = ["planted.cu", "big.cu", "../ext/planted.cu", "/etc/hostname"]
    got.sources = [src.model_copy(update={"pcs": [pc.model_copy(update={"file": name}) for pc in src.pcs]})
                   for name, src in zip(names, (got.sources * 4)[:4], strict=True)]
    texts = profiling.line_texts(got, [root], max_bytes=size)
    assert set(texts) == {"planted.cu", "../ext/planted.cu"}  # big.cu is over the limit; /etc is outside
    assert texts["planted.cu"] == planted.read_text().splitlines()
