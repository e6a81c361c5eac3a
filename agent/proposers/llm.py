"""LLM proposers: a model writes the next candidate from the problem, the current code, its bottleneck
class, the ranked findings and the search memory.

Two providers through their official SDKs: Anthropic (``ANTHROPIC_API_KEY``, optional
``ANTHROPIC_BASE_URL``) and any OpenAI-compatible endpoint (``OPENAI_API_KEY``, ``OPENAI_BASE_URL``;
vLLM, ollama, OpenAI). Replies are parsed for one fenced Python block defining ``ModelNew``; a reply
without one gets one follow-up asking for it, and a candidate that does not compile gets one repair
turn with the error. Tokens are counted per call.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from kernelscope.agent.search.strategies import Candidate
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


# List prices in USD per million tokens (input, output), for the run's cost estimate; a model not listed
# gets no estimate unless KERNELSCOPE_LLM_PRICE="input,output" gives its prices.
PRICES_PER_MTOK: dict[str, tuple[float, float]] = {
    "claude-opus-4-1": (15.0, 75.0), "claude-opus-4": (15.0, 75.0), "claude-sonnet-4-5": (3.0, 15.0),
    "claude-sonnet-4": (3.0, 15.0), "claude-haiku-4-5": (1.0, 5.0), "gpt-4o": (2.5, 10.0), "gpt-4.1": (2.0, 8.0),
    "gpt-4o-mini": (0.15, 0.6), "gpt-5": (1.25, 10.0),
}


def llm_cost_usd(model: str | None, tokens: dict[str, int]) -> float | None:
    """Estimated cost of ``tokens`` ({"input": n, "output": n}) on ``model``, or None if its price is unknown."""
    env = os.environ.get("KERNELSCOPE_LLM_PRICE")
    price: tuple[float, float] | None = None
    if env:
        try:
            a, b = (float(x) for x in env.split(","))
            price = (a, b)
        except ValueError:
            raise ValueError(f"KERNELSCOPE_LLM_PRICE={env!r}: expected 'input,output' USD per million tokens") from None
    elif model:
        price = next((v for k, v in sorted(PRICES_PER_MTOK.items(), key=lambda kv: -len(kv[0]))
                      if model.startswith(k)), None)
    if price is None:
        return None
    return round((tokens.get("input", 0) * price[0] + tokens.get("output", 0) * price[1]) / 1e6, 4)


ToolCaller = Callable[[str, dict[str, Any]], str]  # (tool name, arguments) -> the tool's text answer


@dataclass(frozen=True)
class ToolSpec:
    """A server tool offered to the model while it writes (name, description, JSON schema of its input)."""

    name: str
    description: str
    input_schema: dict[str, Any]


TOOL_BUDGET_SPENT = "Tool budget for this proposal spent: write the candidate now from what you have."


class LLMClient(Protocol):
    def complete(self, system: str, user: str, tools: Sequence[ToolSpec] = (),
                 call_tool: ToolCaller | None = None) -> tuple[str, dict[str, int]]:
        """The final reply text and usage {"input": n, "output": n, "tool_calls": n}. With ``tools`` and
        ``call_tool``, the model may call the tools (at most ``max_tool_calls`` per completion) before it
        answers; each call goes to ``call_tool`` and its answer back to the model."""


@dataclass
class AnthropicClient:
    model: str
    max_tokens: int = 8192
    max_tool_calls: int = 6
    api_key: str | None = None
    base_url: str | None = None

    def __post_init__(self) -> None:
        import anthropic

        self._c = anthropic.Anthropic(api_key=self.api_key or os.environ.get("ANTHROPIC_API_KEY"),
                                      base_url=self.base_url or os.environ.get("ANTHROPIC_BASE_URL") or None)

    def complete(self, system: str, user: str, tools: Sequence[ToolSpec] = (),
                 call_tool: ToolCaller | None = None) -> tuple[str, dict[str, int]]:
        messages: list[dict[str, Any]] = [{"role": "user", "content": user}]
        extra = {"tools": [{"name": t.name, "description": t.description, "input_schema": t.input_schema}
                           for t in tools]} if tools and call_tool else {}
        usage = {"input": 0, "output": 0, "tool_calls": 0}
        while True:
            r = self._c.messages.create(model=self.model, max_tokens=self.max_tokens, system=system,
                                        messages=messages, **extra)
            usage["input"] += r.usage.input_tokens
            usage["output"] += r.usage.output_tokens
            uses = [b for b in r.content if getattr(b, "type", "") == "tool_use"]
            if not uses or call_tool is None:
                return "".join(getattr(b, "text", "") for b in r.content), usage
            messages.append({"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in r.content]})
            results = []
            for b in uses:
                spent = usage["tool_calls"] >= self.max_tool_calls
                usage["tool_calls"] += 0 if spent else 1
                results.append({"type": "tool_result", "tool_use_id": b.id, "is_error": spent,
                                "content": TOOL_BUDGET_SPENT if spent else call_tool(b.name, dict(b.input))})
            messages.append({"role": "user", "content": results})


@dataclass
class OpenAIClient:
    model: str
    max_tool_calls: int = 6
    api_key: str | None = None
    base_url: str | None = None

    def __post_init__(self) -> None:
        import openai

        self._c = openai.OpenAI(api_key=self.api_key or os.environ.get("OPENAI_API_KEY") or "none",
                                base_url=self.base_url or os.environ.get("OPENAI_BASE_URL") or None)

    def complete(self, system: str, user: str, tools: Sequence[ToolSpec] = (),
                 call_tool: ToolCaller | None = None) -> tuple[str, dict[str, int]]:
        messages: list[dict[str, Any]] = [{"role": "system", "content": system}, {"role": "user", "content": user}]
        extra = {"tools": [{"type": "function", "function": {"name": t.name, "description": t.description,
                                                             "parameters": t.input_schema}}
                           for t in tools]} if tools and call_tool else {}
        usage = {"input": 0, "output": 0, "tool_calls": 0}
        while True:
            r = self._c.chat.completions.create(model=self.model, messages=messages, **extra)
            usage["input"] += getattr(r.usage, "prompt_tokens", 0) or 0
            usage["output"] += getattr(r.usage, "completion_tokens", 0) or 0
            msg = r.choices[0].message
            if not msg.tool_calls or call_tool is None:
                return msg.content or "", usage
            messages.append(msg.model_dump(exclude_none=True))
            for tc in msg.tool_calls:
                spent = usage["tool_calls"] >= self.max_tool_calls
                usage["tool_calls"] += 0 if spent else 1
                try:
                    args = json.loads(tc.function.arguments or "{}")
                except ValueError:
                    answer = f"The arguments were not JSON: {tc.function.arguments[:200]!r}"
                else:
                    answer = TOOL_BUDGET_SPENT if spent else call_tool(tc.function.name, args)
                messages.append({"role": "tool", "tool_call_id": tc.id, "content": answer})


@dataclass
class LLMExpander:
    """Children of a node are the model's rewrites of the node's code (up to ``max_children`` each)."""

    client: LLMClient
    reference: str
    max_children: int = 6
    tools: Sequence[ToolSpec] = ()
    call_tool: ToolCaller | None = None
    calls: int = 0
    tool_calls: int = 0
    tokens: dict[str, int] = field(default_factory=lambda: {"input": 0, "output": 0})
    _tried: dict[int, int] = field(default_factory=dict)

    @staticmethod
    def key(source: str) -> str:
        return "src:" + hashlib.sha256(source.encode()).hexdigest()[:24]

    def start(self, source: str) -> Candidate:
        return Candidate(self.key(source), {"source": source}, "start")

    def _ask(self, user: str) -> str:
        system = SYSTEM + (TOOLS_NOTE if self.tools and self.call_tool else "")
        text, usage = self.client.complete(system, user, self.tools, self.call_tool)
        self.calls += 1
        self.tool_calls += int(usage.get("tool_calls", 0))
        for k in ("input", "output"):
            self.tokens[k] += int(usage.get(k, 0))
        return text

    def expand(self, node: Node, memory: SearchMemory, seen: set[str]) -> Candidate | None:
        for _ in range(self.max_children - self._tried.get(node.id, 0)):
            self._tried[node.id] = self._tried.get(node.id, 0) + 1
            reply = self._ask(build_prompt(self.reference, node, memory, node.payload["source"]))
            code = extract_code(reply)
            if code is None:  # one follow-up for the missing block
                reply = self._ask("Your reply had no ```python block defining ModelNew. Reply with the whole module "
                                  "in one ```python block.\n\n" + reply[:4000])
                code = extract_code(reply)
            if code is not None and self.key(code) not in seen:
                return Candidate(self.key(code), {"source": code}, "llm: " + rationale(reply))
        return None

    def repair(self, source: str, error: str) -> str | None:
        """One repair turn for a candidate that did not build."""
        reply = self._ask(f"This candidate failed to build or import:\n```\n{error[:3000]}\n```\n\n"
                          f"```python\n{source}\n```\nFix it. Reply with the whole module in one ```python block.")
        return extract_code(reply)

    def sample(self, rng: Any, seen: set[str]) -> Candidate | None:
        return None  # random search has no meaning for a generative proposer
