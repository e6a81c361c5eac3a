"""Distribution trials: correctness on transformed inputs within the reference's domain (sign, scale,
offset, layout), on the CPU."""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="the harness needs torch (its CPU build is enough)")

from kernelscope.harness.correctness import compare  # noqa: E402
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
    # a layout-only failure (a kernel reading raw pointers): for review, never invalid
    (f,) = findings.flags
    assert f.id == "non-contiguous-inputs" and f.severity == "review" and ".contiguous()" in f.message
    assert f.evidence["transform"] == "non-contiguous layout"


class RowSum(torch.nn.Module):
    def forward(self, x):  # type: ignore[no-untyped-def]
        return torch.sum(x, dim=1)


class BlockedRowSum(torch.nn.Module):
    """An honest row sum in another order (partial sums of 64 columns, then their sum): fp32 rounding
    differs from the reference's by a few ulps of the output."""

    def forward(self, x):  # type: ignore[no-untyped-def]
        return x.reshape(x.shape[0], -1, 64).sum(dim=2).sum(dim=1)


def row_sum_inputs(seed: int) -> list:
    return [torch.randn(4096, 2048, generator=torch.Generator().manual_seed(seed))]


def test_each_transform_compares_with_its_own_tolerance() -> None:
    """The 1e3-scaled row sum: outputs 1e3 times larger, so is the atol; the unscaled one refuses it."""
    findings = Findings()
    res = check(row_sum_inputs, RowSum(), BlockedRowSum(), Config(device="cpu", seed=1), findings, lambda: None)
    by = {r["transform"]: r for r in res}
    assert all(r["outcome"] == "ok" for r in res), res
    assert not findings.flags
    base = by["sign flip (-x)"]["atol"][0]
    assert base == pytest.approx(1e-4)  # the default policy's fp32 atol: the sign keeps the magnitude
    assert by["scale by 1e3"]["atol"][0] == pytest.approx(1e3 * base, rel=1e-6)
    assert by["scale by 1e-3"]["atol"][0] == pytest.approx(1e-3 * base, rel=1e-6)
    # the same trial under the policy's unscaled atol fails: what refused the honest kernel on the GPU
    x = row_sum_inputs(1)[0] * 1e3
    ok, _ = compare([RowSum()(x)], [BlockedRowSum()(x)], 0, Config(device="cpu"), Findings())
    assert not ok


def test_a_transform_that_makes_the_reference_ill_conditioned_is_skipped_with_the_reason() -> None:
    class Cancels(torch.nn.Module):  # (x + 1000) - 1000: exact in float64, not in float32 for small x
        def forward(self, x):  # type: ignore[no-untyped-def]
            return (x + 1000.0) - 1000.0

    class Plain(torch.nn.Module):
        def forward(self, x):  # type: ignore[no-untyped-def]
            return x.clone()

    findings = Findings()
    res = check(lambda seed: [torch.randn(64, 64, generator=torch.Generator().manual_seed(seed))], Cancels(),
                Plain(), Config(device="cpu"), findings, lambda: None)
    by = {r["transform"]: r for r in res}
    assert by["scale by 1e-3"]["outcome"] == "skipped"
    assert "loses precision against float64" in by["scale by 1e-3"]["error"]
    assert by["scale by 1e3"]["outcome"] == "ok"  # well-conditioned there: a real trial
    assert not findings.flags
    assert "loses precision" in next(n for n in findings.notes if n.startswith("distribution trials:"))


def test_a_value_failure_stays_invalid_beside_a_layout_failure() -> None:
    class Ref(torch.nn.Module):
        def forward(self, x):  # type: ignore[no-untyped-def]
            return torch.relu(x)

    class PositiveOnlyContiguousOnly(torch.nn.Module):
        def forward(self, x):  # type: ignore[no-untyped-def]
            if not x.is_contiguous():
                raise RuntimeError("expected a contiguous input")
            return x.clone()

    findings = Findings()
    check(lambda seed: [torch.rand(8, 8) + 0.1], Ref(), PositiveOnlyContiguousOnly(), Config(device="cpu"),
          findings, lambda: None)
    by = {f.id: f for f in findings.flags}
    assert by["distribution"].severity == "invalid" and by["distribution"].evidence["transform"] == "sign flip (-x)"
    assert by["non-contiguous-inputs"].severity == "review"


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


def test_what_an_out_of_memory_trial_held_is_freed_before_the_next_inputs() -> None:
    """Nothing a trial that ran out of memory held (here the candidate's own work buffer, alive in its frame when
    the allocation after it failed) is alive when the next inputs are made: the trials collect before they
    allocate again (on KernelBench's level-1 Average_Pooling_2D, 64 GiB were still allocated when the next 16 GiB
    input was asked for)."""
    import weakref

    from kernelscope.harness.guard import blame

    held: list[weakref.ref] = []

    class Ref(torch.nn.Module):
        def forward(self, x):  # type: ignore[no-untyped-def]
            return x * 2

    class Hungry(torch.nn.Module):
        def forward(self, x):  # type: ignore[no-untyped-def]
            work = torch.empty(1 << 16)  # alive in this frame when the allocation after it fails
            held.append(weakref.ref(work))
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 16.00 GiB")

    def call(where: str):  # type: ignore[no-untyped-def]
        return blame("candidate", where)

    made: list[bool] = []

    def make(seed: int) -> list:
        made.append(all(r() is None for r in held))  # nothing a failed trial held is alive any more
        return [torch.rand(4, 4) + 0.5]

    res = check(make, Ref(), Hungry(), Config(device="cpu"), Findings(), lambda: None, call=call)
    assert res and all(r["outcome"] == "skipped" for r in res) and len(held) == len(res)
    assert all(made), made


def test_inputs_are_made_again_once_after_running_out_of_memory() -> None:
    """get_inputs() that runs out of memory once (memory an exception's frames held) is asked again after a
    collection; out of memory twice, the reference's error stands."""
    from kernelscope.harness.correctness import Inputs
    from kernelscope.harness.guard import Attributed

    class Ref:
        def __init__(self, fails: int) -> None:
            self.fails, self.calls = fails, 0

        def get_inputs(self) -> list:
            self.calls += 1
            if self.calls <= self.fails:
                raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 16.00 GiB")
            return [torch.randn(8)]

    inputs = Inputs("cpu", Findings(), lambda: None)
    once = Ref(1)
    assert len(inputs.make(once, 0)) == 1 and once.calls == 2
    with pytest.raises(Attributed) as e:
        inputs.make(Ref(2), 0)
    assert isinstance(e.value.cause, torch.cuda.OutOfMemoryError)
