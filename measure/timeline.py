"""Timelines: CUDA activity from Nsight Systems' SQLite export or from our CUPTI tracer, in one form,
and its summary (where the wall time went on the GPU and on the host).

Both sources are CUPTI underneath, and they share CUPTI's enumerations (copy kinds, memory kinds,
synchronization types), so one normalized :class:`Timeline` serves both. ``summarize`` restricts it
to the region of interest: the profiler ranges (``cudaProfilerStart``/``Stop``) when the program
opened any, otherwise the window from its first to its last GPU activity (host set-up before the
first copy, and tear-down after the last kernel, are not the workload).
"""

from __future__ import annotations

import bisect
import gzip
import json
import re
import sqlite3
import statistics
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from kernelscope.models import (
    TraceApi,
    TraceCopy,
    TraceGap,
    TraceKernel,
    TraceNvtx,
    TraceSummary,
)

# CUPTI_ACTIVITY_MEMCPY_KIND_* (nsys' ENUM_CUDA_MEMCPY_OPER uses the same values)
COPY_KINDS = {1: "HtoD", 2: "DtoH", 3: "HtoA", 4: "AtoH", 5: "AtoA", 6: "AtoD", 7: "DtoA", 8: "DtoD", 9: "HtoH",
              10: "PtoP"}
# CUPTI_ACTIVITY_MEMORY_KIND_*
MEM_PAGEABLE, MEM_PINNED = 1, 2
SYNC_TYPES = {1: "event synchronize", 2: "stream wait event", 3: "stream synchronize", 4: "context synchronize"}
MARKER_START, MARKER_END, MARKER_INSTANT = 1 << 1, 1 << 2, 1 << 0
# nsys' ENUM_NSYS_EVENT_TYPE for NVTX rows
NVTX_PUSHPOP, NVTX_STARTEND = 59, 60

HOST_CODE = "host code (no CUDA call)"  # a gap's cause when no CUDA call covers enough of it
GAP_THRESHOLD_NS = 2_000.0  # shorter idle spells are the GPU's own launch latency between queued work
MAX_KERNELS, MAX_API, MAX_GAPS = 30, 25, 5

_SUFFIX = re.compile(r"(_v\d+)?(_ptsz|_ptds)?(_v\d+)?$")


def api_base(name: str) -> str:
    """``cudaLaunchKernel_v7000`` -> ``cudaLaunchKernel``; ``cuMemcpyHtoD_v2`` -> ``cuMemcpyHtoD``."""
    return _SUFFIX.sub("", name) or name


def api_category(name: str) -> Literal["launch", "sync", "alloc", "copy", "other"]:
    n = api_base(name)
    if n.startswith(("cudaLaunch", "cuLaunch", "cudaGraphLaunch", "cuGraphLaunch")):
        return "launch"
    if n in ("cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaEventSynchronize", "cuCtxSynchronize",
             "cuStreamSynchronize", "cuEventSynchronize", "cudaThreadSynchronize"):
        return "sync"
    if n.startswith(("cudaMalloc", "cudaFree", "cuMemAlloc", "cuMemFree", "cudaHostAlloc", "cuMemHostAlloc",
                     "cudaMallocHost", "cudaFreeHost", "cuMemCreate", "cuMemRelease", "cuMemMap", "cuMemUnmap",
                     "cuMemAddressReserve", "cuMemAddressFree")):
        return "alloc"
    if n.startswith(("cudaMemcpy", "cuMemcpy", "cudaMemset", "cuMemset")):
        return "copy"
    return "other"


# ------------------------------------------------------------------------------------ the timeline
@dataclass
class GpuOp:
    """A kernel, copy or memset on the GPU."""

    kind: Literal["kernel", "memcpy", "memset"]
    name: str
    start: int
    end: int
    mangled: str | None = None
    device: int = 0
    stream: int = 0
    corr: int = 0
    pid: int = 0
    graph: bool = False
    grid: tuple[int, int, int] | None = None
    block: tuple[int, int, int] | None = None
    registers: int | None = None
    bytes: int = 0
    direction: str | None = None
    src_kind: int = 0
    dst_kind: int = 0
    is_async: bool | None = None


@dataclass
class ApiCall:
    name: str
    domain: Literal["rt", "drv"]
    start: int
    end: int
    tid: int = 0
    pid: int = 0
    corr: int = 0
    nested: bool = False  # a driver call made inside a runtime call on the same thread

    @property
    def base(self) -> str:
        return api_base(self.name)


@dataclass
class Range:
    name: str
    start: int
    end: int
    tid: int = 0
    pid: int = 0


@dataclass
class Timeline:
    source: Literal["nsys", "cupti"]
    ops: list[GpuOp] = field(default_factory=list)
    api: list[ApiCall] = field(default_factory=list)
    nvtx: list[Range] = field(default_factory=list)
    syncs: list[Range] = field(default_factory=list)
    dropped: int = 0
    processes: int = 0
    notes: list[str] = field(default_factory=list)

    def finish(self) -> Timeline:
        self.ops.sort(key=lambda o: o.start)
        self.api.sort(key=lambda a: a.start)
        self.nvtx.sort(key=lambda r: r.start)
        _mark_nested(self.api)
        self.processes = max(self.processes, len({o.pid for o in self.ops} | {a.pid for a in self.api}))
        return self

    def profiler_ranges(self) -> list[tuple[int, int]]:
        """(start, end) of each cudaProfilerStart..cudaProfilerStop range (the driver's cuProfiler* when
        the runtime's are absent), in time order; an unclosed range ends at the last activity."""
        outer = [a for a in self.api if not a.nested]
        starts = sorted(a.end for a in outer if a.base in ("cudaProfilerStart", "cuProfilerStart"))
        stops = sorted(a.start for a in outer if a.base in ("cudaProfilerStop", "cuProfilerStop"))
        last = max([o.end for o in self.ops] + [a.end for a in self.api], default=0)
        out: list[tuple[int, int]] = []
        for s in starts:
            if out and s < out[-1][1]:
                continue  # nested or repeated start inside an open range
            e = next((t for t in stops if t > s), last)
            out.append((s, e))
        return out


def _mark_nested(api: list[ApiCall]) -> None:
    rt: dict[tuple[int, int], list[tuple[int, int]]] = defaultdict(list)
    for a in api:
        if a.domain == "rt":
            rt[(a.pid, a.tid)].append((a.start, a.end))
    starts = {k: [s for s, _ in v] for k, v in rt.items()}
    for a in api:
        if a.domain != "drv":
            continue
        spans = rt.get((a.pid, a.tid))
        if not spans:
            continue
        i = bisect.bisect_right(starts[(a.pid, a.tid)], a.start) - 1
        if i >= 0 and spans[i][0] <= a.start and a.end <= spans[i][1]:
            a.nested = True


# ------------------------------------------------------------------------------------ loaders
def load_cupti(trace_dir: Path) -> Timeline:
    """Our CUPTI tracer's JSON Lines, one file per traced process (``trace-<pid>.jsonl``, or gzipped)."""
    tl = Timeline(source="cupti")
    files = sorted([*Path(trace_dir).glob("trace-*.jsonl"), *Path(trace_dir).glob("trace-*.jsonl.gz")])
    open_markers: dict[tuple[int, int], tuple[str, int]] = {}
    malformed = 0
    for f in files:
        stem = f.name.split("-", 1)[1].split(".", 1)[0]
        pid = int(stem) if stem.isdigit() else 0
        tl.processes += 1
        opener = gzip.open if f.suffix == ".gz" else open
        with opener(f, "rt", encoding="utf-8", errors="replace") as fh:
            for ln in fh:
                try:
                    r = json.loads(ln)
                except ValueError:
                    continue  # a line cut short by a crash
                try:
                    _cupti_record(tl, r, pid, open_markers)
                except (AttributeError, KeyError, TypeError, ValueError):
                    malformed += 1  # not a record our tracer writes: the traced program wrote into its directory
    if malformed:
        tl.notes.append(f"{malformed} malformed trace record(s) skipped (not written by the tracer)")
    return tl.finish()


def _cupti_record(tl: Timeline, r: dict[str, Any], pid: int, open_markers: dict[tuple[int, int], tuple[str, int]]
                  ) -> None:
    t = r.get("t")
    if t == "kernel":
        tl.ops.append(GpuOp(kind="kernel", name=r.get("name") or r.get("mangled") or "?", start=r["start"],
                            end=r["end"], mangled=r.get("mangled"), device=r.get("dev", 0),
                            stream=r.get("stream", 0), corr=r.get("corr", 0),
                            pid=pid, graph=bool(r.get("graph")), grid=tuple(r["grid"]) if r.get("grid") else None,
                            block=tuple(r["block"]) if r.get("block") else None, registers=r.get("regs")))
    elif t == "memcpy":
        direction = COPY_KINDS.get(r.get("kind", 0), "other")
        tl.ops.append(GpuOp(kind="memcpy", name=f"memcpy {direction}", start=r["start"], end=r["end"],
                            device=r.get("dev", 0), stream=r.get("stream", 0), corr=r.get("corr", 0), pid=pid,
                            graph=bool(r.get("graph")), bytes=r.get("bytes", 0), direction=direction,
                            src_kind=r.get("src", 0), dst_kind=r.get("dst", 0), is_async=bool(r.get("async"))))
    elif t == "memset":
        tl.ops.append(GpuOp(kind="memset", name="memset", start=r["start"], end=r["end"], device=r.get("dev", 0),
                            stream=r.get("stream", 0), corr=r.get("corr", 0), pid=pid, graph=bool(r.get("graph")),
                            bytes=r.get("bytes", 0), is_async=bool(r.get("async"))))
    elif t == "api":
        tl.api.append(ApiCall(name=r.get("name") or f"cbid {r.get('cbid')}", domain="drv" if r.get("dom") == "drv"
                              else "rt", start=r["start"], end=r["end"], tid=r.get("tid", 0), pid=pid,
                              corr=r.get("corr", 0)))
    elif t == "sync":
        tl.syncs.append(Range(name=SYNC_TYPES.get(r.get("type", 0), "synchronize"), start=r["start"], end=r["end"],
                              pid=pid))
    elif t == "marker":
        flags, key = r.get("flags", 0), (pid, r.get("id", 0))
        if flags & MARKER_START:
            open_markers[key] = (r.get("name") or "(unnamed)", r["ts"])
        elif flags & MARKER_END and key in open_markers:
            name, start = open_markers.pop(key)
            tl.nvtx.append(Range(name=name, start=start, end=r["ts"], pid=pid))
    elif t == "dropped":
        tl.dropped += int(r.get("n", 0))
    elif t == "meta" and r.get("disabled"):
        tl.notes.append(f"the tracer could not enable: {', '.join(map(str, r['disabled']))}")


def load_nsys_sqlite(path: Path) -> Timeline:
    """Nsight Systems' SQLite export (``nsys export --type sqlite`` / ``nsys profile --export sqlite``),
    read through the tables of NVIDIA's documented schema; tables a capture lacks are skipped."""
    tl = Timeline(source="nsys")
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        strings = dict(con.execute("SELECT id, value FROM StringIds")) if "StringIds" in tables else {}

        def rows(table: str, cols: str) -> Iterable[sqlite3.Row]:
            if table not in tables:
                return []
            have = {r[1] for r in con.execute(f"PRAGMA table_info({table})")}
            sel = ", ".join(c if c in have else f"NULL AS {c}" for c in cols.split(", "))
            cur = con.execute(f"SELECT {sel} FROM {table}")
            cur.row_factory = sqlite3.Row
            return cur

        for r in rows("CUPTI_ACTIVITY_KIND_KERNEL", "start, end, deviceId, streamId, correlationId, globalPid, "
                      "demangledName, shortName, mangledName, gridX, gridY, gridZ, blockX, blockY, blockZ, "
                      "registersPerThread, graphNodeId"):
            name = strings.get(r["demangledName"]) or strings.get(r["shortName"]) or "?"
            tl.ops.append(GpuOp(kind="kernel", name=name, start=r["start"], end=r["end"], device=r["deviceId"] or 0,
                                mangled=strings.get(r["mangledName"]),
                                stream=r["streamId"] or 0, corr=r["correlationId"] or 0, pid=_pid(r["globalPid"]),
                                graph=bool(r["graphNodeId"]), grid=(r["gridX"], r["gridY"], r["gridZ"]),
                                block=(r["blockX"], r["blockY"], r["blockZ"]), registers=r["registersPerThread"]))
        for r in rows("CUPTI_ACTIVITY_KIND_MEMCPY", "start, end, deviceId, streamId, correlationId, globalPid, bytes, "
                      "copyKind, srcKind, dstKind, graphNodeId"):
            direction = COPY_KINDS.get(r["copyKind"] or 0, "other")
            tl.ops.append(GpuOp(kind="memcpy", name=f"memcpy {direction}", start=r["start"], end=r["end"],
                                device=r["deviceId"] or 0, stream=r["streamId"] or 0, corr=r["correlationId"] or 0,
                                pid=_pid(r["globalPid"]), graph=bool(r["graphNodeId"]), bytes=r["bytes"] or 0,
                                direction=direction, src_kind=r["srcKind"] or 0, dst_kind=r["dstKind"] or 0))
        for r in rows("CUPTI_ACTIVITY_KIND_MEMSET", "start, end, deviceId, streamId, correlationId, globalPid, bytes, "
                      "graphNodeId"):
            tl.ops.append(GpuOp(kind="memset", name="memset", start=r["start"], end=r["end"], device=r["deviceId"] or 0,
                                stream=r["streamId"] or 0, corr=r["correlationId"] or 0, pid=_pid(r["globalPid"]),
                                graph=bool(r["graphNodeId"]), bytes=r["bytes"] or 0))
        for r in rows("CUPTI_ACTIVITY_KIND_RUNTIME", "start, end, globalTid, correlationId, nameId"):
            name = strings.get(r["nameId"]) or "?"
            tl.api.append(ApiCall(name=name, domain="drv" if name.startswith("cu") and not name.startswith("cuda")
                                  else "rt", start=r["start"], end=r["end"], tid=_tid(r["globalTid"]),
                                  pid=_pid(r["globalTid"]), corr=r["correlationId"] or 0))
        for r in rows("CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", "start, end, globalPid, syncType"):
            tl.syncs.append(Range(name=SYNC_TYPES.get(r["syncType"] or 0, "synchronize"), start=r["start"],
                                  end=r["end"], pid=_pid(r["globalPid"])))
        for r in rows("NVTX_EVENTS", "start, end, eventType, text, textId, globalTid"):
            if r["eventType"] not in (NVTX_PUSHPOP, NVTX_STARTEND) or r["end"] is None:
                continue
            name = r["text"] or strings.get(r["textId"]) or "(unnamed)"
            tl.nvtx.append(Range(name=name, start=r["start"], end=r["end"], tid=_tid(r["globalTid"]),
                                 pid=_pid(r["globalTid"])))
    finally:
        con.close()
    # nsys records the async-ness only in the API's name
    by_corr = {a.corr: a for a in tl.api if a.corr}
    for o in tl.ops:
        if o.kind != "kernel" and o.corr in by_corr:
            o.is_async = "Async" in by_corr[o.corr].base
    return tl.finish()


def _pid(global_id: int | None) -> int:
    """nsys packs the process id into bits 24-47 of globalPid/globalTid."""
    return (int(global_id) >> 24) & 0xFFFFFF if global_id else 0


def _tid(global_tid: int | None) -> int:
    return int(global_tid) & 0xFFFFFF if global_tid else 0


# ------------------------------------------------------------------------------------ summary
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


@dataclass
class TraceFacts:
    """What the system rules read beyond the summary: counts a summary does not list."""

    copy_kernel_alternations: int = 0  # kernel -> host copy -> kernel transitions on the GPU timeline
    alloc_calls: int = 0
    alloc_ns: float = 0.0
    sync_calls: int = 0
    sync_idle_ns: float = 0.0  # GPU idle in gaps that began while the host waited in a blocking call
    synchronous_copies: int = 0
    individual_launches: int = 0  # kernels launched one by one (not from a CUDA graph)
    median_kernel_ns: float | None = None
    gap_causes: dict[str, float] = field(default_factory=dict)  # idle ns by cause


def summarize(tl: Timeline, *, gap_threshold_ns: float = GAP_THRESHOLD_NS) -> tuple[TraceSummary, TraceFacts]:
    """The region's summary and the facts the system rules need. Raises ValueError when the trace has no
    GPU activity at all."""
    ranges = tl.profiler_ranges()
    gpu_all = [(o.start, o.end) for o in tl.ops]
    if not gpu_all:
        raise ValueError("no GPU activity (kernels, copies or memsets) was recorded")
    if ranges and _length(_clip(gpu_all, ranges)) > 0:
        regions = ranges
        region_name = (f"{len(ranges)} profiler range(s) (cudaProfilerStart/Stop)" if len(ranges) > 1
                       else "the profiler range (cudaProfilerStart/Stop)")
    else:
        regions = [(min(s for s, _ in gpu_all), max(e for _, e in gpu_all))]
        region_name = "the GPU-active window (first to last GPU activity)"
        if ranges:
            region_name += "; the profiler range(s) held no GPU activity"
    region_ns = float(_length(regions))
    ops = [o for o in tl.ops if _length(_clip([(o.start, o.end)], regions)) > 0]
    api = [a for a in tl.api if not a.nested and _length(_clip([(a.start, a.end)], regions)) > 0]
    busy = _union(_clip([(o.start, o.end) for o in ops], regions))
    busy_ns = float(_length(busy))
    idle_ns = max(region_ns - busy_ns, 0.0)

    kernels = [o for o in ops if o.kind == "kernel"]
    copies = [o for o in ops if o.kind == "memcpy"]
    memsets = [o for o in ops if o.kind == "memset"]
    kernel_ns = float(sum(o.end - o.start for o in kernels))
    facts = TraceFacts()

    # kernels by function
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

    # copies by direction
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
    copy_ns = float(sum(c.end - c.start for c in copies))

    # copy/compute overlap, against the most that could overlap (the smaller of the two)
    overlap_pct = None
    if copies and copy_ns and kernel_ns:
        kspans = _union((k.start, k.end) for k in kernels)
        kstarts = [s for s, _ in kspans]
        cspans = _union((c.start, c.end) for c in copies)
        possible = min(_length(cspans), _length(kspans))
        overlapped = sum(_overlap(c, kspans, kstarts) for c in cspans)
        overlap_pct = round(min(100.0 * overlapped / possible, 100.0), 2) if possible else None

    # kernel -> host copy -> kernel alternations
    seq = [o for o in ops if o.kind == "kernel" or (o.kind == "memcpy" and o.direction in ("HtoD", "DtoH"))]
    prev = None
    for i, o in enumerate(seq):
        if o.kind == "memcpy" and prev == "kernel" and any(x.kind == "kernel" for x in seq[i + 1:i + 4]):
            facts.copy_kernel_alternations += 1
        prev = o.kind

    # host API
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
    launch_ns = float(_length(_clip([(a.start, a.end) for a in launch_calls], regions)))
    allocs = [a for a in api if api_category(a.name) == "alloc"]
    facts.alloc_calls, facts.alloc_ns = len(allocs), float(sum(a.end - a.start for a in allocs))
    syncs = [a for a in api if api_category(a.name) == "sync"]
    facts.sync_calls = len(syncs)

    # idle gaps and their causes
    gaps: list[tuple[int, int]] = []
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
    host_starts = [a.start for a in api]  # api keeps the timeline's order: by start
    op_starts = [o.start for o in ops]
    op_ends = sorted(ops, key=lambda o: o.end)
    op_end_keys = [o.end for o in op_ends]
    launch_idle = 0.0
    gap_rows: list[TraceGap] = []
    region_start = regions[0][0]
    for gs, ge in gaps:
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
    long_gaps = sorted(g.duration_ns for g in gap_rows)
    top_gaps = sorted(gap_rows, key=lambda g: -g.duration_ns)[:MAX_GAPS]

    # NVTX ranges in the region
    by_range: dict[str, list[Range]] = defaultdict(list)
    for r in tl.nvtx:
        if _length(_clip([(r.start, r.end)], regions)) > 0:
            by_range[r.name].append(r)
    tn = sorted((TraceNvtx(name=n, count=len(rs), total_ns=float(sum(r.end - r.start for r in rs)),
                           avg_ns=sum(r.end - r.start for r in rs) / len(rs)) for n, rs in by_range.items()),
                key=lambda r: -r.total_ns)

    busy_pct = round(100.0 * busy_ns / region_ns, 2) if region_ns else 0.0
    launch_overhead_pct = round(100.0 * launch_idle / region_ns, 2) if region_ns else 0.0
    cls, why = _system_class(busy_pct, copy_ns, busy_ns, launch_overhead_pct, facts, len(kernels))
    summary = TraceSummary(
        source=tl.source, region=region_name, region_ns=region_ns, gpu_busy_ns=busy_ns, gpu_idle_ns=idle_ns,
        gpu_busy_pct=busy_pct, kernel_ns=kernel_ns, copy_ns=copy_ns,
        memset_ns=float(sum(m.end - m.start for m in memsets)), launches=len(kernels), kernels_total=len(tk),
        kernels=tk[:MAX_KERNELS], copies=tc, memsets=len(memsets), memset_bytes=sum(m.bytes for m in memsets),
        api=ta[:MAX_API], launch_calls=len(launch_calls), launch_api_ns=launch_ns,
        launch_overhead_pct=launch_overhead_pct,
        host_overhead_pct=round(100.0 * idle_ns / region_ns, 2) if region_ns else 0.0, gaps=len(gap_rows),
        gap_threshold_ns=gap_threshold_ns, gap_median_ns=statistics.median(long_gaps) if long_gaps else None,
        gap_p90_ns=long_gaps[min(int(0.9 * len(long_gaps)), len(long_gaps) - 1)] if long_gaps else None,
        top_gaps=top_gaps, copy_compute_overlap_pct=overlap_pct, nvtx=tn[:20], system_class=cls,
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


# ------------------------------------------------------------------------------------ export
def chrome_trace(tl: Timeline, *, max_events: int = 200_000) -> dict[str, Any]:
    """The timeline as Chrome trace-event JSON (opens in ui.perfetto.dev and chrome://tracing):
    one process per GPU with a track per stream, one per host process with a track per thread."""
    t0 = min([o.start for o in tl.ops] + [a.start for a in tl.api], default=0)
    ev: list[dict[str, Any]] = []

    def us(t: int) -> float:
        return round((t - t0) / 1000.0, 3)

    gpu_pids = {}
    for o in tl.ops:
        pid = gpu_pids.setdefault(o.device, 1_000_000 + o.device)
        args: dict[str, Any] = {}
        if o.kind == "kernel":
            args = {"grid": o.grid, "block": o.block, "registers": o.registers, "graph": o.graph}
        else:
            args = {"bytes": o.bytes, "direction": o.direction, "async": o.is_async}
        ev.append({"name": o.name, "cat": o.kind, "ph": "X", "ts": us(o.start), "dur": us(o.end) - us(o.start),
                   "pid": pid, "tid": o.stream, "args": {"correlation": o.corr, **args}})
    for a in tl.api:
        if a.nested:
            continue
        ev.append({"name": a.base, "cat": f"cuda-api-{api_category(a.name)}", "ph": "X", "ts": us(a.start),
                   "dur": us(a.end) - us(a.start), "pid": a.pid, "tid": a.tid, "args": {"correlation": a.corr}})
    for r in tl.nvtx:
        ev.append({"name": r.name, "cat": "nvtx", "ph": "X", "ts": us(r.start), "dur": us(r.end) - us(r.start),
                   "pid": r.pid, "tid": r.tid or "nvtx"})
    for s, e in tl.profiler_ranges():
        ev.append({"name": "profiler range", "cat": "region", "ph": "X", "ts": us(s), "dur": us(e) - us(s),
                   "pid": 0, "tid": "region"})
    truncated = len(ev) > max_events
    ev = ev[:max_events]
    meta = [{"name": "process_name", "ph": "M", "pid": pid, "args": {"name": f"GPU {dev}"}}
            for dev, pid in gpu_pids.items()]
    meta += [{"name": "process_name", "ph": "M", "pid": p, "args": {"name": f"host process {p}"}}
             for p in sorted({a.pid for a in tl.api})]
    return {"traceEvents": meta + ev, "displayTimeUnit": "ns",
            "otherData": {"source": tl.source, "truncated": truncated, "dropped_records": tl.dropped}}
