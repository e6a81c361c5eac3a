"""Bounded text summaries: what a model reads first. Diagnosis before data, numbers in every line,
ranked fixes; full data stays in structured content and resources."""

from __future__ import annotations

from kernelscope.models import (
    AnalyzeResult,
    ClassifyResult,
    CompareResult,
    CompileResult,
    CutlassFileResult,
    CutlassSearchResult,
    EvalResult,
    Finding,
    KernelDiagnosis,
    NcuProfileResult,
    ProgramResult,
    RunResult,
    SassResult,
    TraceResult,
)

DEFAULT_BUDGET_CHARS = 8000  # ~2,000 tokens


def _clip(text: str, budget: int) -> str:
    if len(text) <= budget:
        return text
    return text[: budget - 60].rstrip() + "\n[... summary truncated; the structured result has everything]"


def fmt(value: float | str | None) -> str:
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else f"{value:.4g}"
    return str(value)


def render_findings(findings: list[Finding], *, max_findings: int = 8, max_fixes: int = 3) -> list[str]:
    lines: list[str] = []
    for i, f in enumerate(findings[:max_findings], 1):
        lines.append(f"{i}. [{f.severity.upper()}] {f.title} ({f.rule})")
        lines.append(f"   {f.diagnosis}")
        ev = "; ".join(
            f"{e.metric}={fmt(e.value)}{e.unit or ''}"
            + (f" (threshold {fmt(e.threshold)})" if e.threshold is not None else "")
            + (f" at {e.line}" if e.line else "")
            for e in f.evidence[:4]
        )
        if ev:
            lines.append(f"   evidence: {ev}")
        for j, fix in enumerate(f.fixes[:max_fixes], 1):
            lines.append(f"   fix {j}: {fix.action} -> {fix.expected_effect}")
    if len(findings) > max_findings:
        lines.append(f"(+{len(findings) - max_findings} more findings in the structured result)")
    return lines


def compile_summary(r: CompileResult, budget: int = DEFAULT_BUDGET_CHARS) -> str:
    lines: list[str] = []
    if r.success:
        hit = " (cache hit)" if r.cache_hit else ""
        lines.append(f"Compiled OK{hit}: {r.kind} for {r.arch} with nvcc {r.compiler_version} in "
                     f"{r.compile_time_s:.2f} s. artifact_id={r.artifact_id}")
    else:
        lines.append(f"Compile FAILED: {r.error_count} error(s), {r.warning_count} warning(s) "
                     f"(nvcc {r.compiler_version}, {r.arch}).")
    errs = [d for d in r.diagnostics if d.severity in ("error", "fatal")]
    warns = [d for d in r.diagnostics if d.severity == "warning"]
    if r.first_error and errs and errs[0].instantiation:
        # a template error: the readable first error, then only the headline of the others
        lines.append("First error:")
        lines += [f"  {x}" for x in r.first_error.splitlines()]
        errs = errs[1:]
    for d in errs[:10] + warns[:5]:
        loc = f"{d.file}:{d.line}" if d.file and d.line else (d.file or d.tool)
        first = d.message.splitlines()[0]
        lines.append(f"- {d.severity} at {loc}: {first}")
    if len(errs) > 10:
        lines.append(f"(+{len(errs) - 10} more errors; see diagnostics)")
    for note in r.notes:
        lines.append(f"note: {note}")
    entries = [k for k in r.kernels if k.is_entry]
    if entries:
        lines.append("Kernels (ptxas):")
        for k in entries[:12]:
            spill = (k.spill_stores_bytes or 0) + (k.spill_loads_bytes or 0)
            lines.append(
                f"- {k.name}: {k.registers} regs, {k.shared_bytes or 0} B smem, {k.stack_bytes or 0} B stack, "
                f"spills {k.spill_stores_bytes or 0}/{k.spill_loads_bytes or 0} B st/ld"
                + (" <- SPILLS" if spill else "")
            )
        if len(entries) > 12:
            lines.append(f"(+{len(entries) - 12} more kernels)")
    if r.findings:
        lines.append("Findings:")
        lines += render_findings(r.findings)
    elif r.success and entries:
        lines.append("No resource problems found by the ptxas rules.")
    if r.success:
        lines.append("Next: `sass` with this artifact_id for instruction statistics.")
    return _clip("\n".join(lines), budget)


def sass_summary(r: SassResult, budget: int = DEFAULT_BUDGET_CHARS) -> str:
    lines = [f"SASS of artifact {r.artifact_id} ({r.arch or 'unknown arch'}): {len(r.kernels)} kernel(s), "
             f"{r.listing_lines} listing lines. Full listing: {r.listing_uri}"]
    for k in r.kernels[:10]:
        mix = ", ".join(f"{c.cls} {c.pct:.0f}%" for c in k.classes[:6])
        loads = ", ".join(f"{w}b:{n}" for w, n in sorted(k.memory.loads_by_width.items(), key=lambda x: int(x[0])))
        stores = ", ".join(f"{w}b:{n}" for w, n in sorted(k.memory.stores_by_width.items(), key=lambda x: int(x[0])))
        tc = ", ".join(f"{op}x{n}" for op, n in k.tensor_core_instructions.items()) or "none"
        lines.append(f"- {k.name}: {k.instructions} instr, {k.registers if k.registers is not None else '?'} regs; "
                     f"mix: {mix}")
        lines.append(f"  global loads by width [{loads or 'none'}], stores [{stores or 'none'}]; tensor cores: {tc}; "
                     f"LDL/STL {k.local_loads}/{k.local_stores}; FP64 {k.fp64_instructions}; MUFU "
                     f"{k.special_function_instructions}; predicated {k.predicated_pct:.0f}%")
    if len(r.kernels) > 10:
        lines.append(f"(+{len(r.kernels) - 10} more kernels in the structured result)")
    if r.findings:
        lines.append("Findings:")
        lines += render_findings(r.findings)
    else:
        lines.append("No SASS-level problems found.")
    return _clip("\n".join(lines), budget)


def eval_summary(r: EvalResult, budget: int = DEFAULT_BUDGET_CHARS) -> str:
    lines: list[str] = []
    head = {"faster": "FASTER", "slower": "SLOWER", "inconclusive": "INCONCLUSIVE (no significant difference)",
            "incorrect": "INCORRECT", "invalid": "INVALID"}[r.verdict]
    if r.status == "harness-error":
        head = "NONE: the harness itself failed (nothing is known about the candidate)"
    elif r.status == "too-large":
        head = "NONE: too large for this GPU with these settings"
    where = f" on {r.gpu}" if r.gpu else (f" on {r.device}" if r.device else "")
    worker = f", worker {r.worker}" if r.worker else ""
    build = f", built on the CPU in {r.build_s:.1f} s" if r.build_s else ""
    lines.append(f"Verdict: {head}{where} (status {r.status}, {r.wall_s:.1f} s{worker}{build}).")
    if r.error:
        lines.append(f"Error: {r.error}")
    for f in r.flags:
        lines.append(f"- [{f.severity.upper()}] {f.id}: {f.message}")
    c = r.correctness
    if c is not None:
        tol = ", ".join(f"{d}: rtol={v['rtol']:g} atol={v['atol']:g}" for d, v in c.tolerances.items())
        lines.append(f"Correctness: {c.passed}/{c.trials} trials passed ({c.policy} policy; {tol or 'exact'}); "
                     f"max abs error {fmt(c.max_abs_error)}, max rel error {fmt(c.max_rel_error)}.")
        for t in c.trial_results:
            if t.error:
                lines.append(f"  trial {t.trial}: {t.error}")
                break
    if r.timings:
        for name, t in r.timings.items():
            lines.append(f"Time {name}: median {t.median_us:.2f} us (IQR {t.iqr_us:.2f}, CV {t.cv_pct:.1f}%, "
                         f"{t.runs} runs)")
    for sp in r.speedups:
        lines.append(f"Speedup vs {sp.baseline}: {sp.speedup:.3f}x (95% CI {sp.ci_low:.3f}-{sp.ci_high:.3f}) -> "
                     f"{sp.verdict}")
    for name, e in r.energy.items():
        if e.available and e.joules_per_call is not None:
            lines.append(f"Energy {name}: {e.joules_per_call * 1e3:.3f} mJ/call, {e.avg_power_w:.0f} W average over "
                         f"{e.window_s:.1f} s ({e.calls} calls)")
        else:
            lines.append(f"Energy {name}: not measured ({e.note})")
    if r.energy:
        note = next((e.note for e in r.energy.values() if e.available and e.note), None)
        if note:
            lines.append(f"  ({note})")
    for n in r.notes:
        lines.append(f"Note: {n}")
    if r.traceback:
        lines.append("Traceback (last lines):")
        lines += ["  " + ln for ln in r.traceback.strip().splitlines()[-8:]]
    elif r.stderr_tail and r.status != "ok":
        lines.append("stderr (last lines):")
        lines += ["  " + ln for ln in r.stderr_tail.strip().splitlines()[-8:]]
    return _clip("\n".join(lines), budget)


def program_summary(r: ProgramResult, budget: int = DEFAULT_BUDGET_CHARS) -> str:
    if r.timed_out:
        status = f"TIMED OUT after {r.wall_s:.1f} s (process group killed)"
    elif r.crashed:
        status = f"CRASHED ({r.signal_name})"
    else:
        status = f"exit status {r.exit_status}"
    lines = [f"Program {r.artifact_id}: {status}, wall {r.wall_s:.3f} s."]
    if r.kernel_times:
        lines.append("GPU time per kernel (ncu):")
        for k in r.kernel_times[:15]:
            lines.append(f"- {k.name}: {k.launches} launches, total {k.total_ns / 1e3:.1f} us, mean "
                         f"{k.mean_ns / 1e3:.2f} us (min {k.min_ns / 1e3:.2f}, max {k.max_ns / 1e3:.2f})")
    if r.kernel_times_note:
        lines.append(f"Note: {r.kernel_times_note}")
    if r.stdout.strip():
        lines.append("stdout (tail):")
        lines += ["  " + ln for ln in r.stdout.strip().splitlines()[-20:]]
    if r.stderr.strip():
        lines.append("stderr (tail):")
        lines += ["  " + ln for ln in r.stderr.strip().splitlines()[-20:]]
    return _clip("\n".join(lines), budget)


def classify_summary(r: ClassifyResult, budget: int = DEFAULT_BUDGET_CHARS) -> str:
    lines: list[str] = []
    if r.peaks is not None:
        lines.append(f"Peaks ({r.peaks.name}): FP32 {r.peaks.fp32_tflops:g} TFLOP/s, DRAM {r.peaks.dram_gbps:g} GB/s, "
                     f"ridge {r.peaks.fp32_tflops * 1e3 / r.peaks.dram_gbps:.1f} FLOP/B.")
    if r.analytic is not None:
        a = r.analytic
        lines.append(f"Roofline ceiling: {a.roofline_time_ns / 1e3:.2f} us at the roof"
                     + (f" (intensity {a.arithmetic_intensity:.3g} FLOP/B)" if a.arithmetic_intensity else "")
                     + (f"; the measured time is {1 / a.fraction_of_roofline:.1f}x the ceiling"
                        if a.fraction_of_roofline else "") + ".")
    for k in r.kernels[:12]:
        b = k.bottleneck
        ro = b.roofline
        where = ""
        if ro is not None and ro.fraction_of_roofline is not None:
            where = f"; at {100 * ro.fraction_of_roofline:.0f}% of its roofline"
            if ro.achieved_tflops is not None and ro.achieved_dram_gbps is not None:
                where += f" ({ro.achieved_tflops:.3g} TFLOP/s, {ro.achieved_dram_gbps:.0f} GB/s DRAM)"
        dur = f"{k.duration_ns / 1e3:.1f} us" if k.duration_ns is not None else "? us"
        lines.append(f"- {k.name} [{dur}]: {b.cls.upper()} (confidence {b.confidence:.2f}){where}. {b.reasoning}.")
        if k.findings:
            lines += ["  " + ln for ln in render_findings(k.findings, max_findings=4, max_fixes=2)]
        if k.ncu_rule_titles:
            lines.append("  Nsight Compute rules: " + "; ".join(k.ncu_rule_titles[:6]))
    if len(r.kernels) > 12:
        lines.append(f"(+{len(r.kernels) - 12} more kernels in the structured result)")
    return _clip("\n".join(lines), budget)


def compare_summary(r: CompareResult, budget: int = DEFAULT_BUDGET_CHARS) -> str:
    lines = [f"Before: {r.before}", f"After:  {r.after}"]
    if r.speedup is not None:
        lines.append(f"Speedup {r.speedup:.2f}x; bottleneck {r.bottleneck_before} -> {r.bottleneck_after}.")
    for d in r.deltas:
        if d.before is None and d.after is None:
            continue
        mark = {True: " (better)", False: " (worse)", None: ""}[d.better]
        ch = f" ({d.change_pct:+.1f}%)" if d.change_pct is not None else ""
        lines.append(f"- {d.metric}: {fmt(d.before)} -> {fmt(d.after)}{ch}{mark}")
    if r.resolved:
        lines.append("Resolved: " + "; ".join(f"{f.title} ({f.rule})" for f in r.resolved))
    if r.appeared:
        lines.append("New findings:")
        lines += render_findings(r.appeared, max_findings=4, max_fixes=2)
    if r.persisting:
        lines.append("Still present: " + ", ".join(r.persisting))
    return _clip("\n".join(lines), budget)


def _diagnosis_lines(k: KernelDiagnosis, *, max_findings: int = 4) -> list[str]:
    b = k.bottleneck
    ro = b.roofline
    where = ""
    if ro is not None and ro.fraction_of_roofline is not None:
        where = f", at {100 * ro.fraction_of_roofline:.0f}% of its roofline"
    dur = f"{k.duration_ns / 1e3:.1f} us" if k.duration_ns is not None else "? us"
    if k.launches > 1 and k.total_duration_ns is not None:
        dur += f" x {k.launches} launches = {k.total_duration_ns / 1e3:.1f} us"
    cfg = f"grid {k.grid_size} x block {k.block_size}, {k.registers_per_thread} regs" if k.grid_size else ""
    lines = [f"- {k.name} [{dur}; {cfg}]: {b.cls.upper()} (confidence {b.confidence:.2f}{where}). {b.reasoning}."]
    if k.findings:
        lines += ["  " + ln for ln in render_findings(k.findings, max_findings=max_findings, max_fixes=2)]
    else:
        lines.append("  No rule fired: nothing stands out beyond the class above.")
    if k.top_stalls:
        lines.append("  top stalls (cycles/issue): " + ", ".join(f"{r} {v:.1f}" for r, v in k.top_stalls.items()))
    if k.ncu_rule_titles:
        lines.append("  Nsight Compute: " + "; ".join(k.ncu_rule_titles[:5]))
    return lines


def _problem_lines(status: str, explanation: str | None, fixes: list[str]) -> list[str]:
    if status == "ok" and not explanation:
        return []
    lines = [f"{status.upper()}: {explanation}" if status != "ok" else f"Note: {explanation}"]
    lines += [f"  fix: {f}" for f in fixes[:4]]
    return lines


def profile_summary(r: NcuProfileResult, budget: int = DEFAULT_BUDGET_CHARS) -> str:
    lines = _problem_lines(r.status, r.explanation, r.fixes)
    if r.status != "ok":
        lines += r.capture.messages[:6]
        if r.capture.program_stderr:
            lines.append("program stderr (tail): " + r.capture.program_stderr[-600:])
        return _clip("\n".join(lines), budget)
    lines.append(f"Profiled {r.kernels_total} launch(es) in {r.capture.wall_s:.1f} s; report artifact {r.report_id}.")
    lines += [f"Note: {n}" for n in r.notes[:3]]
    for k in r.kernels[:8]:
        lines += _diagnosis_lines(k, max_findings=3)
    if len(r.kernels) > 8:
        lines.append(f"(+{len(r.kernels) - 8} more launches in the structured result)")
    return _clip("\n".join(lines), budget)


def analyze_summary(r: AnalyzeResult, budget: int = DEFAULT_BUDGET_CHARS) -> str:
    lines = _problem_lines(r.status, r.explanation, r.fixes)
    if r.status != "ok":
        for st in r.stages:
            if st.capture is not None:
                lines += st.capture.messages[:6]
                if st.capture.program_stderr:
                    lines.append("program stderr (tail): " + st.capture.program_stderr[-600:])
        return _clip("\n".join(lines), budget)
    stages = "; ".join(f"{st.name} {st.wall_s:.1f} s" + (f" by {st.tool}" if st.tool else "")
                       + (f" ({', '.join(st.sections)})" if st.sections else "") for st in r.stages)
    lines.append(f"Analyzed {len(r.kernels)} of {r.kernels_total} kernel(s) ({r.launches_profiled} launches profiled) "
                 f"in {r.wall_s or 0:.1f} s: {stages}.")
    lines += [f"Note: {n}" for n in r.notes[:3]]
    if r.system is not None:
        sy = r.system
        lines.append(f"System: {sy.system_class.upper()}: {sy.system_class_reason} ({sy.launches} launches, GPU busy "
                     f"{sy.gpu_busy_pct:.0f}% of {_t(sy.region_ns)}).")
        lines += render_findings(r.system_findings, max_findings=3, max_fixes=2)
    for k in r.kernels:
        lines += _diagnosis_lines(k)
    if r.other_kernels:
        lines.append("Not analyzed in depth: " + "; ".join(r.other_kernels[:6]))
    lines.append(f"Reports: {', '.join(r.report_ids)} (kernelscope://artifacts/<id>/report; usable in compare).")
    return _clip("\n".join(lines), budget)


def _t(ns: float | None) -> str:
    if ns is None:
        return "?"
    return f"{ns / 1e3:.1f} us" if ns < 1e6 else f"{ns / 1e6:.2f} ms"


def trace_summary(r: TraceResult, budget: int = DEFAULT_BUDGET_CHARS) -> str:
    lines = _problem_lines(r.status, r.explanation, r.fixes)
    if r.fallback:
        lines.append(f"Traced with CUPTI: {r.fallback}.")
    s = r.summary
    if s is None:
        if r.capture and r.capture.program_stderr:
            lines.append("program stderr (tail): " + r.capture.program_stderr[-600:])
        lines += [f"Note: {n}" for n in r.notes[:4]]
        return _clip("\n".join(lines), budget)
    lines.append(f"{s.system_class.upper()}: {s.system_class_reason}.")
    lines.append(f"Region: {s.region}, {_t(s.region_ns)}; GPU busy {s.gpu_busy_pct:.0f}% (kernels {_t(s.kernel_ns)}, "
                 f"copies {_t(s.copy_ns)}, memsets {_t(s.memset_ns)}); {s.launches} kernel launches of "
                 f"{s.kernels_total} kernels; {s.launch_calls} launch calls ({_t(s.launch_api_ns)} on the host); "
                 f"GPU waiting for launches {s.launch_overhead_pct:.0f}% of the region.")
    if r.findings:
        lines += render_findings(r.findings, max_findings=6, max_fixes=2)
    else:
        lines.append("No system-level rule fired.")
    if s.kernels:
        lines.append("Kernels by time: " + "; ".join(f"{k.name[:80]} {k.share_pct:.0f}% ({k.count} x {_t(k.avg_ns)})"
                                                      for k in s.kernels[:6]))
    if s.copies:
        lines.append("Copies: " + "; ".join(
            f"{c.direction} {c.count} x {c.avg_bytes / 1e3:.1f} kB = {_t(c.total_ns)}"
            + (f", {c.pageable} pageable" if c.pageable else "") + (f", {c.synchronous} sync" if c.synchronous else "")
            for c in s.copies))
    if s.api:
        lines.append("Host CUDA API by time: " + "; ".join(f"{a.name} {a.count} x {_t(a.avg_ns)}" for a in s.api[:6]))
    if s.top_gaps:
        lines.append(f"Idle gaps >= {_t(s.gap_threshold_ns)}: {s.gaps}, median {_t(s.gap_median_ns)}; longest: "
                     + "; ".join(f"{_t(g.duration_ns)} in {g.cause}" for g in s.top_gaps[:3]))
    if s.nvtx:
        lines.append("NVTX: " + "; ".join(f"{n.name} {n.count} x {_t(n.avg_ns)}" for n in s.nvtx[:5]))
    lines += [f"Note: {n}" for n in r.notes[:3]]
    if r.trace_id:
        lines.append(f"Timeline: kernelscope://artifacts/{r.trace_id}/trace (Chrome/Perfetto JSON; source {r.source}).")
    return _clip("\n".join(lines), budget)


def cutlass_search_summary(r: CutlassSearchResult, budget: int = DEFAULT_BUDGET_CHARS) -> str:
    more = "+" if r.text_matches_capped else ""
    built = f"; index built now in {r.index_build_s:.1f} s" if r.index_built and r.index_build_s else ""
    lines = [f"search_cutlass {r.query!r} in CUTLASS {r.version or '?'}: {r.definitions} definition(s), "
             f"{r.text_matches}{more} matching line(s) in {r.searched_files} file(s) ({r.query_ms:.0f} ms{built})."]
    if not r.hits:
        lines.append("No match. Try a shorter name or one part of it (tma, gmma, Layout_K), or kind='text'.")
    for h in r.hits:
        what = f"{h.kind} {h.symbol}" if h.symbol else "text"
        lines.append(f"- {h.path}:{h.line} [{what}] {h.snippet}")
    if r.truncated:
        lines.append(f"(the {len(r.hits)} best shown; narrow the query, use kind='definitions' or scope='include', "
                     "or raise limit)")
    if r.hits:
        lines.append("Next: read_cutlass_file(path=..., start_line=...) for the code around a hit.")
    return _clip("\n".join(lines), budget)


FILE_BUDGET_CHARS = 24000  # ~6,000 tokens: a file excerpt is read whole


def cutlass_file_summary(r: CutlassFileResult, budget: int = FILE_BUDGET_CHARS) -> str:
    head = f"{r.path} (CUTLASS {r.version or '?'}), lines {r.start_line}-{r.end_line} of {r.total_lines}:"
    out = [head]
    used = len(head)
    shown_end = r.start_line - 1
    width = len(str(max(r.end_line, 1)))
    for i, text in enumerate(r.text.split("\n") if r.text else [], start=r.start_line):
        line = f"{i:>{width}}| {text}"
        if used + len(line) + 1 > budget - 120:
            break
        out.append(line)
        used += len(line) + 1
        shown_end = i
    if shown_end < r.end_line:
        out.append(f"[... lines {shown_end + 1}-{r.end_line} are in the structured result; or call again with "
                   f"start_line={shown_end + 1}]")
    elif r.truncated and r.next_start_line:
        out.append(f"[... continues: start_line={r.next_start_line}]")
    return "\n".join(out)



def run_summary(r: RunResult, budget: int = DEFAULT_BUDGET_CHARS) -> str:
    """The `run` tool's answer: the eval summary, or the program summary in program mode."""
    if r.eval is not None:
        return eval_summary(r.eval, budget)
    assert r.program is not None
    return program_summary(r.program, budget)
