"""Timelines: CUDA activity from Nsight Systems' SQLite export or from our CUPTI tracer, in one form,
and the Chrome/Perfetto export; their summary is :mod:`kernelscope.measure.summary`.

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
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

# CUPTI_ACTIVITY_MEMCPY_KIND_* (nsys' ENUM_CUDA_MEMCPY_OPER uses the same values)
COPY_KINDS = {1: "HtoD", 2: "DtoH", 3: "HtoA", 4: "AtoH", 5: "AtoA", 6: "AtoD", 7: "DtoA", 8: "DtoD", 9: "HtoH",
              10: "PtoP"}
# CUPTI_ACTIVITY_MEMORY_KIND_*
MEM_PAGEABLE, MEM_PINNED = 1, 2
SYNC_TYPES = {1: "event synchronize", 2: "stream wait event", 3: "stream synchronize", 4: "context synchronize"}
MARKER_START, MARKER_END, MARKER_INSTANT = 1 << 1, 1 << 2, 1 << 0
# nsys' ENUM_NSYS_EVENT_TYPE for NVTX rows
NVTX_PUSHPOP, NVTX_STARTEND = 59, 60


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


# ------------------------------------------------------------------------------------ facts
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


def launch_configs(tl: Timeline) -> set[tuple[Any, ...]]:
    """The distinct (kernel, grid, block) of a timeline's kernel launches."""
    return {(o.mangled or o.name, o.grid, o.block) for o in tl.ops if o.kind == "kernel"}
