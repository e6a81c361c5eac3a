"""Log-scaled rewards: what an evaluation is worth to the search.

A correct candidate earns log2(speedup) (clipped), so a 2x gain and a 2x loss weigh the same and a
10x outlier does not swamp the tree; every failed candidate scores below every correct one, and a
compile failure below an incorrect result (it taught less).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

Status = Literal["correct", "incorrect", "compile-error", "crashed", "invalid"]
MIN_LOG2, MAX_LOG2 = -5.0, 6.0  # speedups from 1/32x to 64x; beyond that the figure is clipped
PENALTY = {"incorrect": MIN_LOG2 - 1.0, "crashed": MIN_LOG2 - 1.5, "invalid": MIN_LOG2 - 1.5,
           "compile-error": MIN_LOG2 - 2.0}


@dataclass
class Outcome:
    """One evaluated candidate, as the search sees it."""

    status: Status
    speedup: float | None = None  # over the reference (eager), when correct
    energy_ratio: float | None = None  # reference joules / candidate joules, when measured
    bottleneck: str | None = None
    findings: list[str] = field(default_factory=list)  # rule ids, most severe first
    severe: bool = False  # a critical/high finding is open
    details: list[str] = field(default_factory=list)  # the findings as sentences (diagnosis, top fix), for LLMs
    note: str = ""

    @property
    def ok(self) -> bool:
        return self.status == "correct" and self.speedup is not None and self.speedup > 0


def reward(o: Outcome, *, energy_weight: float = 0.0) -> float:
    """log2 speedup for a correct candidate (plus ``energy_weight`` x log2 energy gain when asked:
    speed first, energy second); a fixed penalty below any correct score otherwise."""
    if not o.ok:
        return PENALTY.get(o.status, PENALTY["invalid"])
    r = min(MAX_LOG2, max(MIN_LOG2, math.log2(o.speedup)))  # type: ignore[arg-type]
    if energy_weight and o.energy_ratio:
        r += energy_weight * min(MAX_LOG2, max(MIN_LOG2, math.log2(o.energy_ratio)))
    return r
