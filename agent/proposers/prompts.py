"""What the LLM proposers send a model and how its reply is read: the system prompt, the user prompt
built from the problem, the current candidate, its profile findings and the search memory, and the
fenced Python block that the reply must hold."""

from __future__ import annotations

import re

from kernelscope.agent.search.tree import Node, SearchMemory

SYSTEM = """\
You optimize GPU kernels. You receive a PyTorch reference (Model, get_inputs, get_init_inputs) and the \
current candidate (a Python module defining ModelNew with the same constructor, whose CUDA runs through \
kernelscope.fast.CudaKernel (NVRTC) or torch.utils.cpp_extension.load_inline), with its measured result, \
the bottleneck class from the profiler and the ranked findings. Write ONE improved candidate that must \
stay numerically correct. Address the top finding first. Do not call the reference's torch operations \
for the main work, do not cache results, do not use other streams. Reply with a one-line rationale, then \
the whole module in a single ```python block."""

TOOLS_NOTE = """ You may look things up in NVIDIA's CUTLASS/CuTe sources before you write, with the tools \
search_cutlass (a symbol or words; definitions first, with file and line) and read_cutlass_file (a file \
or a line range), a few calls at most. A CuTe candidate compiles through \
kernelscope.fast.CudaKernel(source, name, arch="sm_90a", cutlass=True); TMA descriptors come from \
kernelscope.fast.tensor_map_2d; examples/cutlass/ in the kernelscope repository shows a Hopper GEMM built \
that way."""

_BLOCK = re.compile(r"```(?:python|py)?[ \t]*\n(.*?)```", re.S)


def extract_code(reply: str) -> str | None:
    """The last fenced Python block that defines ModelNew, or None."""
    blocks = [b for b in _BLOCK.findall(reply) if "ModelNew" in b]
    return blocks[-1].strip() + "\n" if blocks else None


def rationale(reply: str) -> str:
    head = reply.split("```", 1)[0].strip().splitlines()
    return (head[0] if head else "model proposal")[:160]


def build_prompt(reference: str, node: Node, memory: SearchMemory, source: str) -> str:
    o = node.outcome
    result = (f"correct, {o.speedup:.3f}x over the reference" if o.ok and o.speedup else
              f"{o.status}: {o.note}" if o.note else o.status)
    findings = "\n".join(f"- {f}" for f in (o.details or o.findings)) or "- (no profile findings for this candidate)"
    return (f"## Reference\n```python\n{reference.strip()}\n```\n\n"
            f"## Current candidate (node {node.id}: {result})\n```python\n{source.strip()}\n```\n\n"
            f"## Bottleneck class\n{o.bottleneck or 'not profiled'}\n\n## Findings (most severe first)\n{findings}\n\n"
            f"## What the search has tried\n{memory.summary()}\n\n"
            "Write the improved candidate.")


