"""The rule registry: rules declare what they need; ``run_rules`` applies the ones that fit."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kernelscope.models import Finding

SEVERITY_RANK = {"critical": 0, "high": 1, "warning": 2, "info": 3}

RuleFn = Callable[[Any, Mapping[str, float], Mapping[str, Any]], Iterable[Finding]]


@dataclass(frozen=True)
class Rule:
    id: str
    family: str
    scope: str  # which evidence it reads: "ptxas", "sass", "ncu", "trace", ...
    description: str
    thresholds: Mapping[str, float] = field(default_factory=dict)
    fn: RuleFn | None = None
    metrics: tuple[str, ...] = ()  # ncu metrics it reads beyond the light stage's (analyze collects them)
    supersedes: tuple[str, ...] = ()  # rules whose finding on the same kernel this one's makes redundant

    def run(self, data: Any, overrides: Mapping[str, float] | None = None,
            context: Mapping[str, Any] | None = None) -> list[Finding]:
        assert self.fn is not None
        th = {**self.thresholds, **(overrides or {})}
        return list(self.fn(data, th, context or {}))


REGISTRY: dict[str, Rule] = {}


def rule(id: str, *, family: str, scope: str, description: str,
         thresholds: Mapping[str, float] | None = None, metrics: Iterable[str] = (),
         supersedes: Iterable[str] = ()) -> Callable[[RuleFn], RuleFn]:
    """Register ``fn(data, thresholds, context) -> Iterable[Finding]`` as a rule."""

    def deco(fn: RuleFn) -> RuleFn:
        if id in REGISTRY:
            raise ValueError(f"duplicate rule id {id}")
        REGISTRY[id] = Rule(id=id, family=family, scope=scope, description=description,
                            thresholds=dict(thresholds or {}), fn=fn, metrics=tuple(metrics),
                            supersedes=tuple(supersedes))
        return fn

    return deco


def rank(findings: Iterable[Finding]) -> list[Finding]:
    """Most severe first; equal severity by estimated impact (share of the kernel's time at stake)."""
    return sorted(findings, key=lambda f: (SEVERITY_RANK.get(f.severity, 9), -(f.impact or 0.0), f.rule,
                                           f.kernel or ""))


def merge(findings: Iterable[Finding]) -> list[Finding]:
    """Rank findings from several evidence sources (ncu, SASS, ptxas) for one kernel, dropping those a
    more specific rule's finding supersedes (its evidence is then part of that finding)."""
    found = list(findings)
    dropped = {s for f in found if f.rule in REGISTRY for s in REGISTRY[f.rule].supersedes}
    seen: set[tuple[str, str | None]] = set()
    out = []
    for f in rank(found):
        key = (f.rule, f.kernel)
        if f.rule in dropped or key in seen:
            continue
        seen.add(key)
        out.append(f)
    return out


def run_rules(scope: str, data: Any, *, overrides: Mapping[str, Mapping[str, float]] | None = None,
              context: Mapping[str, Any] | None = None) -> list[Finding]:
    """Run every registered rule of ``scope`` over ``data``; findings ranked by severity."""
    overrides = overrides or {}
    out: list[Finding] = []
    for r in REGISTRY.values():
        if r.scope == scope:
            out.extend(r.run(data, overrides.get(r.id), context))
    return rank(out)
