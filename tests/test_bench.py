"""`kernelscope bench` on CPU: the KernelBench reader, the suite's metrics over hand-made outcomes, and the
whole suite end to end over ten tiny KernelBench-format problems (tests/fixtures/kernelbench) with recorded
model replies (cassettes: broken, wrong, slow, cheating and good candidates) replayed by a loopback
OpenAI-compatible endpoint through the real server; then resuming it."""

from __future__ import annotations

import json
import math
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from _cassette import Cassettes, serve

from kernelscope.agent.bench import BenchConfig, bench, compile_figures
from kernelscope.agent.kernelbench import find_problems, parse_ids
from kernelscope.agent.suite import ProblemResult, fast_p, geomean, suite_html, suite_table, summarize

FIX = Path(__file__).parent / "fixtures" / "kernelbench"
REPO = Path(__file__).resolve().parent.parent
NOT_CORRECT = {"level2/40_Matmul_Scaling_ResidualAdd"}  # the model never sends code there


# ------------------------------------------------------------------------------------------- the reader
def test_problem_ids_and_ranges() -> None:
    assert parse_ids("1-3,19, 7") == {1, 2, 3, 7, 19}
    assert parse_ids(None) is None and parse_ids(" ") is None
    for bad, msg in (("3-1", "backwards"), ("a", "not an id"), ("1-", "not an id")):
        with pytest.raises(ValueError, match=msg):
            parse_ids(bad)


def test_reads_levels_ids_and_candidates(tmp_path: Path) -> None:
    every = find_problems(FIX)
    assert len(every) == 10 and every[0].key == "level1/1_Square_matrix_multiplication_"
    assert [p.pid for p in every if p.level == 1] == [1, 4, 19, 23, 36, 47, 100]  # by id, not by name
    picked = find_problems(FIX, [1], "1-19")
    assert [(p.key, p.pid, p.name) for p in picked] == [
        ("level1/1_Square_matrix_multiplication_", 1, "Square_matrix_multiplication_"),
        ("level1/4_Matrix_vector_multiplication_", 4, "Matrix_vector_multiplication_"), ("level1/19_ReLU", 19, "ReLU")]
    # a checkout's layout (KernelBench/levelN/), and a starting candidate found by the problem's file name
    kb = tmp_path / "checkout" / "KernelBench" / "level2"
    kb.mkdir(parents=True)
    shutil.copy(FIX / "level2" / "12_Gemm_Multiply_LeakyReLU.py", kb)
    (tmp_path / "cands" / "level2").mkdir(parents=True)
    (tmp_path / "cands" / "level2" / "12_Gemm_Multiply_LeakyReLU.py").write_text("class ModelNew: pass\n")
    [p] = find_problems(tmp_path / "checkout", [2], "12", candidates=tmp_path / "cands")
    assert p.key == "level2/12_Gemm_Multiply_LeakyReLU" and p.candidate is not None and p.candidate.is_file()
    with pytest.raises(ValueError, match="no level 3"):
        find_problems(tmp_path / "checkout", [3])
    with pytest.raises(ValueError, match=r"no problems .* with ids 99"):
        find_problems(FIX, None, "99")
    flat = tmp_path / "flat"
    flat.mkdir()
    (flat / "broken.py").write_text("import torch\n\ndef get_inputs():\n    return []\n")
    with pytest.raises(ValueError, match="does not define Model, get_init_inputs"):
        find_problems(flat)


# ------------------------------------------------------------------------------------------- the metrics
def _r(key: str, correct: bool, eager: float | None, comp: float | None = None, **kw: Any) -> ProblemResult:
    return ProblemResult(key=key, name=key, status="done", correct=correct, speedup_eager=eager,
                         speedup_compile=comp, run_dir=key, **kw)


def test_fast_p_and_geomean_follow_kernelbench() -> None:
    correct = [True, True, True, False, True]
    speed = [0.5, 1.2, 3.0, 9.0, None]  # an incorrect one never counts, however fast; untimed neither
    assert fast_p(correct, speed, 0.0) == 3 / 5  # over ALL problems
    assert fast_p(correct, speed, 1.0) == 2 / 5
    assert fast_p(correct, speed, 1.5) == 1 / 5 and fast_p(correct, speed, 3.0) == 0.0  # strictly greater
    assert fast_p([], [], 1.0) == 0.0
    assert geomean([0.5, 2.0, 8.0]) == pytest.approx(2.0)
    assert geomean([]) is None
    with pytest.raises(ValueError, match="positive"):
        geomean([1.0, 0.0])


def test_suite_summary_from_outcomes() -> None:
    results = [_r("a", True, 4.0, 2.0, tokens={"input": 10, "output": 5}, cost_usd=0.5),
               _r("b", True, 0.25, 0.5, compile_note="ok", cost_usd=0.25), _r("c", False, None, None),
               _r("d", True, 2.0, None, compile_note="not measured"),
               ProblemResult(key="e", name="e", status="failed", run_dir="e", note="boom")]
    s = summarize(results)
    assert (s.problems, s.done, s.correct, s.correctness_rate) == (5, 4, 3, 0.6)
    assert s.fast_p == {"0": 0.6, "1": 0.4, "1.5": 0.4, "2": 0.2}
    assert s.fast_p_compile == {"0": 0.4, "1": 0.2, "1.5": 0.2, "2": 0.0}
    assert s.geomean_eager == pytest.approx(math.exp((math.log(4) + math.log(0.25) + math.log(2)) / 3))
    assert s.geomean_eager_all == pytest.approx(2 ** (1 / 5))  # 4 * 0.25 * 2 * 1 * 1
    assert s.geomean_compile == pytest.approx(1.0) and s.geomean_compile_all == pytest.approx(1.0)
    assert s.tokens == {"input": 10, "output": 5} and s.cost_usd == 0.75
    text = suite_table(s)
    assert "fast_1=0.40" in text and "3 correct" in text and text.splitlines()[0].startswith("problem")
    page = suite_html(s)
    assert page.count('<tr class="ok">') == 3 and 'href="a/report.html"' in page
    none = summarize([_r("a", True, 2.0)])
    assert none.fast_p_compile == {} and none.geomean_compile is None and "not measured" in suite_table(none)


def test_compile_baseline_from_a_recorded_answer() -> None:
    """A real `run` answer (tests/fixtures/kernelbench/answers, recorded on the CPU with the reference timed
    eager and under torch.compile) gives the speedup over torch.compile and both reference times."""
    rec = json.loads((FIX / "answers" / "compile_baseline_cpu.json").read_text())
    r = _r("level1/19_ReLU", True, 1.0)
    compile_figures({"result": rec["answer"], "error": None}, r)
    ev = rec["answer"]["eval"]
    comp = next(s for s in ev["speedups"] if s["baseline"] == "compile")
    assert r.speedup_compile == comp["speedup"] and "95% CI" in (r.compile_note or "")
    assert r.reference_compile_us == ev["timings"]["reference_compile"]["median_us"]
    assert r.reference_us == ev["timings"]["reference"]["median_us"]
    failed = _r("x", True, 1.0)
    compile_figures({"result": None, "error": "torch.compile needs a C++ compiler"}, failed)
    assert failed.speedup_compile is None and "C++ compiler" in (failed.compile_note or "")


# ------------------------------------------------------------------------------------------- end to end
def _config(out: Path, **kw: Any) -> BenchConfig:
    opts = {"proposer": "openai", "model": "gpt-4o-mini", "device": "cpu", "timing_budget_s": 0.1, "trials": 2,
            "tolerance": "kernelbench", "strategy": "greedy"}
    return BenchConfig(source=FIX, out=out, budget=4, compile_baseline="never", options=opts, **kw)


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The ten problems through `bench` once (about a minute on the CPU), replies from the cassettes."""
    pytest.importorskip("torch", reason="CPU evaluations need torch (its CPU build is enough)")
    pytest.importorskip("openai")
    cassettes = Cassettes.load(FIX, FIX / "cassettes")
    out = tmp_path_factory.mktemp("bench") / "suite"
    with serve(cassettes) as url, pytest.MonkeyPatch.context() as mp:
        mp.setenv("OPENAI_BASE_URL", url)
        mp.setenv("OPENAI_API_KEY", "sk-test")
        mp.delenv("KERNELSCOPE_LLM_PRICE", raising=False)
        summary = anyio.run(lambda: bench(_config(out), sleep=lambda s: None))
        yield {"summary": summary, "out": out, "cassettes": cassettes, "mp": mp}


def test_bench_runs_every_problem(suite: Any) -> None:
    s, out, cassettes = suite["summary"], suite["out"], suite["cassettes"]
    assert cassettes.unmatched == 0 and s.problems == 10 and s.done == 10
    by_key = {r.key: r for r in s.results}
    assert {k for k, r in by_key.items() if not r.correct} == NOT_CORRECT
    assert by_key["level2/40_Matmul_Scaling_ResidualAdd"].best_status == "reference"
    for r in s.results:
        assert (out / r.key / "bench.json").is_file() and (out / r.key / "report.html").is_file()
        assert r.evaluations <= 4 and r.stopped in ("budget", "exhausted")
        assert r.llm_calls == len(cassettes.kinds(r.key)) and r.tokens["input"] == 1000 * r.llm_calls
    # each kind of candidate was sent, and each was judged for what it is
    kinds = {k for _, k in cassettes.served}
    assert {"broken", "wrong", "slow", "cheat", "good", "crash", "prose"} <= kinds
    evals = [json.loads(p.read_text())["outcome"] for p in out.glob("level*/*/evals/*.json")]
    # a repaired candidate keeps the failure it was repaired from (the broken ones did not build)
    statuses = {o["status"] for o in evals} | {re.match(r"[\w-]+", o["repaired_from"])[0] for o in evals
                                               if o["repaired_from"]}
    assert {"correct", "incorrect", "invalid", "compile-error", "crashed", "INCORRECT", "INVALID"} <= statuses
    assert (out / "suite.json").is_file() and "<table" in (out / "suite.html").read_text()


def test_a_cheating_candidate_never_ends_as_best(suite: Any) -> None:
    out = suite["out"]
    cheats = 0
    for ev in out.glob("level*/*/evals/*.json"):
        rec = json.loads(ev.read_text())
        if "# cheat" in (rec["payload"].get("source") or "") and not rec.get("repaired_source"):
            cheats += 1
            assert rec["outcome"]["status"] == "invalid", ev
    assert cheats >= 3  # ReLU's, RMSNorm's (a fallback) and the conv kept by level2/1 stayed cheats
    for r in suite["summary"].results:
        assert "# cheat" not in (out / r.key / "best.py").read_text(), r.key
        tree = json.loads((out / r.key / "tree.json").read_text())
        nodes, stack = {}, [tree]
        while stack:
            n = stack.pop()
            nodes[n["id"]] = n
            stack += n["children"]
        for path in (out / r.key / "candidates").glob("*.py"):  # a node still holding a cheat is ranked out
            if "# cheat" in path.read_text():
                assert nodes[int(path.stem)]["status"] == "invalid", (r.key, path.name)


def test_the_table_follows_the_recorded_outcomes(suite: Any) -> None:
    """fast_p and the geomeans in suite.json, recomputed here by hand from every problem's bench.json."""
    out = suite["out"]
    saved = json.loads((out / "suite.json").read_text())
    recs = [json.loads(p.read_text()) for p in sorted(out.glob("level*/*/bench.json"))]
    assert len(recs) == 10
    for p in (0.0, 1.0, 1.5, 2.0):
        hits = sum(1 for r in recs if r["correct"] and r["speedup_eager"] is not None and r["speedup_eager"] > p)
        assert saved["fast_p"][f"{p:g}"] == hits / 10
    ok = [r["speedup_eager"] for r in recs if r["correct"]]
    assert saved["geomean_eager"] == pytest.approx(math.prod(ok) ** (1 / len(ok)))
    assert saved["geomean_eager_all"] == pytest.approx(math.prod(ok) ** (1 / 10))
    assert saved["correct"] == len(ok) == 9 and saved["fast_p_compile"] == {}


def test_resume_repeats_no_model_call(suite: Any, capsys: pytest.CaptureFixture[str]) -> None:
    """A rerun skips the finished problems; problems whose run did not finish (no bench.json, no summary)
    resume from their run directory and ask the model nothing again."""
    from kernelscope.cli import main

    out, cassettes, before = suite["out"], suite["cassettes"], {r.key: r for r in suite["summary"].results}
    served = len(cassettes.served)
    assert main(["bench", str(FIX), "--out", str(out), "--device", "cpu", "--proposer", "openai", "--model",
                 "gpt-4o-mini", "--budget", "4", "--strategy", "greedy", "--timing-budget", "0.1", "--trials", "2",
                 "--compile-baseline", "never"]) == 0
    printed = capsys.readouterr().out
    assert "10 problems, 10 finished, 9 correct" in printed and f"suite directory {out}" in printed
    assert len(cassettes.served) == served
    for key in ("level1/23_Softmax", "level2/1_Conv2D_ReLU_BiasAdd"):
        (out / key / "bench.json").unlink()
        (out / key / "summary.json").unlink()
    again = anyio.run(lambda: bench(_config(out), sleep=lambda s: None))
    assert len(cassettes.served) == served  # not one model call
    for r in again.results:
        assert r.correct == before[r.key].correct and r.evaluations == before[r.key].evaluations
        if r.key in ("level1/23_Softmax", "level2/1_Conv2D_ReLU_BiasAdd"):
            assert r.llm_calls == 0 and 1 <= r.llm_cached <= before[r.key].llm_calls  # repairs: their evals kept


def test_a_dollar_budget_stops_the_search(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    pytest.importorskip("openai")
    cassettes = Cassettes.load(FIX, FIX / "cassettes")
    with serve(cassettes) as url, pytest.MonkeyPatch.context() as mp:
        mp.setenv("OPENAI_BASE_URL", url)
        mp.setenv("OPENAI_API_KEY", "sk-test")
        mp.setenv("KERNELSCOPE_LLM_PRICE", "1000,1000")  # USD per million tokens: 1.20 a call here
        cfg = _config(tmp_path / "suite", levels=[1], problems="19", cost_usd=1.0)
        s = anyio.run(lambda: bench(cfg, sleep=lambda s: None))
    [r] = s.results
    assert r.stopped == "cost" and r.evaluations < 4 and r.cost_usd is not None and r.cost_usd >= 1.0


def test_bench_refuses_what_cannot_work(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    from kernelscope.cli import main

    monkeypatch.delenv("KERNELSCOPE_LLM_PRICE", raising=False)
    assert main(["bench", str(FIX), "--out", str(tmp_path), "--level", "3"]) == 2
    assert "no level 3" in capsys.readouterr().err
    assert main(["bench", str(tmp_path / "nowhere"), "--out", str(tmp_path)]) == 2
    assert "not a directory" in capsys.readouterr().err
    assert main(["bench", str(FIX), "--out", str(tmp_path / "o"), "--problems", "19", "--proposer", "openai",
                 "--model", "my-local-model", "--cost", "1", "--device", "cpu"]) == 2
    assert "no list price known for model 'my-local-model'" in capsys.readouterr().err


# ------------------------------------------------------------------------------------------- the sweep
def test_kernelbench_sweep_on_cpu_resumes(tmp_path: Path) -> None:
    """benchmarks/kernelbench_sweep.py over two fixture problems on the CPU, then again: nothing rerun."""
    pytest.importorskip("torch")
    jsonl = tmp_path / "sweep.jsonl"
    cmd = [sys.executable, str(REPO / "benchmarks" / "kernelbench_sweep.py"), str(FIX), "--device", "cpu",
           "--level", "1", "--problems", "19,36", "--out", str(jsonl), "--timing-budget", "0.05"]
    first = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=True)
    recs = [json.loads(line) for line in jsonl.read_text().splitlines()]
    assert [r["key"] for r in recs] == ["level1/19_ReLU", "level1/36_RMSNorm_"]
    for r in recs:  # the reference as its own candidate: correct, and invalid by the delegation check
        assert r["outcome"] == "ok" and r["status"] in ("ok", "invalid") and r["verdict"] == "invalid"
        assert r["peak_gpu_mib"] is None and r["wall_s"] > 0
    assert ("2 problems: 2 judged correct, 0 harness errors, 0 out of memory, 0 too large, 0 other, "
            "0 with a false flag") in first.stdout
    second = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=True)
    assert len(jsonl.read_text().splitlines()) == 2 and "level1/19_ReLU" in second.stdout
    # --table: the table of what the file holds, for every problem asked; nothing run, nothing written
    cmd[cmd.index("19,36")] = "19-40"
    shown = subprocess.run([*cmd, "--table"], capture_output=True, text=True, timeout=600, check=True)
    assert len(jsonl.read_text().splitlines()) == 2 and "level1/36_RMSNorm_" in shown.stdout
    assert "2 problems: 2 judged correct" in shown.stdout and "not swept yet" in shown.stdout


def test_the_kernelbench_example_candidates_declare_knobs() -> None:
    """examples/kernelbench: knob-annotated starting candidates for the offline proposer, found by name."""
    import ast

    from kernelscope.agent.search.knobs import apply_knobs, default_config, parse_knobs

    cands = REPO / "examples" / "kernelbench"
    found = find_problems(FIX, [1], "19", candidates=cands)
    assert found[0].candidate == cands / "level1" / "19_ReLU.py"
    for path in sorted((cands / "level1").glob("*.py")):
        knobs = parse_knobs(path.read_text())
        assert {k.name for k in knobs} == {"THREADS", "VEC", "ITEMS", "BLOCKS_PER_SM"}, path.name
        ast.parse(apply_knobs(path.read_text(), default_config(knobs)))


def test_a_problem_that_cannot_start_fails_alone(tmp_path: Path) -> None:
    """The offline proposer on a problem without a knob-annotated candidate: that problem is `failed` with
    the reason, counts as not correct, and runs again on a rerun (it has no finished bench.json)."""
    pytest.importorskip("torch")
    cfg = BenchConfig(source=FIX, levels=[2], problems="40", out=tmp_path / "suite", budget=2,
                      compile_baseline="never", options={"proposer": "offline", "device": "cpu"})
    s = anyio.run(lambda: bench(cfg))
    [r] = s.results
    assert r.status == "failed" and not r.correct and "knob-annotated candidate" in (r.note or "")
    assert s.correctness_rate == 0.0 and s.fast_p["0"] == 0.0
    saved = json.loads((tmp_path / "suite" / "level2" / "40_Matmul_Scaling_ResidualAdd" / "bench.json").read_text())
    assert saved["status"] == "failed"
