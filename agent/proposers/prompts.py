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


def _result(node: Node) -> str:
    o = node.outcome
    if o.feedback:
        return o.feedback
    return (f"correct, {o.speedup:.3f}x over the reference" if o.ok and o.speedup else
            f"{o.status}: {o.note}" if o.note else o.status)


def reference_block(reference: str) -> str:
    return f"## Reference\n```python\n{reference.strip()}\n```\n\n"


def build_prompt(reference: str, node: Node, memory: SearchMemory, source: str) -> str:
    o = node.outcome
    findings = "\n".join(f"- {f}" for f in (o.details or o.findings)) or "- (no profile findings for this candidate)"
    return (reference_block(reference) +
            f"## Current candidate (node {node.id}: {_result(node)})\n```python\n{source.strip()}\n```\n\n"
            f"## Bottleneck class\n{o.bottleneck or 'not profiled'}\n\n## Findings (most severe first)\n{findings}\n\n"
            f"## What the search has tried\n{memory.summary()}\n\n"
            "Write the improved candidate.")


def follow_up_prompt(reference: str, source: str, reply: str) -> str:
    """The one follow-up for a reply without a code block: the reference and the current code again."""
    return (reference_block(reference) +
            f"## The candidate to improve\n```python\n{source.strip()}\n```\n\n"
            f"## Your reply\n{reply[:4000]}\n\n"
            "Your reply had no ```python block defining ModelNew. Reply with the whole module in one ```python block.")


REPAIR_HEADS = {
    "compile-error": "This candidate failed to build or import",
    "crashed": "This candidate crashed while it ran",
    "incorrect": "This candidate ran, but its outputs did not match the reference's",
    "invalid": "The server rejected this candidate as invalid (it must do the main work in its own kernels)",
}


def repair_prompt(reference: str, source: str, status: str, feedback: str) -> str:
    """The one repair turn for a failed candidate: the reference, what went wrong, the candidate (last)."""
    head = REPAIR_HEADS.get(status, f"This candidate failed ({status})")
    return (reference_block(reference) + f"## Repair\n{head}:\n```\n{feedback[:3000]}\n```\n\n"
            f"## The failed candidate\n```python\n{source.strip()}\n```\n"
            "Fix it. Reply with a one-line rationale, then the whole module in one ```python block.")
