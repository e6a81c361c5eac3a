"""The eval harness for real, on CPU with torch's CPU build: correctness policy, statistics, verdicts
and every cheat check that does not need a GPU (the GPU-only ones are in test_run_gpu.py)."""

from __future__ import annotations

import random
import time
from pathlib import Path

import pytest

from kernelscope.errors import InputError
from kernelscope.harness.cheats import fallback_findings, implausible_speedup
from kernelscope.harness.protocol import Findings
from kernelscope.harness.stats import bootstrap_ratio_ci, timing_stats, verdict_for

torch = pytest.importorskip("torch", reason="the eval harness tests need torch (CPU build is enough)")

from kernelscope.models.requests import EvalRequest  # noqa: E402
from kernelscope.tools.run import eval_candidate  # noqa: E402

CASES = Path(__file__).parent / "evalcases"


def evaluate(candidate: str, reference: str = "ref_softmax.py", **kw: object):  # type: ignore[no-untyped-def]
    args: dict = {"device": "cpu", "timing_budget_s": 0.2, "min_runs": 10, "max_runs": 200, "trials": 3,
                  "timeout_s": 120}
    args.update(kw)
    return eval_candidate(EvalRequest(reference_path=str(CASES / reference), candidate_path=str(CASES / candidate),
                                      **args))


def flag_ids(r) -> set[str]:  # type: ignore[no-untyped-def]
    return {f.id for f in r.flags}


def test_correct_candidate() -> None:
    r = evaluate("ok_softmax.py")
    assert r.status == "ok" and r.correctness and r.correctness.correct and r.correctness.passed == 3
    assert r.correctness.tolerances == {"float32": {"rtol": 1e-4, "atol": 1e-4}}
    assert r.verdict in ("faster", "slower", "inconclusive") and not r.flags
    assert {"candidate", "reference"} <= set(r.timings) and r.timings["candidate"].runs >= 10
    (sp,) = r.speedups
    assert sp.baseline == "eager" and sp.ci_low <= sp.speedup <= sp.ci_high
    assert "_softmax" in r.ops["reference"] and "_softmax" not in r.ops["candidate"]


@pytest.mark.parametrize("case,needle", [
    ("wrong.py", "outside rtol"),
    ("nan_out.py", "NaN/Inf"),
    ("wrong_shape.py", "shape (256, 64) != reference (64, 256)"),
    ("unwritten.py", ""),
])
def test_incorrect_candidates(case: str, needle: str) -> None:
    r = evaluate(case)
    assert r.verdict == "incorrect" and r.correctness and not r.correctness.correct
    err = next(t.error for t in r.correctness.trial_results if t.error)
    assert needle in err
    assert not r.timings  # an incorrect candidate is not timed


@pytest.mark.parametrize("case,flag", [
    ("calls_reference_op.py", "reference-ops"),
    ("fallback.py", "fallback-to-torch"),
    ("timer_patch.py", "timer-tampering"),
    ("cached.py", "cached-output"),
    ("lazy.py", "lazy-output"),
    ("mutates_input.py", "input-mutation"),
    ("tf32.py", "precision-downgrade"),
    ("half_out.py", "precision-downgrade"),
])
def test_cheats_are_caught(case: str, flag: str) -> None:
    r = evaluate(case)
    assert flag in flag_ids(r), (r.verdict, r.flags, r.error)
    assert r.verdict in ("invalid", "incorrect")
    f = next(f for f in r.flags if f.id == flag)
    assert f.severity == "invalid" and f.message


def test_implausible_speedup_rule() -> None:
    """The rule itself, on fixed numbers: CPU timing is never asserted on."""
    timings = {"candidate": {"median_us": 10.0}, "reference": {"median_us": 400.0}}
    for speedup, fires in ((40.0, True), (10.0, False), (9.9, False)):
        findings = Findings()
        implausible_speedup({"eager": {"speedup": speedup}}, timings, 10.0, findings)
        flags = {f["id"]: f for f in findings.flags_json()}
        assert ("implausible-speedup" in flags) == fires, speedup
        if fires:
            f = flags["implausible-speedup"]
            assert f["severity"] == "review" and f["evidence"]["speedup"] == speedup
            assert "40.0x" in f["message"] and "same work" in f["message"]


def test_implausible_speedup_is_wired_into_eval() -> None:
    """End to end: the flag follows the speedup the run measured, whatever the machine's load made it
    (the reference does 400x the work, so on any sane machine the flag is exercised)."""
    limit = 2.0
    r = evaluate("fast_tanh.py", reference="ref_slow_tanh.py", flag_speedup_above=limit)
    assert r.correctness and r.correctness.correct
    (sp,) = r.speedups
    assert ("implausible-speedup" in flag_ids(r)) == (sp.speedup > limit), (sp, r.flags)
    for f in r.flags:
        if f.id == "implausible-speedup":
            assert f.severity == "review" and f.evidence["speedup"] == pytest.approx(sp.speedup, rel=1e-3)
    assert r.verdict != "invalid"  # review flags inform, they do not void the result


def test_degenerate_reference_inputs() -> None:
    r = evaluate("ok_softmax.py", reference="ref_zeros.py")
    assert "degenerate-inputs" in flag_ids(r) and r.verdict == "invalid"


def test_crash_is_a_result() -> None:
    r = evaluate("crash.py")
    assert r.status == "crashed" and r.verdict == "incorrect" and "SIGABRT" in (r.error or "")


def test_hang_costs_only_its_time_limit() -> None:
    t0 = time.monotonic()
    r = evaluate("hang.py", timeout_s=8)
    assert r.status == "timeout" and r.verdict == "invalid"
    assert time.monotonic() - t0 < 20


def test_missing_modelnew_is_invalid() -> None:
    r = evaluate("no_modelnew.py")
    assert r.verdict == "invalid" and "ModelNew" in (r.error or "")


def test_bad_sources_are_refused() -> None:
    with pytest.raises(InputError, match="syntax error at line 1"):
        eval_candidate(EvalRequest(reference_path=str(CASES / "ref_softmax.py"), candidate="def (:", device="cpu"))
    with pytest.raises(InputError, match="exactly one"):
        eval_candidate(EvalRequest(candidate="x = 1", device="cpu"))
    with pytest.raises(InputError, match="outside the allowed roots"):
        eval_candidate(EvalRequest(reference_path="/etc/passwd", candidate="x = 1", device="cpu"))


def test_strict_policy_is_stated() -> None:
    r = evaluate("ok_softmax.py", tolerance="strict")
    assert r.correctness and r.correctness.policy == "strict"
    assert r.correctness.tolerances["float32"] == {"rtol": 1e-5, "atol": 1e-6}


# ------------------------------------------------------------------------------ statistics
def _noisy(median: float, n: int, rel_noise: float, seed: int) -> list[float]:
    rng = random.Random(seed)
    return [median * (1 + rng.gauss(0, rel_noise)) + abs(rng.gauss(0, rel_noise * median)) for _ in range(n)]


def test_identical_timings_are_inconclusive() -> None:
    for seed in range(20):
        a, b = _noisy(100.0, 300, 0.03, seed), _noisy(100.0, 300, 0.03, seed + 100)
        point, lo, hi = bootstrap_ratio_ci(a, b, seed=seed)
        assert verdict_for(lo, hi, 0.02) == "inconclusive", (point, lo, hi)


def test_planted_five_percent_slowdown_is_slower() -> None:
    ref, cand = _noisy(100.0, 300, 0.03, 1), _noisy(105.0, 300, 0.03, 2)
    point, lo, hi = bootstrap_ratio_ci(ref, cand)
    assert 0.93 < point < 0.97 and verdict_for(lo, hi, 0.02) == "slower"


def test_timing_stats() -> None:
    s = timing_stats([1.0, 2.0, 3.0, 4.0, 100.0])
    assert s["median_us"] == 3.0 and s["runs"] == 5 and s["min_us"] == 1.0 and s["iqr_us"] == 2.0


def test_fallback_detection_is_specific() -> None:
    assert fallback_findings("try:\n    import cupy\nexcept ImportError:\n    cupy = None\n") == []
    assert fallback_findings("try:\n    y = k(x)\nexcept Exception:\n    y = torch.relu(x)\n")[0]["id"] == \
        "fallback-to-torch"


def test_spawn_executor_gives_the_same_answer() -> None:
    r = evaluate("ok_softmax.py", executor="spawn")
    assert r.status == "ok" and r.correctness and r.correctness.correct


def test_jobs_do_not_leak_into_each_other() -> None:
    patched = evaluate("timer_patch.py")  # replaces time.perf_counter in its own process
    assert "timer-tampering" in flag_ids(patched)
    clean = evaluate("ok_softmax.py")  # the next job (same fork server) starts from clean state
    assert not clean.flags and clean.status == "ok"


@pytest.mark.slow
def test_load_inline_candidate_is_built_before_the_evaluation() -> None:
    pytest.importorskip("ninja", reason="torch's extension builds need ninja")
    r = evaluate("ext_relu.py", reference="ref_relu.py", timeout_s=600)
    assert r.status == "ok" and r.correctness and r.correctness.correct, (r.error, r.build_note, r.stderr_tail)
    assert r.build_s is not None and r.build_note is None
    # the evaluation imported the cached build instead of compiling again
    assert r.phases_s["load_and_construct"] < 0.5 * r.build_s


@pytest.mark.slow
def test_torch_compile_baseline_is_timed_too() -> None:
    r = evaluate("ok_softmax.py", reference_modes=["eager", "compile"], timeout_s=600)
    assert r.status == "ok", (r.error, r.notes)
    if "reference_compile" not in r.timings:  # torch.compile unusable here: said so, not hidden
        assert any("torch.compile" in n for n in r.notes)
        pytest.skip(f"torch.compile unavailable on this host: {r.notes}")
    assert {sp.baseline for sp in r.speedups} == {"eager", "compile"}
    assert r.timings["reference_compile"].runs >= 10


def test_gpu_requested_without_a_gpu_says_so() -> None:
    from kernelscope.errors import NotAvailable
    from kernelscope.sandbox.gpu import gpu_pool

    if len(gpu_pool()):
        pytest.skip("this host has a GPU")
    with pytest.raises(NotAvailable, match=r"no NVIDIA GPU is visible.*device='cpu'"):
        evaluate("ok_softmax.py", device="cuda")


def test_kept_samples_reach_the_client() -> None:
    r = evaluate("ok_softmax.py", keep_samples=True)
    assert r.samples_us is not None and set(r.samples_us) == {"candidate", "reference"}
    assert len(r.samples_us["candidate"]) == r.timings["candidate"].runs
    assert evaluate("ok_softmax.py").samples_us is None


def test_rounds_with_a_slow_l2_flush_are_left_out() -> None:
    """The flush memset before each timed call probes other memory traffic: rounds whose flush ran > 10% over
    its quiet time (and the round after each) leave the timings, with a note; when most rounds are slow,
    all are kept and the note says the times may read high. (The selection logic, on synthetic flush times;
    the GPU test runs it against a real noisy neighbour.)"""
    from kernelscope.harness.observers import FlushProbe

    h = FlushProbe(256)
    rng = random.Random(0)
    # the flush after the reference is 8% slower than after the candidate (what each leaves in L2): not an episode
    def flushes(i: int, slow: float = 1.0) -> list[tuple[str, float]]:
        after = ["reference", "candidate"] if i % 2 else ["candidate", "reference"]
        return [(p, slow * (90.0 if p == "reference" else 83.4) + rng.random() * 0.6) for p in after]

    rounds = [({"candidate": 220.0 + rng.random(), "reference": 990.0}, flushes(i)) for i in range(100)]
    for i in range(40, 46):  # an episode: a 6-round stretch of memset and kernel slowed by ~15%
        rounds[i] = ({"candidate": 252.0, "reference": 1050.0}, flushes(i, 1.15))
    keep = h.quiet_rounds([f for _, f in rounds])
    assert keep == [i for i in range(100) if not 40 <= i <= 46]
    h.describe([f for _, f in rounds], keep)
    assert h.report is not None
    assert h.report["rounds_slow"] == 6 and h.report["rounds_dropped"] == 7
    assert 83.4 <= h.report["quiet_us"] <= 84.0 and h.report["max_us"] > 1.14 * 90.0
    assert any("7 of 100 timing rounds left out" in n for n in h.notes)

    busy = [({"candidate": 252.0}, [("candidate", 96.0 + rng.random())]) if i % 3
            else ({"candidate": 220.0}, [("candidate", 83.5)]) for i in range(90)]
    h2 = FlushProbe(256)
    assert len(h2.quiet_rounds([f for _, f in busy])) < 45  # most rounds slow: the timing keeps them all, and says so
    h2.describe([f for _, f in busy], list(range(90)))
    assert h2.report is not None
    assert h2.report["rounds_dropped"] == 0 and h2.report["rounds_slow"] == 60
    assert any("too many to drop" in n for n in h2.notes)


def test_cpu_timings_have_no_flush_probe() -> None:
    r = evaluate("ok_softmax.py")
    assert r.status == "ok" and r.flush_probe is None


def test_the_host_cover_follows_the_warm_up_and_is_reported() -> None:
    """Before each timed call the harness waits on the GPU long enough for the host to issue the call (so the
    host's launch time stays out of the GPU timings): twice the call's 90th-percentile host time in the
    warm-up plus 30 µs, capped, or what the request asks. (The sizing and the report on synthetic times; the
    GPU test times a candidate with a slow host side both ways.)"""
    from kernelscope.harness.observers import HostCover, Round, TimingRun

    h = HostCover()
    # warm-up host times (s): the first quarter includes one-off work and is left out
    warm = {"candidate": [5e-3] * 10 + [100e-6] * 30 + [150e-6] * 10, "reference": [40e-6] * 40}
    us = h.cover_us(["candidate", "reference"], warm)
    assert us["candidate"] == 2 * 150 + 30 and us["reference"] == 2 * 40 + 30
    assert h.cover_us(["candidate"], {"candidate": [5e-3] * 40})["candidate"] == HostCover.MAX_US
    assert HostCover(0).cover_us(["candidate"], warm) == {"candidate": 0.0}
    assert HostCover(75).cover_us(["candidate"], warm) == {"candidate": 75.0}

    # the report: a forward that takes longer to issue than to run says so; calls over the cover are counted
    h = HostCover()
    h.us = {"candidate": 200.0, "reference": 100.0}
    run = TimingRun(["candidate", "reference"], rounds=[Round({"candidate": 12.0, "reference": 300.0})] * 100,
                    host_us={"candidate": [90.0] * 90 + [400.0] * 10, "reference": [60.0] * 100},
                    host_call_us={"candidate": [60.0] * 100, "reference": [30.0] * 100},
                    gpu_before_call_us=80.0)  # the least flush time before a call
    h.describe(run)
    hc = h.report
    assert hc is not None
    assert hc["cover_us"] == {"candidate": 200.0, "reference": 100.0}
    assert hc["call_median_us"] == {"candidate": 60.0, "reference": 30.0}
    assert hc["calls_over_cover"] == {"candidate": 10, "reference": 0}  # 400 > 200 + 80
    assert any(n.startswith("candidate: one call takes 60 µs on the host") for n in h.notes)
    assert not any(n.startswith("reference: one call") for n in h.notes)
    assert any("10 of 100 candidate calls" in n for n in h.notes)


def test_cpu_timings_have_no_host_cover() -> None:
    r = evaluate("ok_softmax.py")
    assert r.status == "ok" and r.host_cover is None


def test_the_time_outside_the_harness_is_accounted_for() -> None:
    r = evaluate("ok_softmax.py")
    assert r.status == "ok" and r.harness_wall_s is not None
    assert set(r.overhead_s) == {"prepare", "lease", "spawn", "setup", "hand_off"}
    assert all(v >= 0 for v in r.overhead_s.values())
    # the parts and the harness tile the evaluation: together within a few ms of its wall time
    assert abs(sum(r.overhead_s.values()) + r.harness_wall_s - r.wall_s) < 0.05, (r.overhead_s, r.wall_s)


def test_a_crashed_job_has_no_overhead_account() -> None:
    r = evaluate("crash.py")
    assert r.status == "crashed" and r.overhead_s == {}
