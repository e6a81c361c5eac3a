"""The optimize loop: tree search over candidates, evaluated and profiled only through the MCP tools.

``optimize`` makes the run's proposer (``proposers``), opens its run directory (``store``) and its server
(``client``), and drives the search (``search.run_search``) from a worker thread: each candidate the
search asks for is evaluated by the `run` tool on the event loop, reused from the run directory where it
was evaluated before, and repaired once by an LLM proposer when it failed (did not build, crashed, was
incorrect or invalid: the repair turn carries what went wrong). After every evaluation the tree, the
summary and the report are rewritten (``checkpoint``), so an interrupted run (Ctrl-C, cancellation) keeps
them; at the end the best is confirmed by a longer measurement (``confirm``). Where the server can
profile (its `capabilities` say Nsight Compute works), the two-stage `analyze` tool runs on the
reference first and then on the start and on every candidate that sets a new best: its bottleneck class
and ranked findings go into the outcome, where they choose the offline proposer's next knob moves, widen
MCTS under severe findings and fill the LLM proposers' prompts.
"""

from __future__ import annotations

import dataclasses
import hashlib
import threading
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

import anyio
import anyio.from_thread
import anyio.lowlevel
import anyio.to_thread

from kernelscope.agent.answers import findings_of
from kernelscope.agent.client import ServerPeer, analysis_available, resolve_parallel
from kernelscope.agent.config import OptimizeConfig, OptimizeSummary
from kernelscope.agent.confirm import Confirmation, confirm_best
from kernelscope.agent.problems import reference_as_candidate
from kernelscope.agent.proposers import Proposer, llm_cost_usd, model_name
from kernelscope.agent.search import MCTS, Beam, Greedy, Outcome, RandomSearch, run_search
from kernelscope.agent.search.strategies import SearchState
from kernelscope.agent.store import RunStore

Connect = Callable[[OptimizeConfig, str], AbstractAsyncContextManager[Any]]  # the server of a run (tests: a fake)
STRATEGIES = {"mcts": MCTS, "greedy": Greedy, "beam": Beam, "random": RandomSearch}
NEW_BEST_GAIN = 1.02  # a candidate is profiled when it beats the best speedup so far by more than this factor


class Observer(Protocol):
    """What the live view (or a test) sees of a run."""

    def activity(self, text: str) -> None: ...

    def step(self, st: SearchState) -> None: ...


def worth_profiling(out: Outcome, best_speedup: float, start: bool) -> bool:
    """Whether an evaluation gets an `analyze` profile (its findings then steer the expansions below it): a
    correct one that is the start, or that beats the best speedup so far by more than 2%."""
    return out.ok and (start or (out.speedup or 0.0) > best_speedup * NEW_BEST_GAIN)


def make_strategy(cfg: OptimizeConfig) -> Any:
    """The configured search strategy, given the seed and UCT constant where it takes them."""
    cls = STRATEGIES[cfg.strategy]
    fields = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: v for k, v in (("seed", cfg.seed), ("c", cfg.uct_c)) if k in fields})


@dataclass
class LoopState:
    """What the loop counts and decides while it runs."""

    evaluated: int = 0  # evaluations asked for by the search (labels: the start, candidate 1, ...)
    reused: int = 0  # of them, taken from the run directory
    analyses: int = 0  # profiles made or reused
    fresh_analyses: int = 0  # profiles asked of the server in this invocation
    best_speedup: float = 0.0
    workers: dict[str, int] = field(default_factory=dict)  # fresh evaluations per pool worker
    analyzing: bool = False
    analysis_note: str | None = None
    parallel: int = 1
    reference_bottleneck: str | None = None
    repairs: int = 0  # repair turns taken


class Interrupted(Exception):
    """The run was interrupted: the search's threads stop at their next evaluation."""


class OptimizeLoop:
    """One invocation's search against one server: evaluations and profiles through ``peer``, kept in
    ``store``, candidates from ``proposer``."""

    def __init__(self, cfg: OptimizeConfig, reference: str, proposer: Proposer, store: RunStore, peer: ServerPeer,
                 *, on_step: Callable[[SearchState], None] | None = None, observer: Observer | None = None) -> None:
        self.cfg, self.reference, self.proposer, self.store, self.peer = cfg, reference, proposer, store, peer
        self.on_step, self.observer = on_step, observer
        self.state = LoopState()
        self.ref_key = "reference:" + hashlib.sha256(reference.encode()).hexdigest()
        self._token: Any = None
        self.stopping = False  # set when the run is interrupted
        self.latest: SearchState | None = None  # the search as of its latest evaluation
        self.t0 = time.monotonic()
        self._write = threading.Lock()
        exp = proposer.expander
        if hasattr(exp, "cache"):  # model replies are kept in (and on resume taken from) the run directory
            exp.cache = store
            exp.retries, exp.backoff_s = cfg.llm_retries, cfg.llm_backoff_s
        peer.cache = store

    def tell(self, text: str) -> None:
        if self.observer is not None:
            self.observer.activity(text)

    def step(self, st: SearchState) -> None:
        self.latest = st
        self.checkpoint(st, "running")  # skipped once interrupted: the interruption's checkpoint is the last
        if self.on_step is not None:
            self.on_step(st)
        if self.observer is not None:
            self.observer.step(st)

    # --------------------------------------------------------------------------------- setup
    async def configure(self) -> None:
        """What the server's `capabilities` allow: profiles, evaluations in flight, CUTLASS lookups."""
        caps = await self.peer.capabilities()
        self.state.analyzing, self.state.analysis_note = analysis_available(caps, self.cfg)
        self.state.parallel = resolve_parallel(caps, self.cfg)
        self._token = anyio.lowlevel.current_token()  # the search's evaluation threads call back into this loop
        if not self.proposer.offline and self.cfg.cutlass_tools == "auto" and (caps.get("can") or {}).get("cutlass"):
            await self.peer.offer_cutlass_tools(self.proposer.expander)

    # --------------------------------------------------------------------------------- profiles
    async def analyze(self, key: str, source: str, label: str) -> dict[str, Any] | None:
        """A cached or fresh `analyze` profile of ``source`` (None when it could not be made)."""
        s = self.state
        cached = self.store.cached_analysis(key)
        if cached is not None:
            s.analyses += 1
            return cached
        if not s.analyzing or s.fresh_analyses >= self.cfg.analyze_max:
            return None
        self.tell(f"profiling {label} (analyze)")
        s.fresh_analyses += 1
        profile = await self.peer.analyze(source)
        if profile.result is None:
            if self.cfg.analyze == "always":
                raise RuntimeError(f"analyze failed on {label}: {profile.error}")
            s.analysis_note = f"analyze failed on {label}: {profile.error}"
            return None
        self.store.save_analysis(key, label, profile.result)
        s.analyses += 1
        return profile.result

    async def with_profile(self, key: str, source: str, out: Outcome, label: str) -> Outcome:
        """Profile the start and each new best; their findings steer the expansions below them."""
        promising = worth_profiling(out, self.state.best_speedup, label == "start")
        if out.ok:
            self.state.best_speedup = max(self.state.best_speedup, out.speedup or 0.0)
        if not promising:
            return out
        result = await self.analyze(key, source, label)
        if result is not None:
            out.bottleneck, out.findings, out.severe, out.details = findings_of(result)
        return out

    async def profile_reference(self) -> None:
        """The reference's own profile (its bottleneck class goes into the summary)."""
        if self.state.analyzing:
            result = await self.analyze(self.ref_key, reference_as_candidate(self.reference), "the reference")
            self.state.reference_bottleneck = findings_of(result)[0] if result else None

    # --------------------------------------------------------------------------------- evaluations
    async def run_tool(self, source: str) -> tuple[Outcome, str, dict[str, Any] | None]:
        ev = await self.peer.evaluate(source)
        if ev.worker:
            self.state.workers[ev.worker] = self.state.workers.get(ev.worker, 0) + 1
        return ev.outcome, ev.text, ev.result

    async def evaluate_fresh(self, key: str, payload: dict[str, str], label: str) -> Outcome:
        """``payload`` through the `run` tool (and one repair turn if it failed), kept in ``evals/``."""
        source = self.proposer.source_of(payload)
        self.tell(f"evaluating {label} (run)")
        out, text, result = await self.run_tool(source)
        repaired = None
        if out.status != "correct" and self.proposer.can_repair():  # one bounded repair turn
            fixed = await self.repair(source, out, text, label)
            if fixed is not None:
                out, text, result, repaired = fixed
                payload["source"] = repaired
        self.store.save_eval(key, payload, out, text, result, repaired)
        return await self.with_profile(key, repaired or source, out, label)

    async def repair(self, source: str, out: Outcome, text: str,
                     label: str) -> tuple[Outcome, str, dict[str, Any] | None, str] | None:
        """The repair turn: the model's fix, evaluated (or its earlier evaluation, when the fix is a source
        already evaluated), labelled as a repair."""
        self.tell(f"repairing {label} (LLM, {out.status})")
        exp = self.proposer.expander
        fixed = await anyio.to_thread.run_sync(exp.repair_reply, source, out.feedback or out.note or text,
                                               out.status)
        if fixed is None:
            return None
        code, why = fixed
        self.state.repairs += 1
        key = self.proposer.key_of({"source": code})
        exp.known.add(key)  # the search does not propose it again
        rec = self.store.cached_eval(key)
        if rec is not None:  # the same source was evaluated already: its outcome, not a second run
            new, text2, result = rec.outcome, f"(the repaired source was evaluated before: {key})", None
        else:
            new, text2, result = await self.run_tool(code)
            self.store.save_eval(key, {"source": code}, new, text2, result, None)
        new.label = f"repair of a {out.status} candidate: {why}"
        new.repaired_from = out.feedback or out.status
        return new, text2, result, code

    async def evaluate_async(self, payload: dict[str, str]) -> Outcome:
        s = self.state
        key = self.proposer.key_of(payload)
        label = "start" if s.evaluated == 0 else f"candidate {s.evaluated}"
        s.evaluated += 1
        if payload.get("reference_start"):  # the reference itself is the 1.0x baseline: nothing to time
            out = Outcome("correct", speedup=1.0, note="the reference itself (the baseline)")
            return await self.with_profile(self.ref_key, payload["source"], out, "start")
        rec = self.store.cached_eval(key)
        if rec is None:
            return await self.evaluate_fresh(key, payload, label)
        s.reused += 1
        if rec.repaired_source:
            payload["source"] = rec.repaired_source
        return await self.with_profile(key, self.proposer.source_of(payload), rec.outcome, label)

    def evaluate(self, payload: dict[str, str]) -> Outcome:
        """The search's ``evaluate``, called from its threads: runs on the event loop."""
        if self.stopping:
            raise Interrupted("the run was interrupted")
        return anyio.from_thread.run(self.evaluate_async, payload, token=self._token)

    # --------------------------------------------------------------------------------- search
    def search(self, deadline: float | None) -> SearchState:
        """The whole search (blocking: run it on a worker thread)."""
        energy = self.cfg.objective == "energy"
        return run_search(make_strategy(self.cfg), self.proposer.expander, self.evaluate, self.proposer.start,
                          budget=self.cfg.budget, on_step=self.step, deadline=deadline,
                          energy_weight=self.cfg.energy_weight if energy else 0.0, parallel=self.state.parallel,
                          stop=lambda: self.stopping)

    async def run(self, deadline: float | None) -> SearchState:
        await self.configure()
        await self.profile_reference()
        try:  # abandoned on cancellation: the search's threads then stop at their next evaluation
            return await anyio.to_thread.run_sync(self.search, deadline, abandon_on_cancel=True)
        finally:
            self.stopping = True

    async def confirm(self, st: SearchState) -> Confirmation | None:
        """The longer head-to-head measurement of the best (and the runner-up), when asked."""
        if not self.cfg.confirm:
            return None
        self.tell("confirming the best (run, longer timing budget)")
        return await confirm_best(st, self.peer, self.store, self.cfg, self.proposer.source_of)

    def checkpoint(self, st: SearchState, stopped: str, conf: Confirmation | None = None) -> OptimizeSummary | None:
        """The tree, every candidate, the best, the summary and the report as of now (after every
        evaluation, on an interruption and at the end); a running checkpoint after an interruption is
        dropped (None)."""
        with self._write:
            if stopped == "running" and self.stopping:
                return None
            best = conf.node if conf is not None else st.best
            tree = st.root.to_dict()
            self.store.save_candidates({n.id: self.proposer.source_of(n.payload) for n in st.nodes}, tree,
                                       self.proposer.source_of(best.payload))
            summary = self.summary(st, time.monotonic() - self.t0, conf)
            summary.stopped = stopped
            self.store.save_summary(summary, tree, report=self.cfg.report)
            return summary

    def summary(self, st: SearchState, wall_s: float, conf: Confirmation | None = None) -> OptimizeSummary:
        s, proposer = self.state, self.proposer
        best = conf.node if conf is not None else st.best
        o = conf.outcome if conf is not None and conf.outcome is not None else best.outcome
        exp = proposer.expander
        tokens = dict(getattr(exp, "tokens", {}))
        return OptimizeSummary(
            evaluations=len(st.nodes), reused=s.reused, best_id=best.id,
            best_config={k: v for k, v in best.payload.items() if "source" not in best.payload},
            proposer=proposer.name, llm_calls=getattr(exp, "calls", 0), llm_tokens=tokens,
            llm_tool_calls=getattr(exp, "tool_calls", 0), llm_cached=getattr(exp, "cached_calls", 0),
            llm_failed=getattr(exp, "failed_calls", 0), llm_retried=getattr(exp, "retried", 0),
            llm_cost_usd=None if proposer.offline else llm_cost_usd(model_name(self.cfg, proposer.name), tokens),
            best_speedup=o.speedup if o.ok else None, start_speedup=st.root.outcome.speedup,
            search_speedup=best.outcome.speedup, best_verdict=o.verdict,
            best_ci=[o.ci_low, o.ci_high] if o.ok and o.ci_low is not None and o.ci_high is not None else None,
            confirmed=conf is not None and conf.outcome is not None and conf.outcome.ok,
            confirm_note=conf.note if conf is not None else None,
            best_status=o.status, history=[round(h, 4) for h in st.history], stopped=st.stopped,
            parallel=s.parallel, workers=dict(sorted(s.workers.items())), analyses=s.analyses,
            analysis_note=s.analysis_note, reference_bottleneck=s.reference_bottleneck,
            best_bottleneck=best.outcome.bottleneck, wall_s=round(wall_s, 2), out=str(self.cfg.out))


async def optimize(cfg: OptimizeConfig, *, on_step: Callable[[SearchState], None] | None = None,
                   observer: Observer | None = None, connect: Connect | None = None,
                   sleep: Callable[[float], None] | None = None) -> OptimizeSummary:
    """Run `kernelscope optimize` as ``cfg`` says; the run directory is written (or resumed) at ``cfg.out``.
    ``connect`` opens the run's server (default: ``ServerPeer.connect``); ``sleep`` replaces the LLM
    proposer's backoff sleep (tests: no real waiting).

    Interrupted (KeyboardInterrupt, or the task cancelled), the run writes its summary and report as of
    the latest evaluation (``stopped`` = interrupted) and the interruption goes on up."""
    reference = cfg.reference.read_text()
    template = cfg.candidate.read_text() if cfg.candidate is not None else None
    proposer = Proposer.for_run(cfg, template, reference)
    if sleep is not None and hasattr(proposer.expander, "sleep"):
        proposer.expander.sleep = sleep
    store = RunStore(cfg.out)
    store.prepare(cfg)
    t0 = time.monotonic()
    deadline = t0 + cfg.time_s if cfg.time_s else None
    async with (connect or ServerPeer.connect)(cfg, reference) as peer:
        loop = OptimizeLoop(cfg, reference, proposer, store, peer, on_step=on_step, observer=observer)
        loop.t0 = t0
        async with _interruptible(loop):
            st = await loop.run(deadline)
            conf = await loop.confirm(st)
    summary = loop.checkpoint(st, st.stopped, conf)
    assert summary is not None
    return summary


@asynccontextmanager
async def _interruptible(loop: OptimizeLoop) -> AsyncIterator[None]:
    """Write the summary and the report as of the latest evaluation when the run is interrupted."""
    try:
        yield
    except BaseException as e:  # KeyboardInterrupt, cancellation, a failure: the directory says how far it got
        loop.stopping = True
        if loop.latest is not None:
            interrupted = isinstance(e, (KeyboardInterrupt, Interrupted, anyio.get_cancelled_exc_class()))
            loop.checkpoint(loop.latest, "interrupted" if interrupted else "failed")
        raise
