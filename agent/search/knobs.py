"""Knobs that a kernel declares, for the offline proposer.

A line ``// @knob BLOCK 64 128 256 512`` (CUDA) or ``# @knob VEC 1 2 4`` (Python) declares a knob and
its values in order. Applying a configuration rewrites each declaration in place as a definition in
the line's own language (``#define BLOCK 128`` / ``VEC = 4``), keeping the declaration as a comment,
so the same file is both the template and, once applied, a candidate.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from kernelscope.agent.search.reward import MAX_LOG2
from kernelscope.agent.search.strategies import Candidate

_KNOB = re.compile(r"^(?P<indent>\s*)(?P<mark>//|#)\s*@knob\s+(?P<name>[A-Za-z_]\w*)\s+(?P<values>[^#/]+?)\s*$")


@dataclass(frozen=True)
class Knob:
    name: str
    values: tuple[str, ...]
    language: str  # "cuda" (// comment) or "python" (# comment)

    def index(self, value: str) -> int:
        return self.values.index(value)


def parse_knobs(source: str) -> list[Knob]:
    """Every knob declared in ``source`` (first declaration of a name wins; values must be distinct)."""
    knobs: dict[str, Knob] = {}
    for line in source.splitlines():
        m = _KNOB.match(line)
        if not m:
            continue
        values = tuple(m.group("values").split())
        if len(set(values)) != len(values):
            raise ValueError(f"knob {m.group('name')} repeats a value: {' '.join(values)}")
        knobs.setdefault(m.group("name"), Knob(m.group("name"), values, "cuda" if m.group("mark") == "//"
                                               else "python"))
    return list(knobs.values())


def default_config(knobs: list[Knob]) -> dict[str, str]:
    """The first value of every knob: the declaration order is the author's starting point."""
    return {k.name: k.values[0] for k in knobs}


def apply_knobs(source: str, config: dict[str, str]) -> str:
    """``source`` with every knob declaration turned into a definition of its configured value."""
    knobs = {k.name: k for k in parse_knobs(source)}
    unknown = set(config) - set(knobs)
    if unknown:
        raise ValueError(f"unknown knobs {sorted(unknown)}; declared: {sorted(knobs)}")
    out = []
    for line in source.splitlines(keepends=True):
        m = _KNOB.match(line.rstrip("\n"))
        name = m.group("name") if m else None
        if m is None or name not in config:
            out.append(line)
            continue
        value = config[name]
        if value not in knobs[name].values:
            raise ValueError(f"knob {name} has no value {value!r}; values: {' '.join(knobs[name].values)}")
        ind, decl = m.group("indent"), line.strip()
        nl = "\n" if line.endswith("\n") else ""
        if m.group("mark") == "//":
            out.append(f"{ind}#define {name} {value}  {decl}{nl}")
        else:
            out.append(f"{ind}{name} = {value}  {decl}{nl}")
    return "".join(out)


def neighbours(knobs: list[Knob], config: dict[str, str], order: list[str] | None = None) -> list[dict[str, str]]:
    """Configurations one step away (one knob moved to an adjacent value), knobs in ``order`` first."""
    by = {k.name: k for k in knobs}
    names = [n for n in (order or []) if n in by] + [k.name for k in knobs if k.name not in (order or [])]
    out = []
    for n in names:
        k = by[n]
        i = k.index(config[n])
        for j in (i + 1, i - 1):
            if 0 <= j < len(k.values):
                out.append({**config, n: k.values[j]})
    return out


# Which knobs a bottleneck class suggests moving first, by name: the offline proposer's domain prior.
CLASS_KNOBS: dict[str, tuple[str, ...]] = {
    "memory-bound": ("VEC", "ITEMS", "TILE", "UNROLL", "BLOCK"),
    "compute-bound": ("TILE", "UNROLL", "ITEMS", "VEC", "BLOCK"),
    "latency-bound": ("ITEMS", "UNROLL", "BLOCK", "VEC"),
    "occupancy-limited": ("BLOCK", "REGS", "TILE", "ITEMS"),
    "launch/tail-limited": ("BLOCK", "ITEMS", "GRID"),
    "mixed": ("BLOCK", "VEC", "TILE", "ITEMS", "UNROLL"),
}


# Findings that say no knob of the kinds above can help: the kernel keeps DRAM at its peak, so it is as fast as its
# traffic allows (more parallelism, wider loads or more work per thread move the same bytes no faster).
AT_THE_ROOF = ("memory.dram-saturated",)


def knob_order(knobs: list[Knob], bottleneck: str | None, findings: list[str] = ()) -> list[str]:  # type: ignore[assignment]
    """Knob names to try first: those whose name the bottleneck class (and the finding rule ids)
    point at, then the rest. A kernel at the DRAM roof (``AT_THE_ROOF``) gets the declared order: its class
    (memory-bound) names knobs that cannot make it faster, and following it there only delays the moves that
    can (on elementwise_chain, where most of the best configurations are at the roof, it cost MCTS 1.4 to 2.7
    evaluations to 95% of the best, on the mean)."""
    if any(f in AT_THE_ROOF for f in findings):
        return [k.name for k in knobs]
    prefs = list(CLASS_KNOBS.get(bottleneck or "", ()))
    joined = " ".join(findings)
    if "non-vectorized" in joined or "scalar" in joined:
        prefs.insert(0, "VEC")
    if "register" in joined or "occupancy" in joined:
        prefs.insert(0, "BLOCK")
    if "tiny-grid" in joined or "tail" in joined:
        prefs.insert(0, "ITEMS")
    names = [k.name for k in knobs]
    ranked = [n for p in prefs for n in names if p in n.upper()]
    return list(dict.fromkeys(ranked + names))


class KnobExpander:
    """The offline proposer: children are one-knob moves, tried in the order the parent's bottleneck
    class and findings suggest (``knob_order``), with moves that the search memory says hurt more often
    than they helped pushed to the back."""

    def __init__(self, knobs: list[Knob]) -> None:
        if not knobs:
            raise ValueError("no knobs declared (lines like `// @knob BLOCK 64 128 256`)")
        self.knobs = knobs
        self._by = {k.name: k for k in knobs}

    @staticmethod
    def key(config: dict[str, str]) -> str:
        return ",".join(f"{k}={v}" for k, v in sorted(config.items()))

    def start(self, config: dict[str, str] | None = None) -> Any:
        cfg = config or default_config(self.knobs)
        return Candidate(self.key(cfg), cfg, "start " + " ".join(f"{k}={v}" for k, v in cfg.items()))

    def _change(self, old: dict[str, str], new: dict[str, str]) -> str:
        name = next(k for k in new if new[k] != old[k])
        knob = self._by[name]
        sign = "+" if knob.index(new[name]) > knob.index(old[name]) else "-"
        return f"{name}{sign} ({old[name]}->{new[name]})"

    def expand(self, node: Any, memory: Any, seen: set[str]) -> Any:
        order = knob_order(self.knobs, node.outcome.bottleneck, node.outcome.findings)
        stats = memory.move_stats()
        ranked = []
        for i, cfg in enumerate(neighbours(self.knobs, node.payload, order)):
            key = self.key(cfg)
            if key in seen:
                continue
            change = self._change(node.payload, cfg)
            helped, hurt = stats.get(change.split(" ", 1)[0], (0, 0))
            ranked.append((1 if hurt > helped + 1 else 0, i, Candidate(key, cfg, change)))
        return min(ranked, key=lambda t: (t[0], t[1]))[2] if ranked else None

    def sample(self, rng: Any, seen: set[str]) -> Any:
        size = 1
        for k in self.knobs:
            size *= len(k.values)
        if len(seen) >= size:
            return None
        for _ in range(1000):
            cfg = {k.name: rng.choice(k.values) for k in self.knobs}
            if self.key(cfg) not in seen:
                return Candidate(self.key(cfg), cfg, "random " + " ".join(f"{k}={v}" for k, v in cfg.items()))
        return None

    def covered(self, taken: list[dict[str, str]]) -> bool:
        """Whether every value of every knob is in one of the configurations ``taken`` (one sweep of a Latin
        hypercube)."""
        return all(v in {cfg.get(k.name) for cfg in taken} for k in self.knobs for v in k.values)

    def design(self, rng: Any, seen: set[str], taken: list[dict[str, str]], tries: int = 64,
               measured: list[tuple[dict[str, str], float]] | None = None) -> Any:
        """A jump for an initial design that spreads over the space, given the configurations ``taken`` so far
        (evaluated or in flight): every knob takes one of its values that ``taken`` uses least (at random
        among them), so that a few jumps cover each value of each knob, as a Latin hypercube does; of
        ``tries`` such draws, the one that differs from its nearest configuration in ``taken`` in the most
        knobs (maximin). Among draws equally far, the one whose values did best in the configurations
        ``measured`` so far ((configuration, reward) pairs): the sum over its knobs of the best reward
        measured with its value, a value not measured yet counting as the highest reward there is. So once
        a knob has had every value and must repeat one, the design repeats the value that did best rather
        than any. Falls back to ``sample`` when every such draw was seen."""
        size = 1
        for k in self.knobs:
            size *= len(k.values)
        if len(seen) >= size:
            return None
        least: dict[str, list[str]] = {}
        for k in self.knobs:
            used = {v: 0 for v in k.values}
            for cfg in taken:
                if cfg.get(k.name) in used:
                    used[cfg[k.name]] += 1
            fewest = min(used.values())
            least[k.name] = [v for v in k.values if used[v] == fewest]
        prior: dict[tuple[str, str], float] = {}  # (knob, value) -> best reward measured with it
        for cfg, r in measured or ():
            for name, v in cfg.items():
                prior[(name, v)] = max(r, prior.get((name, v), r))
        best: dict[str, str] | None = None
        best_score: tuple[int, float] = (-1, -math.inf)
        for _ in range(tries):
            cfg = {k.name: rng.choice(least[k.name]) for k in self.knobs}
            if self.key(cfg) in seen:
                continue
            d = min((sum(cfg[n] != t.get(n) for n in cfg) for t in taken), default=len(cfg))
            score = (d, sum(prior.get((n, v), MAX_LOG2) for n, v in cfg.items()))
            if score > best_score:
                best, best_score = cfg, score
        if best is None:
            return self.sample(rng, seen)
        return Candidate(self.key(best), best, "random " + " ".join(f"{k}={v}" for k, v in best.items()))
