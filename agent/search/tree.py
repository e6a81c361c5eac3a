"""The search tree and the search memory."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kernelscope.agent.search.reward import Outcome


@dataclass
class Node:
    """One evaluated candidate. ``key`` identifies it (the same candidate reached twice is one node's
    evaluation, reused); ``change`` says what was done to the parent to get it."""

    id: int
    key: str
    payload: Any
    outcome: Outcome
    reward: float
    parent: Node | None = None
    change: str = ""
    depth: int = 0
    children: list[Node] = field(default_factory=list)
    visits: int = 1
    value: float = 0.0  # backed-up value (max or mean of the subtree's rewards)
    exhausted: bool = False  # the proposer has no further child for it
    dead: bool = False  # pruned: not selected again
    dead_reason: str = ""
    pending: int = 0  # expansions in flight at or below this node (virtual loss for parallel selection)

    @property
    def pending_children(self) -> int:
        """This node's own expansions in flight (children still being evaluated)."""
        return self.pending - sum(c.pending for c in self.children)

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "key": self.key, "change": self.change, "depth": self.depth,
                "status": self.outcome.status, "speedup": self.outcome.speedup,
                "ci": [self.outcome.ci_low, self.outcome.ci_high] if self.outcome.ci_low is not None else None,
                "verdict": self.outcome.verdict, "feedback": self.outcome.feedback[:300] or None,
                "reward": round(self.reward, 4),
                "value": round(self.value, 4), "visits": self.visits, "bottleneck": self.outcome.bottleneck,
                "findings": self.outcome.findings[:5], "dead": self.dead_reason or None,
                **({"pending": self.pending} if self.pending else {}),
                "children": [c.to_dict() for c in self.children]}


@dataclass
class MemoryEntry:
    parent: int
    child: int
    change: str
    status: str
    delta: float  # child reward - parent reward
    findings_before: list[str]
    findings_after: list[str]
    feedback: str = ""  # what the evaluation said (the error, the mismatch, the flag, the slowdown)
    repaired_from: str = ""  # what was wrong before a repair turn


class SearchMemory:
    """What was tried, which findings each change addressed, what helped and what hurt: carried into
    every proposal (as text for an LLM, as move statistics for the offline proposer)."""

    def __init__(self) -> None:
        self.entries: list[MemoryEntry] = []

    def record(self, parent: Node, child: Node) -> None:
        self.entries.append(MemoryEntry(parent.id, child.id, child.change, child.outcome.status,
                                        child.reward - parent.reward, list(parent.outcome.findings),
                                        list(child.outcome.findings), child.outcome.feedback,
                                        child.outcome.repaired_from))

    def move_stats(self) -> dict[str, tuple[int, int]]:
        """Kind of change (a change's first word, e.g. ``BLOCK+``) -> (times it helped, times it hurt
        or failed)."""
        stats: dict[str, list[int]] = {}
        for e in self.entries:
            s = stats.setdefault(e.change.split(" ", 1)[0], [0, 0])
            s[0 if e.status == "correct" and e.delta > 0 else 1] += 1
        return {k: (v[0], v[1]) for k, v in stats.items()}

    def resolved(self, e: MemoryEntry) -> list[str]:
        return [f for f in e.findings_before if f not in e.findings_after]

    def summary(self, limit: int = 12) -> str:
        """The most informative entries (largest effect first), one line each."""
        if not self.entries:
            return "Nothing tried yet."
        ranked = sorted(self.entries, key=lambda e: -abs(e.delta) if e.status == "correct" else 0.0)[:limit]
        lines = []
        for e in ranked:
            before = f" [before its repair: {' '.join(e.repaired_from.split())[:200]}]" if e.repaired_from else ""
            if e.status != "correct":
                why = " ".join(e.feedback.split())[:240] if e.feedback else ""
                lines.append(f"- {e.change}: {e.status} (node {e.child})" + (f": {why}" if why else "") + before)
                continue
            verdict = "helped" if e.delta > 0.01 else "hurt (slower than its parent)" if e.delta < -0.01 \
                else "no change"
            fixed = self.resolved(e)
            lines.append(f"- {e.change}: {verdict} ({2 ** e.delta:.2f}x vs its parent, node {e.child})"
                         + (f"; resolved {', '.join(fixed)}" if fixed else "") + before)
        return "\n".join(lines)
