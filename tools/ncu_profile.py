"""ncu-profile: one Nsight Compute capture with the sections, metrics and kernel filters a client chooses,
in the sandbox, with per-launch classes and findings and the report kept as an artifact.

The capture itself is :func:`kernelscope.measure.capture.run_capture`; the target is prepared as for
analyze (:func:`kernelscope.tools.analyze.prepare_target`).
"""

from __future__ import annotations

import threading
import time

from kernelscope.config import Settings, ensure_dirs
from kernelscope.heuristics.pipeline import diagnose_kernels
from kernelscope.measure.capture import harness_notes, ncu_binary, run_capture, store_report, validate_options
from kernelscope.measure.ncu import load_profile
from kernelscope.models import NcuProfileResult
from kernelscope.models.requests import ProfileRequest
from kernelscope.sandbox.workspace import Workspace
from kernelscope.tools.analyze import WaitCallback, gpu_lease, prepare_target
from kernelscope.tools.run import job_env

MAX_KERNELS_IN_ANSWER = 20


def ncu_profile(req: ProfileRequest, settings: Settings | None = None, *, cancel: threading.Event | None = None,
                on_wait: WaitCallback | None = None) -> NcuProfileResult:
    s = ensure_dirs(settings)
    validate_options(req)
    if not req.sections and not req.section_set and not req.metrics:
        req = req.model_copy(update={"section_set": "detailed"})
    ncu_binary()
    with Workspace(prefix="ncu-") as ws:
        prep = prepare_target(req, ws.path, s)
        with gpu_lease(req.gpu, cancel, on_wait) as lease:
            env = job_env(ws.path, s.home, lease, candidate=prep.candidate)
            cap, report = run_capture(prep, req, ws=ws.path, env=env, name="profile", timeout_s=req.timeout_s,
                                      cancel=cancel)
        result = NcuProfileResult(status=cap.status, explanation=cap.explanation, fixes=cap.fixes, capture=cap,
                                  mode=req.mode, gpu_wait_s=lease.waited_s, notes=harness_notes(ws.path))
        if report is None:
            return result
        t0 = time.monotonic()
        profile = load_profile(report, top_lines=req.top_lines)
        result.report_id = store_report(report, target=prep.display, stage="profile")
        result.parse_s = round(time.monotonic() - t0, 3)
    result.kernels_total = len(profile.kernels)
    result.kernels = diagnose_kernels(profile.kernels[:MAX_KERNELS_IN_ANSWER])
    return result
