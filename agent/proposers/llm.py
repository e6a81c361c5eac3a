"""The LLM proposer as a search expander: a model writes the next candidate from the problem, the current
code, its bottleneck class, the ranked findings and the search memory.

Replies are parsed for one fenced Python block defining ``ModelNew``; a reply without one gets one
follow-up asking for it, and a candidate that does not compile gets one repair turn with the error.
Tokens and tool calls are counted.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from kernelscope.agent.proposers.clients import LLMClient, ToolCaller, ToolSpec
from kernelscope.agent.proposers.prompts import SYSTEM, TOOLS_NOTE, build_prompt, extract_code, rationale
from kernelscope.agent.search.strategies import Candidate
from kernelscope.agent.search.tree import Node, SearchMemory


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
