"""The tools' inputs, each declared once: one request model per MCP tool, built from shared pieces.

A field of a tool's request model is that tool's argument: the server builds the flat argument list
(names, types, defaults, constraints, descriptions) from the model (``kernelscope.server.registry``).
Parameters several tools share are declared here once: the targets (``ProgramTarget``, ``EvalTarget``,
``ScriptTarget``), the timeout (``TimeoutS``), the rule thresholds (``Thresholds``) and the kernel and
launch filters. A field annotated ``Internal[...]`` is set by Python callers only and is not an argument.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, model_validator

T = TypeVar("T")


class _NotAnArgument:
    """Field metadata: the field is for Python callers (tests, benchmarks, the pool), not a tool argument."""

    def __repr__(self) -> str:
        return "NOT_AN_ARGUMENT"


NOT_AN_ARGUMENT = _NotAnArgument()
Internal = Annotated[T, NOT_AN_ARGUMENT]


def is_argument(field: Any) -> bool:
    """Whether a model field (a pydantic ``FieldInfo``) is a tool argument."""
    return not any(m is NOT_AN_ARGUMENT for m in field.metadata)


# ------------------------------------------------------------------------------ shared parameters
TimeoutS = Annotated[float, Field(gt=0, le=3600, description="Wall-clock limit in seconds (analyze: per capture); "
                                                             "the job is killed after it.")]
Args = Annotated[list[str], Field(max_length=64, description="program or script: command-line arguments.")]
KernelTimes = Annotated[bool, Field(description="program: per-kernel GPU times through Nsight Compute (slower).")]
KernelRegex = Annotated[str | None, Field(max_length=1000, description="Only kernels whose (function) name matches "
                                                                       "this regex.")]
LaunchSkip = Annotated[int, Field(ge=0, le=1_000_000, description="Matching launches to skip first.")]
LaunchCount = Annotated[int | None, Field(ge=1, le=10_000, description="Matching launches to profile (null: all, "
                                                                       "up to 10000).")]
ClockControl = Annotated[Literal["none", "base"], Field(description="none: the GPU's own clocks (default); base: "
                                                                    "lock to base clock (ncu's default).")]


class ProgramTarget(BaseModel):
    """A compiled program: an executable artifact and its arguments."""

    artifact_id: str | None = Field(None, description="program: an executable artifact from compile.")
    args: Args = Field(default_factory=list)


class EvalTarget(BaseModel):
    """An eval-mode problem: a KernelBench-style reference and a candidate, each inline or as a file."""

    reference: str | None = Field(None, description="eval: reference module source (Model, get_inputs, "
                                                    "get_init_inputs).")
    reference_path: str | None = Field(None, description="eval: or a reference .py under the allowed roots.")
    candidate: str | None = Field(None, description="eval: candidate module source defining ModelNew.")
    candidate_path: str | None = Field(None, description="eval: or a candidate .py under the allowed roots.")


class ScriptTarget(BaseModel):
    """A Python script, inline or as a file."""

    script: str | None = Field(None, max_length=1_000_000, description="script: Python source to run and trace.")
    script_path: str | None = Field(None, max_length=4096, description="script: or a .py under the allowed roots.")


class Thresholds(BaseModel):
    """Rule threshold overrides; the argument is ``thresholds``, the Python field ``overrides``."""

    model_config = ConfigDict(validate_by_name=True, validate_by_alias=True)

    overrides: dict[str, dict[str, float]] = Field(
        default_factory=dict, alias="thresholds",
        description="Rule threshold overrides, {rule: {threshold: value}}, e.g. "
                    "{\"launch.tiny-grid\": {\"max_sm_fraction\": 0.25}}.")


# ------------------------------------------------------------------------------ capabilities
class CapabilitiesRequest(BaseModel):
    refresh: bool = Field(False, description="Re-run the active probes (counter access, nsys reports).")


# ------------------------------------------------------------------------------ compile, sass
OutputKind = Literal["auto", "cubin", "executable"]


class CompileRequest(BaseModel):
    source: str | None = Field(None, description="CUDA C++ source text. Give this or `path`.")
    path: str | None = Field(None, description="A .cu file under the server's allowed roots (instead of `source`).")
    arch: str | None = Field(None, description="Target such as sm_90, sm_90a, sm_80. Default: the local GPU's, "
                                               "else sm_90.")
    flags: list[str] = Field(default_factory=list, description="Extra nvcc flags from the allowlist, one per item: "
                                                               "-O3, -use_fast_math, -maxrregcount=64, -DBLOCK=256, "
                                                               "-std=c++17, -Xptxas -v ...")
    output: OutputKind = Field("auto", description="cubin (kernels only), executable (a program with main), or auto "
                                                   "(executable if it defines main).")
    lineinfo: bool = Field(True, description="Build with -lineinfo so SASS and profiles map to source lines.")
    filename: str = Field("kernel.cu", description="Name the inline source is compiled under, shown in diagnostics.")
    cutlass: bool = Field(False, description="Compile against CUTLASS/CuTe: adds its include paths, -std=c++17 (or "
                                             "your -std=c++20), --expt-relaxed-constexpr, and turns a default sm_90 "
                                             "target into sm_90a (wgmma/TMA). Template errors come back as a readable "
                                             "first error with the instantiation chain trimmed.")


class SassRequest(BaseModel):
    artifact_id: str | None = Field(None, description="An id returned by compile.")
    cubin_base64: str | None = Field(None, description="Or: a cubin file, base64-encoded.")
    kernel: str | None = Field(None, description="Regex selecting kernels by (demangled) name.")
    interleave_source: bool = Field(False, description="Interleave CUDA source lines (needs -lineinfo).")
    max_listing_lines: int = Field(120, ge=0, le=5000, description="Listing lines in the answer.")

    @model_validator(mode="after")
    def _one_input(self) -> SassRequest:
        if (self.artifact_id is None) == (self.cubin_base64 is None):
            raise ValueError("Give exactly one of `artifact_id` (from compile) or `cubin_base64`.")
        return self


# ------------------------------------------------------------------------------ run
class EvalOptions(BaseModel):
    """The eval-mode choices a caller of `run` makes."""

    device: Literal["auto", "cuda", "cpu"] = Field("auto", description="eval: where to run.")
    trials: int = Field(5, ge=1, le=100, description="eval: correctness trials (fresh inputs each).")
    tolerance: Literal["strict", "default", "kernelbench"] = Field(
        "default", description="eval: tolerance policy (default fp32 1e-4, fp16 1e-2, bf16 2e-2; kernelbench as "
                               "KernelBench: fp32 1e-4, fp16/bf16 1e-2; strict fp32 1e-5).")
    reference_modes: list[Literal["eager", "compile"]] = Field(
        default_factory=lambda: ["eager"], description="eval: baselines to time (eager PyTorch, torch.compile).")
    timing_budget_s: float = Field(0.5, gt=0, le=60, description="eval: seconds of interleaved timed runs.")
    measure_energy: bool = Field(False, description="eval: NVML energy per call (adds ~2 s per side).")
    allow_tf32: bool = Field(False, description="eval: allow TF32 on fp32 problems.")


class EvalRequest(EvalTarget, EvalOptions):
    """One evaluation (``tools.run.eval_candidate``, the pool's workers)."""

    rtol: Internal[float | None] = Field(None, ge=0, le=1)
    atol: Internal[float | None] = Field(None, ge=0, le=1)
    seed: Internal[int] = 42
    min_runs: Internal[int] = Field(30, ge=3, le=100_000)
    max_runs: Internal[int] = Field(2000, ge=3, le=100_000)
    energy_window_s: Internal[float] = Field(2.0, ge=0.5, le=30)
    flag_speedup_above: Internal[float] = Field(10.0, gt=1)
    verdict_margin: Internal[float] = Field(0.02, ge=0, le=0.5, description="Speedup CI must clear 1 +/- this.")
    timeout_s: TimeoutS = 300.0
    gpu: Internal[int | None] = Field(None, ge=0, description="GPU index to use (default: the first free one).")
    keep_samples: Internal[bool] = False
    host_cover_us: Internal[float | None] = Field(
        None, ge=0, le=100_000, description="GPU-side wait before each timed call (µs), so the host's time to issue "
                                            "it is not timed; default: twice the call's 90th-percentile host time "
                                            "in the warm-up plus 30 µs, at most 1000; 0: off.")
    executor: Internal[Literal["auto", "spawn"]] = Field(
        "auto", description="auto: fork from a warm server process (fast); spawn: a new interpreter per job.")


class ProgramRequest(BaseModel):
    """One run of a compiled program (``tools.run.run_program``)."""

    artifact_id: str
    args: Args = Field(default_factory=list)
    stdin: str | None = Field(None, max_length=1 << 20)
    timeout_s: TimeoutS = 60.0
    kernel_times: KernelTimes = False
    gpu: int | None = Field(None, ge=0)


class RunRequest(EvalTarget, EvalOptions, ProgramTarget):
    """The `run` tool: eval mode (an EvalRequest) or program mode (a ProgramRequest)."""

    mode: Literal["eval", "program"] = Field("eval", description="eval: candidate vs reference; program: run an "
                                                                 "executable artifact.")
    kernel_times: KernelTimes = False
    timeout_s: TimeoutS = 300.0

    def eval_request(self) -> EvalRequest:
        return EvalRequest.model_validate(self.model_dump(include=set(EvalRequest.model_fields)))

    def program_request(self) -> ProgramRequest:
        return ProgramRequest.model_validate(self.model_dump(include=set(ProgramRequest.model_fields)))


# ------------------------------------------------------------------------------ ncu_profile, analyze, nsys_trace
class NcuOptions(BaseModel):
    """What to capture and which launches."""

    sections: list[str] = Field(default_factory=list, max_length=32,
                                description="Section identifiers (ncu --list-sections), e.g. SpeedOfLight, "
                                            "MemoryWorkloadAnalysis, WarpStateStats, SourceCounters.")
    section_set: Literal["basic", "detailed", "full", "roofline"] | None = Field(
        None, description="A predefined set (ncu --set); 'detailed' when no sections, set or metrics are given.")
    metrics: list[str] = Field(default_factory=list, max_length=256, description="Extra metric names.")
    kernel_regex: KernelRegex = None
    launch_skip: LaunchSkip = 0
    launch_count: LaunchCount = None
    filter_mode: Internal[Literal["global", "per-launch-config"]] = Field(
        "global", description="per-launch-config: launch_skip and launch_count count the launches of each launch "
                              "configuration (kernel, grid, block, shared memory) apart; launch_count=1 then "
                              "profiles the first launch of every distinct configuration.")
    clock_control: ClockControl = "none"
    cache_control: Internal[Literal["all", "none"]] = Field("all", description="all: flush caches before each "
                                                                               "replay pass.")
    import_source: Internal[bool] = Field(True, description="Embed the CUDA source so lines show in the report.")


class ProfileTarget(ProgramTarget, EvalTarget):
    """What runs under a profiler: a compiled program, or an eval-mode reference/candidate pair."""

    seed: Internal[int] = 42
    calls: Internal[int] = Field(1, ge=1, le=100, description="eval: candidate forward calls inside the profiled "
                                                              "range.")
    timeout_s: TimeoutS = 300.0
    gpu: Internal[int | None] = Field(None, ge=0)

    @property
    def mode(self) -> Literal["program", "eval"]:
        return "program" if self.artifact_id is not None else "eval"


class ProfileRequest(ProfileTarget, NcuOptions):
    """The `ncu_profile` tool."""

    launch_count: LaunchCount = 20
    top_lines: Internal[int] = Field(10, ge=0, le=200, description="Source lines kept per kernel.")


class AnalyzeRequest(ProfileTarget, Thresholds):
    """The `analyze` tool."""

    kernel_regex: KernelRegex = None
    launch_skip: LaunchSkip = 0
    launch_count: int = Field(512, ge=1, le=10_000, description="Launches the light stage profiles.")
    executor: Internal[Literal["auto", "spawn"]] = Field(
        "auto", description="eval: auto runs the CUPTI-measured job on the evaluation fork server (no interpreter "
                            "start, no torch import), falling back to a spawned one; spawn: always a new interpreter.")
    deep_kernels: int | None = Field(
        None, ge=1, le=20, description="Kernels (by total time) diagnosed in depth. Default: every kernel that takes "
                                       "at least min_time_share_pct of the GPU time (at least the 3 longest, at most "
                                       "20); the answer's notes name any significant kernel left out.")
    min_time_share_pct: float = Field(5.0, ge=0.0, le=100.0, description="With deep_kernels unset: a kernel taking "
                                                                         "this share of the GPU time or more is "
                                                                         "diagnosed.")
    clock_control: Internal[Literal["none", "base"]] = "none"
    sass: Internal[bool] = Field(True, description="Add SASS statistics and ptxas evidence for artifacts.")
    trace: Internal[Literal["auto", "always", "never"]] = Field(
        "auto", description="The CUPTI trace stage (the timeline of every launch): auto runs it after a measuring "
                            "run that saw many launches (16 or more), and first for programs Nsight Compute "
                            "measures (it counts and times every launch, so the light stage needs only each "
                            "kernel's first); always runs it in every case.")
    light: Literal["auto", "ncu"] = Field(
        "auto", description="auto: the two stages are measured in the target's own run (CUPTI: metrics, stall "
                            "reasons and source lines), no profiler process; an eval candidate's only in its "
                            "profiled forward calls; Nsight Compute where the collector measures nothing. ncu: "
                            "always under Nsight Compute (two captures, with its own advice).")


Backend = Literal["auto", "nsys", "cupti"]


class TraceRequest(ProfileTarget, ScriptTarget, Thresholds):
    """The `nsys_trace` tool: ``artifact_id`` (program), ``script``/``script_path`` (Python), or a reference and
    candidate (eval)."""

    calls: int = Field(20, ge=1, le=1000, description="eval: candidate forward calls inside the traced range.")
    backend: Backend = Field("auto", description="auto: Nsight Systems where it can build reports here, else the "
                                                 "CUPTI tracer.")
    gap_threshold_us: float = Field(2.0, ge=0.0, le=1e6, description="Idle spells shorter than this are not "
                                                                     "counted as gaps.")

    @property
    def trace_mode(self) -> Literal["program", "script", "eval"]:
        if self.artifact_id is not None:
            return "program"
        if self.script is not None or self.script_path is not None:
            return "script"
        return "eval"


# ------------------------------------------------------------------------------ reports, CUTLASS
class ClassifyRequest(BaseModel):
    report_path: str | None = Field(None, description="A report id from analyze/ncu_profile, or a .ncu-rep under "
                                                      "the allowed roots.")
    kernel: str | None = Field(None, description="Regex selecting kernels in the report.")
    flops: float | None = Field(None, ge=0, description="Analytic FP32 FLOPs of a problem (no report).")
    dram_bytes: float | None = Field(None, ge=0, description="Analytic DRAM bytes of a problem (no report).")
    time_us: float | None = Field(None, ge=0, description="Measured time to place against the roof.")
    gpu: str | None = Field(None, description="GPU name for the peak table (default H100).")


class CompareRequest(BaseModel):
    before_report: str = Field(description="The report before the change: a report id, or a .ncu-rep path.")
    after_report: str = Field(description="The report after the change: a report id, or a .ncu-rep path (may be "
                                          "the same).")
    before_kernel: str | None = Field(None, description="Regex selecting one kernel in the first report.")
    after_kernel: str | None = Field(None, description="Regex selecting one kernel in the second report.")


class CutlassSearchRequest(BaseModel):
    query: str = Field(description="A symbol (make_tma_copy, cute::Layout, SM90_TMA_LOAD_2D, warpgroup_wait) or "
                                   "words that must all appear on a line ('tma multicast'). Case-insensitive; "
                                   "identifiers match whole or by their parts (split at _ and camelCase).")
    limit: int = Field(20, ge=1, le=100, description="Hits returned, best first.")
    kind: Literal["any", "definitions", "text"] = Field(
        "any", description="definitions: where names are defined (class, struct, alias, function, macro); text: "
                           "lines that mention the query; any: definitions first, then text.")
    scope: Literal["all", "include", "examples"] = Field(
        "all", description="include: the headers; examples: NVIDIA's examples and CuTe tutorials; all: both, plus "
                           "the util headers.")


class CutlassReadRequest(BaseModel):
    path: str = Field(description="A file relative to the CUTLASS root, as search_cutlass prints it "
                                  "(include/cute/tensor.hpp; cute/... is taken as include/cute/...).")
    start_line: int = Field(1, ge=1, description="First line (1-based).")
    end_line: int | None = Field(None, ge=1, description="Last line (inclusive); default: the end, within max_lines.")
    max_lines: int = Field(200, ge=1, le=1000, description="At most this many lines.")
