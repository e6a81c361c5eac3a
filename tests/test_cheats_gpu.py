"""The delegation policy and the new cheats on a real GPU: fused level-2 candidates that keep the
library GEMM (their epilogue through kernelscope.fast or load_inline) are valid with their share, a pure
delegation and the torch.sum cheat are invalid, an L2-persistence candidate is caught, and a time faster
than the speed of light is refused."""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from kernelscope.harness.context import JobContext, Originals  # noqa: E402
from kernelscope.harness.observers import Measured, SpeedOfLight, TimingRun  # noqa: E402
from kernelscope.harness.protocol import Config, Findings  # noqa: E402
from kernelscope.models.requests import EvalRequest  # noqa: E402
from kernelscope.tools.run import eval_candidate  # noqa: E402

pytestmark = pytest.mark.gpu
CASES = Path(__file__).parent / "evalcases"


def ev(candidate: str, reference: str, **kw: object):  # type: ignore[no-untyped-def]
    args: dict = {"device": "cuda", "timing_budget_s": 0.3, "trials": 3, "timeout_s": 180}
    args.update(kw)
    return eval_candidate(EvalRequest(reference_path=str(CASES / reference), candidate_path=str(CASES / candidate),
                                      **args))


def test_a_fused_level2_candidate_keeping_the_library_gemm_is_valid_with_its_share() -> None:
    r = ev("gpu_fused_gemm.py", "gpu_ref_gemm_relu.py")
    assert r.correctness and r.correctness.correct, (r.error, r.correctness)
    assert not [f for f in r.flags if f.severity == "invalid"], r.flags
    f = next(f for f in r.flags if f.id == "library-ops")
    assert f.severity == "review" and f.evidence["ops"] == ["mm"] and f.evidence["source"] == "gpu"
    assert 0.5 < float(f.evidence["library_share"]) < 1.0  # type: ignore[arg-type]
    assert float(f.evidence["own_share"]) > 0.01  # type: ignore[arg-type]
    assert r.verdict in ("faster", "slower", "inconclusive")


def test_a_fused_load_inline_candidate_keeping_torch_matmul_is_valid_with_its_share() -> None:
    """cuBLAS through torch.matmul, bias + ReLU + scale in its own load_inline kernel: on the H100 its
    kernel went unattributed (own share 0%) and the candidate was refused."""
    r = ev("gpu_fused_gemm_inline.py", "gpu_ref_gemm_relu.py", timeout_s=300)  # the extension builds first
    assert r.correctness and r.correctness.correct, (r.error, r.correctness)
    assert not [f for f in r.flags if f.severity == "invalid"], r.flags
    f = next(f for f in r.flags if f.id == "library-ops")
    assert f.severity == "review" and f.evidence["ops"] == ["mm"] and f.evidence["source"] == "gpu"
    assert "fused_bias_relu_scale" in f.evidence["kernels"]["own"], f.evidence  # type: ignore[index]
    assert float(f.evidence["own_share"]) > 0 and 0.5 < float(f.evidence["library_share"]) < 1.0  # type: ignore[arg-type]


def test_the_torch_sum_cheat_is_invalid() -> None:
    ref = Path(__file__).resolve().parent.parent / "examples" / "problems" / "row_sum" / "reference.py"
    r = eval_candidate(EvalRequest(reference_path=str(ref), candidate_path=str(CASES / "sum_cheat.py"),
                                   device="cuda", timing_budget_s=0.3, trials=3, timeout_s=180))
    f = next(f for f in r.flags if f.id == "reference-ops")
    assert f.severity == "invalid" and "single main operator (sum)" in f.message and r.verdict == "invalid"
    assert f.evidence["profile"]["library_share"] > 0.5, f.evidence  # type: ignore[index]


def test_the_strict_policy_refuses_the_same_candidate() -> None:
    r = ev("gpu_fused_gemm.py", "gpu_ref_gemm_relu.py", tolerance="strict")
    f = next(f for f in r.flags if f.id == "reference-ops")
    assert f.severity == "invalid" and "strict" in f.message and r.verdict == "invalid"


def test_a_pure_delegation_is_invalid() -> None:
    r = ev("gpu_delegates.py", "gpu_ref_gemm_relu.py")
    f = next(f for f in r.flags if f.id == "reference-ops")
    assert f.severity == "invalid" and "everything is delegated" in f.message and r.verdict == "invalid"


def test_an_l2_persistence_candidate_is_caught() -> None:
    r = ev("gpu_l2_persist.py", "gpu_ref_relu.py")
    assert r.correctness and r.correctness.correct
    f = next(f for f in r.flags if f.id == "l2-persistence")
    assert f.severity == "invalid" and int(f.evidence["persisting_bytes"]) > 0  # type: ignore[call-overload]
    assert r.verdict == "invalid"
    # the carve-out is gone for the next job on this GPU: an honest candidate is not flagged
    ok = ev("ok_softmax.py", "ref_softmax.py")
    assert "l2-persistence" not in {f.id for f in ok.flags}


def test_a_time_below_the_speed_of_light_is_refused() -> None:
    ctx = JobContext(Config(device="cuda"), Findings(), Originals.capture(torch, True), torch.device("cuda"), True)
    obs = SpeedOfLight()
    obs.register(ctx)

    class Ref(torch.nn.Module):
        def forward(self, x):  # type: ignore[no-untyped-def]
            return x * 2

    x = torch.randn(256 << 20, device="cuda")  # 1 GiB in, 1 GiB out: ~0.6 ms at 3.35 TB/s
    timings = {"candidate": {"median_us": 20.0}, "reference": {"median_us": 700.0}}
    obs.after_timing(Measured({"reference": Ref(), "candidate": Ref()}, [x], timings, {}, TimingRun(names=[])))
    (f,) = ctx.findings.flags
    assert f.id == "speed-of-light" and f.severity == "invalid" and float(f.evidence["floor_us"]) > 300


def test_the_side_stream_candidate_is_also_below_the_speed_of_light() -> None:
    r = ev("gpu_side_stream.py", "gpu_ref_softmax_big.py")
    assert {"side-stream", "speed-of-light"} <= {f.id for f in r.flags}, r.flags
