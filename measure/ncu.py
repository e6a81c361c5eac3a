"""Read Nsight Compute reports (``.ncu-rep``) with NVIDIA's ``ncu_report`` module into typed profiles.

Every metric the rules need comes with its unit; a metric the capture lacks is ``None``, never 0.
Nsight Compute's own rule results are kept, and per-PC counters (warp-state samples, memory traffic)
are summed per source line where the kernel was built with ``-lineinfo``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from kernelscope.artifacts import check_id, get_store
from kernelscope.config import get_settings
from kernelscope.errors import InputError, NotAvailable
from kernelscope.heuristics import REGISTRY, load_all
from kernelscope.measure.lines import SAMPLES, LineSums, Location
from kernelscope.models import KernelProfile, MetricValue, NcuRuleResult, Profile, SourceLineCounters
from kernelscope.models.profile import CHAINED_LOAD_INST, GLOBAL_ATOMIC_INST, POLL_INST
from kernelscope.sandbox.paths import resolve_user_path

# typed field -> ncu metric
KEY_METRICS: dict[str, str] = {
    "grid_size": "launch__grid_size",
    "block_size": "launch__block_size",
    "registers_per_thread": "launch__registers_per_thread",
    "shared_mem_static_bytes": "launch__shared_mem_per_block_static",
    "shared_mem_dynamic_bytes": "launch__shared_mem_per_block_dynamic",
    "waves_per_sm": "launch__waves_per_multiprocessor",
    "duration_ns": "gpu__time_duration.sum",
    "sm_throughput_pct": "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "memory_throughput_pct": "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
    "dram_bytes_read": "dram__bytes_read.sum",
    "dram_bytes_write": "dram__bytes_write.sum",
    "l1_hit_rate_pct": "l1tex__t_sector_hit_rate.pct",
    "l2_hit_rate_pct": "lts__t_sector_hit_rate.pct",
    "achieved_occupancy_pct": "sm__warps_active.avg.pct_of_peak_sustained_active",
    "theoretical_occupancy_pct": "sm__maximum_warps_per_active_cycle_pct",
    "branch_uniformity_pct": "smsp__sass_average_branch_targets_threads_uniform.pct",
}
_INT_FIELDS = {"grid_size", "block_size", "registers_per_thread", "shared_mem_static_bytes", "shared_mem_dynamic_bytes"}
# further metrics kept (with units) for the rules
RULE_METRICS = (
    "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum", "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum",
    "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum", "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
    "smsp__inst_executed.sum", "sm__cycles_elapsed.avg", "launch__occupancy_limit_registers",
    "launch__occupancy_limit_shared_mem", "launch__occupancy_limit_blocks", "launch__occupancy_limit_warps",
    "smsp__pcsamp_sample_count", "device__attribute_multiprocessor_count", "launch__barrier_count",
    "memory_l2_theoretical_sectors_global", "memory_l2_theoretical_sectors_global_ideal",
    "derived__memory_l2_theoretical_sectors_global_excessive",
    "smsp__cycles_elapsed.avg", "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum.per_cycle_elapsed",
    "smsp__sass_thread_inst_executed_op_fadd_pred_on.sum.per_cycle_elapsed",
    "smsp__sass_thread_inst_executed_op_fmul_pred_on.sum.per_cycle_elapsed",
)
_CATEGORICAL = {"memory_access_size_type", "memory_access_type", "memory_type"}  # per-PC labels, not counters
_STALL = re.compile(r"^smsp__average_warps_issue_stalled_(\w+?)_per_issue_active\.ratio$")
_RULE_TYPES = {0: "info", 1: "warning", 2: "optimization", 3: "error", 4: "ok"}


def rule_metrics() -> list[str]:
    """Every metric a KernelProfile keeps: the fixed list plus what each registered rule declares."""
    load_all()
    out = list(RULE_METRICS)
    for r in REGISTRY.values():
        out += [m for m in r.metrics if m not in out]
    return out


def _ncu_report() -> Any:
    try:
        import ncu_report
    except ImportError as e:  # pragma: no cover - a declared dependency
        raise NotAvailable("Reading Nsight Compute reports", f"the ncu_report module is missing ({e})",
                           "pip install ncu-report") from None
    return ncu_report


def _value(action: Any, name: str) -> MetricValue:
    m = action.metric_by_name(name)
    if m is None:
        return MetricValue(value=None, unit=None)
    try:
        v = m.value()
    except Exception:  # a metric with instances but no scalar value
        v = None
    if isinstance(v, bool):
        v = float(v)
    return MetricValue(value=v if isinstance(v, (int, float, str)) else None, unit=m.unit() or None)


def _num(mv: MetricValue) -> float | None:
    return float(mv.value) if isinstance(mv.value, (int, float)) else None


def key_fields(metrics: dict[str, MetricValue]) -> dict[str, Any]:
    """A KernelProfile's typed fields (KEY_METRICS) from its metrics: numbers, integers where the field is one,
    None where the metric is missing."""
    fields: dict[str, Any] = {}
    for field, metric in KEY_METRICS.items():
        mv = metrics.get(metric)
        v = _num(mv) if mv is not None else None
        fields[field] = int(v) if v is not None and field in _INT_FIELDS else v
    return fields


def _ratio(metrics: dict[str, MetricValue], num: str, den: str) -> float | None:
    n = _num(metrics[num]) if num in metrics else None
    d = _num(metrics[den]) if den in metrics else None
    return round(n / d, 3) if n is not None and d else None


def derived_fields(metrics: dict[str, MetricValue]) -> dict[str, Any]:
    """The KernelProfile fields derived from several metrics (sectors per request, stall reasons by cycles per
    issued instruction), for the ncu reader and the CUPTI collector alike."""
    stalls: dict[str, float] = {}
    for name, mv in metrics.items():
        m = _STALL.match(name)
        v = _num(mv) if m else None
        if m and v is not None:
            stalls[m.group(1)] = round(v, 4)
    return {
        "global_load_sectors_per_request": _ratio(metrics, "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",
                                                  "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum"),
        "global_store_sectors_per_request": _ratio(metrics, "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum",
                                                   "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum"),
        "stall_reasons": dict(sorted(stalls.items(), key=lambda kv: -kv[1])),
    }


def _rules(action: Any) -> list[NcuRuleResult]:
    out: list[NcuRuleResult] = []
    for r in action.rule_results_as_dicts():
        msg = r.get("rule_message") or {}
        out.append(NcuRuleResult(
            rule=str(r.get("rule_identifier", "")), name=str(r.get("name", "")),
            section=r.get("section_identifier"), title=msg.get("title") or None,
            message=str(msg.get("message", "")), type=_RULE_TYPES.get(msg.get("type"), "unknown"),  # type: ignore[arg-type]
            focus_metrics=[dict(f) for f in r.get("focus_metrics", [])],
        ))
    return out


def _sass(action: Any, pc: int) -> str:
    """The SASS text of the instruction at ``pc``, '' if unknown."""
    try:
        return str(action.sass_by_pc(pc) or "").strip()
    except Exception:
        return ""


def _action_loc(action: Any, pc: int) -> Location | None:
    """The (file, line) Nsight Compute's report gives the instruction at ``pc``, None where it has none."""
    try:
        si = action.source_info(pc)
    except Exception:
        return None
    return (si.file_name(), int(si.line())) if si is not None and si.line() > 0 else None


def _source_lines(action: Any, top: int) -> list[SourceLineCounters]:
    """Sum every per-PC metric by source line (measure.lines.LineSums); keep the lines with the most warp samples,
    and up to top // 2 more that run global atomics, wait for other blocks or chase loads."""
    sums = LineSums(lambda pc: _action_loc(action, pc), lambda pc: _sass(action, pc))
    for name in action.metric_names():
        m = action.metric_by_name(name)
        if m is None or not m.has_correlation_ids() or "." in name.split("__")[0] or name in _CATEGORICAL:
            continue
        ids = m.correlation_ids()
        for i in range(min(m.num_instances(), ids.num_instances())):
            try:
                v = m.as_double(i)
            except Exception:
                continue
            sums.add(name, ids.as_uint64(i), v)
    per_line = sums.finish()
    if not per_line:
        return []
    files = action.source_files()
    texts: dict[str, list[str]] = {}
    for f in {f for f, _ in per_line}:
        try:
            texts[f] = files[f].splitlines() if f in files else []
        except Exception:
            texts[f] = []
    ranked = sorted(per_line.items(), key=lambda kv: -kv[1].get(SAMPLES, 0.0))
    # lines that run global atomics, wait for other blocks or chase loads stay even where few samples land on them:
    # the contention rule points at the first, the barrier rule weighs the second, the latency rule names the third
    kept = sorted((kv for kv in ranked[top:] if any(kv[1].get(c) for c in (GLOBAL_ATOMIC_INST, POLL_INST,
                                                                             CHAINED_LOAD_INST))),
                  key=lambda kv: -kv[1].get(SAMPLES, 0.0))[:top // 2]
    out = []
    for (f, line), counters in [*ranked[:top], *kept]:
        lines = texts.get(f, [])
        out.append(SourceLineCounters(file=f, line=line,
                                      code=lines[line - 1].strip()[:300] if 0 < line <= len(lines) else None,
                                      counters={k: round(v, 4) for k, v in counters.items() if v}))
    return out


MAX_REPORT_BYTES = 2 << 30


def load_user_report(path: str) -> Profile:
    """Load a report a client names: the id of a report artifact (from ncu_profile or analyze), or a
    path under the allowed roots to an .ncu-rep of at most 2 GiB."""
    try:
        report_id = check_id(path)
    except InputError:  # not an id: a path
        report_id = None
    if report_id is not None:
        art = get_store().require(report_id)
        rep = art.path("report")
        if rep is None:
            raise InputError(f"Artifact {art.id} is a {art.meta.kind}, not an Nsight Compute report.")
        return load_profile(rep)
    p = resolve_user_path(path, get_settings().allowed_roots)
    if p.suffix != ".ncu-rep":
        raise InputError(f"{path!r} is not an .ncu-rep file (Nsight Compute's report).")
    if p.stat().st_size > MAX_REPORT_BYTES:
        raise InputError(f"{path!r} is larger than 2 GiB.")
    return load_profile(p)


def select_kernels(profile: Profile, kernel: str | None) -> list[KernelProfile]:
    """The kernels whose demangled or mangled name matches the regex ``kernel`` (all for None)."""
    if kernel is None:
        return list(profile.kernels)
    try:
        pat = re.compile(kernel)
    except re.error as e:
        raise InputError(f"kernel={kernel!r} is not a valid regular expression: {e}.") from None
    return [k for k in profile.kernels if pat.search(k.name) or pat.search(k.mangled_name)]


def kernel_names(profile: Profile, limit: int = 20) -> str:
    return ", ".join(k.name for k in profile.kernels[:limit])


def load_profile(path: Path, *, top_lines: int = 10) -> Profile:
    """Parse a report into one KernelProfile per profiled launch."""
    nr = _ncu_report()
    if not path.is_file():
        raise InputError(f"No report at {path}.")
    with path.open("rb") as f:
        magic = f.read(4)
    if not magic:
        raise InputError(f"{path.name} is empty, not an Nsight Compute report.")
    try:
        ctx = nr.load_report(str(path))
    except Exception as e:
        raise InputError(f"{path.name} is not a readable Nsight Compute report ({type(e).__name__}: {e}).") from None
    try:
        kernels = _kernels(nr, ctx, top_lines)
    except (ValueError, TypeError, AttributeError) as e:  # pydantic's ValidationError is a ValueError
        raise InputError(f"{path.name} is a damaged or incomplete Nsight Compute report (truncated, or bytes "
                         f"changed: {str(e).splitlines()[0][:160]}). Capture it again, or pass the report id "
                         "that analyze/ncu_profile returned.") from None
    if not kernels:
        raise InputError(f"{path.name} holds no profiled kernels (or is not an Nsight Compute report): check the "
                         "kernel filters (-k, --launch-skip/--launch-count) and --target-processes all.")
    return Profile(report=path.name, kernels=kernels)


def _kernels(nr: Any, ctx: Any, top_lines: int) -> list[KernelProfile]:
    kernels: list[KernelProfile] = []
    kid = 0
    kept = rule_metrics()
    for ri in range(ctx.num_ranges()):
        rng = ctx.range_by_idx(ri)
        for ai in range(rng.num_actions()):
            a = rng.action_by_idx(ai)
            metrics = {metric: _value(a, metric) for metric in [*KEY_METRICS.values(), *kept]}
            stall_metrics = {n: _value(a, n) for n in a.metric_names() if _STALL.match(n)}
            dev = _value(a, "device__attribute_display_name").value
            kernels.append(KernelProfile(
                id=kid, name=a.name(nr.IAction.NameBase_DEMANGLED), mangled_name=a.name(nr.IAction.NameBase_MANGLED),
                device=dev if isinstance(dev, str) else None, **key_fields(metrics),
                **derived_fields({**metrics, **stall_metrics}), metrics=metrics, ncu_rules=_rules(a),
                source_lines=_source_lines(a, top_lines),
            ))
            kid += 1
    return kernels
