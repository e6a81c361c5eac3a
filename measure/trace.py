"""The trace stage's capture: a program's timeline through the CUPTI tracer or Nsight Systems, read back,
summarized with the system rules' findings, and kept as a Chrome/Perfetto artifact.

The CUPTI activity tracer (``measure/native/cupti_trace.cpp``) is injected with ``CUDA_INJECTION64_PATH``
(NVTX ranges reach it through ``NVTX_INJECTION64_PATH``) and works for any CUDA process; ``nsys profile
--export sqlite`` is read through the documented SQLite schema. Both run through the sandbox.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from kernelscope.artifacts import ArtifactMeta, content_id, get_store
from kernelscope.config import Settings
from kernelscope.errors import NotAvailable
from kernelscope.heuristics.pipeline import Overrides, system_findings
from kernelscope.measure.cupti import build_tracer, cupti_paths, tracer_env
from kernelscope.measure.summary import GAP_THRESHOLD_NS, summarize
from kernelscope.measure.timeline import Timeline, TraceFacts, chrome_trace, load_cupti, load_nsys_sqlite
from kernelscope.models import Finding, TraceSummary
from kernelscope.sandbox.process import Limits, ProcessResult, run_process
from kernelscope.toolkit.toolchain import ToolMissing, require


class TimelineDiagnosis(NamedTuple):
    """A timeline's summary, the facts the system rules read, and their ranked findings."""

    summary: TraceSummary
    facts: TraceFacts
    findings: list[Finding]


@dataclass(frozen=True)
class Traced:
    """What the trace stage gives analyze: the diagnosis of the timeline, and the timeline."""

    summary: TraceSummary
    facts: TraceFacts
    findings: list[Finding]
    timeline: Timeline


class TraceRun(NamedTuple):
    """One traced run: the process, its timeline (None where nothing was written) and the tool's messages."""

    proc: ProcessResult
    timeline: Timeline | None
    notes: list[str]


def tracer_available() -> bool:
    """Whether the CUPTI tracer can be built here (CUPTI headers and library, nvcc)."""
    try:
        require("nvcc")
        cupti_paths()
    except (ToolMissing, NotAvailable):
        return False
    return True


def run_cupti(argv: list[str], ws: Path, env: Mapping[str, str], timeout_s: float, s: Settings,
              cancel: threading.Event | None) -> TraceRun:
    """Run ``argv`` with the CUPTI tracer injected."""
    lib = build_tracer(s)
    tdir = ws / "trace"
    tdir.mkdir(exist_ok=True)
    for old in tdir.glob("trace-*.jsonl"):
        old.unlink()
    proc = run_process(argv, cwd=ws, env={**env, **tracer_env(lib, tdir)}, cancel=cancel,
                       limits=Limits(wall_s=timeout_s, output_bytes=256 * 1024, isolate_network=True))
    notes = [ln.strip() for ln in proc.stderr.splitlines() if ln.startswith("kernelscope-trace:")][:10]
    tl = load_cupti(tdir) if any(tdir.glob("trace-*.jsonl")) else None
    return TraceRun(proc, tl, notes)


def run_nsys(argv: list[str], ws: Path, env: Mapping[str, str], timeout_s: float,
             cancel: threading.Event | None) -> TraceRun:
    """Run ``argv`` under ``nsys profile`` and read its SQLite export."""
    nsys = require("nsys")
    out = ws / "trace"
    cmd = [str(nsys), "profile", "--trace", "cuda,nvtx,osrt", "--sample", "none", "--cpuctxsw", "none",
           "--output", str(out), "--force-overwrite", "true", "--export", "sqlite", *argv]
    proc = run_process(cmd, cwd=ws, env=env, cancel=cancel,
                       limits=Limits(wall_s=timeout_s, output_bytes=256 * 1024, isolate_network=True))
    db = out.with_suffix(".sqlite")
    notes = [ln.strip() for ln in (proc.stdout + proc.stderr).splitlines()
             if "error" in ln.lower() and "nsys" in ln.lower()][:5]
    return TraceRun(proc, load_nsys_sqlite(db) if db.is_file() else None, notes)


def diagnose_timeline(tl: Timeline, *, gap_threshold_ns: float = GAP_THRESHOLD_NS,
                      overrides: Overrides | None = None) -> TimelineDiagnosis:
    """Summary, facts and ranked system findings of a timeline (raises ValueError without GPU activity)."""
    summary, facts = summarize(tl, gap_threshold_ns=gap_threshold_ns)
    return TimelineDiagnosis(summary, facts, system_findings(summary, facts, overrides))


def store_trace(tl: Timeline, *, target: str) -> str:
    """Keep a timeline as a Chrome/Perfetto JSON artifact (role ``trace``); returns its id."""
    data = json.dumps(chrome_trace(tl), separators=(",", ":")).encode()
    aid = content_id({"trace": hashlib.sha256(data).hexdigest()})
    art = get_store().put(ArtifactMeta(id=aid, kind="trace", source_name="trace.json",
                                       extra={"target": target, "source": tl.source}),
                          {"trace": ("trace.json", data)})
    return art.id
