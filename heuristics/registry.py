"""The rule registry: each rule declares its id, family, scope, thresholds and context once.

A rule is a function decorated with :func:`rule`. The decorator is the only registration style; it
checks the function against its declaration before registering it (the way pluggy's manager checks
an implementation against its spec): the scope must be known, the function's first parameter must be
annotated with the scope's input model and its second with :class:`Run`, the thresholds must be named
numbers, and the context keys must be ones the scope provides.

The function receives one input of its scope and a :class:`Run` bound to its declaration: ``run.th``
holds the thresholds (defaults with overrides applied), ``run.ctx`` the declared context keys, and
``run.finding(...)`` builds a :class:`~kernelscope.models.Finding` whose ``rule`` and ``family`` come
from the declaration, so a rule never spells them again.
"""

from __future__ import annotations

import inspect
import re
import typing
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from kernelscope.models import Finding, KernelProfile, KernelResources, KernelSassStats, TraceSummary

SEVERITY_RANK = {"critical": 0, "high": 1, "warning": 2, "info": 3}
FAMILIES = ("memory", "occupancy", "stalls", "launch", "control", "compute", "tensor", "latency", "instructions",
            "system")
_ID = re.compile(r"^[a-z0-9]+\.[a-z0-9][a-z0-9-]*$")
_NAME = re.compile(r"^[a-z][a-z0-9_]*$")


class UnknownThreshold(KeyError):
    """A threshold name a rule does not declare (in an override, or read by the rule itself)."""

    def __str__(self) -> str:
        return str(self.args[0])


class UndeclaredContext(LookupError):
    """A rule read a context key it did not declare."""


# ------------------------------------------------------------------------------------------- scopes
def _whole(data: Any) -> list[Any]:
    return [data]


def _entry_kernels(data: Any) -> list[Any]:
    kernels = [data] if isinstance(data, KernelResources) else list(data)
    return [k for k in kernels if k.is_entry]


@dataclass(frozen=True)
class Scope:
    """Which evidence a rule reads: the model of one input, and the context keys callers supply."""

    name: str
    model: type
    reads: str
    context: Mapping[str, str]
    items: Callable[[Any], list[Any]] = _whole  # the inputs one ``run_rules`` call's data holds


SCOPES: dict[str, Scope] = {s.name: s for s in (
    Scope("ncu", KernelProfile, "one kernel launch's profile (Nsight Compute, or the CUPTI collector)",
          {"sass": "SASS statistics by mangled kernel name (KernelSassStats)",
           "ptxas": "ptxas resource reports by mangled kernel name (KernelResources)",
           "launches": "launch count by mangled kernel name",
           "total_ns": "summed GPU time of all launches by mangled kernel name",
           "kernels": "the other diagnosed kernels' profiles (light and deep merged) by mangled kernel name"}),
    Scope("sass", KernelSassStats, "one kernel's static SASS instruction statistics", {}),
    Scope("ptxas", KernelResources, "each entry kernel of ptxas' resource report (run_rules takes the list)",
          {"arch": "the target architecture, e.g. sm_90"}, _entry_kernels),
    Scope("trace", TraceSummary, "a timeline summary (CUPTI or Nsight Systems)",
          {"facts": "the timeline's TraceFacts: launches, gaps, synchronizations the summary does not list"}),
)}


# ------------------------------------------------------------------------------------------- one call
class Thresholds(Mapping[str, float]):
    """A rule's thresholds for one run: its declared defaults with overrides applied. An override or a
    read of a name the rule does not declare raises :class:`UnknownThreshold`."""

    def __init__(self, rule_id: str, defaults: Mapping[str, float], overrides: Mapping[str, float] | None = None):
        unknown = sorted(set(overrides or {}) - set(defaults))
        if unknown:
            raise UnknownThreshold(f"Rule {rule_id} has no threshold {', '.join(unknown)}; it has: "
                                   f"{', '.join(sorted(defaults)) or 'none'}.")
        self._rule = rule_id
        self._values = {**defaults, **(overrides or {})}

    def __getitem__(self, name: str) -> float:
        try:
            return self._values[name]
        except KeyError:
            raise UnknownThreshold(f"Rule {self._rule} declares no threshold {name!r}.") from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)


class Context(Mapping[str, Any]):
    """The caller's context, limited to the keys a rule declared; reading another key is an error."""

    def __init__(self, rule_id: str, declared: tuple[str, ...], given: Mapping[str, Any]):
        self._rule, self._declared = rule_id, declared
        self._values = {k: v for k, v in given.items() if k in declared}

    def __getitem__(self, key: str) -> Any:
        if key not in self._declared:
            raise UndeclaredContext(f"Rule {self._rule} reads context {key!r} without declaring it.")
        return self._values[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)


@dataclass(frozen=True)
class Run:
    """One application of a rule: its thresholds and context, and the factory of its findings."""

    rule: Rule
    th: Thresholds
    ctx: Context

    def finding(self, **fields: Any) -> Finding:
        """A finding of this rule: ``rule`` and ``family`` come from the declaration."""
        return Finding(rule=self.rule.id, family=self.rule.family, **fields)


RuleFn = Callable[[Any, Run], Iterable[Finding]]


# ------------------------------------------------------------------------------------------- rules
@dataclass(frozen=True)
class Rule:
    id: str
    family: str
    scope: str  # which evidence it reads: a key of SCOPES
    description: str
    thresholds: Mapping[str, float] = field(default_factory=dict)  # name -> default
    fn: RuleFn | None = None
    metrics: tuple[str, ...] = ()  # ncu metrics it reads beyond the light stage's (analyze collects them)
    supersedes: tuple[str, ...] = ()  # rules whose finding on the same kernel this one's makes redundant
    context: tuple[str, ...] = ()  # the scope's context keys it reads
    # findings on the same kernel that this one's cause explains (symptoms): 'rule.id', or 'rule.id:topic' for
    # one topic of a rule that speaks of several (a stall reason); they merge into this finding, which leads
    explains: tuple[str, ...] = ()

    def run(self, data: Any, overrides: Mapping[str, float] | None = None,
            context: Mapping[str, Any] | None = None) -> list[Finding]:
        """The rule's findings over ``data`` (one input of its scope, or what the scope splits into inputs)."""
        assert self.fn is not None
        call = Run(self, Thresholds(self.id, self.thresholds, overrides),
                   Context(self.id, self.context, context or {}))
        return [f for item in SCOPES[self.scope].items(data) for f in self.fn(item, call)]


REGISTRY: dict[str, Rule] = {}


def _check(r: Rule, fn: Callable[..., Any]) -> None:
    """Refuse a declaration that its function or the scope does not match."""
    where = f"rule {r.id} ({fn.__module__}.{fn.__qualname__})"
    if not _ID.match(r.id):
        raise ValueError(f"{where}: the id must be 'prefix.name' in lower case")
    if r.id in REGISTRY:
        raise ValueError(f"duplicate rule id {r.id}")
    if r.family not in FAMILIES:
        raise ValueError(f"{where}: unknown family {r.family!r}; families: {', '.join(FAMILIES)}")
    if r.scope not in SCOPES:
        raise ValueError(f"{where}: unknown scope {r.scope!r}; scopes: {', '.join(SCOPES)}")
    if not r.description:
        raise ValueError(f"{where}: a description is required")
    scope = SCOPES[r.scope]
    for name, value in r.thresholds.items():
        if not _NAME.match(name) or isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError(f"{where}: threshold {name!r} must be a snake_case name with a number")
    extra = set(r.context) - set(scope.context)
    if extra:
        raise ValueError(f"{where}: scope {r.scope} provides no context {', '.join(sorted(extra))}")
    params = list(inspect.signature(fn).parameters)
    hints = typing.get_type_hints(fn)
    if len(params) != 2 or hints.get(params[0]) is not scope.model or hints.get(params[1]) is not Run:
        got = ", ".join(f"{p}: {getattr(hints.get(p), '__name__', '?')}" for p in params)
        raise TypeError(f"{where}: scope {r.scope} needs fn(data: {scope.model.__name__}, run: Run), got ({got})")


def rule(id: str, *, family: str, scope: str, description: str,
         thresholds: Mapping[str, float] | None = None, metrics: Iterable[str] = (),
         supersedes: Iterable[str] = (), context: Iterable[str] = (),
         explains: Iterable[str] = ()) -> Callable[[RuleFn], RuleFn]:
    """Declare and register ``fn(data, run) -> Iterable[Finding]`` as a rule of ``scope``."""

    def deco(fn: RuleFn) -> RuleFn:
        r = Rule(id=id, family=family, scope=scope, description=description, thresholds=dict(thresholds or {}),
                 fn=fn, metrics=tuple(metrics), supersedes=tuple(supersedes), context=tuple(context),
                 explains=tuple(explains))
        _check(r, fn)
        REGISTRY[id] = r
        return fn

    return deco


def add_explains(cause: str, symptoms: Iterable[str]) -> None:
    """Declare more symptoms of a registered rule's cause (for tables kept with the symptom's rule, such as the
    stall reasons each rule explains)."""
    r = REGISTRY[cause]
    REGISTRY[cause] = replace(r, explains=tuple(dict.fromkeys([*r.explains, *symptoms])))


def check_registry() -> None:
    """Cross-rule checks, once every rule module is loaded: what a rule supersedes or explains must exist."""
    for r in REGISTRY.values():
        missing = [s for s in r.supersedes if s not in REGISTRY]
        if missing:
            raise ValueError(f"rule {r.id} supersedes unknown rule(s) {', '.join(missing)}")
        missing = [s for s in r.explains if s.split(":", 1)[0] not in REGISTRY or s.split(":", 1)[0] == r.id]
        if missing:
            raise ValueError(f"rule {r.id} explains unknown rule(s) {', '.join(missing)}")


def check_overrides(overrides: Mapping[str, Mapping[str, float]]) -> None:
    """Refuse overrides of unknown rules or unknown threshold names (ValueError/UnknownThreshold)."""
    for rid, values in overrides.items():
        if rid not in REGISTRY:
            raise ValueError(f"No rule {rid!r}; rules: {', '.join(sorted(REGISTRY))}.")
        Thresholds(rid, REGISTRY[rid].thresholds, values)


# ------------------------------------------------------------------------------------------- running
def rank(findings: Iterable[Finding]) -> list[Finding]:
    """Most severe first; equal severity by estimated impact (share of the kernel's time at stake)."""
    return sorted(findings, key=lambda f: (SEVERITY_RANK.get(f.severity, 9), -(f.impact or 0.0), f.rule,
                                           f.kernel or ""))


def explains(cause: Finding, symptom: Finding) -> bool:
    """Whether ``cause``'s rule declares ``symptom`` (its rule, or its rule and topic) a symptom of its cause. Both
    are findings on one kernel (merge's input), whose name each evidence source spells its own way."""
    r = REGISTRY.get(cause.rule)
    if r is None or cause is symptom:
        return False
    return symptom.rule in r.explains or (symptom.topic is not None and f"{symptom.rule}:{symptom.topic}" in r.explains)


def absorb(cause: Finding, symptom: Finding) -> Finding:
    """``cause`` with ``symptom`` merged into it: the symptom's evidence, the more severe of the two severities and
    the larger impact, its line where the cause has none, and a sentence naming the symptom."""
    sev = min((cause.severity, symptom.severity), key=lambda s: SEVERITY_RANK.get(s, 9))
    impact = max((x for x in (cause.impact, symptom.impact) if x is not None), default=None)
    known = {(e.metric, str(e.value)) for e in cause.evidence}
    return cause.model_copy(update={
        "severity": sev, "impact": impact, "line": cause.line or symptom.line,
        "diagnosis": f"{cause.diagnosis} The same cause shows as '{symptom.title}' ({symptom.rule}), merged here.",
        "evidence": cause.evidence + [e for e in symptom.evidence if (e.metric, str(e.value)) not in known],
        "explains": [*cause.explains, symptom.rule, *symptom.explains]})


def merge(findings: Iterable[Finding]) -> list[Finding]:
    """Rank findings from several evidence sources (ncu, SASS, ptxas) for one kernel, dropping those a
    more specific rule's finding supersedes (its evidence is then part of that finding), and merging each
    symptom into the finding of its cause (which then leads with the symptom's evidence). A cause only at
    'info' (not what limits the kernel today) does not take a symptom in."""
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
    while pair := next(((i, j) for j, s in enumerate(out) for i, c in enumerate(out)
                        if c.severity != "info" and explains(c, s)), None):
        i, j = pair  # every merge takes one finding out, so this ends
        out[i] = absorb(out[i], out[j])
        del out[j]
    return rank(out)


def run_rules(scope: str, data: Any, *, overrides: Mapping[str, Mapping[str, float]] | None = None,
              context: Mapping[str, Any] | None = None) -> list[Finding]:
    """Run every registered rule of ``scope`` over ``data``; findings ranked by severity. An override
    naming a threshold its rule does not declare raises :class:`UnknownThreshold`."""
    overrides = overrides or {}
    out: list[Finding] = []
    for r in REGISTRY.values():
        if r.scope == scope:
            out.extend(r.run(data, overrides.get(r.id), context))
    return rank(out)
