"""The MCP server: kernelscope's tools, resources and instructions on an ``MCPServer``.

The tools are declared in ``kernelscope.server.tools`` (a request model and a plain function each) and
registered through the one helper in ``kernelscope.server.registry``; the resources are in
``kernelscope.server.resources``.
"""

from __future__ import annotations

from typing import Any

from mcp import MCPError
from mcp.server import MCPServer
from mcp.types import INVALID_PARAMS, GetPromptResult

from kernelscope._version import __version__
from kernelscope.server.prompts import add_prompts, check_arguments
from kernelscope.server.resources import add_resources
from kernelscope.server.tools import registry

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
The prompts optimize-kernel, diagnose-kernel and explain-finding lay out the whole method step by step.
Every answer starts with a short diagnosis; the structured result has all the data, and full
listings and logs are resources under kernelscope://artifacts/{artifact_id}/...
"""

class _Server(MCPServer):
    async def get_prompt(self, name: str, arguments: dict[str, Any] | None = None,
                         context: Any = None) -> Any:
        """An unknown prompt, or unknown or missing arguments, are the client's mistake (-32602, as for an
        unknown resource), not an internal error; the prompts refuse bad values the same way."""
        prompt = self._prompt_manager.get_prompt(name)
        if not prompt:
            names = ", ".join(p.name for p in self._prompt_manager.list_prompts())
            raise MCPError(INVALID_PARAMS, f"Unknown prompt: {name!r}; the prompts are {names} (see prompts/list).")
        check_arguments(prompt, arguments)
        result: GetPromptResult = await super().get_prompt(name, arguments, context)
        return result


mcp = _Server(
    "kernelscope",
    title="kernelscope: GPU performance tools",
    description="Compile, disassemble and analyse CUDA kernels with expert diagnoses.",
    version=__version__,
    instructions=INSTRUCTIONS,
    tools=registry.tools,
)
add_resources(mcp)
add_prompts(mcp)


def create_server() -> MCPServer:
    return mcp
