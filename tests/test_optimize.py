"""`kernelscope optimize` end to end on CPU: the real server over stdio, the offline knob proposer,
MCTS, the run directory, and resuming an interrupted run."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

from kernelscope.agent.answers import outcome_from_run
from kernelscope.agent.client import analysis_available
from kernelscope.agent.config import OptimizeConfig
from kernelscope.agent.loop import optimize
from kernelscope.agent.proposers import Proposer, resolve_proposer
from kernelscope.agent.search import Outcome
from kernelscope.agent.store import RunStore, key_file

pytestmark = pytest.mark.anyio
CASE = Path(__file__).parent / "agentcases" / "chunked_sum"
AGENT = Path(__file__).resolve().parent.parent / "agent"


def test_agent_uses_only_the_mcp_tools() -> None:
    """agent/ never imports kernelscope.tools (or sandbox, heuristics, server): it must work remotely."""
    for py in AGENT.rglob("*.py"):
        tree = ast.parse(py.read_text())
        for node in ast.walk(tree):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            for n in names:
                assert not n.startswith(("kernelscope.tools", "kernelscope.sandbox", "kernelscope.heuristics",
                                         "kernelscope.server")), f"{py}: imports {n}"


LAZY_OK = ("anthropic", "openai")  # optional dependencies, imported where a client is made


def test_agent_layout_is_flat_and_small() -> None:
    """No function-level import in agent/ but the optional LLM SDKs (no import cycle hidden), no module
    over 600 lines and no function over 80."""
    for py in AGENT.rglob("*.py"):
        text = py.read_text()
        assert len(text.splitlines()) <= 600, f"{py}: {len(text.splitlines())} lines"
        for fn in ast.walk(ast.parse(text)):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            assert fn.end_lineno - fn.lineno < 80, f"{py}: {fn.name} is {fn.end_lineno - fn.lineno + 1} lines"
            for node in ast.walk(fn):
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
                    assert all(n.split(".")[0] in LAZY_OK for n in names), f"{py}:{node.lineno} {names}"


def test_agent_loads_no_server_code() -> None:
    """Importing the whole agent (the command included) loads nothing of the server's side."""
    code = ("import sys, kernelscope.agent.optimize, kernelscope.agent.proposers; "
            "print(' '.join(m for m in sys.modules if m.startswith(('kernelscope.tools', 'kernelscope.server', "
            "'kernelscope.heuristics', 'kernelscope.sandbox', 'kernelscope.measure'))))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert r.stdout.strip() == ""


def test_run_store_keeps_evaluations_and_profiles(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "run")
    store.prepare(OptimizeConfig(reference=CASE / "reference.py", out=tmp_path / "run"))
    assert store.cached_eval("k") is None and store.cached_analysis("k") is None
    out = Outcome("correct", speedup=1.5, findings=["r1"])
    store.save_eval("k", {"source": "x"}, out, "text", {"eval": {}}, "fixed source")
    rec = store.cached_eval("k")
    assert rec is not None and rec.outcome == out and rec.repaired_source == "fixed source"
    store.save_analysis("k", "start", {"status": "ok"})
    assert store.cached_analysis("k") == {"status": "ok"}
    assert key_file("k") == key_file("k") != key_file("k2") and key_file("k").endswith(".json")
    assert json.loads((tmp_path / "run" / "config.json").read_text())["budget"] == 20


def test_capabilities_decide_profiles(tmp_path: Path) -> None:
    cfg = OptimizeConfig(reference=CASE / "reference.py", out=tmp_path, device="cuda")
    yes = {"can": {"ncu_profile": True}}
    no = {"can": {"ncu_profile": False}, "reasons": {"ncu_profile": "ncu not found"}}
    assert analysis_available(yes, cfg) == (True, None)
    assert analysis_available(no, cfg) == (False, "no profiles: ncu not found")
    assert analysis_available(yes, cfg.model_copy(update={"analyze": "never"}))[0] is False
    assert "CPU" in (analysis_available(yes, cfg.model_copy(update={"device": "cpu"}))[1] or "")
    with pytest.raises(ValueError, match="cannot profile: ncu not found"):
        analysis_available(no, cfg.model_copy(update={"analyze": "always"}))


def test_run_answers_map_to_outcomes() -> None:
    ok = {"eval": {"status": "ok", "verdict": "faster", "correctness": {"correct": True},
                   "speedups": [{"baseline": "eager", "speedup": 1.8}]}}
    assert outcome_from_run(ok, None).speedup == 1.8
    bad = {"eval": {"status": "ok", "verdict": "incorrect", "correctness": {"correct": False}}}
    assert outcome_from_run(bad, None).status == "incorrect"
    assert outcome_from_run(None, "The candidate source has a Python syntax error at line 3").status == \
        "compile-error"
    # an H100 answer for a tiling that needs more static shared memory than a block may have: a build failure,
    # which the LLM proposers' repair turn must see (tests/fixtures/optimize/matmul_fp16/evals)
    smem = {"eval": {"status": "error", "verdict": "incorrect", "error": "CompileException: ptxas error   : "
                     "Entry function 'matmul_knobs' uses too much shared data (0x17000 bytes, 0xc000 max)"}}
    assert outcome_from_run(smem, None).status == "compile-error"
    raised = {"eval": {"status": "error", "verdict": "incorrect", "error": "ValueError: inner dimensions differ"}}
    assert outcome_from_run(raised, None).status == "crashed"
    for st in ("crashed", "timeout"):
        assert outcome_from_run({"eval": {"status": st, "verdict": "incorrect"}}, None).status == "crashed"
    assert outcome_from_run({"eval": {"status": "invalid", "verdict": "invalid"}}, None).status == "invalid"


async def test_optimize_end_to_end_on_cpu_and_resume(tmp_path: Path, nominal_speedups: None) -> None:
    pytest.importorskip("torch", reason="CPU evaluations need torch (its CPU build is enough)")
    out = tmp_path / "run"
    cfg = OptimizeConfig(reference=CASE / "reference.py", candidate=CASE / "candidate.py", out=out, budget=6,
                         device="cpu", timing_budget_s=0.1, trials=2, server=None)
    s = await optimize(cfg)
    assert s.evaluations == 6 and s.reused == 0
    assert s.best_status == "correct" and s.best_speedup and s.start_speedup
    assert s.best_speedup > s.start_speedup  # fewer chunks beat 256 column slices
    assert s.best_config["CHUNKS"] != "256"
    assert (out / "best.py").read_text().count("CHUNKS = ") == 1
    assert len(list((out / "evals").glob("*.json"))) == 6 and len(list((out / "candidates").glob("*.py"))) == 6
    tree = json.loads((out / "tree.json").read_text())
    assert tree["id"] == 0 and tree["children"]
    # resume: a larger budget reuses the six evaluations already in the run directory
    s2 = await optimize(cfg.model_copy(update={"budget": 8}))
    assert s2.reused == 6 and s2.evaluations == 8 and s2.best_speedup >= s.best_speedup * 0.5


def test_cli_refuses_missing_files(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    from kernelscope.cli import main

    assert main(["optimize", str(tmp_path / "nope.py"), str(CASE / "candidate.py"), "--out", str(tmp_path)]) == 2
    assert "is not a file" in capsys.readouterr().err
    assert sys.executable


def test_energy_objective_maps_joules_and_weighs_them_after_speed() -> None:
    from kernelscope.agent.search.reward import reward

    ans = {"eval": {"status": "ok", "verdict": "faster", "correctness": {"correct": True},
                    "speedups": [{"baseline": "eager", "speedup": 2.0}],
                    "energy": {"candidate": {"available": True, "joules_per_call": 0.5},
                               "reference": {"available": True, "joules_per_call": 2.0}}}}
    o = outcome_from_run(ans, None, energy=True)
    assert o.energy_ratio == 4.0 and reward(o) == 1.0 and reward(o, energy_weight=0.5) == 2.0
    assert outcome_from_run(ans, None).energy_ratio is None  # not asked for: speed alone
    ans["eval"]["energy"]["candidate"] = {"available": False, "note": "NVML: not supported"}
    assert outcome_from_run(ans, None, energy=True).energy_ratio is None


def test_cli_options_reach_the_config(tmp_path: Path) -> None:
    from kernelscope.agent.optimize import config_from_args
    from kernelscope.cli import build_parser

    args = build_parser().parse_args(["optimize", str(CASE), "--out", str(tmp_path), "--time", "60", "--seed", "3",
                                      "--uct-c", "0.3", "--analyze", "never", "--objective", "energy"])
    cfg = config_from_args(args)
    assert cfg.reference == CASE / "reference.py" and cfg.candidate == CASE / "candidate.py"
    assert (cfg.time_s, cfg.seed, cfg.uct_c, cfg.analyze, cfg.objective) == (60.0, 3, 0.3, "never", "energy")


def test_the_proposer_of_a_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """auto picks an LLM by its key, else the offline knob proposer; a payload's source is its own (LLM) or
    the template with its knobs applied (offline), and its key is the expander's."""
    template = (CASE / "candidate.py").read_text()
    cfg = OptimizeConfig(reference=CASE / "reference.py", candidate=CASE / "candidate.py", out=tmp_path)
    for key in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY"):
        monkeypatch.delenv(key, raising=False)
    assert resolve_proposer(cfg) == "offline"
    monkeypatch.setenv("OPENAI_API_KEY", "unused")
    assert resolve_proposer(cfg) == "openai"
    p = Proposer.for_run(cfg.model_copy(update={"proposer": "offline"}), template, "")
    assert p.offline and not p.can_repair() and p.start.payload == {"CHUNKS": "256", "WIDE_ACC": "1"}
    assert "CHUNKS = 16" in p.source_of({"CHUNKS": "16", "WIDE_ACC": "0"})
    assert p.key_of({"WIDE_ACC": "0", "CHUNKS": "16"}) == "CHUNKS=16,WIDE_ACC=0"


def test_the_llm_proposer_of_a_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("openai")
    template = (CASE / "candidate.py").read_text()
    cfg = OptimizeConfig(reference=CASE / "reference.py", candidate=CASE / "candidate.py", out=tmp_path)
    monkeypatch.setenv("OPENAI_API_KEY", "unused")
    llm = Proposer.for_run(cfg.model_copy(update={"proposer": "openai", "model": "m"}), template, "")
    assert llm.can_repair() and "CHUNKS = 256" in llm.source_of(llm.start.payload)
    assert llm.key_of({"source": "x"}).startswith("src:") and llm.source_of({"source": "x"}) == "x"
    with pytest.raises(ValueError, match="needs --model"):
        Proposer.for_run(cfg.model_copy(update={"proposer": "openai"}), template, "")
