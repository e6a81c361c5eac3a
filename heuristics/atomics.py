"""The atomic-contention rule (memory family): global atomics that L2 serializes on their addresses.

Four ways it shows in a profile, tried in this order: one L2 slice receiving several times the average atomic
traffic; a smaller imbalance while the warps wait on the atomics (their queue, their completion or their results;
or, where loads outnumber the atomics, their queue and completion alone) and memory idles; slices applying
atomics far below their rate while the warps wait and memory idles (many warm addresses spread the load evenly);
and many L2 updates per sector the atomic instructions touch (lanes of a warp updating one address one after
another) where the atomics bound the kernel.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from kernelscope.heuristics.memory import GLOBAL_TRAFFIC, LD_REQ, cost_line, metric_sum, stall_share
from kernelscope.heuristics.memory import TOTAL as L2_SECTORS  # per line: the distinct sectors its accesses touch
from kernelscope.heuristics.registry import Run, rule
from kernelscope.models import Evidence, Finding, Fix, KernelProfile
from kernelscope.models.profile import GLOBAL_ATOMIC_INST

ATOM_REQ = ("l1tex__t_requests_pipe_lsu_mem_global_op_atom.sum", "l1tex__t_requests_pipe_lsu_mem_global_op_red.sum")
LTS_ATOM = ("lts__t_requests_srcunit_tex_op_red", "lts__t_requests_srcunit_tex_op_atom_dot_alu",
            "lts__t_requests_srcunit_tex_op_atom_dot_cas")
L2_READS = "lts__t_sectors_srcunit_tex_op_read.sum"
# global store requests: in Nsight Compute's memory sections; not requested of the CUPTI collector (its recorded
# captures predate it), where the backlog path's "at least the stores" check reads none and passes
ST_REQ = "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum"
# the stall reasons of warps whose global requests cannot leave the SM (the LSU queue is full) or wait for them
_QUEUED = ("lg_throttle", "membar", "drain")
_WAITED = (*_QUEUED, "long_scoreboard")  # ... or for the values they return


class Contention(NamedTuple):
    """What the rule measured: requests from the SMs and at L2, atomics per 100 warp instructions, the hottest
    slice's kind and imbalance, its share of that kind, and the measure that named it where the imbalance alone
    did not (queued stall share %, slice rate per ns, L2 updates per sector)."""
    req: float
    at_l2: float
    share_pct: float
    metric: str
    imbalance: float
    hot_pct: float | None
    queued: float | None = None
    queued_on: tuple[str, ...] | None = None  # the stall reasons in the queued share
    slow: float | None = None
    lanes: float | None = None


def _request_share(k: KernelProfile, run: Run, req: float) -> float | None:
    """The atomics' share (%) of the global requests the SMs send that L2 answers (atomics and loads), where memory
    is nearly idle; None where it is busy or nothing was sent."""
    if (k.memory_throughput_pct or 0.0) >= run.th["queued_idle_memory_pct"]:
        return None
    global_req = metric_sum(k, (*ATOM_REQ, LD_REQ)) or 0.0
    return 100.0 * req / global_req if global_req else None


def _waits(k: KernelProfile, reasons: tuple[str, ...] = _WAITED) -> float:
    """The share (%) of stall cycles warps spend on a full LSU queue (lg_throttle), waiting for their requests to
    complete (membar, drain) or for the values they return (long_scoreboard: an atomic whose result is used)."""
    return sum(stall_share(k, r)[0] or 0.0 for r in reasons)


def _queued_on_atomics(k: KernelProfile, run: Run, req: float) -> tuple[float, tuple[str, ...]] | None:
    """(wait share %, the stall reasons summed) where the warps wait on the atomics and memory is nearly idle:
    requests slow to complete although neither L2 nor DRAM is busy, which is how updates that serialize on their
    addresses look. Two ways, None where neither holds:

    - the atomics a sizable part of the global requests, and the waits (:func:`_waits`, results included) dominate;
    - loads outnumber the atomics (a push scatter loads indices, weights and values before each update), so a wait
      on a loaded value says nothing: the warps still wait on the queue and the completion of outgoing requests
      (lg_throttle, membar, drain: never a load's value), and the atomics are most of what goes out (against the
      stores)."""
    share = _request_share(k, run, req)
    if share is None:
        return None
    if share >= run.th["queued_min_atomic_request_pct"]:
        queued = _waits(k)
        return (queued, _WAITED) if queued >= run.th["queued_min_stall_pct"] else None
    stores = k.num(ST_REQ) or 0.0
    if share < run.th["backlog_min_atomic_request_pct"] or req < stores:
        return None
    backlog = _waits(k, _QUEUED)
    return (backlog, _QUEUED) if backlog >= run.th["backlog_min_stall_pct"] else None


def _slice_rate(k: KernelProfile, run: Run, per_slice: float) -> float | None:
    """The L2 atomic rate per slice (updates per ns) where it is far below what a slice applies to distinct
    addresses; called where the warps already wait on the atomics and memory idles (:func:`_queued_on_atomics`):
    the updates wait on each other at many warm addresses, so that no slice stands out. None otherwise."""
    dur = k.duration_ns
    rate = per_slice / dur if dur else None
    return rate if rate is not None and rate < run.th["max_slice_rate_per_ns"] else None


def _updates_per_sector(k: KernelProfile, at_l2: float) -> float | None:
    """L2 atomic requests per distinct sector the atomic lines' instructions touch (the reader's per-line
    memory_l2_theoretical_sectors_global on the lines that run global atomics, loads beside them included, so a
    low estimate): each lane's update reaches L2 as its own request, so many per sector means lanes of one warp
    updating the same addresses, applied one after another. None without per-line atomic counts."""
    sectors = sum(s.counters.get(L2_SECTORS, 0.0) for s in k.source_lines if s.counters.get(GLOBAL_ATOMIC_INST))
    return at_l2 / sectors if sectors and at_l2 else None


def contention(k: KernelProfile, run: Run) -> Contention | None:
    """The measures that name contention on ``k`` (the module's doc gives the order), None where none does."""
    req, inst = metric_sum(k, ATOM_REQ), k.num("smsp__inst_executed.sum")
    if not req or not inst:
        return None
    # counted where they serialize: one warp instruction whose lanes hit one address with CAS (or any atomic L1
    # cannot combine) makes one L2 request per lane, so the L2 count can be many times the instructions'
    at_l2 = sum(max(0.0, k.num(f"{m}.sum") or 0.0) for m in LTS_ATOM)
    share_pct = 100.0 * max(req, at_l2) / inst
    if share_pct < run.th["min_atomic_share_pct"]:
        return None
    # the busiest slice's atomic load against the average slice's, over every kind of atomic: a kind with a hot slice
    # but a small share of the requests (one reduction a block into one total) hardly loads that slice
    per_slice = sum(k.num(f"{m}.avg") or 0.0 for m in LTS_ATOM)
    best = None
    for m in LTS_ATOM:
        avg, mx = k.num(f"{m}.avg"), k.num(f"{m}.max")
        if avg and mx is not None and (best is None or (mx - avg + per_slice) / per_slice > best[1]):
            total = k.num(f"{m}.sum")
            best = (m, (mx - avg + per_slice) / per_slice, 100.0 * mx / total if total else None)
    if best is None:
        return None
    found = Contention(req, at_l2, share_pct, *best)
    if best[1] >= run.th["slice_imbalance"]:
        return found
    waiting = _queued_on_atomics(k, run, req)
    if waiting is not None and best[1] >= run.th["queued_slice_imbalance"]:
        return found._replace(queued=waiting[0], queued_on=waiting[1])
    slow = _slice_rate(k, run, per_slice) if waiting is not None else None
    if slow is not None:
        return found._replace(slow=slow)
    lanes = _updates_per_sector(k, at_l2)
    reads = k.num(L2_READS) or 0.0
    bound = (k.memory_throughput_pct or 0.0) < run.th["queued_idle_memory_pct"] or \
        at_l2 >= run.th["min_l2_atomic_share"] * (at_l2 + reads)  # idle memory, or L2's work is the atomics
    if lanes is None or lanes < run.th["min_updates_per_sector"] or not bound:
        return None
    return found._replace(lanes=lanes)


def _why(k: KernelProfile, run: Run, c: Contention) -> str:
    """The diagnosis's middle: the measure that named the contention, in words."""
    mem = k.memory_throughput_pct or 0.0
    if c.lanes is not None:
        return (f"and L2 receives {c.lanes:.0f} updates for each sector the atomic instructions touch: lanes of one "
                "warp update the same addresses, and L2 applies them one after another"
                + (f" (its slices at {mem:.0f}% of peak, mostly on these updates)"
                   if mem >= run.th["queued_idle_memory_pct"] else ""))
    if c.slow is not None:
        return (f"and each L2 slice applies only {1000 * c.slow:.0f} of them per microsecond while the warps wait on "
                f"them and the memory system runs at {mem:.0f}% of its peak: updates to the same addresses wait on "
                "each other, spread over enough warm addresses that no slice stands out (the busiest gets "
                f"{c.imbalance:.1f}x the average)")
    return (f"and the busiest L2 slice receives {c.imbalance:.0f}x the average"
            + (f" ({c.hot_pct:.0f}% of them)" if c.hot_pct is not None else "")
            + ": threads update the same address, so the updates serialize in one slice")


def _waited(k: KernelProfile, c: Contention) -> str:
    """The diagnosis's end where the warps' waits named the contention."""
    if c.queued is None:
        return ""
    on = ("their queue or their completion, never a loaded value, although loads outnumber them"
          if c.queued_on == _QUEUED else "their queue, their completion or their results")
    return (f" {c.queued:.0f}% of stall cycles are warps waiting on these requests ({on}) while the memory system "
            f"runs at {k.memory_throughput_pct or 0.0:.0f}% of its peak: the atomics, not the bytes, set the time.")


def _evidence(k: KernelProfile, run: Run, c: Contention, line: str | None) -> list[Evidence]:
    ev = [Evidence(metric="+".join(ATOM_REQ), value=c.req, source="ncu", kernel=k.name, line=line),
          Evidence(metric=f"{c.metric}.max / {c.metric}.avg", value=round(c.imbalance, 1),
                   threshold=run.th["slice_imbalance"] if c.queued is None else run.th["queued_slice_imbalance"],
                   source="ncu", kernel=k.name)]
    if c.slow is not None:
        ev.append(Evidence(metric="l2_atomics_per_slice_per_ns", value=round(c.slow, 4),
                           threshold=run.th["max_slice_rate_per_ns"], source="ncu", kernel=k.name))
    if c.lanes is not None:
        ev.append(Evidence(metric="l2_atomic_updates_per_sector", value=round(c.lanes, 2),
                           threshold=run.th["min_updates_per_sector"], source="ncu", kernel=k.name, line=line))
    if c.queued is not None:
        backlog = c.queued_on == _QUEUED
        ev.append(Evidence(metric=f"{'+'.join(c.queued_on or _WAITED)} stall share", value=round(c.queued, 1),
                           threshold=run.th["backlog_min_stall_pct" if backlog else "queued_min_stall_pct"], unit="%",
                           source="ncu", kernel=k.name))
    return ev


@rule("memory.atomic-contention", family="memory", scope="ncu",
      description="Global atomics pile onto few addresses: L2 serializes them. Seen as one slice receiving several "
                  "times the average atomic traffic; as a smaller imbalance while the warps wait mostly on a queue of "
                  "atomics that a nearly idle memory system drains slowly (where loads outnumber the atomics, on the "
                  "queue and completion of the outgoing requests alone); or, where many warm addresses spread the "
                  "load evenly, as slices applying atomics at a small fraction of their rate while the warps wait on "
                  "them and memory idles; or as many L2 updates per sector the atomic instructions touch (lanes of "
                  "a warp updating the same addresses one after another) where the atomics bound the kernel.",
      thresholds={"min_atomic_share_pct": 1.0, "slice_imbalance": 4.0, "queued_slice_imbalance": 2.0,
                  "queued_min_stall_pct": 40.0, "queued_min_atomic_request_pct": 25.0,
                  "backlog_min_atomic_request_pct": 10.0, "backlog_min_stall_pct": 20.0,
                  "queued_idle_memory_pct": 40.0, "max_slice_rate_per_ns": 0.15, "min_updates_per_sector": 4.0,
                  "min_l2_atomic_share": 0.5},
      metrics=(*ATOM_REQ, LD_REQ, "smsp__inst_executed.sum", L2_READS,
               *(f"{m}.{r}" for m in LTS_ATOM for r in ("sum", "avg", "max"))),
      supersedes=("latency.dependent-loads", "stalls.dominant-stall-reason", "memory.low-cache-hit-rate"),
      # the sectors the contended updates scatter over are the same cause, not a layout to fix
      explains=("memory.uncoalesced-global-access:atomic",))
def _atomics(k: KernelProfile, run: Run) -> Iterable[Finding]:
    c = contention(k, run)
    if c is None:
        return
    # the atomic itself: the line that runs the most global atomics (where the capture names them per line), else
    # where its queue throttles, else where it moves global memory; never the exit's drain or the consumer of its
    # result, which sit on later lines
    line = cost_line(k, (GLOBAL_ATOMIC_INST,),
                     ("smsp__pcsamp_warps_issue_stalled_lg_throttle", "smsp__pcsamp_warps_issue_stalled_membar"),
                     GLOBAL_TRAFFIC)
    named = c.queued is not None or c.slow is not None or c.lanes is not None
    yield run.finding(
        kernel=k.name, line=line,
        severity="high" if c.imbalance >= 2 * run.th["slice_imbalance"] or named else "warning",
        impact=0.8, title="Atomic contention on few addresses",
        diagnosis=(f"{k.name}: {c.req:,.0f} global atomic/reduction requests"
                   + (f" from the SMs, {c.at_l2:,.0f} at L2 (lanes of one instruction updating one address one by "
                      "one)" if c.at_l2 > 2 * c.req else "")
                   + f" ({c.share_pct:.1f} per 100 warp instructions), " + _why(k, run, c)
                   + (f"; worst line {line}" if line else "") + "."
                   + _waited(k, c)),
        evidence=_evidence(k, run, c, line),
        fixes=[Fix(action="Reduce first, then update once: warp shuffle (__reduce_add_sync / __shfl_down_sync) and "
                          "a block-level partial in shared memory, then one atomicAdd per block.",
                   expected_effect="32x to 1000x fewer atomics on the hot address"),
               Fix(action="Privatize: per-block (shared-memory) or per-warp copies of the target, merged at the end.",
                   expected_effect="contention moves on chip and spreads over banks"),
               Fix(action="Spread updates over several addresses (striped counters) and sum them afterwards.",
                   expected_effect="the load spreads over L2 slices")],
    )
