"""Search strategies over one interface: MCTS (the agent's) and the baselines it is measured against
(greedy hill climbing, beam, random).

A strategy grows a tree of evaluated candidates. It asks an ``Expander`` for the next untried child
of a node (an LLM writing a variant, or the offline proposer moving a knob) and an ``evaluate``
callable for the outcome; ``run_search`` spends an evaluation budget and keeps the history.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable
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

    @property
    def best(self) -> Node:
        return max(self.nodes, key=lambda n: (n.reward, -n.id))

    def add(self, parent: Node, cand: Candidate) -> Node:
        out = self.evaluate(cand.payload)
        r = reward(out, energy_weight=self.energy_weight)
        node = Node(id=len(self.nodes), key=cand.key, payload=cand.payload, outcome=out, reward=r, parent=parent,
                    change=cand.change, depth=parent.depth + 1, value=r)
        parent.children.append(node)
        self.nodes.append(node)
        self.seen.add(cand.key)
        self.memory.record(parent, node)
        self.history.append(self.best.reward)
        return node


class Strategy(Protocol):
    name: str

    def step(self, st: SearchState) -> bool:
        """Spend one evaluation; False when nothing is left to try."""


# ------------------------------------------------------------------------------------------- MCTS
@dataclass
class MCTS:
    """UCT over the candidate tree, adapted to kernel search:

    - progressive widening: a node may have ceil(k * visits^alpha) children, so the tree deepens along
      good lines instead of enumerating every sibling first;
    - asymmetric branching: k is multiplied by ``boost`` for nodes in the top quarter of rewards or with
      a severe finding open (more to gain there);
    - max backup (the best kernel found below a node is what matters, not the average);
    - dead-end pruning: a node whose ``fail_limit`` latest children all failed to compile or were
      incorrect, or whose ``no_gain`` children all failed to beat it, is not selected again;
    - an initial design: the root's first ``initial`` children are jumps across the whole space
      (``expander.sample``, seeded by ``seed``) where the proposer can sample, so the tree starts from
      the best of several regions instead of climbing from one corner (a proposer that cannot sample,
      such as an LLM, simply expands).
    """

    c: float = 0.7
    k: float = 1.0
    alpha: float = 0.5
    boost: float = 2.0
    fail_limit: int = 3
    no_gain: int = 4
    gain_eps: float = 0.01
    backup: Literal["max", "mean"] = "max"
    initial: int = 6
    seed: int = 0
    name: str = "mcts"

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)

    def allowed_children(self, node: Node, st: SearchState) -> int:
        k = self.k
        rewards = sorted(n.reward for n in st.nodes if n.outcome.ok)
        if node.outcome.severe or (rewards and node.reward >= rewards[int(0.75 * (len(rewards) - 1))]
                                   and node.outcome.ok):
            k *= self.boost
        return max(1, math.ceil(k * node.visits ** self.alpha))

    def uct(self, child: Node, parent: Node) -> float:
        return child.value + self.c * math.sqrt(math.log(parent.visits + 1) / child.visits)

    def step(self, st: SearchState) -> bool:
        for _ in range(len(st.nodes) + 2):  # each retry marks at least one node exhausted or dead
            if st.root.dead:
                return False
            node = st.root
            if len(st.root.children) < self.initial and not st.root.exhausted:
                cand = st.expander.sample(self._rng, st.seen)  # the initial design: jumps across the space
                if cand is not None:
                    child = st.add(st.root, cand)
                    self._backprop(child)
                    return True
            while True:
                live = [c for c in node.children if not c.dead and c.outcome.ok]
                if not node.exhausted and len(node.children) < self.allowed_children(node, st):
                    cand = st.expander.expand(node, st.memory, st.seen)
                    if cand is not None:
                        child = st.add(node, cand)
                        self._prune(node)
                        self._backprop(child)
                        return True
                    node.exhausted = True
                if not live:
                    if node.exhausted or node.dead:
                        node.dead = True
                        node.dead_reason = node.dead_reason or "exhausted"
                        break
                    cand = st.expander.expand(node, st.memory, st.seen)  # widen beyond the allowance
                    if cand is None:
                        node.exhausted = node.dead = True
                        node.dead_reason = "exhausted"
                        break
                    child = st.add(node, cand)
                    self._prune(node)
                    self._backprop(child)
                    return True
                node = max(live, key=lambda c: self.uct(c, node))
            if st.root.dead:
                return False
        return False

    def _prune(self, node: Node) -> None:
        kids = node.children
        recent = kids[-self.fail_limit:]
        if len(recent) >= self.fail_limit and all(not c.outcome.ok for c in recent):
            node.dead, node.dead_reason = True, f"{self.fail_limit} failed children in a row"
        elif len(kids) >= self.no_gain and node.outcome.ok \
                and all(c.reward <= node.reward + self.gain_eps for c in kids):
            node.dead, node.dead_reason = True, f"no gain after {len(kids)} children"

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
@dataclass
class Greedy:
    """Hill climbing: always expand the best candidate found so far that still has untried children."""

    name: str = "greedy"

    def step(self, st: SearchState) -> bool:
        for node in sorted(st.nodes, key=lambda n: (-n.reward, n.id)):
            if node.exhausted or (not node.outcome.ok and node is not st.root):
                continue
            cand = st.expander.expand(node, st.memory, st.seen)
            if cand is None:
                node.exhausted = True
                continue
            st.add(node, cand)
            return True
        return False


@dataclass
class Beam:
    """Beam search: expand the ``width`` best candidates that still have untried children, in turn."""

    width: int = 3
    name: str = "beam"
    _turn: int = 0

    def step(self, st: SearchState) -> bool:
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
                st.add(node, cand)
                return True
        return False


@dataclass
class RandomSearch:
    """Uniform random candidates from the whole space (children of the root in the tree)."""

    seed: int = 0
    name: str = "random"

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)

    def step(self, st: SearchState) -> bool:
        cand = st.expander.sample(self._rng, st.seen)
        if cand is None:
            return False
        st.add(st.root, cand)
        return True


def run_search(strategy: Strategy, expander: Expander, evaluate: Evaluate, start: Candidate, *, budget: int,
               energy_weight: float = 0.0, on_step: Callable[[SearchState], None] | None = None,
               deadline: float | None = None) -> SearchState:
    """Evaluate ``start`` and then spend up to ``budget`` evaluations in all (the start counts), stopping
    early once ``time.monotonic()`` passes ``deadline`` (the evaluation under way is finished)."""
    if budget < 1:
        raise ValueError("the budget is at least one evaluation (the starting candidate)")
    out = evaluate(start.payload)
    root = Node(id=0, key=start.key, payload=start.payload, outcome=out,
                reward=reward(out, energy_weight=energy_weight), change=start.change or "start")
    root.value = root.reward
    st = SearchState(root=root, nodes=[root], memory=SearchMemory(), seen={start.key}, evaluate=evaluate,
                     expander=expander, energy_weight=energy_weight, history=[root.reward])
    if on_step is not None:
        on_step(st)
    while len(st.nodes) < budget:
        if deadline is not None and time.monotonic() >= deadline:
            st.stopped = "time"
            break
        if not strategy.step(st):
            st.stopped = "exhausted"
            break
        if on_step is not None:
            on_step(st)
    return st
