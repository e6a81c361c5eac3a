"""The system level: a timeline's summary (kernels, copies, API calls, gaps, NVTX) and nsys-trace's answer."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from kernelscope.models.findings import Finding

TraceStatus = Literal["ok", "no-activity", "program-failed", "timed-out", "tracer-error"]
SystemClass = Literal["launch-bound", "host-bound", "copy-bound", "gpu-bound", "mixed"]


class TraceKernel(BaseModel):
    """One kernel function over the traced region."""

    name: str
    mangled_name: str | None = None
    count: int
    total_ns: float
    avg_ns: float
    min_ns: float
    max_ns: float
    share_pct: float = Field(description="Share of all kernel time in the region.")
    grid: list[int] | None = Field(None, description="Grid of its longest launch.")
    block: list[int] | None = None
    registers_per_thread: int | None = None
    in_graphs: int = Field(0, description="Launches that ran inside a CUDA graph.")


class TraceCopy(BaseModel):
    """Memory copies of one direction: HtoD, DtoH, DtoD, HtoH, PtoP."""

    direction: str
    count: int
    bytes: int
    total_ns: float
    avg_bytes: float
    gb_per_s: float | None = Field(None, description="bytes / total copy time.")
    pageable: int = Field(0, description="Copies to or from pageable (not pinned) host memory.")
    pinned: int = 0
    synchronous: int = Field(0, description="Copies issued without the async flag (they block the host).")
    min_bytes: int = 0
    max_bytes: int = 0


class TraceApi(BaseModel):
    """One CUDA API function called by the host (runtime or driver, calls nested in another not counted)."""

    name: str
    category: Literal["launch", "sync", "alloc", "copy", "other"]
    count: int
    total_ns: float
    avg_ns: float
    max_ns: float


class TraceGap(BaseModel):
    """An interval in which the GPU ran nothing, with what the host was doing meanwhile."""

    start_ns: float = Field(description="Offset from the start of the region.")
    duration_ns: float
    after: str | None = Field(None, description="The GPU activity that ended the busy period before it.")
    before: str | None = Field(None, description="The GPU activity that started after it.")
    cause: str = Field(description="The host API call that covers most of the gap, or 'host code (no CUDA "
                                   "call)' when none does.")


class TraceNvtx(BaseModel):
    name: str
    count: int
    total_ns: float
    avg_ns: float


class TraceSummary(BaseModel):
    """A timeline turned into numbers: where the region's wall time went, on the GPU and the host."""

    source: Literal["nsys", "cupti"]
    region: str = Field(description="What was summarized: the profiler range(s) (cudaProfilerStart/Stop), or the "
                                    "program's GPU-active window (first to last GPU activity).")
    region_ns: float
    gpu_busy_ns: float = Field(description="Time in which at least one kernel, copy or memset ran.")
    gpu_idle_ns: float
    gpu_busy_pct: float
    kernel_ns: float = Field(description="Summed kernel durations (overlapping kernels count twice).")
    copy_ns: float
    memset_ns: float
    launches: int = Field(description="Kernel executions in the region.")
    kernels_total: int = Field(description="Distinct kernel functions.")
    kernels: list[TraceKernel] = Field(default_factory=list, description="By total time, at most 30.")
    copies: list[TraceCopy] = Field(default_factory=list)
    memsets: int = 0
    memset_bytes: int = 0
    api: list[TraceApi] = Field(default_factory=list, description="By total time, at most 25.")
    launch_calls: int = Field(0, description="Host calls that launch GPU work (kernels or graphs).")
    launch_api_ns: float = Field(0.0, description="Host time inside launch calls.")
    launch_overhead_pct: float = Field(0.0, description="Share of the region's wall time the host spent in "
                                                        "launch calls.")
    host_overhead_pct: float = Field(description="Share of the region's wall time in which the GPU was idle: "
                                                 "time the host, not the GPU, decided.")
    gaps: int = Field(0, description="Idle intervals between GPU activities of at least gap_threshold_ns.")
    gap_threshold_ns: float = 0.0
    gap_median_ns: float | None = None
    gap_p90_ns: float | None = None
    top_gaps: list[TraceGap] = Field(default_factory=list, description="The longest, at most 5.")
    copy_compute_overlap_pct: float | None = Field(None, description="Time in which copies and kernels ran at once, "
                                                                     "as a share of the most that could overlap (the "
                                                                     "smaller of the two); None without both.")
    nvtx: list[TraceNvtx] = Field(default_factory=list)
    system_class: SystemClass
    system_class_reason: str
    dropped_records: int = 0
    processes: int = 1


class TraceCapture(BaseModel):
    """How the traced run went."""

    tool: Literal["nsys", "cupti"]
    command: list[str] = Field(default_factory=list)
    wall_s: float
    exit_status: int | None = None
    timed_out: bool = False
    signal: str | None = None
    program_output: str | None = None
    program_stderr: str | None = None


class TraceResult(BaseModel):
    status: TraceStatus
    explanation: str | None = None
    fixes: list[str] = Field(default_factory=list)
    mode: Literal["program", "script", "eval"]
    source: Literal["nsys", "cupti"] | None = None
    fallback: str | None = Field(None, description="Why the CUPTI tracer was used instead of Nsight Systems.")
    capture: TraceCapture | None = None
    summary: TraceSummary | None = None
    findings: list[Finding] = Field(default_factory=list)
    trace_id: str | None = Field(None, description="Artifact of the timeline: kernelscope://artifacts/{id}/trace is "
                                                   "Chrome/Perfetto JSON (open it in ui.perfetto.dev or "
                                                   "chrome://tracing).")
    wall_s: float | None = None
    gpu_wait_s: float = 0.0
    notes: list[str] = Field(default_factory=list)


