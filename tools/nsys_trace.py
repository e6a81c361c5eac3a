"""nsys-trace: a program's timeline through Nsight Systems, or through our CUPTI tracer where nsys is
missing or cannot build reports, turned into a summary, system-level findings and a Chrome/Perfetto
trace artifact.

Targets: a compiled program (an executable artifact), a Python script, or an eval-mode candidate,
whose harness warms it up and then opens the profiler range (``cudaProfilerStart``) only around its
own forward calls, so the summary covers the candidate and not the harness.

Backends: ``nsys profile --export sqlite`` read through the documented SQLite schema, or the CUPTI
activity tracer (``measure/native/cupti_trace.cpp``, injected with ``CUDA_INJECTION64_PATH``; NVTX
ranges reach it through ``NVTX_INJECTION64_PATH``), which works for any CUDA process: compiled
programs and Python alike. ``auto`` uses nsys when the capability check says it can build reports
here, else CUPTI, and says why.
"""

from __future__ import annotations

import hashlib
import json
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from kernelscope.config import Settings, ensure_dirs
from kernelscope.errors import InputError, NotAvailable
from kernelscope.measure.timeline import Timeline, TraceFacts, chrome_trace, load_cupti, load_nsys_sqlite, summarize
from kernelscope.models import Finding, TraceCapture, TraceResult, TraceSummary
from kernelscope.models.requests import Backend, TraceRequest
from kernelscope.sandbox.gpu import gpu_pool
from kernelscope.sandbox.process import Limits, run_process
from kernelscope.sandbox.workspace import Workspace
from kernelscope.tools.analyze import check_overrides, harness_notes

WaitCallback = Callable[[int, float], None]


# ------------------------------------------------------------------------------------ backends
def choose_backend(requested: Backend) -> tuple[Literal["nsys", "cupti"], str | None]:
    """The backend to use, and why CUPTI stands in for nsys (None when nothing was substituted)."""
    from kernelscope.tools import capabilities as caps

    if requested == "cupti":
        return "cupti", None
    ok, note = caps.check_nsys_reports(caps.tool_info("nsys"), probe=False)  # a missing nsys is a False too
    if ok is False:
        if requested == "nsys":
            raise NotAvailable("Tracing with Nsight Systems", note.split("; fix: ")[0],
                               "install Nsight Systems and put its nsys on PATH, or use backend='cupti'")
        return "cupti", f"Nsight Systems cannot be used here: {note}"
    return "nsys", None


def _prepare(req: TraceRequest, ws: Path, s: Settings) -> tuple[list[str], str]:
    from kernelscope.tools.analyze import prepare_target
    from kernelscope.tools.run import _read_source

    if req.trace_mode == "script":
        if any(v is not None for v in (req.artifact_id, req.reference, req.reference_path, req.candidate,
                                       req.candidate_path)):
            raise InputError("Give one target: `script`/`script_path`, `artifact_id`, or a reference and candidate.")
        src = _read_source(req.script, req.script_path, "script", s)
        (ws / "script.py").write_text(src)
        return [sys.executable, "-s", str(ws / "script.py"), *req.args], "Python script"
    prep = prepare_target(req, ws, s)  # eval: the harness opens the profiler range around `calls` forward calls
    return prep.argv, prep.display


def run_cupti(argv: list[str], ws: Path, env: dict[str, str], timeout_s: float, s: Settings,
              cancel: threading.Event | None) -> tuple[Any, Timeline | None, list[str]]:
    """Run ``argv`` with the CUPTI tracer injected; (process result, timeline or None, tracer messages)."""
    from kernelscope.measure.cupti import build_tracer, tracer_env

    lib = build_tracer(s)
    tdir = ws / "trace"
    tdir.mkdir(exist_ok=True)
    for old in tdir.glob("trace-*.jsonl"):
        old.unlink()
    proc = run_process(argv, cwd=ws, env={**env, **tracer_env(lib, tdir)}, cancel=cancel,
                       limits=Limits(wall_s=timeout_s, output_bytes=256 * 1024, isolate_network=True))
    notes = [ln.strip() for ln in proc.stderr.splitlines() if ln.startswith("kernelscope-trace:")][:10]
    tl = load_cupti(tdir) if any(tdir.glob("trace-*.jsonl")) else None
    return proc, tl, notes


def _run_nsys(argv: list[str], ws: Path, env: dict[str, str], req: TraceRequest,
              cancel: threading.Event | None) -> tuple[Any, Timeline | None, list[str]]:
    from kernelscope.toolchain import require

    nsys = require("nsys")
    out = ws / "trace"
    cmd = [str(nsys), "profile", "--trace", "cuda,nvtx,osrt", "--sample", "none", "--cpuctxsw", "none",
           "--output", str(out), "--force-overwrite", "true", "--export", "sqlite", *argv]
    proc = run_process(cmd, cwd=ws, env=env, cancel=cancel,
                       limits=Limits(wall_s=req.timeout_s, output_bytes=256 * 1024, isolate_network=True))
    db = out.with_suffix(".sqlite")
    notes = [ln.strip() for ln in (proc.stdout + proc.stderr).splitlines()
             if "error" in ln.lower() and "nsys" in ln.lower()][:5]
    return proc, load_nsys_sqlite(db) if db.is_file() else None, notes


def store_trace(tl: Timeline, *, target: str) -> str:
    """Keep a timeline as a Chrome/Perfetto JSON artifact (role ``trace``); returns its id."""
    from kernelscope.artifacts import ArtifactMeta, content_id, get_store

    data = json.dumps(chrome_trace(tl), separators=(",", ":")).encode()
    aid = content_id({"trace": hashlib.sha256(data).hexdigest()})
    art = get_store().put(ArtifactMeta(id=aid, kind="trace", source_name="trace.json",
                                       extra={"target": target, "source": tl.source}),
                          {"trace": ("trace.json", data)})
    return art.id


def diagnose_timeline(tl: Timeline, *, gap_threshold_ns: float = 2_000.0,
                      overrides: dict[str, dict[str, float]] | None = None
                      ) -> tuple[TraceSummary, TraceFacts, list[Finding]]:
    """Summary, facts and ranked system findings of a timeline (raises ValueError without GPU activity)."""
    from kernelscope.heuristics import load_all, merge, run_rules

    load_all()
    summary, facts = summarize(tl, gap_threshold_ns=gap_threshold_ns)
    return summary, facts, merge(run_rules("trace", summary, overrides=overrides, context={"facts": facts}))


def trace(req: TraceRequest, settings: Settings | None = None, *, cancel: threading.Event | None = None,
          on_wait: WaitCallback | None = None) -> TraceResult:
    from kernelscope.tools.run import job_env

    check_overrides(req.overrides)
    s = ensure_dirs(settings)
    backend, fallback = choose_backend(req.backend)
    if len(gpu_pool()) == 0:
        raise NotAvailable("Tracing a CUDA program", "no GPU is visible to this server",
                           "run kernelscope on a host with an NVIDIA GPU")
    t_all = time.monotonic()
    result = TraceResult(status="ok", mode=req.trace_mode, source=backend, fallback=fallback)
    with Workspace(prefix="trace-") as ws:
        argv, display = _prepare(req, ws.path, s)
        with gpu_pool().lease(req.gpu, cancel=cancel, on_wait=on_wait) as lease:
            result.gpu_wait_s = lease.waited_s
            env = job_env(ws.path, s.home, lease)
            tl: Timeline | None = None
            if backend == "nsys":
                proc, tl, notes = _run_nsys(argv, ws.path, env, req, cancel)
                if tl is None and req.backend == "auto" and not proc.timed_out:
                    result.fallback = ("nsys did not produce its SQLite export"
                                       + (f" ({notes[0]})" if notes else "") + "; traced again with CUPTI")
                    backend = result.source = "cupti"
            if backend == "cupti":
                proc, tl, notes = run_cupti(argv, ws.path, env, req.timeout_s, s, cancel)
        result.notes += notes + harness_notes(ws.path)
        result.capture = TraceCapture(
            tool=backend, command=[backend, display], wall_s=round(proc.wall_s, 3), exit_status=proc.returncode,
            timed_out=proc.timed_out, signal=proc.signal_name, program_output=proc.stdout[-2000:] or None,
            program_stderr="\n".join(ln for ln in proc.stderr.splitlines()
                                     if not ln.startswith("kernelscope-trace:"))[-2000:] or None)
        if proc.timed_out:
            result.status = "timed-out"
            result.explanation = (f"The program ran past its {req.timeout_s:.0f} s limit and was stopped; the "
                                  "summary covers what was recorded before (CUPTI flushes at exit, so often nothing).")
            result.fixes = ["raise timeout_s, or trace fewer iterations"]
        elif proc.returncode != 0:
            result.status = "program-failed"
            result.explanation = (f"The program {proc.describe_failure()}; the summary covers what was recorded "
                                  "before it ended.")
            result.fixes = ["run it with the run tool to see the failure; fix it, then trace again"]
        if tl is None or not tl.ops:
            if result.status == "ok":
                result.status = "no-activity" if tl is not None else "tracer-error"
                result.explanation = (
                    "The program ran but no GPU activity was recorded: it launched no kernels or copies"
                    if tl is not None else
                    "The tracer wrote nothing: it was not loaded into the program (static CUDA runtime builds "
                    "load it too; a program that never initializes CUDA does not)")
                result.fixes = ["check that the program uses the GPU (the run tool shows its output)",
                                "for eval mode, check that ModelNew runs its work on CUDA tensors"]
            result.wall_s = round(time.monotonic() - t_all, 3)
            return result
        result.notes += tl.notes
        if tl.dropped:
            result.notes.append(f"CUPTI dropped {tl.dropped} records (buffers full): counts are lower bounds")
        summary, _facts, findings = diagnose_timeline(tl, gap_threshold_ns=req.gap_threshold_us * 1e3,
                                                      overrides=req.overrides)
        result.summary, result.findings = summary, findings
        result.trace_id = store_trace(tl, target=display)
    result.wall_s = round(time.monotonic() - t_all, 3)
    return result
