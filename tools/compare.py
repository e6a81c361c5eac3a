"""compare: two profiles of a kernel (before and after a change) -> metric deltas, the bottleneck
class on each side, and which findings the change resolved or introduced."""

from __future__ import annotations

from kernelscope.errors import InputError
from kernelscope.heuristics import load_all, run_rules
from kernelscope.heuristics.classify import classify
from kernelscope.measure.ncu import kernel_names, load_user_report, select_kernels
from kernelscope.models import CompareResult, KernelProfile, MetricDelta

# field -> True when lower is better, False when higher is better, None when neither
COMPARED: dict[str, bool | None] = {
    "duration_ns": True,
    "sm_throughput_pct": None,
    "memory_throughput_pct": None,
    "dram_bytes_read": True,
    "dram_bytes_write": True,
    "l1_hit_rate_pct": False,
    "l2_hit_rate_pct": False,
    "achieved_occupancy_pct": None,
    "theoretical_occupancy_pct": None,
    "registers_per_thread": None,
    "global_load_sectors_per_request": True,
    "global_store_sectors_per_request": True,
    "branch_uniformity_pct": False,
}


def _pick(path: str, kernel: str | None, side: str) -> KernelProfile:
    try:
        profile = load_user_report(path)
        kernels = select_kernels(profile, kernel)
    except InputError as e:
        raise InputError(f"{side}: {e}") from None
    if len(kernels) != 1:
        raise InputError(f"{side}: select exactly one kernel with `kernel` (a regex); "
                         f"{len(kernels)} match. The report has: {kernel_names(profile)}.")
    return kernels[0]


def compare_profiles(before_path: str, after_path: str, *, before_kernel: str | None = None,
                     after_kernel: str | None = None) -> CompareResult:
    b = _pick(before_path, before_kernel, "before")
    a = _pick(after_path, after_kernel, "after")
    load_all()
    fb, fa = run_rules("ncu", b), run_rules("ncu", a)
    rb, ra = {f.rule for f in fb}, {f.rule for f in fa}
    deltas = []
    for field, lower_better in COMPARED.items():
        x, y = getattr(b, field), getattr(a, field)
        change = 100.0 * (y - x) / x if x not in (None, 0) and y is not None else None
        better = None
        if lower_better is not None and x is not None and y is not None and x != y:
            better = (y < x) if lower_better else (y > x)
        deltas.append(MetricDelta(metric=field, before=x, after=y,
                                  change_pct=round(change, 2) if change is not None else None, better=better))
    return CompareResult(
        before=f"{b.name} ({before_path})", after=f"{a.name} ({after_path})",
        speedup=b.duration_ns / a.duration_ns if b.duration_ns and a.duration_ns else None,
        bottleneck_before=classify(b).cls, bottleneck_after=classify(a).cls, deltas=deltas,
        resolved=[f for f in fb if f.rule not in ra], appeared=[f for f in fa if f.rule not in rb],
        persisting=sorted(rb & ra),
    )
