"""The `run` tool's answer in eval mode: the harness's RESULT JSON (or a job that wrote none: a timeout,
a crash) as a typed ``EvalResult``, and the account of the evaluation's time outside the harness."""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import ValidationError

from kernelscope.models import (
    CheatFlag,
    Correctness,
    EnergyReading,
    EvalResult,
    FlushProbe,
    HostCover,
    Speedup,
    TimingStats,
    TrialResult,
)
from kernelscope.sandbox.process import ProcessResult


def assemble(path: Path, proc: ProcessResult, timeout_s: float) -> tuple[EvalResult, dict | None]:
    """The answer from a finished job, and the harness's clock marks when it wrote a result."""
    tail = proc.stderr[-4000:] if proc.stderr else None
    if proc.timed_out:
        return EvalResult(verdict="invalid", status="timeout", stderr_tail=tail,
                          error=f"the evaluation did not finish within {timeout_s:.0f} s and was killed (a hung "
                                "kernel or an endless loop); the GPU is free again."), None
    if proc.cancelled:
        return EvalResult(verdict="invalid", status="error", error="the evaluation was cancelled",
                          stderr_tail=tail), None
    if not path.is_file():
        why = proc.describe_failure()
        return EvalResult(verdict="incorrect", status="crashed", stderr_tail=tail,
                          error=f"the evaluation process {why} before writing a result (a crash in the candidate's "
                                "code or kernel: illegal address, trap, segfault or abort). stderr has the "
                                "details; the next job gets a fresh process."), None
    try:
        raw = json.loads(path.read_text())
    except ValueError as e:
        return EvalResult(verdict="invalid", status="error", error=f"unreadable harness result: {e}",
                          stderr_tail=tail), None
    return parse_harness_result(raw, stderr_tail=tail), raw.get("clock")


def overhead(marks: dict[str, float], clock: dict | None, answered: float) -> dict[str, float]:
    """The evaluation's time outside the harness, from the caller's wall-clock ``marks`` (start, lease: the
    lease asked for, submit: the job handed to the process runner) and the harness's (child_start: the forked
    job's first step, main_start, written: the result on disk): ``prepare`` (sources, workspace, any build),
    ``lease`` (asking for and waiting on the worker), ``spawn`` (the job handed over until its first step; with
    no fork server, the interpreter's start and imports too), ``setup`` (the job's limits, namespace and
    environment), ``hand_off`` (the result written until answered). Empty where the job wrote no marks."""
    if not clock or clock.get("main_start") is None or clock.get("written") is None or "submit" not in marks:
        return {}
    first = clock.get("child_start") or clock["main_start"]
    parts = {"prepare": marks["lease"] - marks["start"], "lease": marks["submit"] - marks["lease"],
             "spawn": first - marks["submit"], "setup": clock["main_start"] - first,
             "hand_off": answered - clock["written"]}
    return {k: round(max(v, 0.0), 4) for k, v in parts.items()}


def parse_harness_result(raw: dict, *, stderr_tail: str | None = None) -> EvalResult:
    """The harness's JSON -> EvalResult (typed, with the speedups in a list)."""
    corr = raw.get("correctness")
    correctness = None
    if corr:
        correctness = Correctness(
            correct=bool(corr.get("correct")), trials=corr["trials"], passed=corr["passed"], policy=corr["policy"],
            tolerances=corr.get("tolerances", {}), max_abs_error=corr.get("max_abs_error"),
            max_rel_error=corr.get("max_rel_error"),
            trial_results=[TrialResult(trial=t["trial"], ok="error" not in t, error=t.get("error"),
                                       max_abs_error=t.get("max_abs_error"), max_rel_error=t.get("max_rel_error"))
                           for t in corr.get("trial_results", [])],
        )
    speedups = [Speedup(baseline=k, **v) for k, v in (raw.get("speedup") or {}).items()]  # type: ignore[arg-type]
    try:
        return EvalResult(
            verdict=raw.get("verdict", "invalid"), status=raw.get("status", "error"), error=raw.get("error"),
            device=raw.get("device"), gpu=raw.get("gpu"), torch=raw.get("torch"), correctness=correctness,
            timings={k: TimingStats(**v) for k, v in (raw.get("timings") or {}).items()},
            speedups=speedups, candidate_synced_us_per_call=raw.get("candidate_synced_us_per_call"),
            flush_probe=FlushProbe(**raw["flush_probe"]) if raw.get("flush_probe") else None,
            host_cover=HostCover(**raw["host_cover"]) if raw.get("host_cover") else None,
            energy={k: EnergyReading(**v) for k, v in (raw.get("energy") or {}).items()},
            flags=[CheatFlag(**f) for f in raw.get("flags", [])], notes=raw.get("notes", []),
            ops=raw.get("ops") or {}, harness_wall_s=raw.get("harness_wall_s"),
            phases_s=raw.get("phases_s") or {}, traceback=raw.get("traceback"), samples_us=raw.get("samples_us"),
            gpu_memory_peak_mib=raw.get("gpu_memory_peak_mib"),
            stderr_tail=stderr_tail if raw.get("status") != "ok" else None,
        )
    except ValidationError as e:
        return EvalResult(verdict="invalid", status="error", error=f"malformed harness result: {e}",
                          stderr_tail=stderr_tail)
