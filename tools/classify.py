"""bottleneck-classify: where a kernel sits against this GPU's roofs, and which limit binds.

The verb over :mod:`kernelscope.heuristics.classify`: every kernel of a recorded report classified with the
ncu rules' findings, or the roofline ceiling of a problem from its analytic FLOPs and bytes.
"""

from __future__ import annotations

from kernelscope.errors import InputError
from kernelscope.heuristics import load_all, run_rules
from kernelscope.heuristics.classify import PEAKS, classify, peaks_for, roofline_from
from kernelscope.measure.ncu import kernel_names, load_user_report, select_kernels
from kernelscope.models import ClassifyResult, KernelAnalysis


def classify_report(path: str, *, kernel: str | None = None, overrides: dict | None = None) -> ClassifyResult:
    """Classify every kernel of a recorded ``.ncu-rep`` under the allowed roots, with the ncu rules'
    findings."""
    profile = load_user_report(path)
    kernels = select_kernels(profile, kernel)
    if not kernels:
        raise InputError(f"No kernel in the report matches {kernel!r}; it has: {kernel_names(profile)}.")
    load_all()
    out = [KernelAnalysis(name=k.name, mangled_name=k.mangled_name, duration_ns=k.duration_ns, bottleneck=classify(k),
                          findings=run_rules("ncu", k, overrides=overrides),
                          ncu_rule_titles=[r.title for r in k.ncu_rules if r.title])
           for k in kernels]
    return ClassifyResult(report=profile.report, kernels=out, peaks=out[0].bottleneck.peaks if out else None)


def classify_analytic(*, flops: float | None, dram_bytes: float | None, time_us: float | None,
                      gpu: str | None) -> ClassifyResult:
    """The roofline ceiling of a problem from its analytic FLOPs and bytes (e.g. a KernelBench
    reference): the attainable time and how far a measured time is from it."""
    if flops is None and dram_bytes is None:
        raise InputError("Give `flops` and/or `bytes` (analytic counts of the problem), or a `report_path`.")
    for name, v in (("flops", flops), ("bytes", dram_bytes), ("time_us", time_us)):
        if v is not None and (v < 0 or v != v):
            raise InputError(f"{name} must be a non-negative number.")
    peaks = peaks_for(gpu or "H100 80GB HBM3")
    if peaks is None:
        known = ", ".join(PEAKS)
        raise InputError(f"No peak table for {gpu!r}; known: {known}.")
    t_ns = time_us * 1e3 if time_us is not None else None
    return ClassifyResult(analytic=roofline_from(flops, dram_bytes, t_ns, peaks), peaks=peaks)
