"""analyze's measurements of a program or an eval candidate in its own run: what the CUPTI collector is asked
for (the light metrics of each kernel and launch configuration, and of the first :data:`DEEP_MAX` of them every
rule family's metrics, the stall reasons and two source passes), the run itself (for an eval candidate, gated
on the harness' profiler range, so only the candidate's profiled forward calls are measured), and the launch
totals it gives where no trace ran.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelscope.config import Settings
from kernelscope.errors import NotAvailable
from kernelscope.heuristics.pipeline import COLLECTOR_METRICS, STAGE2, Groups, Totals, stage2_plan, user_file
from kernelscope.measure import collector
from kernelscope.measure.collector import SOURCE_TOTALS, STALL_METRICS, Collected, DeepRequest
from kernelscope.models import Profile
from kernelscope.sandbox.process import ProcessResult

DEEP_MAX = 16  # deep launches (metrics and source passes) of one CUPTI run; later configurations get the light ones
CUPTI_DEEP_SECTIONS = ["rule metrics of every family", "WarpStateStats (stall reasons)",
                       "SourceCounters (PC sampling, SASS metrics)"]


def deep_metrics() -> list[str]:
    """What the one CUPTI run measures of each deep launch besides the light metrics: every rule family's
    hardware metrics and the warp stall reasons (WarpStateStats); the source-derived ones come from its source
    passes."""
    rules = stage2_plan(list(STAGE2)).metrics
    skip = {*SOURCE_TOTALS, "smsp__inst_executed_op_bar.sum"}  # the last: the range profiler refuses it on the H100
    return [m for m in dict.fromkeys([*rules, *STALL_METRICS])
            if not m.startswith(("launch__", "device__")) and m not in COLLECTOR_METRICS and m not in skip]


def collector_request() -> DeepRequest:
    """The deep launches' part of analyze's CUPTI run (every kernel, at most DEEP_MAX configurations); the light
    part is COLLECTOR_METRICS. tests/fixtures/collector/capture.py captures with exactly this."""
    return DeepRequest(kernels=["*"], metrics=deep_metrics(), max_launches=DEEP_MAX)


@dataclass
class CollectorRun:
    """The collector's run for both stages: what it collected (None where it could not run), whether that
    can stand for both stages, the notes for the answer and the run's wall time."""

    got: Collected | None
    usable: bool = False
    notes: list[str] = field(default_factory=list)
    wall_s: float = 0.0
    nothing: str | None = None  # why the run measured nothing, where it ran and did (Nsight Compute then measures)

    @property
    def fallback_note(self) -> str | None:
        """The answer's note where Nsight Compute measures instead of a run that measured nothing."""
        if self.nothing is None:
            return None
        return f"the CUPTI collector measured nothing ({self.nothing}); Nsight Compute measured instead"

    @property
    def deep_s(self) -> float:
        """The deep stage's share of the run: its launches' passes and source passes."""
        if self.got is None:
            return 0.0
        return (sum(src.wall_ns or 0.0 for src in self.got.sources)
                + sum(ln.wall_ns or 0.0 for ln in self.got.launches if ln.deep)) / 1e9


def collect_stages(argv: list[str], ws: Path, env: Mapping[str, str], *, timeout_s: float, s: Settings,
                   cancel: threading.Event | None, launch_count: int | None, gated: bool = False,
                   runner: collector.Runner | None = None) -> CollectorRun:
    """Both stages' measurements in one run of the program (CUPTI collector): the first launch of each kernel
    and launch configuration with the light metrics, and the first DEEP_MAX of them also with every rule
    family's metrics, the stall reasons and the source passes (PC sampling, SASS metrics). ``gated``: only
    the launches inside the process's profiler range (the eval harness' profiled forward calls). ``runner``:
    how the job runs instead of a spawned ``argv`` (the eval harness' fork server)."""
    t0 = time.monotonic()
    try:
        proc, got = collector.run_collector(argv, ws, dict(env), COLLECTOR_METRICS, timeout_s, s, cancel,
                                            max_launches=max(launch_count or 64, 1), deep=collector_request(),
                                            gated=gated, runner=runner)
    except NotAvailable as e:
        return CollectorRun(None, notes=[f"the CUPTI collector is not available here ({e}); Nsight Compute "
                                         "measured instead"])
    run = CollectorRun(got, notes=list(got.notes), wall_s=time.monotonic() - t0)
    if proc.cancelled:
        return run
    if got.refused:
        run.notes.append(f"this GPU's CUPTI does not know {', '.join(got.refused)}")
    if not got.launches or proc.timed_out or proc.returncode != 0:
        run.nothing = _why_nothing(proc, got)
        return run
    if got.errors:
        run.notes.append("CUPTI collector: " + "; ".join(got.errors[:3]))
    run.usable = True
    return run


def _why_nothing(proc: ProcessResult, got: Collected) -> str:
    if proc.timed_out or proc.returncode != 0:
        return f"the program {proc.describe_failure()}"
    if got.errors:
        return "; ".join(got.errors[:3])
    if got.gated and got.ended and got.gate_opened == 0:
        return ("the profiler range around the candidate's forward calls never opened: the harness stopped "
                "before them, or CUDA's profiler start was not seen")
    if got.gated and got.gate_opened > 0 and not got.launches_seen:
        return "the candidate launched no kernel in its profiled forward calls"
    return "no launch was profiled"


def collector_totals(c: Collected, profile: Profile) -> Totals:
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


def deep_incomplete(got: Collected, top: Groups) -> list[str]:
    """The top kernels whose first launch the CUPTI run did not measure deep (with its source passes)."""
    deep = {ln.name for ln in got.launches if ln.deep}
    sourced = {src.name for src in got.sources if src.sampled or src.counted}
    return [n for n, _ in top if n not in deep or n not in sourced]


def line_texts(got: Collected, roots: list[Path], *, max_files: int = 16,
               max_bytes: int = 4 << 20) -> dict[str, list[str]]:
    """The source files the deep launches' line information names, by that name, for the code of their hot
    lines; only files that resolve (links followed) inside ``roots`` (an eval candidate's workspace and its
    extension build folder, where ``load_inline`` writes the CUDA source it compiles), at most ``max_files``
    of at most ``max_bytes`` each. The names come from the candidate's cubin, so nothing else is read."""
    bases = [r.resolve() for r in roots if r.is_dir()]
    out: dict[str, list[str]] = {}
    for name in dict.fromkeys(pc.file for src in got.sources for pc in src.pcs if pc.file and pc.line > 0):
        if len(out) >= max_files:
            break
        rel = user_file(name, None)  # a file another job left (run's build, reused): the same name in this job's
        paths = [Path(name), *(b / rel for b in bases if rel != name)] if Path(name).is_absolute() else \
            [b / name for b in bases]
        for path in paths:
            try:
                path = path.resolve()
                if any(path.is_relative_to(b) for b in bases) and path.is_file() and path.stat().st_size <= max_bytes:
                    out[name] = path.read_text(errors="replace").splitlines()
                    break
            except (OSError, ValueError, RuntimeError):
                continue
    return out
