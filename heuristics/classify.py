"""Where a kernel sits against its GPU's roofs, and which limit binds: pure functions over profiles.

The class comes from Nsight Compute's speed-of-light percentages (how close the busiest compute unit
and the busiest memory unit came to their peaks), occupancy and launch size, in that order: a unit near
its peak is where the time goes, whatever the launch looks like (a grid under one wave that keeps DRAM
at 90% is memory-bound). When both sides run near their peaks, the SM side may be nothing but the
load/store pipe issuing the memory side's own instructions: then there is one limit, not two, and the
kind of traffic names it (shared-memory instructions: compute-bound, the instructions the algorithm
issues; global accesses: memory-bound). Only when no unit is near its peak do the launch shape (a grid
under one wave, or a partial last wave that leaves a large share of the SM time idle), then the
occupancy, then the warps' waiting explain the idle time; the roofline position
(arithmetic intensity, attainable and achieved FLOP rate, time at the roof) comes from the measured
FLOPs and DRAM bytes against the GPU's peaks (:data:`PEAKS`).
"""

from __future__ import annotations

import math

from kernelscope.models import Bottleneck, Evidence, GpuPeaks, KernelProfile, Roofline

# Dense peaks at boost clock, from NVIDIA's datasheets.
PEAKS: dict[str, GpuPeaks] = {
    "H100 80GB HBM3": GpuPeaks(name="H100 SXM5 80GB", fp32_tflops=66.9, fp64_tflops=33.5, tf32_tensor_tflops=494.7,
                               fp16_tensor_tflops=989.4, dram_gbps=3350, sm_count=132),
    "H100 PCIe": GpuPeaks(name="H100 PCIe 80GB", fp32_tflops=51.2, fp64_tflops=25.6, tf32_tensor_tflops=378,
                          fp16_tensor_tflops=756, dram_gbps=2000, sm_count=114),
    "H200": GpuPeaks(name="H200 141GB", fp32_tflops=66.9, fp64_tflops=33.5, tf32_tensor_tflops=494.7,
                     fp16_tensor_tflops=989.4, dram_gbps=4800, sm_count=132),
    "A100": GpuPeaks(name="A100 SXM4 80GB", fp32_tflops=19.5, fp64_tflops=9.7, tf32_tensor_tflops=156,
                     fp16_tensor_tflops=312, dram_gbps=2039, sm_count=108),
    "L40S": GpuPeaks(name="L40S", fp32_tflops=91.6, fp64_tflops=1.4, tf32_tensor_tflops=183,
                     fp16_tensor_tflops=362, dram_gbps=864, sm_count=142),
    "RTX 4090": GpuPeaks(name="GeForce RTX 4090", fp32_tflops=82.6, fp64_tflops=1.3, tf32_tensor_tflops=82.6,
                         fp16_tensor_tflops=165.2, dram_gbps=1008, sm_count=128),
}

SOL_HIGH_PCT = 60.0  # a unit this close to its peak is the limiter
SOL_GAP_PCT = 10.0  # both near their peaks and closer than this: mixed
MIN_WAVES = 1.0  # fewer waves than this: the grid cannot fill the GPU
MIN_DURATION_NS = 5_000.0  # shorter kernels are dominated by launch overhead and tails
LOW_OCCUPANCY_PCT = 50.0  # at most this theoretical occupancy, with both units idle: too few warps
TAIL_IDLE_PCT = 25.0  # a partial last wave idling this share of the SM time (launch.tail-effect's threshold)
TAIL_MAX_WAVES = 4.0  # beyond this many waves a partial one costs little (launch.tail-effect's bound)
LSU_CARRIES_PCT = 5.0  # the LSU pipe within this of the SM's throughput carries it: the SM side is memory instructions

SATURATED_ISSUE_PCT = 80.0  # the schedulers issue in this share of their SM's active cycles: no slack while it runs
SATURATED_WHILE_BUSY_PCT = 80.0  # a per-SM unit's elapsed throughput over the busy share of the SM time, at least this
DRAM_PCT = "dram__throughput.avg.pct_of_peak_sustained_elapsed"
ISSUE_ACTIVE = "smsp__issue_active.avg.pct_of_peak_sustained_active"
LSU_PIPE = "sm__inst_executed_pipe_lsu.avg.pct_of_peak_sustained_active"
SHARED_INST = ("smsp__sass_inst_executed_op_shared_ld.sum", "smsp__sass_inst_executed_op_shared_st.sum")
# global loads stand for the global side: they are the bulk of a kernel's global memory instructions, and every
# capture (Nsight Compute's or the CUPTI collector's deep launches) counts them
GLOBAL_INST = ("smsp__sass_inst_executed_op_global_ld.sum",)
# what the both-sides-busy case needs besides the speed of light: analyze's deep stage collects them for a kernel
# the light stage found "mixed", and the class is taken again from the merged profile
# the pipes an SM figure could otherwise be: issue-bound work (every pipe at half rate or faster needs at least half
# its own figure in issue slots) and the slower pipes that can run near their peak on few issues
ISSUE_SIDE = (ISSUE_ACTIVE, LSU_PIPE, "sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active",
              "sm__inst_executed_pipe_fp64.avg.pct_of_peak_sustained_active",
              "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active")
DATA_PATH_SHARE = 0.5  # issue and every such pipe at most this share of the SM figure: the SM figure is its data path
REFINE_METRICS = [*ISSUE_SIDE, *SHARED_INST, *GLOBAL_INST]


def peaks_for(device: str | None) -> GpuPeaks | None:
    if not device:
        return None
    for key, p in PEAKS.items():
        if key.lower() in device.lower():
            return p
    return None


def fp32_flops(k: KernelProfile) -> float | None:
    cycles = k.num("smsp__cycles_elapsed.avg") or k.num("sm__cycles_elapsed.avg")
    ffma = k.num("smsp__sass_thread_inst_executed_op_ffma_pred_on.sum.per_cycle_elapsed")
    fadd = k.num("smsp__sass_thread_inst_executed_op_fadd_pred_on.sum.per_cycle_elapsed")
    fmul = k.num("smsp__sass_thread_inst_executed_op_fmul_pred_on.sum.per_cycle_elapsed")
    if cycles is None or (ffma is None and fadd is None and fmul is None):
        return None
    return (2 * (ffma or 0.0) + (fadd or 0.0) + (fmul or 0.0)) * cycles


def roofline(k: KernelProfile, peaks: GpuPeaks) -> Roofline:
    rd, wr = k.dram_bytes_read, k.dram_bytes_write
    dram = (rd or 0.0) + (wr or 0.0) if rd is not None or wr is not None else None
    return roofline_from(fp32_flops(k), dram, k.duration_ns, peaks)


def roofline_from(flops: float | None, dram: float | None, t: float | None, peaks: GpuPeaks) -> Roofline:
    """Roofline position from FLOPs, DRAM bytes and time (ns): measured, or analytic for a reference
    problem (the ceiling an optimizer aims at)."""
    ridge = peaks.fp32_tflops * 1e12 / (peaks.dram_gbps * 1e9)
    ai = flops / dram if flops is not None and dram else None
    attainable = min(peaks.fp32_tflops, ai * peaks.dram_gbps / 1e3) if ai is not None else None
    achieved = flops / t / 1e3 if flops is not None and t else None
    bw = dram / t if dram is not None and t else None  # bytes/ns = GB/s
    roof_ns = None
    if flops is not None or dram is not None:
        roof_ns = max((flops or 0.0) / (peaks.fp32_tflops * 1e3), (dram or 0.0) / peaks.dram_gbps)
    return Roofline(flops=flops, dram_bytes=dram, arithmetic_intensity=ai, ridge_point=round(ridge, 2),
                    attainable_tflops=attainable, achieved_tflops=achieved, achieved_dram_gbps=bw,
                    roofline_time_ns=roof_ns, fraction_of_roofline=roof_ns / t if roof_ns and t else None)


def classify(k: KernelProfile) -> Bottleneck:
    sm, mem = k.sm_throughput_pct, k.memory_throughput_pct
    peaks = peaks_for(k.device)
    roof = roofline(k, peaks) if peaks else None
    ev = [Evidence(metric="sm__throughput.avg.pct_of_peak_sustained_elapsed", value=sm, threshold=SOL_HIGH_PCT,
                   unit="%", source="ncu", kernel=k.name),
          Evidence(metric="gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed", value=mem,
                   threshold=SOL_HIGH_PCT, unit="%", source="ncu", kernel=k.name)]

    def out(cls: str, conf: float, why: str, extra: list[Evidence] | None = None) -> Bottleneck:
        return Bottleneck(kernel=k.name, cls=cls, confidence=round(max(0.0, min(1.0, conf)), 2),  # type: ignore[arg-type]
                          sm_throughput_pct=sm, memory_throughput_pct=mem, roofline=roof, peaks=peaks,
                          evidence=ev + (extra or []), reasoning=why)

    if sm is None or mem is None:
        return out("mixed", 0.0, "speed-of-light metrics missing from the capture (capture the SpeedOfLight "
                                 "section); no class can be given with evidence")
    if mem >= SOL_HIGH_PCT and sm >= SOL_HIGH_PCT and abs(mem - sm) < SOL_GAP_PCT:
        one = _one_limit(k, sm)
        if one is not None:
            cls, why, extra = one
            return out(cls, 0.5 + (min(sm, mem) - SOL_HIGH_PCT) / 100, why, extra)
        return out("mixed", 0.6 + (min(sm, mem) - SOL_HIGH_PCT) / 100,
                   f"both memory ({mem:.0f}%) and compute ({sm:.0f}%) run near their peaks")
    tail = saturated_tail(k)  # a busy per-SM unit behind a partial last wave: the tail is what is left
    if tail is not None:
        idle, why, extra = tail
        side, pct = ("memory", mem) if mem >= sm else ("compute", sm)
        return out("launch/tail-limited", 0.6,
                   f"{side} units at {pct:.0f}% of peak over the whole run, but {why}, and the partial last wave "
                   f"leaves about {idle:.0f}% of the SM time idle: the tail is the time left to win", extra)
    if max(mem, sm) >= SOL_HIGH_PCT and mem >= sm:  # the unit near its peak sets the time, whatever else shows
        return out("memory-bound", 0.5 + (mem - SOL_HIGH_PCT) / 80 + (mem - sm) / 200,
                   f"memory units at {mem:.0f}% of peak vs compute at {sm:.0f}%: bytes moved set the time")
    if max(mem, sm) >= SOL_HIGH_PCT:
        return out("compute-bound", 0.5 + (sm - SOL_HIGH_PCT) / 80 + (sm - mem) / 200,
                   f"compute units at {sm:.0f}% of peak vs memory at {mem:.0f}%: instructions set the time")
    # no unit near its peak: the launch shape, then occupancy, then latency explain the idle time
    waves, dur = k.waves_per_sm, k.duration_ns
    idle = tail_idle_pct(waves)
    if idle is not None and idle >= TAIL_IDLE_PCT:
        extra = [Evidence(metric="launch__waves_per_multiprocessor", value=round(waves or 0.0, 3), source="ncu",
                          kernel=k.name),
                 Evidence(metric="idle_share_pct", value=round(idle, 1), threshold=TAIL_IDLE_PCT, unit="%",
                          source="ncu", kernel=k.name)]
        return out("launch/tail-limited", 0.7,
                   f"neither unit is busy (compute {sm:.0f}%, memory {mem:.0f}%) and the grid runs {waves:.2f} waves: "
                   f"the partial last wave leaves about {idle:.0f}% of the SM time idle", extra)
    if (waves is not None and waves < MIN_WAVES) or (dur is not None and dur < MIN_DURATION_NS):
        extra = [Evidence(metric="launch__waves_per_multiprocessor", value=waves, threshold=MIN_WAVES, source="ncu",
                          kernel=k.name),
                 Evidence(metric="gpu__time_duration.sum", value=dur, threshold=MIN_DURATION_NS, unit="ns",
                          source="ncu", kernel=k.name)]
        return out("launch/tail-limited", 0.8,
                   f"{waves if waves is not None else '?'} waves per SM over {dur or 0:.0f} ns: the launch is too "
                   "small or short to fill the GPU, so launch overhead and the tail dominate", extra)
    ach, theo = k.achieved_occupancy_pct, k.theoretical_occupancy_pct
    if theo is not None and (theo <= LOW_OCCUPANCY_PCT or (ach is not None and ach <= 0.6 * theo)):
        extra = [Evidence(metric="sm__maximum_warps_per_active_cycle_pct", value=theo, threshold=LOW_OCCUPANCY_PCT,
                          unit="%", source="ncu", kernel=k.name),
                 Evidence(metric="sm__warps_active.avg.pct_of_peak_sustained_active", value=ach, unit="%",
                          source="ncu", kernel=k.name)]
        return out("occupancy-limited", 0.6,
                   f"neither unit is busy (compute {sm:.0f}%, memory {mem:.0f}%) and too few warps are resident "
                   f"(theoretical {theo:.0f}%, achieved {ach if ach is not None else float('nan'):.0f}%) to hide "
                   "latency", extra)
    top = next(iter(k.stall_reasons.items()), None)
    extra = [Evidence(metric=f"stall:{top[0]}", value=top[1], unit="cycles/issue", source="ncu", kernel=k.name)] \
        if top else []
    return out("latency-bound", 0.6,
               f"neither unit is busy (compute {sm:.0f}%, memory {mem:.0f}%) although occupancy is adequate: "
               f"warps wait" + (f", mostly on {top[0]}" if top else ""), extra)


def saturated_tail(k: KernelProfile) -> tuple[float, str, list[Evidence]] | None:
    """:func:`_saturated_tail` for a kernel whose busier side reaches SOL_HIGH_PCT over the run and that is not
    near both peaks at once (mixed, classify's earlier case): exactly the classifier's saturated-tail case, which
    launch.tail-effect's severity follows. None otherwise."""
    sm, mem = k.sm_throughput_pct, k.memory_throughput_pct
    if sm is None or mem is None or max(mem, sm) < SOL_HIGH_PCT:
        return None
    if mem >= SOL_HIGH_PCT and sm >= SOL_HIGH_PCT and abs(mem - sm) < SOL_GAP_PCT:
        return None
    return _saturated_tail(k, memory_side=mem >= sm)


def _saturated_tail(k: KernelProfile, *, memory_side: bool) -> tuple[float, str, list[Evidence]] | None:
    """(idle share, why the SMs are saturated while busy, evidence) where a partial last wave idles a tail's share
    of the SM time behind blocks that leave their SMs no slack while they run: the elapsed-time throughputs count
    the idle SMs, so the tail, not the work, keeps the kernel from its peak. No slack while busy: the schedulers
    issue in SATURATED_ISSUE_PCT of their active cycles, or a per-SM unit's elapsed throughput over the busy
    share of the SM time reaches SATURATED_WHILE_BUSY_PCT. The SM's own units count (its pipes; its L1 and shared
    memory, where DRAM is not near its peak); DRAM does not, as it is shared and fewer SMs can still keep it
    busy, so a ``memory_side`` kernel (its memory figure the busier) counts only where DRAM is measured under
    SOL_HIGH_PCT (its memory figure is then the SM's own traffic). The idle share is the wave model's (blocks of
    equal length), capped by what the measured throughput leaves: a unit at 85% over the run leaves at most 15%
    idle (a block alone in the tail ran faster than in a full wave), and a tail under TAIL_IDLE_PCT costs too
    little to name the class. None otherwise."""
    idle, dram = tail_idle_pct(k.waves_per_sm), k.num(DRAM_PCT)
    own_memory = dram is not None and dram < SOL_HIGH_PCT  # the memory figure is then the SM's own L1/shared traffic
    if idle is None or (memory_side and not own_memory):
        return None
    issue = k.num(ISSUE_ACTIVE)
    units = {"compute": k.sm_throughput_pct}
    if own_memory:
        units["L1/shared-memory"] = k.memory_throughput_pct
    name, elapsed = max(((n, v) for n, v in units.items() if v is not None), key=lambda nv: nv[1],
                        default=("", None))
    if elapsed is not None:
        idle = min(idle, 100.0 - elapsed)
    if idle < TAIL_IDLE_PCT:
        return None
    busy = 100.0 - idle
    while_busy = 100.0 * elapsed / busy if elapsed is not None else None
    ev = [Evidence(metric="launch__waves_per_multiprocessor", value=round(k.waves_per_sm or 0.0, 3), source="ncu",
                   kernel=k.name),
          Evidence(metric="idle_share_pct", value=round(idle, 1), threshold=TAIL_IDLE_PCT, unit="%", source="ncu",
                   kernel=k.name),
          Evidence(metric=ISSUE_ACTIVE, value=round(issue, 1) if issue is not None else None,
                   threshold=SATURATED_ISSUE_PCT, unit="%", source="ncu", kernel=k.name),
          Evidence(metric=f"{name}_throughput_while_busy_pct".replace("/", "_").replace("-", "_"),
                   value=round(while_busy, 1) if while_busy is not None else None,
                   threshold=SATURATED_WHILE_BUSY_PCT, unit="%", source="ncu", kernel=k.name)]
    if issue is not None and issue >= SATURATED_ISSUE_PCT:
        return idle, (f"the schedulers issue in {issue:.0f}% of the cycles their SM is active (no slack while the "
                      "blocks run)"), ev
    if while_busy is not None and while_busy >= SATURATED_WHILE_BUSY_PCT:
        return idle, (f"over the {busy:.0f}% of the SM time the SMs are busy, the {name} units run at about "
                      f"{min(while_busy, 100.0):.0f}% of their peak (no slack while the blocks run)"), ev
    return None


def tail_idle_pct(waves: float | None, max_waves: float = TAIL_MAX_WAVES) -> float | None:
    """The share of the SM time a partial last wave leaves idle, for 1 to ``max_waves`` waves of blocks of equal
    length (None outside that range: under one wave the grid is too small, beyond it the tail is short). The
    classifier and launch.tail-effect both read it."""
    if waves is None or waves < 1.0 or waves > max_waves:
        return None
    full = math.ceil(waves - 1e-9)
    return 100.0 * (full - waves) / full


def _one_limit(k: KernelProfile, sm: float) -> tuple[str, str, list[Evidence]] | None:
    """Both sides near their peaks, but one limit: the SM's throughput is the LSU pipe issuing the memory side's
    own instructions, or its data path moving their bytes (issue and every pipe at most DATA_PATH_SHARE of the
    SM figure: wide loads move many bytes for each instruction). The class follows the traffic those
    instructions make (shared memory or global); None when the SM side is something else (a math pipe: a true
    balance) or the counts are missing."""
    lsu = k.num(LSU_PIPE)
    if lsu is None:
        return None
    side = [k.num(m) for m in ISSUE_SIDE]
    # the SM figure with no instruction stream behind it: the L1 and the return of loaded data to the registers,
    # which carry the memory side's own traffic (wide loads: many bytes for each instruction issued)
    data_path = all(v is not None for v in side) and max(v or 0.0 for v in side) <= DATA_PATH_SHARE * sm
    if lsu < sm - LSU_CARRIES_PCT and not data_path:
        return None
    shared = [k.num(m) for m in SHARED_INST]
    glob = [k.num(m) for m in GLOBAL_INST]
    if any(v is None for v in shared + glob):
        return None
    n_shared, n_global = sum(v or 0.0 for v in shared), sum(v or 0.0 for v in glob)
    if n_shared + n_global <= 0:
        return None
    extra = [Evidence(metric=LSU_PIPE, value=round(lsu, 1), threshold=round(sm - LSU_CARRIES_PCT, 1), unit="%",
                      source="ncu", kernel=k.name),
             Evidence(metric="shared_memory_instructions", value=n_shared, source="ncu", kernel=k.name),
             Evidence(metric="global_memory_instructions", value=n_global, source="ncu", kernel=k.name)]
    if data_path and lsu < sm - LSU_CARRIES_PCT:
        issue = k.num(ISSUE_ACTIVE) or 0.0
        extra.insert(0, Evidence(metric=ISSUE_ACTIVE, value=round(issue, 1), threshold=round(DATA_PATH_SHARE * sm, 1),
                                 unit="%", source="ncu", kernel=k.name))
        carrier = (f"the SM's figure ({sm:.0f}%) is its memory data path, not its instructions (issue {issue:.0f}%, "
                   f"load/store pipe {lsu:.0f}%, no pipe above half the figure)")
    else:
        carrier = f"the SM's busiest pipe is the load/store unit ({lsu:.0f}%)"
    if n_shared >= n_global:
        return ("compute-bound", f"{carrier} issuing shared-memory instructions, and the memory side is that same "
                "shared-memory traffic: one limit, the number of shared-memory instructions (and the barriers "
                "between them) the algorithm issues", extra)
    return ("memory-bound", f"{carrier} moving global accesses, and the memory side is their traffic: one limit, the "
            "bytes and requests those accesses move", extra)
