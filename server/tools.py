"""The MCP tools: each one a request model (``kernelscope.models.requests``) and a plain function.

A body runs in a worker thread (``kernelscope.server.registry``) and is the tool's own logic only; its
docstring is the tool's description. Raise ``InputError`` (or any ``KernelscopeError``) for a refusal
the model should read.
"""

from __future__ import annotations

import base64
import binascii

from mcp.types import ToolAnnotations

from kernelscope.errors import InputError
from kernelscope.models import (
    AnalyzeResult,
    CapabilityReport,
    ClassifyResult,
    CompareResult,
    CompileResult,
    CutlassFileResult,
    CutlassSearchResult,
    NcuProfileResult,
    RunResult,
    SassResult,
    TraceResult,
)
from kernelscope.models.requests import (
    AnalyzeRequest,
    CapabilitiesRequest,
    ClassifyRequest,
    CompareRequest,
    CompileRequest,
    CutlassReadRequest,
    CutlassSearchRequest,
    ProfileRequest,
    ProfileTarget,
    RunRequest,
    SassRequest,
    TraceRequest,
)
from kernelscope.server import summaries
from kernelscope.server.registry import Job, ToolRegistry
from kernelscope.tools import analyze as analyze_mod
from kernelscope.tools import capabilities as caps
from kernelscope.tools import classify as classify_mod
from kernelscope.tools import cutlass as cutlass_mod
from kernelscope.tools import ncu_profile as ncu_profile_mod
from kernelscope.tools import nsys_trace as trace_mod
from kernelscope.tools import run as run_mod
from kernelscope.tools import sass as sass_mod
from kernelscope.tools.compare import compare_profiles
from kernelscope.tools.compile import compile_cuda

READ_ONLY = ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False)
WRITES = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False)
WRITES_IDEMPOTENT = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True,
                                    open_world_hint=False)
NO_TARGET = "Give a target: `artifact_id` (an executable from compile), or a reference and a candidate."

registry = ToolRegistry()


def _need_target(t: ProfileTarget) -> None:
    if t.artifact_id is None and t.candidate is None and t.candidate_path is None:
        raise InputError(NO_TARGET)


@registry.tool("capabilities", title="What this host can do", annotations=READ_ONLY, request=CapabilitiesRequest,
               result=CapabilityReport, summary=caps.render_report, label="probing GPUs and toolchain")
def capabilities(req: CapabilitiesRequest, job: Job) -> CapabilityReport:
    """Report the GPUs (name, compute capability, memory, driver), the CUDA tools found (nvcc, ptxas,
    cuobjdump, nvdisasm, ncu, nsys, compute-sanitizer) with versions and where they came from, whether
    performance counters are readable, and for each feature whether it works here and, if not, why
    and how to fix it. Call this first."""
    if req.refresh:
        caps.reset_caches()
    return caps.capability_report(probe=True)


@registry.tool("compile", title="Compile CUDA", annotations=WRITES_IDEMPOTENT, request=CompileRequest,
               result=CompileResult, summary=summaries.compile_summary, label="compiling with nvcc",
               done=lambda r: "compiled" if r.success else "compile failed")
def compile_(req: CompileRequest, job: Job) -> CompileResult:
    """Compile CUDA C++ to a cubin or executable with nvcc. Returns success, diagnostics parsed to
    (file, line, severity, message), ptxas' resource report per kernel (registers, shared memory,
    stack, spill stores/loads, barriers), findings with fixes, compile time, and an artifact_id for
    the sass tool. A syntax error is a normal answer with diagnostics, not a failure of the tool.
    Identical requests are cache hits."""
    return compile_cuda(req, cancel=job.cancel)


@registry.tool("sass", title="SASS and instruction statistics", annotations=READ_ONLY, request=SassRequest,
               result=SassResult, summary=summaries.sass_summary, label="disassembling")
def sass(req: SassRequest, job: Job) -> SassResult:
    """Disassemble a compiled artifact (or an uploaded cubin) and report per-kernel statistics that
    matter for performance: instruction mix by class, global load/store widths (LDG.E.128 vs scalar),
    tensor-core instructions (HMMA/HGMMA/IMMA...), local memory (LDL/STL), FP64, MUFU, predication,
    registers; plus findings with ranked fixes. The full listing is a resource."""
    if req.cubin_base64 is None:
        assert req.artifact_id is not None
        return sass_mod.sass_for_artifact(req.artifact_id, kernel=req.kernel, interleave_source=req.interleave_source,
                                          max_listing_lines=req.max_listing_lines)
    try:
        data = base64.b64decode(req.cubin_base64, validate=True)
    except (binascii.Error, ValueError):
        raise InputError("cubin_base64 is not valid base64.") from None
    return sass_mod.sass_for_cubin_bytes(data, kernel=req.kernel, interleave_source=req.interleave_source,
                                         max_listing_lines=req.max_listing_lines)


@registry.tool("run", title="Run: correctness, timing, speedup, energy", annotations=WRITES, request=RunRequest,
               result=RunResult, summary=summaries.run_summary, label=lambda r: f"running the {r.mode} job",
               done=lambda r: r.eval.verdict if r.eval is not None else "done")
def run(req: RunRequest, job: Job) -> RunResult:
    """Run untrusted GPU code in the sandbox. eval mode: check a candidate against a KernelBench-style
    reference over several trials with fresh random inputs (tolerance policy stated), time both with
    CUDA events (warm-up, L2 flush, interleaved, medians with IQR/CV), and answer a speedup with a 95%
    confidence interval and a verdict (faster/slower/inconclusive/incorrect/invalid), optional NVML
    energy per call, and flags for known cheats. program mode: run an executable artifact and report
    exit status, output, wall time and per-kernel GPU times. Crashes and hangs are results."""
    if req.mode == "program":
        if req.artifact_id is None:
            raise InputError("program mode needs `artifact_id` (an executable from compile).")
        program = run_mod.run_program(req.program_request(), cancel=job.cancel, on_wait=job.on_wait)
        return RunResult(mode="program", program=program)
    result = run_mod.eval_candidate(req.eval_request(), cancel=job.cancel, on_wait=job.on_wait)
    return RunResult(mode="eval", eval=result)


@registry.tool("analyze", title="Analyze: two-stage profile, bottleneck and expert findings", annotations=WRITES,
               request=AnalyzeRequest, result=AnalyzeResult, summary=summaries.analyze_summary,
               label="analyzing (trace, light capture, deep capture)")
def analyze(req: AnalyzeRequest, job: Job) -> AnalyzeResult:
    """Find what limits a CUDA program's or a candidate's kernels and what to do about it. Stage 1
    measures speed of light, launch statistics and occupancy of each kernel and launch configuration and
    classifies each kernel on the roofline; stage 2 adds what the class calls for (memory workload and
    source counters for memory-bound, warp states for latency-bound, instruction statistics and SASS for
    compute-bound, ...): both are measured in the target's own run through CUPTI (deep metrics, stall
    reasons and per-line counters of each kernel's first launch; for a candidate, only its profiled
    forward calls), or under Nsight Compute with light='ncu' or where CUPTI cannot, the class choosing
    the sections. The rules then give ranked findings
    (uncoalesced access, bank conflicts, spills, divergence, idle tensor cores, atomics contention, tiny
    grids, ...) with the evidence, the source line and fixes with their expected effect. Reports which
    stages ran, what measured each and how long each took."""
    _need_target(req)
    return analyze_mod.analyze(req, cancel=job.cancel, on_wait=job.on_wait)


@registry.tool("nsys_trace", title="System trace: the timeline between kernels", annotations=WRITES,
               request=TraceRequest, result=TraceResult, summary=summaries.trace_summary, label="tracing",
               done=lambda r: r.status)
def nsys_trace(req: TraceRequest, job: Job) -> TraceResult:
    """Trace what happens between kernels: run a program, a Python script or an eval candidate under
    Nsight Systems (or CUPTI where nsys cannot build reports, which the answer says) and get the
    timeline as numbers: GPU busy vs idle, kernels by time share, copies by direction (pageable or
    pinned, sync or async), host CUDA API time, idle gaps and their cause, NVTX ranges, and a system
    class (launch-bound, host-bound, copy-bound, gpu-bound). Rules flag launch overhead, copies in the
    hot loop, pageable copies, synchronizations, idle gaps, allocation churn, copies not overlapped
    with compute and a dominant kernel, with fixes. The timeline is a Chrome/Perfetto JSON resource."""
    if all(x is None for x in (req.script, req.script_path, req.artifact_id, req.candidate, req.candidate_path)):
        raise InputError("Give a target: `artifact_id` (an executable from compile), a Python `script`, or a "
                         "reference and a candidate.")
    return trace_mod.trace(req, cancel=job.cancel, on_wait=job.on_wait)


@registry.tool("ncu_profile", title="Nsight Compute profile", annotations=WRITES, request=ProfileRequest,
               result=NcuProfileResult, summary=summaries.profile_summary, label="profiling", done=lambda r: r.status)
def ncu_profile(req: ProfileRequest, job: Job) -> NcuProfileResult:
    """Capture an Nsight Compute profile with the sections, metrics and kernel filters you choose, in
    the sandbox, and get per-launch classes and findings plus the report as an artifact (for compare or
    the Nsight Compute UI). Counter-permission errors, a missing ncu and filters that match nothing come
    back explained, with the fix. Prefer `analyze` unless you need specific sections."""
    _need_target(req)
    return ncu_profile_mod.ncu_profile(req, cancel=job.cancel, on_wait=job.on_wait)


@registry.tool("bottleneck_classify", title="Bottleneck and roofline", annotations=READ_ONLY,
               request=ClassifyRequest, result=ClassifyResult, summary=summaries.classify_summary,
               label=lambda r: "reading the report" if r.report_path is not None else "placing on the roofline")
def bottleneck_classify(req: ClassifyRequest, job: Job) -> ClassifyResult:
    """Classify what limits a kernel: memory-bound, compute-bound, latency-bound, occupancy-limited,
    launch/tail-limited or mixed, with a confidence, the speed-of-light evidence and its roofline
    position (arithmetic intensity, ridge point, achieved vs attainable, time at the roof), plus the
    expert findings (uncoalesced access with the source line, dominant stall, occupancy...) and Nsight
    Compute's own rule titles. Without a report, give a problem's analytic FLOPs and bytes to get the
    roofline ceiling an optimization aims at."""
    if req.report_path is not None:
        return classify_mod.classify_report(req.report_path, kernel=req.kernel)
    return classify_mod.classify_analytic(flops=req.flops, dram_bytes=req.dram_bytes, time_us=req.time_us,
                                          gpu=req.gpu)


@registry.tool("compare", title="Compare two profiles", annotations=READ_ONLY, request=CompareRequest,
               result=CompareResult, summary=summaries.compare_summary, label="reading both reports")
def compare(req: CompareRequest, job: Job) -> CompareResult:
    """Compare a kernel before and after a change: speedup, the bottleneck class on each side, deltas of
    the metrics that matter (duration, throughputs, DRAM bytes, hit rates, occupancy, registers,
    sectors per request, branch uniformity) marked better/worse, and which findings the change resolved
    or introduced."""
    return compare_profiles(req.before_report, req.after_report, before_kernel=req.before_kernel,
                            after_kernel=req.after_kernel)


@registry.tool("search_cutlass", title="Search the CUTLASS/CuTe sources", annotations=READ_ONLY,
               request=CutlassSearchRequest, result=CutlassSearchResult, summary=summaries.cutlass_search_summary,
               label="searching CUTLASS (the index is built on first use)")
def search_cutlass(req: CutlassSearchRequest, job: Job) -> CutlassSearchResult:
    """Find where a CUTLASS/CuTe name is defined and how it is used, ranked: definitions of the name
    (exact, then case-insensitive, prefix, substring; headers before examples) above plain text
    matches, each with its file (relative to the CUTLASS root) and line. Bounded: `limit` hits, counts
    stop at 5,000 lines. The index is built on first use (a few seconds) and cached. Then read the code
    with read_cutlass_file."""
    return cutlass_mod.search(req.query, limit=req.limit, kind=req.kind, scope=req.scope)


@registry.tool("read_cutlass_file", title="Read a CUTLASS/CuTe source file", annotations=READ_ONLY,
               request=CutlassReadRequest, result=CutlassFileResult, summary=summaries.cutlass_file_summary,
               label="reading")
def read_cutlass_file(req: CutlassReadRequest, job: Job) -> CutlassFileResult:
    """Read lines of a CUTLASS/CuTe header or example (numbered in the text answer). Paths stay
    inside the CUTLASS root: absolute paths, '..' and symlinks that lead out are refused."""
    return cutlass_mod.read_file(req.path, start_line=req.start_line, end_line=req.end_line,
                                 max_lines=req.max_lines)
