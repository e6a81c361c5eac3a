"""Stall-family rules: the dominant warp-stall reason and what it means."""

from __future__ import annotations

from collections.abc import Iterable

from kernelscope.heuristics.compute import ISSUE
from kernelscope.heuristics.memory import DRAM_PCT, GLOBAL_TRAFFIC, cost_line, dram_pct, hottest_line, stall_share
from kernelscope.heuristics.registry import Run, add_explains, rule
from kernelscope.models import Evidence, Finding, Fix, KernelProfile, KernelSassStats
from kernelscope.models.profile import BARRIER_AFTER_POLL, POLL_INST

# reason -> (meaning, [(fix, expected effect), ...])
_MEANING: dict[str, tuple[str, list[tuple[str, str]]]] = {
    "long_scoreboard": ("warps wait for global/local memory (L1TEX) results", [
        ("Raise memory-level parallelism: more independent loads in flight per thread (unroll, load several "
         "elements before using them) or more resident warps.", "hides DRAM latency; fewer idle issue slots"),
        ("Use vector loads (float4) and cache reused data in shared memory.", "fewer, wider requests"),
    ]),
    "short_scoreboard": ("warps wait for shared memory or MUFU (special function) results", []),  # see _mio_fixes
    "barrier": ("warps wait at __syncthreads for the slowest warp of the block", [
        ("Use warp shuffles for reductions and fewer block-wide barriers; balance work across warps.",
         "warps stop idling at barriers"),
    ]),
    "mio_throttle": ("the MIO instruction queue (shared memory, special math, dynamic branches) is full",
                     []),  # see _mio_fixes
    "lg_throttle": ("the local/global instruction queue is full", [
        ("Use wider loads (float4) so fewer instructions move the same bytes; avoid local memory.",
         "fewer LSU instructions"),
    ]),
    "math_pipe_throttle": ("a math pipe is saturated (the kernel is compute bound on it)", [
        ("Move the work to a faster pipe: tensor cores for matrix products, FP32 instead of FP64, fewer "
         "conversions.", "more math per cycle"),
    ]),
    "wait": ("warps wait on fixed-latency dependencies between instructions", [
        ("Interleave independent work (more accumulators, unrolling) so consecutive instructions do not "
         "depend on each other.", "more instruction-level parallelism"),
    ]),
    "branch_resolving": ("warps wait for branch targets (divergence or many branches)", [
        ("Make branches warp-uniform or predicate short paths.", "fewer divergent branches"),
    ]),
    "drain": ("warps wait for memory stores to drain at exit", [
        ("Combine stores (vectorize) and avoid store-heavy epilogues.", "shorter tail at exit"),
    ]),
    "membar": ("warps wait at memory fences", [("Remove unnecessary __threadfence / fences.", "fewer fence waits")]),
    "imc_miss": ("warps wait on the constant cache", [
        ("Keep constant-memory accesses uniform across the warp.", "fewer constant cache misses"),
    ]),
}
# the causes a stall reason's wait can have, as rules name them: a finding of one of these rules (with its
# topic) explains the stall, so it merges the dominant-stall finding into its own (registry.merge)
EXPLAINED_BY: dict[str, tuple[str, ...]] = {
    "long_scoreboard": ("memory.uncoalesced-global-access", "memory.non-vectorized-access",
                        "memory.local-memory-traffic",
                        "memory.low-cache-hit-rate", "memory.l2-thrash", "latency.dependent-loads",
                        "occupancy.register-limited", "occupancy.low-theoretical",
                        "occupancy.achieved-below-theoretical"),
    "lg_throttle": ("memory.non-vectorized-access", "memory.uncoalesced-global-access", "memory.local-memory-traffic",
                    "memory.atomic-contention"),
    "mio_throttle": ("memory.shared-bank-conflicts", "compute.special-functions"),
    "short_scoreboard": ("memory.shared-bank-conflicts", "compute.special-functions"),
    "math_pipe_throttle": ("compute.fp64-pipe", "sass.fp64-in-kernel", "compute.tensor-cores-unused",
                           "compute.special-functions"),
    "branch_resolving": ("control.warp-divergence",),
    "membar": ("memory.atomic-contention",),
    "drain": ("memory.atomic-contention",),
}


def link_stall_causes() -> None:
    """Declare, on each rule EXPLAINED_BY names, the stall reasons its finding explains."""
    for reason, causes in EXPLAINED_BY.items():
        for cause in causes:
            add_explains(cause, [f"stalls.dominant-stall-reason:{reason}"])


def _mio_fixes(k: KernelProfile, sass: KernelSassStats | None) -> list[tuple[str, str]]:
    """Advice for MIO-queue stalls (mio_throttle, short_scoreboard) that fits what the kernel issues: shared memory
    only where it has any, special functions only where it runs them."""
    shared = (k.shared_mem_static_bytes or 0) + (k.shared_mem_dynamic_bytes or 0) > 0 or bool(
        sass and (sass.opcodes.get("LDS", 0) or sass.opcodes.get("STS", 0)))
    xu = k.num("sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active")
    mufu = (sass.special_function_instructions if sass else 0) or (xu or 0) >= 10
    out = []
    if shared:
        out.append(("Issue fewer, wider shared-memory accesses (vectorize, keep reused values in registers) and "
                    "remove bank conflicts (pad or swizzle the arrays).", "less MIO pressure from shared memory"))
    if mufu:
        out.append(("Hoist transcendentals and divisions out of loops, reuse their results, or use cheaper forms "
                    "(exp2f with a prescaled argument, __frcp_rn, polynomial approximations on the FMA pipe).",
                    "fewer MUFU instructions in the MIO queue"))
    if not out:
        out.append(("The kernel allocates no shared memory and shows no special-function work: look for the other "
                    "MIO instructions on the worst line (dynamic branches such as switch tables or virtual calls, "
                    "warp shuffles and votes in loops) and issue fewer of them.", "less MIO pressure"))
    return out


# the unit a stall reason waits on, and the speed-of-light figure that says how busy it is: where that unit runs
# near its peak, the wait is the unit's throughput limit (the class and the unit's own findings say so), not a
# separate problem
_WAITS_ON = {"long_scoreboard": "memory", "lg_throttle": "memory", "drain": "memory", "short_scoreboard": "memory",
             "mio_throttle": "memory", "math_pipe_throttle": "compute"}


def _unit_waited_on(k: KernelProfile, reason: str) -> tuple[str, float | None]:
    """(the unit, its throughput in % of peak) for a stall reason that waits on one; ('', None) otherwise.
    short_scoreboard and mio_throttle wait on the MIO units (shared memory, whose throughput the memory figure
    includes); math_pipe_throttle on a compute pipe."""
    unit = _WAITS_ON.get(reason)
    if unit == "memory":
        return "memory system", k.memory_throughput_pct
    if unit == "compute":
        return "busiest compute pipe", k.sm_throughput_pct
    return "", None


_IGNORED = {"selected", "not_selected", "sleeping", "no_instruction", "misc", "dispatch_stall", "tex_throttle",
            "gmma"}


@rule("stalls.dominant-stall-reason", family="stalls", scope="ncu",
      description="One warp-stall reason accounts for most of the time warps spend not issuing; a note where the unit "
                  "waited on is the kernel's limiter (near its peak) or where the schedulers issue almost every "
                  "cycle anyway (other warps hide the wait).",
      thresholds={"min_share_pct": 40.0, "min_cycles_per_issue": 1.0, "saturated_unit_pct": 60.0,
                  "hidden_issue_pct": 80.0},
      metrics=(ISSUE,), context=("sass",))
def _dominant(k: KernelProfile, run: Run) -> Iterable[Finding]:
    stalls = {r: v for r, v in k.stall_reasons.items() if r not in ("selected",)}
    total = sum(stalls.values())
    if total <= 0:
        return
    reason, cycles = max(((r, v) for r, v in stalls.items() if r not in _IGNORED), key=lambda kv: kv[1],
                         default=(None, 0.0))
    if reason is None or reason not in _MEANING or reason == "barrier":  # barrier: stalls.barrier-heavy
        return
    share = 100.0 * cycles / total
    if share < run.th["min_share_pct"] or cycles < run.th["min_cycles_per_issue"]:
        return
    meaning, fixes = _MEANING[reason]
    if reason in ("mio_throttle", "short_scoreboard"):
        fixes = _mio_fixes(k, run.ctx.get("sass", {}).get(k.mangled_name))
    unit, busy = _unit_waited_on(k, reason)
    # the unit waited on near its peak (the classifier's "near": the class already names it as the limit)
    saturated = busy is not None and busy >= run.th["saturated_unit_pct"]
    issue = k.num(ISSUE)
    hidden = not saturated and issue is not None and issue >= run.th["hidden_issue_pct"]
    sampled = (f"smsp__pcsamp_warps_issue_stalled_{reason}",)
    # drain samples sit on the exit: the stores it waits for are the lines that move global memory
    line = cost_line(k, GLOBAL_TRAFFIC, sampled) if reason == "drain" else cost_line(k, sampled)
    yield run.finding(
        severity="info" if saturated or hidden else "warning" if share < 70 else "high",
        kernel=k.name, line=line, impact=round(share / 100, 3), title=f"Dominant stall: {reason.replace('_', ' ')}",
        topic=reason,
        diagnosis=(f"{k.name}: {share:.0f}% of stall cycles are '{reason}' ({cycles:.1f} cycles per issued "
                   f"instruction): {meaning}" + (f"; worst line {line}" if line else "") + "."
                   + (f" The {unit} already runs at {busy:.0f}% of peak, so this wait is that unit's limit "
                      "itself." if saturated else "")
                   + (f" The schedulers still issue in {issue:.0f}% of cycles: other warps hide the wait." if hidden
                      else "")),
        evidence=[Evidence(metric=f"smsp__average_warps_issue_stalled_{reason}_per_issue_active.ratio",
                           value=cycles, unit="cycles/issue", source="ncu", kernel=k.name, line=line),
                  Evidence(metric="stall_share_pct", value=round(share, 1), threshold=run.th["min_share_pct"], unit="%",
                           source="ncu", kernel=k.name)],
        fixes=[Fix(action=a, expected_effect=e) for a, e in fixes],
    )


BARRIER_SAMPLES = "smsp__pcsamp_warps_issue_stalled_barrier"
SAMPLES = "smsp__pcsamp_sample_count"


def waits_on_other_blocks(k: KernelProfile) -> tuple[float, str | None] | None:
    """How much of the kernel's barrier wait is its blocks waiting for other blocks: (the share, the polling line).

    A block that polls other blocks' results (a decoupled look-back, a ticket: the lines that run
    models.profile.POLL_INST instructions) does so with a few warps while the rest of the block waits at the next
    barrier. Two measures, the larger counts: the barrier samples at barriers that end a polling phase
    (models.profile.BARRIER_AFTER_POLL) over all barrier samples; and, where that is not known, each warp sample on a
    polling line standing for (warps per block - 1) samples at a barrier. None where no line polls or nothing was
    sampled."""
    polling = [s for s in k.source_lines if s.counters.get(POLL_INST)]
    barrier = sum(s.counters.get(BARRIER_SAMPLES, 0.0) for s in k.source_lines)
    if not polling or barrier <= 0 or not k.block_size:
        return None
    warps = -(-k.block_size // 32)
    polled = sum(s.counters.get(SAMPLES, 0.0) for s in polling)
    after = sum(s.counters.get(BARRIER_AFTER_POLL, 0.0) for s in k.source_lines)
    top = max(polling, key=lambda s: s.counters.get(SAMPLES, 0.0))
    return min(1.0, max(after / barrier, (warps - 1) * polled / barrier)), top.label


@rule("stalls.cross-block-wait", family="stalls", scope="ncu",
      description="Most of the warps' wait at __syncthreads is their block waiting for other blocks (a decoupled "
                  "look-back or a ticket, whose polling lines show it): a note while memory or compute stays busy, a "
                  "warning where both idle (blocks close to serialized). Replaces the barrier finding it explains.",
      thresholds={"min_share_pct": 25.0, "dram_roof_pct": 80.0, "min_explained": 0.5, "busy_pct": 40.0},
      metrics=(DRAM_PCT,), supersedes=("stalls.barrier-heavy",))
def _cross_block(k: KernelProfile, run: Run) -> Iterable[Finding]:
    pct, _ = stall_share(k, "barrier")
    mem = dram_pct(k)
    if pct is None or pct < run.th["min_share_pct"] or (mem is not None and mem >= run.th["dram_roof_pct"]):
        return  # no barrier finding to explain, or its own DRAM-roof note says it already
    cross = waits_on_other_blocks(k)
    if cross is None or cross[0] < run.th["min_explained"]:
        return
    share, poll_line = cross
    # other blocks' work overlaps the wait where either side of the GPU stays busy
    busy = max(k.memory_throughput_pct or 0.0, k.sm_throughput_pct or 0.0) >= run.th["busy_pct"]
    yield run.finding(
        kernel=k.name, line=poll_line, impact=0.05 if busy else round(pct / 100, 3),
        severity="info" if busy else "warning", title="Barrier waits are waits on other blocks",
        diagnosis=(f"{k.name}: {pct:.0f}% of stall cycles are warps waiting at __syncthreads, and about "
                   f"{100 * share:.0f}% of that wait is the block waiting for earlier blocks' results: a few warps "
                   f"poll them (volatile or acquire loads, back-off sleeps) at {poll_line} while the rest of the "
                   "block waits at the barrier after it. That is the cost of a single-pass algorithm (decoupled "
                   "look-back, tickets), not of the barriers themselves"
                   + (f"; memory still runs at {k.memory_throughput_pct or 0.0:.0f}% and compute at "
                      f"{k.sm_throughput_pct or 0.0:.0f}% of their peaks, so other blocks' work overlaps the wait."
                      if busy else
                      f"; memory runs at only {k.memory_throughput_pct or 0.0:.0f}% and compute at "
                      f"{k.sm_throughput_pct or 0.0:.0f}% of their peaks, so blocks spend much of their time waiting "
                      "in line: they are close to serialized.")),
        evidence=[Evidence(metric="barrier_stall_share_pct", value=round(pct, 1), threshold=run.th["min_share_pct"],
                           unit="%", source="ncu", kernel=k.name),
                  Evidence(metric="barrier_wait_explained_by_polling", value=round(share, 2),
                           threshold=run.th["min_explained"], source="ncu", kernel=k.name, line=poll_line),
                  Evidence(metric="gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
                           value=k.memory_throughput_pct, threshold=run.th["busy_pct"], unit="%",
                           source="ncu", kernel=k.name),
                  Evidence(metric="sm__throughput.avg.pct_of_peak_sustained_elapsed",
                           value=k.sm_throughput_pct, threshold=run.th["busy_pct"], unit="%",
                           source="ncu", kernel=k.name)],
        fixes=[Fix(action="Publish each tile's own aggregate before its look-back, and let the look-back read a warp's "
                          "worth of predecessors at once (one ballot over 32 descriptors).",
                   expected_effect="later blocks stop waiting on earlier blocks' look-backs"),
               Fix(action="Give each block a larger tile (more elements per thread) so one wait covers more work, and "
                          "keep several blocks resident per SM so their loads overlap the wait.",
                   expected_effect="the wait is amortized and hidden")],
    )


@rule("stalls.barrier-heavy", family="stalls", scope="ncu",
      description="Warps spend a large share of their stalls waiting at __syncthreads; a note where DRAM already "
                  "runs near its peak (the warps wait there for the block's loads, which DRAM delivers as fast as "
                  "it can).",
      thresholds={"min_share_pct": 25.0, "high_share_pct": 40.0, "dram_roof_pct": 80.0},
      metrics=("launch__barrier_count", "smsp__inst_executed_op_bar.sum", DRAM_PCT))
def _barrier(k: KernelProfile, run: Run) -> Iterable[Finding]:
    pct, cycles = stall_share(k, "barrier")
    if pct is None or cycles <= 0 or pct < run.th["min_share_pct"]:
        return
    line = hottest_line(k, BARRIER_SAMPLES)
    # at the DRAM roof (memory.dram-saturated's threshold) a barrier after a tile's loads waits for bytes DRAM
    # already moves near its peak: fewer or cheaper barriers would not move them faster
    mem = dram_pct(k)
    at_roof = mem is not None and mem >= run.th["dram_roof_pct"]
    yield run.finding(
        kernel=k.name, line=line, impact=round(pct / 100, 3) if not at_roof else 0.05,
        severity="info" if at_roof else "high" if pct >= run.th["high_share_pct"] else "warning",
        title="Barrier-heavy synchronization",
        diagnosis=(f"{k.name}: {pct:.0f}% of stall cycles ({cycles:.1f} per issued instruction) are warps waiting at "
                   "__syncthreads for the rest of their block: steps with little work between barriers, or only "
                   "some warps working while all wait" + (f"; worst line {line}" if line else "") + "."
                   + (f" DRAM runs at {mem:.0f}% of its peak, so the warps wait there for their block's loads, "
                      "which arrive as fast as DRAM allows: not what sets the time today."
                      if at_roof else "")),
        evidence=[Evidence(metric="smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio", value=cycles,
                           unit="cycles/issue", source="ncu", kernel=k.name, line=line),
                  Evidence(metric="barrier_stall_share_pct", value=round(pct, 1), threshold=run.th["min_share_pct"],
                           unit="%", source="ncu", kernel=k.name)],
        fixes=[Fix(action="Finish reductions inside warps with __shfl_down_sync (no barrier needed below 32 "
                          "threads), keeping one __syncthreads per block-level step.",
                   expected_effect="5 barriers fewer per reduction; warps stop idling"),
               Fix(action="Give each thread more elements before the block-level step (fewer, fuller steps).",
                   expected_effect="more work per barrier"),
               Fix(action="Use cooperative-groups/warp-level primitives (cg::reduce) instead of hand-rolled trees.",
                   expected_effect="shorter critical path")],
    )
