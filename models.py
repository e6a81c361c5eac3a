"""Pydantic models shared by several layers: the contracts between tools/, heuristics/ and server/.

Units are in field names (``_ns``, ``_bytes``, ``_pct``). A measurement that is missing is ``None``,
never 0.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, computed_field

Severity = Literal["info", "warning", "high", "critical"]


# --------------------------------------------------------------------------- findings (heuristics)
class Evidence(BaseModel):
    """One measured fact behind a finding."""

    metric: str = Field(description="Metric or statistic name, e.g. 'spill_stores_bytes' or an ncu metric.")
    value: float | str | None = Field(description="The measured value (None when not available).")
    threshold: float | str | None = Field(None, description="The rule's threshold it was compared to.")
    unit: str | None = None
    source: str | None = Field(None, description="Where it came from: ptxas, sass, ncu, nsys, ...")
    kernel: str | None = None
    line: str | None = Field(None, description="Source location responsible, 'file:line', when known.")


class Fix(BaseModel):
    """One remedy, ranked by the order in a finding's ``fixes`` list (most promising first)."""

    action: str
    expected_effect: str


class Finding(BaseModel):
    """A diagnosis produced by a rule: what is wrong, the evidence, and ranked fixes."""

    rule: str = Field(description="Rule id, e.g. 'sass.local-memory-spills'.")
    family: str = Field(description="Rule family: memory, occupancy, stalls, instructions, launch, tensor.")
    severity: Severity
    kernel: str | None = None
    title: str
    diagnosis: str = Field(description="One or two sentences with the numbers in them.")
    evidence: list[Evidence] = Field(default_factory=list)
    fixes: list[Fix] = Field(default_factory=list)
    impact: float | None = Field(None, ge=0, le=1, description="Estimated share of the kernel's time at stake "
                                                               "(0..1), where the rule can estimate it; ranks "
                                                               "findings of equal severity.")
    line: str | None = Field(None, description="The source line responsible (file:line `code`), where known.")


# --------------------------------------------------------------------------- compile
class Diagnostic(BaseModel):
    """One compiler message, parsed from nvcc/cudafe/gcc/ptxas output."""

    file: str | None = None
    line: int | None = None
    column: int | None = None
    severity: Literal["error", "warning", "remark", "note", "fatal"]
    message: str
    tool: Literal["nvcc", "host", "ptxas", "nvlink"] = "nvcc"
    instantiation: list[str] = Field(
        default_factory=list,
        description="Template instantiation chain of the error (innermost first), trimmed to the frames in your "
                    "source plus the innermost library frame, type names shortened.",
    )
    instantiation_depth: int = Field(0, description="Frames in the compiler's full chain (the raw log has them all).")


class KernelResources(BaseModel):
    """ptxas' resource report for one function (``-Xptxas -v`` / ``--resource-usage``)."""

    name: str = Field(description="Demangled name when demangling succeeds, else the mangled one.")
    mangled_name: str
    arch: str | None = None
    is_entry: bool = Field(True, description="A __global__ kernel (entry) rather than a device function.")
    registers: int | None = None
    barriers: int | None = None
    shared_bytes: int | None = Field(None, description="Static shared memory per block.")
    constant_bytes: int | None = Field(None, description="cmem[0] (kernel parameters and constants).")
    local_bytes: int | None = Field(None, description="lmem: per-thread local memory (arrays, spills).")
    stack_bytes: int | None = None
    spill_stores_bytes: int | None = None
    spill_loads_bytes: int | None = None


class CompileResult(BaseModel):
    success: bool
    artifact_id: str | None = Field(
        None, description="Content hash of (source, flags, arch, compiler); use it with sass/run/profile."
    )
    cache_hit: bool = False
    kind: Literal["cubin", "executable"]
    arch: str
    command: list[str] = Field(description="The nvcc command line, with the workspace paths shortened.")
    compiler_version: str
    compile_time_s: float = Field(description="Wall time of the compiler run (0 for a cache hit's reuse).")
    diagnostics: list[Diagnostic] = Field(default_factory=list)
    error_count: int = 0
    warning_count: int = 0
    kernels: list[KernelResources] = Field(default_factory=list)
    findings: list[Finding] = Field(default_factory=list)
    log: str = Field("", description="Compiler output (bounded); the full log is a resource.")
    log_truncated: bool = False
    first_error: str | None = Field(
        None, description="The first error, readable: where, what, the source line and the trimmed instantiation "
                          "chain (template errors repeat one cause many times; fix this one first).")
    notes: list[str] = Field(default_factory=list, description="What kernelscope added or changed, and why "
                                                               "(CUTLASS include paths, arch sm_90 -> sm_90a, ...).")


# --------------------------------------------------------------------------- sass
class InstructionClassCount(BaseModel):
    cls: str = Field(description="Instruction class, e.g. 'fp32', 'global_load', 'tensor', 'control'.")
    count: int
    pct: float


class MemoryWidthStats(BaseModel):
    """Global load/store instructions by access width in bits (32 = scalar float, 128 = float4)."""

    loads_by_width: dict[str, int] = Field(default_factory=dict)
    stores_by_width: dict[str, int] = Field(default_factory=dict)
    vectorized_load_pct: float | None = Field(None, description="Share of global loads of 64 bits or wider.")
    vectorized_store_pct: float | None = None


class KernelSassStats(BaseModel):
    name: str
    mangled_name: str
    arch: str | None = None
    instructions: int = Field(description="Static instruction count (excluding NOP padding).")
    registers: int | None = None
    shared_bytes: int | None = None
    classes: list[InstructionClassCount] = Field(default_factory=list)
    opcodes: dict[str, int] = Field(default_factory=dict, description="Base opcode -> static count.")
    memory: MemoryWidthStats = Field(default_factory=MemoryWidthStats)
    tensor_core_instructions: dict[str, int] = Field(
        default_factory=dict, description="HMMA/HGMMA/IMMA/... opcodes found, with counts."
    )
    uses_tensor_cores: bool = False
    local_loads: int = Field(0, description="LDL instructions (local memory: spills or stack arrays).")
    local_stores: int = Field(0, description="STL instructions.")
    predicated_pct: float = Field(0.0, description="Share of instructions guarded by a predicate.")
    fp64_instructions: int = 0
    special_function_instructions: int = Field(0, description="MUFU (sin, cos, rsqrt, ex2, ...).")
    atomics: int = 0
    barriers: int = 0
    source_lines: int | None = Field(None, description="Distinct source lines mapped (needs -lineinfo).")


class SassResult(BaseModel):
    artifact_id: str
    arch: str | None = None
    kernels: list[KernelSassStats] = Field(default_factory=list)
    findings: list[Finding] = Field(default_factory=list)
    listing_excerpt: str = Field("", description="The first lines of the listing (bounded).")
    listing_lines: int = 0
    listing_uri: str | None = Field(None, description="Resource URI of the full listing.")
    interleaved_source: bool = False


# --------------------------------------------------------------------------- capabilities
class ToolInfo(BaseModel):
    name: str
    found: bool
    path: str | None = None
    version: str | None = None
    origin: Literal["PATH", "CUDA_HOME", "default-install", "nvidia-wheel", "nsight-install"] | None = None
    usable: bool = Field(False, description="Found and answered its version query.")
    note: str | None = Field(None, description="Why it is missing or limited, and the fix.")


class GpuInfo(BaseModel):
    index: int
    name: str
    uuid: str | None = None
    compute_capability: str | None = Field(None, description="e.g. '9.0'")
    sm_arch: str | None = Field(None, description="e.g. 'sm_90'")
    memory_total_bytes: int | None = None
    sm_count: int | None = None
    power_limit_w: float | None = None
    energy_counter: bool | None = Field(None, description="NVML total-energy counter readable.")


class CutlassInfo(BaseModel):
    """Where the CUTLASS/CuTe headers come from (compile(cutlass=true), search_cutlass, read_cutlass_file)."""

    found: bool
    root: str | None = Field(None, description="The CUTLASS root (holds include/cute; examples/ where shipped).")
    origin: Literal["env", "wheel"] | None = Field(
        None, description="env: KERNELSCOPE_CUTLASS_ROOT (a checkout); wheel: NVIDIA's nvidia-cutlass wheel.")
    version: str | None = Field(None, description="From include/cutlass/version.h.")
    include_dirs: list[str] = Field(default_factory=list, description="Added with -I by compile(cutlass=true).")
    searched_dirs: list[str] = Field(default_factory=list, description="Folders search_cutlass indexes.")
    has_examples: bool = False
    note: str | None = Field(None, description="Why it is missing or limited, and the fix.")


# --------------------------------------------------------------------------- the evaluation pool
class WorkerStatus(BaseModel):
    name: str = Field(description="gpu<N> (N: its CUDA_VISIBLE_DEVICES value), cpu<N> or build<N>.")
    kind: Literal["gpu", "cpu", "build"]
    busy: bool
    jobs: int = Field(description="Jobs finished on it since the server started.")
    busy_s: float = Field(description="Seconds it has been busy.")
    cache_dir: str | None = Field(None, description="Its own cache for what is compiled while evaluating.")


class PoolStatus(BaseModel):
    backend: Literal["local", "ray"]
    workers: list[WorkerStatus] = Field(default_factory=list)
    queued: int = Field(0, description="Evaluations waiting for a worker.")
    build_cache: str | None = Field(None, description="The shared, content-keyed build cache (local).")
    ray_address: str | None = None
    ray_resources: dict[str, float] = Field(default_factory=dict, description="The Ray cluster's total resources.")
    note: str | None = None

    @computed_field(description="GPUs evaluations can run on at once: the local GPU workers, or the Ray "  # type: ignore[prop-decorator]
                                "cluster's GPUs.")
    @property
    def gpu_workers(self) -> int:
        return sum(w.kind == "gpu" for w in self.workers) if self.backend == "local" else \
            int(self.ray_resources.get("GPU", 0))


class CapabilityReport(BaseModel):
    kernelscope_version: str
    platform: str
    python: str
    gpus: list[GpuInfo] = Field(default_factory=list)
    gpu_note: str | None = None
    driver_version: str | None = None
    cuda_driver_version: str | None = None
    tools: list[ToolInfo] = Field(default_factory=list)
    default_arch: str = Field(description="Arch used when a compile request names none.")
    counters_readable: bool | None = Field(
        None, description="GPU performance counters readable by this user (None: not checked/unknown)."
    )
    counters_note: str | None = None
    nsys_can_report: bool | None = None
    nsys_note: str | None = None
    network_isolation: bool = False
    network_isolation_note: str | None = None
    cutlass: CutlassInfo | None = None
    pool: PoolStatus | None = Field(None, description="Where `run` evaluations execute: the workers and their load.")
    can: dict[str, bool] = Field(default_factory=dict, description="Feature -> available here.")
    reasons: dict[str, str] = Field(default_factory=dict, description="Feature -> why not, and the fix.")


# --------------------------------------------------------------------------- run (eval and program)
Verdict = Literal["faster", "slower", "inconclusive", "incorrect", "invalid"]


class TimingStats(BaseModel):
    runs: int
    median_us: float
    mean_us: float
    min_us: float
    max_us: float
    p10_us: float
    p90_us: float
    iqr_us: float = Field(description="Interquartile range (p75 - p25).")
    cv_pct: float = Field(description="Coefficient of variation, 100 * stdev / mean.")


class FlushProbe(BaseModel):
    """The L2 flush before every timed call (a memset) doubles as a probe of other memory traffic on the GPU."""
    flush_mb: int
    quiet_us: float = Field(description="The flush's quiet time: the 10th percentile over the timed rounds.")
    median_us: float
    max_us: float
    rounds: int = Field(description="Timed rounds (one call of each side per round).")
    rounds_slow: int = Field(description="Rounds whose flush ran more than 10% over its quiet time.")
    rounds_dropped: int = Field(description="Rounds left out of the timings: the slow ones and the round after "
                                            "each (none when fewer than min_runs and fewer than half stayed quiet: "
                                            "then the note says so).")


class HostCover(BaseModel):
    """Before each timed call (and its L2 flush) the harness enqueues a wait on the GPU that lasts until the
    host has issued the call, so the timed window holds GPU time, not the host's launch overhead (as
    nvbench's blocking kernel does). The host's own times are here."""
    cover_us: dict[str, float] = Field(description="The wait per side (µs): twice the call's 90th-percentile "
                                                   "host time in the warm-up plus 30 µs, at most 1000; 0: off.")
    host_median_us: dict[str, float] = Field(description="Host time to issue the wait, the flush, the events and "
                                                         "one call, median per side.")
    host_p90_us: dict[str, float]
    call_median_us: dict[str, float] = Field(description="Host time of the call alone (the forward issuing its "
                                                         "work), median per side.")
    calls_over_cover: dict[str, int] = Field(description="Timed calls whose host time exceeded the wait plus the "
                                                         "flush: there the GPU waited inside the timed window.")


class Speedup(BaseModel):
    baseline: Literal["eager", "compile"]
    speedup: float = Field(description="median(reference) / median(candidate).")
    ci_low: float = Field(description="95% bootstrap confidence interval, lower end.")
    ci_high: float
    verdict: Literal["faster", "slower", "inconclusive"]


class TrialResult(BaseModel):
    trial: int
    ok: bool
    error: str | None = None
    max_abs_error: float | None = None
    max_rel_error: float | None = None


class Correctness(BaseModel):
    correct: bool
    trials: int
    passed: int
    policy: str = Field(description="Tolerance policy: strict, default or kernelbench.")
    tolerances: dict[str, dict[str, float]] = Field(
        default_factory=dict, description="dtype -> {rtol, atol} applied (integers and bools compare exactly).")
    max_abs_error: float | None = None
    max_rel_error: float | None = None
    trial_results: list[TrialResult] = Field(default_factory=list)
    rules: str = Field(
        "Fresh seeded random inputs each trial; NaN/Inf always fail; shapes and dtypes must match; "
        "memory is poisoned with NaN before each candidate call; inputs must not be modified.",
    )


class EnergyReading(BaseModel):
    available: bool
    calls: int | None = None
    window_s: float | None = None
    energy_j: float | None = None
    joules_per_call: float | None = None
    avg_power_w: float | None = None
    note: str | None = None


class CheatFlag(BaseModel):
    id: str = Field(description="e.g. reference-ops, fallback-to-torch, side-stream, timer-tampering, "
                                "cached-output, lazy-output, precision-downgrade, implausible-speedup")
    severity: Literal["invalid", "review"]
    message: str
    evidence: dict[str, object] = Field(default_factory=dict)


class EvalResult(BaseModel):
    verdict: Verdict
    status: Literal["ok", "error", "invalid", "crashed", "timeout"]
    error: str | None = Field(None, description="What went wrong, for error/crashed/timeout/invalid.")
    device: str | None = None
    gpu: str | None = None
    torch: str | None = None
    correctness: Correctness | None = None
    timings: dict[str, TimingStats] = Field(
        default_factory=dict, description="'candidate', 'reference' (eager), 'reference_compile' if asked.")
    speedups: list[Speedup] = Field(default_factory=list)
    candidate_synced_us_per_call: float | None = None
    flush_probe: FlushProbe | None = Field(None, description="Other memory traffic seen while timing (GPU only).")
    host_cover: HostCover | None = Field(None, description="The host's time per timed call and the GPU-side wait "
                                                           "that keeps it out of the timings (GPU only).")
    energy: dict[str, EnergyReading] = Field(default_factory=dict)
    flags: list[CheatFlag] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    ops: dict[str, list[str]] = Field(default_factory=dict, description="aten ops seen in one forward of each.")
    wall_s: float = Field(0.0, description="Whole evaluation, process start to result.")
    harness_wall_s: float | None = None
    phases_s: dict[str, float] = Field(default_factory=dict, description="Harness time per phase (seconds).")
    overhead_s: dict[str, float] = Field(
        default_factory=dict, description="Time outside the harness (seconds): prepare (sources, workspace, build), "
                                          "lease (asking for and waiting on the worker), spawn (job handed over to "
                                          "its first step), setup (its limits and environment), hand_off (result "
                                          "written to answered).")
    samples_us: dict[str, list[float]] | None = Field(None, description="Every timed sample per side (µs), when "
                                                                        "keep_samples was asked for.")
    gpu_wait_s: float = Field(0.0, description="Time spent queued for the GPU lease.")
    build_s: float | None = Field(
        None, description="Build on a CPU build worker before taking the GPU (load_inline extensions; fast-path "
                          "NVRTC cubins while every GPU is busy), if any.")
    build_note: str | None = None
    worker: str | None = Field(None, description="The evaluation pool's worker that ran it: gpu<N> (N: its "
                                                 "CUDA_VISIBLE_DEVICES value), cpu<N>, or ray:<node>/gpu<N>.")
    stderr_tail: str | None = None
    traceback: str | None = None


class KernelTime(BaseModel):
    name: str
    launches: int
    total_ns: float
    mean_ns: float
    min_ns: float
    max_ns: float


class ProgramResult(BaseModel):
    artifact_id: str
    exit_status: int | None
    signal_name: str | None = None
    crashed: bool = False
    timed_out: bool = False
    stdout: str = ""
    stderr: str = ""
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    wall_s: float
    kernel_times: list[KernelTime] | None = Field(
        None, description="Per-kernel GPU durations (ncu gpu__time_duration, serialized launches), if asked.")
    kernel_times_note: str | None = None
    gpu_wait_s: float = 0.0


class RunResult(BaseModel):
    """The run tool's answer: exactly one of ``eval`` or ``program``, by ``mode``."""

    mode: Literal["eval", "program"]
    eval: EvalResult | None = None
    program: ProgramResult | None = None


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


# --------------------------------------------------------------------------- nsys-trace (system level)
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


AnalyzeResult.model_rebuild()


# --------------------------------------------------------------------------- CUTLASS / CuTe sources
CutlassHitKind = Literal["class", "struct", "union", "enum", "alias", "typedef", "macro", "function", "text"]


class CutlassHit(BaseModel):
    path: str = Field(description="Relative to the CUTLASS root; give it to read_cutlass_file.")
    line: int
    kind: CutlassHitKind = Field(description="A definition's kind, or text for a plain match.")
    symbol: str | None = Field(None, description="The defined name (definitions only).")
    snippet: str = Field(description="The line, trimmed (at most 200 characters).")


class CutlassSearchResult(BaseModel):
    query: str
    root: str
    version: str | None = None
    hits: list[CutlassHit] = Field(default_factory=list, description="Best first: definitions, then text matches.")
    definitions: int = Field(0, description="Definitions matching (all of them, not only those shown).")
    text_matches: int = Field(0, description="Lines matching, counted up to text_matches_capped.")
    text_matches_capped: bool = Field(False, description="Counting stopped; there are more.")
    truncated: bool = Field(False, description="More hits than `limit`: narrow the query or raise the limit.")
    searched_files: int = 0
    index_built: bool = Field(False, description="This call built the index (first use of this CUTLASS root).")
    index_build_s: float | None = None
    query_ms: float = 0.0


class CutlassFileResult(BaseModel):
    path: str = Field(description="Relative to the CUTLASS root.")
    root: str
    version: str | None = None
    start_line: int
    end_line: int = Field(description="Last line returned (inclusive).")
    total_lines: int
    text: str = Field(description="The lines start_line..end_line, without line numbers.")
    truncated: bool = Field(False, description="The range was cut at max_lines; continue at next_start_line.")
    next_start_line: int | None = None

