"""ncu-profile and analyze: Nsight Compute captures through the sandbox, and the two-stage analysis.

A capture runs ``ncu`` on a target inside the sandbox (its own workspace, process group, wall-clock
limit and GPU lease): either a compiled program (an executable artifact), or an eval-mode problem,
where the harness builds the candidate, runs it once to warm up, and opens the profiler range
(``cudaProfilerStart``) only around the candidate's own forward call, so the harness' and the
reference's kernels are never profiled. ``--clock-control none`` is the default, so the kernel runs at
the clocks it would run at in production; builds from the compile tool carry ``-lineinfo`` and the
report imports the source, so per-line counters name source lines.

``analyze`` is the two-stage flow: a light measurement (speed of light, launch statistics, occupancy and
the roofline counters) of each kernel and launch configuration, a bottleneck class per kernel, then a
deep measurement of the kernels that take the most time; every rule runs over the merged profile, with
SASS and ptxas evidence where the target is a compiled artifact. For a program both are measured in its
own run by the CUPTI collector of :mod:`kernelscope.measure.collector` (the deep stage: every rule family's
metrics, the stall reasons and the source passes of the first launches; the class chooses the rule
families), with a CUPTI trace after it when it saw many launches. Eval-mode targets, ``light="ncu"``
and programs the collector cannot measure get two Nsight Compute captures instead (after a trace, for
programs), the deep one with the sections and rule metrics the class calls for.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from kernelscope.config import Settings, ensure_dirs
from kernelscope.errors import InputError, NotAvailable
from kernelscope.models import (
    AnalyzeResult,
    AnalyzeStage,
    Finding,
    KernelDiagnosis,
    KernelProfile,
    NcuCapture,
    NcuProfileResult,
    Profile,
)
from kernelscope.sandbox.gpu import Lease, gpu_pool
from kernelscope.sandbox.process import Limits, run_process
from kernelscope.sandbox.workspace import Workspace
from kernelscope.toolchain import ToolMissing, require

WaitCallback = Callable[[int, float], None]

SECTION_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,79}$")
METRIC_RE = re.compile(r"^[A-Za-z0-9_:.]{1,200}$")
SETS = ("basic", "detailed", "full", "roofline")
MAX_KERNELS_IN_ANSWER = 20

# ---------------------------------------------------------------------------------------- requests
class NcuOptions(BaseModel):
    """What to capture and which launches."""

    sections: list[str] = Field(default_factory=list, max_length=32,
                                description="Nsight Compute section identifiers, e.g. SpeedOfLight, "
                                            "MemoryWorkloadAnalysis, WarpStateStats, SourceCounters.")
    section_set: Literal["basic", "detailed", "full", "roofline"] | None = Field(
        None, description="A predefined set (ncu --set). Default when neither sections nor set nor metrics are "
                          "given: 'detailed'.")
    metrics: list[str] = Field(default_factory=list, max_length=256, description="Extra metric names.")
    kernel_regex: str | None = Field(None, max_length=1000,
                                     description="Only kernels whose (function) name matches this regex.")
    launch_skip: int = Field(0, ge=0, le=1_000_000, description="Matching launches to skip first.")
    launch_count: int | None = Field(None, ge=1, le=10_000, description="Matching launches to profile "
                                                                         "(default: all, up to 10000).")
    filter_mode: Literal["global", "per-launch-config"] = Field(
        "global", description="per-launch-config: launch_skip and launch_count count the launches of each launch "
                              "configuration (kernel, grid, block, shared memory) apart; launch_count=1 then "
                              "profiles the first launch of every distinct configuration.")
    clock_control: Literal["none", "base"] = Field("none", description="none: the GPU's own clocks (default); "
                                                                      "base: lock to base clock (ncu's default).")
    cache_control: Literal["all", "none"] = Field("all", description="all: flush caches before each replay pass.")
    import_source: bool = Field(True, description="Embed the CUDA source so lines show in the report.")


class ProfileTarget(BaseModel):
    """What runs under ncu: a compiled program, or an eval-mode reference/candidate pair."""

    artifact_id: str | None = Field(None, description="program: an executable artifact from compile.")
    args: list[str] = Field(default_factory=list, max_length=64)
    reference: str | None = None
    reference_path: str | None = None
    candidate: str | None = None
    candidate_path: str | None = None
    seed: int = 42
    calls: int = Field(1, ge=1, le=100, description="eval: candidate forward calls inside the profiled range.")
    timeout_s: float = Field(300.0, gt=0, le=3600)
    gpu: int | None = Field(None, ge=0)

    @property
    def mode(self) -> Literal["program", "eval"]:
        return "program" if self.artifact_id is not None else "eval"


class ProfileRequest(ProfileTarget, NcuOptions):
    top_lines: int = Field(10, ge=0, le=200, description="Source lines kept per kernel.")


class AnalyzeRequest(ProfileTarget):
    kernel_regex: str | None = Field(None, max_length=1000)
    launch_skip: int = Field(0, ge=0, le=1_000_000)
    launch_count: int | None = Field(512, ge=1, le=10_000, description="Launches profiled by the light stage.")
    deep_kernels: int = Field(3, ge=1, le=20, description="Kernels (by total time) that get the deep stage.")
    clock_control: Literal["none", "base"] = "none"
    sass: bool = Field(True, description="Add SASS statistics and ptxas evidence for artifacts.")
    trace: Literal["auto", "always", "never"] = Field(
        "auto", description="The CUPTI trace stage (the timeline of every launch): auto runs it after a measuring "
                            "run that saw many launches (16 or more), and first for programs Nsight Compute "
                            "measures (it counts and times every launch, so the light stage needs only each "
                            "kernel's first); always runs it in every case.")
    light: Literal["auto", "ncu"] = Field(
        "auto", description="What measures a program's two stages: auto uses the CUPTI collector in the program's "
                            "own run (light metrics of each kernel and launch configuration; deep metrics, stall "
                            "reasons and source lines of their first launches; no profiler process) and Nsight "
                            "Compute where the collector cannot or for eval-mode targets; ncu always uses Nsight "
                            "Compute.")
    overrides: dict[str, dict[str, float]] = Field(default_factory=dict,
                                                   description="Rule thresholds to override: {rule: {name: value}}.")


# ---------------------------------------------------------------------------------------- capture
def _validate(opts: NcuOptions) -> None:
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


def _ncu_binary() -> Path:
    try:
        return require("ncu")
    except ToolMissing as e:
        raise NotAvailable("Profiling with Nsight Compute", "the ncu command was not found", e.note) from None


class Prepared(BaseModel):
    """A target made ready in a workspace: the command ncu launches, and its extra ncu flags."""

    argv: list[str]
    ncu_flags: list[str] = Field(default_factory=list)
    binary: str | None = None  # the executable, for SASS
    artifact_id: str | None = None
    display: str


def prepare_target(t: ProfileTarget, ws: Path, s: Settings) -> Prepared:
    from kernelscope.tools.run import _read_source, harness_argv, program_artifact, stage_program

    if t.artifact_id is not None:
        if any(v is not None for v in (t.reference, t.reference_path, t.candidate, t.candidate_path)):
            raise InputError("Give either `artifact_id` (program mode) or a reference and candidate (eval mode), "
                             "not both.")
        art, exe = program_artifact(t.artifact_id, t.args, otherwise=", or profile kernels in eval mode.")
        return Prepared(argv=[str(stage_program(exe, ws)), *t.args], binary=str(exe), artifact_id=art.id,
                        display=f"artifact {art.id} ({art.meta.source_name or 'program'})")
    ref = _read_source(t.reference, t.reference_path, "reference", s)
    cand = _read_source(t.candidate, t.candidate_path, "candidate", s)
    (ws / "reference.py").write_text(ref)
    (ws / "candidate.py").write_text(cand)
    cfg = {"profile_only": True, "reference_path": str(ws / "reference.py"),
           "candidate_path": str(ws / "candidate.py"), "device": "cuda:0", "seed": t.seed, "profile_calls": t.calls}
    (ws / "config.json").write_text(json.dumps(cfg))
    return Prepared(argv=harness_argv(ws / "config.json", ws / "result.json"),
                    ncu_flags=["--profile-from-start", "off"], display="eval candidate (ModelNew forward)")


_AVAILABLE = re.compile(r"^\s*\d+\.\s+(\S.*)$")


def _ncu_messages(log: str) -> list[str]:
    return [ln.strip() for ln in log.splitlines() if ln.startswith(("==WARNING==", "==ERROR=="))][:20]


def run_capture(prep: Prepared, opts: NcuOptions, *, ws: Path, lease: Lease, s: Settings, name: str,
                timeout_s: float, cancel: threading.Event | None = None,
                kernel_id: str | None = None) -> tuple[NcuCapture, Path | None]:
    """One ncu run. Returns the capture's account and the report path (None when there is none)."""
    from kernelscope.tools.run import job_env

    ncu = _ncu_binary()
    report = ws / f"{name}.ncu-rep"
    log_path = ws / f"{name}.log"
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
    flags += prep.ncu_flags
    argv = [str(ncu), "--export", str(ws / name), "--force-overwrite", "--log-file", str(log_path), *flags,
            *prep.argv]
    env = job_env(ws, s.home, lease)
    proc = run_process(argv, cwd=ws, env=env, cancel=cancel,
                       limits=Limits(wall_s=timeout_s, output_bytes=256 * 1024, isolate_network=True,
                                     file_size_bytes=4 << 30))
    log = log_path.read_text(errors="replace") if log_path.is_file() else ""
    have = report.is_file() and report.stat().st_size > 0
    cap = NcuCapture(name=name, command=["ncu", *flags, prep.display], wall_s=round(proc.wall_s, 3),
                     exit_status=proc.returncode, timed_out=proc.timed_out, messages=_ncu_messages(log),
                     report_bytes=report.stat().st_size if have else None)
    cap.status, cap.explanation, cap.fixes = _diagnose(proc.timed_out, proc.returncode, proc.signal_name, log,
                                                       proc.stderr, have, prep, timeout_s)
    if proc.stdout:
        cap.program_output = proc.stdout[-2000:]
    if proc.stderr:
        cap.program_stderr = proc.stderr[-2000:]
    return cap, report if have else None


def _diagnose(timed_out: bool, rc: int | None, sig: str | None, log: str, stderr: str, have: bool, prep: Prepared,
              timeout_s: float) -> tuple[Any, str | None, list[str]]:
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


def _store_report(path: Path, *, target: str, stage: str) -> str:
    from kernelscope.artifacts import ArtifactMeta, content_id, get_store

    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    aid = content_id({"ncu-report": digest})
    art = get_store().put(ArtifactMeta(id=aid, kind="ncu-report", source_name=path.name,
                                       extra={"target": target, "stage": stage}),
                          {"report": ("report.ncu-rep", path)})
    return art.id


# ---------------------------------------------------------------------------------------- ncu_profile
def _lease(gpu: int | None, cancel: threading.Event | None, on_wait: WaitCallback | None) -> Any:
    if len(gpu_pool()) == 0:
        raise NotAvailable("Profiling kernels", "no GPU is visible to this server",
                           "run kernelscope on a host with an NVIDIA GPU; recorded reports can still be read "
                           "with bottleneck_classify and compare")
    return gpu_pool().lease(gpu, cancel=cancel, on_wait=on_wait)


# which rule families explain a class: among findings of equal severity, these lead
CLASS_FAMILIES: dict[str, set[str]] = {
    "memory-bound": {"memory"},
    "compute-bound": {"compute", "tensor", "control", "instructions"},
    "latency-bound": {"latency", "stalls", "memory", "control"},
    "occupancy-limited": {"occupancy", "launch"},
    "launch/tail-limited": {"launch", "occupancy"},
}


def rank_for_class(findings: list[Finding], cls: str) -> list[Finding]:
    """Most severe first; at equal severity, findings that explain the kernel's bottleneck class (the
    limiter the roofline names) before the rest, then by estimated impact."""
    from kernelscope.heuristics.registry import SEVERITY_RANK

    fams = CLASS_FAMILIES.get(cls)
    return sorted(findings, key=lambda f: (SEVERITY_RANK.get(f.severity, 9),
                                           0 if fams is None or f.family in fams else 1, -(f.impact or 0.0)))


def diagnose_kernels(kernels: list[KernelProfile], *, context: dict[str, Any] | None = None,
                     overrides: dict[str, dict[str, float]] | None = None,
                     extra: dict[str, list[Finding]] | None = None) -> list[KernelDiagnosis]:
    """Class and ranked findings for each kernel (ncu rules, plus per-kernel extra findings)."""
    from kernelscope.heuristics import load_all, run_rules
    from kernelscope.heuristics.registry import merge
    from kernelscope.tools.classify import classify

    load_all()
    out = []
    for k in kernels:
        found = run_rules("ncu", k, overrides=overrides, context=context)
        bottleneck = classify(k)
        found = rank_for_class(merge(found + (extra or {}).get(k.mangled_name, [])), bottleneck.cls)
        out.append(KernelDiagnosis(
            id=k.id, name=k.name, mangled_name=k.mangled_name, duration_ns=k.duration_ns, grid_size=k.grid_size,
            block_size=k.block_size, registers_per_thread=k.registers_per_thread, bottleneck=bottleneck,
            findings=found, top_stalls=dict(list(k.stall_reasons.items())[:4]),
            hot_lines=[s.label for s in k.source_lines[:3]],
            ncu_rule_titles=[r.title for r in k.ncu_rules if r.title and r.type in ("warning", "optimization")]))
    return out


def ncu_profile(req: ProfileRequest, settings: Settings | None = None, *, cancel: threading.Event | None = None,
                on_wait: WaitCallback | None = None) -> NcuProfileResult:
    from kernelscope.measure.ncu import load_profile

    s = ensure_dirs(settings)
    _validate(req)
    if not req.sections and not req.section_set and not req.metrics:
        req = req.model_copy(update={"section_set": "detailed"})
    _ncu_binary()
    with Workspace(prefix="ncu-") as ws:
        prep = prepare_target(req, ws.path, s)
        with _lease(req.gpu, cancel, on_wait) as lease:
            cap, report = run_capture(prep, req, ws=ws.path, lease=lease, s=s, name="profile",
                                      timeout_s=req.timeout_s, cancel=cancel)
        result = NcuProfileResult(status=cap.status, explanation=cap.explanation, fixes=cap.fixes, capture=cap,
                                  mode=req.mode, gpu_wait_s=lease.waited_s, notes=harness_notes(ws.path))
        if report is None:
            return result
        t0 = time.monotonic()
        profile = load_profile(report, top_lines=req.top_lines)
        result.report_id = _store_report(report, target=prep.display, stage="profile")
        result.parse_s = round(time.monotonic() - t0, 3)
    result.kernels_total = len(profile.kernels)
    result.kernels = diagnose_kernels(profile.kernels[:MAX_KERNELS_IN_ANSWER])
    return result


# ---------------------------------------------------------------------------------------- analyze
# Stage 1 names its metrics instead of sections: speed of light, launch configuration, occupancy and
# the roofline counters, for every launch, in few replay passes and a few kB per launch (the three
# sections cost ~0.33 s and ~50 kB per launch on an H100; a program with hundreds of launches felt it).
# The top kernels get the SpeedOfLight, LaunchStats and Occupancy sections in stage 2, with ncu's advice.
STAGE1_SECTIONS: list[str] = []
STAGE1_METRICS = [
    "gpu__time_duration.sum", "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
    "launch__grid_size", "launch__block_size", "launch__registers_per_thread", "launch__shared_mem_per_block_static",
    "launch__shared_mem_per_block_dynamic", "launch__waves_per_multiprocessor", "launch__occupancy_limit_registers",
    "launch__occupancy_limit_shared_mem", "launch__occupancy_limit_blocks", "launch__occupancy_limit_warps",
    "sm__warps_active.avg.pct_of_peak_sustained_active", "sm__maximum_warps_per_active_cycle_pct",
    "device__attribute_multiprocessor_count", "device__attribute_display_name",
    "dram__bytes_read.sum", "dram__bytes_write.sum", "smsp__cycles_elapsed.avg",
    "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum.per_cycle_elapsed",
    "smsp__sass_thread_inst_executed_op_fadd_pred_on.sum.per_cycle_elapsed",
    "smsp__sass_thread_inst_executed_op_fmul_pred_on.sum.per_cycle_elapsed"]
STAGE2_ALWAYS = ["SpeedOfLight", "LaunchStats", "Occupancy"]
# the class decides the deep sections and which rule families' metrics are collected
STAGE2: dict[str, tuple[list[str], list[str]]] = {
    "memory-bound": (["MemoryWorkloadAnalysis", "MemoryWorkloadAnalysis_Tables", "SourceCounters",
                      "WarpStateStats"], ["memory", "stalls", "launch"]),
    "latency-bound": (["WarpStateStats", "SchedulerStats", "SourceCounters", "MemoryWorkloadAnalysis"],
                      ["stalls", "memory", "occupancy", "control", "latency", "launch"]),
    "compute-bound": (["ComputeWorkloadAnalysis", "InstructionStats", "WarpStateStats", "SourceCounters"],
                      ["compute", "instructions", "tensor", "stalls", "control", "launch"]),
    "occupancy-limited": (["WarpStateStats", "SchedulerStats", "SourceCounters"],
                          ["occupancy", "stalls", "memory", "launch"]),
    "launch/tail-limited": (["SchedulerStats", "WarpStateStats", "SourceCounters"],
                            ["launch", "occupancy", "stalls"]),
    "mixed": (["MemoryWorkloadAnalysis", "MemoryWorkloadAnalysis_Tables", "ComputeWorkloadAnalysis",
               "WarpStateStats", "SourceCounters"],
              ["memory", "compute", "stalls", "control", "occupancy", "tensor", "launch", "latency"]),
}


def stage2_plan(classes: list[str]) -> tuple[list[str], list[str], list[str]]:
    """Sections, rule families and metrics for the deep stage of kernels of these classes."""
    from kernelscope.heuristics import load_all
    from kernelscope.heuristics.registry import REGISTRY

    load_all()
    sections: list[str] = list(STAGE2_ALWAYS)
    families: list[str] = []
    for c in classes:
        secs, fams = STAGE2.get(c, STAGE2["mixed"])
        sections += [x for x in secs if x not in sections]
        families += [x for x in fams if x not in families]
    metrics: list[str] = []
    for r in REGISTRY.values():
        if r.scope == "ncu" and r.family in families:
            metrics += [m for m in r.metrics if m not in metrics]
    return sections, families, metrics


def _longest(launches: list[KernelProfile]) -> KernelProfile:
    """The launch that represents a kernel: its longest profiled one."""
    return max(launches, key=lambda k: k.duration_ns or 0.0)


Totals = dict[str, tuple[int, float]]  # mangled name -> (launches, total ns), from a trace


def _trace_totals(traced: Any) -> Totals | None:
    """Launch counts and summed durations per kernel (by mangled name) from the trace stage."""
    if traced is None:
        return None
    return {k.mangled_name: (k.count, k.total_ns) for k in traced[0].kernels if k.mangled_name}


def _launch_configs(tl: Any) -> set[tuple[Any, ...]]:
    """The distinct (kernel, grid, block) of a traced timeline's launches."""
    return {(o.mangled or o.name, o.grid, o.block) for o in tl.ops if o.kind == "kernel"}


def _launches(name: str, ks: list[KernelProfile], totals: Totals | None) -> int:
    return totals[name][0] if totals and name in totals else len(ks)


def _total_ns(name: str, ks: list[KernelProfile], totals: Totals | None) -> float:
    return totals[name][1] if totals and name in totals else sum(k.duration_ns or 0.0 for k in ks)


def _group(profile: Profile, totals: Totals | None = None) -> list[tuple[str, list[KernelProfile]]]:
    """Launches grouped by kernel, by total time: the trace's (every launch, unserialized) where it
    ran, else the profiled launches'."""
    groups: dict[str, list[KernelProfile]] = {}
    for k in profile.kernels:
        groups.setdefault(k.mangled_name, []).append(k)
    return sorted(groups.items(), key=lambda kv: -_total_ns(kv[0], kv[1], totals))


def merge_profiles(light: KernelProfile, deep: KernelProfile | None) -> KernelProfile:
    """One kernel's light and deep captures as one profile: deep values win where both have one."""
    if deep is None:
        return light
    data = light.model_dump()
    for key, value in deep.model_dump().items():
        if key in ("id", "metrics"):
            continue
        if value not in (None, [], {}):
            data[key] = value
    metrics = dict(light.metrics)
    metrics.update({k: v for k, v in deep.metrics.items() if v.value is not None or k not in metrics})
    data["metrics"] = metrics
    return KernelProfile.model_validate(data)


def artifact_evidence(artifact_id: str) -> tuple[list[Any], list[Any]]:
    """SASS statistics and ptxas resources of a compiled artifact's kernels (empty where unavailable)."""
    from kernelscope.artifacts import get_store
    from kernelscope.models import CompileResult
    from kernelscope.tools.sass import sass_for_artifact

    try:
        stats = sass_for_artifact(artifact_id).kernels
    except Exception:  # SASS is extra evidence: without cuobjdump the ncu rules still run
        stats = []
    art = get_store().get(artifact_id)
    raw = (art.meta.extra.get("result") if art else None) or {}
    try:
        resources = CompileResult.model_validate(raw).kernels if raw else []
    except ValueError:
        resources = []
    return list(stats), list(resources)


def diagnose_stages(light: Profile, deep: Profile | None, *, deep_kernels: int, sass: list[Any] | None = None,
                    ptxas: list[Any] | None = None, overrides: dict[str, dict[str, float]] | None = None,
                    totals: Totals | None = None) -> tuple[list[KernelDiagnosis], list[Any]]:
    """The analysis proper, from the two captures: launches grouped by kernel, the top kernels' light
    and deep profiles merged, every rule run with SASS/ptxas evidence, findings merged and ranked.
    Returns the diagnoses and the launch groups (by total time)."""
    from kernelscope.heuristics import load_all, run_rules

    load_all()
    groups = _group(light, totals)
    top = groups[:deep_kernels]
    deep_by: dict[str, KernelProfile] = {}
    for k in deep.kernels if deep is not None else []:
        deep_by.setdefault(k.mangled_name, k)
    names = {n for n, _ in top}
    extra: dict[str, list[Finding]] = {}
    ctx: dict[str, Any] = {"sass": {}, "ptxas": {},
                           "launches": {n: _launches(n, ks, totals) for n, ks in groups},
                           "total_ns": {n: _total_ns(n, ks, totals) for n, ks in groups}}
    for st in sass or []:
        if st.mangled_name in names:
            ctx["sass"][st.mangled_name] = st
            extra.setdefault(st.mangled_name, []).extend(run_rules("sass", st, overrides=overrides))
    for kr in ptxas or []:
        if kr.mangled_name in names:
            ctx["ptxas"][kr.mangled_name] = kr
            extra.setdefault(kr.mangled_name, []).extend(run_rules("ptxas", [kr], overrides=overrides))
    merged = [merge_profiles(_longest(ks), deep_by.get(n)) for n, ks in top]
    diags = diagnose_kernels(merged, context=ctx, overrides=overrides, extra=extra)
    for d, (n, _) in zip(diags, top, strict=True):
        d.launches = ctx["launches"][n]
        d.total_duration_ns = ctx["total_ns"][n]
    return diags, groups


def check_overrides(overrides: dict[str, dict[str, float]]) -> None:
    """Unknown rules or threshold names are refused by name, with the valid ones."""
    from kernelscope.heuristics import REGISTRY, load_all

    load_all()
    for rid, values in overrides.items():
        if rid not in REGISTRY:
            raise InputError(f"No rule {rid!r}; rules: {', '.join(sorted(REGISTRY))}.")
        unknown = set(values) - set(REGISTRY[rid].thresholds)
        if unknown:
            raise InputError(f"Rule {rid} has no threshold {', '.join(sorted(unknown))}; it has: "
                             f"{', '.join(sorted(REGISTRY[rid].thresholds)) or 'none'}.")


TRACE_AFTER_LAUNCHES = 16  # eval mode: the light stage seeing this many launches calls the trace stage


def tracer_available() -> bool:
    """Whether the CUPTI tracer can be built here (CUPTI headers and library, nvcc)."""
    from kernelscope.measure.cupti import cupti_paths

    try:
        require("nvcc")
        cupti_paths()
    except (ToolMissing, NotAvailable):
        return False
    return True


def _trace_stage(prep: Prepared, ws: Path, lease: Lease, s: Settings, req: AnalyzeRequest,
                 cancel: threading.Event | None) -> tuple[AnalyzeStage, Any, list[str]]:
    """One traced run: the stage's account and (summary, facts, findings, timeline) or None."""
    from kernelscope.tools.nsys_trace import diagnose_timeline, run_cupti
    from kernelscope.tools.run import job_env

    t0 = time.monotonic()
    notes: list[str] = []
    out = None
    try:
        proc, tl, notes = run_cupti(prep.argv, ws, job_env(ws, s.home, lease), req.timeout_s, s, cancel)
        if tl is not None and tl.ops:
            out = (*diagnose_timeline(tl, overrides=req.overrides), tl)
        elif proc.returncode != 0 or proc.timed_out:
            notes.append(f"trace stage: the program {proc.describe_failure()}")
    except NotAvailable as e:  # the tracer could not be built: the ncu stages still run
        notes.append(f"trace stage skipped: {e}")
    stage = AnalyzeStage(name="trace", tool="cupti", wall_s=round(time.monotonic() - t0, 3),
                         kernels=[f"{k.name}: {k.count} launches" for k in out[0].kernels[:5]] if out else [])
    return stage, out, notes


# the light stage's hardware metrics when the CUPTI collector measures them (the rest of STAGE1_METRICS are
# ncu's launch and device metrics, which kernelscope.measure.collector computes from the launch configuration)
COLLECTOR_METRICS = [m for m in STAGE1_METRICS if not m.startswith(("launch__", "device__", "sm__maximum_warps"))]


# What the one CUPTI run measures of each deep launch besides the light metrics: every rule family's hardware
# metrics and the warp stall reasons (WarpStateStats); the source-derived ones come from its source passes
def deep_metrics() -> list[str]:
    from kernelscope.measure.collector import SOURCE_TOTALS, STALL_METRICS

    _, _, rules = stage2_plan(list(STAGE2))
    skip = {*SOURCE_TOTALS, "smsp__inst_executed_op_bar.sum"}  # the last: the range profiler refuses it on the H100
    return [m for m in dict.fromkeys([*rules, *STALL_METRICS])
            if not m.startswith(("launch__", "device__")) and m not in COLLECTOR_METRICS and m not in skip]


def _source_texts(artifact_id: str | None) -> dict[str, list[str]]:
    """The compiled source's lines by file name, for the code of the lines the source passes name."""
    from kernelscope.artifacts import get_store

    art = get_store().get(artifact_id) if artifact_id else None
    path = art.path("source") if art else None
    if path is None or not path.is_file():
        return {}
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return {}
    return {path.name: lines, Path(art.meta.source_name or path.name).name: lines}


def _collector_totals(c: Any, profile: Profile) -> Totals:
    """Launches and summed durations per kernel from the collector's launch counts per configuration: each
    configuration's count times the duration of its profiled launch (else the kernel's mean profiled one)."""
    dur: dict[tuple[Any, ...], float] = {}
    by_kernel: dict[str, list[float]] = {}
    for ln, k in zip(sorted(c.launches, key=lambda x: x.seq), profile.kernels, strict=False):
        if k.duration_ns is not None:
            dur[(ln.name, ln.grid, ln.block, ln.dyn_smem)] = k.duration_ns
            by_kernel.setdefault(ln.name, []).append(k.duration_ns)
    out: Totals = {}
    for cfg in c.configs:
        d = dur.get((cfg.name, cfg.grid, cfg.block, cfg.dyn_smem))
        if d is None and by_kernel.get(cfg.name):
            d = sum(by_kernel[cfg.name]) / len(by_kernel[cfg.name])
        n, t = out.get(cfg.name, (0, 0.0))
        out[cfg.name] = (n + cfg.launches, t + cfg.launches * (d or 0.0))
    return out


DEEP_MAX = 16  # deep launches (metrics and source passes) of one CUPTI run; later configurations get the light ones


def collector_request() -> Any:
    """The deep launches' part of analyze's CUPTI run (every kernel, at most DEEP_MAX configurations); the light
    part is COLLECTOR_METRICS. tests/fixtures/collector/capture.py captures with exactly this."""
    from kernelscope.measure.collector import DeepRequest

    return DeepRequest(kernels=["*"], metrics=deep_metrics(), max_launches=DEEP_MAX)


def _cupti_stage(prep: Prepared, ws: Path, lease: Lease, s: Settings, req: AnalyzeRequest, evidence: Any,
                 cancel: threading.Event | None) -> tuple[Any, Profile | None, list[str], float]:
    """Both stages' measurements in one run of the program (CUPTI collector): the first launch of each kernel and
    launch configuration with the light metrics, and the first DEEP_MAX of them also with every rule family's
    metrics, the stall reasons and the source passes (PC sampling, SASS metrics). (collected, profile, notes,
    wall s); the profile is None where the collector could not measure."""
    from kernelscope.measure.collector import collected_profile, run_collector
    from kernelscope.tools.run import job_env

    t0 = time.monotonic()
    deep = collector_request()
    try:
        proc, got = run_collector(prep.argv, ws, job_env(ws, s.home, lease), COLLECTOR_METRICS, req.timeout_s, s,
                                  cancel, max_launches=max(req.launch_count or 64, 1), deep=deep)
    except NotAvailable as e:
        return None, None, [f"the CUPTI collector is not available here ({e}); Nsight Compute measured instead"], 0.0
    wall = time.monotonic() - t0
    notes = list(got.notes)
    if proc.cancelled:
        return got, None, notes, wall
    if got.refused:
        notes.append(f"this GPU's CUPTI does not know {', '.join(got.refused)}")
    if not got.launches or proc.timed_out or proc.returncode != 0:
        why = (f"the program {proc.describe_failure()}" if proc.timed_out or proc.returncode != 0 else
               "; ".join(got.errors[:3]) or "no launch was profiled")
        notes.append(f"the CUPTI collector measured nothing ({why}); Nsight Compute measured instead")
        return got, None, notes, wall
    if got.errors:
        notes.append("CUPTI collector: " + "; ".join(got.errors[:3]))
    resources: dict[str, Any] = {}
    if evidence is not None:  # ptxas' registers and shared memory, where the driver did not say
        with contextlib.suppress(Exception):
            resources = {kr.mangled_name: kr for kr in evidence.result()[1]}
    profile = collected_profile(got, resources, report="light and deep (CUPTI collector)",
                                texts=_source_texts(prep.artifact_id))
    return got, profile, notes, wall


def _deep_complete(got: Any, top: list[tuple[str, list[KernelProfile]]]) -> list[str]:
    """The top kernels whose first launch the CUPTI run did not measure deep (with its source passes)."""
    deep = {ln.name for ln in got.launches if ln.deep}
    sourced = {src.name for src in got.sources if src.sampled or src.counted}
    return [n for n, _ in top if n not in deep or n not in sourced]


def _attach_trace(result: AnalyzeResult, out: Any, display: str) -> None:
    from kernelscope.tools.nsys_trace import store_trace

    summary, _facts, findings, tl = out
    result.system, result.system_findings = summary, findings
    result.trace_id = store_trace(tl, target=display)


def _rules_stage(result: AnalyzeResult, req: AnalyzeRequest, p1: Profile, p2: Profile | None, evidence: Any,
                 totals: Totals | None, families: list[str], stages: list[AnalyzeStage],
                 t_all: float) -> AnalyzeResult:
    """analyze's last stage, whatever measured the first two: the rules over the merged profiles with the SASS
    and ptxas evidence, and the answer's kernels, counts and stages."""
    t0 = time.monotonic()
    sass, ptxas = evidence.result() if evidence is not None else ([], [])
    diags, groups = diagnose_stages(p1, p2, deep_kernels=req.deep_kernels, sass=sass, ptxas=ptxas,
                                    overrides=req.overrides, totals=totals)
    stages.append(AnalyzeStage(name="rules", wall_s=round(time.monotonic() - t0, 3), rule_families=families))
    result.kernels = diags
    result.kernels_total = max(len(groups), result.system.kernels_total if result.system else 0)
    result.launches_profiled = len(p1.kernels)
    result.other_kernels = [f"{ks[0].name} ({_launches(n, ks, totals)} launches, "
                            f"{_total_ns(n, ks, totals) / 1e3:.1f} us)" for n, ks in groups[req.deep_kernels:][:20]]
    result.stages = stages
    result.wall_s = round(time.monotonic() - t_all, 3)
    return result


def _ncu_deep_capture(prep: Prepared, ws: Path, lease: Lease, s: Settings, req: AnalyzeRequest, kernels: list[str],
                      sections: list[str], metrics: list[str],
                      cancel: threading.Event | None) -> tuple[NcuCapture, Path | None]:
    """Nsight Compute's deep capture, with these sections and rule metrics, of the first launch of each of these
    kernels (a program) or of their launches in the one profiled forward call (eval); (capture, report)."""
    opts = NcuOptions(sections=sections, metrics=metrics, clock_control=req.clock_control, import_source=True)
    names = "|".join(re.escape(n) for n in kernels)
    kid = f"::regex:^({names})$:1" if req.mode == "program" else f"::regex:^({names})$:"
    if req.mode == "eval":
        opts.launch_count = max(len(kernels), 1) * 8
    return run_capture(prep, opts, ws=ws, lease=lease, s=s, name="stage2", timeout_s=req.timeout_s, cancel=cancel,
                       kernel_id=kid)


CUPTI_DEEP_SECTIONS = ["rule metrics of every family", "WarpStateStats (stall reasons)",
                       "SourceCounters (PC sampling, SASS metrics)"]


def _analyze_cupti(req: AnalyzeRequest, s: Settings, prep: Prepared, ws: Path, lease: Lease, got: Any, p1: Profile,
                   wall: float, stages: list[AnalyzeStage], notes: list[str], traced: Any, can_trace: bool,
                   evidence: Any, t_all: float, note: Callable[[str], None],
                   cancel: threading.Event | None) -> AnalyzeResult:
    """analyze after its one CUPTI run: the trace when the program launched many kernels, the class per top
    kernel, Nsight Compute's deep stage only for a top kernel the run did not measure deep, then the rules."""
    from kernelscope.measure.ncu import load_profile
    from kernelscope.tools.classify import classify

    result = AnalyzeResult(status="ok", mode=req.mode, gpu_wait_s=lease.waited_s)
    deep_s = (sum(src.wall_ns or 0.0 for src in got.sources) + sum(ln.wall_ns or 0.0 for ln in got.launches
                                                                     if ln.deep)) / 1e9
    light = AnalyzeStage(name="light", metrics=len(COLLECTOR_METRICS), tool="cupti",
                         wall_s=round(max(wall - deep_s, 0.0), 3))
    deep = AnalyzeStage(name="deep", sections=CUPTI_DEEP_SECTIONS, metrics=len(deep_metrics()), tool="cupti",
                        wall_s=round(deep_s, 3))
    stages += [light, deep]  # one run: the deep stage's share is its launches' passes and source passes
    if traced is None and can_trace and req.trace == "auto" and (got.launches_seen or 0) >= TRACE_AFTER_LAUNCHES:
        note("trace stage: many launches, so the timeline between them")
        st, traced, n = _trace_stage(prep, ws, lease, s, req, cancel)
        stages.append(st)
        notes += n
    if traced is not None:
        _attach_trace(result, traced, prep.display)
    totals = _trace_totals(traced) or _collector_totals(got, p1)
    groups = _group(p1, totals)
    top = groups[:req.deep_kernels]
    classes = {name: classify(_longest(ks)).cls for name, ks in top}
    light.kernels = [f"{ks[0].name}: {classes[n]}" for n, ks in top]
    sections, families, ncu_metrics = stage2_plan(sorted(set(classes.values())))
    deep.rule_families, deep.kernels = families, [ks[0].name for _, ks in top]
    # a top kernel the run did not measure deep (past DEEP_MAX configurations, or its source passes failed):
    # Nsight Compute's deep stage for those
    p2 = None
    missing = _deep_complete(got, top)
    if missing:
        note(f"stage 2: {', '.join(sections)} for {len(missing)} kernel(s) under Nsight Compute")
        _ncu_binary()
        t0 = time.monotonic()
        cap2, rep2 = _ncu_deep_capture(prep, ws, lease, s, req, missing, sections, ncu_metrics, cancel)
        if rep2 is not None:
            p2 = load_profile(rep2)
            result.report_ids.append(_store_report(rep2, target=prep.display, stage="deep"))
        stages.append(AnalyzeStage(name="deep", sections=sections, rule_families=families, capture=cap2, tool="ncu",
                                   wall_s=round(time.monotonic() - t0, 3), kernels=missing))
        if cap2.status != "ok":
            result.explanation = (f"Nsight Compute's deep stage failed ({cap2.status}): {cap2.explanation} Findings "
                                  f"for {', '.join(missing)} use the light stage only.")
    result.notes += notes + harness_notes(ws)
    return _rules_stage(result, req, p1, p2, evidence, totals, families, stages, t_all)


def analyze(req: AnalyzeRequest, settings: Settings | None = None, *, cancel: threading.Event | None = None,
            on_wait: WaitCallback | None = None, progress: Callable[[str], None] | None = None) -> AnalyzeResult:
    from kernelscope.measure.ncu import load_profile
    from kernelscope.tools.classify import classify

    check_overrides(req.overrides)
    s = ensure_dirs(settings)
    light_opts = NcuOptions(sections=STAGE1_SECTIONS, metrics=STAGE1_METRICS, kernel_regex=req.kernel_regex,
                            launch_skip=req.launch_skip, launch_count=req.launch_count,
                            clock_control=req.clock_control, import_source=False)
    _validate(light_opts)
    can_trace = req.trace != "never" and tracer_available()
    # programs: both stages' measurements in the program's own run (CUPTI), Nsight Compute where that cannot
    cupti_first = (req.mode == "program" and req.light != "ncu" and req.kernel_regex is None and req.launch_skip == 0
                   and tracer_available())
    if not cupti_first:
        _ncu_binary()
    trace_first = can_trace and (req.trace == "always" or (req.mode == "program" and not cupti_first))
    t_all = time.monotonic()
    stages: list[AnalyzeStage] = []
    notes: list[str] = []
    note = progress or (lambda _m: None)
    traced: Any = None
    with Workspace(prefix="analyze-") as ws:
        prep = prepare_target(req, ws.path, s)
        # the program's SASS and ptxas evidence is CPU work: it runs while the GPU stages do
        evidence = None
        if req.sass and prep.artifact_id:
            ex = ThreadPoolExecutor(1, thread_name_prefix="analyze-evidence")
            evidence = ex.submit(artifact_evidence, prep.artifact_id)
            ex.shutdown(wait=False)
        with _lease(req.gpu, cancel, on_wait) as lease:
            if cupti_first:
                if trace_first:
                    note("trace stage: the timeline of every launch (CUPTI)")
                    st, traced, n = _trace_stage(prep, ws.path, lease, s, req, cancel)
                    stages.append(st)
                    notes += n
                note("stages 1 and 2: light metrics of each kernel and launch configuration, deep metrics and source "
                     "lines of the first ones, in the program's own run (CUPTI)")
                got, p1c, n, wall = _cupti_stage(prep, ws.path, lease, s, req, evidence, cancel)
                notes += n
                if p1c is not None:
                    return _analyze_cupti(req, s, prep, ws.path, lease, got, p1c, wall, stages, notes, traced,
                                          can_trace, evidence, t_all, note, cancel)
                if cancel is not None and cancel.is_set():
                    return AnalyzeResult(status="cancelled", explanation="Cancelled.", mode=req.mode, stages=stages,
                                         notes=notes)
                _ncu_binary()
                trace_first = can_trace  # a program under Nsight Compute: the trace first, unless it ran already
            # ---- stage 0: the timeline (CUPTI): launches per kernel, their real durations, host overhead
            if trace_first and traced is None:
                note("trace stage: the timeline of every launch (CUPTI)")
                st, traced, n = _trace_stage(prep, ws.path, lease, s, req, cancel)
                stages.append(st)
                notes += n
            # ---- stage 1: light capture, class per kernel
            kid, scope = None, "of every launch"
            configs = 0
            if traced is not None and req.kernel_regex is None and req.launch_skip == 0:
                # the trace counts and times every launch, so the light stage needs one launch of each
                # kernel and launch configuration (grid, block, shared memory), or of each kernel where the
                # configurations are too many (shapes that change every launch)
                configs = len(_launch_configs(traced[3]))
                if req.launch_count is None or configs <= req.launch_count:
                    light_opts = light_opts.model_copy(update={"launch_count": 1,
                                                               "filter_mode": "per-launch-config"})
                    scope = "of the first launch of each kernel and launch configuration"
                else:
                    kid, scope = "::regex:.*:1", "of each kernel's first launch"
                    configs = 0
            t0 = time.monotonic()
            note(f"stage 1: speed of light, launch and occupancy {scope}")
            cap1, rep1 = run_capture(prep, light_opts, ws=ws.path, lease=lease, s=s, name="stage1",
                                     timeout_s=req.timeout_s, cancel=cancel, kernel_id=kid)
            result = AnalyzeResult(status=cap1.status, explanation=cap1.explanation, fixes=cap1.fixes,
                                   mode=req.mode, gpu_wait_s=lease.waited_s)
            light = AnalyzeStage(name="light", sections=STAGE1_SECTIONS, metrics=len(STAGE1_METRICS),
                                 capture=cap1, tool="ncu", wall_s=round(time.monotonic() - t0, 3))
            stages.append(light)
            if traced is not None:
                _attach_trace(result, traced, prep.display)
            if rep1 is None:
                result.stages, result.notes = stages, notes
                return result
            p1 = load_profile(rep1, top_lines=0)
            result.report_ids = [_store_report(rep1, target=prep.display, stage="light")]
            totals = _trace_totals(traced)
            groups = _group(p1, totals)
            top = groups[:req.deep_kernels]
            classes = {name: classify(_longest(ks)).cls for name, ks in top}
            light.wall_s = round(time.monotonic() - t0, 3)  # with parsing the report
            light.kernels = [f"{ks[0].name}: {classes[n]}" for n, ks in top]
            if traced is None and can_trace and req.trace == "auto" and len(p1.kernels) >= TRACE_AFTER_LAUNCHES:
                note("trace stage: many launches, so the timeline between them")
                st, traced, n = _trace_stage(prep, ws.path, lease, s, req, cancel)
                stages.append(st)
                notes += n
                if traced is not None:
                    _attach_trace(result, traced, prep.display)
            # ---- stage 2: deep capture of the first launch of each top kernel
            sections, families, metrics = stage2_plan(sorted(set(classes.values())))
            note(f"stage 2: {', '.join(sections)} for {len(top)} kernel(s)")
            t0 = time.monotonic()
            cap2, rep2 = _ncu_deep_capture(prep, ws.path, lease, s, req, [n for n, _ in top], sections, metrics,
                                           cancel)
        p2 = None
        if rep2 is not None:
            p2 = load_profile(rep2)
            result.report_ids.append(_store_report(rep2, target=prep.display, stage="deep"))
        stages.append(AnalyzeStage(name="deep", sections=sections, rule_families=families, metrics=len(metrics),
                                   capture=cap2, tool="ncu", wall_s=round(time.monotonic() - t0, 3),
                                   kernels=[ks[0].name for _, ks in top]))
        result.notes += notes + harness_notes(ws.path)
        if cap2.status != "ok":
            result.explanation = (f"The deep stage failed ({cap2.status}): {cap2.explanation} Findings below "
                                  "use the light stage only.")
        # ---- rules over the merged profiles, with SASS/ptxas evidence
        return _rules_stage(result, req, p1, p2, evidence, totals, families, stages, t_all)
