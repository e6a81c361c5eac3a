"""Log-scaled rewards: what an evaluation is worth to the search.

A correct candidate earns log2 of its ranking speedup (clipped), so a 2x gain and a 2x loss weigh the same
and a 10x outlier does not swamp the tree. The ranking speedup follows the server's verdict: the lower end
of the speedup's 95% confidence interval where the answer has one (a noisy figure does not outrank a steady
one), and exactly 1.0 for an ``inconclusive`` verdict (a tie with the reference, whatever the point
estimate). Every failed candidate (``invalid``, ``incorrect``, crashed, not built) scores below every
correct one, and a compile failure below an incorrect result (it taught less).
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
    ci_low: float | None = None  # the speedup's 95% confidence interval (eager baseline), when the answer has one
    ci_high: float | None = None
    verdict: str | None = None  # the server's verdict: faster, slower, inconclusive, incorrect, invalid
    feedback: str = ""  # what went wrong or what was measured, in words, for the next prompt and the memory
    label: str = ""  # the node's own label when a repair turn replaced the proposal
    repaired_from: str = ""  # what was wrong with the proposal before its repair turn (its feedback)

    @property
    def ok(self) -> bool:
        return self.status == "correct" and self.speedup is not None and self.speedup > 0

    @property
    def rank_speedup(self) -> float | None:
        """The speedup the search ranks by: 1.0 for an inconclusive verdict (a tie), else the lower
        confidence bound where known, else the point estimate."""
        if not self.ok:
            return None
        if self.verdict == "inconclusive":
            return 1.0
        if self.ci_low is not None and self.ci_low > 0:
            return self.ci_low
        return self.speedup


def reward(o: Outcome, *, energy_weight: float = 0.0) -> float:
    """log2 ranking speedup (``Outcome.rank_speedup``) for a correct candidate (plus ``energy_weight`` x
    log2 energy gain when asked: speed first, energy second); a fixed penalty below any correct score otherwise."""
    if not o.ok:
        return PENALTY.get(o.status, PENALTY["invalid"])
    r = min(MAX_LOG2, max(MIN_LOG2, math.log2(o.rank_speedup)))  # type: ignore[arg-type]
    if energy_weight and o.energy_ratio:
        r += energy_weight * min(MAX_LOG2, max(MIN_LOG2, math.log2(o.energy_ratio)))
    return r
