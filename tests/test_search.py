"""The agent's search core on synthetic spaces (no server, no GPU): knob parsing and application,
log-scaled rewards, MCTS with progressive widening and pruning, the baselines, the search memory, and
the parallel search (several evaluations in flight, virtual loss)."""

from __future__ import annotations

import json
import math
import random
import threading
import time
import zlib
from collections.abc import Callable
from types import SimpleNamespace

import pytest

from kernelscope.agent.search import (
    MCTS,
    Beam,
    Greedy,
    KnobExpander,
    Outcome,
    RandomSearch,
    apply_knobs,
    neighbours,
    parse_knobs,
    reward,
    run_search,
    strategies,
)
from kernelscope.agent.search.knobs import knob_order
from kernelscope.agent.search.strategies import Pending, SearchState
from kernelscope.agent.search.tree import Node

CUDA = """\
// @knob BLOCK 64 128 256 512 1024
// @knob VEC 1 2 4
extern "C" __global__ void k(const float* x, float* y) { }
"""
PY = """\
import torch
# @knob ITEMS 1 2 4 8
    # @knob UNROLL 1 4
"""


def test_knobs_parse_and_apply_in_each_language() -> None:
    ks = parse_knobs(CUDA + PY)
    assert [(k.name, k.values, k.language) for k in ks] == [
        ("BLOCK", ("64", "128", "256", "512", "1024"), "cuda"), ("VEC", ("1", "2", "4"), "cuda"),
        ("ITEMS", ("1", "2", "4", "8"), "python"), ("UNROLL", ("1", "4"), "python")]
    out = apply_knobs(CUDA + PY, {"BLOCK": "256", "VEC": "4", "ITEMS": "2", "UNROLL": "4"})
    assert "#define BLOCK 256  // @knob BLOCK 64 128 256 512 1024\n" in out
    assert "#define VEC 4  // @knob VEC 1 2 4\n" in out
    assert "ITEMS = 2  # @knob ITEMS 1 2 4 8\n" in out and "    UNROLL = 4  # @knob UNROLL 1 4\n" in out
    assert parse_knobs(out) == []  # an applied file declares nothing any more
    pytest.importorskip("torch", reason="the applied Python template imports torch")
    ns: dict = {}
    exec(compile(apply_knobs(PY, {"ITEMS": "8", "UNROLL": "1"}).replace("    UNROLL", "UNROLL"), "p", "exec"), ns)
    assert ns["ITEMS"] == 8


@pytest.mark.parametrize(("cfg", "needle"), [({"BLOCK": "100"}, "no value '100'"), ({"NOPE": "1"}, "unknown knobs")])
def test_bad_knob_values_are_refused(cfg: dict, needle: str) -> None:
    with pytest.raises(ValueError, match=needle):
        apply_knobs(CUDA, cfg)
    with pytest.raises(ValueError, match="repeats a value"):
        parse_knobs("// @knob X 1 2 1\n")


def test_neighbours_and_the_class_prior() -> None:
    ks = parse_knobs(CUDA)
    assert neighbours(ks, {"BLOCK": "64", "VEC": "2"}) == [
        {"BLOCK": "128", "VEC": "2"}, {"BLOCK": "64", "VEC": "4"}, {"BLOCK": "64", "VEC": "1"}]
    assert knob_order(ks, "memory-bound")[0] == "VEC"
    assert knob_order(ks, "occupancy-limited")[0] == "BLOCK"
    assert knob_order(ks, None, ["memory.non-vectorized-access"])[0] == "VEC"
    # at the DRAM roof the memory-bound class names knobs that cannot help: the declared order, findings or not
    roof = ["memory.dram-saturated", "memory.non-vectorized-access"]
    assert knob_order(ks, "memory-bound", roof) == [k.name for k in ks] == ["BLOCK", "VEC"]


def test_rewards_are_log_scaled_and_failures_rank_below_every_success() -> None:
    assert reward(Outcome("correct", speedup=2.0)) == pytest.approx(1.0)
    assert reward(Outcome("correct", speedup=0.5)) == pytest.approx(-1.0)
    assert reward(Outcome("correct", speedup=1e9)) == 6.0  # clipped
    worst_correct = reward(Outcome("correct", speedup=1e-9))
    fails = [reward(Outcome(s)) for s in ("incorrect", "crashed", "compile-error")]
    assert all(f < worst_correct for f in fails) and fails == sorted(fails, reverse=True)
    assert reward(Outcome("correct", speedup=2.0, energy_ratio=2.0), energy_weight=0.1) == pytest.approx(1.1)


# ------------------------------------------------------------------------------ a synthetic tuning space
SPACE = """\
// @knob BLOCK 32 64 128 256 512 1024
// @knob VEC 1 2 4 8
// @knob ITEMS 1 2 4 8
// @knob UNROLL 1 2 4 8
"""


def synthetic(cfg: dict[str, str]) -> Outcome:
    """A deterministic landscape with interactions, a ridge, infeasible corners and a compile error."""
    b, v, i, u = (int(cfg[k]) for k in ("BLOCK", "VEC", "ITEMS", "UNROLL"))
    if b * v * i > 8192:
        return Outcome("incorrect", note="out of shared memory")
    if b == 1024 and u == 8:
        return Outcome("compile-error")
    s = 1.0
    s *= 1.0 + 0.9 * math.exp(-((math.log2(b) - 8) ** 2) / 2)  # best block 256
    s *= {1: 1.0, 2: 1.35, 4: 1.7, 8: 1.6}[v]
    s *= {1: 1.0, 2: 1.2, 4: 1.3, 8: 1.1}[i] * (1.15 if v * i == 8 else 1.0)  # interaction
    s *= {1: 1.0, 2: 1.08, 4: 1.12, 8: 1.05}[u]
    return Outcome("correct", speedup=s, bottleneck="memory-bound" if v < 4 else "compute-bound",
                   findings=["memory.non-vectorized-access"] if v == 1 else [])


def exhaustive_best() -> float:
    import itertools

    ks = parse_knobs(SPACE)
    best = 0.0
    for vals in itertools.product(*(k.values for k in ks)):
        o = synthetic(dict(zip([k.name for k in ks], vals, strict=True)))
        if o.ok:
            best = max(best, o.speedup or 0.0)
    return best


def _run(strategy, budget: int):  # type: ignore[no-untyped-def]
    exp = KnobExpander(parse_knobs(SPACE))
    return run_search(strategy, exp, synthetic, exp.start(), budget=budget)


def test_mcts_reaches_95_percent_of_the_best_in_a_quarter_of_the_space() -> None:
    size = 6 * 4 * 4 * 4
    st = _run(MCTS(), size // 4)
    assert len(st.nodes) <= size // 4
    assert st.best.outcome.speedup >= 0.95 * exhaustive_best(), (st.best.key, st.best.outcome.speedup)
    assert len({n.key for n in st.nodes}) == len(st.nodes)  # nothing evaluated twice
    assert st.history == sorted(st.history)  # best-so-far never decreases
    json.dumps(st.root.to_dict())  # the tree serialises for the run directory


@pytest.mark.parametrize("strategy", [Greedy(), Beam(width=3), RandomSearch(seed=1)])
def test_baselines_share_the_interface_and_the_budget(strategy) -> None:  # type: ignore[no-untyped-def]
    st = _run(strategy, 40)
    assert len(st.nodes) == 40 and len({n.key for n in st.nodes}) == 40
    assert st.best.outcome.ok


def test_progressive_widening_limits_children_by_visits() -> None:
    m = MCTS(k=1.0, alpha=0.5, boost=1.0, initial=0)
    st = _run(m, 12)
    for n in st.nodes:
        assert len(n.children) <= max(1, math.ceil(m.k * n.visits ** m.alpha)) + 1


def test_asymmetric_branching_widens_top_nodes_and_severe_ones_in_the_upper_half() -> None:
    """k is doubled for a node in the top quarter of rewards, or with a severe finding open if it is in the upper
    half: a severe finding on a poor node (on matmul_fp16 most configurations are register-limited) is no reason
    to spend evaluations there."""
    from kernelscope.agent.search.tree import Node, SearchMemory

    def node(i: int, r: float, severe: bool = False) -> Node:
        return Node(id=i, key=str(i), payload={}, outcome=Outcome("correct", speedup=2.0 ** r, severe=severe),
                    reward=r, visits=4)

    # rewards 0 1 1 2 3 3.5 4 5 6 7: the top quarter starts at 4, the upper half at 3
    nodes = [node(i, float(i)) for i in range(8)] + [node(8, 1.0, severe=True), node(9, 3.5, severe=True)]
    st = SearchState(root=nodes[0], nodes=nodes, memory=SearchMemory(), seen=set(),
                     evaluate=lambda c: Outcome("correct"), expander=None)  # type: ignore[arg-type]
    m = MCTS(k=1.0, alpha=0.5, boost=2.0)
    plain, boosted = math.ceil(4 ** 0.5), math.ceil(2 * 4 ** 0.5)
    assert m.allowed_children(nodes[7], st) == m.allowed_children(nodes[4], st) == boosted  # top quarter
    assert m.allowed_children(nodes[3], st) == plain  # upper half, nothing severe
    assert m.allowed_children(nodes[9], st) == boosted  # upper half and severe
    assert m.allowed_children(nodes[8], st) == plain  # severe, but in the lower half


def _assert_design_order(st: SearchState, initial: int) -> list[Node]:
    """The jumps of ``st``'s initial design (returned): every evaluation is a jump until ``initial`` of them
    measured correct; after that, a jump only ever follows a refinement (coverage alternates with the tree)."""
    jumps, ok = [], 0
    for prev, n in zip(st.nodes, st.nodes[1:], strict=False):
        jump = n.change.startswith("random ")
        if ok < initial:
            assert jump, f"evaluation {n.id} is a refinement before {initial} jumps measured correct"
        elif jump:
            assert not prev.change.startswith("random "), f"jump {n.id} follows jump {prev.id} after the quota"
        if jump:
            jumps.append(n)
            ok += n.outcome.ok
    return jumps


def test_the_initial_design_jumps_across_the_space_then_refines() -> None:
    """The root's first children are seeded random jumps (reproducible per seed, different across
    seeds); once four measured correct, the jumps that complete the coverage alternate with one-knob moves from
    the best regions."""
    a, b, c = (_run(MCTS(seed=s), 20) for s in (1, 1, 2))
    jumps = _assert_design_order(a, 4)
    assert len(jumps) >= 5 and jumps[:4] == a.nodes[1:5]  # BLOCK has six values: five jumps at least
    assert a.nodes[5] not in jumps and a.nodes[5].parent is not a.root  # the best jump refined before the fifth
    first = [n.change for n in jumps]
    assert first == [n.change for n in b.root.children[:len(first)]] != [n.change for n in c.root.children[:len(first)]]
    later = [n for n in a.nodes[1:] if n not in jumps]
    assert later and all(n.parent is not None and n.parent.outcome.ok for n in later)
    assert all(sum(n.payload[k] != n.parent.payload[k] for k in n.payload) == 1 for n in later)
    assert not _run(MCTS(initial=0), 10).root.children[0].change.startswith("random ")


def test_the_initial_design_spreads_over_every_value_of_every_knob() -> None:
    """With the knob proposer the jumps are balanced: each value of a knob is tried before any repeats."""
    ks = parse_knobs(SPACE)
    for seed in range(5):
        st = _run(MCTS(seed=seed, initial=6), 7)
        taken = [n.payload for n in st.nodes]  # the start and six jumps
        assert all(n.change.startswith("random ") for n in st.nodes[1:])
        for k in ks:
            counts = [sum(p[k.name] == v for p in taken) for v in k.values]
            assert max(counts) - min(counts) <= 1, (k.name, counts)


def test_the_initial_design_counts_only_jumps_that_measured_and_covers_every_value() -> None:
    """A jump that failed says nothing about speed: the design goes on until ``initial`` jumps measured correct
    (``max_jumps`` at most), and until every value of every knob has been evaluated once."""
    def half_fail(cfg: dict[str, str]) -> Outcome:
        return Outcome("compile-error") if cfg["VEC"] in ("4", "8") else synthetic(cfg)

    exp = KnobExpander(parse_knobs(SPACE))
    st = run_search(MCTS(seed=0, initial=4), exp, half_fail, exp.start(), budget=30)
    jumps = _assert_design_order(st, 4)
    assert jumps == [n for n in st.root.children if n.change.startswith("random ")]
    failed = [n for n in jumps if not n.outcome.ok]
    assert failed and sum(n.outcome.ok for n in jumps) >= 4 and len(jumps) <= 8  # max_jumps: twice initial
    assert exp.covered([n.payload for n in st.nodes[:jumps[-1].id + 1]])
    exp = KnobExpander(parse_knobs(SPACE))
    capped = run_search(MCTS(seed=0, initial=4, max_jumps=5), exp, lambda cfg: Outcome("compile-error")
                        if cfg != exp.start().payload else Outcome("correct", speedup=1.0), exp.start(), budget=30)
    assert sum(n.change.startswith("random ") for n in capped.nodes) == 5
    # one jump suffices for the count here, but BLOCK's six values need five
    exp = KnobExpander(parse_knobs(SPACE))
    one = run_search(MCTS(seed=0, initial=1, max_jumps=10), exp, synthetic, exp.start(), budget=30)
    jumps = _assert_design_order(one, 1)
    assert len(jumps) == 5 and [n.id for n in jumps] == [1, 3, 5, 7, 9]  # each after a refinement
    assert exp.covered([n.payload for n in one.nodes[:10]])
    assert not any(n.change.startswith("random ") for n in _run(MCTS(initial=0), 10).nodes)


def test_the_design_repeats_the_knob_values_that_measured_best() -> None:
    """Once every value of a knob has been used, a jump must repeat one: among equally spread jumps, the
    design takes the values that did best so far (the spread still comes first)."""
    ks = parse_knobs("// @knob A 1 2\n// @knob B 1 2 3\n// @knob C 1 2 3 4\n")
    exp = KnobExpander(ks)
    taken = [{"A": "1", "B": "1", "C": "1"}, {"A": "2", "B": "2", "C": "2"}]
    for good in ("1", "2"):
        measured = [(taken[0], 1.0 if good == "1" else -1.0), (taken[1], 1.0 if good == "2" else -1.0)]
        for seed in range(10):
            cand = exp.design(random.Random(seed), {exp.key(c) for c in taken}, taken, measured=measured)
            # A must repeat a value and takes the better configuration's; B and C take values not used yet
            assert cand.payload["A"] == good and cand.payload["B"] == "3" and cand.payload["C"] in ("3", "4")
    # without measurements the repeat is at random, as before
    picks = {exp.design(random.Random(s), set(), taken).payload["A"] for s in range(20)}
    assert picks == {"1", "2"}


def test_a_node_whose_children_all_fail_is_pruned() -> None:
    def only_root_works(cfg: dict[str, str]) -> Outcome:
        return Outcome("correct", speedup=1.0) if cfg == {"BLOCK": "32", "VEC": "1", "ITEMS": "1", "UNROLL": "1"} \
            else Outcome("compile-error")

    exp = KnobExpander(parse_knobs(SPACE))
    st = run_search(MCTS(fail_limit=3, initial=0), exp, only_root_works, exp.start(), budget=50)
    assert st.root.dead and "failed children" in st.root.dead_reason
    assert len(st.nodes) == 4  # the start and three failures, then the search stops


def test_a_dead_end_gets_no_more_children_but_its_children_are_still_searched() -> None:
    """No gain after ``no_gain`` children closes a node: it is not expanded again, while its children (which may
    hold the best kernel so far) are still selected and expanded."""
    flat = lambda cfg: Outcome("correct", speedup=1.0)  # noqa: E731 - every move changes nothing
    exp = KnobExpander(parse_knobs(SPACE))
    st = run_search(MCTS(no_gain=4, initial=0), exp, flat, exp.start(), budget=12)
    assert len(st.nodes) == 12 and st.stopped == "budget"
    assert len(st.root.children) == 4 and st.root.exhausted and not st.root.dead
    assert "no gain after 4 children" in st.root.dead_reason
    assert any(c.children for c in st.root.children)  # the search went on below the closed root


def test_memory_steers_the_offline_proposer_away_from_moves_that_hurt() -> None:
    st = _run(MCTS(), 30)
    stats = st.memory.move_stats()
    assert stats and all(h + b >= 1 for h, b in stats.values())
    text = st.memory.summary()
    assert "helped" in text or "hurt" in text
    assert any("resolved memory.non-vectorized-access" in ln for ln in text.splitlines()) \
        or not any(e.findings_before for e in st.memory.entries)


# ------------------------------------------------------------------------------ several evaluations in flight
class Concurrent:
    """A thread-safe evaluator (``synthetic`` unless told) that takes 5-20 ms per call and records the calls
    and how many ran at once; the ``fail_at``-th call raises, and the ``gather`` calls after the start's wait
    for each other (so that they provably run at once, however loaded the machine)."""

    def __init__(self, fail_at: int | None = None, fn: Callable[[dict[str, str]], Outcome] = synthetic,
                 gather: int = 0) -> None:
        self.lock = threading.Lock()
        self.active = self.peak = 0
        self.keys: list[str] = []
        self.fail_at = fail_at
        self.fn = fn
        self.gather = threading.Barrier(gather, timeout=60) if gather else None  # a safety net only

    def __call__(self, cfg: dict[str, str]) -> Outcome:
        key = KnobExpander.key(cfg)
        with self.lock:
            self.keys.append(key)
            n = len(self.keys)
            self.active += 1
            self.peak = max(self.peak, self.active)
        try:
            if self.gather is not None and 2 <= n <= self.gather.parties + 1:
                self.gather.wait()  # a broken barrier (fewer running at once) fails the search
            time.sleep(0.005 + 0.005 * (zlib.crc32(key.encode()) % 4))
            if n == self.fail_at:
                raise RuntimeError("the evaluation failed")
            return self.fn(cfg)
        finally:
            with self.lock:
                self.active -= 1


def _check_tree(st: SearchState) -> None:
    """Ids in order, parents and depths consistent, visits = subtree size, max backup, no virtual loss left."""
    assert [n.id for n in st.nodes] == list(range(len(st.nodes))) and len({n.key for n in st.nodes}) == len(st.nodes)
    assert st.in_flight == 0 and all(n.pending == 0 for n in st.nodes)
    assert sum(len(n.children) for n in st.nodes) == len(st.nodes) - 1
    for n in st.nodes[1:]:
        assert n.parent.id < n.id and n in n.parent.children and n.depth == n.parent.depth + 1
    for n in reversed(st.nodes):
        sub = [n]
        for m in sub:
            sub.extend(m.children)
        assert n.visits == len(sub) and n.value == max(m.reward for m in sub)
    assert st.history == sorted(st.history) and len(st.history) == len(st.nodes)
    json.dumps(st.root.to_dict())


def test_parallel_search_keeps_that_many_evaluations_in_flight() -> None:
    ev = Concurrent(gather=4)
    exp = KnobExpander(parse_knobs(SPACE))
    st = run_search(MCTS(), exp, ev, exp.start(), budget=40, parallel=4)
    assert ev.peak == 4 and st.stopped == "budget"


def test_parallel_search_commits_a_consistent_tree() -> None:
    ev = Concurrent()
    exp = KnobExpander(parse_knobs(SPACE))
    steps: list[tuple[int, int]] = []
    st = run_search(MCTS(), exp, ev, exp.start(), budget=60, parallel=4,
                    on_step=lambda s: steps.append((len(s.nodes), s.in_flight)))
    assert len(st.nodes) == 60 and len(ev.keys) == 60 and len(set(ev.keys)) == 60  # nothing evaluated twice
    assert sorted(ev.keys) == sorted(n.key for n in st.nodes)
    assert [n for n, _ in steps] == list(range(1, 61)) and all(n + f <= 60 for n, f in steps)  # the budget holds
    _check_tree(st)


def test_virtual_loss_spreads_concurrent_selections() -> None:
    exp = KnobExpander(parse_knobs(SPACE))
    m = MCTS(initial=0)
    st = run_search(m, exp, synthetic, exp.start(), budget=12)  # a tree to select in
    first = m.propose(st)
    assert first is not None
    rest = [m.propose(st) for _ in range(3)]  # three more selections before any result is in
    chosen = [first, *(p for p in rest if p is not None)]
    assert len(chosen) == 4 and len({p.cand.key for p in chosen}) == 4 and st.in_flight == st.root.pending == 4
    assert len({p.parent.id for p in chosen}) == 4  # four different nodes, not the first one four times
    assert sum(n.pending_children for n in st.nodes) == 4
    for n in st.nodes:  # progressive widening counted the children in flight as children
        live = [c for c in n.children if not c.dead and c.outcome.ok]
        assert len(n.children) + n.pending_children <= m.allowed_children(n, st) or not live
    child = first.parent  # UCT saw the expansion in flight as a visit that lost
    parent = child.parent or child
    assert child.pending == 1 and m.uct(child, parent) == pytest.approx(
        child.value - 1.0 / (child.visits + 1)
        + m.c * math.sqrt(math.log(parent.visits + parent.pending + 1) / (child.visits + 1)))
    for p in chosen:
        m.complete(st, st.finish(p, synthetic(p.cand.payload)))
    assert st.in_flight == 0 and all(n.pending == 0 for n in st.nodes)


def test_the_first_parallel_round_starts_distinct_candidates_at_once() -> None:
    ev = Concurrent(gather=4)
    exp = KnobExpander(parse_knobs(SPACE))
    order: list[tuple[int, int, int, int]] = []  # (parent, its children, in flight before, allowed) per proposal

    class Watched(MCTS):
        def propose(self, st: SearchState) -> Pending | None:
            p = super().propose(st)
            if p is not None:
                n = p.parent
                order.append((n.id, len(n.children), n.pending_children - 1, self.allowed_children(n, st)))
            return p

    st = run_search(Watched(initial=0), exp, ev, exp.start(), budget=5, parallel=4)
    assert ev.peak == 4 and len(set(ev.keys)) == 5
    # all four are children of the root (nothing else exists yet): the root allows two, and the next two
    # widen beyond the allowance (counted with the two in flight) only because it has no live child yet
    assert order == [(0, 0, 0, 2), (0, 0, 1, 2), (0, 0, 2, 2), (0, 0, 3, 2)]
    _check_tree(st)


def test_a_node_waiting_on_its_children_in_flight_is_not_pruned() -> None:
    exp = KnobExpander(parse_knobs("// @knob BLOCK 32 64\n"))
    m = MCTS(initial=0)
    st = run_search(m, exp, lambda cfg: Outcome("correct", speedup=1.0), exp.start(), budget=1)
    p = m.propose(st)
    assert p is not None and p.cand.payload == {"BLOCK": "64"}
    assert m.propose(st) is None  # nothing else to try, but the child in flight may open more
    assert st.root.exhausted and not st.root.dead and st.root.pending == 1
    m.complete(st, st.finish(p, Outcome("correct", speedup=2.0)))
    assert m.propose(st) is None and st.root.dead and st.in_flight == 0  # now it is a dead end


def test_parallel_mcts_reaches_95_percent_of_the_best_in_a_quarter_of_the_space() -> None:
    size = 6 * 4 * 4 * 4
    exp = KnobExpander(parse_knobs(SPACE))
    st = run_search(MCTS(), exp, Concurrent(), exp.start(), budget=size // 4, parallel=4)
    assert len(st.nodes) == size // 4
    assert st.best.outcome.speedup >= 0.95 * exhaustive_best(), (st.best.key, st.best.outcome.speedup)
    _check_tree(st)
    exp = KnobExpander(parse_knobs(SPACE))
    sim = run_search(MCTS(), exp, synthetic, exp.start(), budget=size // 4, parallel=4, simulate=True)
    assert sim.best.outcome.speedup >= 0.95 * exhaustive_best()
    exp = KnobExpander(parse_knobs(SPACE))
    again = run_search(MCTS(), exp, synthetic, exp.start(), budget=size // 4, parallel=4, simulate=True)
    assert [n.key for n in again.nodes] == [n.key for n in sim.nodes]  # simulated: reproducible


@pytest.mark.parametrize("make", [lambda: MCTS(seed=3), lambda: MCTS(initial=0), Greedy, lambda: Beam(width=3),
                                  lambda: RandomSearch(seed=2)])
def test_parallel_one_is_the_sequential_search(make) -> None:  # type: ignore[no-untyped-def]
    exp = KnobExpander(parse_knobs(SPACE))
    st = run_search(make(), exp, synthetic, exp.start(), budget=40, parallel=1)
    exp = KnobExpander(parse_knobs(SPACE))
    strategy = make()
    by_hand = run_search(strategy, exp, synthetic, exp.start(), budget=1)
    while len(by_hand.nodes) < 40 and strategy.step(by_hand):
        pass
    assert [n.key for n in st.nodes] == [n.key for n in by_hand.nodes]
    assert [n.parent.id for n in st.nodes[1:]] == [n.parent.id for n in by_hand.nodes[1:]]
    assert [(n.value, n.visits, n.dead) for n in st.nodes] == [(n.value, n.visits, n.dead) for n in by_hand.nodes]


def test_a_parallel_search_past_its_deadline_finishes_what_is_in_flight(monkeypatch: pytest.MonkeyPatch) -> None:
    """The search's clock advances 10 ms per evaluation finished (not with the machine's load): past the
    deadline, the evaluations in flight are finished and committed, and no new one starts."""
    clock = SimpleNamespace(now=0.0)
    monkeypatch.setattr(strategies, "time", SimpleNamespace(monotonic=lambda: clock.now))
    lock = threading.Lock()

    def timed(cfg: dict[str, str]) -> Outcome:
        with lock:
            clock.now += 0.01
        return synthetic(cfg)

    ev = Concurrent(fn=timed)
    exp = KnobExpander(parse_knobs(SPACE))
    st = run_search(MCTS(), exp, ev, exp.start(), budget=200, parallel=4, deadline=0.15)
    assert st.stopped == "time" and 1 < len(st.nodes) < 200
    assert len(ev.keys) == len(st.nodes) and ev.active == 0  # every evaluation started was committed
    _check_tree(st)


def test_a_parallel_search_stops_when_the_space_is_exhausted() -> None:
    space = "// @knob BLOCK 32 64 128\n// @knob VEC 1 2 4\n"
    for strategy in (MCTS(fail_limit=99, no_gain=99), RandomSearch(seed=1)):
        ev = Concurrent(fn=lambda cfg: Outcome("correct", speedup=int(cfg["BLOCK"]) / 32 * int(cfg["VEC"])))
        exp = KnobExpander(parse_knobs(space))
        st = run_search(strategy, exp, ev, exp.start(), budget=50, parallel=4)
        assert st.stopped == "exhausted" and len(st.nodes) == 9 and len(set(ev.keys)) == 9
        assert st.in_flight == 0 and all(n.pending == 0 for n in st.nodes)


def test_an_evaluation_error_propagates_from_a_parallel_search() -> None:
    ev = Concurrent(fail_at=6)
    exp = KnobExpander(parse_knobs(SPACE))
    with pytest.raises(RuntimeError, match="the evaluation failed"):
        run_search(MCTS(), exp, ev, exp.start(), budget=40, parallel=4)
    assert ev.active == 0  # the pool was shut down first: nothing still running


@pytest.mark.parametrize("strategy", [Greedy(), Beam(width=3), RandomSearch(seed=1)])
def test_baselines_run_in_parallel(strategy) -> None:  # type: ignore[no-untyped-def]
    ev = Concurrent(gather=3)
    exp = KnobExpander(parse_knobs(SPACE))
    st = run_search(strategy, exp, ev, exp.start(), budget=40, parallel=3)
    assert len(st.nodes) == 40 and len(set(ev.keys)) == 40 and ev.peak == 3 and st.best.outcome.ok
    assert st.in_flight == 0 and all(n.pending == 0 for n in st.nodes)
    for n in st.nodes[1:]:
        assert n in n.parent.children and n.depth == n.parent.depth + 1
