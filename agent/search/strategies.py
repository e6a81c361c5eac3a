"""Search strategies over one interface: MCTS (the agent's) and the baselines it is measured against
(greedy hill climbing, beam, random).

A strategy grows a tree of evaluated candidates. It asks an ``Expander`` for the next untried child
of a node (an LLM writing a variant, or the offline proposer moving a knob) and an ``evaluate``
callable for the outcome; ``run_search`` spends an evaluation budget and keeps the history.

Selection and evaluation are separate steps, so several candidates can be evaluated at once: a strategy
``propose``s an expansion (``SearchState.begin`` reserves the candidate and marks the path to it as busy),
the evaluation runs, ``SearchState.finish`` turns the result into a node and ``complete`` lets the strategy
account for it. ``step`` does the four in turn; ``run_search(parallel=N)`` keeps N expansions in flight.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Executor, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from kernelscope.agent.search.reward import Outcome, reward
from kernelscope.agent.search.tree import Node, SearchMemory


@dataclass(frozen=True)
class Candidate:
    key: str
    payload: Any
    change: str


class Expander(Protocol):
    def expand(self, node: Node, memory: SearchMemory, seen: set[str]) -> Candidate | None:
        """The next untried child of ``node`` (keys in ``seen`` are already evaluated), or None."""

    def sample(self, rng: random.Random, seen: set[str]) -> Candidate | None:
        """A random unseen candidate from the whole space (random search), or None when exhausted."""


Evaluate = Callable[[Any], Outcome]


@dataclass(eq=False)
class Pending:
    """An expansion in flight: ``cand`` is being evaluated as a child of ``parent``. Its key is already in
    ``seen`` and every node from ``parent`` up to the root counts it in ``pending`` until it is finished."""

    parent: Node
    cand: Candidate


@dataclass
class SearchState:
    root: Node
    nodes: list[Node]
    memory: SearchMemory
    seen: set[str]
    evaluate: Evaluate
    expander: Expander
    energy_weight: float = 0.0
    history: list[float] = field(default_factory=list)  # best reward after each evaluation
    stopped: str = "budget"  # why the search ended: budget, time, exhausted
    pending: list[Pending] = field(default_factory=list)  # expansions begun and not yet finished, oldest first

    @property
    def best(self) -> Node:
        return max(self.nodes, key=lambda n: (n.reward, -n.id))

    @property
    def in_flight(self) -> int:
        """How many candidates are being evaluated now."""
        return len(self.pending)

    def begin(self, parent: Node, cand: Candidate) -> Pending:
        """Reserve ``cand`` as a child of ``parent`` before it is evaluated: its key joins ``seen`` (nothing
        proposes it again) and every node from ``parent`` up to the root counts one more expansion in flight
        (the virtual loss that keeps concurrent selections apart)."""
        p = Pending(parent, cand)
        self.seen.add(cand.key)
        self.pending.append(p)
        n: Node | None = parent
        while n is not None:
            n.pending += 1
            n = n.parent
        return p

    def finish(self, p: Pending, out: Outcome) -> Node:
        """Turn an expansion begun with ``begin`` into a node with outcome ``out``: the virtual loss is lifted
        and the node joins the tree, the memory and the history."""
        if p not in self.pending:
            raise ValueError(f"{p.cand.key} is not in flight (finished already, or begun on another search)")
        self.pending.remove(p)
        n: Node | None = p.parent
        while n is not None:
            n.pending -= 1
            n = n.parent
        parent, cand = p.parent, p.cand
        r = reward(out, energy_weight=self.energy_weight)
        node = Node(id=len(self.nodes), key=cand.key, payload=cand.payload, outcome=out, reward=r, parent=parent,
                    change=out.label or cand.change, depth=parent.depth + 1, value=r)
        parent.children.append(node)
        self.nodes.append(node)
        self.memory.record(parent, node)
        self.history.append(self.best.reward)
        return node

    def add(self, parent: Node, cand: Candidate) -> Node:
        """Evaluate ``cand`` as a child of ``parent`` now."""
        return self.finish(self.begin(parent, cand), self.evaluate(cand.payload))


class Strategy(Protocol):
    name: str

    def propose(self, st: SearchState) -> Pending | None:
        """Select a node and begin one expansion of it (``st.begin``); None when there is nothing to propose
        now (with expansions in flight, their results may open more)."""

    def complete(self, st: SearchState, node: Node) -> None:
        """Account for ``node``, the finished result of an expansion that this strategy proposed."""

    def step(self, st: SearchState) -> bool:
        """Spend one evaluation (propose, evaluate, finish, complete); False when nothing is left to try."""


def _step(strategy: Strategy, st: SearchState) -> bool:
    p = strategy.propose(st)
    if p is None:
        return False
    strategy.complete(st, st.finish(p, st.evaluate(p.cand.payload)))
    return True


# ------------------------------------------------------------------------------------------- MCTS
@dataclass
class MCTS:
    """UCT over the candidate tree, adapted to kernel search:

    - progressive widening: a node may have ceil(k * visits^alpha) children, so the tree deepens along
      good lines instead of enumerating every sibling first;
    - asymmetric branching: k is multiplied by ``boost`` for nodes in the top quarter of rewards, or with
      a severe finding open if they are in the upper half (more to gain there; a severe finding on a poor node
      is no reason to widen it: on matmul_fp16 most configurations carry one);
    - max backup (the best kernel found below a node is what matters, not the average);
    - dead-end pruning: a node whose ``fail_limit`` latest children all failed to compile or were
      incorrect, or whose ``no_gain`` children all failed to beat it, is not expanded again; selection still
      passes through it to its live children, and once it has none it is dead (not selected again);
    - an initial design: the root's first children are jumps across the whole space, seeded by ``seed``,
      where the proposer can sample, so the tree starts from the best of several regions instead of climbing
      from one corner (a proposer that cannot sample, such as an LLM, simply expands). The jumps go on until
      ``initial`` of them measured correct (a jump that failed to build or was incorrect says nothing about
      speed, so it is not counted) and, where the proposer can tell (``covered``), every value of every knob
      has been evaluated once; ``max_jumps`` (twice ``initial`` unless set) at most. Once ``initial`` jumps
      measured correct, the jumps that complete the coverage alternate with expansions of the tree, so the best
      region found so far is refined without waiting for the last values to be tried (on softmax, where the
      block size's six values take five jumps, the first refinement of the best jump came only after them). With
      a proposer that has
      a ``design`` (the knob proposer), the jumps are spread: each knob takes the values used least so far
      (each value of a knob is tried before any is repeated, as in a Latin hypercube), the jumps differ from
      each other in as many knobs as they can, and among equally spread jumps the one made of the values that
      measured best so far is taken; otherwise they are ``expander.sample``s;
    - virtual loss, for several evaluations in flight at once (``run_search(parallel=...)``): on every node
      of its path, an expansion in flight counts as a visit that lost ``virtual_loss`` (UCT sees ``visits +
      pending`` visits and a value lowered by ``virtual_loss * pending / (visits + pending)``), and progressive
      widening and the initial design count children in flight as children, so concurrent selections spread
      over the tree instead of all taking the best path. A node with nothing left to offer but expansions in
      flight below it is passed over, not pruned, until they return; when every line is waiting like that,
      ``propose`` returns None and the caller retries once a result is in.
    """

    c: float = 0.7
    k: float = 1.0
    alpha: float = 0.5
    boost: float = 2.0
    fail_limit: int = 3
    no_gain: int = 4
    gain_eps: float = 0.01
    backup: Literal["max", "mean"] = "max"
    initial: int = 4
    max_jumps: int | None = None
    seed: int = 0
    virtual_loss: float = 1.0
    name: str = "mcts"

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)
        self._jumps: set[str] = set()  # keys of initial-design samples in flight (not pruned on)
        self._last_jumped = False  # whether the latest proposal was an initial-design jump

    def allowed_children(self, node: Node, st: SearchState) -> int:
        k = self.k
        rewards = sorted(n.reward for n in st.nodes if n.outcome.ok)
        if node.outcome.ok and rewards:
            top = node.reward >= rewards[int(0.75 * (len(rewards) - 1))]
            upper_half = node.reward >= rewards[int(0.5 * (len(rewards) - 1))]
            if top or (node.outcome.severe and upper_half):
                k *= self.boost
        return max(1, math.ceil(k * node.visits ** self.alpha))

    def uct(self, child: Node, parent: Node) -> float:
        """UCB1 on the backed-up value, each expansion in flight counted as a visit that lost ``virtual_loss``."""
        n = child.visits + child.pending
        value = child.value - self.virtual_loss * child.pending / n if child.pending else child.value
        return value + self.c * math.sqrt(math.log(parent.visits + parent.pending + 1) / n)

    def propose(self, st: SearchState) -> Pending | None:
        """The initial design's next jump, or else descend by UCT (with the virtual loss) to a node that may
        have another child and begin that child."""
        waiting: set[int] = set()  # nodes with nothing to offer until their expansions in flight return
        for _ in range(len(st.nodes) + 2):  # each retry marks at least one node exhausted, dead or waiting
            if st.root.dead:
                return None
            node = st.root
            if self._designing(st):
                cand = self._jump(st)  # the initial design: jumps across the space
                if cand is not None:
                    self._jumps.add(cand.key)
                    self._last_jumped = True
                    return st.begin(node, cand)
            self._last_jumped = False
            while True:
                live = [c for c in node.children if not c.dead and c.outcome.ok and c.id not in waiting]
                if not node.exhausted and len(node.children) + node.pending_children < self.allowed_children(node, st):
                    cand = st.expander.expand(node, st.memory, st.seen)
                    if cand is not None:
                        return st.begin(node, cand)
                    node.exhausted = True
                if not live:
                    if not (node.exhausted or node.dead):
                        cand = st.expander.expand(node, st.memory, st.seen)  # widen beyond the allowance
                        if cand is not None:
                            return st.begin(node, cand)
                        node.exhausted = True
                    if node.pending:  # its children in flight may still turn out live: wait for them
                        if node is st.root:
                            return None
                        waiting.add(node.id)
                        break
                    node.dead = True
                    node.dead_reason = node.dead_reason or "exhausted"
                    break
                node = max(live, key=lambda c: self.uct(c, node))
        return None

    def _designing(self, st: SearchState) -> bool:
        """Whether the initial design wants another jump: fewer than ``initial`` of the root's children
        measured correct (those in flight count as if they will), or else a knob value not evaluated yet and the
        latest proposal not a jump (the coverage jumps alternate with refinements); and fewer than
        ``max_jumps`` children in all."""
        root = st.root
        if self.initial <= 0 or root.exhausted:
            return False
        jumps = len(root.children) + root.pending_children
        if jumps >= (self.max_jumps if self.max_jumps is not None else 2 * self.initial):
            return False
        if sum(c.outcome.ok for c in root.children) + root.pending_children < self.initial:
            return True
        covered = getattr(st.expander, "covered", None)
        return covered is not None and not self._last_jumped and not covered(self._taken(st))

    @staticmethod
    def _taken(st: SearchState) -> list[Any]:
        """The payloads evaluated or in flight."""
        return [n.payload for n in st.nodes] + [p.cand.payload for p in st.pending]

    def _jump(self, st: SearchState) -> Candidate | None:
        """The initial design's next jump: spread over the space by the expander's ``design`` (given what was
        evaluated or is in flight, and what each evaluated candidate measured) where it has one, else a uniform
        ``sample``."""
        design = getattr(st.expander, "design", None)
        if design is None:
            return st.expander.sample(self._rng, st.seen)
        return design(self._rng, st.seen, self._taken(st), measured=[(n.payload, n.reward) for n in st.nodes])

    def complete(self, st: SearchState, node: Node) -> None:
        """Prune the expanded node if its children say so (not for the initial design's jumps) and back the
        new reward up to the root."""
        parent = node.parent
        assert parent is not None
        if node.key in self._jumps:
            self._jumps.discard(node.key)
        elif not parent.dead:
            self._prune(parent)
        self._backprop(node)

    def step(self, st: SearchState) -> bool:
        return _step(self, st)

    def _prune(self, node: Node) -> None:
        """Close a dead end: it gets no more children, while selection still passes through it to its children
        that measured correct (a node whose moves barely changed anything can have a child that is the best
        kernel so far). With none of those left, ``propose`` marks it dead."""
        kids = node.children
        recent = kids[-self.fail_limit:]
        if len(recent) >= self.fail_limit and all(not c.outcome.ok for c in recent):
            node.exhausted, node.dead_reason = True, f"{self.fail_limit} failed children in a row"
        elif len(kids) >= self.no_gain and node.outcome.ok \
                and all(c.reward <= node.reward + self.gain_eps for c in kids):
            node.exhausted, node.dead_reason = True, f"no gain after {len(kids)} children"

    def _backprop(self, leaf: Node) -> None:
        r = leaf.reward
        n = leaf.parent
        while n is not None:
            n.visits += 1
            if self.backup == "max":
                n.value = max(n.value, r)
            else:
                n.value += (r - n.value) / n.visits
            n = n.parent


# ------------------------------------------------------------------------------------------- baselines
class _Baseline:
    """What the baselines share: nothing to update when a result comes in, and one step = propose and
    evaluate."""

    def complete(self, st: SearchState, node: Node) -> None:
        pass

    def step(self, st: SearchState) -> bool:
        return _step(self, st)  # type: ignore[arg-type]


@dataclass
class Greedy(_Baseline):
    """Hill climbing: always expand the best candidate found so far that still has untried children."""

    name: str = "greedy"

    def propose(self, st: SearchState) -> Pending | None:
        for node in sorted(st.nodes, key=lambda n: (-n.reward, n.id)):
            if node.exhausted or (not node.outcome.ok and node is not st.root):
                continue
            cand = st.expander.expand(node, st.memory, st.seen)
            if cand is None:
                node.exhausted = True
                continue
            return st.begin(node, cand)
        return None


@dataclass
class Beam(_Baseline):
    """Beam search: expand the ``width`` best candidates that still have untried children, in turn."""

    width: int = 3
    name: str = "beam"
    _turn: int = 0

    def propose(self, st: SearchState) -> Pending | None:
        for _ in range(2):
            beam = [n for n in sorted(st.nodes, key=lambda n: (-n.reward, n.id))
                    if not n.exhausted and (n.outcome.ok or n is st.root)][:self.width]
            for i in range(len(beam)):
                node = beam[(self._turn + i) % len(beam)]
                cand = st.expander.expand(node, st.memory, st.seen)
                if cand is None:
                    node.exhausted = True
                    continue
                self._turn += 1
                return st.begin(node, cand)
        return None


@dataclass
class RandomSearch(_Baseline):
    """Uniform random candidates from the whole space (children of the root in the tree)."""

    seed: int = 0
    name: str = "random"

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)

    def propose(self, st: SearchState) -> Pending | None:
        cand = st.expander.sample(self._rng, st.seen)
        return None if cand is None else st.begin(st.root, cand)


class _Inline(Executor):
    """Runs each call as it is submitted, on the calling thread (``run_search(simulate=True)``)."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        f: Future[Any] = Future()
        try:
            f.set_result(fn(*args, **kwargs))
        except Exception as e:
            f.set_exception(e)
        return f


def run_search(strategy: Strategy, expander: Expander, evaluate: Evaluate, start: Candidate, *, budget: int,
               energy_weight: float = 0.0, on_step: Callable[[SearchState], None] | None = None,
               deadline: float | None = None, parallel: int = 1, simulate: bool = False,
               stop: Callable[[], bool] | None = None) -> SearchState:
    """Evaluate ``start`` and then spend up to ``budget`` evaluations in all (the start counts), stopping
    early once ``time.monotonic()`` passes ``deadline`` (the evaluations under way are finished).

    With ``parallel`` > 1, up to that many evaluations run at once on a thread pool (``evaluate`` must be
    safe to call from several threads): each result is committed on the calling thread as it arrives
    (``st.finish``, ``strategy.complete``, then ``on_step``) and the strategy proposes again to refill;
    evaluations in flight count against the budget, and when the strategy has nothing to propose while
    some are in flight, the next result is awaited first. ``simulate`` runs the same schedule without
    threads, as ``parallel`` workers of equal speed would: each evaluation runs when it is submitted and
    results are committed in submission order (reproducible with a deterministic ``evaluate``, as in the
    benchmarks' replay). ``stop`` (when given and true) ends the search like the deadline, as
    ``interrupted``."""
    if budget < 1:
        raise ValueError("the budget is at least one evaluation (the starting candidate)")
    if parallel < 1:
        raise ValueError("parallel is at least one evaluation in flight")
    out = evaluate(start.payload)
    root = Node(id=0, key=start.key, payload=start.payload, outcome=out,
                reward=reward(out, energy_weight=energy_weight), change=start.change or "start")
    root.value = root.reward
    st = SearchState(root=root, nodes=[root], memory=SearchMemory(), seen={start.key}, evaluate=evaluate,
                     expander=expander, energy_weight=energy_weight, history=[root.reward])
    if on_step is not None:
        on_step(st)
    if parallel > 1:
        _run_parallel(strategy, st, budget, on_step, deadline, parallel, simulate, stop)
        return st
    while len(st.nodes) < budget:
        if stop is not None and stop():
            st.stopped = "interrupted"
            break
        if deadline is not None and time.monotonic() >= deadline:
            st.stopped = "time"
            break
        if not strategy.step(st):
            st.stopped = "exhausted"
            break
        if on_step is not None:
            on_step(st)
    return st


def _run_parallel(strategy: Strategy, st: SearchState, budget: int, on_step: Callable[[SearchState], None] | None,
                  deadline: float | None, parallel: int, simulate: bool,
                  stop: Callable[[], bool] | None = None) -> None:
    flights: list[tuple[Future[Outcome], Pending]] = []  # oldest first
    with _Inline() if simulate else ThreadPoolExecutor(parallel, thread_name_prefix="evaluate") as pool:
        while True:
            while len(flights) < parallel and len(st.nodes) + len(flights) < budget:
                if stop is not None and stop():
                    st.stopped = "interrupted"
                    break
                if deadline is not None and time.monotonic() >= deadline:
                    st.stopped = "time"  # propose nothing more; what is in flight is finished
                    break
                p = strategy.propose(st)
                if p is None:
                    if not flights:
                        st.stopped = "exhausted"
                    break
                flights.append((pool.submit(st.evaluate, p.cand.payload), p))
            if not flights:
                return
            if simulate:
                done = flights[:1]
            else:
                wait([f for f, _ in flights], return_when=FIRST_COMPLETED)
                done = [fp for fp in flights if fp[0].done()]
            for fp in done:
                flights.remove(fp)
                node = st.finish(fp[1], fp[0].result())
                strategy.complete(st, node)
                if on_step is not None:
                    on_step(st)
