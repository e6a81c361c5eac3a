"""The LLM proposer as a search expander: a model writes the next candidate from the problem, the current
code, its measured result (or what went wrong), its bottleneck class, the ranked findings and the search
memory.

Replies are parsed for one fenced Python block defining ``ModelNew``; a reply without one gets one
follow-up asking for it (with the reference and the current code again), and a failed candidate (not
built, crashed, incorrect or invalid) gets one repair turn with the reference and what went wrong.

Model errors (rate limits, timeouts, 5xx, unparsable replies) are retried with exponential backoff, a
``Retry-After`` honoured, ``retries`` times at most; then that proposal fails and the search goes on.
Every reply is kept in the run directory's reply cache (when given), keyed by the prompt and how many
times it was asked before, so a resumed run asks the model nothing it already answered. Tokens and tool
calls are counted (fresh calls only).
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from kernelscope.agent.proposers.clients import LLMClient, ToolCaller, ToolSpec
from kernelscope.agent.proposers.prompts import (
    SYSTEM,
    TOOLS_NOTE,
    build_prompt,
    extract_code,
    follow_up_prompt,
    rationale,
    repair_prompt,
)
from kernelscope.agent.search.strategies import Candidate
from kernelscope.agent.search.tree import Node, SearchMemory

RETRY_STATUS = {408, 409, 429}  # and every 5xx
FATAL_STATUS = {401, 403}  # a wrong key or model access: retrying cannot help, the run stops
RETRY_NAMES = ("RateLimit", "Timeout", "APIConnectionError", "InternalServer", "ResponseValidation",
               "Overloaded", "ServiceUnavailable")


class ReplyCache(Protocol):
    """Where replies are kept between invocations (the run directory's ``proposals/``)."""

    def get_reply(self, key: str) -> dict[str, Any] | None: ...

    def put_reply(self, key: str, record: dict[str, Any]) -> None: ...


class ProposalFailed(Exception):
    """The model did not answer after the retries: this proposal fails, the search goes on."""


def _status_of(e: BaseException) -> int | None:
    code = getattr(e, "status_code", None)
    return code if isinstance(code, int) else None


def retryable(e: BaseException) -> bool:
    """Whether a model error is worth another try: rate limits, timeouts, 5xx, connection errors and
    replies that could not be parsed."""
    code = _status_of(e)
    if code is not None:
        return code in RETRY_STATUS or code >= 500
    return isinstance(e, (ValueError, TimeoutError, ConnectionError)) or \
        any(n in type(e).__name__ for n in RETRY_NAMES)


def retry_after(e: BaseException) -> float | None:
    """The seconds a ``Retry-After`` header asks for (a number of seconds), if the error carries one."""
    headers = getattr(getattr(e, "response", None), "headers", None)
    value = headers.get("retry-after") if headers is not None else None
    try:
        return max(0.0, float(value)) if value is not None else None
    except (TypeError, ValueError):
        return None


@dataclass
class LLMExpander:
    """Children of a node are the model's rewrites of the node's code (up to ``max_children`` each)."""

    client: LLMClient
    reference: str
    max_children: int = 6
    tools: Sequence[ToolSpec] = ()
    call_tool: ToolCaller | None = None
    calls: int = 0  # fresh model calls (completions) made
    cached_calls: int = 0  # replies taken from the reply cache instead
    failed_calls: int = 0  # proposals and repairs that failed after the retries
    retried: int = 0  # model errors retried
    tool_calls: int = 0
    tokens: dict[str, int] = field(default_factory=lambda: {"input": 0, "output": 0})
    retries: int = 4
    backoff_s: float = 2.0
    max_backoff_s: float = 60.0
    sleep: Callable[[float], None] = time.sleep  # injectable: tests do not wait
    cache: ReplyCache | None = None
    known: set[str] = field(default_factory=set)  # keys evaluated outside the search's own proposals (repairs)
    errors: list[str] = field(default_factory=list)  # the latest model errors, for the summary
    _tried: dict[int, int] = field(default_factory=dict)
    _asked: dict[str, int] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @staticmethod
    def key(source: str) -> str:
        return "src:" + hashlib.sha256(source.encode()).hexdigest()[:24]

    def start(self, source: str) -> Candidate:
        return Candidate(self.key(source), {"source": source}, "start")

    def _cache_key(self, system: str, user: str) -> str:
        h = hashlib.sha256("\0".join((system, user, *(t.name for t in self.tools))).encode()).hexdigest()[:32]
        with self._lock:
            n = self._asked.get(h, 0)
            self._asked[h] = n + 1
        return f"{h}-{n}"

    def _complete(self, system: str, user: str) -> tuple[str, dict[str, int]]:
        """One completion, retried with backoff on transient errors; ProposalFailed when they persist."""
        for attempt in range(self.retries + 1):
            try:
                return self.client.complete(system, user, self.tools, self.call_tool)
            except Exception as e:
                if _status_of(e) in FATAL_STATUS or not retryable(e):
                    if _status_of(e) in FATAL_STATUS:
                        raise
                    self._failed(e)
                    raise ProposalFailed(str(e)) from e
                if attempt == self.retries:
                    self._failed(e)
                    raise ProposalFailed(f"{type(e).__name__} after {attempt + 1} tries: {e}") from e
                with self._lock:
                    self.retried += 1
                wait = retry_after(e)
                self.sleep(min(self.max_backoff_s, wait if wait is not None else self.backoff_s * 2 ** attempt))
        raise AssertionError("unreachable")

    def _failed(self, e: BaseException) -> None:
        with self._lock:
            self.failed_calls += 1
            self.errors = [*self.errors, f"{type(e).__name__}: {str(e)[:200]}"][-5:]

    def _ask(self, user: str) -> str:
        system = SYSTEM + (TOOLS_NOTE if self.tools and self.call_tool else "")
        key = self._cache_key(system, user)
        hit = self.cache.get_reply(key) if self.cache is not None else None
        if hit is not None:
            with self._lock:
                self.cached_calls += 1
            return str(hit["reply"])
        text, usage = self._complete(system, user)
        with self._lock:
            self.calls += 1
            self.tool_calls += int(usage.get("tool_calls", 0))
            for k in ("input", "output"):
                self.tokens[k] += int(usage.get(k, 0))
        if self.cache is not None:
            self.cache.put_reply(key, {"prompt": user, "reply": text, "usage": usage})
        return text

    def expand(self, node: Node, memory: SearchMemory, seen: set[str]) -> Candidate | None:
        source = node.payload["source"]
        for _ in range(self.max_children - self._tried.get(node.id, 0)):
            self._tried[node.id] = self._tried.get(node.id, 0) + 1
            try:
                reply = self._ask(build_prompt(self.reference, node, memory, source))
                code = extract_code(reply)
                if code is None:  # one follow-up for the missing block, with the reference and the code again
                    reply = self._ask(follow_up_prompt(self.reference, source, reply))
                    code = extract_code(reply)
            except ProposalFailed:
                continue  # this proposal failed; the next try (or the next node) goes on
            if code is not None and self.key(code) not in seen and self.key(code) not in self.known:
                return Candidate(self.key(code), {"source": code}, "llm: " + rationale(reply))
        return None

    def repair(self, source: str, error: str, status: str = "compile-error") -> str | None:
        """One repair turn for a failed candidate: its source, or None (no code, or the model failed)."""
        fixed = self.repair_reply(source, error, status)
        return fixed[0] if fixed else None

    def repair_reply(self, source: str, feedback: str, status: str) -> tuple[str, str] | None:
        """One repair turn for a failed candidate: (its source, the model's rationale), or None."""
        try:
            reply = self._ask(repair_prompt(self.reference, source, status, feedback))
        except ProposalFailed:
            return None
        code = extract_code(reply)
        return (code, rationale(reply)) if code is not None else None

    def sample(self, rng: Any, seen: set[str]) -> Candidate | None:
        return None  # random search has no meaning for a generative proposer
