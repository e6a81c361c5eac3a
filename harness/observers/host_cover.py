"""The host cover: a wait enqueued on the GPU before each timed call (and its L2 flush), long enough for
the host to issue the call, so the timed window holds GPU time only.

Without it the GPU reaches the call's start event as soon as the flush is done and then waits for the
host to issue the call: on the H100 host the flush takes ~82 µs while issuing the flush, the events and
one NVRTC launch from Python took 85-200 µs, depending on the process (its core, its clock), so the idle
gap landed inside the timed window and whole evaluations read 2-7% slow while the GPU time had not
changed. The wait keeps the GPU busy until the call is queued (as nvbench's blocking kernel does); the
host's own time per call is reported beside it (``host_cover``).
"""

from __future__ import annotations

from typing import Any

from kernelscope.harness.observers.base import Observer, TimingRun
from kernelscope.harness.stats import percentile


class HostCover(Observer):
    # The GPU-side wait before each timed call: twice the host's 90th-percentile time per call in the warm-up,
    # plus what issuing the flush and the events costs, at most MAX_US.
    MAX_US = 1000.0

    def __init__(self, cover_us: float | None = None) -> None:
        self.want = cover_us  # None: sized from the warm-up
        self.us: dict[str, float] = {}
        self.report: dict[str, Any] | None = None
        self.notes: list[str] = []
        self._cycles: dict[str, int] = {}

    # -- hooks
    def before_rounds(self, run: TimingRun) -> None:
        self.us = self.cover_us(run.names, run.warm_host_s)
        self._cycles = self._to_cycles(self.us)

    def before_call(self, name: str, first: bool) -> None:
        if self._cycles.get(name):
            self.ctx.originals.sleep(self._cycles[name])

    def after_rounds(self, run: TimingRun) -> None:
        self.describe(run)
        self.ctx.findings.notes.extend(self.notes)
        self.notes = []

    def results(self) -> dict[str, Any]:
        return {"host_cover": self.report}

    # -- sizing
    def cover_us(self, names: list[str], warm_host_s: dict[str, list[float]]) -> dict[str, float]:
        """How long a wait (µs) to enqueue on the GPU before each timed call, per fn."""
        us: dict[str, float] = {}
        for n in names:
            if self.want is not None:
                us[n] = max(0.0, float(self.want))
            else:
                raw = warm_host_s.get(n, [])
                h = sorted(raw[len(raw) // 4:]) or [0.0]  # the warm-up's first calls include one-off work
                us[n] = min(self.MAX_US, 2.0 * percentile(h, 0.9) * 1e6 + 30.0)
        return us

    def _to_cycles(self, us: dict[str, float]) -> dict[str, int]:
        if not any(us.values()):
            return {}
        rate = self._sleep_cycles_per_us()
        return {n: int(v * rate) for n, v in us.items() if v > 0}

    def _sleep_cycles_per_us(self) -> float:
        """``torch.cuda._sleep`` spins for a number of SM clock cycles: measure how many make a µs now (warm)."""
        o = self.ctx.originals
        best = float("inf")
        for _ in range(3):
            s, e = o.Event(enable_timing=True), o.Event(enable_timing=True)
            o.record(s)
            o.sleep(100_000)
            o.record(e)
            o.event_synchronize(e)
            best = min(best, o.elapsed_time(s, e) * 1000.0)
        return 100_000 / best if best > 0 else 1000.0

    # -- the report
    def describe(self, run: TimingRun) -> None:
        """The report (``host_cover``) and notes: a forward that takes longer to issue than to run, and calls
        whose issue took longer than the cover (plus the flush before them)."""
        host, cover = run.host_us, self.us
        flush_us = run.gpu_before_call_us
        call = {n: percentile(sorted(v), 0.5) for n, v in run.host_call_us.items() if v}
        self.report = {
            "cover_us": {n: round(cover.get(n, 0.0), 1) for n in host},
            "host_median_us": {n: round(percentile(sorted(v), 0.5), 1) for n, v in host.items() if v},
            "host_p90_us": {n: round(percentile(sorted(v), 0.9), 1) for n, v in host.items() if v},
            "call_median_us": {n: round(v, 1) for n, v in call.items()},
            "calls_over_cover": {n: sum(1 for x in v if x > cover.get(n, 0.0) + flush_us) for n, v in host.items()},
        }
        for n, m in call.items():
            gpu = sorted(r.times[n] for r in run.rounds if n in r.times)
            g = percentile(gpu, 0.5) if gpu else float("nan")
            if m > 1.5 * g and m - g > 10.0:
                self.notes.append(
                    f"{n}: one call takes {m:.0f} µs on the host (median), more than its {g:.0f} µs on the GPU: "
                    "the timings are GPU time (a wait on the GPU covers the host's time to issue each call), "
                    "but called back to back in a real program this forward is bound by the host issuing it")
        over = {n: k for n, k in self.report["calls_over_cover"].items() if k > max(2, 0.05 * len(host[n]))}
        if over:
            self.notes.append(
                "host issue time exceeded the GPU-side cover in " + ", ".join(
                    f"{k} of {len(host[n])} {n} calls" for n, k in over.items())
                + " (a pause on the host: garbage collection, another process); there the GPU waited inside the "
                  "timed window")
