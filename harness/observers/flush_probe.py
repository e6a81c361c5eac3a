"""The L2 flush before every timed call, and what its own time says about the GPU's memory traffic.

The flush is a memset of ``flush_mb`` MB (256 by default) enqueued before each call's start event, timed
with an event of its own: a probe of the memory system that costs nothing extra. On a quiet H100 it is
steady to ~1% (with the host cover); when something else moves memory (the driver scrubbing memory
another process just freed, which we measured slowing a streaming kernel by 15% for ~2.3 ms per GB
freed; another job on the GPU), the memset slows by as much, in the same rounds. Its quiet time depends
on what ran before it (the dirty lines a call leaves in L2 are written back during the flush, unless a
synchronize gave them time to drain), so it is taken per preceding fn and position: the 10th percentile
of those flushes. Rounds with a flush more than ``SLOW`` over its quiet time, and the round after each
(an episode's edge), are left out of the timings, with a note.
"""

from __future__ import annotations

from typing import Any

import torch

from kernelscope.harness.observers.base import Observer, Round, TimingRun
from kernelscope.harness.stats import percentile

# per round: each flush's µs, keyed by what ran before it (the fn, and whether a synchronize came between)
Flushes = list[list[tuple[str, float]]]


class FlushProbe(Observer):
    # A flush this much slower than its quiet time marks other memory traffic: the driver's scrubbing of freed
    # memory slows it by ~15% on the H100. (Before the host cover, the host's time to issue the flush landed in
    # its timing too and made it jitter by ~8% at the median; with the cover it stays within ~1-2%.)
    SLOW = 0.10

    def __init__(self, flush_mb: int = 256) -> None:
        self.flush_mb = flush_mb
        self.flushes: Flushes = []
        self.report: dict[str, Any] | None = None
        self.notes: list[str] = []
        self._buffer: Any = None
        self._prev = "warm-up"
        self._pending: list[tuple[str, Any]] = []

    # -- hooks
    def before_warm_up(self, run: TimingRun) -> None:
        self._buffer = torch.empty(self.flush_mb * 1024 * 1024 // 4, dtype=torch.int32, device=self.ctx.device)
        self.flushes, self._prev, self._pending = [], "warm-up", []

    def before_call(self, name: str, first: bool) -> None:
        o = self.ctx.originals
        f = o.Event(enable_timing=True)
        o.record(f)
        self._buffer.zero_()
        self._pending.append((f"{self._prev}{', synced' if first else ''}", f))
        self._prev = name

    def after_round(self, run: TimingRun, rnd: Round) -> None:
        elapsed = self.ctx.originals.elapsed_time
        self.flushes.append([(p, elapsed(f, s) * 1000.0) for (p, f), s in zip(self._pending, rnd.starts,
                                                                               strict=True)])
        self._pending = []

    def may_stop(self, run: TimingRun, min_runs: int) -> bool:
        # past the budget, the run goes on (checking every 8 rounds) only until min_runs rounds are quiet
        return len(run.rounds) % 8 == 0 and len(self.quiet_rounds(self.flushes)) >= min_runs

    def select_rounds(self, run: TimingRun, min_runs: int) -> list[int] | None:
        run.gpu_before_call_us = min((us for fl in self.flushes for _, us in fl), default=0.0)
        quiet = self.quiet_rounds(self.flushes)
        keep = list(range(len(self.flushes)))
        if len(quiet) >= min_runs or len(quiet) * 2 >= len(self.flushes):  # else busy all along: keep all (noted)
            keep = quiet
        self.describe(self.flushes, keep)
        self.ctx.findings.notes.extend(self.notes)
        self.notes = []
        return keep

    def results(self) -> dict[str, Any]:
        return {"flush_probe": self.report}

    # -- the selection
    def quiet_times(self, flushes: Flushes) -> tuple[dict[str, float], set[int]]:
        """The flush's quiet time after each fn (10th percentile), and the rounds with a flush slower than that."""
        after: dict[str, list[float]] = {}
        for fl in flushes:
            for p, us in fl:
                after.setdefault(p, []).append(us)
        quiet = {p: percentile(sorted(v), 0.1) for p, v in after.items()}
        slow = {i for i, fl in enumerate(flushes) if any(us > quiet[p] * (1 + self.SLOW) for p, us in fl)}
        return quiet, slow

    def quiet_rounds(self, flushes: Flushes) -> list[int]:
        """Indices of the rounds to keep: none with a slow flush, nor the round after one."""
        _, slow = self.quiet_times(flushes)
        drop = slow | {i + 1 for i in slow}
        return [i for i in range(len(flushes)) if i not in drop]

    def describe(self, flushes: Flushes, keep: list[int]) -> None:
        """The probe's report (``flush_probe``) and a note on the rounds left out (or too many to leave out)."""
        fl = sorted(us for f in flushes for _, us in f)
        if not fl:
            return
        q, slow_rounds = self.quiet_times(flushes)
        quiet = min(q.values())
        dropped = len(flushes) - len(keep)
        slow = len(slow_rounds)
        self.report = {"flush_mb": self.flush_mb, "quiet_us": round(quiet, 2),
                       "median_us": round(percentile(fl, 0.5), 2), "max_us": round(fl[-1], 2),
                       "rounds": len(flushes), "rounds_slow": slow, "rounds_dropped": dropped}
        if dropped:
            self.notes.append(
                f"{dropped} of {len(flushes)} timing rounds left out: the L2 flush before them (a memset of "
                f"{self.flush_mb} MB) ran more than {self.SLOW:.0%} over its quiet time "
                f"(from {quiet:.1f} µs; up to {fl[-1]:.1f} µs), a sign of other memory traffic on the GPU (the "
                "driver scrubbing memory a process freed, another job)")
        elif slow:
            self.notes.append(
                f"{slow} of {len(flushes)} timing rounds had a slow L2 flush (over {self.SLOW:.0%} above its "
                f"quiet {quiet:.1f} µs) but too many to drop: the GPU's memory was busy with other traffic "
                "for most of the timing; the times may read high")
