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
from collections.abc import Callable
from typing import Annotated, Any, Literal, TypeVar

import anyio
import anyio.to_thread
from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ResourceNotFoundError, ToolError
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel, Field

from kernelscope._version import __version__
from kernelscope.errors import KernelscopeError
from kernelscope.models import CapabilityReport, CompileResult, SassResult
from kernelscope.server.summaries import compile_summary, sass_summary

log = logging.getLogger("kernelscope.server")
T = TypeVar("T")

INSTRUCTIONS = """\
kernelscope gives you real GPU performance tools for CUDA kernels. Typical flow:
1. `capabilities` once: what this host can do (GPU, toolkit, counters) and why not.
2. `compile` CUDA source (inline or a file under the allowed roots): diagnostics with lines, ptxas
   resources per kernel (registers, shared memory, spills) and findings; returns an artifact_id.
3. `sass` on that artifact_id: instruction mix, global load/store widths (vectorization), tensor-core
   use, local memory (spills), FP64 and special functions, with findings and ranked fixes.
Every answer starts with a short diagnosis; the structured result has all the data, and full
listings and logs are resources under kernelscope://artifacts/{artifact_id}/...
"""

mcp = MCPServer(
    "kernelscope",
    title="kernelscope: GPU performance tools",
    description="Compile, disassemble and analyse CUDA kernels with expert diagnoses.",
    version=__version__,
    instructions=INSTRUCTIONS,
)


async def _call(fn: Callable[..., T], *args: Any, cancellable: bool = False, **kwargs: Any) -> T:
    """Run a blocking tool in a worker thread. On cancellation a ``cancellable`` tool is told to stop
    through its ``cancel`` event (which kills its process group) and the await returns at once."""
    cancel = threading.Event()

    def work() -> T:
        return fn(*args, cancel=cancel, **kwargs) if cancellable else fn(*args, **kwargs)

    try:
        return await anyio.to_thread.run_sync(work, abandon_on_cancel=True)
    except anyio.get_cancelled_exc_class():
        cancel.set()
        raise
    except KernelscopeError as e:
        raise ToolError(str(e)) from None
    except ToolError:
        raise
    except Exception as e:  # a bug: say so plainly instead of a bare "Error executing tool"
        log.exception("internal error in %s", getattr(fn, "__name__", fn))
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

    if ctx is not None:
        await ctx.report_progress(0, 1, "probing GPUs and toolchain")
    if refresh:
        await _call(caps.reset_caches)
    report = await _call(caps.capability_report, probe=True)
    if ctx is not None:
        await ctx.report_progress(1, 1, "done")
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
                             lineinfo=lineinfo, filename=filename)
    except ValueError as e:
        raise ToolError(f"Invalid compile request: {e}") from None
    if ctx is not None:
        await ctx.report_progress(0, 1, "compiling with nvcc")
    result = await _call(compile_cuda, req, cancellable=True)
    if ctx is not None:
        await ctx.report_progress(1, 1, "compiled" if result.success else "compile failed")
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
    if ctx is not None:
        await ctx.report_progress(0, 1, "disassembling")
    if cubin_base64 is not None:
        try:
            data = base64.b64decode(cubin_base64, validate=True)
        except (binascii.Error, ValueError):
            raise ToolError("cubin_base64 is not valid base64.") from None
        result = await _call(sass_mod.sass_for_cubin_bytes, data, kernel=kernel,
                             interleave_source=interleave_source, max_listing_lines=max_listing_lines)
    else:
        assert artifact_id is not None
        result = await _call(sass_mod.sass_for_artifact, artifact_id, kernel=kernel,
                             interleave_source=interleave_source, max_listing_lines=max_listing_lines)
    if ctx is not None:
        await ctx.report_progress(1, 1, "done")
    return _result(result, sass_summary(result))


# ----------------------------------------------------------------------------------- resources
@mcp.resource("kernelscope://capabilities", name="capabilities", mime_type="application/json",
              description="The capability report of this host (JSON).")
async def capabilities_resource() -> str:
    from kernelscope.tools import capabilities as caps

    report = await _call(caps.capability_report, probe=False)
    return report.model_dump_json(indent=2)


_TEXT_ROLES = {"source", "compile-log", "sass", "sass-lineinfo"}


@mcp.resource("kernelscope://artifacts/{artifact_id}", name="artifact", mime_type="application/json",
              description="Metadata of a stored artifact: kind, arch, flags, files, compile result.")
def artifact_resource(artifact_id: str) -> str:
    art = _artifact(artifact_id)
    return json.dumps(art.meta.model_dump(mode="json"), indent=2)


@mcp.resource("kernelscope://artifacts/{artifact_id}/{role}", name="artifact-file",
              description="A file of an artifact: source, compile-log, sass, sass-lineinfo (text) or cubin, "
                          "executable (binary).")
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
    from kernelscope.tools.artifacts import get_store

    try:
        art = get_store().get(artifact_id)
    except KernelscopeError as e:
        raise ResourceNotFoundError(str(e)) from None
    if art is None:
        raise ResourceNotFoundError(f"No artifact {artifact_id!r} in this server's store.")
    return art


def create_server() -> MCPServer:
    return mcp
