"""MCP prompts: the method of `kernelscope optimize`, for a host's own model (Claude Desktop, Claude Code,
VS Code...). Each prompt is a user message that walks the model through a loop with the server's tools.

- ``optimize-kernel``: classify -> analyze -> write a candidate -> run (correctness and speed) -> compare
  -> iterate, within a budget of evaluations, then confirm before claiming;
- ``diagnose-kernel``: compile, SASS and (with a GPU) the two-stage analysis of a CUDA source, ending in
  ranked findings with their evidence and fixes, without rewriting the code;
- ``explain-finding``: one rule of the registry (its description, thresholds and metrics) explained
  against a finding the user pastes.

Arguments are strings on the wire (the spec's ``prompts/get``); each is validated here, and a bad one is
refused with a JSON-RPC ``-32602`` that says what to send instead. Every tool a prompt names is checked
against the registry when the module loads, so a prompt cannot name a tool that does not exist.
"""

from __future__ import annotations

import difflib
import inspect
import re
from collections.abc import Callable
from typing import Annotated, Any

from mcp import MCPError
from mcp.server import MCPServer
from mcp.server.mcpserver.prompts import Prompt
from mcp.types import INVALID_PARAMS
from pydantic import Field

from kernelscope.heuristics import REGISTRY
from kernelscope.server.tools import registry

MAX_SOURCE = 200_000  # characters of a source pasted into a prompt argument
MAX_FINDING = 20_000
BUDGET_DEFAULT, BUDGET_MAX = 8, 50
_ARCH = re.compile(r"^sm_\d{2,3}[af]?$")


def tool(name: str) -> str:
    """A tool's name as a prompt shows it; an unknown name fails when the module loads."""
    if name not in registry.specs:
        raise AssertionError(f"prompt names a tool the server does not have: {name}")
    return f"`{name}`"


CAPS, COMPILE, SASS, RUN, ANALYZE = (tool(n) for n in ("capabilities", "compile", "sass", "run", "analyze"))
CLASSIFY, COMPARE, TRACE = (tool(n) for n in ("bottleneck_classify", "compare", "nsys_trace"))
CUTLASS = f"{tool('search_cutlass')} / {tool('read_cutlass_file')}"


def refuse(message: str) -> MCPError:
    return MCPError(INVALID_PARAMS, message)


def _given(value: str | None) -> str | None:
    return value.strip() if value is not None and value.strip() else None


def _source_or_path(value: str, *, name: str, suffixes: tuple[str, ...], must: tuple[str, ...],
                    what: str) -> tuple[str, str]:
    """('path', p) for a file path, ('source', text) for pasted source; refused when it is neither."""
    if len(value) > MAX_SOURCE:
        raise refuse(f"`{name}` is {len(value):,} characters; paste at most {MAX_SOURCE:,}, or give a path.")
    text = value.strip()
    if "\n" not in text and text.endswith(suffixes):
        return "path", text
    if "\n" in text and all(m in text for m in must):
        return "source", text
    raise refuse(f"`{name}` must be a path to a {'/'.join(suffixes)} file under the server's allowed roots, or "
                 f"{what} pasted in (it must contain {', '.join(repr(m) for m in must)}); got "
                 f"{text[:60]!r}{'...' if len(text) > 60 else ''}.")


def _target(value: str | None) -> float | None:
    if _given(value) is None:
        return None
    assert value is not None
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*[xX]?\s*", value)
    x = float(m.group(1)) if m else None
    if x is None or not 1.0 < x <= 1000.0:
        raise refuse(f"`target` is the speedup to reach over eager PyTorch, a number above 1 such as 1.5 or 2x; "
                     f"got {value!r}.")
    return x


def _budget(value: str | None) -> int:
    if _given(value) is None:
        return BUDGET_DEFAULT
    assert value is not None
    if not value.strip().isdigit() or not 1 <= int(value) <= BUDGET_MAX:
        raise refuse(f"`budget` is the number of candidates to evaluate with run, a whole number from 1 to "
                     f"{BUDGET_MAX}; got {value!r}.")
    return int(value)


def _fenced(text: str, lang: str) -> str:
    fence = "````" if "```" in text else "```"
    return f"{fence}{lang}\n{text}\n{fence}"


RULES = f"""\
Rules (the method; do not bend them):
- Trust the verdict. {RUN}'s verdict and flags decide: `invalid` or `incorrect` is a failure whatever the
  speedup says; `inconclusive` is a tie with the reference, not a win; `slower` is slower. Do not re-time a
  candidate hoping for a better number, and do not argue with a correctness failure: fix it.
- Never delegate the main op. The main computation runs in your own kernel. Calling the reference's
  PyTorch ops for it (matmul, conv, sum...), torch.compile, caching outputs across calls or doing the work on
  another stream is cheating; the server flags it and the candidate counts as a failure.
- Follow the top finding. Each candidate addresses the highest-ranked finding of the latest profile: name
  it (rule id, its evidence: metric, value, threshold) and its first fix before you write code. When the
  class changes (memory-bound -> compute-bound...), the next finding comes from the new profile.
- Confirm before claiming. State a speedup only from a confirmation {RUN} (a longer `timing_budget_s`,
  e.g. 2, and more `trials`) of the final candidate, with its 95% confidence interval and verdict.
- Keep a log, one line per candidate: number, what changed, status, speedup [95% CI], verdict, top finding."""


def optimize_kernel(
    problem: Annotated[str, Field(description="The problem: a KernelBench-style reference .py (Model, get_inputs, "
                                              "get_init_inputs) as a path under the server's allowed roots, or "
                                              "its source pasted in.")],
    target: Annotated[str | None, Field(description="Optional speedup to reach over eager PyTorch, e.g. 1.5 or "
                                                    "2x (default: as fast as the budget allows).")] = None,
    budget: Annotated[str | None, Field(description=f"Candidates to evaluate with run, 1-{BUDGET_MAX} "
                                                    f"(default {BUDGET_DEFAULT}).")] = None,
    candidate: Annotated[str | None, Field(description="Optional starting candidate (a module defining "
                                                       "ModelNew): a .py path or its source.")] = None,
) -> str:
    """Optimize a PyTorch problem's CUDA implementation with kernelscope's tools: classify, analyze, write a
    candidate, run it (correctness and speed), compare, iterate; then confirm the best before claiming."""
    kind, ref = _source_or_path(problem, name="problem", suffixes=(".py",), must=("class Model", "get_inputs"),
                                what="a KernelBench-style reference module")
    start = None if _given(candidate) is None else _source_or_path(
        candidate or "", name="candidate", suffixes=(".py",), must=("ModelNew",), what="a module defining ModelNew")
    goal, n = _target(target), _budget(budget)
    ref_arg = f'`reference_path="{ref}"`' if kind == "path" else "`reference` (the source below)"
    parts = [
        "Make this PyTorch problem faster with a CUDA kernel of your own, using the kernelscope MCP tools and "
        "measuring every step.",
        f"Problem: pass {ref_arg} to {RUN} and {ANALYZE}."
        + (f"\n\n{_fenced(ref, 'python')}" if kind == "source" else ""),
        f"Goal: a correct candidate {f'at least {goal:g}x faster than eager PyTorch' if goal else 'as fast as you can'}"
        f", confirmed; evaluate at most {n} candidates with {RUN} (the confirmation run does not count).",
    ]
    if start is not None:
        where = f'pass `candidate_path="{start[1]}"` to {RUN}' if start[0] == "path" else "below"
        parts.append(f"Start from this candidate ({where}); it is candidate 0 of the budget."
                     + (f"\n\n{_fenced(start[1], 'python')}" if start[0] == "source" else ""))
    parts.append(f"""\
The loop:
1. {CAPS}: the GPU, whether Nsight Compute can profile ({ANALYZE}), whether CUTLASS is there. Without a GPU,
   say so: `device="cpu"` only checks correctness, and no speedup found there counts.
2. Classify the problem: {CLASSIFY} with its analytic FLOPs and DRAM bytes gives the roofline ceiling; then
   {ANALYZE} the reference (the candidate: the reference module plus `class ModelNew(Model): pass`) for its
   bottleneck class, roofline position, top stalls and ranked findings.
3. Write a candidate: a Python module defining ModelNew with Model's constructor, its main work in your own
   CUDA kernel through kernelscope.fast.CudaKernel (NVRTC) or torch.utils.cpp_extension.load_inline. For
   CUTLASS/CuTe, look the API up with {CUTLASS} first.
4. {RUN} it (`mode="eval"`, the reference, the candidate): correctness over several trials, the speedup with
   a 95% confidence interval, the verdict and any cheat flags. A build error, a crash or a mismatch comes
   back with its detail: fix that candidate once from it before moving on.
5. When it is correct and within reach of the best: {ANALYZE} it, and {COMPARE} its report with the previous
   one (the report ids in both answers): which findings it resolved, which it introduced, and the class.
6. Iterate from the new top finding until the goal is met or the budget is spent; keep the best by its
   verdict and lower confidence bound, not by its point estimate.
7. Confirm: {RUN} the best again with a longer timing budget and more trials.

{RULES}

Finish with the best candidate's whole source, its confirmed speedup with the interval and verdict, the
bottleneck class before and after, the log, and what you would try next.""")
    return "\n\n".join(parts)


def diagnose_kernel(
    source: Annotated[str, Field(description="CUDA C++ to diagnose: a .cu path under the server's allowed roots, "
                                             "or the source pasted in.")],
    arch: Annotated[str | None, Field(description="Optional target architecture such as sm_90a or sm_80 "
                                                  "(default: the local GPU's).")] = None,
) -> str:
    """Diagnose a CUDA kernel: compile it, read its SASS and ptxas resources and, with a GPU, profile it (the
    two-stage analysis and the timeline), ending in ranked findings with their evidence and fixes."""
    kind, text = _source_or_path(source, name="source", suffixes=(".cu", ".cuh"), must=("__global__",),
                                 what="CUDA C++ with a __global__ kernel")
    if _given(arch) is not None and not _ARCH.match((arch or "").strip()):
        raise refuse(f"`arch` is a CUDA architecture such as sm_80, sm_90 or sm_90a; got {arch!r}.")
    src_arg = f'`path="{text}"`' if kind == "path" else "`source` (below)"
    arch_arg = f', `arch="{(arch or "").strip()}"`' if _given(arch) else ""
    body = f"""\
Diagnose this CUDA code with the kernelscope MCP tools. Do not rewrite it unless asked: find what limits it,
show the evidence and rank the fixes.

1. {CAPS}: the GPU and which measurements work here (counters, Nsight Compute, Nsight Systems).
2. {COMPILE} with {src_arg}{arch_arg} (`output="executable"` when it has a main, else a cubin): diagnostics
   with lines, ptxas resources per kernel (registers, shared memory, spills) and the first findings.
3. {SASS} on the artifact_id: instruction mix, load/store widths, tensor-core use, local memory, with findings.
4. With a GPU and an executable: {RUN} (`mode="program"`, `kernel_times=true`) for per-kernel times, then
   {ANALYZE} the artifact_id: each kernel's bottleneck class and roofline position, then the deep stage's
   ranked findings with their evidence and source lines; {TRACE} when time goes between kernels (launches,
   copies, synchronizations). Without a GPU, say which of these could not run and why (from {CAPS}).

Answer with: per kernel, its class and what the evidence says (metric, value, threshold), the top findings in
the server's order, each with its source line and its fixes with the expected effect, and which one to do
first. Quote numbers from the answers; do not invent any."""
    return body + (f"\n\n{_fenced(text, 'cuda')}" if kind == "source" else "")


def explain_finding(
    rule: Annotated[str, Field(description="A rule id as findings name it, e.g. memory.uncoalesced-global-access "
                                           "(docs/rules.md lists them).")],
    finding: Annotated[str | None, Field(description="Optional: the finding as a tool answered it (diagnosis, "
                                                      "evidence, line, fixes), pasted.")] = None,
) -> str:
    """Explain one of kernelscope's findings: what its rule measures, what the evidence means for this kernel,
    why it costs time, and how to fix and verify it."""
    rid = rule.strip()
    r = REGISTRY.get(rid)
    if r is None:
        near = difflib.get_close_matches(rid, list(REGISTRY), n=3, cutoff=0.4) or \
            [k for k in REGISTRY if rid and rid.split(".")[-1] in k][:3]
        hint = f" Did you mean {', '.join(near)}?" if near else ""
        raise refuse(f"`rule` {rid!r} is not a kernelscope rule id ({len(REGISTRY)} rules, named family.name, "
                     f"e.g. memory.uncoalesced-global-access).{hint}")
    if finding is not None and len(finding) > MAX_FINDING:
        raise refuse(f"`finding` is {len(finding):,} characters; paste at most {MAX_FINDING:,} (the finding itself).")
    thresholds = ", ".join(f"{k} = {v:g}" for k, v in r.thresholds.items()) or "none"
    facts = [f"Rule {r.id} (family {r.family}, reads the {r.scope} evidence): {r.description}",
             f"Thresholds (defaults; overridable per call on {ANALYZE} and {TRACE}): {thresholds}."]
    if r.metrics:
        facts.append("Nsight Compute metrics it reads beyond the light stage: " + ", ".join(r.metrics) + ".")
    if r.supersedes:
        facts.append("When it fires it supersedes: " + ", ".join(r.supersedes) + ".")
    ask = (f"""\
Explain this finding to someone who wrote the kernel:
- what the evidence says (each metric, its value against the threshold) and what it means on this GPU;
- why it costs time, and roughly how much of the kernel's time is at stake;
- each fix it lists, what changes in the code, its expected effect and its risk;
- how to verify a fix: {RUN} for correctness and the speedup with its interval, then {ANALYZE} and
  {COMPARE} on the reports before and after to see the finding resolved.
Quote the numbers as given; do not invent any.

{_fenced(finding.strip(), 'text')}""" if _given(finding) else f"""\
No finding was given: explain in general what this rule detects, which code patterns trigger it, and the
usual fixes; then say how to get a real one ({ANALYZE} on the program or candidate) so the explanation can
use its evidence.""")
    return "\n".join(facts) + "\n\n" + ask


PROMPTS: dict[str, tuple[Callable[..., str], str]] = {
    "optimize-kernel": (optimize_kernel, "Optimize a kernel with kernelscope (the measured loop)"),
    "diagnose-kernel": (diagnose_kernel, "Diagnose a CUDA kernel with kernelscope"),
    "explain-finding": (explain_finding, "Explain a kernelscope finding"),
}


def add_prompts(server: MCPServer) -> None:
    for name, (fn, title) in PROMPTS.items():
        server.add_prompt(Prompt.from_function(fn, name=name, title=title,
                                               description=inspect.cleandoc(fn.__doc__ or "")))


def check_arguments(prompt: Prompt, arguments: dict[str, Any] | None) -> None:
    """Unknown and missing arguments are the client's mistake, said in a sentence (-32602)."""
    given = dict(arguments or {})
    known = {a.name: a for a in prompt.arguments or []}
    unknown = sorted(set(given) - set(known))
    if unknown:
        raise refuse(f"{prompt.name} takes {', '.join(known)}; unknown argument(s): {', '.join(unknown)}.")
    missing = [n for n, a in known.items() if a.required and _given(given.get(n)) is None]
    if missing:
        raise refuse(f"{prompt.name} needs {', '.join(f'`{n}`' for n in missing)}: "
                     + "; ".join(f"{n}: {known[n].description}" for n in missing))
    for n, v in given.items():
        if v is not None and not isinstance(v, str):
            raise refuse(f"{prompt.name}: argument `{n}` must be a string (prompt arguments are strings).")
