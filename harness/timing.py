"""Timing: reference and candidate interleaved (alternating order each round), timed per call with
CUDA events after a warm-up that waits for clocks and caches to settle, several input sets rotated,
many rounds within a time budget. The observers plug into the rounds: the host cover's wait and the
L2 flush are enqueued before each call's start event, and the flush probe leaves out rounds disturbed
by other memory traffic. On the CPU, calls are timed with the wall clock."""

from __future__ import annotations

from typing import Any

import torch

from kernelscope.harness.context import JobContext
from kernelscope.harness.guard import Attributed, StateGuard, blame
from kernelscope.harness.observers.base import Observer, Round, TimingRun, WarmUp
from kernelscope.harness.protocol import perf_counter

Fns = dict[str, Any]
Sets = list[dict[str, list[Any]]]  # per input set: each fn's arguments


class Timer:
    def __init__(self, ctx: JobContext, observers: list[Observer], guard: StateGuard | None = None) -> None:
        self.ctx = ctx
        self.observers = observers
        self.last: TimingRun | None = None
        self.guard = guard  # the candidate's calls: global state kept apart, failures its own
        self.max_sets: int | None = None  # the memory plan's cap on rotated input sets

    def _enter(self, n: str) -> None:
        if n == "candidate" and self.guard is not None:
            self.guard.enter()

    def _exit(self, n: str) -> None:
        if n == "candidate" and self.guard is not None:
            self.guard.exit()

    def call(self, n: str, fn: Any, args: list[Any], where: str) -> Any:
        """One call of ``fn`` named ``n`` outside the timed rounds: the candidate's under the state guard,
        each side's failure its own."""
        if n == "candidate" and self.guard is not None:
            with self.guard.call(where):
                return fn(*args)
        with blame("reference", where):
            return fn(*args)

    def rotation(self, inputs: list[Any]) -> int:
        """How many input sets to rotate through while timing: up to 4, within 1 GiB of inputs."""
        if not self.ctx.cuda:
            return 1
        nbytes = sum(x.numel() * x.element_size() for x in inputs if isinstance(x, torch.Tensor))
        n = max(1, min(self.ctx.cfg.rotate_inputs, (1 << 30) // max(nbytes, 1)))
        return n if self.max_sets is None else max(1, min(n, self.max_sets))

    def time_interleaved(self, fns: Fns, sets: Sets) -> dict[str, list[float]]:
        """Time each fn per call (µs), alternating order each round, the observers' work (the L2 flush)
        before every call; the input sets are used in turn, one per round (both sides of a round see the
        same). Returns the samples of the rounds kept."""
        run = TimingRun(names=list(fns))
        self.last = run
        for o in self.observers:
            o.before_warm_up(run)
        with torch.no_grad():
            for extra in sets[1:]:  # first touch of every set outside the timed rounds
                for n in run.names:
                    self.call(n, fns[n], extra[n], "first call on a new input set (timing)")
            run.warm_up = self._warm_up(fns, sets[0], run)
            for o in self.observers:
                o.before_rounds(run)
            self._rounds(fns, sets, run)
        keep = list(range(len(run.rounds)))
        for o in self.observers:
            chosen = o.select_rounds(run, self.ctx.cfg.min_runs)
            if chosen is not None:
                kept = set(chosen)
                keep = [i for i in keep if i in kept]
        for o in self.observers:
            o.after_rounds(run)
        samples: dict[str, list[float]] = {n: [] for n in run.names}
        for i in keep:
            for n, us in run.rounds[i].times.items():
                samples[n].append(us)
        return samples

    def _rounds(self, fns: Fns, sets: Sets, run: TimingRun) -> None:
        cfg = self.ctx.cfg
        budget_s = cfg.timing_budget_s
        if self.ctx.cuda:
            run.host_us = {n: [] for n in run.names}
            run.host_call_us = {n: [] for n in run.names}
        start = perf_counter()
        while True:
            rnd = len(run.rounds)
            order = run.names if rnd % 2 == 0 else run.names[::-1]
            inputs = sets[rnd % len(sets)]
            r = self._gpu_round(fns, order, inputs, run) if self.ctx.cuda else self._cpu_round(fns, order, inputs)
            run.rounds.append(r)
            for o in self.observers:
                o.after_round(run, r)
            done = rnd + 1
            elapsed_s = perf_counter() - start
            if done >= cfg.max_runs:
                break
            # Rounds an observer leaves out (a slow flush) are dropped: past the budget, the run goes on only
            # until the observers agree (min_runs rounds quiet); the budget stays the timing's cost.
            if elapsed_s >= budget_s and done >= cfg.min_runs and all(
                    o.may_stop(run, cfg.min_runs) for o in self.observers):
                break
            if elapsed_s >= 4 * budget_s and done >= 5:  # very slow kernels or a busy GPU: fewer runs, stated
                self.ctx.findings.notes.append(f"timing stopped after {done} runs (budget {budget_s} s)")
                break

    def _gpu_round(self, fns: Fns, order: list[str], inputs: dict[str, list[Any]], run: TimingRun) -> Round:
        o = self.ctx.originals
        evs = []
        for i, n in enumerate(order):
            h0 = perf_counter()
            for obs in self.observers:
                obs.before_call(n, i == 0)
            s, e = o.Event(enable_timing=True), o.Event(enable_timing=True)
            self._enter(n)
            o.record(s)
            h1 = perf_counter()
            try:  # no context manager inside the timed span: a try costs nothing until it raises
                fns[n](*inputs[n])
            except Exception as ex:
                raise Attributed(n if n == "candidate" else "reference", "a timed call", ex) from ex
            finally:
                if n == "candidate" and self.guard is not None:
                    self.guard.restore_stream()  # the end event on the harness's stream
            h2 = perf_counter()
            run.host_us[n].append((h2 - h0) * 1e6)
            run.host_call_us[n].append((h2 - h1) * 1e6)
            o.record(e)
            self._exit(n)
            evs.append((n, s, e))
        o.synchronize()
        return Round({n: o.elapsed_time(s, e) * 1000.0 for n, s, e in evs}, [s for _, s, _ in evs])

    def _cpu_round(self, fns: Fns, order: list[str], inputs: dict[str, list[Any]]) -> Round:
        times = {}
        for i, n in enumerate(order):
            for obs in self.observers:
                obs.before_call(n, i == 0)
            self._enter(n)
            a = perf_counter()
            try:
                with blame(n if n == "candidate" else "reference", "a timed call"):
                    fns[n](*inputs[n])
                times[n] = (perf_counter() - a) * 1e6
            finally:
                self._exit(n)
        return Round(times)

    def _warm_up(self, fns: Fns, inputs: dict[str, list[Any]], run: TimingRun) -> WarmUp:
        """Warm up in synchronised chunks until warmup_s has passed *and* the last two chunks agree
        within 2% per round (clocks and caches settled), at most 4 x warmup_s. A GPU coming out of
        idle ramps its clocks over tens to hundreds of ms; a fixed CPU-side warm-up can end before
        the GPU has run much at all, and a whole timed run then lands in a different clock state."""
        warmup_s = self.ctx.cfg.warmup_s
        chunk_s = max(warmup_s / 4, 0.005)
        t0 = perf_counter()
        per_round: list[float] = []
        rounds = 0
        while True:
            a = perf_counter()
            k = 0
            while k < 3 or perf_counter() - a < chunk_s:
                for n in run.names:
                    h = perf_counter()
                    self.call(n, fns[n], inputs[n], "warm-up (timing)")
                    run.warm_host_s.setdefault(n, []).append(perf_counter() - h)
                k += 1
                if k > 10_000:
                    break
            self.ctx.sync()
            rounds += k
            per_round.append((perf_counter() - a) / k)
            spent = perf_counter() - t0
            settled = len(per_round) >= 2 and abs(per_round[-1] - per_round[-2]) <= 0.02 * per_round[-2]
            if spent >= warmup_s and settled:
                break
            if spent >= 4 * warmup_s and len(per_round) >= 3:
                self.ctx.findings.notes.append(f"warm-up did not settle within {spent:.2f} s (per-round time still "
                                               f"moving: {per_round[-2] * 1e6:.0f} -> {per_round[-1] * 1e6:.0f} µs)")
                break
        return WarmUp(round(perf_counter() - t0, 4), rounds, len(per_round))
