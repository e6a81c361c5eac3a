"""Nsight Compute captures: one ``ncu`` run of a prepared target inside the sandbox, and its account.

A capture runs ``ncu`` on a target inside the sandbox (its own workspace, process group, wall-clock limit
and the GPU lease's environment): either a compiled program (an executable artifact), or an eval-mode
problem, where the harness builds the candidate, runs it once to warm up, and opens the profiler range
(``cudaProfilerStart``) only around the candidate's own forward call, so the harness' and the reference's
kernels are never profiled. ``--clock-control none`` is the default, so the kernel runs at the clocks it
would run at in production; builds from the compile tool carry ``-lineinfo`` and the report imports the
source, so per-line counters name source lines. Failures come back explained (:func:`diagnose_capture`):
counters not permitted, a time-out, filters that matched nothing, a program that crashed.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, Protocol

from pydantic import BaseModel, Field

from kernelscope.artifacts import ArtifactMeta, content_id, get_store
from kernelscope.errors import InputError, NotAvailable
from kernelscope.models import NcuCapture
from kernelscope.sandbox.process import Limits, run_process
from kernelscope.toolkit.toolchain import ToolMissing, require

SECTION_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,79}$")
METRIC_RE = re.compile(r"^[A-Za-z0-9_:.]{1,200}$")
SETS = ("basic", "detailed", "full", "roofline")
_AVAILABLE = re.compile(r"^\s*\d+\.\s+(\S.*)$")


class CaptureOptions(Protocol):
    """What a capture reads of its options (the ncu_profile and analyze requests' NcuOptions)."""

    sections: list[str]
    section_set: Literal["basic", "detailed", "full", "roofline"] | None
    metrics: list[str]
    kernel_regex: str | None
    launch_skip: int
    launch_count: int | None
    filter_mode: Literal["global", "per-launch-config"]
    clock_control: Literal["none", "base"]
    cache_control: Literal["all", "none"]
    import_source: bool


class Prepared(BaseModel):
    """A target made ready in a workspace: the command ncu launches, and its extra ncu flags."""

    argv: list[str]
    ncu_flags: list[str] = Field(default_factory=list)
    binary: str | None = None  # the executable, for SASS
    artifact_id: str | None = None
    display: str
    candidate: str | None = None  # eval mode: the candidate's source (its extension builds' cache key)


def validate_options(opts: CaptureOptions) -> None:
    """Sections, metrics and the kernel filter, refused by name where ncu would misread them."""
    for s in opts.sections:
        if not SECTION_RE.match(s):
            raise InputError(f"Section {s[:60]!r} refused: section identifiers are letters, digits and "
                             "underscores (see `ncu --list-sections`).")
    for m in opts.metrics:
        if not METRIC_RE.match(m):
            raise InputError(f"Metric {m[:60]!r} refused: metric names are letters, digits, '_', '.' and ':'.")
    if opts.kernel_regex is not None:
        try:
            re.compile(opts.kernel_regex)
        except re.error as e:
            raise InputError(f"kernel_regex={opts.kernel_regex!r} is not a valid regular expression: {e}.") from None
        if "\n" in opts.kernel_regex or "\x00" in opts.kernel_regex:
            raise InputError("kernel_regex must be one line.")


def ncu_binary() -> Path:
    """The ncu command; NotAvailable (with the fix) where it is missing."""
    try:
        return require("ncu")
    except ToolMissing as e:
        raise NotAvailable("Profiling with Nsight Compute", "the ncu command was not found", e.note) from None


def _ncu_messages(log: str) -> list[str]:
    return [ln.strip() for ln in log.splitlines() if ln.startswith(("==WARNING==", "==ERROR=="))][:20]


def ncu_flags(opts: CaptureOptions, ws: Path, kernel_id: str | None = None) -> list[str]:
    """ncu's flags for these options; ``kernel_id`` (ncu's --kernel-id) replaces the name filter and skip."""
    flags = ["--target-processes", "all", "--clock-control", opts.clock_control,
             "--cache-control", opts.cache_control]
    if opts.import_source:
        flags += ["--import-source", "yes"]
    if opts.section_set:
        flags += ["--set", opts.section_set]
    for sec in opts.sections:
        flags += ["--section", sec]
    if opts.metrics:
        flags += ["--metrics", ",".join(opts.metrics)]
        if not opts.sections and not opts.section_set:
            # named metrics only: an empty section folder spares ncu loading every section file and its
            # Python rules at start-up (a fixed cost of every run)
            (ws / "no-sections").mkdir(exist_ok=True)
            flags += ["--section-folder", str(ws / "no-sections")]
    if kernel_id is not None:
        flags += ["--kernel-name-base", "mangled", "--kernel-id", kernel_id]
    else:
        if opts.kernel_regex:
            flags += ["--kernel-name", f"regex:{opts.kernel_regex}"]
        if opts.launch_skip:
            flags += ["--launch-skip", str(opts.launch_skip)]
    if opts.launch_count:
        flags += ["--launch-count", str(opts.launch_count)]
    if opts.filter_mode != "global":
        flags += ["--filter-mode", opts.filter_mode]
    return flags


def run_capture(prep: Prepared, opts: CaptureOptions, *, ws: Path, env: Mapping[str, str], name: str,
                timeout_s: float, cancel: threading.Event | None = None,
                kernel_id: str | None = None) -> tuple[NcuCapture, Path | None]:
    """One ncu run in the job environment ``env``. Returns the capture's account and the report path (None
    when there is none)."""
    ncu = ncu_binary()
    report = ws / f"{name}.ncu-rep"
    log_path = ws / f"{name}.log"
    flags = ncu_flags(opts, ws, kernel_id) + prep.ncu_flags
    argv = [str(ncu), "--export", str(ws / name), "--force-overwrite", "--log-file", str(log_path), *flags,
            *prep.argv]
    proc = run_process(argv, cwd=ws, env=env, cancel=cancel,
                       limits=Limits(wall_s=timeout_s, output_bytes=256 * 1024, isolate_network=True,
                                     file_size_bytes=4 << 30))
    log = log_path.read_text(errors="replace") if log_path.is_file() else ""
    have = report.is_file() and report.stat().st_size > 0
    cap = NcuCapture(name=name, command=["ncu", *flags, prep.display], wall_s=round(proc.wall_s, 3),
                     exit_status=proc.returncode, timed_out=proc.timed_out, messages=_ncu_messages(log),
                     report_bytes=report.stat().st_size if have else None)
    cap.status, cap.explanation, cap.fixes = diagnose_capture(proc.timed_out, proc.returncode, proc.signal_name,
                                                              log, proc.stderr, have, prep, timeout_s)
    if proc.stdout:
        cap.program_output = proc.stdout[-2000:]
    if proc.stderr:
        cap.program_stderr = proc.stderr[-2000:]
    return cap, report if have else None


def diagnose_capture(timed_out: bool, rc: int | None, sig: str | None, log: str, stderr: str, have: bool,
                     prep: Prepared, timeout_s: float) -> tuple[Any, str | None, list[str]]:
    """The capture's status, its explanation and the fixes, from how ncu ended and what it logged."""
    text = log + "\n" + (stderr or "")
    if "ERR_NVGPUCTRPERM" in text:
        return ("counters-not-permitted",
                "The GPU's performance counters are restricted to administrators on this host "
                "(ERR_NVGPUCTRPERM), so Nsight Compute could not read them.",
                ["Run the server as a user allowed to profile (root, or CAP_SYS_ADMIN in a container: "
                 "--cap-add SYS_ADMIN).",
                 "Or allow all users: options nvidia NVreg_RestrictProfilingToAdminUsers=0 in "
                 "/etc/modprobe.d, then reload the driver (see NVIDIA's ERR_NVGPUCTRPERM page).",
                 "`kernelscope doctor` checks this."])
    if timed_out:
        return ("timed-out",
                f"The profiled run exceeded its {timeout_s:.0f} s limit and was killed. Kernel replay multiplies run "
                "time by the number of passes per profiled launch.",
                ["Profile fewer launches (launch_count, kernel_regex, launch_skip).",
                 "Capture fewer sections (or the two-stage analyze tool).", "Raise timeout_s."])
    if "No kernels were profiled" in text:
        return _no_kernels(log, prep)
    if sig is not None and not have:
        return ("program-failed", f"The profiled program died with {sig} before a report was written.",
                ["Run it with the run tool (program mode) to see the crash; fix it, then profile."])
    if not have:
        errs = [ln for ln in log.splitlines() if ln.startswith("==ERROR==")]
        return ("ncu-error",
                "Nsight Compute wrote no report" + (f": {errs[0][10:].strip()}" if errs else
                                                     f" (exit status {rc})") + ".",
                ["Read the messages below; `kernelscope doctor` checks the ncu installation."])
    if rc not in (0, None):
        return ("ok", f"The report was written, but the program exited with status {rc}: its results may be "
                      "partial.", [])
    return "ok", None, []


def _no_kernels(log: str, prep: Prepared) -> tuple[Any, str, list[str]]:
    """Why Nsight Compute profiled no kernels: the filter, the candidate, or the program."""
    avail = []
    grab = False
    for ln in log.splitlines():
        if ln.startswith("Available Kernels"):
            grab = True
            continue
        if grab:
            m = _AVAILABLE.match(ln)
            if not m:
                break
            avail.append(m.group(1).strip())
    expl = "Nsight Compute profiled no kernels"
    fixes = []
    if avail:
        expl += f": the filter matched none of the kernels launched ({', '.join(avail[:20])})"
        fixes.append("Fix kernel_regex to match one of the names listed (function names, without arguments).")
        fixes.append("Lower launch_skip if it skips past every matching launch.")
    elif prep.ncu_flags:
        expl += ": the candidate's forward call launched no CUDA kernel inside the profiled range"
        fixes.append("Make sure ModelNew.forward runs its kernels on the GPU (not on the CPU, not cached).")
    else:
        expl += ": the program launched no kernels (or exited before it did)"
        fixes.append("Check the program's exit status and output below; it must launch kernels on the GPU.")
    fixes.append("Programs that launch kernels from child processes are covered (--target-processes all).")
    return "no-kernels", expl + ".", fixes


def harness_notes(ws: Path) -> list[str]:
    """What the eval harness said about the profiled candidate (eval mode), as notes."""
    path = ws / "result.json"
    if not path.is_file():
        return []
    try:
        res = json.loads(path.read_text())
    except ValueError:
        return []
    notes = list(res.get("notes") or [])
    if res.get("status") not in (None, "ok"):
        notes.insert(0, f"the candidate failed in the profiled run: {res.get('error')}")
    return [str(n)[:500] for n in notes][:10]


def store_report(path: Path, *, target: str, stage: str) -> str:
    """Keep an Nsight Compute report as an artifact (kind ``ncu-report``, by content); returns its id."""
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    aid = content_id({"ncu-report": digest})
    art = get_store().put(ArtifactMeta(id=aid, kind="ncu-report", source_name=path.name,
                                       extra={"target": target, "stage": stage}),
                          {"report": ("report.ncu-rep", path)})
    return art.id
