"""The job's protocol: its configuration (the CONFIG JSON), what it finds (flags and notes), where its
time goes (phases), and the RESULT JSON it writes.

Stdlib only. The clocks are captured when this module is imported, before any candidate code runs, so a
candidate that replaces ``time.perf_counter`` cannot reach the harness' own timing.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass, field, fields
from typing import Any

perf_counter = time.perf_counter  # captured before any candidate code runs
wall_clock = time.time


class Invalid(Exception):
    """The job cannot be evaluated as given (no ``ModelNew``, an incomplete reference): verdict invalid."""


@dataclass
class Config:
    """One job's settings, as written by the caller (``tools/run.py``); unknown keys are ignored."""

    device: str = "cuda"
    reference_path: str = ""
    candidate_path: str = ""
    # a build job: import the candidate (building its extensions), and pre-build its NVRTC cubins for an arch
    import_only: bool = False
    prebuild_arch: str | None = None
    # under a profiler: only the candidate's own calls, in a profiler range
    profile_only: bool = False
    profile_calls: int = 1
    # correctness
    seed: int = 42
    trials: int = 5
    all_trials: bool = False
    tolerance: str = "default"
    rtol: float | None = None
    atol: float | None = None
    allow_tf32: bool = False
    # timing
    reference_modes: list[str] = field(default_factory=lambda: ["eager"])
    timing_budget_s: float = 0.5
    min_runs: int = 30
    max_runs: int = 2000
    warmup_s: float = 0.05
    rotate_inputs: int = 4
    flush_l2: bool = True
    flush_mb: int = 256
    host_cover_us: float | None = None
    keep_samples: bool = False
    # the verdict and its checks
    verdict_margin: float = 0.02
    flag_speedup_above: float = 10.0
    measure_energy: bool = False
    energy_window_s: float = 2.0

    def __post_init__(self) -> None:
        for f in fields(self):  # JSON numbers: 5 for 5.0 and the like
            v = getattr(self, f.name)
            if v is None:
                continue
            if f.type == "int":
                setattr(self, f.name, int(v))
            elif f.type in ("float", "float | None"):
                setattr(self, f.name, float(v))

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> Config:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in raw.items() if k in known})


@dataclass
class Flag:
    """A cheat check's finding: ``invalid`` refuses the candidate, ``review`` asks a human to look."""

    id: str
    severity: str
    message: str
    evidence: dict[str, Any]


class Findings:
    """The job's flags and notes, in the order they were found."""

    def __init__(self) -> None:
        self.flags: list[Flag] = []
        self.notes: list[str] = []

    def flag_once(self, fid: str, severity: str, message: str, evidence: dict[str, Any]) -> None:
        if not self.has(fid):
            self.flags.append(Flag(fid, severity, message, evidence))

    def has(self, fid: str) -> bool:
        return any(f.id == fid for f in self.flags)

    def invalid(self) -> bool:
        return any(f.severity == "invalid" for f in self.flags)

    def flags_json(self) -> list[dict[str, Any]]:
        return [asdict(f) for f in self.flags]


class Phases:
    """Wall seconds per phase of the job, for "where did the time go"."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._t = perf_counter()

    def close(self, name: str) -> None:
        """Close the current phase: wall seconds since the previous one."""
        now = perf_counter()
        self.seconds[name] = round(now - self._t, 4)
        self._t = now


@dataclass
class ChildStart:
    """What a fork-server child knows before the job runs: when it began, and notes from its set-up
    (a limit or the network isolation it could not apply)."""

    wall: float
    notes: list[str] = field(default_factory=list)


def read_config(path: str) -> dict[str, Any]:
    with open(path) as f:
        raw: dict[str, Any] = json.load(f)
    return raw


def write_result(path: str, result: dict[str, Any]) -> None:
    """Write the RESULT JSON whole (a reader never sees half of it)."""
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(result, f, default=str)
    os.replace(tmp, path)
