"""A timeline's summary: what the GPU did in the region that matters and what the host did around it.

The region is the profiler range(s) (``cudaProfilerStart``/``Stop``) where they hold GPU activity, else the
GPU-active window. :func:`summarize` gives kernels by function, copies by direction, host CUDA API time,
idle gaps and their causes, NVTX ranges and a system class, plus the facts the system rules read
(:class:`kernelscope.measure.timeline.TraceFacts`).
"""

from __future__ import annotations

import bisect
import statistics
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from kernelscope.measure.timeline import (
    MEM_PAGEABLE,
    MEM_PINNED,
    ApiCall,
    GpuOp,
    Range,
    Timeline,
    TraceFacts,
    api_category,
)
from kernelscope.models import TraceApi, TraceCopy, TraceGap, TraceKernel, TraceNvtx, TraceSummary

HOST_CODE = "host code (no CUDA call)"  # a gap's cause when no CUDA call covers enough of it
GAP_THRESHOLD_NS = 2_000.0  # shorter idle spells are the GPU's own launch latency between queued work
MAX_KERNELS, MAX_API, MAX_GAPS = 30, 25, 5


def _union(spans: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for s, e in sorted(spans):
        if out and s <= out[-1][1]:
            if e > out[-1][1]:
                out[-1] = (out[-1][0], e)
        else:
            out.append((s, e))
    return out


def _clip(spans: list[tuple[int, int]], regions: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out = []
    for s, e in spans:
        for rs, re_ in regions:
            lo, hi = max(s, rs), min(e, re_)
            if hi > lo:
                out.append((lo, hi))
    return out


def _length(spans: Iterable[tuple[int, int]]) -> int:
    return sum(e - s for s, e in spans)


def _overlap(a: tuple[int, int], spans: list[tuple[int, int]], starts: list[int]) -> int:
    """Length of interval ``a`` covered by the sorted disjoint ``spans``."""
    i = max(bisect.bisect_right(starts, a[0]) - 1, 0)
    total = 0
    while i < len(spans) and spans[i][0] < a[1]:
        lo, hi = max(a[0], spans[i][0]), min(a[1], spans[i][1])
        if hi > lo:
            total += hi - lo
        i += 1
    return total


def _blocking(a: ApiCall) -> bool:
    """A call that returns only when the GPU has finished earlier work: a synchronization, or a copy or
    memset without ``Async``."""
    cat = api_category(a.name)
    return cat == "sync" or (cat == "copy" and "Async" not in a.base)


Span = tuple[int, int]


@dataclass
class _Region:
    """What a summary covers: the profiler range(s), else the GPU-active window; and what falls in it."""

    spans: list[Span]
    name: str
    ops: list[GpuOp]
    api: list[ApiCall]

    @property
    def ns(self) -> float:
        return float(_length(self.spans))


def _region(tl: Timeline) -> _Region:
    ranges = tl.profiler_ranges()
    gpu_all = [(o.start, o.end) for o in tl.ops]
    if not gpu_all:
        raise ValueError("no GPU activity (kernels, copies or memsets) was recorded")
    if ranges and _length(_clip(gpu_all, ranges)) > 0:
        regions = ranges
        name = (f"{len(ranges)} profiler range(s) (cudaProfilerStart/Stop)" if len(ranges) > 1
                else "the profiler range (cudaProfilerStart/Stop)")
    else:
        regions = [(min(s for s, _ in gpu_all), max(e for _, e in gpu_all))]
        name = "the GPU-active window (first to last GPU activity)"
        if ranges:
            name += "; the profiler range(s) held no GPU activity"
    ops = [o for o in tl.ops if _length(_clip([(o.start, o.end)], regions)) > 0]
    api = [a for a in tl.api if not a.nested and _length(_clip([(a.start, a.end)], regions)) > 0]
    return _Region(spans=regions, name=name, ops=ops, api=api)


def _kernels(kernels: list[GpuOp], kernel_ns: float, facts: TraceFacts) -> list[TraceKernel]:
    """Kernels by function, by total time."""
    by_name: dict[str, list[GpuOp]] = defaultdict(list)
    for k in kernels:
        by_name[k.name].append(k)
    tk = []
    for name, ks in by_name.items():
        d = [k.end - k.start for k in ks]
        longest = max(ks, key=lambda k: k.end - k.start)
        tk.append(TraceKernel(name=name, mangled_name=longest.mangled, count=len(ks), total_ns=float(sum(d)),
                              avg_ns=sum(d) / len(d),
                              min_ns=float(min(d)), max_ns=float(max(d)),
                              share_pct=round(100.0 * sum(d) / kernel_ns, 2) if kernel_ns else 0.0,
                              grid=list(longest.grid) if longest.grid else None,
                              block=list(longest.block) if longest.block else None,
                              registers_per_thread=longest.registers, in_graphs=sum(k.graph for k in ks)))
    tk.sort(key=lambda k: -k.total_ns)
    if kernels:
        facts.median_kernel_ns = float(statistics.median(k.end - k.start for k in kernels))
    facts.individual_launches = sum(not k.graph for k in kernels)
    return tk


def _copies(copies: list[GpuOp], facts: TraceFacts) -> list[TraceCopy]:
    """Copies by direction, by total time."""
    by_dir: dict[str, list[GpuOp]] = defaultdict(list)
    for c in copies:
        by_dir[c.direction or "other"].append(c)
    tc = []
    for direction, cs in by_dir.items():
        ns = float(sum(c.end - c.start for c in cs))
        nbytes = sum(c.bytes for c in cs)
        host_side = direction in ("HtoD", "DtoH", "HtoH", "HtoA", "AtoH")
        pageable = sum(1 for c in cs if host_side and MEM_PAGEABLE in (c.src_kind, c.dst_kind))
        pinned = sum(1 for c in cs if host_side and MEM_PINNED in (c.src_kind, c.dst_kind))
        sync_n = sum(1 for c in cs if c.is_async is False)
        tc.append(TraceCopy(direction=direction, count=len(cs), bytes=nbytes, total_ns=ns, avg_bytes=nbytes / len(cs),
                            gb_per_s=round(nbytes / ns, 3) if ns else None, pageable=pageable, pinned=pinned,
                            synchronous=sync_n, min_bytes=min(c.bytes for c in cs), max_bytes=max(c.bytes for c in cs)))
        facts.synchronous_copies += sync_n
    tc.sort(key=lambda c: -c.total_ns)
    return tc


def _overlap_pct(kernels: list[GpuOp], copies: list[GpuOp], copy_ns: float, kernel_ns: float) -> float | None:
    """Copy/compute overlap, against the most that could overlap (the smaller of the two)."""
    if not (copies and copy_ns and kernel_ns):
        return None
    kspans = _union((k.start, k.end) for k in kernels)
    kstarts = [s for s, _ in kspans]
    cspans = _union((c.start, c.end) for c in copies)
    possible = min(_length(cspans), _length(kspans))
    overlapped = sum(_overlap(c, kspans, kstarts) for c in cspans)
    return round(min(100.0 * overlapped / possible, 100.0), 2) if possible else None


def _alternations(ops: list[GpuOp]) -> int:
    """Kernel -> host copy -> kernel alternations on the GPU timeline."""
    seq = [o for o in ops if o.kind == "kernel" or (o.kind == "memcpy" and o.direction in ("HtoD", "DtoH"))]
    prev, n = None, 0
    for i, o in enumerate(seq):
        if o.kind == "memcpy" and prev == "kernel" and any(x.kind == "kernel" for x in seq[i + 1:i + 4]):
            n += 1
        prev = o.kind
    return n


def _host_api(region: _Region, facts: TraceFacts) -> tuple[list[TraceApi], int, float]:
    """Host CUDA API calls by name, by total time; the launch calls' count and their time in the region."""
    api = region.api
    by_api: dict[str, list[ApiCall]] = defaultdict(list)
    for a in api:
        by_api[a.base].append(a)
    ta = []
    for name, calls in by_api.items():
        d = [a.end - a.start for a in calls]
        ta.append(TraceApi(name=name, category=api_category(name), count=len(calls), total_ns=float(sum(d)),
                           avg_ns=sum(d) / len(d), max_ns=float(max(d))))
    ta.sort(key=lambda a: -a.total_ns)
    launch_calls = [a for a in api if api_category(a.name) == "launch"]
    launch_ns = float(_length(_clip([(a.start, a.end) for a in launch_calls], region.spans)))
    allocs = [a for a in api if api_category(a.name) == "alloc"]
    facts.alloc_calls, facts.alloc_ns = len(allocs), float(sum(a.end - a.start for a in allocs))
    facts.sync_calls = sum(1 for a in api if api_category(a.name) == "sync")
    return ta, len(launch_calls), launch_ns


def _idle_spans(regions: list[Span], busy: list[Span]) -> list[Span]:
    """The region's spans where the GPU did nothing."""
    gaps: list[Span] = []
    for rs, re_ in regions:
        cursor = rs
        for s, e in busy:
            if e <= rs or s >= re_:
                continue
            if s > cursor:
                gaps.append((cursor, s))
            cursor = max(cursor, e)
        if re_ > cursor:
            gaps.append((cursor, re_))
    return gaps


def _gaps(region: _Region, busy: list[Span], facts: TraceFacts,
          gap_threshold_ns: float) -> tuple[list[TraceGap], float]:
    """Idle gaps (those of at least the threshold), their causes (into ``facts``) and the idle time spent
    waiting for the host to launch the next kernel."""
    api, ops = region.api, region.ops
    host_starts = [a.start for a in api]  # api keeps the timeline's order: by start
    op_starts = [o.start for o in ops]
    op_ends = sorted(ops, key=lambda o: o.end)
    op_end_keys = [o.end for o in op_ends]
    launch_idle = 0.0
    gap_rows: list[TraceGap] = []
    region_start = region.spans[0][0]
    for gs, ge in _idle_spans(region.spans, busy):
        cover: dict[str, int] = defaultdict(int)
        near = api[max(bisect.bisect_left(host_starts, gs) - 64, 0):bisect.bisect_right(host_starts, ge)]
        for a in near:
            ov = min(a.end, ge) - max(a.start, gs)
            if ov > 0:
                cover[a.base] += ov
        length = ge - gs
        top, top_ns = max(cover.items(), key=lambda kv: kv[1]) if cover else (HOST_CODE, 0)
        cause = top if top_ns >= 0.3 * length else HOST_CODE
        cat = "host" if cause == HOST_CODE else api_category(cause)
        facts.gap_causes[cat] = facts.gap_causes.get(cat, 0.0) + length
        j = bisect.bisect_left(op_starts, ge)
        nxt = ops[j] if j < len(ops) else None
        # serialization: the host waited for the GPU (a sync, a blocking copy) and only then queued more
        if any(gs <= a.end <= ge and _blocking(a) for a in near):
            facts.sync_idle_ns += length
        if nxt is not None and nxt.kind == "kernel" and not nxt.graph and cat in ("launch", "host", "other"):
            launch_idle += length
        if length >= gap_threshold_ns:
            k = bisect.bisect_right(op_end_keys, gs) - 1
            after = op_ends[k].name if k >= 0 else None
            gap_rows.append(TraceGap(start_ns=float(gs - region_start), duration_ns=float(length), after=after,
                                     before=nxt.name if nxt else None, cause=cause))
    return gap_rows, launch_idle


def _nvtx(tl: Timeline, regions: list[Span]) -> list[TraceNvtx]:
    """NVTX ranges in the region, by name, by total time."""
    by_range: dict[str, list[Range]] = defaultdict(list)
    for r in tl.nvtx:
        if _length(_clip([(r.start, r.end)], regions)) > 0:
            by_range[r.name].append(r)
    return sorted((TraceNvtx(name=n, count=len(rs), total_ns=float(sum(r.end - r.start for r in rs)),
                             avg_ns=sum(r.end - r.start for r in rs) / len(rs)) for n, rs in by_range.items()),
                  key=lambda r: -r.total_ns)


def _pct(part: float, whole: float) -> float:
    return round(100.0 * part / whole, 2) if whole else 0.0


def summarize(tl: Timeline, *, gap_threshold_ns: float = GAP_THRESHOLD_NS) -> tuple[TraceSummary, TraceFacts]:
    """The region's summary and the facts the system rules need. Raises ValueError when the trace has no
    GPU activity at all."""
    region = _region(tl)
    region_ns = region.ns
    busy = _union(_clip([(o.start, o.end) for o in region.ops], region.spans))
    busy_ns = float(_length(busy))
    idle_ns = max(region_ns - busy_ns, 0.0)
    kernels = [o for o in region.ops if o.kind == "kernel"]
    copies = [o for o in region.ops if o.kind == "memcpy"]
    memsets = [o for o in region.ops if o.kind == "memset"]
    kernel_ns = float(sum(o.end - o.start for o in kernels))
    copy_ns = float(sum(c.end - c.start for c in copies))
    facts = TraceFacts()
    tk = _kernels(kernels, kernel_ns, facts)
    tc = _copies(copies, facts)
    facts.copy_kernel_alternations = _alternations(region.ops)
    ta, launch_calls, launch_ns = _host_api(region, facts)
    gap_rows, launch_idle = _gaps(region, busy, facts, gap_threshold_ns)
    long_gaps = sorted(g.duration_ns for g in gap_rows)
    busy_pct = _pct(busy_ns, region_ns)
    launch_overhead_pct = _pct(launch_idle, region_ns)
    cls, why = _system_class(busy_pct, copy_ns, busy_ns, launch_overhead_pct, facts, len(kernels))
    summary = TraceSummary(
        source=tl.source, region=region.name, region_ns=region_ns, gpu_busy_ns=busy_ns, gpu_idle_ns=idle_ns,
        gpu_busy_pct=busy_pct, kernel_ns=kernel_ns, copy_ns=copy_ns,
        memset_ns=float(sum(m.end - m.start for m in memsets)), launches=len(kernels), kernels_total=len(tk),
        kernels=tk[:MAX_KERNELS], copies=tc, memsets=len(memsets), memset_bytes=sum(m.bytes for m in memsets),
        api=ta[:MAX_API], launch_calls=launch_calls, launch_api_ns=launch_ns,
        launch_overhead_pct=launch_overhead_pct, host_overhead_pct=_pct(idle_ns, region_ns), gaps=len(gap_rows),
        gap_threshold_ns=gap_threshold_ns, gap_median_ns=statistics.median(long_gaps) if long_gaps else None,
        gap_p90_ns=long_gaps[min(int(0.9 * len(long_gaps)), len(long_gaps) - 1)] if long_gaps else None,
        top_gaps=sorted(gap_rows, key=lambda g: -g.duration_ns)[:MAX_GAPS],
        copy_compute_overlap_pct=_overlap_pct(kernels, copies, copy_ns, kernel_ns),
        nvtx=_nvtx(tl, region.spans)[:20], system_class=cls,
        system_class_reason=why, dropped_records=tl.dropped, processes=max(tl.processes, 1),
    )
    return summary, facts


def _system_class(busy_pct: float, copy_ns: float, busy_ns: float, launch_pct: float, facts: TraceFacts,
                  launches: int) -> tuple[Any, str]:
    copy_share = 100.0 * copy_ns / busy_ns if busy_ns else 0.0
    if busy_pct >= 80.0:
        if copy_share >= 50.0:
            return "copy-bound", (f"the GPU is busy {busy_pct:.0f}% of the region and copies take {copy_share:.0f}% "
                                  "of that busy time")
        return "gpu-bound", (f"the GPU is busy {busy_pct:.0f}% of the region: kernel work decides the time; profile "
                             "the top kernels (analyze)")
    idle = 100.0 - busy_pct
    if launch_pct >= 0.5 * idle and facts.individual_launches >= 16:
        return "launch-bound", (f"the GPU is idle {idle:.0f}% of the region, {launch_pct:.0f}% of it waiting for "
                                f"the host to launch the next of {facts.individual_launches} individually launched "
                                "kernels")
    if busy_pct < 50.0:
        top = max(facts.gap_causes.items(), key=lambda kv: kv[1])[0] if facts.gap_causes else "host"
        return "host-bound", (f"the GPU is idle {idle:.0f}% of the region; the idle time goes mostly to "
                              f"{'host code outside CUDA calls' if top == 'host' else top + ' calls'}")
    return "mixed", (f"the GPU is busy {busy_pct:.0f}% of the region: both GPU work and host-side gaps "
                     f"({idle:.0f}%) matter")
