"""The run tool's answers: eval mode (correctness, timing, speedup, energy, cheats) and program mode."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

Verdict = Literal["faster", "slower", "inconclusive", "incorrect", "invalid"]


class TimingStats(BaseModel):
    runs: int
    median_us: float
    mean_us: float
    min_us: float
    max_us: float
    p10_us: float
    p90_us: float
    iqr_us: float = Field(description="Interquartile range (p75 - p25).")
    cv_pct: float = Field(description="Coefficient of variation, 100 * stdev / mean.")


class FlushProbe(BaseModel):
    """The L2 flush before every timed call (a memset) doubles as a probe of other memory traffic on the GPU."""
    flush_mb: int
    quiet_us: float = Field(description="The flush's quiet time: the 10th percentile over the timed rounds.")
    median_us: float
    max_us: float
    rounds: int = Field(description="Timed rounds (one call of each side per round).")
    rounds_slow: int = Field(description="Rounds whose flush ran more than 10% over its quiet time.")
    rounds_dropped: int = Field(description="Rounds left out of the timings: the slow ones and the round after "
                                            "each (none when fewer than min_runs and fewer than half stayed quiet: "
                                            "then the note says so).")


class HostCover(BaseModel):
    """Before each timed call (and its L2 flush) the harness enqueues a wait on the GPU that lasts until the
    host has issued the call, so the timed window holds GPU time, not the host's launch overhead (as
    nvbench's blocking kernel does). The host's own times are here."""
    cover_us: dict[str, float] = Field(description="The wait per side (µs): twice the call's 90th-percentile "
                                                   "host time in the warm-up plus 30 µs, at most 1000; 0: off.")
    host_median_us: dict[str, float] = Field(description="Host time to issue the wait, the flush, the events and "
                                                         "one call, median per side.")
    host_p90_us: dict[str, float]
    call_median_us: dict[str, float] = Field(description="Host time of the call alone (the forward issuing its "
                                                         "work), median per side.")
    calls_over_cover: dict[str, int] = Field(description="Timed calls whose host time exceeded the wait plus the "
                                                         "flush: there the GPU waited inside the timed window.")


class Speedup(BaseModel):
    baseline: Literal["eager", "compile"]
    speedup: float = Field(description="median(reference) / median(candidate).")
    ci_low: float = Field(description="95% bootstrap confidence interval, lower end.")
    ci_high: float
    verdict: Literal["faster", "slower", "inconclusive"]


class TrialResult(BaseModel):
    trial: int
    ok: bool
    error: str | None = None
    max_abs_error: float | None = None
    max_rel_error: float | None = None


class Correctness(BaseModel):
    correct: bool
    trials: int
    passed: int
    policy: str = Field(description="Tolerance policy: strict, default or kernelbench.")
    tolerances: dict[str, dict[str, float]] = Field(
        default_factory=dict, description="dtype -> {rtol, atol} applied (integers and bools compare exactly).")
    max_abs_error: float | None = None
    max_rel_error: float | None = None
    trial_results: list[TrialResult] = Field(default_factory=list)
    rules: str = Field(
        "Fresh seeded random inputs each trial; NaN/Inf always fail; shapes and dtypes must match; "
        "memory is poisoned with NaN before each candidate call; inputs must not be modified.",
    )


class EnergyReading(BaseModel):
    available: bool
    calls: int | None = None
    window_s: float | None = None
    energy_j: float | None = None
    joules_per_call: float | None = None
    avg_power_w: float | None = None
    note: str | None = None


class CheatFlag(BaseModel):
    id: str = Field(description="e.g. reference-ops, library-ops, fallback-to-torch, side-stream, timer-tampering, "
                                "cached-output, pointer-cache, lazy-output, background-threads, l2-persistence, "
                                "distribution, non-contiguous-inputs, speed-of-light, precision-downgrade, "
                                "global-state, implausible-speedup")
    severity: Literal["invalid", "review"]
    message: str
    evidence: dict[str, object] = Field(default_factory=dict)


class EvalResult(BaseModel):
    verdict: Verdict
    status: Literal["ok", "error", "invalid", "crashed", "timeout", "harness-error", "too-large"] = Field(
        description="ok; error: the candidate (or the reference) raised; harness-error: the harness itself "
                    "failed, which says nothing about the candidate; too-large: the problem does not fit this GPU "
                    "with these settings (the error has the numbers and the fix).")
    error: str | None = Field(None, description="What went wrong, for any status but ok.")
    device: str | None = None
    gpu: str | None = None
    torch: str | None = None
    correctness: Correctness | None = None
    timings: dict[str, TimingStats] = Field(
        default_factory=dict, description="'candidate', 'reference' (eager), 'reference_compile' if asked.")
    speedups: list[Speedup] = Field(default_factory=list)
    candidate_synced_us_per_call: float | None = None
    flush_probe: FlushProbe | None = Field(None, description="Other memory traffic seen while timing (GPU only).")
    host_cover: HostCover | None = Field(None, description="The host's time per timed call and the GPU-side wait "
                                                           "that keeps it out of the timings (GPU only).")
    energy: dict[str, EnergyReading] = Field(default_factory=dict)
    flags: list[CheatFlag] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    ops: dict[str, list[str]] = Field(default_factory=dict, description="aten ops seen in one forward of each.")
    wall_s: float = Field(0.0, description="Whole evaluation, process start to result.")
    harness_wall_s: float | None = None
    phases_s: dict[str, float] = Field(default_factory=dict, description="Harness time per phase (seconds).")
    gpu_memory_peak_mib: int | None = Field(
        None, description="The most GPU memory PyTorch's caching allocator held during the job (MiB; GPU jobs only): "
                          "reference, candidate, inputs and the harness' copies. The CUDA context and memory allocated "
                          "outside PyTorch (CuPy, cudaMalloc in an extension) are not in it.")
    overhead_s: dict[str, float] = Field(
        default_factory=dict, description="Time outside the harness (seconds): prepare (sources, workspace, build), "
                                          "lease (asking for and waiting on the worker), spawn (job handed over to "
                                          "its first step), setup (its limits and environment), hand_off (result "
                                          "written to answered).")
    samples_us: dict[str, list[float]] | None = Field(None, description="Every timed sample per side (µs), when "
                                                                        "keep_samples was asked for.")
    gpu_wait_s: float = Field(0.0, description="Time spent queued for the GPU lease.")
    build_s: float | None = Field(
        None, description="Build on a CPU build worker before taking the GPU (load_inline extensions; fast-path "
                          "NVRTC cubins while every GPU is busy), if any.")
    build_note: str | None = None
    executor: str | None = Field(
        None, description="How the job started: fork-server (a fork of the warm evaluation server, in its own sandbox "
                          "where isolation is on) or spawn (a fresh interpreter; then `notes` says why, when the fork "
                          "server was wanted).")
    isolation: str | None = Field(None, description="The sandbox the job ran in (bubblewrap ...), None without one.")
    worker: str | None = Field(None, description="The evaluation pool's worker that ran it: gpu<N> (N: its "
                                                 "CUDA_VISIBLE_DEVICES value), cpu<N>, or ray:<node>/gpu<N>.")
    stderr_tail: str | None = None
    traceback: str | None = None


class KernelTime(BaseModel):
    name: str
    launches: int
    total_ns: float
    mean_ns: float
    min_ns: float
    max_ns: float


class ProgramResult(BaseModel):
    artifact_id: str
    exit_status: int | None
    signal_name: str | None = None
    crashed: bool = False
    timed_out: bool = False
    stdout: str = ""
    stderr: str = ""
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    wall_s: float
    kernel_times: list[KernelTime] | None = Field(
        None, description="Per-kernel GPU durations (ncu gpu__time_duration, serialized launches), if asked.")
    kernel_times_note: str | None = None
    gpu_wait_s: float = 0.0


class RunResult(BaseModel):
    """The run tool's answer: exactly one of ``eval`` or ``program``, by ``mode``."""

    mode: Literal["eval", "program"]
    eval: EvalResult | None = None
    program: ProgramResult | None = None
