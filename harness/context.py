"""What every part of a job shares: its configuration, its findings, the timing functions captured
before the candidate ran, and its device."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kernelscope.harness.protocol import Config, Findings


@dataclass(frozen=True)
class Originals:
    """The timing functions as they were before any candidate code ran: the harness times with these,
    and a candidate that replaces them is refused."""

    perf_counter: Callable[[], float]
    Event: Any = None
    record: Any = None
    elapsed_time: Any = None
    synchronize: Any = None
    event_synchronize: Any = None
    sleep: Any = None

    @classmethod
    def capture(cls, torch: Any, cuda: bool) -> Originals:
        if not cuda:
            return cls(time.perf_counter)
        ev = torch.cuda.Event
        return cls(time.perf_counter, ev, ev.record, ev.elapsed_time, torch.cuda.synchronize, ev.synchronize,
                   torch.cuda._sleep)

    def checked(self) -> dict[str, Any]:
        """The functions the tampering check compares, by the names its flag reports."""
        names: dict[str, Any] = {"perf_counter": self.perf_counter}
        if self.Event is not None:
            names.update({"Event": self.Event, "record": self.record, "elapsed_time": self.elapsed_time,
                          "synchronize": self.synchronize, "Event.synchronize": self.event_synchronize})
        return names


@dataclass
class JobContext:
    cfg: Config
    findings: Findings
    originals: Originals
    device: Any  # torch.device
    cuda: bool

    def sync(self) -> None:
        """Wait for the device (the original ``torch.cuda.synchronize``); nothing to wait for on the CPU."""
        if self.cuda:
            self.originals.synchronize()
