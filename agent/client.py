"""The agent's MCP client: it starts `kernelscope serve` over stdio (or connects to a running server's URL)
as an MCP peer and turns the tools' answers into what the loop needs: an ``Evaluation`` per `run`
(its ``Outcome`` for the search), an `analyze` profile with its text summary, what the server's
`capabilities` allow, the GPU's peaks.

Nothing here imports the server's code: the same client works against a remote server.
"""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import anyio.from_thread
from mcp import Client, StdioServerParameters

from kernelscope.agent.answers import outcome_from_run, tool_text, trim_analysis
from kernelscope.agent.config import OptimizeConfig
from kernelscope.agent.proposers import ToolSpec
from kernelscope.agent.search import Outcome

CUTLASS_TOOLS = ("search_cutlass", "read_cutlass_file")
# what the server started over stdio inherits of this environment
SERVER_ENV = ("PATH", "HOME", "LANG", "PYTHONPATH", "CUDA_HOME", "CUDA_PATH", "CUDA_VISIBLE_DEVICES",
              "LD_LIBRARY_PATH", "KERNELSCOPE_LOG_LEVEL",
              # the sandbox (docs/isolation.md): the bubblewrap binary, the jobs' cgroup and memory caps
              "KERNELSCOPE_BWRAP", "KERNELSCOPE_JOB_CGROUP", "KERNELSCOPE_JOB_MEMORY_MB",
              "KERNELSCOPE_COMPILER_MEMORY_MB")


def _server_params(cfg: OptimizeConfig) -> str | StdioServerParameters:
    """The server of a run: its URL, or the command that starts it over stdio (default: this Python's
    `kernelscope serve`, its home in the run directory)."""
    if cfg.server and cfg.server.startswith(("http://", "https://")):
        return cfg.server
    if cfg.server:
        argv = shlex.split(cfg.server)
    else:
        # absolute: the server starts in the run directory, where a relative home would nest
        argv = [sys.executable, "-m", "kernelscope", "serve", "--home", str((cfg.out / "server-home").resolve())]
    env = {k: v for k, v in os.environ.items() if k in SERVER_ENV}
    return StdioServerParameters(command=argv[0], args=argv[1:], env=env, cwd=str(cfg.out))


def resolve_parallel(caps: dict[str, Any], cfg: OptimizeConfig) -> int:
    """Evaluations to keep in flight: as asked, else one per GPU worker of the server's pool (its
    `capabilities`), and one on the CPU (timings of concurrent CPU jobs disturb each other)."""
    if cfg.parallel is not None:
        return cfg.parallel
    if cfg.device == "cpu":
        return 1
    return max(1, int((caps.get("pool") or {}).get("gpu_workers") or 0))


def analysis_available(caps: dict[str, Any], cfg: OptimizeConfig) -> tuple[bool, str | None]:
    """Whether to profile, and if not, why not (``caps``: the server's `capabilities` answer)."""
    if cfg.analyze == "never":
        return False, "profiling turned off (--analyze never)"
    if cfg.feedback == "none":
        if cfg.analyze == "always":
            raise ValueError("--analyze always contradicts --feedback none (the arm without profiles)")
        return False, "no profiles: the feedback arm is none (--feedback none)"
    if cfg.device == "cpu":
        if cfg.analyze == "always":
            raise ValueError("--analyze always needs a GPU: the candidates run on the CPU (--device cpu)")
        return False, "candidates run on the CPU: there are no kernels to profile"
    if (caps.get("can") or {}).get("ncu_profile"):
        return True, None
    why = (caps.get("reasons") or {}).get("ncu_profile") or "the server cannot profile with Nsight Compute"
    if cfg.analyze == "always":
        raise ValueError(f"--analyze always, but the server cannot profile: {why}")
    return False, f"no profiles: {why}"


@dataclass
class Evaluation:
    """One `run` answer: the outcome for the search, the answer's text and structured content (None for
    an error answer), and the pool worker that ran it."""

    outcome: Outcome
    text: str
    result: dict[str, Any] | None
    worker: str | None


@dataclass
class Profile:
    """One `analyze` answer: the part the run directory keeps and its text summary (what a host reads), or
    why there is none."""

    result: dict[str, Any] | None
    error: str | None = None
    summary: str = ""


class ServerPeer:
    """The server of a run, over MCP: the `run`, `analyze` and `capabilities` tools with the run's settings."""

    def __init__(self, client: Client, cfg: OptimizeConfig, reference: str) -> None:
        self.client, self.cfg, self.reference = client, cfg, reference
        self.energy = cfg.objective == "energy"
        self.cache: Any = None  # the run directory (``RunStore``): the model's CUTLASS lookups are kept there

    @classmethod
    @asynccontextmanager
    async def connect(cls, cfg: OptimizeConfig, reference: str) -> AsyncIterator[ServerPeer]:
        async with Client(_server_params(cfg)) as client:
            yield cls(client, cfg, reference)

    async def capabilities(self) -> dict[str, Any]:
        return (await self.client.call_tool("capabilities", {})).structured_content or {}

    async def evaluate(self, source: str, *, timing_budget_s: float | None = None,
                       trials: int | None = None) -> Evaluation:
        """``source`` through the `run` tool (eval mode) against the reference (the confirmation passes a
        longer timing budget)."""
        cfg = self.cfg
        args = {"mode": "eval", "reference": self.reference, "candidate": source, "device": cfg.device,
                "trials": trials or cfg.trials, "tolerance": cfg.tolerance,
                "timing_budget_s": timing_budget_s or cfg.timing_budget_s,
                "timeout_s": cfg.timeout_s, "measure_energy": self.energy}
        r = await self.client.call_tool("run", args)
        text = tool_text(r)
        result = None if r.is_error else r.structured_content
        worker = ((result or {}).get("eval") or {}).get("worker")
        out = outcome_from_run(result, text if r.is_error else None, energy=self.energy)
        return Evaluation(out, text, result, worker)

    async def analyze(self, source: str) -> Profile:
        """A two-stage `analyze` profile of ``source`` against the reference."""
        r = await self.client.call_tool("analyze", {"reference": self.reference, "candidate": source,
                                                    "timeout_s": self.cfg.timeout_s})
        if r.is_error or not r.structured_content:
            return Profile(None, tool_text(r)[:500])
        return Profile(trim_analysis(r.structured_content), summary=tool_text(r))

    async def peaks(self, gpu: str) -> dict[str, Any] | None:
        """The datasheet peaks the server's `bottleneck_classify` holds for ``gpu`` (None: no table for it)."""
        r = await self.client.call_tool("bottleneck_classify", {"gpu": gpu, "flops": 0.0})
        return None if r.is_error else (r.structured_content or {}).get("peaks")

    async def offer_cutlass_tools(self, expander: Any) -> None:
        """Let the LLM proposer look up CUTLASS/CuTe sources through the server while it writes: the two
        tools' own MCP schemas, each call forwarded to the server from the search's thread."""
        listed = await self.client.list_tools()
        expander.tools = [ToolSpec(t.name, t.description or "", t.input_schema) for t in listed.tools
                          if t.name in CUTLASS_TOOLS]
        expander.call_tool = self.call_from_thread

    def call_from_thread(self, name: str, args: dict[str, Any]) -> str:
        """A CUTLASS tool's text answer, called from a worker thread of the search."""
        if name not in CUTLASS_TOOLS:
            return f"Unknown tool {name!r}: only {', '.join(CUTLASS_TOOLS)} are offered here."
        kept = self.cache.cached_tool(name, args) if self.cache is not None else None
        if kept is not None:
            return str(kept["text"])
        r = anyio.from_thread.run(self.client.call_tool, name, args)
        text = tool_text(r)
        text = ("Error: " + text) if r.is_error else text
        if self.cache is not None:
            self.cache.save_tool(name, args, {"text": text})
        return text
