"""The delegation policy: whether the candidate's speed is its own work or the reference's PyTorch
operators handed back, and how much of its GPU time is which.

The op audit (``cheats.audit_ops``: the aten ops one forward dispatches) decides on every device:

- ``strict``: any compute op of the reference called by the candidate is ``invalid``;
- a problem whose single compute operator is handed back (level-1 style) is ``invalid``;
- a reference main op other than a GEMM, convolution or attention handed back is ``invalid``.

What remains is a partial rewrite that keeps the reference's library ops (cuBLAS/cuDNN through torch)
for a multi-op problem. On a GPU its forward is profiled and each kernel attributed (``attribute``): the
candidate's own when its name is a kernel its sources define (``kernels.OwnKernels``), else to the
top-level aten op that launched it (library when that op or one under it is a library op of the
reference, glue otherwise), else unattributed (launched outside any aten op: CUTLASS templates, ctypes).
Own work present (its own kernels, or unattributed ones while the library's kernels were seen under their
op) is a valid partial rewrite, reported with its library share and ops (a ``library-ops`` review flag);
none is ``invalid`` ("everything delegated"). On the CPU, or where the profile holds no GPU time, the op
audit's main-op rule decides (partial rewrites are judged on the GPU).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Any

from kernelscope.harness.cheats import NON_COMPUTE, TIERS, reference_op_findings
from kernelscope.harness.kernels import OwnKernels, base_name
from kernelscope.harness.protocol import Findings

#: the reference ops a partial rewrite may keep in the library (cuBLAS/cuDNN/attention through torch)
LIBRARY_OPS = TIERS[0]
#: front ends that dispatch to a library op under them (named by that op where it is seen)
FRONT_ENDS = {"matmul", "linear", "einsum", "tensordot", "conv1d", "conv2d", "conv3d", "conv_transpose2d",
              "scaled_dot_product_attention", "convolution", "_convolution"}
#: own kernels below this share of the candidate's non-library time are no own work
OWN_MIN_SHARE = 0.01
#: a forward that dispatches more aten ops than this is profiled once, not three times: the profiler builds
#: an event tree over every op and kernel (KernelBench's level-3 GRU: 43K aten ops a forward on the CPU,
#: 135K events, 8 s to build the tree of one forward)
MANY_OPS = 2000


@dataclass(frozen=True)
class Launch:
    """One kernel (or memcpy/memset) of the candidate's profiled forward: its name, its time (µs), the
    top-level aten op that launched it (None: launched outside any aten op) and the aten ops under that."""

    name: str
    us: float
    op: str | None = None
    under: frozenset[str] = frozenset()
    by: str | None = None  # the innermost aten op around the launch

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "us": self.us, "op": self.op, "under": sorted(self.under), "by": self.by}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Launch:
        return cls(str(d["name"]), float(d["us"]), d.get("op"), frozenset(d.get("under", ())), d.get("by"))


@dataclass
class Summary:
    """The candidate's forward by where its GPU time went: library ops kept from the reference (by op),
    glue (other aten ops), its own named kernels, and unattributed kernels."""

    library_us: dict[str, float] = field(default_factory=dict)
    other_us: float = 0.0
    own_us: float = 0.0
    unattributed_us: float = 0.0
    kernels: dict[str, list[str]] = field(default_factory=dict)  # category -> kernel base names (a few)
    source: str = "gpu"

    @property
    def total_us(self) -> float:
        return sum(self.library_us.values()) + self.other_us + self.own_us + self.unattributed_us

    @property
    def own_work_us(self) -> float:
        """Own kernels, with the unattributed ones where the attribution visibly works (the library's
        kernels were seen under their op); else only the named ones."""
        lib = sum(self.library_us.values())
        return self.own_us + (self.unattributed_us if lib > 0 else 0.0)

    def share(self, us: float) -> float:
        return us / self.total_us if self.total_us > 0 else 0.0


def compute_ops(ops: Iterable[str]) -> set[str]:
    return {o for o in ops if o not in NON_COMPUTE}


def library_set(ref_ops: Iterable[str]) -> set[str]:
    """The ops counted as the reference's library work: its compute ops, and every GEMM/convolution op
    where it has one (a GEMM is a GEMM: mm for the reference's addmm)."""
    ref = compute_ops(ref_ops)
    return ref | (LIBRARY_OPS if ref & LIBRARY_OPS else set())


def attribute(launches: Iterable[Launch], own: OwnKernels, ref_ops: Iterable[str], source: str = "gpu") -> Summary:
    """Each launch to its place (see the module's docstring), in this order: the candidate's own by name,
    the library op or glue that launched it, unattributed."""
    ref = compute_ops(ref_ops)
    library = library_set(ref_ops)
    s = Summary(source=source)
    for k in launches:
        if own and own.matches(k.name):
            s.own_us += k.us
            cat = "own"
        elif k.op is None:
            s.unattributed_us += k.us
            cat = "unattributed"
        elif hit := sorted((k.under | {k.op}) & library,
                           key=lambda o: (o in FRONT_ENDS, o != k.by, o not in ref, o not in LIBRARY_OPS, o)):
            s.library_us[hit[0]] = s.library_us.get(hit[0], 0.0) + k.us
            cat = "library"
        else:
            s.other_us += k.us
            cat = "glue"
        names = s.kernels.setdefault(cat, [])
        if len(names) < 8 and (b := base_name(k.name)) not in names:
            names.append(b)
    return s


def evidence(summary: Summary, policy: str) -> dict[str, Any]:
    lib_us = sum(summary.library_us.values())
    return {"source": summary.source, "ops": sorted(o for o, us in summary.library_us.items() if us > 0),
            "library_us": {o: round(us, 3) for o, us in summary.library_us.items()},
            "library_share": round(summary.share(lib_us), 4), "own_share": round(summary.share(summary.own_us), 4),
            "unattributed_share": round(summary.share(summary.unattributed_us), 4),
            "other_share": round(summary.share(summary.other_us), 4), "kernels": summary.kernels, "policy": policy}


def main_ops_decision(ref_ops: Iterable[str], cand_ops: Iterable[str], policy: str) -> tuple[str, list[str]] | None:
    """The op audit's verdict on the main ops: ("strict" | "single" | "not-library", ops) when the candidate
    hands back what no partial rewrite may, else None."""
    ref, cand = compute_ops(ref_ops), compute_ops(cand_ops)
    if policy == "strict" and (shared := library_set(ref_ops) & cand):  # a GEMM is a GEMM: mm for addmm
        return "strict", sorted(shared)
    if not ref & cand:
        return None
    if len(ref) == 1:
        return "single", sorted(ref & cand)
    main = next((tier & ref for tier in TIERS if tier & ref), ref)
    if not_library := sorted((main & cand) - LIBRARY_OPS):
        return "not-library", not_library
    return None


def keeps_library(ref_ops: Iterable[str], cand_ops: Iterable[str]) -> list[str]:
    """The library ops (GEMM, convolution, attention) the candidate keeps from a reference that has one."""
    ref = compute_ops(ref_ops)
    return sorted(compute_ops(cand_ops) & LIBRARY_OPS) if ref & LIBRARY_OPS else []


_HANDED_BACK = {
    "strict": "the strict policy forbids delegation: the candidate calls the reference's ops ({ops})",
    "single": "the problem's single main operator ({ops}) is handed back to PyTorch",
    "not-library": "the candidate calls the reference's main PyTorch ops ({ops}) instead of its own kernel; only "
                   "library GEMMs, convolutions and attention may be kept",
    "unjudged": "the candidate keeps the reference's library ops ({ops}); a partial rewrite is valid only where "
                "its own kernels do the rest, which only a GPU profile shows",
}


def decide(summary: Summary, policy: str) -> tuple[tuple[str, str, str], dict[str, Any]]:
    """A partial rewrite that keeps library ops, judged on its profile: (flag, evidence)."""
    ev = evidence(summary, policy)
    ops = ", ".join(ev["ops"]) or "none seen in the profile"
    own = summary.own_work_us
    glue = summary.other_us + sum(us for o, us in summary.library_us.items() if o not in LIBRARY_OPS)
    if own <= 0 or own < OWN_MIN_SHARE * (own + glue):
        return ("reference-ops", "invalid",
                f"everything is delegated: {100 * ev['library_share']:.0f}% of the candidate's GPU time runs in "
                f"the reference's own PyTorch ops ({ops}), {100 * ev['other_share']:.0f}% in other PyTorch ops, "
                f"and no kernel of its own does work (own kernels {100 * summary.share(own):.1f}%)."), ev
    return ("library-ops", "review",
            f"partial rewrite: {100 * ev['library_share']:.0f}% of the candidate's GPU time in library ops kept "
            f"from the reference ({ops}), {100 * summary.share(own):.0f}% in its own kernels."), ev


# ------------------------------------------------------------------------------------ from a profile
def _aten(name: str) -> str | None:
    return name[6:].split(".")[0] if name.startswith("aten::") else None


def _is_cpu(e: Any) -> bool:
    return str(getattr(e, "device_type", "")).endswith("CPU")


def top_aten(e: Any, under: dict[int, frozenset[str]] | None = None) -> tuple[str | None, frozenset[str], str | None]:
    """The outermost aten op at or above a profiler event, the aten ops under it, and the innermost.
    ``under``: the aten ops under each top op already walked (by the event's id), so a top op with thousands
    of launches under it (an RNN's per-step kernels) has its subtree walked once, not once per launch."""
    top = inner = None
    p = e
    while p is not None:
        if _aten(p.name) is not None:
            top = p
            inner = inner or p
        p = p.cpu_parent
    if top is None:
        return None, frozenset(), None
    names = under.get(id(top)) if under is not None else None
    if names is None:
        found: set[str] = set()
        stack = list(top.cpu_children)
        while stack:
            c = stack.pop()
            if (n := _aten(c.name)) is not None:
                found.add(n)
            stack.extend(c.cpu_children)
        names = frozenset(found)
        if under is not None:
            under[id(top)] = names
    return _aten(top.name), names, _aten(inner.name) if inner is not None else None


def _launch(name: str, us: float, e: Any, under: dict[int, frozenset[str]] | None = None) -> Launch:
    op, below, by = top_aten(e, under)
    return Launch(name, us, op, below, by)


def launches_from_events(events: list[Any], *, cuda: bool, window: str) -> list[Launch]:
    """The launches of a torch.profiler recording (``prof.events()``). On the GPU: every kernel linked to
    a CPU event, under that event's top-level aten op; device events linked to none, unattributed. On the
    CPU, CPU work stands in for kernels: each aten op's own time under its top-level op, and each range the
    candidate marks itself (``record_function``, as a kernel's name) with its time outside aten ops."""
    cpu = [e for e in events if _is_cpu(e) and not getattr(e, "is_async", False)]
    out: list[Launch] = []
    under: dict[int, frozenset[str]] = {}  # the events stay alive in ``events``: their ids are stable
    if not cuda:
        for e in cpu:
            if _aten(e.name) is not None:
                out.append(_launch(e.name[6:], float(e.self_cpu_time_total), e, under))
            elif e.name != window and getattr(e, "is_user_annotation", False):
                inner = sum(c.cpu_time_total for c in e.cpu_children if _aten(c.name) is not None)
                out.append(_launch(e.name, max(float(e.cpu_time_total) - inner, 0.0), e, under))
        return out
    linked: Counter[tuple[str, float]] = Counter()
    for e in cpu:
        for k in getattr(e, "kernels", ()):
            out.append(_launch(k.name, float(k.duration), e, under))
            linked[(k.name, round(float(k.duration), 3))] += 1
    cpu_names = {e.name for e in cpu}
    for e in events:  # device events no CPU event claims: unattributed
        annotation = getattr(e, "is_user_annotation", None)  # a record_function range's span on the GPU
        if _is_cpu(e) or annotation or (annotation is None and e.name in cpu_names):  # (older torch: by name)
            continue
        key = (e.name, round(float(e.time_range.end - e.time_range.start), 3))
        if linked[key] > 0:
            linked[key] -= 1
        else:
            out.append(Launch(e.name, key[1]))
    return out


Call = Callable[[str], AbstractContextManager[Any]]


def profile_forward(fn: Any, inputs: list[Any], *, cuda: bool, sync: Any, calls: int = 3,
                    call: Call | None = None) -> list[Launch]:
    """Profile ``calls`` forwards of ``fn`` (after one outside the profile): their launches. ``call``: the
    context the candidate's calls run in (the harness's state guard)."""
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function

    window = "ks::candidate_forward"
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with (call or (lambda _: nullcontext()))("forward (delegation profile)"), torch.no_grad():
        fn(*inputs)
        sync()
        with profile(activities=acts) as prof:
            for _ in range(calls):
                with record_function(window):
                    fn(*inputs)
            sync()
    return launches_from_events(list(prof.events()), cuda=cuda, window=window)


def _handed_back(kind: str, ops: list[str], ev: dict[str, Any] | None, how: str) -> tuple[str, dict[str, Any]]:
    msg = _HANDED_BACK[kind].format(ops=", ".join(ops))
    if ev is not None:
        msg += f" ({100 * ev['library_share']:.0f}% of its GPU time in the reference's ops)"
    return msg + f" ({how}).", {"ops": ops, "rule": kind, "policy": "op-audit", **({"profile": ev} if ev else {})}


def audit(fn: Any, inputs: list[Any], ref_ops: list[str], cand_ops: list[str], findings: Findings, *,
          policy: str, cuda: bool, sync: Any, own: OwnKernels | None = None, call: Call | None = None,
          profile: Callable[..., list[Launch]] | None = None) -> dict[str, Any] | None:
    """The delegation check of one job (see the module's docstring); returns the profile's evidence where
    the candidate calls a compute op of the reference and a GPU profile was taken. ``profile``: what
    records the forward's launches (``profile_forward``)."""
    main = main_ops_decision(ref_ops, cand_ops, policy)
    kept = keeps_library(ref_ops, cand_ops)
    if main is None and not kept:
        reference_op_findings(ref_ops, cand_ops, findings, glue_only=True)  # shared glue, for review
        return None
    summary, how = None, "op audit: CPU run, no GPU time shares; partial rewrites are judged on the GPU"
    if cuda:
        calls = 3 if len(cand_ops) <= MANY_OPS else 1
        if calls == 1:
            findings.notes.append(f"delegation: one forward profiled, not three ({len(cand_ops):,} aten ops a "
                                  "forward; the profiler's cost grows with them)")
        try:
            launches = (profile or profile_forward)(fn, inputs, cuda=True, sync=sync, call=call, calls=calls)
            summary = attribute(launches, own or OwnKernels(), ref_ops)
        except Exception as e:  # a profiler already running (nsys, ncu), or none in this build
            how = f"op audit: profiling the candidate failed, {type(e).__name__}: {e}"
            findings.notes.append(f"delegation: {how}")
        else:
            if summary.total_us <= 0:
                how, summary = "op audit: the profile recorded no GPU time", None
                findings.notes.append(f"delegation: {how}")
            else:
                how = "op audit, with the GPU profile's shares"
    ev = evidence(summary, policy) if summary is not None else None
    if main is not None:
        msg, evid = _handed_back(main[0], main[1], ev, how)
        findings.flag_once("reference-ops", "invalid", msg, evid)
        return ev
    if summary is None:
        msg, evid = _handed_back("unjudged", kept, None, how)
        findings.flag_once("reference-ops", "invalid", msg, evid)
        return None
    flag, ev = decide(summary, policy)
    findings.flag_once(*flag, ev)
    reference_op_findings(ref_ops, [o for o in cand_ops if o not in LIBRARY_OPS], findings, glue_only=True)
    return ev
