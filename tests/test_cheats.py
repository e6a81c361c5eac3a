"""The delegation policy over hand-built summaries and over a profile recorded on the CPU, the runtime
probes (pointer-keyed caches, background threads, lazy exact tensors), the L2-persistence reset with a
stand-in runtime, and the speed-of-light floor. The GPU side is in test_cheats_gpu.py."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from kernelscope.harness.delegation import OpTime, Summary, decide, summarize

torch = pytest.importorskip("torch", reason="the harness needs torch (its CPU build is enough)")

from kernelscope.harness.context import JobContext, Originals  # noqa: E402
from kernelscope.harness.delegation import summary_from_profile  # noqa: E402
from kernelscope.harness.observers import L2Persistence  # noqa: E402
from kernelscope.harness.observers.speed_of_light import floor_us, judge, peak_gbps  # noqa: E402
from kernelscope.harness.probes import check_lazy, check_threads, lazy_reason, thread_snapshot  # noqa: E402
from kernelscope.harness.protocol import Config, Findings  # noqa: E402
from kernelscope.models.requests import EvalRequest  # noqa: E402
from kernelscope.tools.run import eval_candidate  # noqa: E402

CASES = Path(__file__).parent / "evalcases"
GEMM_REF = ["addmm", "t", "relu", "div"]  # a level-2 reference: Linear, ReLU, divide


# ------------------------------------------------------------------------------ the delegation policy
def test_a_fused_partial_rewrite_that_keeps_the_library_gemm_is_valid_with_its_share() -> None:
    s = Summary(library_us={"addmm": 80.0}, own_us=20.0)
    d = decide(s, GEMM_REF, "default")
    assert d.flag is not None and d.flag[:2] == ("library-ops", "review")
    assert d.evidence["library_share"] == 0.8 and d.evidence["own_share"] == 0.2 and d.evidence["ops"] == ["addmm"]
    assert "80%" in d.flag[2] and "addmm" in d.flag[2]


def test_everything_delegated_is_invalid() -> None:
    d = decide(Summary(library_us={"addmm": 80.0}, other_us=20.0, own_us=0.0), GEMM_REF, "default")
    assert d.flag is not None and d.flag[:2] == ("reference-ops", "invalid") and "everything is delegated" in d.flag[2]
    # an own kernel that does (next to) nothing is no own work
    d = decide(Summary(library_us={"addmm": 999.0}, own_us=1.0), GEMM_REF, "default")
    assert d.flag is not None and d.flag[1] == "invalid"


def test_a_single_main_operator_handed_back_is_invalid() -> None:
    d = decide(Summary(library_us={"mm": 90.0}, own_us=10.0), ["mm"], "default")
    assert d.flag is not None and d.flag[1] == "invalid" and "single main operator" in d.flag[2]


def test_a_non_library_main_op_handed_back_is_invalid() -> None:
    # softmax on a softmax + scale problem: not a GEMM or a convolution
    d = decide(Summary(library_us={"_softmax": 50.0}, own_us=50.0), ["_softmax", "mul"], "default")
    assert d.flag is not None and d.flag[1] == "invalid" and "_softmax" in d.flag[2]


def test_the_strict_policy_forbids_any_delegation() -> None:
    d = decide(Summary(library_us={"addmm": 80.0}, own_us=20.0), GEMM_REF, "strict")
    assert d.flag is not None and d.flag[1] == "invalid" and "strict" in d.flag[2]


def test_no_delegation_no_flag() -> None:
    d = decide(Summary(other_us=5.0, own_us=95.0), GEMM_REF, "strict")
    assert d.flag is None and d.evidence["ops"] == [] and d.evidence["own_share"] == 0.95


def test_summarize_attributes_each_top_level_op_to_the_reference_op_under_it() -> None:
    tops = [OpTime("linear", 70.0, frozenset({"t", "addmm"})), OpTime("empty", 1.0), OpTime("sigmoid", 9.0)]
    s = summarize(tops, total_us=100.0, ref_ops=GEMM_REF)
    assert s.library_us == {"addmm": 70.0} and s.other_us == 10.0 and s.own_us == 20.0


def test_a_profile_recorded_on_the_cpu() -> None:
    """CPU ops stand in for kernels: torch.mm is the library, numpy work outside aten is the 'own kernel'."""
    from torch.profiler import ProfilerActivity, profile, record_function

    a, b = torch.randn(256, 256), torch.randn(256, 256)

    def fused(a: Any, b: Any) -> Any:
        c = torch.mm(a, b)
        n = c.numpy()
        for _ in range(20):
            n = n * 0.5 + 1.0  # plain numpy: no aten op sees it
        return torch.from_numpy(n)

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(3):
            with record_function("win"):
                fused(a, b)
    s = summary_from_profile(list(prof.events()), ["mm"], cuda=False, window="win")
    assert s.source == "cpu" and s.library_us.get("mm", 0) > 0 and s.own_us > 0
    d = decide(s, ["mm", "mul", "add"], "default")
    assert d.flag is not None and d.flag[0] == "library-ops" and 0 < d.evidence["library_share"] < 1

    with profile(activities=[ProfilerActivity.CPU]) as prof, record_function("win"):
        torch.mm(a, b)
    s = summary_from_profile(list(prof.events()), ["mm"], cuda=False, window="win")
    assert decide(s, ["mm"], "default").flag[1] == "invalid"  # type: ignore[index]


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
    assert r.correctness and r.correctness.correct  # right on every fresh input: only the probe sees it
    f = next((f for f in r.flags if f.id == flag), None)
    assert f is not None and f.severity == "invalid", r.flags
    assert r.verdict == "invalid"


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


def test_a_gemm_is_a_gemm() -> None:
    """mm for the reference's addmm is the library GEMM kept, and on a single-GEMM problem it is invalid."""
    s = summarize([OpTime("mm", 60.0)], total_us=100.0, ref_ops=GEMM_REF)
    assert s.library_us == {"mm": 60.0} and s.own_us == 40.0
    assert decide(s, GEMM_REF, "default").flag[:2] == ("library-ops", "review")  # type: ignore[index]
    s = summarize([OpTime("addmm", 60.0)], total_us=100.0, ref_ops=["mm"])
    assert decide(s, ["mm"], "default").flag[1] == "invalid"  # type: ignore[index]
    # without a GEMM in the reference, a GEMM in the candidate is its own business (glue)
    assert summarize([OpTime("mm", 60.0)], total_us=100.0, ref_ops=["_softmax"]).library_us == {}


def test_the_gpu_path_falls_back_to_the_op_audit_when_the_profile_is_empty_or_fails(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from kernelscope.harness import delegation

    monkeypatch.setattr(delegation, "profile_forward", lambda *a, **k: Summary())
    f = Findings()
    assert delegation.audit(None, [], ["_softmax"], ["_softmax"], f, policy="default", cuda=True,
                            sync=lambda: None) is None
    assert f.flags[0].id == "reference-ops" and "no GPU time recorded" in f.flags[0].message

    def boom(*a: Any, **k: Any) -> Summary:
        raise RuntimeError("another profiler is running")

    monkeypatch.setattr(delegation, "profile_forward", boom)
    f = Findings()
    delegation.audit(None, [], ["_softmax"], ["_softmax"], f, policy="default", cuda=True, sync=lambda: None)
    assert "profiler failed" in f.flags[0].message and "another profiler" in f.notes[0]

    monkeypatch.setattr(delegation, "profile_forward",
                        lambda *a, **k: Summary(library_us={"addmm": 70.0}, own_us=30.0))
    f = Findings()
    ev = delegation.audit(None, [], GEMM_REF, ["mm"], f, policy="default", cuda=True, sync=lambda: None)
    assert ev is not None and ev["library_share"] == 0.7 and f.flags[0].id == "library-ops"
