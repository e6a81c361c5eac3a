"""The MCP surface: tool names, typed inputs and outputs, annotations, progress and resources.

Thin by design: validate -> call ``kernelscope.tools`` in a worker thread -> wrap the result as
structured content plus a bounded text summary. Anticipated failures become ``ToolError``s whose
sentence says what to change; the server never dies from bad input.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import threading
import time
from collections.abc import Callable
from typing import Annotated, Any, Literal, TypeVar

import anyio
import anyio.to_thread
from mcp import MCPError
from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ResourceNotFoundError, ToolError
from mcp.types import INVALID_PARAMS, CallToolResult, GetPromptResult, TextContent, ToolAnnotations
from pydantic import BaseModel, Field

from kernelscope._version import __version__
from kernelscope.errors import KernelscopeError
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
from kernelscope.server.summaries import (
    analyze_summary,
    classify_summary,
    compare_summary,
    compile_summary,
    cutlass_file_summary,
    cutlass_search_summary,
    eval_summary,
    profile_summary,
    program_summary,
    sass_summary,
    trace_summary,
)

log = logging.getLogger("kernelscope.server")
T = TypeVar("T")

INSTRUCTIONS = """\
kernelscope gives you real GPU performance tools for CUDA kernels. Typical flow:
1. `capabilities` once: what this host can do (GPU, toolkit, counters) and why not.
2. `compile` CUDA source (inline or a file under the allowed roots): diagnostics with lines, ptxas
   resources per kernel (registers, shared memory, spills) and findings; returns an artifact_id.
3. `sass` on that artifact_id: instruction mix, global load/store widths (vectorization), tensor-core
   use, local memory (spills), FP64 and special functions, with findings and ranked fixes.
4. `run` in eval mode: a KernelBench-style reference (Model, get_inputs, get_init_inputs) and a
   candidate (ModelNew; CUDA through kernelscope.fast.CudaKernel (NVRTC) or load_inline): correctness
   over several trials, timing with a speedup confidence interval, a verdict, and cheat checks.
   In program mode it runs a compiled executable (exit status, output, per-kernel GPU times).
5. `analyze` (program or eval target): the two-stage Nsight Compute flow: a light capture classifies
   each kernel (memory/compute/latency-bound, occupancy-limited, launch/tail-limited), the class picks
   the deep sections, and the rules give ranked findings with evidence, source lines and fixes.
   `ncu_profile` is the raw capture with sections/filters you choose; `bottleneck_classify` and
   `compare` work on recorded reports (paths, or the report ids these tools return).
6. `nsys_trace` (program, Python script or eval target): the timeline between kernels (launch
   overhead, idle gaps, copies, synchronizations, allocations) with system-level findings.
7. CUTLASS/CuTe: `compile(cutlass=true)` builds against its headers (sm_90a for Hopper's wgmma/TMA);
   `search_cutlass` finds definitions and uses of a name in its headers and examples, and
   `read_cutlass_file` reads the lines around a hit.
Every answer starts with a short diagnosis; the structured result has all the data, and full
listings and logs are resources under kernelscope://artifacts/{artifact_id}/...
"""

class _Server(MCPServer):
    async def get_prompt(self, name: str, arguments: dict[str, Any] | None = None,
                         context: Any = None) -> Any:
        """An unknown prompt is the client's mistake (-32602, as for an unknown resource), not an internal
        error; kernelscope defines no prompts."""
        if not self._prompt_manager.get_prompt(name):
            raise MCPError(INVALID_PARAMS, f"Unknown prompt: {name!r}; this server defines no prompts "
                                           "(see prompts/list).")
        result: GetPromptResult = await super().get_prompt(name, arguments, context)
        return result


mcp = _Server(
    "kernelscope",
    title="kernelscope: GPU performance tools",
    description="Compile, disassemble and analyse CUDA kernels with expert diagnoses.",
    version=__version__,
    instructions=INSTRUCTIONS,
)


HEARTBEAT_S = 1.0  # a call that takes longer sends a progress notification at least this often


class Progress:
    """The progress notifications of one tool call: a start, a heartbeat while the work runs (at least one
    notification a second, which also keeps clients that reset their timeouts on progress waiting), the
    GPU queue position while queued, and the end. Values strictly increase as the spec requires; the end
    carries ``total`` equal to its ``progress``. A no-op when the client asked for no progress."""

    def __init__(self, ctx: Context | None, label: str) -> None:
        self.ctx = ctx
        self.label = label
        self.n = -1
        self.t0 = time.monotonic()

    async def _send(self, message: str, *, final: bool = False) -> None:
        if self.ctx is None:
            return
        self.n += 1
        try:
            await self.ctx.report_progress(self.n, self.n if final else None, message)
        except Exception:  # the client went away; the work itself goes on
            log.debug("progress notification failed", exc_info=True)

    async def start(self) -> None:
        await self._send(self.label)

    async def step(self, message: str) -> None:
        await self._send(message)

    async def beat(self) -> None:
        await self._send(f"{self.label}: {time.monotonic() - self.t0:.0f} s")

    async def done(self, message: str) -> None:
        await self._send(message, final=True)

    def on_wait(self) -> Callable[[int, float], None]:
        """A callback for worker threads queued for a GPU lease."""

        def on_wait(ahead: int, waited_s: float) -> None:
            msg = f"waiting for the GPU: {ahead} job(s) ahead, {waited_s:.0f} s so far"
            try:
                anyio.from_thread.run(self.step, msg)
            except Exception:  # the call was cancelled meanwhile
                log.debug("progress notification failed", exc_info=True)

        return on_wait


async def _call(fn: Callable[..., T], *args: Any, cancellable: bool = False, progress: Progress | None = None,
                **kwargs: Any) -> T:
    """Run a blocking tool in a worker thread, sending ``progress`` heartbeats while it runs. On
    cancellation a ``cancellable`` tool is told to stop through its ``cancel`` event (which kills its
    process group and so frees its GPU lease) and the await ends at once."""
    cancel = threading.Event()
    box: dict[str, Any] = {}
    finished = anyio.Event()

    def work() -> None:
        try:
            box["value"] = fn(*args, cancel=cancel, **kwargs) if cancellable else fn(*args, **kwargs)
        except BaseException as e:  # re-raised below, outside the task group
            box["error"] = e

    async def in_thread() -> None:
        try:
            await anyio.to_thread.run_sync(work, abandon_on_cancel=True)
        finally:
            finished.set()

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(in_thread)
            while progress is not None and not finished.is_set():
                with anyio.move_on_after(HEARTBEAT_S):
                    await finished.wait()
                if not finished.is_set():
                    await progress.beat()
    except anyio.get_cancelled_exc_class():
        cancel.set()
        raise
    if "error" not in box:
        return box["value"]  # type: ignore[no-any-return]
    e = box.pop("error")
    if isinstance(e, KernelscopeError):
        raise ToolError(str(e)) from None
    if isinstance(e, ToolError) or not isinstance(e, Exception):
        raise e
    # a bug: say so plainly instead of a bare "Error executing tool"
    log.error("internal error in %s", getattr(fn, "__name__", fn), exc_info=e)
    raise ToolError(f"Internal error in kernelscope ({type(e).__name__}: {e}). This is a bug; the server "
                    "is still running.") from None


def _result(model: BaseModel, summary: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=summary)],
                          structured_content=model.model_dump(mode="json"))


# ----------------------------------------------------------------------------------- tools
@mcp.tool(
    name="capabilities",
    title="What this host can do",
    annotations=ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False),
)
async def capabilities_tool(
    refresh: Annotated[bool, Field(description="Re-run the active probes (counter access, nsys reports).")] = False,
    ctx: Context | None = None,
) -> Annotated[CallToolResult, CapabilityReport]:
    """Report the GPUs (name, compute capability, memory, driver), the CUDA tools found (nvcc, ptxas,
    cuobjdump, nvdisasm, ncu, nsys, compute-sanitizer) with versions and where they came from, whether
    performance counters are readable, and for each feature whether it works here and, if not, why
    and how to fix it. Call this first."""
    from kernelscope.tools import capabilities as caps

    progress = Progress(ctx, "probing GPUs and toolchain")
    await progress.start()
    if refresh:
        await _call(caps.reset_caches)
    report = await _call(caps.capability_report, probe=True, progress=progress)
    await progress.done("done")
    return _result(report, caps.render_report(report))


@mcp.tool(
    name="compile",
    title="Compile CUDA",
    annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True,
                                open_world_hint=False),
)
async def compile_tool(
    source: Annotated[str | None, Field(description="CUDA C++ source text. Give this or `path`.")] = None,
    path: Annotated[str | None, Field(description="A .cu file under the server's allowed roots.")] = None,
    arch: Annotated[str | None, Field(description="Target such as sm_90, sm_90a, sm_80. Default: local GPU, "
                                                  "else sm_90.")] = None,
    flags: Annotated[list[str] | None, Field(description="Extra nvcc flags from the allowlist, one per item: "
                                                         "-O3, -use_fast_math, -maxrregcount=64, -DBLOCK=256, "
                                                         "-std=c++17, -Xptxas -v ...")] = None,
    output: Annotated[Literal["auto", "cubin", "executable"], Field(
        description="cubin (kernels only), executable (a program with main), or auto.")] = "auto",
    lineinfo: Annotated[bool, Field(description="Build with -lineinfo for source-level SASS/profiles.")] = True,
    filename: Annotated[str, Field(description="Name for inline source, shown in diagnostics.")] = "kernel.cu",
    cutlass: Annotated[bool, Field(description="Compile against CUTLASS/CuTe: adds its include paths, -std=c++17 "
                                               "(or your -std=c++20), --expt-relaxed-constexpr, and turns a default "
                                               "sm_90 target into sm_90a (wgmma/TMA). Template errors come back "
                                               "as a readable first error with the instantiation chain "
                                               "trimmed.")] = False,
    ctx: Context | None = None,
) -> Annotated[CallToolResult, CompileResult]:
    """Compile CUDA C++ to a cubin or executable with nvcc. Returns success, diagnostics parsed to
    (file, line, severity, message), ptxas' resource report per kernel (registers, shared memory,
    stack, spill stores/loads, barriers), findings with fixes, compile time, and an artifact_id for
    the sass tool. A syntax error is a normal answer with diagnostics, not a failure of the tool.
    Identical requests are cache hits."""
    from kernelscope.tools.compile import CompileRequest, compile_cuda

    try:
        req = CompileRequest(source=source, path=path, arch=arch, flags=flags or [], output=output,
                             lineinfo=lineinfo, filename=filename, cutlass=cutlass)
    except ValueError as e:
        raise ToolError(f"Invalid compile request: {e}") from None
    progress = Progress(ctx, "compiling with nvcc")
    await progress.start()
    result = await _call(compile_cuda, req, cancellable=True, progress=progress)
    await progress.done("compiled" if result.success else "compile failed")
    return _result(result, compile_summary(result))


@mcp.tool(
    name="sass",
    title="SASS and instruction statistics",
    annotations=ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False),
)
async def sass_tool(
    artifact_id: Annotated[str | None, Field(description="An id returned by compile.")] = None,
    cubin_base64: Annotated[str | None, Field(description="Or: a cubin file, base64-encoded.")] = None,
    kernel: Annotated[str | None, Field(description="Regex selecting kernels by (demangled) name.")] = None,
    interleave_source: Annotated[bool, Field(description="Interleave CUDA source lines (needs -lineinfo).")] = False,
    max_listing_lines: Annotated[int, Field(ge=0, le=5000, description="Listing lines in the answer.")] = 120,
    ctx: Context | None = None,
) -> Annotated[CallToolResult, SassResult]:
    """Disassemble a compiled artifact (or an uploaded cubin) and report per-kernel statistics that
    matter for performance: instruction mix by class, global load/store widths (LDG.E.128 vs scalar),
    tensor-core instructions (HMMA/HGMMA/IMMA...), local memory (LDL/STL), FP64, MUFU, predication,
    registers; plus findings with ranked fixes. The full listing is a resource."""
    from kernelscope.tools import sass as sass_mod

    if (artifact_id is None) == (cubin_base64 is None):
        raise ToolError("Give exactly one of `artifact_id` (from compile) or `cubin_base64`.")
    progress = Progress(ctx, "disassembling")
    await progress.start()
    if cubin_base64 is not None:
        try:
            data = base64.b64decode(cubin_base64, validate=True)
        except (binascii.Error, ValueError):
            raise ToolError("cubin_base64 is not valid base64.") from None
        result = await _call(sass_mod.sass_for_cubin_bytes, data, kernel=kernel, progress=progress,
                             interleave_source=interleave_source, max_listing_lines=max_listing_lines)
    else:
        assert artifact_id is not None
        result = await _call(sass_mod.sass_for_artifact, artifact_id, kernel=kernel, progress=progress,
                             interleave_source=interleave_source, max_listing_lines=max_listing_lines)
    await progress.done("done")
    return _result(result, sass_summary(result))


@mcp.tool(
    name="run",
    title="Run: correctness, timing, speedup, energy",
    annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False,
                                open_world_hint=False),
)
async def run_tool(
    mode: Annotated[Literal["eval", "program"], Field(description="eval: candidate vs reference; program: run "
                                                                  "an executable artifact.")] = "eval",
    reference: Annotated[str | None, Field(description="eval: reference module source (Model, get_inputs, "
                                                       "get_init_inputs).")] = None,
    reference_path: Annotated[str | None, Field(description="eval: or a reference .py under the allowed "
                                                            "roots.")] = None,
    candidate: Annotated[str | None, Field(description="eval: candidate module source defining ModelNew.")] = None,
    candidate_path: Annotated[str | None, Field(description="eval: or a candidate .py under the allowed "
                                                            "roots.")] = None,
    device: Annotated[Literal["auto", "cuda", "cpu"], Field(description="eval: where to run.")] = "auto",
    trials: Annotated[int, Field(ge=1, le=100, description="eval: correctness trials (fresh inputs each).")] = 5,
    tolerance: Annotated[Literal["strict", "default", "kernelbench"], Field(
        description="eval: tolerance policy (default fp32 1e-4, fp16 1e-2, bf16 2e-2; kernelbench 1e-2 for "
                    "all; strict fp32 1e-5).")] = "default",
    reference_modes: Annotated[list[Literal["eager", "compile"]] | None, Field(
        description="eval: baselines to time (eager PyTorch, torch.compile).")] = None,
    timing_budget_s: Annotated[float, Field(gt=0, le=60, description="eval: seconds of timed runs.")] = 0.5,
    measure_energy: Annotated[bool, Field(description="eval: NVML energy per call (adds ~2 s per side).")] = False,
    allow_tf32: Annotated[bool, Field(description="eval: allow TF32 on fp32 problems.")] = False,
    artifact_id: Annotated[str | None, Field(description="program: an executable artifact from compile.")] = None,
    args: Annotated[list[str] | None, Field(description="program: command-line arguments.")] = None,
    kernel_times: Annotated[bool, Field(description="program: per-kernel GPU times via ncu.")] = False,
    timeout_s: Annotated[float, Field(gt=0, le=3600, description="Wall-clock limit; the job is killed "
                                                                 "after it.")] = 300.0,
    ctx: Context | None = None,
) -> Annotated[CallToolResult, RunResult]:
    """Run untrusted GPU code in the sandbox. eval mode: check a candidate against a KernelBench-style
    reference over several trials with fresh random inputs (tolerance policy stated), time both with
    CUDA events (warm-up, L2 flush, interleaved, medians with IQR/CV), and answer a speedup with a 95%
    confidence interval and a verdict (faster/slower/inconclusive/incorrect/invalid), optional NVML
    energy per call, and flags for known cheats. program mode: run an executable artifact and report
    exit status, output, wall time and per-kernel GPU times. Crashes and hangs are results."""
    from kernelscope.tools import run as run_mod

    progress = Progress(ctx, f"running the {mode} job")
    await progress.start()
    on_wait = progress.on_wait()
    if mode == "program":
        if artifact_id is None:
            raise ToolError("program mode needs `artifact_id` (an executable from compile).")
        try:
            preq = run_mod.ProgramRequest(artifact_id=artifact_id, args=args or [], timeout_s=timeout_s,
                                          kernel_times=kernel_times)
        except ValueError as e:
            raise ToolError(f"Invalid run request: {e}") from None
        presult = await _call(run_mod.run_program, preq, cancellable=True, on_wait=on_wait, progress=progress)
        await progress.done("done")
        return _result(RunResult(mode="program", program=presult), program_summary(presult))
    try:
        ereq = run_mod.EvalRequest(reference=reference, reference_path=reference_path, candidate=candidate,
                                   candidate_path=candidate_path, device=device, trials=trials, tolerance=tolerance,
                                   reference_modes=reference_modes or ["eager"], timing_budget_s=timing_budget_s,
                                   measure_energy=measure_energy, allow_tf32=allow_tf32, timeout_s=timeout_s)
    except ValueError as e:
        raise ToolError(f"Invalid run request: {e}") from None
    eresult = await _call(run_mod.eval_candidate, ereq, cancellable=True, on_wait=on_wait, progress=progress)
    await progress.done(eresult.verdict)
    return _result(RunResult(mode="eval", eval=eresult), eval_summary(eresult))


_TARGET_DOC = ("Target: `artifact_id` (an executable from compile) with `args`, or eval mode: `reference`/"
               "`reference_path` and `candidate`/`candidate_path` (only the candidate's forward call is profiled).")


@mcp.tool(
    name="analyze",
    title="Analyze: two-stage profile, bottleneck and expert findings",
    annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False,
                                open_world_hint=False),
)
async def analyze_tool(
    artifact_id: Annotated[str | None, Field(description="program: an executable artifact from compile.")] = None,
    args: Annotated[list[str] | None, Field(description="program: command-line arguments.")] = None,
    reference: Annotated[str | None, Field(description="eval: reference module source.")] = None,
    reference_path: Annotated[str | None, Field(description="eval: or a reference .py under the allowed "
                                                            "roots.")] = None,
    candidate: Annotated[str | None, Field(description="eval: candidate module source (ModelNew).")] = None,
    candidate_path: Annotated[str | None, Field(description="eval: or a candidate .py under the allowed "
                                                            "roots.")] = None,
    kernel_regex: Annotated[str | None, Field(description="Only kernels whose name matches.")] = None,
    launch_skip: Annotated[int, Field(ge=0, le=1_000_000, description="Matching launches to skip.")] = 0,
    launch_count: Annotated[int, Field(ge=1, le=10_000, description="Launches the light stage profiles.")] = 512,
    deep_kernels: Annotated[int, Field(ge=1, le=20, description="Kernels (by total time) analyzed in "
                                                                "depth.")] = 3,
    timeout_s: Annotated[float, Field(gt=0, le=3600, description="Limit per capture.")] = 300.0,
    thresholds: Annotated[dict[str, dict[str, float]] | None, Field(
        description="Rule threshold overrides, e.g. {\"launch.tiny-grid\": {\"max_sm_fraction\": 0.25}}.")] = None,
    light: Annotated[Literal["auto", "ncu"], Field(
        description="auto: a program's two stages are measured in its own run (CUPTI: metrics, stall reasons and "
                    "source lines), no profiler process; ncu: under Nsight Compute.")] = "auto",
    ctx: Context | None = None,
) -> Annotated[CallToolResult, AnalyzeResult]:
    """Find what limits a CUDA program's or a candidate's kernels and what to do about it. Stage 1
    measures speed of light, launch statistics and occupancy of each kernel and launch configuration and
    classifies each kernel on the roofline; stage 2 adds what the class calls for (memory workload and
    source counters for memory-bound, warp states for latency-bound, instruction statistics and SASS for
    compute-bound, ...): for a program both are measured in its own run through CUPTI (deep metrics,
    stall reasons and per-line counters of each kernel's first launch), for a candidate under Nsight
    Compute with the class choosing the sections. The rules then give ranked findings
    (uncoalesced access, bank conflicts, spills, divergence, idle tensor cores, atomics contention, tiny
    grids, ...) with the evidence, the source line and fixes with their expected effect. Reports which
    stages ran, what measured each and how long each took."""
    from kernelscope.tools import analyze as prof

    try:
        req = prof.AnalyzeRequest(artifact_id=artifact_id, args=args or [], reference=reference,
                                  reference_path=reference_path, candidate=candidate, candidate_path=candidate_path,
                                  kernel_regex=kernel_regex, launch_skip=launch_skip, launch_count=launch_count,
                                  deep_kernels=deep_kernels, timeout_s=timeout_s, overrides=thresholds or {},
                                  light=light)
    except ValueError as e:
        raise ToolError(f"Invalid analyze request: {e}") from None
    if artifact_id is None and candidate is None and candidate_path is None:
        raise ToolError("Give a target: `artifact_id` (an executable from compile), or a reference and a candidate.")
    progress = Progress(ctx, "analyzing (trace, light capture, deep capture)")
    await progress.start()
    result = await _call(prof.analyze, req, cancellable=True, on_wait=progress.on_wait(), progress=progress)
    await progress.done("done")
    return _result(result, analyze_summary(result))


@mcp.tool(
    name="nsys_trace",
    title="System trace: the timeline between kernels",
    annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False,
                                open_world_hint=False),
)
async def nsys_trace_tool(
    artifact_id: Annotated[str | None, Field(description="program: an executable artifact from compile.")] = None,
    args: Annotated[list[str] | None, Field(description="program/script: command-line arguments.")] = None,
    script: Annotated[str | None, Field(description="script: Python source to run and trace.")] = None,
    script_path: Annotated[str | None, Field(description="script: or a .py under the allowed roots.")] = None,
    reference: Annotated[str | None, Field(description="eval: reference module source.")] = None,
    reference_path: Annotated[str | None, Field(description="eval: or a reference .py path.")] = None,
    candidate: Annotated[str | None, Field(description="eval: candidate module source (ModelNew).")] = None,
    candidate_path: Annotated[str | None, Field(description="eval: or a candidate .py path.")] = None,
    calls: Annotated[int, Field(ge=1, le=1000, description="eval: forward calls inside the traced range.")] = 20,
    backend: Annotated[Literal["auto", "nsys", "cupti"], Field(
        description="auto: Nsight Systems where it can build reports here, else the CUPTI tracer.")] = "auto",
    gap_threshold_us: Annotated[float, Field(ge=0, le=1e6, description="Shorter idle spells are not gaps.")] = 2.0,
    timeout_s: Annotated[float, Field(gt=0, le=3600, description="Limit for the traced run.")] = 300.0,
    thresholds: Annotated[dict[str, dict[str, float]] | None, Field(
        description="Rule threshold overrides, e.g. {\"system.launch-overhead\": {\"min_overhead_pct\": 10}}.")] = None,
    ctx: Context | None = None,
) -> Annotated[CallToolResult, TraceResult]:
    """Trace what happens between kernels: run a program, a Python script or an eval candidate under
    Nsight Systems (or CUPTI where nsys cannot build reports, which the answer says) and get the
    timeline as numbers: GPU busy vs idle, kernels by time share, copies by direction (pageable or
    pinned, sync or async), host CUDA API time, idle gaps and their cause, NVTX ranges, and a system
    class (launch-bound, host-bound, copy-bound, gpu-bound). Rules flag launch overhead, copies in the
    hot loop, pageable copies, synchronizations, idle gaps, allocation churn, copies not overlapped
    with compute and a dominant kernel, with fixes. The timeline is a Chrome/Perfetto JSON resource."""
    from kernelscope.tools import nsys_trace as tr

    try:
        req = tr.TraceRequest(artifact_id=artifact_id, args=args or [], script=script, script_path=script_path,
                              reference=reference, reference_path=reference_path, candidate=candidate,
                              candidate_path=candidate_path, calls=calls, backend=backend,
                              gap_threshold_us=gap_threshold_us, timeout_s=timeout_s, overrides=thresholds or {})
    except ValueError as e:
        raise ToolError(f"Invalid nsys_trace request: {e}") from None
    if artifact_id is None and script is None and script_path is None and candidate is None and candidate_path is None:
        raise ToolError("Give a target: `artifact_id` (an executable from compile), a Python `script`, or a "
                        "reference and a candidate.")
    progress = Progress(ctx, "tracing")
    await progress.start()
    result = await _call(tr.trace, req, cancellable=True, on_wait=progress.on_wait(), progress=progress)
    await progress.done(result.status)
    return _result(result, trace_summary(result))


@mcp.tool(
    name="ncu_profile",
    title="Nsight Compute profile",
    annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False,
                                open_world_hint=False),
)
async def ncu_profile_tool(
    artifact_id: Annotated[str | None, Field(description="program: an executable artifact from compile.")] = None,
    args: Annotated[list[str] | None, Field(description="program: command-line arguments.")] = None,
    reference: Annotated[str | None, Field(description="eval: reference module source.")] = None,
    reference_path: Annotated[str | None, Field(description="eval: or a reference .py path.")] = None,
    candidate: Annotated[str | None, Field(description="eval: candidate module source (ModelNew).")] = None,
    candidate_path: Annotated[str | None, Field(description="eval: or a candidate .py path.")] = None,
    sections: Annotated[list[str] | None, Field(description="Section identifiers (ncu --list-sections), e.g. "
                                                            "SpeedOfLight, MemoryWorkloadAnalysis, "
                                                            "WarpStateStats, SourceCounters.")] = None,
    section_set: Annotated[Literal["basic", "detailed", "full", "roofline"] | None, Field(
        description="A predefined set; 'detailed' when nothing is chosen.")] = None,
    metrics: Annotated[list[str] | None, Field(description="Extra metric names.")] = None,
    kernel_regex: Annotated[str | None, Field(description="Only kernels whose name matches this regex.")] = None,
    launch_skip: Annotated[int, Field(ge=0, le=1_000_000)] = 0,
    launch_count: Annotated[int | None, Field(ge=1, le=10_000, description="Launches to profile.")] = 20,
    clock_control: Annotated[Literal["none", "base"], Field(description="none (default): the GPU's own "
                                                                        "clocks.")] = "none",
    timeout_s: Annotated[float, Field(gt=0, le=3600)] = 300.0,
    ctx: Context | None = None,
) -> Annotated[CallToolResult, NcuProfileResult]:
    """Capture an Nsight Compute profile with the sections, metrics and kernel filters you choose, in
    the sandbox, and get per-launch classes and findings plus the report as an artifact (for compare or
    the Nsight Compute UI). Counter-permission errors, a missing ncu and filters that match nothing come
    back explained, with the fix. Prefer `analyze` unless you need specific sections."""
    from kernelscope.tools import analyze as prof
    from kernelscope.tools.ncu_profile import ncu_profile

    if artifact_id is None and candidate is None and candidate_path is None:
        raise ToolError("Give a target: `artifact_id` (an executable from compile), or a reference and a candidate.")
    try:
        req = prof.ProfileRequest(artifact_id=artifact_id, args=args or [], reference=reference,
                                  reference_path=reference_path, candidate=candidate, candidate_path=candidate_path,
                                  sections=sections or [], section_set=section_set, metrics=metrics or [],
                                  kernel_regex=kernel_regex, launch_skip=launch_skip, launch_count=launch_count,
                                  clock_control=clock_control, timeout_s=timeout_s)
    except ValueError as e:
        raise ToolError(f"Invalid ncu_profile request: {e}") from None
    progress = Progress(ctx, "profiling")
    await progress.start()
    result = await _call(ncu_profile, req, cancellable=True, on_wait=progress.on_wait(), progress=progress)
    await progress.done(result.status)
    return _result(result, profile_summary(result))


@mcp.tool(
    name="bottleneck_classify",
    title="Bottleneck and roofline",
    annotations=ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False),
)
async def classify_tool(
    report_path: Annotated[str | None, Field(description="A report id from analyze/ncu_profile, or a .ncu-rep "
                                                         "under the allowed roots.")] = None,
    kernel: Annotated[str | None, Field(description="Regex selecting kernels in the report.")] = None,
    flops: Annotated[float | None, Field(ge=0, description="Analytic FP32 FLOPs of a problem (no report).")] = None,
    dram_bytes: Annotated[float | None, Field(ge=0, description="Analytic DRAM bytes of a problem (no "
                                                                  "report).")] = None,
    time_us: Annotated[float | None, Field(ge=0, description="Measured time to place against the roof.")] = None,
    gpu: Annotated[str | None, Field(description="GPU name for the peak table (default H100).")] = None,
    ctx: Context | None = None,
) -> Annotated[CallToolResult, ClassifyResult]:
    """Classify what limits a kernel: memory-bound, compute-bound, latency-bound, occupancy-limited,
    launch/tail-limited or mixed, with a confidence, the speed-of-light evidence and its roofline
    position (arithmetic intensity, ridge point, achieved vs attainable, time at the roof), plus the
    expert findings (uncoalesced access with the source line, dominant stall, occupancy...) and Nsight
    Compute's own rule titles. Without a report, give a problem's analytic FLOPs and bytes to get the
    roofline ceiling an optimization aims at."""
    from kernelscope.tools import classify as cl

    progress = Progress(ctx, "reading the report" if report_path is not None else "placing on the roofline")
    await progress.start()
    if report_path is not None:
        result = await _call(cl.classify_report, report_path, kernel=kernel, progress=progress)
    else:
        result = await _call(cl.classify_analytic, flops=flops, dram_bytes=dram_bytes, time_us=time_us, gpu=gpu)
    await progress.done("done")
    return _result(result, classify_summary(result))


@mcp.tool(
    name="compare",
    title="Compare two profiles",
    annotations=ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False),
)
async def compare_tool(
    before_report: Annotated[str, Field(description="The report before the change: a report id, or a .ncu-rep path.")],
    after_report: Annotated[str, Field(description="The .ncu-rep after the change (may be the same file).")],
    before_kernel: Annotated[str | None, Field(description="Regex selecting one kernel in the first report.")] = None,
    after_kernel: Annotated[str | None, Field(description="Regex selecting one kernel in the second report.")] = None,
    ctx: Context | None = None,
) -> Annotated[CallToolResult, CompareResult]:
    """Compare a kernel before and after a change: speedup, the bottleneck class on each side, deltas of
    the metrics that matter (duration, throughputs, DRAM bytes, hit rates, occupancy, registers,
    sectors per request, branch uniformity) marked better/worse, and which findings the change resolved
    or introduced."""
    from kernelscope.tools.compare import compare_profiles

    progress = Progress(ctx, "reading both reports")
    await progress.start()
    result = await _call(compare_profiles, before_report, after_report, before_kernel=before_kernel,
                         after_kernel=after_kernel, progress=progress)
    await progress.done("done")
    return _result(result, compare_summary(result))


@mcp.tool(
    name="search_cutlass",
    title="Search the CUTLASS/CuTe sources",
    annotations=ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False),
)
async def search_cutlass_tool(
    query: Annotated[str, Field(description="A symbol (make_tma_copy, cute::Layout, SM90_TMA_LOAD_2D, "
                                            "warpgroup_wait) or words that must all appear on a line "
                                            "('tma multicast'). Case-insensitive; identifiers match whole or by "
                                            "their parts (split at _ and camelCase).")],
    limit: Annotated[int, Field(ge=1, le=100, description="Hits returned, best first.")] = 20,
    kind: Annotated[Literal["any", "definitions", "text"], Field(
        description="definitions: where names are defined (class, struct, alias, function, macro); text: lines "
                    "that mention the query; any: definitions first, then text.")] = "any",
    scope: Annotated[Literal["all", "include", "examples"], Field(
        description="include: the headers; examples: NVIDIA's examples and CuTe tutorials; all: both, plus the "
                    "util headers.")] = "all",
    ctx: Context | None = None,
) -> Annotated[CallToolResult, CutlassSearchResult]:
    """Find where a CUTLASS/CuTe name is defined and how it is used, ranked: definitions of the name
    (exact, then case-insensitive, prefix, substring; headers before examples) above plain text
    matches, each with its file (relative to the CUTLASS root) and line. Bounded: `limit` hits, counts
    stop at 5,000 lines. The index is built on first use (a few seconds) and cached. Then read the code
    with read_cutlass_file."""
    from kernelscope.tools import cutlass as cut

    progress = Progress(ctx, "searching CUTLASS (the index is built on first use)")
    await progress.start()
    result = await _call(cut.search, query, limit=limit, kind=kind, scope=scope, progress=progress)
    await progress.done("done")
    return _result(result, cutlass_search_summary(result))


@mcp.tool(
    name="read_cutlass_file",
    title="Read a CUTLASS/CuTe source file",
    annotations=ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False),
)
async def read_cutlass_file_tool(
    path: Annotated[str, Field(description="A file relative to the CUTLASS root, as search_cutlass prints it "
                                           "(include/cute/tensor.hpp; cute/... is taken as include/cute/...).")],
    start_line: Annotated[int, Field(ge=1, description="First line (1-based).")] = 1,
    end_line: Annotated[int | None, Field(ge=1, description="Last line (inclusive); default: the end, within "
                                                            "max_lines.")] = None,
    max_lines: Annotated[int, Field(ge=1, le=1000, description="At most this many lines.")] = 200,
    ctx: Context | None = None,
) -> Annotated[CallToolResult, CutlassFileResult]:
    """Read lines of a CUTLASS/CuTe header or example (numbered in the text answer). Paths stay
    inside the CUTLASS root: absolute paths, '..' and symlinks that lead out are refused."""
    from kernelscope.tools import cutlass as cut

    progress = Progress(ctx, "reading")
    await progress.start()
    result = await _call(cut.read_file, path, start_line=start_line, end_line=end_line, max_lines=max_lines,
                         progress=progress)
    await progress.done("done")
    return _result(result, cutlass_file_summary(result))


# ----------------------------------------------------------------------------------- resources
@mcp.resource("kernelscope://capabilities", name="capabilities", mime_type="application/json",
              description="The capability report of this host (JSON).")
async def capabilities_resource() -> str:
    from kernelscope.tools import capabilities as caps

    report = await _call(caps.capability_report, probe=False)
    return report.model_dump_json(indent=2)


_TEXT_ROLES = {"source", "compile-log", "sass", "sass-lineinfo", "trace"}


@mcp.resource("kernelscope://artifacts/{artifact_id}", name="artifact", mime_type="application/json",
              description="Metadata of a stored artifact: kind, arch, flags, files, compile result.")
def artifact_resource(artifact_id: str) -> str:
    art = _artifact(artifact_id)
    return json.dumps(art.meta.model_dump(mode="json"), indent=2)


@mcp.resource("kernelscope://artifacts/{artifact_id}/{role}", name="artifact-file",
              description="A file of an artifact: source, compile-log, sass, sass-lineinfo (text) or cubin, "
                          "executable, report (an Nsight Compute .ncu-rep from analyze/ncu_profile; binary), "
                          "trace (Chrome/Perfetto JSON from nsys_trace).")
def artifact_file_resource(artifact_id: str, role: str) -> str | bytes:
    art = _artifact(artifact_id)
    p = art.path(role)
    if p is None or not p.is_file():
        have = ", ".join(sorted(art.meta.files)) or "none"
        raise ResourceNotFoundError(f"Artifact {art.id} has no {role!r} file (it has: {have}). The SASS listing "
                                    "appears after a sass call.")
    data = p.read_bytes()
    return data.decode("utf-8", errors="replace") if role in _TEXT_ROLES else data


def _artifact(artifact_id: str) -> Any:
    from kernelscope.artifacts import get_store

    try:
        art = get_store().get(artifact_id)
    except KernelscopeError as e:
        raise ResourceNotFoundError(str(e)) from None
    if art is None:
        raise ResourceNotFoundError(f"No artifact {artifact_id!r} in this server's store.")
    return art


def create_server() -> MCPServer:
    return mcp
