"""The delegation policy: how much of the candidate's GPU time runs in kernels launched by the
reference's own PyTorch operators (library work handed back) versus the candidate's own kernels
(NVRTC/CuPy launches, load_inline extensions, Triton), and whether that is engineering or a cheat.

- everything delegated (no own kernel doing work): ``invalid``;
- a problem whose single main operator is handed back (level-1 style): ``invalid``;
- a reference main op other than a GEMM/convolution/attention handed back: ``invalid``;
- a partial rewrite that keeps library GEMMs or convolutions and does the rest in its own kernels:
  valid, reported with its library share and which ops (a ``library-ops`` review flag);
- the ``strict`` policy forbids any delegation of the reference's compute ops.

``decide`` is a pure function over a ``Summary`` (ops -> time, own time); ``summary_from_profile``
builds one from a torch.profiler recording of one forward: kernel time on the GPU, CPU time standing in
for kernels on the CPU. On CPU-only runs the harness keeps the op audit (``cheats.reference_op_findings``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from kernelscope.harness.cheats import NON_COMPUTE, TIERS, reference_op_findings
from kernelscope.harness.protocol import Findings

#: the reference ops a partial rewrite may keep in the library (cuBLAS/cuDNN/attention through torch)
LIBRARY_OPS = TIERS[0]
#: own kernels below this share of the candidate's time are no own work ("everything delegated")
OWN_MIN_SHARE = 0.01


@dataclass(frozen=True)
class OpTime:
    """One top-level aten op of the candidate's forward: its name, the names under it, its time (µs)."""

    name: str
    us: float
    names: frozenset[str] = frozenset()


@dataclass
class Summary:
    """The candidate's forward, split: time under the reference's compute ops (by op), time under other
    torch ops (glue), and time in its own kernels; ``source`` is "gpu" (kernel time) or "cpu"."""

    library_us: dict[str, float] = field(default_factory=dict)
    other_us: float = 0.0
    own_us: float = 0.0
    source: str = "gpu"

    @property
    def total_us(self) -> float:
        return sum(self.library_us.values()) + self.other_us + self.own_us

    def share(self, us: float) -> float:
        return us / self.total_us if self.total_us > 0 else 0.0


@dataclass
class Decision:
    """What the policy says: a flag (id, severity, message, evidence) or none, and the numbers."""

    flag: tuple[str, str, str] | None
    evidence: dict[str, Any]


def compute_ops(ops: Iterable[str]) -> set[str]:
    return {o for o in ops if o not in NON_COMPUTE}


def summarize(tops: list[OpTime], total_us: float, ref_ops: Iterable[str], source: str = "gpu") -> Summary:
    """Attribute each top-level op's time to the reference op found under it (a library op), or to glue;
    what no aten op accounts for is the candidate's own kernels."""
    ref = compute_ops(ref_ops)
    # a GEMM is a GEMM: mm for the reference's addmm (or a convolution for its conv2d) is library work too
    library = ref | (LIBRARY_OPS if ref & LIBRARY_OPS else set())
    s = Summary(source=source)
    attributed = 0.0
    for op in tops:
        attributed += op.us
        hit = sorted((op.names | {op.name}) & library, key=lambda o: (o not in ref, o not in LIBRARY_OPS, o))
        if hit:
            s.library_us[hit[0]] = s.library_us.get(hit[0], 0.0) + op.us
        else:
            s.other_us += op.us
    s.own_us = max(total_us - attributed, 0.0)
    return s


def _main_ops(ref: set[str]) -> set[str]:
    return next((tier & ref for tier in TIERS if tier & ref), ref)


def decide(summary: Summary, ref_ops: Iterable[str], policy: str) -> Decision:
    """The delegation policy over a summary of the candidate's forward (see the module's docstring)."""
    ref = compute_ops(ref_ops)
    delegated = sorted(o for o, us in summary.library_us.items() if us > 0 or summary.total_us == 0)
    lib_us = sum(summary.library_us.values())
    ev: dict[str, Any] = {
        "source": summary.source, "ops": delegated,
        "library_us": {o: round(us, 3) for o, us in summary.library_us.items()},
        "library_share": round(summary.share(lib_us), 4), "own_share": round(summary.share(summary.own_us), 4),
        "other_share": round(summary.share(summary.other_us), 4), "policy": policy}
    if not delegated:
        return Decision(None, ev)
    ops = ", ".join(delegated)
    main = _main_ops(ref)
    if summary.share(summary.own_us) < OWN_MIN_SHARE:
        return Decision(("reference-ops", "invalid",
                         f"everything is delegated: {100 * ev['library_share']:.0f}% of the candidate's time runs in "
                         f"the reference's own PyTorch ops ({ops}) and no own kernel does work "
                         f"(own share {100 * ev['own_share']:.1f}%)."), ev)
    if policy == "strict":
        return Decision(("reference-ops", "invalid",
                         f"the strict policy forbids delegation: the candidate calls the reference's ops ({ops}), "
                         f"{100 * ev['library_share']:.0f}% of its time."), ev)
    if len(ref) == 1:  # what it delegates is that op, or its library family
        return Decision(("reference-ops", "invalid",
                         f"the problem's single main operator ({ops}) is handed back to PyTorch "
                         f"({100 * ev['library_share']:.0f}% of the candidate's time)."), ev)
    not_library = sorted(set(delegated) & main - LIBRARY_OPS)
    if not_library:
        return Decision(("reference-ops", "invalid",
                         f"the candidate calls the reference's main PyTorch ops ({', '.join(not_library)}) instead "
                         "of its own kernel; only library GEMMs, convolutions and attention may be kept."), ev)
    return Decision(("library-ops", "review",
                     f"partial rewrite: {100 * ev['library_share']:.0f}% of the candidate's time in library ops "
                     f"kept from the reference ({ops}), {100 * ev['own_share']:.0f}% in its own kernels."), ev)


# ------------------------------------------------------------------------------------ from a profile
def _aten(name: str) -> str | None:
    return name[6:].split(".")[0] if name.startswith("aten::") else None


def _under(event: Any) -> frozenset[str]:
    names: set[str] = set()
    stack = list(event.cpu_children)
    while stack:
        e = stack.pop()
        if (n := _aten(e.name)) is not None:
            names.add(n)
        stack.extend(e.cpu_children)
    return frozenset(names)


def _top_level(events: Iterable[Any]) -> list[Any]:
    """aten ops with no aten op above them."""
    tops = []
    for e in events:
        if _aten(e.name) is None or getattr(e, "is_async", False):
            continue
        p = e.cpu_parent
        while p is not None and _aten(p.name) is None:
            p = p.cpu_parent
        if p is None:
            tops.append(e)
    return tops


def summary_from_profile(events: list[Any], ref_ops: Iterable[str], *, cuda: bool, window: str) -> Summary:
    """A summary of a torch.profiler recording (``prof.events()``) of the candidate's forward inside a
    ``record_function(window)``. On the GPU: kernel time under each top-level aten op, against all the
    kernel time recorded; on the CPU, CPU time under each op against the window's time (CPU ops stand in
    for kernels: what no aten op accounts for is the candidate's own C++/Python work)."""
    cpu_events = [e for e in events if str(getattr(e, "device_type", "")).endswith("CPU")]
    tops = _top_level(cpu_events)
    if cuda:
        cpu_names = {e.name for e in cpu_events}  # device-side copies of CPU ranges (gpu_user_annotation)
        total = sum(e.time_range.elapsed_us() for e in events
                    if not str(getattr(e, "device_type", "")).endswith("CPU") and e.name not in cpu_names)
        times = [OpTime(_aten(e.name) or e.name, float(e.device_time_total), _under(e)) for e in tops]
    else:
        win = [e for e in cpu_events if e.name == window]
        total = float(sum(e.cpu_time_total for e in win))
        times = [OpTime(_aten(e.name) or e.name, float(e.cpu_time_total), _under(e)) for e in tops]
    return summarize(times, float(total), ref_ops, source="gpu" if cuda else "cpu")


def profile_forward(fn: Any, inputs: list[Any], ref_ops: Iterable[str], *, cuda: bool, sync: Any,
                    calls: int = 3) -> Summary:
    """Profile ``calls`` forwards of ``fn`` (after one outside the profile) and summarise them."""
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function

    window = "ks::candidate_forward"
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with torch.no_grad():
        fn(*inputs)
        sync()
        with profile(activities=acts) as prof:
            for _ in range(calls):
                with record_function(window):
                    fn(*inputs)
            sync()
    return summary_from_profile(list(prof.events()), ref_ops, cuda=cuda, window=window)


def audit(fn: Any, inputs: list[Any], ref_ops: list[str], cand_ops: list[str], findings: Findings, *,
          policy: str, cuda: bool, sync: Any) -> dict[str, Any] | None:
    """The delegation check of one job: on a GPU the policy over the profiled forward (its evidence
    returned), on the CPU (or when the profiler fails) the op audit over the dispatched ops."""
    if cuda:
        try:
            summary = profile_forward(fn, inputs, ref_ops, cuda=True, sync=sync)
        except Exception as e:  # a profiler already running (nsys, ncu), or none in this build
            findings.notes.append(f"delegation: profiling the candidate failed ({type(e).__name__}: {e}); "
                                  "the op audit decides instead")
        else:
            if summary.total_us <= 0:  # no kernel recorded (no CUPTI here): nothing to weigh
                findings.notes.append("delegation: the profile recorded no GPU time; the op audit decides instead")
                reference_op_findings(ref_ops, cand_ops, findings, strict=policy == "strict",
                                      note=" (op audit: no GPU time recorded)")
                return None
            d = decide(summary, ref_ops, policy)
            if d.flag is not None:
                findings.flag_once(d.flag[0], d.flag[1], d.flag[2], d.evidence)
            elif set(cand_ops) & compute_ops(ref_ops):
                reference_op_findings(ref_ops, cand_ops, findings, glue_only=True)
            return d.evidence
    reference_op_findings(ref_ops, cand_ops, findings, strict=policy == "strict",
                          note=" (op audit: " + ("CPU run, no GPU time shares" if not cuda else "profiler failed")
                          + "; partial rewrites are judged on the GPU)")
    return None
