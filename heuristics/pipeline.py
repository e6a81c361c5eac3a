"""analyze's two-stage pipeline, its pure decisions: what each stage measures, what the class of a kernel
asks of the deep stage, how stage profiles and evidence merge, and the rules stage that turns them into
per-kernel diagnoses.

Stage 1 (light) measures the speed of light, launch configuration, occupancy and roofline counters of each
kernel (:data:`STAGE1_METRICS`); :func:`kernelscope.heuristics.classify.classify` gives each top kernel a
class, and :func:`stage2_plan` turns the classes into the deep stage's sections, rule families and metrics.
The rules stage (:func:`diagnose_stages`) merges each top kernel's light and deep profiles, runs every rule
with the SASS and ptxas evidence and ranks the findings so that those explaining the class lead.

Pure functions over :mod:`kernelscope.models`: the measuring lives in :mod:`kernelscope.measure`, the
wiring in :mod:`kernelscope.tools.analyze`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import PurePath
from typing import Any, NamedTuple

from kernelscope.heuristics import REGISTRY, load_all, merge, run_rules
from kernelscope.heuristics.classify import REFINE_METRICS, classify
from kernelscope.heuristics.registry import SEVERITY_RANK, explains
from kernelscope.models import (
    Finding,
    KernelDiagnosis,
    KernelProfile,
    KernelResources,
    KernelSassStats,
    Profile,
    TraceSummary,
)

Overrides = Mapping[str, Mapping[str, float]]

# ------------------------------------------------------------------------------------------ stage 1
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
# the light stage's hardware metrics when the CUPTI collector measures them (the rest of STAGE1_METRICS are
# ncu's launch and device metrics, which kernelscope.measure.collector computes from the launch configuration)
COLLECTOR_METRICS = [m for m in STAGE1_METRICS if not m.startswith(("launch__", "device__", "sm__maximum_warps"))]
TRACE_AFTER_LAUNCHES = 16  # a measuring run that saw this many launches calls the trace stage (trace="auto")

# ------------------------------------------------------------------------------------------ stage 2
STAGE2_ALWAYS = ["SpeedOfLight", "LaunchStats", "Occupancy"]
# opportunities whatever the class: a product on FMAs that tensor cores would run (tensor), global accesses
# narrower than a vector (memory); their metrics are collected for every class (no further sections)
OPPORTUNITY_FAMILIES = ["tensor", "memory"]
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


class StagePlan(NamedTuple):
    """What the deep stage measures for kernels of some classes."""

    sections: list[str]  # Nsight Compute sections
    families: list[str]  # rule families whose findings the classes call for
    metrics: list[str]  # the metrics those families' rules read


def stage2_plan(classes: list[str]) -> StagePlan:
    """Sections, rule families and metrics for the deep stage of kernels of these classes."""
    load_all()
    sections: list[str] = list(STAGE2_ALWAYS)
    families: list[str] = []
    for c in classes:
        secs, fams = STAGE2.get(c, STAGE2["mixed"])
        sections += [x for x in secs if x not in sections]
        families += [x for x in [*fams, *OPPORTUNITY_FAMILIES] if x not in families]
    # a kernel with both sides near their peaks: what tells one limit from two (classify.REFINE_METRICS)
    metrics: list[str] = list(REFINE_METRICS) if any(STAGE2.get(c) is None or c == "mixed" for c in classes) else []
    for r in REGISTRY.values():
        if r.scope == "ncu" and r.family in families:
            metrics += [m for m in r.metrics if m not in metrics]
    return StagePlan(sections, families, metrics)


# ------------------------------------------------------------------------------------------ kernels
Totals = dict[str, tuple[int, float]]  # mangled name -> (launches, total ns), from a trace or the collector
Groups = list[tuple[str, list[KernelProfile]]]  # launches by kernel (mangled name), by total time


def trace_totals(summary: TraceSummary | None) -> Totals | None:
    """Launch counts and summed durations per kernel (by mangled name) from the trace stage's summary."""
    if summary is None:
        return None
    return {k.mangled_name: (k.count, k.total_ns) for k in summary.kernels if k.mangled_name}


def longest(launches: list[KernelProfile]) -> KernelProfile:
    """The launch that represents a kernel: its longest profiled one."""
    return max(launches, key=lambda k: k.duration_ns or 0.0)


def launch_count(name: str, ks: list[KernelProfile], totals: Totals | None) -> int:
    return totals[name][0] if totals and name in totals else len(ks)


def total_ns(name: str, ks: list[KernelProfile], totals: Totals | None) -> float:
    return totals[name][1] if totals and name in totals else sum(k.duration_ns or 0.0 for k in ks)


def group_launches(profile: Profile, totals: Totals | None = None) -> Groups:
    """Launches grouped by kernel, by total time: the trace's (every launch, unserialized) where it
    ran, else the profiled launches'."""
    groups: dict[str, list[KernelProfile]] = {}
    for k in profile.kernels:
        groups.setdefault(k.mangled_name, []).append(k)
    return sorted(groups.items(), key=lambda kv: -total_ns(kv[0], kv[1], totals))


MIN_DIAGNOSED = 3  # by default at least this many kernels are diagnosed (the longest), however small their share
MAX_DIAGNOSED = 20  # and at most this many


def time_shares(groups: Groups, totals: Totals | None) -> dict[str, float]:
    """Each kernel's share (%) of the summed GPU time of all kernels."""
    times = {n: total_ns(n, ks, totals) for n, ks in groups}
    whole = sum(times.values())
    return {n: 100.0 * t / whole if whole else 0.0 for n, t in times.items()}


def top_groups(groups: Groups, totals: Totals | None, deep_kernels: int | None = None,
               min_share_pct: float = 5.0) -> Groups:
    """The kernels diagnosed in depth: the ``deep_kernels`` longest (by total time) where given, else every kernel
    taking at least ``min_share_pct`` of the GPU time, at least the MIN_DIAGNOSED longest, at most MAX_DIAGNOSED."""
    if deep_kernels is not None:
        return groups[:deep_kernels]
    shares = time_shares(groups, totals)
    significant = sum(1 for n, _ in groups if shares[n] >= min_share_pct)
    return groups[:min(MAX_DIAGNOSED, max(MIN_DIAGNOSED, significant))]


def coverage_note(groups: Groups, top: Groups, totals: Totals | None, min_share_pct: float = 5.0) -> str | None:
    """What the answer says when a kernel taking at least ``min_share_pct`` of the GPU time was not diagnosed:
    which kernels, their shares, and how to ask for them; None when every such kernel was."""
    shares = time_shares(groups, totals)
    done = {n for n, _ in top}
    missed = [(ks[0].name, shares[n]) for n, ks in groups if n not in done and shares[n] >= min_share_pct]
    if not missed:
        return None
    listed = ", ".join(f"{name} ({pct:.0f}%)" for name, pct in missed[:10])
    return (f"{len(missed)} kernel(s) taking {min_share_pct:g}% or more of the GPU time each were not diagnosed, "
            f"only listed under other_kernels: {listed}. They fell past deep_kernels={len(top)}: leave deep_kernels "
            f"unset (every kernel over min_time_share_pct, up to {MAX_DIAGNOSED}), raise it, or pick them with "
            "kernel_regex.")


def classes_of(top: Groups) -> dict[str, str]:
    """The bottleneck class of each top kernel (of its longest launch), by mangled name."""
    return {name: classify(longest(ks)).cls for name, ks in top}


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


# ------------------------------------------------------------------------------------------ source files
# a job's folder: a workspace (compile-, eval-, analyze- ...), an entry of the build cache (an extension build, a
# source's NVRTC cubins); a path in one of them is its path there (a job's folder lives only as long as the job)
_JOB_FOLDER = re.compile(r"^(?:.*[/\\])?(?:workspaces|build-cache[/\\](?:torch-extensions|nvrtc))[/\\]"
                         r"(?P<job>[^/\\]+)[/\\](?P<rel>.+)$")


def user_file(path: str, shown: str | None, private: Sequence[str] = ()) -> str:
    """The file a profile names as the user knows it: a file inside one of the job's ``private`` folders, or in
    any job's folder of the server (a workspace: an eval candidate's, where NVRTC names its source
    ``<kernel>.cu``; an extension build, where ``load_inline`` writes ``<name>/cuda.cu``) is its path there, and
    the compile workspace's copy of the compiled source (``.../workspaces/compile-<id>/<name>``) is the path or
    file name the user gave (``shown``); any other path is left as it is."""
    for root in private:
        prefix = root.rstrip("/\\") + "/"
        if len(prefix) > 1 and path.startswith(prefix):
            return path[len(prefix):]
    m = _JOB_FOLDER.match(path)
    if m is None:
        return path
    rel = m.group("rel")
    return shown if shown is not None and m.group("job").startswith("compile-") and rel == PurePath(shown).name \
        else rel


def user_sources(profile: Profile, shown: str | None, private: Sequence[str] = ()) -> Profile:
    """``profile`` with every source line's file named as :func:`user_file` names it."""
    kernels = [k.model_copy(update={"source_lines": [s.model_copy(update={"file": user_file(s.file, shown, private)})
                                                     for s in k.source_lines]}) for k in profile.kernels]
    return profile.model_copy(update={"kernels": kernels})


# ------------------------------------------------------------------------------------------ rules stage
# which rule families explain a class: among findings of equal severity, these lead
CLASS_FAMILIES: dict[str, set[str]] = {
    "memory-bound": {"memory"},
    "compute-bound": {"compute", "tensor", "control", "instructions", "stalls"},
    "latency-bound": {"latency", "stalls", "memory", "control"},
    "occupancy-limited": {"occupancy", "launch"},
    "launch/tail-limited": {"launch", "occupancy"},
}


# the family a class is named after, where the classifier picked it over another family's explanation: a partial
# wave or a small grid explains idle SMs before occupancy does (classify's order), so its finding goes first
CLASS_PRIMARY: dict[str, str] = {"launch/tail-limited": "launch", "occupancy-limited": "occupancy"}


def rank_for_class(findings: list[Finding], cls: str) -> list[Finding]:
    """Most severe first; at equal severity, findings that explain the kernel's bottleneck class (the
    limiter the roofline names) before the rest, the family the class is named after first among them
    (CLASS_PRIMARY), then by estimated impact."""
    fams, primary = CLASS_FAMILIES.get(cls), CLASS_PRIMARY.get(cls)

    def place(f: Finding) -> int:
        if fams is None:
            return 0
        return 0 if f.family == primary else 1 if f.family in fams else 2
    return sorted(findings, key=lambda f: (SEVERITY_RANK.get(f.severity, 9), place(f), -(f.impact or 0.0)))


def measured_out(k: KernelProfile) -> set[str]:
    """Static (SASS, ptxas) rules whose claim a profile rule measured on this kernel: the profile rule supersedes
    them and every metric it reads was captured, so its finding, or its silence, is the answer."""
    out: set[str] = set()
    for r in REGISTRY.values():
        if r.scope == "ncu" and r.supersedes and r.metrics and all(k.num(m) is not None for m in r.metrics):
            out |= {s for s in r.supersedes if REGISTRY[s].scope in ("sass", "ptxas")}
    return out


def diagnose_kernels(kernels: list[KernelProfile], *, context: dict[str, Any] | None = None,
                     overrides: Overrides | None = None,
                     extra: dict[str, list[Finding]] | None = None) -> list[KernelDiagnosis]:
    """Class and ranked findings for each kernel (ncu rules, plus per-kernel extra findings)."""
    load_all()
    out = []
    for k in kernels:
        found = run_rules("ncu", k, overrides=overrides, context=context)
        bottleneck = classify(k)
        # a static finding the profile measured gives way, unless it names the cause of a measured one
        static = [f for f in (extra or {}).get(k.mangled_name, [])
                  if f.rule not in measured_out(k) or any(explains(f, g) for g in found)]
        found = rank_for_class(merge(found + static), bottleneck.cls)
        out.append(KernelDiagnosis(
            id=k.id, name=k.name, mangled_name=k.mangled_name, duration_ns=k.duration_ns, grid_size=k.grid_size,
            block_size=k.block_size, registers_per_thread=k.registers_per_thread, bottleneck=bottleneck,
            findings=found, top_stalls=dict(list(k.stall_reasons.items())[:4]),
            hot_lines=[s.label for s in k.source_lines[:3]],
            ncu_rule_titles=[r.title for r in k.ncu_rules if r.title and r.type in ("warning", "optimization")]))
    return out


def _evidence_findings(names: set[str], sass: list[KernelSassStats], ptxas: list[KernelResources],
                       overrides: Overrides | None, ctx: dict[str, Any]) -> dict[str, list[Finding]]:
    """The SASS and ptxas rules' findings of the top kernels (``names``); their evidence goes into ``ctx``."""
    extra: dict[str, list[Finding]] = {}
    for st in sass:
        if st.mangled_name in names:
            ctx["sass"][st.mangled_name] = st
            extra.setdefault(st.mangled_name, []).extend(run_rules("sass", st, overrides=overrides))
    for kr in ptxas:
        if kr.mangled_name in names:
            ctx["ptxas"][kr.mangled_name] = kr
            extra.setdefault(kr.mangled_name, []).extend(run_rules("ptxas", [kr], overrides=overrides))
    return extra


def diagnose_stages(light: Profile, deep: Profile | None, *, deep_kernels: int | None = None,
                    min_share_pct: float = 5.0,
                    sass: list[KernelSassStats] | None = None, ptxas: list[KernelResources] | None = None,
                    overrides: Overrides | None = None,
                    totals: Totals | None = None) -> tuple[list[KernelDiagnosis], Groups]:
    """The analysis proper, from the two captures: launches grouped by kernel, the top kernels' light
    and deep profiles merged, every rule run with SASS/ptxas evidence, findings merged and ranked.
    The kernels diagnosed are :func:`top_groups`'. Returns the diagnoses and the launch groups (by total time)."""
    load_all()
    groups = group_launches(light, totals)
    top = top_groups(groups, totals, deep_kernels, min_share_pct)
    deep_by: dict[str, KernelProfile] = {}
    for k in deep.kernels if deep is not None else []:
        deep_by.setdefault(k.mangled_name, k)
    ctx: dict[str, Any] = {"sass": {}, "ptxas": {},
                           "launches": {n: launch_count(n, ks, totals) for n, ks in groups},
                           "total_ns": {n: total_ns(n, ks, totals) for n, ks in groups}}
    extra = _evidence_findings({n for n, _ in top}, sass or [], ptxas or [], overrides, ctx)
    merged = [merge_profiles(longest(ks), deep_by.get(n)) for n, ks in top]
    ctx["kernels"] = {k.mangled_name: k for k in merged}
    diags = diagnose_kernels(merged, context=ctx, overrides=overrides, extra=extra)
    for d, (n, _) in zip(diags, top, strict=True):
        d.launches = ctx["launches"][n]
        d.total_duration_ns = ctx["total_ns"][n]
    return diags, groups


def ncu_advice_missing(kernels: list[str], unread: Sequence[str] = ()) -> str | None:
    """What the answer says of kernels the CUPTI collector measured without Nsight Compute: its own advice (rule
    results) is missing for them, what that advice is, and how to get it; and, for those of them whose SASS could
    not be read (``unread``: no module they ran from, or one whose code is not what was measured), the per-line
    reading of it that is missing too. None for no such kernel."""
    if not kernels:
        return None
    named = set(unread)
    unread = [k for k in kernels if k in named]
    own = ("kernelscope's own rules above cover the same ground from the same metrics and the SASS behind each "
           "source line, read from the binary each kernel ran from." if not unread else
           "kernelscope's own rules above cover the same ground from the same metrics, except where they read the "
           f"SASS behind each source line, which this run could not give for {_names(unread)} (the module it ran "
           "from could not be read): a warp spinning on other blocks' writes (a decoupled look-back's barrier wait "
           "told from badly placed barriers), loads chained on earlier loads, a gather or scatter spread by its "
           "data, an atomic's own scattered sectors, and the wait of a deferred barrier sampled instructions after "
           "it.")
    return (f"Nsight Compute's own advice is missing for {_names(kernels)}: they were measured by the CUPTI collector "
            "in the program's own run, with no Nsight Compute process, so ncu_rule_titles is empty (no "
            "guided-analysis rule results: its occupancy, launch, memory-access and warp-state advice with estimated "
            "speedups), and the memory tables of its MemoryWorkloadAnalysis section are not there. "
            f"{own} Call analyze with light='ncu' to measure under Nsight Compute and add its advice"
            + ("" if not unread else " and that reading") + " (one profiler run more).")


def _names(kernels: Sequence[str], limit: int = 10) -> str:
    return ", ".join(kernels[:limit]) + (f" and {len(kernels) - limit} more" if len(kernels) > limit else "")


def other_kernels(groups: Groups, diagnosed: int, totals: Totals | None, limit: int = 20) -> list[str]:
    """The kernels past the ``diagnosed`` top ones, as the answer lists them: name, launches, total time and share
    of the GPU time."""
    shares = time_shares(groups, totals)
    return [f"{ks[0].name} ({launch_count(n, ks, totals)} launches, {total_ns(n, ks, totals) / 1e3:.1f} us, "
            f"{shares[n]:.1f}% of GPU time)" for n, ks in groups[diagnosed:][:limit]]


def system_findings(summary: TraceSummary, facts: Any, overrides: Overrides | None = None) -> list[Finding]:
    """The system rules over a timeline's summary and facts (counts the summary does not list), ranked."""
    load_all()
    return merge(run_rules("trace", summary, overrides=overrides, context={"facts": facts}))
