"""The confirmation of a run's best: the search ranks candidates on short measurements, so its best is
measured again, with a longer timing budget, before the summary states a speedup.

The search's best and its runner-up (the next correct candidate by rank, when there is one) each go
through the `run` tool against the reference with ``confirm_timing_budget_s``; the one with the higher
lower confidence bound (an ``inconclusive`` verdict counting as a tie with the reference) is the run's
best, and its confirmed speedup and interval are what the summary and the report state. A candidate that
the longer run finds invalid or incorrect is out (when none holds up, the summary says so and states no
speedup). The answers are kept in the run directory
(``tools/``), so a resumed run does not measure again.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kernelscope.agent.answers import outcome_from_run
from kernelscope.agent.client import Evaluation
from kernelscope.agent.config import OptimizeConfig
from kernelscope.agent.search import Node, Outcome, reward
from kernelscope.agent.search.strategies import SearchState

CONFIRM_MIN_S = 1.0


@dataclass
class Confirmation:
    """What the confirmation found: the run's best node and its confirmed outcome (None: nothing to confirm,
    the search's figure stands), and a sentence on what was measured."""

    node: Node
    outcome: Outcome | None
    note: str


def confirm_budget(cfg: OptimizeConfig) -> float:
    return cfg.confirm_timing_budget_s or max(CONFIRM_MIN_S, 4 * cfg.timing_budget_s)


def contenders(st: SearchState, limit: int = 2) -> list[Node]:
    """The best correct candidates by the search's rank (distinct sources; the reference itself is not
    measured against itself)."""
    seen: set[str] = set()
    out: list[Node] = []
    for n in sorted((n for n in st.nodes if n.outcome.ok), key=lambda n: (-n.reward, n.id)):
        if n.key in seen or (isinstance(n.payload, dict) and n.payload.get("reference_start")):
            continue
        seen.add(n.key)
        out.append(n)
        if len(out) == limit:
            break
    return out


async def measure(peer: Any, store: Any, cfg: OptimizeConfig, source: str) -> Outcome:
    """One confirmation run of ``source`` (kept in, and reused from, the run directory)."""
    budget = confirm_budget(cfg)
    args = {"source": source, "timing_budget_s": budget, "trials": cfg.trials}
    kept = store.cached_tool("run:confirm", args)
    if kept is not None:
        return outcome_from_run(kept.get("result"), kept.get("error"), energy=cfg.objective == "energy")
    ev: Evaluation = await peer.evaluate(source, timing_budget_s=budget, trials=cfg.trials)
    error = ev.text if ev.result is None else None
    store.save_tool("run:confirm", args, {"result": ev.result, "error": error, "speedup": ev.outcome.speedup,
                                          "status": ev.outcome.status})
    return ev.outcome


def _describe(n: Node, o: Outcome) -> str:
    if not o.ok:
        return f"node {n.id}: {o.status} on the longer run"
    ci = f" (95% CI {o.ci_low:.3f}-{o.ci_high:.3f})" if o.ci_low is not None and o.ci_high is not None else ""
    return f"node {n.id}: {o.speedup:.3f}x{ci}, {o.verdict or 'no verdict'}"


async def confirm_best(st: SearchState, peer: Any, store: Any, cfg: OptimizeConfig,
                       source_of: Any) -> Confirmation:
    """Measure the best and the runner-up again with the longer budget and pick the run's best."""
    nodes = contenders(st)
    if not nodes:
        return Confirmation(st.best, None, "nothing to confirm: no correct candidate beyond the reference")
    measured = [(n, await measure(peer, store, cfg, source_of(n.payload))) for n in nodes]
    weight = cfg.energy_weight if cfg.objective == "energy" else 0.0
    ok = [(n, o) for n, o in measured if o.ok]
    note = (f"confirmed with a {confirm_budget(cfg):g} s timing budget per side: "
            + "; ".join(_describe(n, o) for n, o in measured))
    if not ok:
        n, o = measured[0]  # none held up: say so (the summary then names no speedup)
        return Confirmation(n, o, note + " (none confirmed)")
    node, out = max(ok, key=lambda no: (reward(no[1], energy_weight=weight), -no[0].id))
    return Confirmation(node, out, note)
