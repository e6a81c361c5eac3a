"""Profiles and their analysis: per-kernel metrics, the roofline, the bottleneck, ncu-profile and analyze."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from kernelscope.models.findings import Evidence, Finding
from kernelscope.models.trace import TraceSummary


# --------------------------------------------------------------------------- Nsight Compute profiles
class MetricValue(BaseModel):
    value: float | str | None = Field(description="None when the capture lacks the metric (never 0 for missing).")
    unit: str | None = None


class NcuRuleResult(BaseModel):
    """One of Nsight Compute's own rule results, as recorded in the report."""

    rule: str
    name: str
    section: str | None = None
    title: str | None = None
    message: str
    type: Literal["info", "warning", "error", "ok", "optimization", "unknown"] = "unknown"
    focus_metrics: list[dict[str, object]] = Field(default_factory=list)


# a per-line counter of our own: warp-level global atomic and reduction instructions executed on the line (ncu's
# source view has none; the readers derive it from the opcode at each PC where they know it)
GLOBAL_ATOMIC_INST = "derived__inst_executed_global_atomic"
# another: warp-level instructions that wait for other blocks (a spin-wait's back-off NANOSLEEP, a volatile load,
# STRONG.SYS, an acquire load, a STRONG load followed by CCTL.IVALL, a STRONG load in a loop its value decides);
# a plain ld.cg (__ldcg, STRONG.GPU alone) streams data and does not count
POLL_INST = "derived__inst_executed_poll"
# another: warp-level global loads whose address waits for an earlier load's value (a pointer or index chase, a
# tree descent, a search: measure.sourcemap.chained_load), where the reader knows the SASS
CHAINED_LOAD_INST = "derived__inst_executed_chained_load"
# and the global and generic loads on the line, chained or not (its presence says the reader followed the SASS)
GLOBAL_LOAD_INST = "derived__inst_executed_global_load"
# Nsight Compute's per-PC excess L2 sectors (those beyond what the accessed bytes need); and, our own, those of the
# line's global atomic and reduction instructions alone: an update scattered over many targets moves a sector per
# lane by its nature
EXCESS_SECTORS = "derived__memory_l2_theoretical_sectors_global_excessive"
ATOMIC_EXCESS_SECTORS = "derived__memory_l2_theoretical_sectors_global_excessive_atomic"
# and those of the line's indexed accesses alone (measure.sourcemap.indexed_access: a load, store or atomic whose
# address comes from a value loaded in the same pass, a gather or scatter through an index)
INDEXED_EXCESS_SECTORS = "derived__memory_l2_theoretical_sectors_global_excessive_indexed"
# barrier stall samples at a barrier that ends a phase in which the block polls (a POLL_INST instruction between the
# previous barrier and this one, in program order): the block waits there for the warp that waits for other blocks
BARRIER_AFTER_POLL = "derived__pcsamp_barrier_after_poll"


def is_toolkit_header(path: str) -> bool:
    """A CUDA toolkit header (inlined intrinsics such as atomicAdd): its lines belong to the user's call site."""
    p = path.replace("\\", "/").lower()
    return "/include/" in p and ("cuda" in p or "/targets/" in p) and p.endswith((".h", ".hpp", ".cuh"))


class SourceLineCounters(BaseModel):
    file: str
    line: int
    code: str | None = Field(None, description="The source line's text, when the report imported the source.")
    counters: dict[str, float] = Field(default_factory=dict, description="Per-line sums of ncu's per-PC metrics.")

    @property
    def label(self) -> str:
        """The line as findings name it: ``file:line  `code```."""
        return f"{self.file}:{self.line}" + (f"  `{self.code}`" if self.code else "")


class KernelProfile(BaseModel):
    id: int = Field(description="The launch's position in the report.")
    name: str = Field(description="Demangled name.")
    mangled_name: str
    device: str | None = None
    grid_size: int | None = None
    block_size: int | None = None
    registers_per_thread: int | None = None
    shared_mem_static_bytes: int | None = None
    shared_mem_dynamic_bytes: int | None = None
    waves_per_sm: float | None = None
    duration_ns: float | None = None
    sm_throughput_pct: float | None = None
    memory_throughput_pct: float | None = None
    dram_bytes_read: float | None = None
    dram_bytes_write: float | None = None
    l1_hit_rate_pct: float | None = None
    l2_hit_rate_pct: float | None = None
    achieved_occupancy_pct: float | None = None
    theoretical_occupancy_pct: float | None = None
    branch_uniformity_pct: float | None = Field(None, description="Share of branch targets taken uniformly by warps.")
    global_load_sectors_per_request: float | None = Field(None, description="4 is ideal for 32-bit coalesced loads.")
    global_store_sectors_per_request: float | None = None
    stall_reasons: dict[str, float] = Field(
        default_factory=dict, description="Warp cycles per issued instruction stalled by reason (ncu WarpStateStats).")
    metrics: dict[str, MetricValue] = Field(default_factory=dict, description="The metrics the rules read.")
    ncu_rules: list[NcuRuleResult] = Field(default_factory=list)
    source_lines: list[SourceLineCounters] = Field(
        default_factory=list, description="Hottest source lines by warp samples (needs -lineinfo).")

    def num(self, metric: str) -> float | None:
        """A kept metric as a number, or None when it was not captured (or is not numeric)."""
        mv = self.metrics.get(metric)
        return float(mv.value) if mv is not None and isinstance(mv.value, (int, float)) else None


class Profile(BaseModel):
    report: str = Field(description="Report file name (the full report stays an artifact).")
    kernels: list[KernelProfile] = Field(default_factory=list)


BottleneckClass = Literal["memory-bound", "compute-bound", "latency-bound", "occupancy-limited",
                          "launch/tail-limited", "mixed"]


class GpuPeaks(BaseModel):
    name: str
    fp32_tflops: float
    fp64_tflops: float
    tf32_tensor_tflops: float = Field(description="Dense.")
    fp16_tensor_tflops: float = Field(description="Dense FP16/BF16 with FP32 accumulation.")
    dram_gbps: float
    sm_count: int
    source: str = "vendor datasheet (boost clock)"


class Roofline(BaseModel):
    flops: float | None = Field(None, description="FP32 FLOPs executed (FADD + FMUL + 2 x FFMA), when captured.")
    dram_bytes: float | None = None
    arithmetic_intensity: float | None = Field(None, description="FLOP per DRAM byte.")
    ridge_point: float = Field(description="FLOP/byte where the FP32 roof meets the DRAM roof.")
    attainable_tflops: float | None = None
    achieved_tflops: float | None = None
    achieved_dram_gbps: float | None = None
    roofline_time_ns: float | None = Field(None, description="max(bytes/peak bandwidth, flops/peak FLOP rate).")
    fraction_of_roofline: float | None = Field(None, description="roofline_time / measured time (1.0 = at the roof).")


class Bottleneck(BaseModel):
    kernel: str
    cls: BottleneckClass
    confidence: float = Field(ge=0, le=1)
    sm_throughput_pct: float | None = None
    memory_throughput_pct: float | None = None
    roofline: Roofline | None = None
    peaks: GpuPeaks | None = None
    evidence: list[Evidence] = Field(default_factory=list)
    reasoning: str


class KernelAnalysis(BaseModel):
    name: str
    mangled_name: str
    duration_ns: float | None = None
    bottleneck: Bottleneck
    findings: list[Finding] = Field(default_factory=list)
    ncu_rule_titles: list[str] = Field(default_factory=list, description="Nsight Compute's own rule titles.")


class ClassifyResult(BaseModel):
    report: str | None = None
    kernels: list[KernelAnalysis] = Field(default_factory=list)
    analytic: Roofline | None = Field(None, description="Roofline of the given FLOPs/bytes/time (reference mode).")
    peaks: GpuPeaks | None = None


class MetricDelta(BaseModel):
    metric: str
    before: float | None
    after: float | None
    change_pct: float | None = Field(None, description="100 * (after - before) / before, when both exist.")
    better: bool | None = Field(None, description="Whether the change is an improvement (None: neutral metric).")


class CompareResult(BaseModel):
    before: str = Field(description="Kernel (and report) before.")
    after: str
    speedup: float | None = Field(None, description="duration before / duration after.")
    bottleneck_before: BottleneckClass
    bottleneck_after: BottleneckClass
    deltas: list[MetricDelta] = Field(default_factory=list)
    resolved: list[Finding] = Field(default_factory=list, description="Findings present before, gone after.")
    appeared: list[Finding] = Field(default_factory=list, description="Findings new after the change.")
    persisting: list[str] = Field(default_factory=list, description="Rule ids present in both.")


# --------------------------------------------------------------------------- ncu-profile / analyze
CaptureStatus = Literal["ok", "no-kernels", "counters-not-permitted", "program-failed", "timed-out", "ncu-error"]


class NcuCapture(BaseModel):
    """One Nsight Compute run: the command (paths left out), how it went, and its report."""

    name: str
    command: list[str] = Field(default_factory=list)
    status: CaptureStatus = "ok"
    explanation: str | None = None
    fixes: list[str] = Field(default_factory=list)
    wall_s: float
    exit_status: int | None = None
    timed_out: bool = False
    messages: list[str] = Field(default_factory=list, description="ncu's ==WARNING==/==ERROR== lines.")
    report_bytes: int | None = None
    program_output: str | None = Field(None, description="Tail of the profiled program's stdout.")
    program_stderr: str | None = None


class KernelDiagnosis(BaseModel):
    """One kernel: its class on the roofline and the ranked findings with evidence and fixes."""

    id: int
    name: str
    mangled_name: str
    launches: int = 1
    duration_ns: float | None = Field(None, description="The profiled launch (the longest, for several).")
    total_duration_ns: float | None = Field(None, description="All profiled launches of this kernel.")
    grid_size: int | None = None
    block_size: int | None = None
    registers_per_thread: int | None = None
    bottleneck: Bottleneck
    findings: list[Finding] = Field(default_factory=list)
    top_stalls: dict[str, float] = Field(default_factory=dict, description="Cycles per issued instruction.")
    hot_lines: list[str] = Field(default_factory=list, description="Source lines with the most warp samples.")
    ncu_rule_titles: list[str] = Field(default_factory=list, description="Nsight Compute's own advice (titles).")


class NcuProfileResult(BaseModel):
    status: CaptureStatus
    explanation: str | None = None
    fixes: list[str] = Field(default_factory=list)
    mode: Literal["program", "eval"]
    capture: NcuCapture
    report_id: str | None = Field(None, description="Artifact id of the .ncu-rep (resource "
                                                    "kernelscope://artifacts/{id}/report); usable as report_path "
                                                    "in bottleneck_classify and compare.")
    kernels_total: int = 0
    kernels: list[KernelDiagnosis] = Field(default_factory=list, description="At most 20 launches.")
    parse_s: float | None = None
    gpu_wait_s: float = 0.0
    notes: list[str] = Field(default_factory=list)


class AnalyzeStage(BaseModel):
    name: Literal["trace", "light", "deep", "rules"]
    sections: list[str] = Field(default_factory=list)
    rule_families: list[str] = Field(default_factory=list)
    metrics: int = Field(0, description="Metrics named beyond the sections (stage 1: all of its metrics; stage 2: "
                                        "those the rules of the chosen families need).")
    kernels: list[str] = Field(default_factory=list)
    capture: NcuCapture | None = None
    tool: Literal["ncu", "cupti"] | None = Field(
        None, description="What measured the kernels: Nsight Compute, or the CUPTI collector inside the program's "
                          "own run (both stages of a program: the deep stage's share is its launches' passes).")
    wall_s: float


class AnalyzeResult(BaseModel):
    status: CaptureStatus
    explanation: str | None = None
    fixes: list[str] = Field(default_factory=list)
    mode: Literal["program", "eval"]
    stages: list[AnalyzeStage] = Field(default_factory=list, description="What ran, with which sections, and "
                                                                        "how long each took.")
    kernels: list[KernelDiagnosis] = Field(default_factory=list, description="The kernels taking the most time.")
    kernels_total: int = 0
    launches_profiled: int = 0
    other_kernels: list[str] = Field(default_factory=list, description="Kernels not analyzed in depth.")
    report_ids: list[str] = Field(default_factory=list, description="Artifacts of the Nsight Compute reports (the "
                                                                    "deep stage's, and the light stage's where ncu "
                                                                    "ran it).")
    system: TraceSummary | None = Field(None, description="The trace stage's timeline summary (launch-bound, "
                                                          "host-bound, ...), when it ran.")
    system_findings: list[Finding] = Field(default_factory=list, description="System-level findings of the trace "
                                                                             "stage.")
    trace_id: str | None = Field(None, description="Artifact of the trace stage's Chrome/Perfetto timeline.")
    wall_s: float | None = None
    gpu_wait_s: float = 0.0
    notes: list[str] = Field(default_factory=list)

