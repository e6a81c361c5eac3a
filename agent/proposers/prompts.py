"""What the LLM proposers send a model and how its reply is read: the system prompt, the user prompt
built from the problem (and the reference's profile), the target GPU and the fast path's API, the current
candidate with its result and its profile in the run's feedback arm (``PromptContext``), the search
memory, and the fenced Python block that the reply must hold."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from kernelscope.agent.search.tree import Node, SearchMemory

SYSTEM = """\
You optimize GPU kernels. You receive a PyTorch reference (Model, get_inputs, get_init_inputs) and the \
current candidate (a Python module defining ModelNew with the same constructor, whose CUDA runs through \
kernelscope.fast.CudaKernel (NVRTC) or torch.utils.cpp_extension.load_inline), with its measured result \
and, where the run profiles, its profile. Write ONE improved candidate that must stay numerically \
correct. Do not call the reference's torch operations \
for the main work, do not cache results, do not use other streams. Reply with a one-line rationale, then \
the whole module in a single ```python block."""

TOOLS_NOTE = """ You may look things up in NVIDIA's CUTLASS/CuTe sources before you write, with the tools \
search_cutlass (a symbol or words; definitions first, with file and line) and read_cutlass_file (a path \
relative to the CUTLASS root, as search_cutlass prints it, and a line range), a few calls at most. For \
Hopper, include/cute/arch/copy_sm90_tma.hpp (TMA copies) and include/cute/atom/mma_traits_sm90_gmma.hpp \
(wgmma) are the headers, and where the root ships its examples, examples/cute/tutorial/hopper/wgmma_tma_sm90.cu \
is a TMA + wgmma GEMM (search_cutlass with scope="examples" finds more). A CuTe candidate compiles through \
kernelscope.fast.CudaKernel(source, name, arch="sm_90a", cutlass=True); CuTe's host-side make_tma_copy does \
not exist there: TMA descriptors come from kernelscope.fast.tensor_map_2d."""

FAST_PATH = """\
`from kernelscope.fast import CudaKernel` compiles CUDA C++ with NVRTC (no C++ extension build) and launches \
it on torch tensors:
```
k = CudaKernel(source, name, *, options=("--std=c++17",), arg_types=None, allow_strided=False, arch=None,
               cutlass=False)          # build once, at import or in __init__, not in forward
k(grid, block, args, shared_mem=0)     # grid, block: ints or tuples; on torch's current stream
```
- `name` is an `extern "C" __global__` function of `source`. `args` follow its parameter list: CUDA tensors \
become device pointers (contiguous unless allow_strided=True), Python numbers the declared C type (int, \
long long, float, double, unsigned, size_t, __half); where the signature cannot be read, give arg_types \
(C type names, "*" for a pointer).
- `shared_mem`: dynamic shared memory in bytes; above 48 KiB the kernel's limit is raised for you.
- torch.utils.cpp_extension.load_inline works too (a slower build)."""

CUTE_PATH = """
- CuTe/CUTLASS: CudaKernel(source, name, arch="sm_90a", cutlass=True) adds the CUTLASS/CuTe and libcu++ \
include folders and compiles for exactly that target (wgmma, TMA multicast and setmaxnreg need the "a" \
target). CuTe's host-side make_tma_copy does not exist under NVRTC: \
`kernelscope.fast.tensor_map_2d(tensor, box_rows, box_cols, *, swizzle=128, l2_promotion=128)` builds a TMA \
descriptor for a 2-D CUDA tensor (last dimension contiguous, 16-byte aligned rows); pass it by value to a \
`const __grid_constant__ CUtensorMap` (cute::TmaDescriptor) parameter and keep the tensor alive."""


@dataclass
class PromptContext:
    """What every prompt of a run carries besides its node: the feedback arm and its token budget, the
    target GPU with its peaks, the reference's profile, the API a candidate may use."""

    feedback: Literal["none", "raw", "diagnosis"] = "diagnosis"
    budget: int = 1200  # estimated tokens of each profile section (the candidate's; the reference's: half)
    gpu: str = ""  # the target GPU and its peaks (empty on the CPU)
    reference_profile: str = ""  # already fitted to budget // 2
    cutlass: bool = False  # the server has the CUTLASS/CuTe headers
    no_profile: str = "not profiled"  # why a node has no profile, when it has none


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


_PROFILE_HEADS = {
    "diagnosis": "the server's analyze summary: class, roofline position, ranked findings with evidence and fixes",
    "raw": "raw counters measured by analyze; no diagnosis",
}


def target_block(ctx: PromptContext) -> str:
    """The target GPU and the fast path's API (nothing on the CPU)."""
    if not ctx.gpu:
        return ""
    return (f"## Target GPU\n{ctx.gpu}\n\n## The fast path (the API a candidate may use)\n{FAST_PATH}"
            + (CUTE_PATH if ctx.cutlass else "") + "\n\n")


def profile_block(title: str, text: str, ctx: PromptContext, budget: int) -> str:
    """A profile section in the run's feedback arm, its budget stated (nothing for ``none``)."""
    if ctx.feedback == "none":
        return ""
    body = text or f"({ctx.no_profile})"
    return f"## {title} ({_PROFILE_HEADS[ctx.feedback]}; at most {budget} tokens)\n{body}\n\n"


def build_prompt(reference: str, node: Node, memory: SearchMemory, source: str,
                 ctx: PromptContext | None = None) -> str:
    """A proposal: the reference (and its profile), the target, the current candidate with its result and
    profile, what the search has tried."""
    ctx = ctx or PromptContext()
    is_reference = isinstance(node.payload, dict) and bool(node.payload.get("reference_start"))
    ref_profile = profile_block("Profile of the reference", ctx.reference_profile, ctx, ctx.budget // 2) \
        if ctx.reference_profile and not is_reference else ""  # the reference as the start: its profile once
    return (reference_block(reference) + ref_profile + target_block(ctx) +
            f"## Current candidate (node {node.id}: {_result(node)})\n```python\n{source.strip()}\n```\n\n"
            + profile_block("Profile of the current candidate", node.outcome.profile, ctx, ctx.budget) +
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


def repair_prompt(reference: str, source: str, status: str, feedback: str,
                  ctx: PromptContext | None = None) -> str:
    """The one repair turn for a failed candidate: the reference, the target and its API, what went wrong,
    the candidate (last)."""
    head = REPAIR_HEADS.get(status, f"This candidate failed ({status})")
    return (reference_block(reference) + target_block(ctx or PromptContext()) +
            f"## Repair\n{head}:\n```\n{feedback[:3000]}\n```\n\n"
            f"## The failed candidate\n```python\n{source.strip()}\n```\n"
            "Fix it. Reply with a one-line rationale, then the whole module in one ```python block.")
