"""`kernelscope optimize`: tree search over candidates, evaluated only through the MCP tools.

The loop is an ordinary MCP client: it starts `kernelscope serve` over stdio (or connects to a running
server's URL), sends each candidate with its reference to the `run` tool, and turns the answer into an
``Outcome`` for the search (``agent/search``). Nothing here imports ``kernelscope.tools``: the same
loop works against a remote server.

A run is a directory: ``config.json``, every candidate's source (``candidates/``), every evaluation
(``evals/``, keyed by candidate), the tree (``tree.json``), the best candidate (``best.py``) and
``summary.json``. Evaluations found in ``evals/`` are reused, so a run that was interrupted resumes
where it stopped (the search is deterministic given the same outcomes).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import anyio
import anyio.from_thread
import anyio.to_thread
from pydantic import BaseModel, Field

from kernelscope.agent.search import MCTS, Beam, Greedy, KnobExpander, Outcome, RandomSearch, parse_knobs, run_search
from kernelscope.agent.search.knobs import apply_knobs
from kernelscope.agent.search.strategies import SearchState

STRATEGIES = {"mcts": MCTS, "greedy": Greedy, "beam": Beam, "random": RandomSearch}


class OptimizeConfig(BaseModel):
    reference: Path = Field(description="KernelBench-style reference module (Model, get_inputs, get_init_inputs).")
    candidate: Path = Field(description="Knob-annotated candidate template (defines ModelNew).")
    out: Path = Field(description="Run directory (created; reused to resume).")
    budget: int = Field(20, ge=1, le=10_000, description="Evaluations, the starting candidate included.")
    strategy: Literal["mcts", "greedy", "beam", "random"] = "mcts"
    server: str | None = Field(None, description="An http(s) URL of a running server, or a command line to start "
                                                 "one over stdio (default: this Python's `kernelscope serve`).")
    device: Literal["auto", "cuda", "cpu"] = "auto"
    timing_budget_s: float = Field(0.5, gt=0, le=60)
    trials: int = Field(3, ge=1, le=100)
    tolerance: Literal["strict", "default", "kernelbench"] = "default"
    timeout_s: float = Field(300.0, gt=0, le=3600)
    proposer: Literal["auto", "offline", "anthropic", "openai"] = Field(
        "auto", description="auto: anthropic if ANTHROPIC_API_KEY is set, else openai if OPENAI_API_KEY is set, "
                            "else the offline knob proposer.")
    model: str | None = Field(None, description="LLM model name (anthropic default: claude-sonnet-4-5).")


class OptimizeSummary(BaseModel):
    evaluations: int
    reused: int = Field(description="Evaluations taken from the run directory (resume).")
    best_id: int
    best_config: dict[str, str]
    best_speedup: float | None
    start_speedup: float | None
    best_status: str
    history: list[float] = Field(description="Best log2 speedup after each evaluation.")
    proposer: str
    llm_calls: int = 0
    llm_tokens: dict[str, int] = Field(default_factory=dict)
    wall_s: float
    out: str


def outcome_from_run(result: dict[str, Any] | None, error: str | None) -> Outcome:
    """The `run` tool's structured answer (eval mode) as the search's Outcome."""
    if error is not None:
        low = error.lower()
        status = "compile-error" if ("syntax error" in low or "compile" in low or "build" in low) else "invalid"
        return Outcome(status, note=error[:300])  # type: ignore[arg-type]
    ev = (result or {}).get("eval") or {}
    verdict = ev.get("verdict")
    corr = ev.get("correctness") or {}
    if ev.get("status") != "ok" or not corr.get("correct"):
        status = "invalid" if verdict == "invalid" else "crashed" if ev.get("crashed") or ev.get("timed_out") \
            else "incorrect"
        return Outcome(status, note=(ev.get("error") or "")[:300])  # type: ignore[arg-type]
    eager = next((s for s in ev.get("speedups", []) if s.get("baseline") == "eager"), None)
    return Outcome("correct", speedup=eager.get("speedup") if eager else None,
                   note=f"verdict {verdict}")


def _server_params(cfg: OptimizeConfig) -> Any:
    from mcp import StdioServerParameters

    if cfg.server and cfg.server.startswith(("http://", "https://")):
        return cfg.server
    home = cfg.out / "server-home"
    if cfg.server:
        import shlex

        argv = shlex.split(cfg.server)
    else:
        argv = [sys.executable, "-m", "kernelscope", "serve", "--home", str(home)]
    keep = ("PATH", "HOME", "LANG", "PYTHONPATH", "CUDA_HOME", "CUDA_PATH", "CUDA_VISIBLE_DEVICES", "LD_LIBRARY_PATH",
            "KERNELSCOPE_LOG_LEVEL")
    env = {k: v for k, v in os.environ.items() if k in keep}
    return StdioServerParameters(command=argv[0], args=argv[1:], env=env, cwd=str(cfg.out))


def resolve_proposer(cfg: OptimizeConfig) -> str:
    if cfg.proposer != "auto":
        return cfg.proposer
    if os.environ.get("ANTHROPIC_API_KEY"):
        return "anthropic"
    if os.environ.get("OPENAI_API_KEY"):
        return "openai"
    return "offline"


def make_expander(cfg: OptimizeConfig, template: str, reference: str) -> tuple[Any, Any, str]:
    """The proposer (as a search expander), its starting candidate, and the name actually used."""
    name = resolve_proposer(cfg)
    knobs = parse_knobs(template)
    if name == "offline":
        exp = KnobExpander(knobs)
        return exp, exp.start(), name
    from kernelscope.agent.proposers import AnthropicClient, LLMExpander, OpenAIClient
    from kernelscope.agent.search.knobs import default_config

    if name == "anthropic":
        client: Any = AnthropicClient(model=cfg.model or "claude-sonnet-4-5")
    else:
        if not cfg.model:
            raise ValueError("the openai proposer needs --model (the endpoint's model name)")
        client = OpenAIClient(model=cfg.model)
    start = apply_knobs(template, default_config(knobs)) if knobs else template
    exp = LLMExpander(client, reference)
    return exp, exp.start(start), name


def _key_file(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()[:20] + ".json"


async def optimize(cfg: OptimizeConfig, *, on_step: Callable[[SearchState], None] | None = None) -> OptimizeSummary:
    from mcp import Client

    template = cfg.candidate.read_text()
    reference = cfg.reference.read_text()
    expander, start, proposer = make_expander(cfg, template, reference)

    def source_of(payload: dict[str, str]) -> str:
        return payload["source"] if "source" in payload else apply_knobs(template, payload)

    def key_of(payload: dict[str, str]) -> str:
        return expander.key(payload["source"]) if "source" in payload else expander.key(payload)
    for sub in ("candidates", "evals"):
        (cfg.out / sub).mkdir(parents=True, exist_ok=True)
    (cfg.out / "config.json").write_text(cfg.model_dump_json(indent=1))
    t0 = time.monotonic()
    counts = {"reused": 0}

    async with Client(_server_params(cfg)) as client:
        async def run_tool(source: str) -> tuple[Outcome, str, Any]:
            args = {"mode": "eval", "reference": reference, "candidate": source, "device": cfg.device,
                    "trials": cfg.trials, "tolerance": cfg.tolerance, "timing_budget_s": cfg.timing_budget_s,
                    "timeout_s": cfg.timeout_s}
            r = await client.call_tool("run", args)
            text = "\n".join(getattr(b, "text", "") for b in r.content)
            out = outcome_from_run(None if r.is_error else r.structured_content, text if r.is_error else None)
            return out, text, None if r.is_error else r.structured_content

        async def evaluate_async(payload: dict[str, str]) -> Outcome:
            key = key_of(payload)
            cached = cfg.out / "evals" / _key_file(key)
            if cached.is_file():
                counts["reused"] += 1
                rec = json.loads(cached.read_text())
                if rec.get("repaired_source"):
                    payload["source"] = rec["repaired_source"]
                return Outcome(**rec["outcome"])
            source = source_of(payload)
            out, text, result = await run_tool(source)
            repaired = None
            if out.status == "compile-error" and hasattr(expander, "repair"):  # one bounded repair turn
                fixed = await anyio.to_thread.run_sync(expander.repair, source, out.note or text)
                if fixed is not None:
                    out, text, result = await run_tool(fixed)
                    payload["source"] = repaired = fixed
            rec = {"key": key, "payload": payload, "outcome": out.__dict__, "summary": text[:4000],
                   "result": result, "repaired_source": repaired}
            cached.write_text(json.dumps(rec, indent=1, default=str))
            return out

        def evaluate(config: dict[str, str]) -> Outcome:
            return anyio.from_thread.run(evaluate_async, config)

        def search() -> SearchState:
            strategy = STRATEGIES[cfg.strategy]()
            return run_search(strategy, expander, evaluate, start, budget=cfg.budget, on_step=on_step)

        st = await anyio.to_thread.run_sync(search)

    for n in st.nodes:
        (cfg.out / "candidates" / f"{n.id:04d}.py").write_text(source_of(n.payload))
    (cfg.out / "tree.json").write_text(json.dumps(st.root.to_dict(), indent=1))
    best = st.best
    (cfg.out / "best.py").write_text(source_of(best.payload))
    summary = OptimizeSummary(
        evaluations=len(st.nodes), reused=counts["reused"], best_id=best.id,
        best_config={k: v for k, v in best.payload.items() if k != "source"},
        proposer=proposer, llm_calls=getattr(expander, "calls", 0), llm_tokens=dict(getattr(expander, "tokens", {})),
        best_speedup=best.outcome.speedup, start_speedup=st.root.outcome.speedup, best_status=best.outcome.status,
        history=[round(h, 4) for h in st.history], wall_s=round(time.monotonic() - t0, 2), out=str(cfg.out))
    (cfg.out / "summary.json").write_text(summary.model_dump_json(indent=1))
    return summary


def run_cli(args: Any) -> int:
    """`kernelscope optimize`: print one line per evaluation and the summary."""
    cfg = OptimizeConfig(reference=Path(args.reference), candidate=Path(args.candidate), out=Path(args.out),
                         budget=args.budget, strategy=args.strategy, server=args.server, device=args.device,
                         timing_budget_s=args.timing_budget, trials=args.trials, proposer=args.proposer,
                         model=args.model)

    def show(st: SearchState) -> None:
        n = st.nodes[-1]
        sp = f"{n.outcome.speedup:.3f}x" if n.outcome.speedup else n.outcome.status
        best = st.best.outcome.speedup
        print(f"[{len(st.nodes)}/{cfg.budget}] node {n.id} {n.change}: {sp}; best {best or 0:.3f}x", flush=True)

    summary = anyio.run(lambda: optimize(cfg, on_step=show))
    print(f"best: node {summary.best_id} {summary.best_config} at {summary.best_speedup or 0:.3f}x over the reference "
          f"(start {summary.start_speedup or 0:.3f}x), {summary.evaluations} evaluations "
          f"({summary.reused} reused) in {summary.wall_s:.1f} s; proposer {summary.proposer}"
          + (f" ({summary.llm_calls} LLM calls, {summary.llm_tokens} tokens)" if summary.llm_calls else "")
          + f"; run directory {summary.out}")
    return 0
