"""The strategies benchmark's replay (benchmarks/strategies.py) over its H100 tables: the recorded analyze diagnosis
of every configuration (``profile``, data/findings-h100.json) reaches the agent's strategies as in
``kernelscope optimize`` (the start and each new best are profiled, ANALYZE_MAX - 1 at most), and the table covers
every configuration that measured correct."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("strategies_bench", REPO / "benchmarks" / "strategies.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules["strategies_bench"] = mod
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def tables(bench: ModuleType) -> tuple[dict[str, Any], dict[str, Any]]:
    return json.loads(bench.DATA.read_text())["problems"], json.loads(bench.FINDINGS.read_text())["problems"]


def test_every_configuration_that_measured_correct_has_a_diagnosis(bench: ModuleType, tables: Any) -> None:
    spaces, found = tables
    assert set(found) == set(spaces)
    for name, rec in spaces.items():
        correct = {k for k, v in rec["configs"].items() if v.get("correct") and not k.startswith("@")}
        diagnosed = set(found[name]["configs"])
        assert correct <= diagnosed, f"{name}: no diagnosis for {sorted(correct - diagnosed)[:5]}"
        for k in diagnosed:  # each under its own configuration's key, with a class and ranked findings
            d = found[name]["configs"][k]
            assert d["name"].endswith(f"__c{_index(rec['knobs'], k)}")
            assert d["bottleneck"]["cls"] and isinstance(d["findings"], list)


def _index(knobs: dict[str, list[str]], key: str) -> int:
    """A configuration's position in the product of the knobs' values (the profile step's kernel suffix)."""
    i = 0
    for values, v in zip(knobs.values(), key.split(","), strict=True):
        i = i * len(values) + values.index(v)
    return i


def test_the_profile_step_can_rename_every_problems_kernel(bench: ModuleType) -> None:
    for problem in bench.knob_problems():
        assert bench._KERNEL_NAME.search((bench.PROBLEMS / problem / "candidate.py").read_text()), problem


def test_profiles_reach_the_start_and_each_candidate_near_the_best(bench: ModuleType, tables: Any,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    spaces, found = tables
    space = bench.Space("softmax", spaces["softmax"])
    observed = space.draw(0)
    seen: list[tuple[str, Any]] = []
    real = bench.run_search

    def spy(strategy: Any, exp: Any, evaluate: Any, start: Any, **kw: Any) -> Any:
        def recording(cfg: dict[str, str]) -> Any:
            out = evaluate(cfg)
            seen.append((bench.key(cfg, space.names), out))
            return out
        return real(strategy, exp, recording, start, **kw)

    monkeypatch.setattr(bench, "run_search", spy)
    order = bench.run_ours(space, "mcts", 0, 40, observed, profiles=found["softmax"]["configs"])
    assert [k for k, _ in seen] == order
    start_key, start = seen[0]
    assert start_key == "32,1,1,0" and start.bottleneck == found["softmax"]["configs"][start_key]["bottleneck"]["cls"]
    assert start.findings and start.findings[0] == "stalls.dominant-stall-reason" and start.severe
    best, profiled = 0.0, 0
    for k, out in seen:  # within 10% of the best so far (itself included), as `kernelscope optimize` profiles
        best = max(best, out.speedup or 0.0)
        promising = out.ok and (profiled == 0 or out.speedup >= best * (1 - bench.PROFILE_WITHIN)) \
            and profiled < bench.ANALYZE_MAX - 1
        assert (out.bottleneck is not None) == promising, k
        profiled += promising
    assert 1 < profiled <= bench.ANALYZE_MAX - 1
    seen.clear()  # without profiles, no evaluation carries findings
    bench.run_ours(space, "mcts", 0, 40, observed)
    assert not any(out.bottleneck or out.findings for _, out in seen)


def test_replay_prints_rows_with_and_without_profiles(bench: ModuleType, capsys: pytest.CaptureFixture[str]) -> None:
    bench.replay(bench.DATA, 2, kernel_tuner=False, first_seed=5, only=["row_sum"])
    out = capsys.readouterr().out
    assert "Profiles: every configuration's analyze diagnosis" in out
    assert "## row_sum" in out and "## softmax" not in out and "(seeds 5-6)" in out
    for row in ("| mcts ", "| greedy ", "| mcts, no profiles ", "| greedy, no profiles "):
        assert row in out
    assert "more than MCTS, mean [95% CI]" in out and "spaces MCTS ahead / tie / behind" in out
    assert "+0.0 [+0.0, +0.0] tie" in out  # row_sum: every strategy's first evaluation is within 95%
    with pytest.raises(SystemExit, match="no space nope"):
        bench.replay(bench.DATA, 1, kernel_tuner=False, only=["nope"])


def test_the_paired_gap_tells_a_lead_from_a_tie(bench: ModuleType) -> None:
    """Rows are compared with MCTS seed by seed: a gap whose bootstrap interval is above zero is a lead for MCTS,
    one that contains zero a tie, one below zero a lead for the other strategy; only seeds both ran are paired."""
    mcts = {s: 5.0 + s % 3 for s in range(60)}
    later = {s: v + 2.0 + (s % 2) for s, v in mcts.items()}
    mean, low, high = bench.paired_gap(mcts, later)
    assert mean == pytest.approx(2.5) and 2.0 <= low < mean < high <= 3.0
    assert bench._verdict((mean, low, high)).endswith("MCTS ahead")
    noisy = {s: v + (1.0 if s % 2 else -1.0) for s, v in mcts.items()}
    assert bench._verdict(bench.paired_gap(mcts, noisy)).endswith("tie")
    assert bench._verdict(bench.paired_gap(later, mcts)).endswith("MCTS behind")
    assert bench.paired_gap(mcts, {0: 9.0, 99: 1.0}) == (4.0, 4.0, 4.0)  # seed 0 only
    assert bench.paired_gap(mcts, later) == bench.paired_gap(mcts, later)  # deterministic
    with pytest.raises(ValueError, match="no seed in common"):
        bench.paired_gap(mcts, {999: 1.0})
