"""Distribution trials: correctness on transformed inputs within the reference's domain (sign, scale,
offset, layout), on the CPU."""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="the harness needs torch (its CPU build is enough)")

from kernelscope.harness.distribution import TRANSFORMS, check, transform_inputs  # noqa: E402
from kernelscope.harness.protocol import Config, Findings  # noqa: E402
from kernelscope.models.requests import EvalRequest  # noqa: E402
from kernelscope.tools.run import eval_candidate  # noqa: E402

CASES = Path(__file__).parent / "evalcases"


def evaluate(candidate: str, reference: str, **kw: object):  # type: ignore[no-untyped-def]
    args: dict = {"device": "cpu", "timing_budget_s": 0.05, "min_runs": 5, "max_runs": 50, "trials": 2,
                  "timeout_s": 120}
    args.update(kw)
    return eval_candidate(EvalRequest(reference_path=str(CASES / reference), candidate_path=str(CASES / candidate),
                                      **args))


def test_a_candidate_right_only_on_the_original_distribution_is_invalid() -> None:
    r = evaluate("relu_identity.py", "ref_relu_positive.py")
    assert r.correctness and r.correctness.correct  # right on get_inputs() (non-negative)
    f = next(f for f in r.flags if f.id == "distribution")
    assert f.severity == "invalid" and r.verdict == "invalid"
    assert f.evidence["transform"] == "sign flip (-x)" and "sign flip" in f.message
    assert any(n.startswith("distribution trials:") for n in r.notes)


def test_the_kernelbench_policy_lowers_it_to_review_and_says_so() -> None:
    r = evaluate("relu_identity.py", "ref_relu_positive.py", tolerance="kernelbench")
    f = next(f for f in r.flags if f.id == "distribution")
    assert f.severity == "review" and "kernelbench policy" in f.message
    assert r.verdict in ("faster", "slower", "inconclusive")


def test_an_honest_candidate_passes_every_transform() -> None:
    r = evaluate("ok_softmax.py", "ref_softmax.py")
    assert "distribution" not in {f.id for f in r.flags} and r.verdict != "invalid"
    note = next(n for n in r.notes if n.startswith("distribution trials:"))
    assert note.count(": ok") == len(TRANSFORMS)


def test_transforms_outside_the_reference_domain_are_skipped() -> None:
    class Log(torch.nn.Module):
        def forward(self, x):  # type: ignore[no-untyped-def]
            return torch.log(x)

    class Log2(torch.nn.Module):
        def forward(self, x):  # type: ignore[no-untyped-def]
            return torch.log2(x) * 0.6931471805599453

    findings = Findings()
    res = check(lambda seed: [torch.rand(32, 64, generator=torch.Generator().manual_seed(seed)) + 0.5],
                Log(), Log2(), Config(device="cpu", seed=3), findings, lambda: None)
    by = {r["transform"]: r for r in res}
    assert by["sign flip (-x)"]["outcome"] == "skipped" and "not finite" in by["sign flip (-x)"]["error"]
    assert by["scale by 1e3"]["outcome"] == "ok" and by["non-contiguous layout"]["outcome"] == "ok"
    assert not findings.flags


def test_the_layout_transform_keeps_values_and_shape_but_not_contiguity() -> None:
    x, i = torch.randn(4, 6), torch.arange(3)
    fn = dict(TRANSFORMS)["non-contiguous layout"]
    y, j = transform_inputs([x, i], fn)
    assert not y.is_contiguous() and y.shape == x.shape and torch.equal(y, x) and j is i
    (z,) = transform_inputs([x], dict(TRANSFORMS)["sign flip (-x)"])
    assert torch.equal(z, -x)


def test_a_candidate_that_raises_on_a_transform_fails_it() -> None:
    class Ref(torch.nn.Module):
        def forward(self, x):  # type: ignore[no-untyped-def]
            return x * 2

    class ContiguousOnly(torch.nn.Module):
        def forward(self, x):  # type: ignore[no-untyped-def]
            if not x.is_contiguous():
                raise RuntimeError("expected a contiguous input")
            return x * 2

    findings = Findings()
    res = check(lambda seed: [torch.randn(8, 8)], Ref(), ContiguousOnly(), Config(device="cpu"), findings,
                lambda: None)
    assert [r["outcome"] for r in res].count("failed") == 1
    assert findings.flags[0].evidence["transform"] == "non-contiguous layout"


def test_running_out_of_memory_for_the_copies_is_no_failure_of_the_candidate() -> None:
    class Ref(torch.nn.Module):
        def forward(self, x):  # type: ignore[no-untyped-def]
            return x * 2

    class Hungry(torch.nn.Module):
        def forward(self, x):  # type: ignore[no-untyped-def]
            if x[0, 0] < -1e2:  # the 1e3-scaled trial
                raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 12.00 GiB")
            return x * 2

    findings = Findings()
    res = check(lambda seed: [torch.full((4, 4), -1.0) + torch.rand(4, 4) * 0.1], Ref(), Hungry(),
                Config(device="cpu"), findings, lambda: None)
    by = {r["transform"]: r["outcome"] for r in res}
    assert by["scale by 1e3"] == "skipped" and not findings.flags
