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

import sys
import threading
import time
from pathlib import Path
from typing import Literal

from kernelscope.config import Settings, ensure_dirs
from kernelscope.errors import InputError, NotAvailable
from kernelscope.measure.capture import harness_notes
from kernelscope.measure.timeline import Timeline
from kernelscope.measure.trace import diagnose_timeline, run_cupti, run_nsys, store_trace
from kernelscope.models import TraceCapture, TraceResult
from kernelscope.models.requests import Backend, TraceRequest
from kernelscope.sandbox.gpu import gpu_pool
from kernelscope.sandbox.workspace import Workspace
from kernelscope.tools import capabilities as caps
from kernelscope.tools.analyze import WaitCallback, check_overrides, prepare_target
from kernelscope.tools.run import _read_source, job_env

__all__ = ["TraceRequest", "choose_backend", "diagnose_timeline", "trace"]


# ------------------------------------------------------------------------------------ backends
def choose_backend(requested: Backend) -> tuple[Literal["nsys", "cupti"], str | None]:
    """The backend to use, and why CUPTI stands in for nsys (None when nothing was substituted)."""
    if requested == "cupti":
        return "cupti", None
    ok, note = caps.check_nsys_reports(caps.tool_info("nsys"), probe=False)  # a missing nsys is a False too
    if ok is False:
        if requested == "nsys":
            raise NotAvailable("Tracing with Nsight Systems", note.split("; fix: ")[0],
                               "install Nsight Systems and put its nsys on PATH, or use backend='cupti'")
        return "cupti", f"Nsight Systems cannot be used here: {note}"
    return "nsys", None


def _prepare(req: TraceRequest, ws: Path, s: Settings) -> tuple[list[str], str, str | None]:
    if req.trace_mode == "script":
        if any(v is not None for v in (req.artifact_id, req.reference, req.reference_path, req.candidate,
                                       req.candidate_path)):
            raise InputError("Give one target: `script`/`script_path`, `artifact_id`, or a reference and candidate.")
        src = _read_source(req.script, req.script_path, "script", s)
        (ws / "script.py").write_text(src)
        return [sys.executable, "-s", str(ws / "script.py"), *req.args], "Python script", None
    prep = prepare_target(req, ws, s)  # eval: the harness opens the profiler range around `calls` forward calls
    return prep.argv, prep.display, prep.candidate  # the candidate: its extension builds, from the cache


def trace(req: TraceRequest, settings: Settings | None = None, *, cancel: threading.Event | None = None,
          on_wait: WaitCallback | None = None) -> TraceResult:
    check_overrides(req.overrides)
    s = ensure_dirs(settings)
    backend, fallback = choose_backend(req.backend)
    if len(gpu_pool()) == 0:
        raise NotAvailable("Tracing a CUDA program", "no GPU is visible to this server",
                           "run kernelscope on a host with an NVIDIA GPU")
    t_all = time.monotonic()
    result = TraceResult(status="ok", mode=req.trace_mode, source=backend, fallback=fallback)
    with Workspace(prefix="trace-") as ws:
        argv, display, candidate = _prepare(req, ws.path, s)
        with gpu_pool().lease(req.gpu, cancel=cancel, on_wait=on_wait) as lease:
            result.gpu_wait_s = lease.waited_s
            env = job_env(ws.path, s.home, lease, candidate=candidate)
            tl: Timeline | None = None
            if backend == "nsys":
                proc, tl, notes = run_nsys(argv, ws.path, env, req.timeout_s, cancel)
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
