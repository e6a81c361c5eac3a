"""Memory-family rules over Nsight Compute profiles: uncoalesced global access, DRAM saturation."""

from __future__ import annotations

from collections.abc import Iterable

from kernelscope.heuristics.classify import DRAM_PCT, fp32_flops
from kernelscope.heuristics.registry import Run, rule
from kernelscope.models import Evidence, Finding, Fix, KernelProfile, SourceLineCounters
from kernelscope.models.profile import ATOMIC_EXCESS_SECTORS, INDEXED_EXCESS_SECTORS, is_toolkit_header
from kernelscope.models.profile import EXCESS_SECTORS as EXCESS

TOTAL = "memory_l2_theoretical_sectors_global"
SECTOR_BYTES = 32


def has_code(s: SourceLineCounters) -> bool:
    """Whether a line holds code: one whose text (where known) is only braces and punctuation holds the
    instructions the compiler places there (the exit at a closing brace, where warps wait for their stores to
    drain; a loop's back branch), which carry no cost of their own."""
    return s.code is None or any(c.isalnum() for c in s.code)


def hottest_source(k: KernelProfile, *counters: str) -> SourceLineCounters | None:
    """The source line with the most of these per-line counters (summed), or None when no line has any; lines
    of the user's files win over toolkit headers whenever one of them has any, and lines of code over lines of
    braces."""
    def score(s: object) -> float:
        return sum(s.counters.get(c, 0.0) for c in counters)  # type: ignore[attr-defined]

    own = [s for s in k.source_lines if not is_toolkit_header(s.file) and score(s) > 0]
    coded = [s for s in own if has_code(s)]
    best = max(coded or own or k.source_lines, key=score, default=None)
    return best if best is not None and score(best) > 0 else None


# Where a per-line counter lands: a throttle stall on the instruction whose queue is full, which is the one that
# carries the cost; a scoreboard stall on the instruction that consumes a load's result (often the next line);
# a drain stall on the kernel's exit (its closing brace). Memory traffic counts on the memory instruction itself.
GLOBAL_TRAFFIC = ("memory_l2_theoretical_sectors_global", "memory_l1_tag_requests_global")


def cost_line(k: KernelProfile, *tiers: tuple[str, ...]) -> str | None:
    """The line of the instruction that carries a cost: the hottest line by the first group of counters that any
    line has (most direct first), so a line is never placed by a counter that lands on another instruction while
    one that lands on the costly instruction itself was measured."""
    for counters in tiers:
        best = hottest_source(k, *counters)
        if best is not None:
            return best.label
    return None


def hottest_line(k: KernelProfile, *counters: str) -> str | None:
    """``hottest_source``'s label (``file:line  `code```)."""
    best = hottest_source(k, *counters)
    return best.label if best is not None else None


def share(part: float | None, whole: float | None) -> float | None:
    return 100.0 * part / whole if part is not None and whole else None


def stall_share(k: KernelProfile, reason: str) -> tuple[float | None, float]:
    """The share (%) of stall cycles spent on ``reason``, the issuing states ('selected', 'not_selected')
    left out, and its cycles per issued instruction; the share is None when the reason was not captured."""
    stalls = {r: v for r, v in k.stall_reasons.items() if r not in ("selected", "not_selected")}
    cycles = stalls.get(reason)
    return share(cycles, sum(stalls.values())), cycles or 0.0


def dram_pct(k: KernelProfile) -> float | None:
    """DRAM's throughput in % of its peak (dram__throughput); the memory system's (speed of light, which also
    counts L1/L2 and shared memory) where the capture lacks it."""
    v = k.num(DRAM_PCT)
    return v if v is not None else k.memory_throughput_pct


def _excess_from_cache(k: KernelProfile, excess: float | None, total: float | None, busier_pct: float) -> str | None:
    """Where a kernel's excess sectors cost nothing that limits it, in words; else None. They cost nothing when the
    kernel reads no more from DRAM than its ideal sectors would (the excess ones hit in L1/L2: neighbours reuse
    them, as a stencil's shifted rows do) and the caches are not its busiest unit (the memory units' peak
    throughput is not clearly above DRAM's, so L1/L2 bandwidth is not what the wasted sectors eat into)."""
    rd, wr = k.dram_bytes_read, k.dram_bytes_write
    dram_pct, mem = k.num(DRAM_PCT), k.memory_throughput_pct
    if excess is None or not total or (rd is None and wr is None) or dram_pct is None or mem is None:
        return None
    ideal = (total - excess) * SECTOR_BYTES
    dram = (rd or 0.0) + (wr or 0.0)
    if ideal <= 0 or dram > ideal or mem - dram_pct >= busier_pct:
        return None
    return (f"DRAM moved {dram / 1e6:,.1f} MB, no more than the {ideal / 1e6:,.1f} MB its ideal sectors need (the "
            "excess sectors hit in L1/L2)")


def spread_by_data(k: KernelProfile, run: Run) -> tuple[float, float] | None:
    """(the share of the excess sectors that indexed accesses move, the L1 hit rate) where that share is the
    majority and L1 hardly hits: a gather or scatter through an index (measure.sourcemap.indexed_access) whose
    fetched sectors no thread reads again. Neighbouring threads' targets are then as spread as the data; no mapping
    of threads to work coalesces them (a thread walking a run of its own re-reads its sectors, so L1 hits). None
    where the reader did not follow the SASS or the kernel does not look so."""
    excess = sum(s.counters.get(EXCESS, 0.0) for s in k.source_lines)
    indexed = sum(s.counters.get(INDEXED_EXCESS_SECTORS, 0.0) for s in k.source_lines)
    l1 = k.l1_hit_rate_pct
    if excess <= 0 or l1 is None or indexed < run.th["indexed_share"] * excess or l1 >= run.th["reused_l1_hit_pct"]:
        return None
    return indexed / excess, l1


_REMAP_FIXES = (
    Fix(action="Make consecutive threads touch consecutive addresses (index with threadIdx.x in the fastest-varying "
               "dimension; transpose the loop or the data layout, e.g. AoS -> SoA).",
        expected_effect="sectors per request fall toward 4; DRAM traffic and time drop by up to the excess factor"),
    Fix(action="Stage the access through shared memory: load a tile coalesced, then read it in the scattered order "
               "(pad to avoid bank conflicts).",
        expected_effect="global traffic becomes coalesced; the irregular part moves on-chip"),
)
_DATA_FIXES = (
    Fix(action="Where the same indices serve many passes, reorder the data once: sort or bucket the indices by "
               "target (or renumber the targets, e.g. a graph in BFS/RCM order) so that neighbouring threads touch "
               "neighbouring targets.",
        expected_effect="targets share sectors; DRAM traffic falls toward the data's own size"),
    Fix(action="Move whole records per index where the job allows (16 bytes or more a lane: a row, a struct), so each "
               "scattered sector is used in full.",
        expected_effect="the same number of scattered sectors carries more useful bytes"),
)


@rule("memory.uncoalesced-global-access", family="memory", scope="ncu",
      description="Global accesses touch more 32-byte sectors than the data they use needs; a note where the "
                  "spread is the data's (most excess sectors are a gather or scatter through an index, and L1 "
                  "hardly hits: no thread reads its sectors again, so no mapping of threads coalesces them).",
      thresholds={"warning_excess_pct": 20.0, "high_excess_pct": 50.0, "sectors_per_request": 8.0,
                  "cache_busier_pct": 10.0, "busy_sm_pct": 60.0, "idle_memory_pct": 40.0, "indexed_share": 0.5,
                  "reused_l1_hit_pct": 33.0},
      metrics=(DRAM_PCT,),
      explains=("memory.dram-saturated",))  # the wasted sectors are what fills the memory system
def _uncoalesced(k: KernelProfile, run: Run) -> Iterable[Finding]:
    excess, total = k.num(EXCESS), k.num(TOTAL)
    spr = k.global_load_sectors_per_request
    if excess is not None and total:
        pct = 100.0 * excess / total
        if pct < run.th["warning_excess_pct"]:
            return
        value, metric, threshold = round(pct, 1), "excessive_global_sectors_pct", run.th["warning_excess_pct"]
        sev = "high" if pct >= run.th["high_excess_pct"] else "warning"
        what = f"{pct:.0f}% of the {total:,.0f} L2 sectors its global accesses move are excess"
    elif spr is not None and spr >= run.th["sectors_per_request"]:
        value, metric, threshold = spr, "global_load_sectors_per_request", run.th["sectors_per_request"]
        sev = "high" if spr >= 16 else "warning"
        what = f"each warp-wide global load touches {spr:.1f} sectors (4 for coalesced 32-bit loads)"
    else:
        return
    src = hottest_source(k, EXCESS)
    line = src.label if src is not None else None
    # the line's excess is its atomics' own (an update scattered by data touches a sector per lane): the topic lets
    # memory.atomic-contention take this finding in where that rule names the same line's updates
    atomic = src is not None and 2 * src.counters.get(ATOMIC_EXCESS_SECTORS, 0.0) >= src.counters.get(EXCESS, 0.0) > 0
    cached = _excess_from_cache(k, excess, total, run.th["cache_busier_pct"])
    # compute-bound: the SM near its peak and the memory side far from its own, so the wasted sectors spend
    # bandwidth the kernel does not need
    sm, mem = k.sm_throughput_pct, k.memory_throughput_pct
    spare = (not cached and sm is not None and mem is not None and sm >= run.th["busy_sm_pct"]
             and mem < run.th["idle_memory_pct"])
    spread = spread_by_data(k, run)
    if cached or spare or spread:
        sev = "info"
    yield run.finding(
        severity=sev, kernel=k.name,  # type: ignore[arg-type]
        title="Uncoalesced global memory access", line=line, topic="atomic" if atomic else None,
        impact=min(1.0, value / 100) if metric.endswith("pct") else None,
        diagnosis=(f"{k.name}: {what}; neighbouring threads read addresses far apart, so most of every sector "
                   "fetched is wasted bandwidth" + (f" (worst line {line})" if line else "") + "."
                   + (" Most of that line's excess sectors are its atomic updates': each lane updates a target in a "
                      "sector of its own, so only ordering the updates by target (or combining them on chip first) "
                      "coalesces them." if atomic else "")
                   + (f" Here {cached}, so it costs no DRAM bandwidth and the caches are not the limit: not what "
                      "sets the time today." if cached else "")
                   + (f" The kernel is compute-bound (compute {sm:.0f}%, memory {mem:.0f}% of peak): the wasted "
                      "bandwidth is not what sets the time today." if spare else "")
                   + (f" {100 * spread[0]:.0f}% of the excess sectors are a gather or scatter through an index (an "
                      f"address loaded just before), and L1 hits only {spread[1]:.0f}% of the time, so no thread "
                      "reads those sectors again: the targets are as spread as the data, which no mapping of threads "
                      "to work changes. Only reordering the data would." if spread else "")),
        evidence=[Evidence(metric=metric, value=value, threshold=threshold, source="ncu", kernel=k.name, line=line),
                  Evidence(metric="global_load_sectors_per_request", value=spr, source="ncu", kernel=k.name)],
        fixes=list(_DATA_FIXES if spread else _REMAP_FIXES),
    )


@rule("memory.dram-saturated", family="memory", scope="ncu",
      description="The kernel runs at the DRAM roof: only moving fewer bytes helps.",
      thresholds={"memory_throughput_pct": 80.0})
def _dram(k: KernelProfile, run: Run) -> Iterable[Finding]:
    mem = k.memory_throughput_pct
    if mem is None or mem < run.th["memory_throughput_pct"]:
        return
    yield run.finding(
        severity="info", kernel=k.name,
        title="Memory system near its peak",
        diagnosis=(f"{k.name} keeps the memory system at {mem:.0f}% of peak: it is as fast as its traffic allows. "
                   "Further speed must come from moving fewer bytes, not from more parallelism."),
        evidence=[Evidence(metric="gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed", value=mem,
                           threshold=run.th["memory_throughput_pct"], unit="%", source="ncu", kernel=k.name)],
        fixes=[
            Fix(action="Fuse this kernel with its producer or consumer so intermediates stay on chip.",
                expected_effect="saves one write and one read of every intermediate"),
            Fix(action="Reuse data through shared memory or L2-friendly tiling; read each input once.",
                expected_effect="fewer DRAM bytes per result"),
            Fix(action="Use narrower types where the accuracy policy allows (fp16/bf16 storage, fp32 math).",
                expected_effect="up to 2x fewer bytes"),
        ],
    )


# ---------------------------------------------------------------------------------------- shared memory
BANK = ("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
        "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum")
WAVEFRONTS = ("l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum",
              "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum")
SHARED_INST = ("smsp__sass_inst_executed_op_shared_ld.sum", "smsp__sass_inst_executed_op_shared_st.sum")


def metric_sum(k: KernelProfile, names: Iterable[str]) -> float | None:
    vals = [k.num(n) for n in names]
    return sum(v for v in vals if v is not None) if any(v is not None for v in vals) else None


@rule("memory.shared-bank-conflicts", family="memory", scope="ncu",
      description="Shared-memory accesses of a warp hit the same bank and are split into several wavefronts. A "
                  "note where the warps hardly wait on shared memory (the replays hide behind other waits).",
      thresholds={"warning_conflict_pct": 25.0, "high_conflict_pct": 50.0, "min_wavefronts": 1000,
                  "min_shared_wait_pct": 10.0},
      metrics=(*BANK, *WAVEFRONTS, *SHARED_INST))
def _bank_conflicts(k: KernelProfile, run: Run) -> Iterable[Finding]:
    conflicts, wavefronts, inst = metric_sum(k, BANK), metric_sum(k, WAVEFRONTS), metric_sum(k, SHARED_INST)
    if conflicts is None or not wavefronts or wavefronts < run.th["min_wavefronts"]:
        return
    pct = 100.0 * conflicts / wavefronts
    if pct < run.th["warning_conflict_pct"]:
        return
    ways = wavefronts / inst if inst else None
    line = hottest_line(k, "memory_l1_wavefronts_shared_excessive", "derived__memory_l1_wavefronts_shared_excessive")
    if line is None:
        line = hottest_line(k, "smsp__pcsamp_warps_issue_stalled_mio_throttle",
                            "smsp__pcsamp_warps_issue_stalled_short_scoreboard")
    # what the warps wait on shared memory: the MIO queue (mio_throttle) and its results (short_scoreboard)
    waits = [v for v in (stall_share(k, r)[0] for r in ("mio_throttle", "short_scoreboard")) if v is not None]
    hidden = bool(waits) and sum(waits) < run.th["min_shared_wait_pct"]
    yield run.finding(
        kernel=k.name, line=line, impact=min(1.0, pct / 100) * (0.25 if hidden else 1.0),
        severity="info" if hidden else "high" if pct >= run.th["high_conflict_pct"] else "warning",
        title="Shared-memory bank conflicts",
        diagnosis=(f"{k.name}: {pct:.0f}% of the {wavefronts:,.0f} shared-memory wavefronts are bank-conflict "
                   "replays" + (f" ({ways:.1f} wavefronts per shared instruction)" if ways else "")
                   + ": threads of a warp address the same bank, so each access is serialized"
                   + (f"; worst line {line}" if line else "") + "."
                   + (f" The warps spend only {sum(waits):.0f}% of their stall cycles waiting on shared memory "
                      "(mio_throttle, short_scoreboard): the replays hide behind other waits, and removing them "
                      "gains little." if hidden else "")),
        evidence=[Evidence(metric="+".join(BANK), value=conflicts, source="ncu", kernel=k.name, line=line),
                  Evidence(metric="bank_conflict_pct_of_wavefronts", value=round(pct, 1),
                           threshold=run.th["warning_conflict_pct"], unit="%", source="ncu", kernel=k.name),
                  Evidence(metric="wavefronts_per_shared_instruction", value=round(ways, 2) if ways else None,
                           threshold=1.0, source="ncu", kernel=k.name),
                  *([Evidence(metric="mio_throttle+short_scoreboard stall share", value=round(sum(waits), 1),
                              threshold=run.th["min_shared_wait_pct"], unit="%", source="ncu", kernel=k.name)]
                    if waits else [])],
        fixes=[Fix(action="Pad the shared array's row by one element (e.g. tile[32][33]) so column accesses fall "
                          "in different banks.", expected_effect="conflicts drop to ~0; the shared pipe does 1 "
                                                                 "wavefront per access"),
               Fix(action="Or swizzle the index (col ^ row) when padding wastes too much shared memory.",
                   expected_effect="same, with no extra memory"),
               Fix(action="Access shared memory row-wise from consecutive threads where the algorithm allows.",
                   expected_effect="conflict-free by construction")],
    )


# ---------------------------------------------------------------------------------------- local memory
LOCAL = ("l1tex__t_sectors_pipe_lsu_mem_local_op_ld.sum", "l1tex__t_sectors_pipe_lsu_mem_local_op_st.sum")
GLOBAL = ("l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum", "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum")
# per-line counters that place local traffic, most direct first: Nsight Compute's sectors per line, the CUPTI
# collector's local-memory instructions per line, then where warps waited on memory (PC sampling)
LOCAL_BY_LINE = (("memory_l2_theoretical_sectors_local", "sectors", "the line that moves the most local memory"),
                 ("inst_executed_op_local", "warp instructions", "the line with the most local-memory instructions"),
                 ("smsp__pcsamp_warps_issue_stalled_long_scoreboard", "samples",
                  "the line most stalled on memory (long scoreboard)"))


@rule("memory.local-memory-traffic", family="memory", scope="ncu",
      description="Local memory (register spills, stack arrays) makes up a real share of the memory traffic.",
      thresholds={"warning_pct": 5.0, "high_pct": 25.0},
      metrics=(*LOCAL, *GLOBAL), supersedes=("ptxas.register-spills", "ptxas.local-memory-stack", "sass.local-memory"),
      context=('ptxas',), explains=("memory.dram-saturated",))
def _local(k: KernelProfile, run: Run) -> Iterable[Finding]:
    local, glob = metric_sum(k, LOCAL), metric_sum(k, GLOBAL)
    if not local:
        return
    pct = 100.0 * local / (local + (glob or 0.0))
    if pct < run.th["warning_pct"]:
        return
    ptx = run.ctx.get("ptxas", {}).get(k.mangled_name)
    ev = [Evidence(metric="+".join(LOCAL), value=local, unit="sectors", source="ncu", kernel=k.name),
          Evidence(metric="local_share_of_l1_sectors_pct", value=round(pct, 1), threshold=run.th["warning_pct"],
                   unit="%", source="ncu", kernel=k.name)]
    spill = ""
    if ptx is not None:
        ev += [Evidence(metric="spill_stores_bytes", value=ptx.spill_stores_bytes, unit="B", source="ptxas",
                        kernel=k.name),
               Evidence(metric="spill_loads_bytes", value=ptx.spill_loads_bytes, unit="B", source="ptxas",
                        kernel=k.name),
               Evidence(metric="stack_frame_bytes", value=ptx.stack_bytes, unit="B", source="ptxas",
                        kernel=k.name),
               Evidence(metric="registers", value=ptx.registers, source="ptxas", kernel=k.name)]
        if ptx.spill_stores_bytes or ptx.spill_loads_bytes:
            spill = (f"; ptxas reports {ptx.spill_stores_bytes or 0} B of spill stores and "
                     f"{ptx.spill_loads_bytes or 0} B of spill loads per thread at {ptx.registers} registers")
        elif ptx.stack_bytes:
            spill = f"; ptxas reports a {ptx.stack_bytes} B stack frame (a per-thread array in local memory)"
    line, how = None, ""
    for counter, unit, what in LOCAL_BY_LINE:  # the line that moves the most local memory, else the most stalled
        hot = hottest_source(k, counter)
        if hot is not None:
            line, how = hot.label, what
            ev.append(Evidence(metric=counter, value=hot.counters[counter], unit=unit, source="ncu", kernel=k.name,
                               line=line))
            break
    yield run.finding(
        kernel=k.name, line=line, impact=min(1.0, pct / 100),
        severity="high" if pct >= run.th["high_pct"] else "warning", title="Local-memory traffic (spills/stack)",
        diagnosis=(f"{k.name}: {pct:.0f}% of the L1 sectors it moves are local memory ({local:,.0f} sectors){spill}. "
                   "Local memory is per-thread storage in DRAM behind L1: every access costs global latency"
                   + (f"; {how} is {line}" if line else "") + "."),
        evidence=ev,
        fixes=[Fix(action="Stop the spills: relax the register cap (__launch_bounds__ min-blocks, -maxrregcount) "
                          "so ptxas keeps the values in registers.", expected_effect="local traffic disappears"),
               Fix(action="Index per-thread arrays only with compile-time constants (fully unrolled loops), or move "
                          "them to shared memory.", expected_effect="the array lives in registers or on chip"),
               Fix(action="Shorten live ranges (fewer accumulators per thread, recompute cheap values).",
                   expected_effect="fewer registers needed, so no spills at the same occupancy")],
    )


# ---------------------------------------------------------------------------------------- atomics (atomics.py)
LD_REQ, LD_SEC = "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum", "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"
# ---------------------------------------------------------------------------------------- vector width


@rule("memory.non-vectorized-access", family="memory", scope="ncu",
      description="A memory-heavy kernel moves global data 4 bytes per thread per instruction, and those loads are a "
                  "sizable share of what it issues.",
      thresholds={"max_sectors_per_request": 4.5, "min_memory_pct": 40.0, "max_excess_pct": 10.0,
                  "dram_roof_pct": 80.0, "min_global_ld_share_pct": 7.0},
      metrics=(LD_REQ, LD_SEC, "smsp__sass_inst_executed_op_global_ld.sum", "sm__inst_executed_pipe_lsu.avg."
               "pct_of_peak_sustained_active", "smsp__inst_executed.sum"),
      supersedes=("sass.scalar-global-loads",), context=('sass',))
def _nonvec(k: KernelProfile, run: Run) -> Iterable[Finding]:
    spr, mem = k.global_load_sectors_per_request, k.memory_throughput_pct
    if (spr is None or mem is None or spr > run.th["max_sectors_per_request"] or spr < 1.0
            or mem < run.th["min_memory_pct"]):
        return
    excess, total = k.num(EXCESS), k.num(TOTAL)
    if excess is not None and total and 100.0 * excess / total > run.th["max_excess_pct"]:
        return  # not a width problem: the uncoalesced rule speaks
    # 4x fewer loads save 3/4 of their issue slots: where global loads are a small share of what the kernel issues
    # (shared-memory or atomic work, arithmetic), their width cannot be what limits it
    loads, issued = k.num("smsp__sass_inst_executed_op_global_ld.sum"), k.num("smsp__inst_executed.sum")
    ld_share = 100.0 * loads / issued if loads is not None and issued else None
    if ld_share is not None and ld_share < run.th["min_global_ld_share_pct"]:
        return
    sass = run.ctx.get("sass", {}).get(k.mangled_name)
    ev = [Evidence(metric="global_load_sectors_per_request", value=spr, threshold=run.th["max_sectors_per_request"],
                   source="ncu", kernel=k.name),
          Evidence(metric="global_loads_share_of_instructions_pct", value=round(ld_share, 1) if ld_share is not None
                   else None, threshold=run.th["min_global_ld_share_pct"], unit="%", source="ncu", kernel=k.name),
          Evidence(metric="gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed", value=mem,
                   threshold=run.th["min_memory_pct"], unit="%", source="ncu", kernel=k.name),
          Evidence(metric="sm__inst_executed_pipe_lsu.avg.pct_of_peak_sustained_active",
                   value=k.num("sm__inst_executed_pipe_lsu.avg.pct_of_peak_sustained_active"), unit="%",
                   source="ncu", kernel=k.name)]
    if sass is not None:
        ev.append(Evidence(metric="global_loads_by_width_bits", value=", ".join(
            f"{w}: {n}" for w, n in sorted(sass.memory.loads_by_width.items())), source="sass", kernel=k.name))
    line = cost_line(k, ("smsp__pcsamp_warps_issue_stalled_lg_throttle",), GLOBAL_TRAFFIC,
                     ("smsp__pcsamp_warps_issue_stalled_long_scoreboard",))
    # at the DRAM roof the bytes set the time: wider accesses would save instructions, not time
    dram = k.num(DRAM_PCT)
    at_roof = dram is not None and dram >= run.th["dram_roof_pct"]
    if at_roof:
        ev.append(Evidence(metric=DRAM_PCT, value=round(dram, 1), threshold=run.th["dram_roof_pct"], unit="%",  # type: ignore[arg-type]
                           source="ncu", kernel=k.name))
    yield run.finding(
        kernel=k.name, line=line, severity="info" if at_roof else "warning",
        impact=0.02 if at_roof else 0.15, title="Scalar (32-bit) global accesses in a memory-bound kernel",
        diagnosis=(f"{k.name}: its global loads touch {spr:.1f} sectors per warp request, i.e. 4 bytes per thread "
                   f"per instruction, while the memory system runs at {mem:.0f}% of peak: 4x more load/store "
                   "instructions than 16-byte vectors need, which fills the LSU queues and limits bytes in flight"
                   + (f"; hottest line {line}" if line else "") + "."
                   + (f" DRAM already runs at {dram:.0f}% of its peak, so the bytes set the time: vector accesses "
                      "would save instructions, not time." if at_roof else "")),
        evidence=ev,
        fixes=[Fix(action="Load and store float4 (or int4 / __half2 x4): reinterpret aligned pointers as float4, "
                          "handle the remainder separately.", expected_effect="4x fewer memory instructions; a "
                                                                               "few % to 20% closer to peak bandwidth"),
               Fix(action="Process several elements per thread with independent loads before use.",
                   expected_effect="more bytes in flight per warp")],
    )


# ---------------------------------------------------------------------------------------- caches
@rule("memory.low-cache-hit-rate", family="memory", scope="ncu",
      description="Warps wait on memory while both L1 and L2 miss most of the time.",
      thresholds={"max_l1_hit_pct": 20.0, "max_l2_hit_pct": 50.0, "min_long_scoreboard_share_pct": 30.0},
      metrics=("l1tex__t_sector_hit_rate.pct", "lts__t_sector_hit_rate.pct"))
def _cache(k: KernelProfile, run: Run) -> Iterable[Finding]:
    l1, l2 = k.l1_hit_rate_pct, k.l2_hit_rate_pct
    ls, _ = stall_share(k, "long_scoreboard")
    if l1 is None or l2 is None or ls is None:
        return
    if l1 > run.th["max_l1_hit_pct"] or l2 > run.th["max_l2_hit_pct"] or ls < run.th["min_long_scoreboard_share_pct"]:
        return
    if (k.memory_throughput_pct or 0) >= 80:
        return  # at the roof: the dram-saturated finding says what to do
    yield run.finding(
        kernel=k.name, severity="info", impact=0.3,
        title="Memory stalls with low cache hit rates",
        line=hottest_line(k, "smsp__pcsamp_warps_issue_stalled_long_scoreboard"),
        diagnosis=(f"{k.name}: L1 hits {l1:.0f}% and L2 {l2:.0f}% of sectors while {ls:.0f}% of stall cycles wait "
                   "on memory: data is rarely reused on chip."),
        evidence=[Evidence(metric="l1tex__t_sector_hit_rate.pct", value=l1, threshold=run.th["max_l1_hit_pct"],
                           unit="%", source="ncu", kernel=k.name),
                  Evidence(metric="lts__t_sector_hit_rate.pct", value=l2, threshold=run.th["max_l2_hit_pct"], unit="%",
                           source="ncu", kernel=k.name),
                  Evidence(metric="long_scoreboard_stall_share_pct", value=round(ls, 1), unit="%", source="ncu",
                           kernel=k.name)],
        fixes=[Fix(action="Tile so each block reuses its inputs from shared memory (or registers) before moving on.",
                   expected_effect="fewer DRAM round trips per result"),
               Fix(action="Reorder the traversal (block swizzling, processing neighbours together) so reused data "
                          "is still in L2.", expected_effect="higher L2 hit rate")],
    )


@rule("memory.l2-thrash", family="memory", scope="ncu",
      description="L2 misses most requests although the kernel asks for more data than it fetches from DRAM.",
      thresholds={"max_l2_hit_pct": 35.0, "min_dram_pct": 30.0},
      metrics=("lts__t_sectors_srcunit_tex_op_read.sum", "lts__t_sector_hit_rate.pct",
               DRAM_PCT), explains=("memory.dram-saturated",))
def _l2(k: KernelProfile, run: Run) -> Iterable[Finding]:
    l2, req = k.l2_hit_rate_pct, k.num("lts__t_sectors_srcunit_tex_op_read.sum")
    dram, dram_pct = k.dram_bytes_read, k.num(DRAM_PCT)
    if l2 is None or req is None or not dram or dram_pct is None:
        return
    if l2 > run.th["max_l2_hit_pct"] or dram_pct < run.th["min_dram_pct"]:
        return
    ratio = req * 32 / dram  # bytes requested from L2 per byte read from DRAM
    if ratio < 1.5:
        return  # streaming: each byte is used once, so there is no reuse to lose
    yield run.finding(
        kernel=k.name, severity="warning", impact=0.4,
        title="L2 thrashing: reused data is evicted before its reuse",
        diagnosis=(f"{k.name}: the SMs request {ratio:.1f} bytes from L2 per byte read from DRAM, so data is "
                   f"reused, yet L2 hits only {l2:.0f}% and DRAM runs at {dram_pct:.0f}%: the working set between "
                   "reuses exceeds L2."),
        evidence=[Evidence(metric="lts__t_sector_hit_rate.pct", value=l2, threshold=run.th["max_l2_hit_pct"], unit="%",
                           source="ncu", kernel=k.name),
                  Evidence(metric="l2_request_bytes_per_dram_byte", value=round(ratio, 2), threshold=1.5,
                           source="ncu", kernel=k.name)],
        fixes=[Fix(action="Shrink the reuse distance: tile the traversal (e.g. grouped/swizzled block order in "
                          "GEMM-like kernels) so blocks that share data run together.",
                   expected_effect="higher L2 hit rate, less DRAM traffic"),
               Fix(action="Pin the hot buffer in L2 with an access policy window (cudaStreamSetAttribute, "
                          "cudaAccessPropertyPersisting).", expected_effect="the reused range stays resident")],
    )


# ---------------------------------------------------------------------------------------- fusion
def streams(k: KernelProfile, min_memory_pct: float, max_flops_per_byte: float) -> bool:
    """Whether a kernel streams its data through DRAM: memory near its peak and under ``max_flops_per_byte`` FP32
    FLOPs per DRAM byte (no reuse worth keeping on chip)."""
    dram = (k.dram_bytes_read or 0.0) + (k.dram_bytes_write or 0.0)
    flops = fp32_flops(k)
    return (k.memory_throughput_pct or 0.0) >= min_memory_pct and dram > 0 and flops is not None \
        and flops / dram <= max_flops_per_byte


@rule("memory.fusion-candidate", family="memory", scope="ncu",
      description="Two kernels that each stream their data through DRAM run equally often: if one consumes the "
                  "other's output, one fused kernel keeps the intermediate on chip.",
      thresholds={"min_memory_pct": 60.0, "max_flops_per_byte": 1.0, "min_launches": 2},
      context=("kernels", "launches", "total_ns"))
def _fusion(k: KernelProfile, run: Run) -> Iterable[Finding]:
    th, launches = run.th, run.ctx.get("launches", {})
    n = launches.get(k.mangled_name, 1)
    if n < th["min_launches"] or not streams(k, th["min_memory_pct"], th["max_flops_per_byte"]):
        return
    peers = [p for name, p in run.ctx.get("kernels", {}).items()
             if name != k.mangled_name and launches.get(name) == n
             and streams(p, th["min_memory_pct"], th["max_flops_per_byte"])]
    if not peers:
        return
    names = ", ".join(p.name.split("(")[0] for p in peers[:3])
    totals = run.ctx.get("total_ns", {})
    ev = [Evidence(metric="launches", value=n, threshold=th["min_launches"], source="ncu", kernel=k.name),
          Evidence(metric="gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
                   value=k.memory_throughput_pct, threshold=th["min_memory_pct"], unit="%", source="ncu",
                   kernel=k.name)]
    ev += [Evidence(metric="streaming_kernel_launched_as_often", value=p.name, source="ncu", kernel=k.name)
           for p in peers[:3]]
    both = sum(totals.get(x, 0.0) for x in [k.mangled_name, *(p.mangled_name for p in peers[:3])])
    yield run.finding(
        kernel=k.name, severity="info", impact=0.3,
        title="Fusion candidate: streaming kernels launched together",
        diagnosis=(f"{k.name.split('(')[0]} and {names} are each launched {n} times and each streams its data "
                   "through DRAM near the roof with under one FLOP per byte"
                   + (f" ({both / 1e3:.1f} us together)" if both else "")
                   + ": if one reads what the other writes, the intermediate makes a round trip through DRAM "
                   "that one fused kernel would not (the profile cannot see the data flow, only this shape)."),
        evidence=ev,
        fixes=[Fix(action=f"Fuse {k.name.split('(')[0]} with {names} into one kernel (or let torch.compile / a "
                          "fusing library do it) so each element is loaded once, transformed by both steps in "
                          "registers, and stored once.", expected_effect="one write and one read of every "
                                                                         "intermediate saved; fewer launches")],
    )
