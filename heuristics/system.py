"""System-level rules over a timeline (scope ``trace``): what happens between kernels.

Each reads a :class:`~kernelscope.models.TraceSummary` and, through the context key ``facts``, the
:class:`~kernelscope.measure.timeline.TraceFacts` the summary does not list. Times are the region's
(the profiler range, or the program's GPU-active window).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kernelscope.heuristics.registry import Run, rule
from kernelscope.models import Evidence, Finding, Fix, TraceSummary


def _us(ns: float | None) -> str:
    return "?" if ns is None else f"{ns / 1e3:.1f} us" if ns < 1e6 else f"{ns / 1e6:.2f} ms"


def _pct(part: float, whole: float) -> float:
    return 100.0 * part / whole if whole else 0.0


def _ev(metric: str, value: Any, threshold: Any = None, unit: str | None = None) -> Evidence:
    return Evidence(metric=metric, value=value, threshold=threshold, unit=unit, source="trace")


@rule("system.launch-overhead", family="system", scope="trace",
      description="Many short kernels launched one by one: the GPU waits for the host to launch the next one.",
      thresholds={"min_overhead_pct": 20.0, "min_launches": 16, "critical_overhead_pct": 50.0},
      supersedes=("system.gpu-idle",), context=('facts',))
def _launch_overhead(s: TraceSummary, run: Run) -> Iterable[Finding]:
    facts = run.ctx["facts"]
    if facts.individual_launches < run.th["min_launches"] or s.launch_overhead_pct < run.th["min_overhead_pct"]:
        return
    per_launch = s.launch_api_ns / s.launch_calls if s.launch_calls else None
    busy = s.gpu_busy_ns or 1.0
    yield run.finding(
        severity="critical" if s.launch_overhead_pct >=
        run.th["critical_overhead_pct"] else "high", title="Launch overhead: the GPU waits for kernel launches",
        impact=min(s.launch_overhead_pct / 100, 1.0),
        diagnosis=(f"{facts.individual_launches} kernels are launched one by one (median {_us(facts.median_kernel_ns)}"
                   f" each) and the GPU sits idle {s.launch_overhead_pct:.0f}% of the region waiting for the next "
                   f"launch; the host spends {_us(per_launch)} per launch call. The GPU work alone would take "
                   f"{_us(s.gpu_busy_ns)} of the {_us(s.region_ns)}."),
        evidence=[_ev("launch_overhead_pct", s.launch_overhead_pct, run.th["min_overhead_pct"], "%"),
                  _ev("individual_launches", facts.individual_launches, run.th["min_launches"]),
                  _ev("median_kernel_ns", facts.median_kernel_ns, unit="ns"),
                  _ev("launch_api_ns_per_call", round(per_launch, 1) if per_launch else None, unit="ns"),
                  _ev("gpu_busy_pct", s.gpu_busy_pct, unit="%")],
        fixes=[Fix(action="Capture the sequence once in a CUDA graph (torch.cuda.CUDAGraph / cudaStreamBeginCapture) "
                          "and replay it: one launch call for the whole sequence.",
                   expected_effect=f"up to {s.region_ns / busy:.1f}x shorter region (the GPU-only time)"),
               Fix(action="Fuse the small kernels (torch.compile, or one hand-written kernel doing the chain of "
                          "elementwise/reduction steps).", expected_effect="fewer launches and fewer passes over "
                                                                           "memory"),
               Fix(action="Or use a persistent kernel that loops over the work items on the device.",
                   expected_effect="one launch; no host round trips")],
    )


@rule("system.copies-in-loop", family="system", scope="trace",
      description="Host-device copies between kernels, repeatedly: data goes back and forth in the hot loop.",
      thresholds={"min_alternations": 4, "min_copy_share_pct": 5.0, "max_overlap_pct": 50.0}, context=('facts',),
      explains=("system.gpu-idle:copy",))
def _copies_in_loop(s: TraceSummary, run: Run) -> Iterable[Finding]:
    facts = run.ctx["facts"]
    host = [c for c in s.copies if c.direction in ("HtoD", "DtoH")]
    ns = sum(c.total_ns for c in host)
    share = _pct(ns, s.region_ns)
    if facts.copy_kernel_alternations < run.th["min_alternations"] or share < run.th["min_copy_share_pct"]:
        return
    if (s.copy_compute_overlap_pct or 0.0) > run.th["max_overlap_pct"]:
        return  # a pipelined stream of chunks: the copies are hidden behind compute
    yield run.finding(
        severity="high" if share >= 20 else "warning",
        title="Host-device copies inside the hot loop", impact=min(share / 100, 1.0),
        diagnosis=(f"The GPU timeline goes kernel -> host copy -> kernel {facts.copy_kernel_alternations} times; "
                   f"{sum(c.count for c in host)} HtoD/DtoH copies ({sum(c.bytes for c in host) / 1e6:.1f} MB) take "
                   f"{share:.0f}% of the region."),
        evidence=[_ev("copy_kernel_alternations", facts.copy_kernel_alternations, run.th["min_alternations"]),
                  _ev("host_copy_share_pct", round(share, 1), run.th["min_copy_share_pct"], "%")]
        + [_ev(f"copies_{c.direction}", c.count) for c in host],
        fixes=[Fix(action="Keep the data on the GPU between steps: move the loop's host-side work (checks, .item(), "
                          ".cpu(), printing) out of the loop or onto the GPU.", expected_effect=f"up to {share:.0f}% "
                                                                                                "of the region"),
               Fix(action="Copy once before the loop and once after it; batch small transfers into one.",
                   expected_effect="fewer, larger copies at full PCIe/NVLink bandwidth")],
    )


@rule("system.pageable-copies", family="system", scope="trace",
      description="Copies to or from pageable host memory: staged through a driver buffer, slower and never async.",
      thresholds={"min_bytes": 1 << 20, "min_share_pct": 2.0})
def _pageable(s: TraceSummary, run: Run) -> Iterable[Finding]:
    rows = [c for c in s.copies if c.pageable]
    if not rows:
        return
    nbytes = sum(c.bytes * c.pageable / c.count for c in rows)
    ns = sum(c.total_ns * c.pageable / c.count for c in rows)
    if nbytes < run.th["min_bytes"] or _pct(ns, s.region_ns) < run.th["min_share_pct"]:
        return
    n = sum(c.pageable for c in rows)
    gbps = nbytes / ns if ns else None
    yield run.finding(
        severity="warning", title="Copies from pageable host memory",
        impact=min(_pct(ns, s.region_ns) / 100, 1.0),
        diagnosis=(f"{n} copies ({nbytes / 1e6:.1f} MB, {_us(ns)}) use pageable host memory, at "
                   f"{gbps or 0:.1f} GB/s; the driver stages them through a pinned buffer, so they are slower than "
                   "pinned copies and cannot overlap with kernels."),
        evidence=[_ev("pageable_copies", n), _ev("pageable_bytes", int(nbytes), run.th["min_bytes"], "B"),
                  _ev("pageable_copy_gb_per_s", round(gbps, 2) if gbps else None, unit="GB/s")],
        fixes=[Fix(action="Allocate the host buffers pinned (cudaMallocHost / cudaHostAlloc, or "
                          "tensor.pin_memory()) and copy with cudaMemcpyAsync / non_blocking=True.",
                   expected_effect="about 2x copy bandwidth, and the copies can overlap compute")],
    )


@rule("system.synchronization", family="system", scope="trace",
      description="Synchronous copies and device/stream synchronizations serialize the host and the GPU.",
      thresholds={"min_idle_pct": 10.0, "min_calls": 8}, supersedes=("system.gpu-idle",), context=('facts',))
def _sync(s: TraceSummary, run: Run) -> Iterable[Finding]:
    facts = run.ctx["facts"]
    idle_pct = _pct(facts.sync_idle_ns, s.region_ns)
    calls = facts.sync_calls + facts.synchronous_copies
    if calls < run.th["min_calls"] or idle_pct < run.th["min_idle_pct"]:
        return
    sync_apis = [a for a in s.api if a.category == "sync"]
    yield run.finding(
        severity="high" if idle_pct >= 25 else "warning",
        title="Blocking calls serialize host and GPU", impact=min(idle_pct / 100, 1.0),
        diagnosis=(f"{facts.sync_calls} synchronization calls and {facts.synchronous_copies} blocking copies: each "
                   "time the host waits for the GPU to finish and only then prepares and queues the next work, so "
                   f"the GPU idles {idle_pct:.0f}% of the region in the gaps that follow them."
                   + (f" Most time: {sync_apis[0].name} x{sync_apis[0].count}." if sync_apis else "")),
        evidence=[_ev("sync_calls", facts.sync_calls, run.th["min_calls"]),
                  _ev("blocking_copies", facts.synchronous_copies),
                  _ev("idle_after_blocking_calls_pct", round(idle_pct, 1), run.th["min_idle_pct"], "%")],
        fixes=[Fix(action="Drop synchronizations inside the loop (cudaDeviceSynchronize, .item(), .cpu(), "
                          "torch.cuda.synchronize); synchronize once at the end, or on an event only where a result "
                          "is needed.", expected_effect="the host runs ahead and keeps the GPU queue full"),
               Fix(action="Use cudaMemcpyAsync on a stream (non_blocking=True with pinned memory) instead of "
                          "cudaMemcpy, and prepare the next chunk while the GPU works on this one.",
                   expected_effect=f"up to {idle_pct:.0f}% of the region")],
    )


@rule("system.gpu-idle", family="system", scope="trace",
      description="The GPU idles a large share of the region; the longest gaps and what the host did during them.",
      thresholds={"min_idle_pct": 30.0, "explained_share_pct": 25.0}, context=('facts',))
def _idle(s: TraceSummary, run: Run) -> Iterable[Finding]:
    if s.host_overhead_pct < run.th["min_idle_pct"] or not s.top_gaps:
        return
    facts = run.ctx["facts"]
    causes = sorted(facts.gap_causes.items(), key=lambda kv: -kv[1])
    what = ", ".join(f"{k} {_pct(v, s.region_ns):.0f}%" for k, v in causes[:4])
    g = s.top_gaps[0]
    largest = causes[0][0] if causes else "?"
    # the CUDA activity (allocation, copies, ...) that takes the largest share of the idle time, where that share is
    # substantial: the rule about that activity explains the idle time, even when one long stretch of host code
    # (a readback's buffer, a CPU check at the end) is larger still
    api = [(c, ns) for c, ns in causes if c not in ("host", "other")]
    idle = sum(ns for _, ns in causes) or 1.0
    topic = api[0][0] if api and api[0][1] / idle >= run.th["explained_share_pct"] / 100 else largest
    yield run.finding(
        severity="high" if s.host_overhead_pct >= 50 else "warning",
        title="The GPU is idle much of the time", impact=min(s.host_overhead_pct / 100, 1.0),
        topic=topic,  # a rule about that activity explains the idle time
        diagnosis=(f"The GPU is idle {s.host_overhead_pct:.0f}% of the region ({_us(s.gpu_idle_ns)} of "
                   f"{_us(s.region_ns)}), in {s.gaps} gaps of at least {_us(s.gap_threshold_ns)}; idle time by host "
                   f"activity: {what}. The longest gap, {_us(g.duration_ns)} after {g.after or 'the start'}, is "
                   f"spent in {g.cause}."),
        evidence=[_ev("gpu_idle_pct", s.host_overhead_pct, run.th["min_idle_pct"], "%"), _ev("gaps", s.gaps),
                  _ev("gap_median_ns", s.gap_median_ns, unit="ns"),
                  _ev("longest_gap_ns", g.duration_ns, unit="ns"), _ev("longest_gap_cause", g.cause)],
        fixes=[Fix(action=f"Remove or overlap what the host does in the gaps (largest: {largest}): move host "
                          "computation off the critical path, prepare the next inputs while the GPU "
                          "works.", expected_effect=f"up to {s.host_overhead_pct:.0f}% of the region")],
    )


@rule("system.allocation-churn", family="system", scope="trace",
      description="Memory is allocated and freed inside the measured region (cudaMalloc/cudaFree in the loop).",
      thresholds={"min_calls": 8, "min_share_pct": 2.0}, context=('facts',),
      explains=("system.gpu-idle:alloc",))  # the gaps spent mostly in allocation calls are this finding's
def _alloc(s: TraceSummary, run: Run) -> Iterable[Finding]:
    facts = run.ctx["facts"]
    share = _pct(facts.alloc_ns, s.region_ns)
    if facts.alloc_calls < run.th["min_calls"] or share < run.th["min_share_pct"]:
        return
    names = ", ".join(f"{a.name} x{a.count}" for a in s.api if a.category == "alloc")
    yield run.finding(
        severity="high" if share >= 10 else "warning",
        title="Allocation churn in the region", impact=min(share / 100, 1.0),
        diagnosis=(f"{facts.alloc_calls} allocation calls ({names}) take {_us(facts.alloc_ns)}, {share:.0f}% of the "
                   "region; cudaFree also synchronizes the device."),
        evidence=[_ev("alloc_calls", facts.alloc_calls, run.th["min_calls"]),
                  _ev("alloc_share_pct", round(share, 1), run.th["min_share_pct"], "%")],
        fixes=[Fix(action="Allocate once outside the loop and reuse the buffers (or a caching allocator, "
                          "cudaMallocAsync with a memory pool).", expected_effect=f"saves {_us(facts.alloc_ns)} and "
                                                                                  "the implicit syncs")],
    )


@rule("system.dominant-kernel", family="system", scope="trace",
      description="One kernel takes most of the GPU time: it is the one to profile and optimize next.",
      thresholds={"min_share_pct": 60.0, "min_busy_pct": 50.0})
def _dominant(s: TraceSummary, run: Run) -> Iterable[Finding]:
    if not s.kernels or s.kernels[0].share_pct < run.th["min_share_pct"] or s.gpu_busy_pct < run.th["min_busy_pct"]:
        return
    k = s.kernels[0]
    yield run.finding(
        severity="info", kernel=k.name,
        title="One kernel dominates the GPU time", impact=k.share_pct / 100,
        diagnosis=(f"{k.name} takes {k.share_pct:.0f}% of the kernel time ({k.count} launches, {_us(k.avg_ns)} "
                   f"each) while the GPU is busy {s.gpu_busy_pct:.0f}% of the region: the system level is not the "
                   "limit; this kernel is."),
        evidence=[_ev("kernel_share_pct", k.share_pct, run.th["min_share_pct"], "%"), _ev("launches", k.count),
                  _ev("gpu_busy_pct", s.gpu_busy_pct, run.th["min_busy_pct"], "%")],
        fixes=[Fix(action=f"Profile it next: analyze with kernel_regex matching {k.name.split('(')[0]!r}.",
                   expected_effect="the kernel-level bottleneck and its fixes")],
    )


@rule("system.copies-not-overlapped", family="system", scope="trace",
      description="Copies and kernels run one after the other although overlapping them would save real time.",
      thresholds={"min_saving_pct": 10.0, "max_overlap_pct": 25.0})
def _no_overlap(s: TraceSummary, run: Run) -> Iterable[Finding]:
    if s.copy_compute_overlap_pct is None or not s.region_ns or s.copy_compute_overlap_pct > run.th["max_overlap_pct"]:
        return
    saving = min(s.copy_ns, s.kernel_ns) * (1.0 - s.copy_compute_overlap_pct / 100.0)
    saving_pct = _pct(saving, s.region_ns)
    if saving_pct < run.th["min_saving_pct"]:
        return
    yield run.finding(
        severity="warning",
        title="Copies do not overlap compute", impact=min(saving_pct / 100, 1.0),
        diagnosis=(f"Copies take {_us(s.copy_ns)} and kernels {_us(s.kernel_ns)}, but only "
                   f"{s.copy_compute_overlap_pct:.0f}% of what could overlap does: overlapping them would save up to "
                   f"{_us(saving)} ({saving_pct:.0f}% of the region)."),
        evidence=[_ev("copy_compute_overlap_pct", s.copy_compute_overlap_pct, run.th["max_overlap_pct"], "%"),
                  _ev("overlap_saving_pct", round(saving_pct, 1), run.th["min_saving_pct"], "%"),
                  _ev("copy_ns", s.copy_ns, unit="ns"), _ev("kernel_ns", s.kernel_ns, unit="ns")],
        fixes=[Fix(action="Pipeline: split the data into chunks and issue copy(i+1) on one stream while kernel(i) "
                          "runs on another (pinned host memory, cudaMemcpyAsync, events between streams).",
                   expected_effect=f"hides up to {_us(saving)}")],
    )
