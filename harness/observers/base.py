"""The observer interface: pluggable measurements around the timed rounds, the way Kernel Tuner's
benchmark observers work. An observer is registered with the job, gets hooks before and after the
warm-up, around each timed call and round, and after the timing, and contributes fields to the result.
Every hook is a no-op here: an observer overrides the ones it needs."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kernelscope.harness.context import JobContext


@dataclass
class WarmUp:
    s: float = 0.0
    rounds: int = 0
    chunks: int = 0


@dataclass
class Round:
    """One timed round: each fn's time (µs) and, on a GPU, each call's start event in the order run."""

    times: dict[str, float]
    starts: list[Any] = field(default_factory=list)


@dataclass
class TimingRun:
    """One interleaved timing run, as the observers see it."""

    names: list[str]
    rounds: list[Round] = field(default_factory=list)
    warm_host_s: dict[str, list[float]] = field(default_factory=dict)  # host seconds per warm-up call
    host_us: dict[str, list[float]] = field(default_factory=dict)  # issuing the GPU-side work, events and call
    host_call_us: dict[str, list[float]] = field(default_factory=dict)  # the call alone
    warm_up: WarmUp = field(default_factory=WarmUp)
    gpu_before_call_us: float = 0.0  # the least GPU time of the work enqueued before a call (the L2 flush)


@dataclass
class Measured:
    """A finished timing of a correct candidate: what the checks after the timing work from."""

    models: dict[str, Any]  # "candidate", "reference" (and "reference_compile")
    inputs: list[Any]
    timings: dict[str, dict[str, Any]]  # name -> timing_stats
    speedups: dict[str, dict[str, Any]]
    run: TimingRun


class Observer:
    """Base class of the harness' observers (energy, the flush probe, the host cover, side streams)."""

    #: the job phase (``phases_s``) the work of ``after_timing`` is booked under; None: no phase of its own
    phase: str | None = None

    def register(self, ctx: JobContext) -> None:
        """Called once, when the job is set up: the configuration, findings, device and original timers."""
        self.ctx = ctx

    def before_warm_up(self, run: TimingRun) -> None:
        """A timing run starts (before the first touch of the inputs and the warm-up)."""

    def before_rounds(self, run: TimingRun) -> None:
        """The warm-up is done; the timed rounds start."""

    def before_call(self, name: str, first: bool) -> None:
        """Just before a timed call's start event: enqueue any GPU-side work here. ``first``: the round's
        first call (a synchronize came before it)."""

    def after_round(self, run: TimingRun, rnd: Round) -> None:
        """A round is done and synchronised."""

    def may_stop(self, run: TimingRun, min_runs: int) -> bool:
        """Past the time budget with enough rounds: whether this observer lets the timing stop now."""
        return True

    def select_rounds(self, run: TimingRun, min_runs: int) -> list[int] | None:
        """The rounds to keep (indices), or None to keep them all."""
        return None

    def after_rounds(self, run: TimingRun) -> None:
        """The timed rounds are over (and selected)."""

    def after_timing(self, measured: Measured) -> None:
        """The candidate was timed and its statistics computed: checks that need the models run here."""

    def results(self) -> dict[str, Any]:
        """This observer's fields of the result."""
        return {}
