"""The runtime probes (pointer-keyed caches, background threads, lazy exact tensors), the L2-persistence
reset with a stand-in runtime, the speed-of-light floor, and the op audit deciding on the CPU. The
delegation policy is in test_delegation.py; the GPU side in test_cheats_gpu.py."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="the harness needs torch (its CPU build is enough)")

from kernelscope.harness.context import JobContext, Originals  # noqa: E402
from kernelscope.harness.observers import L2Persistence  # noqa: E402
from kernelscope.harness.observers.speed_of_light import floor_us, judge, peak_gbps  # noqa: E402
from kernelscope.harness.probes import check_lazy, check_threads, lazy_reason, thread_snapshot  # noqa: E402
from kernelscope.harness.protocol import Config, Findings  # noqa: E402
from kernelscope.models.requests import EvalRequest  # noqa: E402
from kernelscope.tools.run import eval_candidate  # noqa: E402

CASES = Path(__file__).parent / "evalcases"


# ------------------------------------------------------------------------------ end to end on the CPU
def evaluate(candidate: str, reference: str = "ref_softmax.py", **kw: object):  # type: ignore[no-untyped-def]
    args: dict = {"device": "cpu", "timing_budget_s": 0.05, "min_runs": 5, "max_runs": 50, "trials": 2,
                  "timeout_s": 120}
    args.update(kw)
    return eval_candidate(EvalRequest(reference_path=str(CASES / reference), candidate_path=str(CASES / candidate),
                                      **args))


def test_on_the_cpu_the_op_audit_decides_and_says_so() -> None:
    r = evaluate("calls_reference_op.py")
    f = next(f for f in r.flags if f.id == "reference-ops")
    assert r.verdict == "invalid" and f.severity == "invalid" and "CPU run" in f.message


@pytest.mark.parametrize("case,flag", [
    ("pointer_cache.py", "pointer-cache"),
    ("background_thread.py", "background-threads"),
    ("neg_view.py", "lazy-output"),
])
def test_new_cheats_are_caught(case: str, flag: str) -> None:
    r = evaluate(case)
    assert r.correctness is not None
    if flag == "pointer-cache" and not r.correctness.correct:
        # the allocator handed a fresh input the storage of a freed one, so the cache answered it stale:
        # the correctness trials caught it before the probe could (it depends on where memory is reused)
        assert r.verdict in ("incorrect", "invalid"), r.verdict
        return
    assert r.correctness.correct  # right on every fresh input: only the probe sees it
    f = next((f for f in r.flags if f.id == flag), None)
    assert f is not None and f.severity == "invalid", r.flags
    assert r.verdict == "invalid"


def test_a_reference_that_draws_in_its_forward_is_its_own_honest_match() -> None:
    # KernelBench's LSTM draws its initial states with torch.randn in forward: a candidate drawing the same way
    # must see the same numbers in every compared call, and drawing is no change of global state there
    r = evaluate("draws_like_reference.py", "ref_draws.py")
    assert r.correctness is not None and r.correctness.correct, r.correctness
    ids = {f.id for f in r.flags}
    assert not ids & {"global-state", "distribution", "pointer-cache"}, r.flags
    assert any("distribution trials" in n and "failed" not in n for n in r.notes), r.notes


def test_the_pointer_cache_probe_refills_every_input_whatever_its_dtype() -> None:
    # a bool mask and int64 indices among the inputs: refilling only the floats compared the candidate on
    # old masks with the reference on new ones, and refused honest candidates (masked cumsum, cross-entropy)
    honest = evaluate("masked_gather.py", "ref_masked_gather.py")
    assert honest.correctness is not None and honest.correctness.correct
    assert "pointer-cache" not in {f.id for f in honest.flags}, honest.flags
    cheat = evaluate("pointer_cache_masked.py", "ref_masked_gather.py")
    assert cheat.verdict == "invalid"
    if cheat.correctness is not None and cheat.correctness.correct:  # see test_new_cheats_are_caught
        assert "pointer-cache" in {f.id for f in cheat.flags}, cheat.flags


# ------------------------------------------------------------------------------ the probes, directly
def test_threads_left_behind_are_named() -> None:
    before, findings = thread_snapshot(), Findings()
    assert check_threads(before, findings) == [] and not findings.flags
    stop = threading.Event()
    t = threading.Thread(target=stop.wait, name="ks-test-lingerer", daemon=True)
    t.start()
    try:
        names = check_threads(before, findings)
    finally:
        stop.set()
        t.join()
    assert any("ks-test-lingerer" in n for n in names) and findings.flags[0].id == "background-threads"


def test_lazy_exact_tensors() -> None:
    x = torch.randn(4)
    assert lazy_reason(x) is None and lazy_reason(x.clone()) is None
    assert "negative view" in (lazy_reason(torch._neg_view(x)) or "")
    assert "meta" in (lazy_reason(torch.empty(3, device="meta")) or "")
    f = Findings()
    check_lazy([x, torch._neg_view(x)], f)
    assert f.flags[0].id == "lazy-output" and f.flags[0].evidence["output"] == 1


# ------------------------------------------------------------------------------ L2 persistence
class FakeRuntime:
    """A stand-in for the CUDA runtime: the persisting carve-out a candidate sets, and the clears."""

    def __init__(self) -> None:
        self.limit = 0
        self.clears = 0

    def persisting_limit(self) -> int:
        return self.limit

    def clear(self) -> None:
        self.limit = 0
        self.clears += 1


def _ctx() -> JobContext:
    return JobContext(Config(device="cpu"), Findings(), Originals.capture(torch, False), torch.device("cpu"), False)


def test_l2_persistence_is_reset_before_every_call_and_flagged() -> None:
    rt = FakeRuntime()
    obs = L2Persistence(rt)
    ctx = _ctx()
    obs.register(ctx)
    obs.before_call("reference", True)
    assert rt.clears == 0 and not ctx.findings.flags  # nothing set: nothing to do
    for _ in range(3):
        rt.limit = 8 << 20  # the candidate's forward sets its carve-out again each call
        obs.before_call("candidate", False)
    assert rt.clears == 3 and rt.limit == 0
    (f,) = ctx.findings.flags
    assert f.id == "l2-persistence" and f.severity == "invalid" and f.evidence["persisting_bytes"] == 8 << 20


# ------------------------------------------------------------------------------ speed of light
def test_speed_of_light_floor() -> None:
    # 1 GiB in and out at 3350 GB/s: ~641 µs; 50 MB of L2 absorbs part of the output writes
    gib = 1 << 30
    assert floor_us(gib, gib, 3350) == pytest.approx(2 * gib / 3350e3)
    assert floor_us(gib, gib, 3350, l2_bytes=50 << 20) < floor_us(gib, gib, 3350)
    verdict, ev = judge(100.0, 700.0, gib, gib, 3350, 50 << 20)
    assert verdict == "invalid" and ev["floor_us"] > 600 and ev["peak_gbps"] == 3350
    assert judge(650.0, 700.0, gib, 0, 3350)[0] is None  # at the floor: fine
    assert judge(100.0, 90.0, gib, gib, 3350)[0] == "note"  # the reference too: the floor does not fit
    assert peak_gbps("NVIDIA H100 80GB HBM3") == 3350 and peak_gbps("NVIDIA H100 PCIe") == 2000
    assert peak_gbps("unknown") is None

    class Props:
        memory_clock_rate, memory_bus_width = 2_619_000, 5120  # kHz, bits: the H100 SXM's

    assert peak_gbps("whatever", Props()) == pytest.approx(3352, rel=1e-3)
