"""The agent's search core on synthetic spaces (no server, no GPU): knob parsing and application,
log-scaled rewards, MCTS with progressive widening and pruning, the baselines, the search memory."""

from __future__ import annotations

import json
import math

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
)
from kernelscope.agent.search.knobs import knob_order

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


def test_the_initial_design_jumps_across_the_space_then_refines() -> None:
    """The root's first children are seeded random jumps (reproducible per seed, different across
    seeds); later children are one-knob moves from the best regions."""
    a, b, c = (_run(MCTS(seed=s), 20) for s in (1, 1, 2))
    first = [n.change for n in a.root.children[:6]]
    assert all(ch.startswith("random ") for ch in first)
    assert first == [n.change for n in b.root.children[:6]] != [n.change for n in c.root.children[:6]]
    later = [n for n in a.nodes[7:] if not n.change.startswith("random ")]
    assert later and all(n.parent is not None and n.parent.outcome.ok for n in later)
    assert all(sum(n.payload[k] != n.parent.payload[k] for k in n.payload) == 1 for n in later)
    assert not _run(MCTS(initial=0), 10).root.children[0].change.startswith("random ")


def test_a_node_whose_children_all_fail_is_pruned() -> None:
    def only_root_works(cfg: dict[str, str]) -> Outcome:
        return Outcome("correct", speedup=1.0) if cfg == {"BLOCK": "32", "VEC": "1", "ITEMS": "1", "UNROLL": "1"} \
            else Outcome("compile-error")

    exp = KnobExpander(parse_knobs(SPACE))
    st = run_search(MCTS(fail_limit=3, initial=0), exp, only_root_works, exp.start(), budget=50)
    assert st.root.dead and "failed children" in st.root.dead_reason
    assert len(st.nodes) == 4  # the start and three failures, then the search stops


def test_memory_steers_the_offline_proposer_away_from_moves_that_hurt() -> None:
    st = _run(MCTS(), 30)
    stats = st.memory.move_stats()
    assert stats and all(h + b >= 1 for h, b in stats.values())
    text = st.memory.summary()
    assert "helped" in text or "hurt" in text
    assert any("resolved memory.non-vectorized-access" in ln for ln in text.splitlines()) \
        or not any(e.findings_before for e in st.memory.entries)
