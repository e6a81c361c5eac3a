"""The harness's memory plan (pure functions), its chunked in-place comparison, the global state kept
apart around every candidate call, and whose a failure is (the candidate's, the reference's, or the
harness's own): all on the CPU."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from kernelscope.harness.memory import GIB, MemoryPlan, Sizes, TooLarge, counted, plan, scratch_bytes

torch = pytest.importorskip("torch", reason="the harness tests need torch (CPU build is enough)")

from kernelscope.harness import correctness, job  # noqa: E402
from kernelscope.harness.guard import Attributed, StateGuard, blame, read_flags  # noqa: E402
from kernelscope.harness.protocol import Findings  # noqa: E402

CASES = Path(__file__).parent / "evalcases"
G = 1 << 30


# ------------------------------------------------------------------------------------ the memory plan
def test_a_small_problem_keeps_every_copy() -> None:
    p = plan(80 * G, Sizes(inputs=G, outputs=G, work=0), G // 4, poison_copies=4, rotate_sets=4)
    assert (p.poison_copies, p.keep_previous, p.rotate_sets) == (4, True, 4) and not p.lowered
    assert p.note() is None
    # counted: the candidate's inputs, four poisoned copies, two kept outputs, the scratch
    assert p.needed == max(G + 4 * G + 2 * G + scratch_bytes(G // 4), 3 * G)
    assert p.counted["candidate inputs"] == G and p.counted["previous trial's outputs"] == 2 * G


def test_copies_are_lowered_in_order_until_the_problem_fits() -> None:
    s = Sizes(inputs=8 * G, outputs=8 * G, work=0)  # a scaled-up KernelBench level-1 problem
    everything = sum(counted(s, 2 * G, 4, True).values())
    assert everything > 40 * G
    p = plan(40 * G, s, 2 * G, poison_copies=4, rotate_sets=4)
    assert p.poison_copies < 4 and p.keep_previous and p.needed <= 40 * G
    assert "poisoned" in p.lowered[0] and "lowered to fit" in (p.note() or "")
    q = plan(30 * G, s, 2 * G, poison_copies=4, rotate_sets=4)
    assert q.poison_copies == 1 and not q.keep_previous and q.needed <= 30 * G
    assert any("cached-output" in x for x in q.lowered)
    r = plan(20 * G, Sizes(inputs=8 * G, outputs=G, work=0), G, poison_copies=1, rotate_sets=4)
    assert r.rotate_sets == 3 and r.keep_previous and any("input set" in x for x in r.lowered)


def test_a_problem_that_cannot_fit_says_so_with_the_numbers_and_the_fix() -> None:
    with pytest.raises(TooLarge) as e:
        plan(10 * G, Sizes(inputs=16 * G, outputs=16 * G, work=4 * G), 4 * G, poison_copies=4, rotate_sets=4)
    msg = str(e.value)
    assert msg.startswith("too large for this GPU with these settings")
    assert "10.00 GiB are free" in msg and "inputs of 16.00 GiB" in msg and "Fix:" in msg
    assert "candidate inputs 16.00 GiB" in msg  # what was counted


def test_the_plan_counts_its_own_scratch_bounded_by_the_chunk() -> None:
    assert scratch_bytes(10) == 10 * 48 and scratch_bytes(1 << 40) == scratch_bytes(1 << 30)
    assert MemoryPlan(4, True, 4).note() is None and float(G) == GIB


# ------------------------------------------------------------------------------------ the comparison
def test_the_comparison_goes_chunk_by_chunk_with_the_same_verdicts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(correctness, "CHUNK_ELEMENTS", 1000)  # many chunks
    r = torch.randn(300, 50)
    c = r.clone()
    c[200, 7] += 1.0
    c[250, 1] += 2.0
    for cand in (c, c.t().contiguous().t()):  # contiguous and not
        e = correctness._compare_values(cand, r, 1e-4, 1e-4)
        assert (e.bad, e.first, e.nonfinite) == (2, 200 * 50 + 7, 0)
        assert e.max_abs == pytest.approx(2.0, rel=1e-5)
        assert e.first_values[0] == pytest.approx(float(r[200, 7]) + 1.0)
        assert int((~torch.isclose(cand, r, rtol=1e-4, atol=1e-4)).sum()) == e.bad  # the allclose of before
    n = r.clone()
    n[299, 49] = float("nan")
    n[0, 0] = float("inf")
    assert correctness._compare_values(n, r, 1e-4, 1e-4).nonfinite == 2
    h = r.half()
    assert correctness._compare_values(h, h.clone(), 1e-2, 1e-2).bad == 0  # 16-bit: compared in fp32


def test_compare_reports_as_before() -> None:
    r = torch.randn(64, 256)
    c = r.clone()
    c[3, 4] = float("nan")
    cfg = job.Config(device="cpu")
    ok, info = correctness.compare([r], [c], 0, cfg, Findings())
    assert not ok and "1 NaN/Inf elements of 16384" in info["error"]
    c = r + 1e-3
    ok, info = correctness.compare([r], [c], 0, cfg, Findings())
    assert not ok and "outside rtol=0.0001" in info["error"] and info["max_abs_error"] == pytest.approx(1e-3, rel=1e-2)
    ok, info = correctness.compare([r], [r.clone()], 0, cfg, Findings())
    assert ok and info["max_abs_error"] == 0.0


def test_kernelbench_tolerances_follow_kernelbench() -> None:
    cfg = job.Config(device="cpu", tolerance="kernelbench")
    assert correctness.tolerance(cfg, torch.float32) == (1e-4, 1e-4)
    assert correctness.tolerance(cfg, torch.float16) == (1e-2, 1e-2)
    assert correctness.tolerance(cfg, torch.bfloat16) == (1e-2, 1e-2)


# ------------------------------------------------------------------------------------ global state
def test_the_guard_restores_the_harness_state_and_reapplies_the_candidates() -> None:
    findings = Findings()
    before = read_flags(torch)
    g = StateGuard(torch, False, findings)
    torch.manual_seed(5)
    expected = torch.rand(3)
    torch.manual_seed(5)
    try:
        with g.call("forward"):
            torch.backends.cudnn.benchmark = True
            torch.set_float32_matmul_precision("medium")
            torch.rand(10)  # the candidate draws random numbers
        assert read_flags(torch) == before  # the harness's state is back
        assert torch.equal(torch.rand(3), expected)  # and its RNG stream is untouched
        with g.call("forward"):
            assert torch.backends.cudnn.benchmark and torch.get_float32_matmul_precision() == "medium"
        with g.as_candidate():
            assert torch.backends.cuda.matmul.allow_tf32  # "medium" turns TF32 on
        assert read_flags(torch) == before
    finally:
        from kernelscope.harness.guard import write_flags
        write_flags(torch, before)
    (flag,) = [f for f in findings.flags if f.id == "global-state"]  # one flag naming everything
    assert flag.severity == "review"
    assert {"cudnn.benchmark", "float32_matmul_precision", "matmul.allow_tf32", "RNG state"} <= set(
        flag.evidence["changed"])


def _job(tmp_path: Path, candidate: str, reference: str = "ref_softmax.py", **kw: Any) -> dict[str, Any]:
    cfg = {"device": "cpu", "reference_path": str(CASES / reference), "candidate_path": str(CASES / candidate),
           "trials": 2, "timing_budget_s": 0.02, "min_runs": 5, "max_runs": 50, "seed": 1, **kw}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    out = tmp_path / "result.json"
    assert job.run_job(str(tmp_path / "config.json"), str(out)) == 0
    result: dict[str, Any] = json.loads(out.read_text())
    return result


def test_the_reference_runs_in_its_own_state_whatever_the_candidate_sets(tmp_path: Path) -> None:
    before = read_flags(torch)
    try:
        result = _job(tmp_path, "changes_state.py", "ref_records_state.py")
        seen = sys.modules["ks_reference"].SEEN
        flags = {f["id"]: f for f in result["flags"]}
    finally:
        from kernelscope.harness.guard import write_flags
        write_flags(torch, before)
    assert len(seen) >= 5  # trials, op audit, warm-up and timed calls
    assert all(s == (before["cudnn.deterministic"], before["matmul.allow_tf32"],
                     before["float32_matmul_precision"], before["default_dtype"]) for s in seen), set(seen)
    assert {"cudnn.deterministic", "float32_matmul_precision", "default_dtype"} <= set(
        flags["global-state"]["evidence"]["changed"])
    assert "precision-downgrade" in flags  # the fp32 check still sees the candidate's own setting


# ------------------------------------------------------------------------------------ whose failure
def test_the_candidates_exception_is_its_own(tmp_path: Path) -> None:
    result = _job(tmp_path, "raises.py")
    assert result["status"] == "error" and result["verdict"] == "incorrect"
    assert "the candidate raised in forward (correctness trial 0): ValueError: the candidate's own bug" in \
        result["error"]


def test_a_failure_of_the_harness_itself_is_a_harness_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*a: Any, **k: Any) -> Any:
        raise RuntimeError("comparison blew up")

    monkeypatch.setattr(job, "compare", broken)
    result = _job(tmp_path, "ok_softmax.py")
    assert result["status"] == "harness-error" and result["verdict"] == "inconclusive"
    assert "the harness itself failed (RuntimeError: comparison blew up)" in result["error"]
    assert "says nothing about the candidate" in result["error"]


def test_too_large_and_device_faults_and_the_reference(tmp_path: Path) -> None:
    h = job.Harness({"device": "cpu"}, observers=[])
    assert job.failure(TooLarge("too large for this GPU with these settings: ..."), h)["status"] == "too-large"
    fault = job.failure(RuntimeError("CUDA error: an illegal memory access was encountered"), h)
    assert fault["status"] == "error" and fault["verdict"] == "incorrect"
    with pytest.raises(Attributed) as e, blame("reference", "forward"):
        raise KeyError("x")
    ref = job.failure(e.value, h)
    assert ref["status"] == "error" and ref["verdict"] == "invalid"
    assert "the reference raised in forward" in ref["error"]
    oom = job.failure(RuntimeError("CUDA out of memory. Tried to allocate 12.00 GiB"), h)
    assert oom["status"] == "harness-error"


def test_the_answer_says_a_harness_error_is_not_the_candidates() -> None:
    from kernelscope.server.summaries import eval_summary
    from kernelscope.tools.run_answer import parse_harness_result

    r = parse_harness_result({"status": "harness-error", "verdict": "inconclusive",
                              "error": "the harness itself failed (RuntimeError: x)"})
    assert r.status == "harness-error"
    text = eval_summary(r)
    assert "the harness itself failed (nothing is known about the candidate)" in text and "INCORRECT" not in text
    big = parse_harness_result({"status": "too-large", "verdict": "inconclusive", "error": "too large for ..."})
    assert "too large for this GPU with these settings" in eval_summary(big)


def test_the_harness_peak_memory_reaches_the_answer() -> None:
    """The harness' own peak (PyTorch's caching allocator over the job, GPU jobs only) is in the typed answer;
    a CPU job and an older harness result have none."""
    from kernelscope.tools.run_answer import parse_harness_result

    assert parse_harness_result({"status": "ok", "verdict": "inconclusive",
                                 "gpu_memory_peak_mib": 16384}).gpu_memory_peak_mib == 16384
    assert parse_harness_result({"status": "ok", "verdict": "inconclusive"}).gpu_memory_peak_mib is None
    h = job.Harness({"device": "cpu", "reference_path": "", "candidate_path": ""})
    assert h.note_peak() == 0


@pytest.mark.gpu
def test_the_peak_covers_the_resets_of_the_reference_outputs() -> None:
    """On a GPU: a 256 MiB tensor held and freed before reference_outputs resets the allocator's peak statistics
    still counts in the job's peak."""
    import torch

    if not torch.cuda.is_available():
        pytest.skip("no CUDA device here")
    h = job.Harness({"device": "cuda:0", "reference_path": "", "candidate_path": ""})
    big = torch.empty(256 << 20, dtype=torch.uint8, device="cuda:0")
    del big
    h.reference_outputs(lambda x: x * 2, [torch.ones(4, device="cuda:0")])
    assert h.note_peak() >= 256 << 20
