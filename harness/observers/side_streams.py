"""Side streams: work the candidate launches on another stream escapes the CUDA events on the current
one. It shows up in the wall time of a device-synchronised batch of calls: far above the events' time
(and the host's own time per call) while the reference shows no such gap, the candidate is refused."""

from __future__ import annotations

from typing import Any

import torch

from kernelscope.harness.observers.base import Measured, Observer
from kernelscope.harness.protocol import perf_counter
from kernelscope.harness.stats import percentile


class SideStreams(Observer):
    phase = "side_stream_check"

    def __init__(self) -> None:
        self.synced_us: float | None = None

    def after_timing(self, measured: Measured) -> None:
        if not self.ctx.cuda:  # nothing runs beside the CPU's own calls
            return
        cand, ref, inputs = measured.models["candidate"], measured.models["reference"], measured.inputs
        synced = self.synced_time_per_call(cand, inputs)
        ev = measured.timings["candidate"]["median_us"]
        # a batch issued back to back takes at least the host's time per call: a slow host (or one pause in
        # the batch) is not work on another stream, so compare with that too, and measure twice
        calls = measured.run.host_call_us.get("candidate")
        host = round(percentile(sorted(calls), 0.5), 1) if calls else 0.0
        busy = max(ev, host)
        if synced > 2.0 * busy and synced - busy > 20.0:
            synced = min(synced, self.synced_time_per_call(cand, inputs))
        self.synced_us = synced
        if synced > 2.0 * busy and synced - busy > 20.0:
            ref_synced = self.synced_time_per_call(ref, inputs)
            ref_ev = measured.timings["reference"]["median_us"]
            if not (ref_synced > 2.0 * ref_ev):  # the reference does not show the same gap
                self.ctx.findings.flag_once(
                    "side-stream", "invalid",
                    f"CUDA events on the current stream measured {ev:.1f} µs per call but a "
                    f"device-synchronised batch takes {synced:.1f} µs per call: work runs on "
                    "another stream outside the timed window. Launch on "
                    "torch.cuda.current_stream().", {"event_us": ev, "synced_us": synced})

    def results(self) -> dict[str, Any]:
        return {} if self.synced_us is None else {"candidate_synced_us_per_call": self.synced_us}

    def synced_time_per_call(self, fn: Any, inputs: list[Any], calls: int = 10) -> float:
        """Wall time per call for a batch of back-to-back calls ending in a device-wide sync (µs):
        includes work on every stream, unlike events on the current stream."""
        with torch.no_grad():
            fn(*inputs)
            self.ctx.sync()
            a = perf_counter()
            for _ in range(calls):
                fn(*inputs)
            self.ctx.sync()
            return (perf_counter() - a) * 1e6 / calls
