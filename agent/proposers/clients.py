"""The LLM clients, through the providers' official SDKs (optional dependencies, imported when a client is
made): Anthropic's Messages API (``ANTHROPIC_API_KEY``, optional ``ANTHROPIC_BASE_URL``) and any
OpenAI-compatible chat-completions endpoint (``OPENAI_API_KEY``, ``OPENAI_BASE_URL``; vLLM, ollama,
OpenAI). Either may let the model call server tools before it answers; usage is counted per call. The
SDKs' own retries are off by default (``max_retries=0``): the LLM proposer retries with its own backoff,
which tests can run without waiting."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

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
    max_retries: int = 0
    timeout_s: float = 600.0

    def __post_init__(self) -> None:
        import anthropic

        self._c = anthropic.Anthropic(api_key=self.api_key or os.environ.get("ANTHROPIC_API_KEY"),
                                      base_url=self.base_url or os.environ.get("ANTHROPIC_BASE_URL") or None,
                                      max_retries=self.max_retries, timeout=self.timeout_s)

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
    max_retries: int = 0
    timeout_s: float = 600.0

    def __post_init__(self) -> None:
        import openai

        self._c = openai.OpenAI(api_key=self.api_key or os.environ.get("OPENAI_API_KEY") or "none",
                                base_url=self.base_url or os.environ.get("OPENAI_BASE_URL") or None,
                                max_retries=self.max_retries, timeout=self.timeout_s)

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


