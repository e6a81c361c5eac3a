"""Findings: what the rules say, with the evidence and ranked fixes (heuristics' output)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

Severity = Literal["info", "warning", "high", "critical"]


# --------------------------------------------------------------------------- findings (heuristics)
class Evidence(BaseModel):
    """One measured fact behind a finding."""

    metric: str = Field(description="Metric or statistic name, e.g. 'spill_stores_bytes' or an ncu metric.")
    value: float | str | None = Field(description="The measured value (None when not available).")
    threshold: float | str | None = Field(None, description="The rule's threshold it was compared to.")
    unit: str | None = None
    source: str | None = Field(None, description="Where it came from: ptxas, sass, ncu, nsys, ...")
    kernel: str | None = None
    line: str | None = Field(None, description="Source location responsible, 'file:line', when known.")


class Fix(BaseModel):
    """One remedy, ranked by the order in a finding's ``fixes`` list (most promising first)."""

    action: str
    expected_effect: str


class Finding(BaseModel):
    """A diagnosis produced by a rule: what is wrong, the evidence, and ranked fixes."""

    rule: str = Field(description="Rule id, e.g. 'sass.local-memory-spills'.")
    family: str = Field(description="Rule family: memory, occupancy, stalls, instructions, launch, tensor.")
    severity: Severity
    kernel: str | None = None
    title: str
    diagnosis: str = Field(description="One or two sentences with the numbers in them.")
    evidence: list[Evidence] = Field(default_factory=list)
    fixes: list[Fix] = Field(default_factory=list)
    impact: float | None = Field(None, ge=0, le=1, description="Estimated share of the kernel's time at stake "
                                                               "(0..1), where the rule can estimate it; ranks "
                                                               "findings of equal severity.")
    line: str | None = Field(None, description="The source line responsible (file:line `code`), where known.")
    topic: str | None = Field(None, description="What the finding is about where one rule speaks of several "
                                                "things, e.g. the stall reason of stalls.dominant-stall-reason.")
    explains: list[str] = Field(default_factory=list, description="Findings (rule ids) on this kernel that share "
                                                                  "this finding's cause and were merged into it.")
