"""The delegation policy on the CPU: the candidate's own kernels by name (the symbols nvcc gives them,
mangled and demangled, recorded in tests/fixtures/delegation), the attribution of profiled launches, and
the decision, over torch.profiler recordings taken here on the CPU (CPU ops standing in for kernels) and
over a GPU recording where one was made (tests/fixtures/delegation/record_gpu.py). The GPU side runs in
test_cheats_gpu.py."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from kernelscope.harness.kernels import OwnKernels, base_name, candidate_kernels, defined_kernels

torch = pytest.importorskip("torch", reason="the harness needs torch (its CPU build is enough)")

from kernelscope.harness import delegation  # noqa: E402
from kernelscope.harness.delegation import Launch, attribute, audit, decide, launches_from_events  # noqa: E402
from kernelscope.harness.protocol import Findings  # noqa: E402
from kernelscope.models.requests import EvalRequest  # noqa: E402
from kernelscope.tools.run import eval_candidate  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).parent / "fixtures" / "delegation"
CASES = Path(__file__).parent / "evalcases"
GEMM_REF = ["addmm", "t", "relu", "mul"]  # a level-2 reference: Linear, ReLU, scale


def recorded_names() -> list[tuple[str, str]]:
    lines = (FIXTURES / "names.txt").read_text().splitlines()
    return [tuple(line.split("\t")) for line in lines if line]  # type: ignore[misc]


# ------------------------------------------------------------------------------ own kernels, by name
def test_every_kernel_nvcc_builds_is_matched_mangled_and_demangled() -> None:
    own = defined_kernels((FIXTURES / "kernels.cu").read_text())
    assert own.cuda == {"bias_relu_half", "row_sum_kernel", "fused_epilogue", "scale_kernel", "hidden_kernel"}
    names = recorded_names()
    assert len(names) == 5
    for mangled, demangled in names:
        assert own.matches(mangled) and own.matches(demangled), (mangled, demangled)
    assert base_name("void fused_epilogue<float, 256>(float const*, float*, long)") == "fused_epilogue"
    # PyTorch's and cuBLAS's kernels are not the candidate's
    for theirs in ("void at::native::reduce_kernel<512, 1>(at::native::ReduceOp<float>)",
                   "sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x32_execute_kernel__5x_cublas",
                   "_ZN2at6native29vectorized_elementwise_kernelILi4EEEviT_"):
        assert not own.matches(theirs), theirs


def test_kernels_are_found_where_candidates_define_them() -> None:
    assert candidate_kernels(str(CASES / "gpu_fused_gemm_inline.py")).cuda == {"fused_bias_relu_scale"}  # load_inline
    assert candidate_kernels(str(CASES / "gpu_fused_gemm.py")).cuda == {"bias_relu_half"}  # CudaKernel
    assert candidate_kernels(str(ROOT / "examples/problems/row_sum/better.py")).cuda == {"row_sum_block"}
    # the CUTLASS example's kernels live in the .cu file beside it (launch bounds with two arguments)
    cutlass = candidate_kernels(str(ROOT / "examples/cutlass/hopper_gemm.py"))
    assert {"hopper_gemm_f16", "hopper_gemm_bf16"} <= cutlass.cuda
    # a CUDA string embedded by repr (as the CUTLASS GPU test writes its candidate)
    src = (ROOT / "examples/cutlass/hopper_gemm.cu").read_text()
    assert "hopper_gemm_f16" in defined_kernels(f"SRC = {src!r}").cuda
    triton = defined_kernels("import triton\n@triton.jit\ndef add_kernel(x_ptr, y_ptr, n, B: tl.constexpr):\n  pass\n")
    assert triton.triton == {"add_kernel"} and triton.matches("add_kernel") and triton.matches("add_kernel_0d1d2de")
    assert not triton.matches("add_kernel_fused") and not OwnKernels()
    # cupy's RawKernel and RawModule take CUDA source the same way
    raw = defined_kernels('k = cp.RawKernel(r"""extern "C" __global__\nvoid my_scale(float* x) {}""", "my_scale")')
    assert raw.cuda == {"my_scale"}
    assert defined_kernels("// __global__ is how CUDA marks a kernel; see the guide.\n").cuda == frozenset()


# ------------------------------------------------------------------------------ attribution
def test_a_kernel_named_as_the_candidates_is_its_own_whichever_op_it_was_linked_to() -> None:
    """The H100 failure: the fused candidate's epilogue counted under the GEMM's op left it no own share."""
    (_, demangled), own = recorded_names()[0], OwnKernels(frozenset({"fused_epilogue"}))
    gemm = "sm90_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize128x128x32_execute_kernel__5x_cublas"
    launches = [Launch(gemm, 900.0, "matmul", frozenset({"mm"})), Launch(demangled, 25.0, "matmul", frozenset({"mm"}))]
    s = attribute(launches, own, GEMM_REF)
    assert s.library_us == {"mm": 900.0} and s.own_us == 25.0 and s.kernels["own"] == ["fused_epilogue"]
    flag, ev = decide(s, "default")
    assert flag[:2] == ("library-ops", "review") and ev["ops"] == ["mm"]
    assert ev["own_share"] == pytest.approx(25 / 925, abs=1e-4)  # a cheap epilogue beside a large GEMM is enough
    # the same profile without the name: its own work is invisible, and it reads as everything delegated
    assert decide(attribute(launches, OwnKernels(), GEMM_REF), "default")[0][1] == "invalid"


def profile_cpu(fn: Any, *args: Any) -> list[Launch]:
    from torch.profiler import ProfilerActivity, profile, record_function

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(3):
            with record_function("win"):
                fn(*args)
    return launches_from_events(list(prof.events()), cuda=False, window="win")


def fused(a: Any, b: Any) -> Any:
    """torch.mm kept, the epilogue its own "kernel" (numpy, outside any aten op, in a range named as a
    kernel): a fused partial rewrite on the CPU."""
    from torch.profiler import record_function

    n = torch.mm(a, b).numpy()
    with record_function("fused_epilogue"):
        for _ in range(20):
            n = n * 0.5 + 1.0
    return torch.from_numpy(n)


EPILOGUE = OwnKernels(frozenset({"fused_epilogue"}))


def test_launches_of_a_cpu_recording_are_attributed_to_their_top_level_op() -> None:
    a = torch.randn(256, 256)
    launches = profile_cpu(lambda x: torch.relu(torch.nn.functional.linear(x, a)) * 0.5, a)
    ops = {k.op for k in launches}
    assert {"linear", "relu", "mul"} <= ops  # top-level ops, addmm under linear
    assert any(k.op == "linear" and k.by == "mm" and k.name == "mm" for k in launches)
    s = attribute(launches, EPILOGUE, GEMM_REF, source="cpu")
    assert {"mm", "relu", "mul"} <= set(s.library_us) and s.own_work_us == 0  # mm under linear: the GEMM
    flag, ev = decide(s, "default")  # the reference's own ops and nothing else: everything delegated
    assert flag[1] == "invalid" and "everything is delegated" in flag[2]

    s = attribute(profile_cpu(fused, a, a), EPILOGUE, ["mm", "mul", "add"], source="cpu")
    assert s.library_us.get("mm", 0) > 0 and s.own_us > 0 and s.kernels["own"] == ["fused_epilogue"]
    flag, ev = decide(s, "default")
    assert flag[:2] == ("library-ops", "review") and 0 < ev["library_share"] < 1 and ev["source"] == "cpu"


# ------------------------------------------------------------------------------ the decision in the harness
def cpu_profile(fn: Any, inputs: list[Any], **kw: Any) -> list[Launch]:
    """The real profiler, on the CPU, where the harness would profile the GPU."""
    return delegation.profile_forward(fn, inputs, cuda=False, sync=lambda: None, calls=kw.get("calls", 3))


def run_audit(fn: Any, inputs: list[Any], ref: Any, policy: str = "default", cuda: bool = True,
              profile: Any = cpu_profile) -> tuple[Findings, dict[str, Any] | None]:
    from kernelscope.harness.cheats import audit_ops

    findings = Findings()
    ref_ops, cand_ops = audit_ops(ref, inputs, lambda: None), audit_ops(fn, inputs, lambda: None)
    ev = audit(fn, inputs, ref_ops, cand_ops, findings, policy=policy, cuda=cuda, sync=lambda: None,
               profile=profile, own=EPILOGUE)
    return findings, ev


def test_the_single_main_operator_handed_back_is_invalid_whatever_the_profile_says() -> None:
    """The torch.sum cheat: invalid from the op audit, on the CPU path and on the GPU path, even where the
    profile cannot attribute the sum (its time reads as the candidate's own)."""
    x = [torch.randn(64, 512)]
    ref = lambda t: torch.sum(t, dim=1)  # noqa: E731
    cheat = lambda t: torch.sum(t, dim=1)  # noqa: E731
    unattributed = lambda fn, inputs, **kw: [Launch(k.name, k.us) for k in cpu_profile(fn, inputs)]  # noqa: E731

    def broken(*a: Any, **k: Any) -> list[Launch]:
        raise RuntimeError("CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED")

    for cuda, profile in ((False, cpu_profile), (True, cpu_profile), (True, unattributed), (True, broken)):
        findings, _ = run_audit(cheat, x, ref, cuda=cuda, profile=profile)
        (f,) = [f for f in findings.flags if f.id == "reference-ops"]
        assert f.severity == "invalid" and "single main operator (sum)" in f.message, (cuda, f.message)
        assert f.evidence["rule"] == "single"


def test_a_fused_rewrite_keeping_the_library_gemm_is_valid_on_the_gpu_path_only() -> None:
    a = torch.randn(128, 128)
    ref = lambda x: torch.relu(torch.nn.functional.linear(x, a)) * 0.5  # noqa: E731
    fused_candidate = lambda x: fused(x, a.t())  # noqa: E731
    findings, ev = run_audit(fused_candidate, [a], ref)
    (f,) = findings.flags
    assert f.id == "library-ops" and f.severity == "review" and ev is not None and ev["ops"] == ["mm"]
    findings, _ = run_audit(fused_candidate, [a], ref, cuda=False)  # no GPU shares: the op audit decides
    (f,) = findings.flags
    assert f.severity == "invalid" and "only a GPU profile shows" in f.message and "CPU run" in f.message
    findings, _ = run_audit(fused_candidate, [a], ref, policy="strict")
    assert findings.flags[0].severity == "invalid" and "strict" in findings.flags[0].message
    # with a bias the reference's GEMM is addmm and the candidate's mm: strict still sees the GEMM kept
    bias = torch.randn(128)
    ref_bias = lambda x: torch.relu(torch.nn.functional.linear(x, a, bias)) * 0.5  # noqa: E731
    findings, _ = run_audit(fused_candidate, [a], ref_bias, policy="strict")
    (f,) = [f for f in findings.flags if f.id == "reference-ops"]
    assert f.severity == "invalid" and "strict" in f.message and f.evidence["ops"] == ["mm"], f.evidence
    findings, _ = run_audit(ref, [a], ref)  # the reference itself: everything delegated
    f = next(f for f in findings.flags if f.id == "reference-ops")
    assert f.severity == "invalid" and "everything is delegated" in f.message


def test_a_non_library_main_op_handed_back_is_invalid() -> None:
    x = [torch.randn(32, 64)]
    findings, _ = run_audit(lambda t: torch.softmax(t, dim=1) * 2.0, x, lambda t: torch.softmax(t, dim=1) * 2.0)
    f = findings.flags[0]
    assert f.severity == "invalid" and f.evidence["rule"] == "not-library" and "_softmax" in f.message


def test_the_torch_sum_cheat_is_invalid_end_to_end_on_the_cpu() -> None:
    r = eval_candidate(EvalRequest(reference_path=str(CASES / "ref_row_sum.py"),
                                   candidate_path=str(CASES / "sum_cheat.py"), device="cpu", timing_budget_s=0.05,
                                   min_runs=5, max_runs=50, trials=2, timeout_s=120))
    f = next(f for f in r.flags if f.id == "reference-ops")
    assert r.verdict == "invalid" and f.severity == "invalid" and "single main operator" in f.message


# ------------------------------------------------------------------------------ a recording from a GPU
@pytest.mark.parametrize("case", ["fused_gemm_inline", "sum_cheat"])
def test_a_gpu_recording(case: str) -> None:
    path = FIXTURES / f"gpu_{case}.json"
    if not path.exists():
        pytest.skip(f"no GPU recording {path.name} yet: run tests/fixtures/delegation/record_gpu.py on a GPU")
    rec = json.loads(path.read_text())
    launches = [Launch.from_json(d) for d in rec["launches"]]
    s = attribute(launches, OwnKernels(frozenset(rec["own_kernels"])), rec["reference_ops"])
    if case == "sum_cheat":
        assert s.library_us.get("sum", 0) > 0 and s.own_us == 0
    else:
        flag, ev = decide(s, "default")
        assert flag[:2] == ("library-ops", "review") and s.own_us > 0 and ev["ops"] == ["mm"], (flag, ev)


def test_a_profile_with_no_gpu_time_leaves_the_decision_to_the_op_audit() -> None:
    """The GPU reading of a recording without device events (no CUPTI) has no launches; the candidate that
    keeps the library GEMM is then refused with the reason, and a note says why."""
    a = torch.randn(64, 64)
    no_kernels = lambda fn, inputs, **kw: launches_from_events(  # noqa: E731
        _recorded(fn, inputs), cuda=True, window="ks::candidate_forward")
    assert no_kernels(lambda x: torch.mm(x, a), [a]) == []
    ref = lambda x: torch.relu(torch.nn.functional.linear(x, a)) * 0.5  # noqa: E731
    findings, ev = run_audit(lambda x: fused(x, a.t()), [a], ref, profile=no_kernels)
    (f,) = findings.flags
    assert ev is None and f.severity == "invalid" and "recorded no GPU time" in f.message
    assert any("recorded no GPU time" in n for n in findings.notes)


def _recorded(fn: Any, inputs: list[Any]) -> list[Any]:
    from torch.profiler import ProfilerActivity, profile, record_function

    with profile(activities=[ProfilerActivity.CPU]) as prof, record_function("ks::candidate_forward"):
        fn(*inputs)
    return list(prof.events())


def test_a_forward_of_many_ops_is_profiled_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """The profiler's event tree grows with every op: past MANY_OPS aten ops a forward (stated here as 1), the
    delegation profile takes one forward, not three, and says so; the decision is the same."""
    a = torch.randn(64, 64)
    ref = lambda x: torch.relu(torch.nn.functional.linear(x, a)) * 0.5  # noqa: E731
    fused_candidate = lambda x: fused(x, a.t())  # noqa: E731
    seen: list[int] = []

    def counting(fn: Any, inputs: list[Any], **kw: Any) -> list[Launch]:
        seen.append(kw["calls"])
        return cpu_profile(fn, inputs, **kw)

    findings, _ = run_audit(fused_candidate, [a], ref, profile=counting)
    assert seen == [3] and not any("one forward profiled" in n for n in findings.notes)
    monkeypatch.setattr(delegation, "MANY_OPS", 1)
    again, _ = run_audit(fused_candidate, [a], ref, profile=counting)
    assert seen == [3, 1] and any("one forward profiled, not three" in n for n in again.notes), again.notes
    assert [(f.id, f.severity) for f in again.flags] == [(f.id, f.severity) for f in findings.flags]


def test_a_top_op_with_many_launches_under_it_is_walked_once() -> None:
    """An RNN's top op (aten::gru) has thousands of per-step ops and kernels under it: the aten ops under it
    are collected once per top op, not once per launch (on the H100, KernelBench's level-3 GRU spent minutes
    in that walk). Events as torch.profiler gives them: a top op, 300 steps under it, a kernel each."""
    walked = 0

    class Event:
        def __init__(self, name: str, parent: Any = None) -> None:
            self.name, self.cpu_parent, self._children, self.kernels = name, parent, [], []
            self.device_type, self.is_async = "DeviceType.CPU", False
            if parent is not None:
                parent._children.append(self)

        @property
        def cpu_children(self) -> list[Any]:
            nonlocal walked
            walked += 1
            return self._children

    top = Event("aten::gru")
    steps = [Event("aten::addmm", top) for _ in range(300)]
    for s in steps:
        s.kernels = [SimpleNamespace(name="gemm_step", duration=2.0)]
    launches = launches_from_events([top, *steps], cuda=True, window="w")
    assert len(launches) == 300 and {(x.op, x.under) for x in launches} == {("gru", frozenset({"addmm"}))}
    assert walked <= 2 * (len(steps) + 1), walked  # one walk of the subtree, whatever the launches under it
