"""analyze: the two-stage analysis of a program's or a candidate's kernels, wired from its parts.

A light measurement (speed of light, launch statistics, occupancy and the roofline counters) of each kernel
and launch configuration, a bottleneck class per kernel, then a deep measurement of the kernels that take the
most time; every rule runs over the merged profile, with SASS and ptxas evidence where the target is a
compiled artifact. For a program or an eval candidate both are measured in its own run by the CUPTI collector
(the deep stage: every rule family's metrics, the stall reasons and the source passes of the first launches;
the class chooses the rule families), gated for a candidate on the harness' profiler range around its profiled
forward calls, with a CUPTI trace after it when it saw many launches. ``light="ncu"`` and targets the collector
cannot measure get two Nsight Compute captures instead (after a trace, for programs), the deep one with the
sections and rule metrics the class calls for.

The decisions are :mod:`kernelscope.heuristics.pipeline`'s, the measuring :mod:`kernelscope.measure`'s
(``capture`` for Nsight Compute, ``stages`` for the CUPTI collector, ``trace`` for the timeline); this
module holds the requests and the order of the stages, with one :class:`Analysis` as their context.
"""

from __future__ import annotations

import contextlib
import json
import re
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import NamedTuple

from kernelscope.artifacts import get_store
from kernelscope.config import Settings, ensure_dirs
from kernelscope.errors import InputError, NotAvailable
from kernelscope.heuristics import UnknownThreshold, registry
from kernelscope.heuristics.pipeline import (
    STAGE1_METRICS,
    STAGE1_SECTIONS,
    TRACE_AFTER_LAUNCHES,
    Groups,
    StagePlan,
    Totals,
    classes_of,
    coverage_note,
    diagnose_stages,
    group_launches,
    ncu_advice_missing,
    other_kernels,
    stage2_plan,
    top_groups,
    trace_totals,
    user_sources,
)
from kernelscope.measure.capture import (
    Prepared,
    harness_notes,
    ncu_binary,
    run_capture,
    store_report,
    validate_options,
)
from kernelscope.measure.collector import Runner, collected_profile
from kernelscope.measure.ncu import load_profile
from kernelscope.measure.stages import (
    COLLECTOR_METRICS,
    CUPTI_DEEP_SECTIONS,
    CollectorRun,
    collect_stages,
    collector_totals,
    deep_incomplete,
    deep_metrics,
    line_texts,
)
from kernelscope.measure.timeline import launch_configs
from kernelscope.measure.trace import Traced, diagnose_timeline, run_cupti, store_trace, tracer_available
from kernelscope.models import (
    AnalyzeResult,
    AnalyzeStage,
    CompileResult,
    KernelResources,
    KernelSassStats,
    NcuCapture,
    Profile,
)
from kernelscope.models.requests import AnalyzeRequest, NcuOptions, ProfileTarget
from kernelscope.sandbox.forkserver import ForkServerError, get_fork_server
from kernelscope.sandbox.gpu import Lease, WaitCallback, gpu_pool
from kernelscope.sandbox.process import Limits, ProcessResult
from kernelscope.sandbox.workspace import Workspace
from kernelscope.tools.run import (
    HARNESS,
    _read_source,
    forkserver_env,
    harness_argv,
    job_env,
    program_artifact,
    stage_program,
)
from kernelscope.tools.sass import sass_for_artifact
from kernelscope.tools.sass_maps import SassMaps, instruction_maps, run_instructions


# ---------------------------------------------------------------------------------------- target
def prepare_target(t: ProfileTarget, ws: Path, s: Settings) -> Prepared:
    """The target made ready in the workspace ``ws``: a program staged, or an eval problem's sources and the
    harness' configuration written."""
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
                    ncu_flags=["--profile-from-start", "off"], display="eval candidate (ModelNew forward)",
                    candidate=cand)


def check_overrides(overrides: dict[str, dict[str, float]]) -> None:
    """Unknown rules or threshold names are refused by name, with the valid ones."""
    try:
        registry.check_overrides(overrides)
    except (ValueError, UnknownThreshold) as e:
        raise InputError(str(e)) from None


def gpu_lease(gpu: int | None, cancel: threading.Event | None,
           on_wait: WaitCallback | None) -> contextlib.AbstractContextManager[Lease]:
    """A GPU of this server's pool; NotAvailable where it has none."""
    if len(gpu_pool()) == 0:
        raise NotAvailable("Profiling kernels", "no GPU is visible to this server",
                           "run kernelscope on a host with an NVIDIA GPU; recorded reports can still be read "
                           "with bottleneck_classify and compare")
    return gpu_pool().lease(gpu, cancel=cancel, on_wait=on_wait)


# ---------------------------------------------------------------------------------------- evidence
class Evidence(NamedTuple):
    """A compiled artifact's static evidence for the rules: SASS statistics and ptxas resources; and its kernels'
    instructions by offset (tools.sass_maps.instruction_maps), which the CUPTI path reads the collector's records
    against."""

    sass: list[KernelSassStats]
    ptxas: list[KernelResources]
    instructions: dict[str, dict[int, str]]


def artifact_evidence(artifact_id: str) -> Evidence:
    """SASS statistics, ptxas resources and instructions of a compiled artifact's kernels (empty where
    unavailable)."""
    try:
        stats = sass_for_artifact(artifact_id).kernels
    except Exception:  # SASS is extra evidence: without cuobjdump the ncu rules still run
        stats = []
    instructions: dict[str, dict[int, str]] = {}
    with contextlib.suppress(Exception):
        instructions = instruction_maps(artifact_id)
    art = get_store().get(artifact_id)
    raw = (art.meta.extra.get("result") if art else None) or {}
    try:
        resources = CompileResult.model_validate(raw).kernels if raw else []
    except ValueError:
        resources = []
    return Evidence(list(stats), list(resources), instructions)


def _source_texts(artifact_id: str | None) -> dict[str, list[str]]:
    """The compiled source's lines by file name, for the code of the lines the source passes name."""
    art = get_store().get(artifact_id) if artifact_id else None
    path = art.path("source") if art else None
    if path is None or not path.is_file():
        return {}
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return {}
    return {path.name: lines, Path(art.meta.source_name or path.name).name: lines}


def _shown_source(artifact_id: str | None) -> str | None:
    """The source as the user named it when compiling the artifact (its path, or the inline source's file name)."""
    art = get_store().get(artifact_id) if artifact_id else None
    return art.meta.source_name if art is not None and art.meta.source_name else None


# ---------------------------------------------------------------------------------------- one analysis
@dataclass
class Analysis:
    """One analysis under way: its request, prepared target, settings, GPU lease, cancel event and progress,
    and what the stages have given so far (their accounts, the notes, the trace)."""

    req: AnalyzeRequest
    settings: Settings
    prep: Prepared
    ws: Path
    lease: Lease
    cancel: threading.Event | None = None
    note: Callable[[str], None] = lambda _m: None
    can_trace: bool = False
    evidence: Future[Evidence] | None = None  # computed on a thread while the GPU stages run
    t_all: float = field(default_factory=time.monotonic)
    stages: list[AnalyzeStage] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    traced: Traced | None = None

    @cached_property
    def env(self) -> dict[str, str]:
        """The measured job's environment (its workspace, the leased GPU; a candidate's extension builds from the
        shared cache, where `run` built them)."""
        return job_env(self.ws, self.settings.home, self.lease, candidate=self.prep.candidate)

    def static_evidence(self) -> Evidence:
        return self.evidence.result() if self.evidence is not None else Evidence([], [], {})

    def cancelled(self) -> bool:
        return self.cancel is not None and self.cancel.is_set()


class TraceStage(NamedTuple):
    """The trace stage's account, what it traced (None where nothing), and its notes."""

    stage: AnalyzeStage
    traced: Traced | None
    notes: list[str]


def _trace_stage(a: Analysis) -> TraceStage:
    """One traced run (CUPTI) of the target."""
    t0 = time.monotonic()
    notes: list[str] = []
    out = None
    try:
        proc, tl, notes = run_cupti(a.prep.argv, a.ws, a.env, a.req.timeout_s, a.settings, a.cancel)
        if tl is not None and tl.ops:
            out = Traced(*diagnose_timeline(tl, overrides=a.req.overrides), tl)
        elif proc.returncode != 0 or proc.timed_out:
            notes.append(f"trace stage: the program {proc.describe_failure()}")
    except NotAvailable as e:  # the tracer could not be built: the measuring stages still run
        notes.append(f"trace stage skipped: {e}")
    stage = AnalyzeStage(name="trace", tool="cupti", wall_s=round(time.monotonic() - t0, 3),
                         kernels=[f"{k.name}: {k.count} launches" for k in out.summary.kernels[:5]] if out else [])
    return TraceStage(stage, out, notes)


def _trace(a: Analysis, why: str) -> None:
    """Run the trace stage; its account and notes go to the analysis."""
    a.note(why)
    done = _trace_stage(a)
    a.stages.append(done.stage)
    a.notes += done.notes
    a.traced = done.traced


def _trace_after(a: Analysis, launches: int) -> bool:
    """trace='auto': a measuring run that saw many launches calls the trace stage, for the timeline between them."""
    if a.traced is None and a.can_trace and a.req.trace == "auto" and launches >= TRACE_AFTER_LAUNCHES:
        _trace(a, "trace stage: many launches, so the timeline between them")
        return True
    return False


def _attach_trace(result: AnalyzeResult, a: Analysis) -> None:
    if a.traced is not None:
        result.system, result.system_findings = a.traced.summary, a.traced.findings
        result.trace_id = store_trace(a.traced.timeline, target=a.prep.display)


def _ncu_deep_capture(a: Analysis, kernels: list[str], sections: list[str],
                      metrics: list[str]) -> tuple[NcuCapture, Path | None]:
    """Nsight Compute's deep capture, with these sections and rule metrics, of the first launch of each of these
    kernels (a program) or of their launches in the one profiled forward call (eval); (capture, report)."""
    opts = NcuOptions(sections=sections, metrics=metrics, clock_control=a.req.clock_control, import_source=True)
    names = "|".join(re.escape(n) for n in kernels)
    kid = f"::regex:^({names})$:1" if a.req.mode == "program" else f"::regex:^({names})$:"
    if a.req.mode == "eval":
        opts.launch_count = max(len(kernels), 1) * 8
    return run_capture(a.prep, opts, ws=a.ws, env=a.env, name="stage2", timeout_s=a.req.timeout_s, cancel=a.cancel,
                       kernel_id=kid)


def _rules_stage(a: Analysis, result: AnalyzeResult, light: Profile, deep: Profile | None, totals: Totals | None,
                 families: list[str]) -> AnalyzeResult:
    """analyze's last stage, whatever measured the first two: the rules over the merged profiles with the SASS
    and ptxas evidence, and the answer's kernels, counts and stages."""
    t0 = time.monotonic()
    sass, ptxas, _ = a.static_evidence()
    # the user's file, not the compile workspace's copy of it nor the job's folders' paths (an eval candidate's)
    shown, private = _shown_source(a.prep.artifact_id), [str(a.ws), a.env.get("TORCH_EXTENSIONS_DIR", "")]
    light = user_sources(light, shown, private)
    deep = user_sources(deep, shown, private) if deep is not None else None
    diags, groups = diagnose_stages(light, deep, deep_kernels=a.req.deep_kernels, sass=sass, ptxas=ptxas,
                                    overrides=a.req.overrides, totals=totals, min_share_pct=a.req.min_time_share_pct)
    a.stages.append(AnalyzeStage(name="rules", wall_s=round(time.monotonic() - t0, 3), rule_families=families))
    result.kernels = diags
    result.kernels_total = max(len(groups), result.system.kernels_total if result.system else 0)
    result.launches_profiled = len(light.kernels)
    result.other_kernels = other_kernels(groups, len(diags), totals)
    missed = coverage_note(groups, groups[:len(diags)], totals, a.req.min_time_share_pct)
    if missed:
        result.notes.append(missed)
    result.stages = a.stages
    result.wall_s = round(time.monotonic() - a.t_all, 3)
    return result


@dataclass
class Classified:
    """The light stage's reading: the launches grouped by kernel by total time, the top ones and their classes."""

    totals: Totals | None
    groups: Groups
    top: Groups
    classes: dict[str, str]

    @classmethod
    def of(cls, light: Profile, totals: Totals | None, req: AnalyzeRequest) -> Classified:
        groups = group_launches(light, totals)
        top = top_groups(groups, totals, req.deep_kernels, req.min_time_share_pct)
        return cls(totals, groups, top, classes_of(top))

    def labels(self) -> list[str]:
        return [f"{ks[0].name}: {self.classes[n]}" for n, ks in self.top]


# ---------------------------------------------------------------------------------------- CUPTI path
def _cupti_profile(a: Analysis, run: CollectorRun, sass: SassMaps) -> Profile:
    """Both stages' profile from the collector's run, with ptxas' registers and shared memory where the driver
    did not say, and the SASS of the modules the kernels ran from."""
    resources: dict[str, KernelResources] = {}
    if a.evidence is not None:
        with contextlib.suppress(Exception):
            resources = {kr.mangled_name: kr for kr in a.evidence.result().ptxas}
    assert run.got is not None
    if a.prep.artifact_id is not None:
        texts = _source_texts(a.prep.artifact_id)
    else:  # an eval candidate: the sources its extensions compiled (load_inline writes them in its build folder)
        ext = a.env.get("TORCH_EXTENSIONS_DIR")
        texts = line_texts(run.got, [a.ws, *([Path(ext)] if ext else [])])
    return collected_profile(run.got, resources, report="light and deep (CUPTI collector)", texts=texts, sass=sass)


def _analyze_cupti(a: Analysis, run: CollectorRun) -> AnalyzeResult:
    """analyze after its one CUPTI run: the trace when the program launched many kernels, the class per top
    kernel, Nsight Compute's deep stage only for a top kernel the run did not measure deep, then the rules."""
    got = run.got
    assert got is not None
    sass = run_instructions(a.ws / "metrics", got, a.static_evidence().instructions)  # the SASS that ran
    light_p = _cupti_profile(a, run, sass)
    result = AnalyzeResult(status="ok", mode=a.req.mode, gpu_wait_s=a.lease.waited_s)
    light = AnalyzeStage(name="light", metrics=len(COLLECTOR_METRICS), tool="cupti",
                         wall_s=round(max(run.wall_s - run.deep_s, 0.0), 3))
    deep = AnalyzeStage(name="deep", sections=CUPTI_DEEP_SECTIONS, metrics=len(deep_metrics()), tool="cupti",
                        wall_s=round(run.deep_s, 3))
    a.stages += [light, deep]  # one run: the deep stage's share is its launches' passes and source passes
    _trace_after(a, got.launches_seen or 0)
    _attach_trace(result, a)
    totals = trace_totals(a.traced.summary if a.traced else None) or collector_totals(got, light_p)
    seen = Classified.of(light_p, totals, a.req)
    light.kernels = seen.labels()
    plan = stage2_plan(sorted(set(seen.classes.values())))
    deep.rule_families, deep.kernels = plan.families, [ks[0].name for _, ks in seen.top]
    # a top kernel the run did not measure deep (past DEEP_MAX configurations, or its source passes failed):
    # Nsight Compute's deep stage for those
    deep_p = None
    missing = deep_incomplete(got, seen.top)
    if missing:
        deep_p = _ncu_deep_for(a, result, missing, plan.sections, plan.families, plan.metrics)
    result.notes += a.notes + harness_notes(a.ws)
    result = _rules_stage(a, result, light_p, deep_p, totals, plan.families)
    measured = [k for k in result.kernels if k.mangled_name not in missing or deep_p is None]
    no_advice = ncu_advice_missing([k.name for k in measured],
                                   unread=[k.name for k in measured if k.mangled_name not in sass])
    if no_advice:  # item 5 of issue 29: say what the CUPTI path lacks
        result.notes.append(no_advice)
    return result


def _ncu_deep_for(a: Analysis, result: AnalyzeResult, missing: list[str], sections: list[str], families: list[str],
                  metrics: list[str]) -> Profile | None:
    """Nsight Compute's deep stage for the top kernels the CUPTI run did not measure deep."""
    a.note(f"stage 2: {', '.join(sections)} for {len(missing)} kernel(s) under Nsight Compute")
    ncu_binary()
    t0 = time.monotonic()
    cap2, rep2 = _ncu_deep_capture(a, missing, sections, metrics)
    deep_p = None
    if rep2 is not None:
        deep_p = load_profile(rep2)
        result.report_ids.append(store_report(rep2, target=a.prep.display, stage="deep"))
    a.stages.append(AnalyzeStage(name="deep", sections=sections, rule_families=families, capture=cap2, tool="ncu",
                                 wall_s=round(time.monotonic() - t0, 3), kernels=missing))
    if cap2.status != "ok":
        result.explanation = (f"Nsight Compute's deep stage failed ({cap2.status}): {cap2.explanation} Findings "
                              f"for {', '.join(missing)} use the light stage only.")
    return deep_p


# ---------------------------------------------------------------------------------------- Nsight Compute path
def _light_scope(a: Analysis, opts: NcuOptions) -> tuple[NcuOptions, str | None, str]:
    """The light capture's launches: every launch, or (where the trace counts and times every launch) one of
    each kernel and launch configuration (grid, block, shared memory), or of each kernel where the
    configurations are too many (shapes that change every launch). (options, ncu kernel id, in words)."""
    if a.traced is None or a.req.kernel_regex is not None or a.req.launch_skip != 0:
        return opts, None, "of every launch"
    configs = len(launch_configs(a.traced.timeline))
    if a.req.launch_count is None or configs <= a.req.launch_count:
        return (opts.model_copy(update={"launch_count": 1, "filter_mode": "per-launch-config"}), None,
                "of the first launch of each kernel and launch configuration")
    return opts, "::regex:.*:1", "of each kernel's first launch"


@dataclass
class NcuLight:
    """Nsight Compute's light stage: the answer begun from its capture, its account, and its reading (None
    where it wrote no report)."""

    result: AnalyzeResult
    stage: AnalyzeStage
    profile: Profile | None = None
    seen: Classified | None = None


def _ncu_light(a: Analysis, opts: NcuOptions) -> NcuLight:
    """Stage 1 under Nsight Compute: speed of light, launch and occupancy, a class per top kernel."""
    opts, kid, scope = _light_scope(a, opts)
    t0 = time.monotonic()
    a.note(f"stage 1: speed of light, launch and occupancy {scope}")
    cap1, rep1 = run_capture(a.prep, opts, ws=a.ws, env=a.env, name="stage1", timeout_s=a.req.timeout_s,
                             cancel=a.cancel, kernel_id=kid)
    result = AnalyzeResult(status=cap1.status, explanation=cap1.explanation, fixes=cap1.fixes, mode=a.req.mode,
                           gpu_wait_s=a.lease.waited_s)
    light = AnalyzeStage(name="light", sections=STAGE1_SECTIONS, metrics=len(STAGE1_METRICS), capture=cap1,
                         tool="ncu", wall_s=round(time.monotonic() - t0, 3))
    a.stages.append(light)
    _attach_trace(result, a)
    if rep1 is None:
        return NcuLight(result, light)
    p1 = load_profile(rep1, top_lines=0)
    result.report_ids = [store_report(rep1, target=a.prep.display, stage="light")]
    seen = Classified.of(p1, trace_totals(a.traced.summary if a.traced else None), a.req)
    light.wall_s = round(time.monotonic() - t0, 3)  # with parsing the report
    light.kernels = seen.labels()
    if _trace_after(a, len(p1.kernels)):
        _attach_trace(result, a)
    return NcuLight(result, light, p1, seen)


@dataclass
class NcuDeep:
    """Nsight Compute's deep capture: what it was asked for, its account and report, and when it began."""

    plan: StagePlan
    capture: NcuCapture
    report: Path | None
    t0: float


def _ncu_stages(a: Analysis, opts: NcuOptions, trace_first: bool) -> tuple[NcuLight, NcuDeep | None]:
    """Nsight Compute's two stages (after the trace, where it runs first), on the lease."""
    if trace_first and a.traced is None:  # stage 0: the timeline: launches per kernel, real durations, host overhead
        _trace(a, "trace stage: the timeline of every launch (CUPTI)")
    lit = _ncu_light(a, opts)
    if lit.seen is None:
        lit.result.stages, lit.result.notes = a.stages, a.notes
        return lit, None
    plan = stage2_plan(sorted(set(lit.seen.classes.values())))  # stage 2: each top kernel's first launch
    a.note(f"stage 2: {', '.join(plan.sections)} for {len(lit.seen.top)} kernel(s)")
    t0 = time.monotonic()
    cap2, rep2 = _ncu_deep_capture(a, [n for n, _ in lit.seen.top], plan.sections, plan.metrics)
    return lit, NcuDeep(plan, cap2, rep2, t0)


def _ncu_finish(a: Analysis, lit: NcuLight, deep: NcuDeep) -> AnalyzeResult:
    """After the lease: the deep report read and kept, the deep stage's account, then the rules stage."""
    assert lit.profile is not None and lit.seen is not None
    result, deep_p, plan = lit.result, None, deep.plan
    if deep.report is not None:
        deep_p = load_profile(deep.report)
        result.report_ids.append(store_report(deep.report, target=a.prep.display, stage="deep"))
    a.stages.append(AnalyzeStage(name="deep", sections=plan.sections, rule_families=plan.families,
                                 metrics=len(plan.metrics), capture=deep.capture, tool="ncu",
                                 wall_s=round(time.monotonic() - deep.t0, 3),
                                 kernels=[ks[0].name for _, ks in lit.seen.top]))
    result.notes += a.notes + harness_notes(a.ws)
    if deep.capture.status != "ok":
        result.explanation = (f"The deep stage failed ({deep.capture.status}): {deep.capture.explanation} Findings "
                              "below use the light stage only.")
    return _rules_stage(a, result, lit.profile, deep_p, lit.seen.totals, plan.families)


# ---------------------------------------------------------------------------------------- the verb
def _start_evidence(req: AnalyzeRequest, prep: Prepared) -> Future[Evidence] | None:
    """The program's SASS and ptxas evidence is CPU work: it runs while the GPU stages do."""
    if not (req.sass and prep.artifact_id):
        return None
    ex = ThreadPoolExecutor(1, thread_name_prefix="analyze-evidence")
    fut = ex.submit(artifact_evidence, prep.artifact_id)
    ex.shutdown(wait=False)
    return fut


def _light_options(req: AnalyzeRequest) -> NcuOptions:
    opts = NcuOptions(sections=STAGE1_SECTIONS, metrics=STAGE1_METRICS, kernel_regex=req.kernel_regex,
                      launch_skip=req.launch_skip, launch_count=req.launch_count, clock_control=req.clock_control,
                      import_source=False)
    validate_options(opts)
    return opts


def _cupti_first(a: Analysis, trace_first: bool) -> AnalyzeResult | None:
    """Both stages in the target's own run (CUPTI collector): a program's every launch, an eval candidate's
    launches inside the harness' profiler range (its profiled forward calls); None where Nsight Compute must
    measure."""
    if trace_first:
        _trace(a, "trace stage: the timeline of every launch (CUPTI)")
    gated = a.req.mode == "eval"
    a.note("stages 1 and 2: light metrics of each kernel and launch configuration, deep metrics and source "
           "lines of the first ones, in the " + ("candidate's profiled forward calls" if gated else "program's own run")
           + " (CUPTI)")

    def collect(runner: Runner | None) -> CollectorRun:
        return collect_stages(a.prep.argv, a.ws, a.env, timeout_s=a.req.timeout_s, s=a.settings, cancel=a.cancel,
                              launch_count=a.req.launch_count, gated=gated, runner=runner)

    runner = _fork_server_runner(a) if gated and a.req.executor == "auto" else None
    run = collect(runner)
    if runner is not None and not run.usable and run.got is not None and not run.got.ended and not a.cancelled():
        # the collector never finished in the forked job (never loaded, or the job died): once more, spawned
        a.notes += [*run.notes, f"on the evaluation fork server the CUPTI collector measured nothing ({run.nothing}); "
                    "measured again in a fresh interpreter"]
        run = collect(None)
    elif runner is not None:
        a.notes.append("the candidate's run was forked from the evaluation fork server (torch already imported)")
    a.notes += run.notes
    if run.fallback_note is not None:
        a.notes.append(run.fallback_note)
    if run.usable:
        return _analyze_cupti(a, run)
    if a.cancelled():
        return AnalyzeResult(status="cancelled", explanation="Cancelled.", mode=a.req.mode, stages=a.stages,
                             notes=a.notes)
    ncu_binary()
    return None


def _fork_server_runner(a: Analysis) -> Runner | None:
    """An eval candidate's measured job on the evaluation fork server, as `run` runs its evaluations: the
    collector is injected when the forked job initialises CUDA. None where there is no fork server."""
    fs = get_fork_server(HARNESS, forkserver_env(a.settings.home))
    if fs is None:
        return None
    cfg, out = a.ws / "config.json", a.ws / "result.json"

    def run(env: dict[str, str], limits: Limits) -> ProcessResult:
        try:
            return fs.run(cfg=cfg, out=out, cwd=a.ws, env=env, limits=limits, cancel=a.cancel)
        except ForkServerError as e:
            return ProcessResult(argv=harness_argv(cfg, out), returncode=None, stderr=f"the fork server failed: {e}")

    return run


def analyze(req: AnalyzeRequest, settings: Settings | None = None, *, cancel: threading.Event | None = None,
            on_wait: WaitCallback | None = None, progress: Callable[[str], None] | None = None) -> AnalyzeResult:
    check_overrides(req.overrides)
    s = ensure_dirs(settings)
    light_opts = _light_options(req)
    can_trace = req.trace != "never" and tracer_available()
    # both stages' measurements in the target's own run (CUPTI; an eval candidate's gated on its profiled calls),
    # Nsight Compute where that cannot
    cupti_first = req.light != "ncu" and req.kernel_regex is None and req.launch_skip == 0 and tracer_available()
    if not cupti_first:
        ncu_binary()
    trace_first = can_trace and (req.trace == "always" or (req.mode == "program" and not cupti_first))
    t_all = time.monotonic()
    with Workspace(prefix="analyze-") as ws:
        prep = prepare_target(req, ws.path, s)
        evidence = _start_evidence(req, prep)
        with gpu_lease(req.gpu, cancel, on_wait) as lease:
            a = Analysis(req=req, settings=s, prep=prep, ws=ws.path, lease=lease, cancel=cancel,
                         note=progress or (lambda _m: None), can_trace=can_trace, evidence=evidence, t_all=t_all)
            if cupti_first:
                done = _cupti_first(a, trace_first)
                if done is not None:
                    return done
                # under Nsight Compute: a program's trace first, unless it ran already; an eval candidate's as before
                trace_first = can_trace and (req.mode == "program" or req.trace == "always")
            lit, deep = _ncu_stages(a, light_opts, trace_first)
        if deep is None:
            return lit.result
        return _ncu_finish(a, lit, deep)  # rules over the merged profiles, with SASS/ptxas evidence
