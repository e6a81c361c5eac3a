"""`kernelscope optimize`: tree search over candidates, evaluated and profiled only through the MCP tools.

The loop is an ordinary MCP client: it starts `kernelscope serve` over stdio (or connects to a running
server's URL), sends each candidate with its reference to the `run` tool, and turns the answer into an
``Outcome`` for the search (``agent/search``). Where the server can profile (its `capabilities` say
Nsight Compute works), the two-stage `analyze` tool runs on the reference first and then on the start
and on every candidate that sets a new best: its bottleneck class and ranked findings go into the
outcome, where they choose the offline proposer's next knob moves, widen MCTS under severe findings and
fill the LLM proposers' prompts. Nothing here imports ``kernelscope.tools``: the same loop works
against a remote server.

A run is a directory: ``config.json``, every candidate's source (``candidates/``), every evaluation
(``evals/``) and profile (``analysis/``), keyed by candidate, the tree (``tree.json``), the best
candidate (``best.py``), ``summary.json`` and ``report.html``. Evaluations and profiles found in the
directory are reused, so a run that was interrupted resumes where it stopped (the search is
deterministic given the same outcomes).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal, Protocol

import anyio
import anyio.from_thread
import anyio.lowlevel
import anyio.to_thread
from pydantic import BaseModel, Field

from kernelscope.agent.search import MCTS, Beam, Greedy, KnobExpander, Outcome, RandomSearch, parse_knobs, run_search
from kernelscope.agent.search.knobs import apply_knobs
from kernelscope.agent.search.strategies import Candidate, SearchState

STRATEGIES = {"mcts": MCTS, "greedy": Greedy, "beam": Beam, "random": RandomSearch}
SEVERITY_RANK = {"critical": 0, "high": 1, "warning": 2, "info": 3}
_BUILD_ERROR = re.compile(r"CompileException|NVRTC_ERROR|ptxas|nvcc|compil|build|SyntaxError|ImportError|"
                          r"ModuleNotFoundError|IndentationError", re.I)


class OptimizeConfig(BaseModel):
    reference: Path = Field(description="KernelBench-style reference module (Model, get_inputs, get_init_inputs).")
    candidate: Path | None = Field(None, description="Starting candidate (defines ModelNew; knob-annotated for the "
                                                     "offline proposer). None: the LLM proposers start from the "
                                                     "reference itself.")
    out: Path = Field(description="Run directory (created; reused to resume).")
    budget: int = Field(20, ge=1, le=10_000, description="Evaluations, the starting candidate included.")
    time_s: float | None = Field(None, gt=0, le=7 * 86400, description="Wall-clock budget of this invocation; the "
                                                                        "search stops after the evaluation under way.")
    strategy: Literal["mcts", "greedy", "beam", "random"] = "mcts"
    parallel: int | None = Field(None, ge=1, le=256, description="Evaluations in flight at once (several nodes "
                                                                   "expanded per round, with virtual loss). None: "
                                                                   "one per GPU worker of the server's pool.")
    seed: int = Field(0, ge=0, description="Seeds MCTS's initial design and random search.")
    uct_c: float = Field(0.7, ge=0, le=10, description="MCTS exploration constant (UCT), on log2-speedup rewards.")
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
    analyze: Literal["auto", "always", "never"] = Field(
        "auto", description="Profile with the `analyze` tool: auto when the server says Nsight Compute works "
                            "there and the device is not the CPU; always (a failure to profile is then an error).")
    analyze_max: int = Field(8, ge=0, le=1000, description="Profiles at most per invocation (the reference, the "
                                                           "start, then each new best).")
    objective: Literal["speed", "energy"] = Field(
        "speed", description="energy: measure NVML energy per call and add energy_weight x log2(energy gain) to "
                             "the reward (speed first, energy second).")
    energy_weight: float = Field(0.5, ge=0, le=10)
    cutlass_tools: Literal["auto", "never"] = Field(
        "auto", description="auto: LLM proposers may call search_cutlass/read_cutlass_file when the server has "
                            "the CUTLASS headers.")
    report: bool = Field(True, description="Write report.html at the end.")


class OptimizeSummary(BaseModel):
    evaluations: int
    reused: int = Field(description="Evaluations taken from the run directory (resume).")
    best_id: int
    best_config: dict[str, str]
    best_speedup: float | None
    start_speedup: float | None
    best_status: str
    history: list[float] = Field(description="Best log2 speedup after each evaluation.")
    stopped: str = Field("budget", description="Why the search ended: budget, time or exhausted.")
    parallel: int = Field(1, description="Evaluations that were kept in flight at once.")
    workers: dict[str, int] = Field(default_factory=dict, description="Fresh evaluations per pool worker (gpu0 ...).")
    proposer: str
    llm_calls: int = 0
    llm_tokens: dict[str, int] = Field(default_factory=dict)
    llm_cost_usd: float | None = Field(None, description="Estimated from the model's list price, where known.")
    llm_tool_calls: int = Field(0, description="Server tool calls the LLM made while writing (CUTLASS lookups).")
    analyses: int = Field(0, description="`analyze` profiles made (reused ones included).")
    analysis_note: str | None = Field(None, description="Why profiles were not made, when they were not.")
    reference_bottleneck: str | None = None
    best_bottleneck: str | None = None
    wall_s: float
    out: str
    report: str | None = None


class Observer(Protocol):
    """What the live view (or a test) sees of a run."""

    def activity(self, text: str) -> None: ...

    def step(self, st: SearchState) -> None: ...


# ------------------------------------------------------------------------------------------- problems
def resolve_problem(problem: Path, candidate: Path | None = None) -> tuple[Path, Path | None]:
    """A problem is a reference module file, or a directory holding ``reference.py`` and a starting
    candidate (``candidate.py``, the knob-annotated one, else ``naive.py``)."""
    if problem.is_dir():
        ref = problem / "reference.py"
        if not ref.is_file():
            raise ValueError(f"{problem} is a directory without reference.py (Model, get_inputs, get_init_inputs)")
        if candidate is None:
            candidate = next((problem / n for n in ("candidate.py", "naive.py") if (problem / n).is_file()), None)
        return ref, candidate
    if not problem.is_file():
        raise ValueError(f"{problem} is not a file or a problem directory")
    return problem, candidate


def reference_as_candidate(reference: str) -> str:
    """The reference module as a candidate (``ModelNew`` is ``Model``): where an LLM starts without one."""
    return reference.rstrip() + "\n\n\nclass ModelNew(Model):  # the reference itself: the baseline\n    pass\n"


# ------------------------------------------------------------------------------------------- answers
def outcome_from_run(result: dict[str, Any] | None, error: str | None, *, energy: bool = False) -> Outcome:
    """The `run` tool's structured answer (eval mode) as the search's Outcome."""
    if error is not None:
        low = error.lower()
        status = "compile-error" if ("syntax error" in low or "compile" in low or "build" in low) else "invalid"
        return Outcome(status, note=error[:300])  # type: ignore[arg-type]
    ev = (result or {}).get("eval") or {}
    verdict = ev.get("verdict")
    corr = ev.get("correctness") or {}
    if ev.get("status") != "ok" or not corr.get("correct"):
        err = ev.get("error") or ""
        if ev.get("status") == "invalid" or verdict == "invalid":
            status = "invalid"
        elif ev.get("status") in ("crashed", "timeout"):
            status = "crashed"
        elif ev.get("status") == "error":  # it did not build or import (repairable), or raised while running
            status = "compile-error" if _BUILD_ERROR.search(err) else "crashed"
        else:
            status = "incorrect"
        return Outcome(status, note=err[-600:])  # type: ignore[arg-type]
    eager = next((s for s in ev.get("speedups", []) if s.get("baseline") == "eager"), None)
    ratio = None
    if energy:
        e = ev.get("energy") or {}
        c, r = (e.get("candidate") or {}).get("joules_per_call"), (e.get("reference") or {}).get("joules_per_call")
        ratio = r / c if c and r else None
    return Outcome("correct", speedup=eager.get("speedup") if eager else None, energy_ratio=ratio,
                   note=f"verdict {verdict}")


NEW_BEST_GAIN = 1.02  # a candidate is profiled when it beats the best speedup so far by more than this factor


def worth_profiling(out: Outcome, best_speedup: float, start: bool) -> bool:
    """Whether an evaluation gets an `analyze` profile (its findings then steer the expansions below it): a
    correct one that is the start, or that beats the best speedup so far by more than 2%."""
    return out.ok and (start or (out.speedup or 0.0) > best_speedup * NEW_BEST_GAIN)


def top_kernel(result: dict[str, Any]) -> dict[str, Any] | None:
    """The costliest kernel of an `analyze` answer (all its profiled launches), or None."""
    kernels = result.get("kernels") or []
    if not kernels:
        return None
    return max(kernels, key=lambda k: k.get("total_duration_ns") or k.get("duration_ns") or 0.0)


def all_findings(result: dict[str, Any]) -> list[dict[str, Any]]:
    """Every finding of an `analyze` answer: each kernel's, then the system (trace) stage's."""
    return [f for k in result.get("kernels") or [] for f in k.get("findings") or []] + \
        list(result.get("system_findings") or [])


def problem_name(reference: Path) -> str:
    """A problem directory's name for its reference.py, else the reference module's own name."""
    return reference.parent.name if reference.name == "reference.py" else reference.stem


def tool_text(r: Any) -> str:
    """The text blocks of an MCP tool result, joined."""
    return "\n".join(getattr(b, "text", "") for b in r.content)


def findings_of(result: dict[str, Any]) -> tuple[str | None, list[str], bool, list[str]]:
    """An `analyze` answer as (bottleneck class of the costliest kernel, rule ids most severe first, whether
    a high/critical finding is open, one sentence per finding with its first fix)."""
    if result.get("status") != "ok":
        return None, [], False, []
    top = top_kernel(result)
    found = all_findings(result)
    found.sort(key=lambda f: (SEVERITY_RANK.get(f.get("severity", ""), 4), -(f.get("impact") or 0.0)))
    rules = list(dict.fromkeys(f["rule"] for f in found))
    severe = any(f.get("severity") in ("critical", "high") for f in found)
    details = []
    for f in found[:8]:
        fix = (f.get("fixes") or [{}])[0]
        where = f" at {f['line']}" if f.get("line") else ""
        details.append(f"{f['rule']} ({f.get('severity')}{', ' + f['kernel'] if f.get('kernel') else ''}{where}): "
                       f"{f.get('diagnosis', '')}" + (f" Fix: {fix['action']} ({fix.get('expected_effect', '')})"
                                                       if fix.get("action") else ""))
    return (top["bottleneck"]["cls"] if top else None), rules, severe, details


def trim_analysis(result: dict[str, Any]) -> dict[str, Any]:
    """What the run directory keeps of an `analyze` answer (the full reports stay server artifacts)."""
    keep = ("status", "explanation", "fixes", "stages", "kernels_total", "launches_profiled", "report_ids",
            "trace_id", "wall_s", "system", "system_findings", "notes")
    out = {k: result.get(k) for k in keep if k in result}
    out["kernels"] = [{k: v for k, v in kern.items() if k not in ("hot_lines",)}
                      for kern in (result.get("kernels") or [])[:6]]
    return out


# ------------------------------------------------------------------------------------------- plumbing
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


def make_expander(cfg: OptimizeConfig, template: str | None, reference: str) -> tuple[Any, Any, str]:
    """The proposer (as a search expander), its starting candidate, and the name actually used."""
    name = resolve_proposer(cfg)
    knobs = parse_knobs(template) if template is not None else []
    if name == "offline":
        if template is None:
            raise ValueError("the offline proposer tunes the knobs a candidate declares: give a knob-annotated "
                             "candidate (or set an LLM key / --proposer to let a model write one)")
        if not knobs:
            raise ValueError(f"{cfg.candidate} declares no knobs (lines like `// @knob BLOCK 64 128 256`): the "
                             "offline proposer has nothing to tune; annotate it or use an LLM proposer")
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
    exp = LLMExpander(client, reference)
    if template is None:
        cand = exp.start(reference_as_candidate(reference))
        return exp, Candidate(cand.key, {**cand.payload, "reference_start": "1"}, "start: the reference"), name
    start = apply_knobs(template, default_config(knobs)) if knobs else template
    return exp, exp.start(start), name


def _key_file(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()[:20] + ".json"


def resolve_parallel(caps: dict[str, Any], cfg: OptimizeConfig) -> int:
    """Evaluations to keep in flight: as asked, else one per GPU worker of the server's pool (its
    `capabilities`), and one on the CPU (timings of concurrent CPU jobs disturb each other)."""
    if cfg.parallel is not None:
        return cfg.parallel
    if cfg.device == "cpu":
        return 1
    return max(1, int((caps.get("pool") or {}).get("gpu_workers") or 0))


def _analysis_available(caps: dict[str, Any], cfg: OptimizeConfig) -> tuple[bool, str | None]:
    """Whether to profile, and if not, why not (``caps``: the server's `capabilities` answer)."""
    if cfg.analyze == "never":
        return False, "profiling turned off (--analyze never)"
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


CUTLASS_TOOLS = ("search_cutlass", "read_cutlass_file")


async def _offer_cutlass_tools(client: Any, expander: Any) -> None:
    """Let the LLM proposer look up CUTLASS/CuTe sources through the server while it writes: the two
    tools' own MCP schemas, each call forwarded to the server from the search's thread."""
    from kernelscope.agent.proposers import ToolSpec

    listed = await client.list_tools()
    expander.tools = [ToolSpec(t.name, t.description or "", t.input_schema) for t in listed.tools
                      if t.name in CUTLASS_TOOLS]

    def call(name: str, args: dict[str, Any]) -> str:
        if name not in CUTLASS_TOOLS:
            return f"Unknown tool {name!r}: only {', '.join(CUTLASS_TOOLS)} are offered here."
        r = anyio.from_thread.run(client.call_tool, name, args)
        text = tool_text(r)
        return ("Error: " + text) if r.is_error else text

    expander.call_tool = call


# ------------------------------------------------------------------------------------------- the loop
async def optimize(cfg: OptimizeConfig, *, on_step: Callable[[SearchState], None] | None = None,
                   observer: Observer | None = None) -> OptimizeSummary:
    from mcp import Client

    reference = cfg.reference.read_text()
    template = cfg.candidate.read_text() if cfg.candidate is not None else None
    expander, start, proposer = make_expander(cfg, template, reference)
    energy = cfg.objective == "energy"

    def source_of(payload: dict[str, str]) -> str:
        return payload["source"] if "source" in payload else apply_knobs(template or "", payload)

    def key_of(payload: dict[str, str]) -> str:
        return expander.key(payload["source"]) if "source" in payload else expander.key(payload)

    def tell(text: str) -> None:
        if observer is not None:
            observer.activity(text)

    for sub in ("candidates", "evals", "analysis"):
        (cfg.out / sub).mkdir(parents=True, exist_ok=True)
    (cfg.out / "config.json").write_text(cfg.model_dump_json(indent=1))
    t0 = time.monotonic()
    deadline = t0 + cfg.time_s if cfg.time_s else None
    counts = {"reused": 0, "analyses": 0, "fresh_analyses": 0}
    best = {"speedup": 0.0}
    workers: dict[str, int] = {}
    parallel = 1
    ref_key = "reference:" + hashlib.sha256(reference.encode()).hexdigest()

    async with Client(_server_params(cfg)) as client:
        caps = (await client.call_tool("capabilities", {})).structured_content or {}
        analyzing, analysis_note = _analysis_available(caps, cfg)
        parallel = resolve_parallel(caps, cfg)
        token = anyio.lowlevel.current_token()  # the search's evaluation threads call back into this loop
        if proposer != "offline" and cfg.cutlass_tools == "auto" and (caps.get("can") or {}).get("cutlass"):
            await _offer_cutlass_tools(client, expander)

        async def analyze(key: str, source: str, label: str) -> dict[str, Any] | None:
            """A cached or fresh `analyze` profile of ``source`` (None when it could not be made)."""
            nonlocal analyzing, analysis_note
            path = cfg.out / "analysis" / _key_file(key)
            if path.is_file():
                counts["analyses"] += 1
                return json.loads(path.read_text())["result"]
            if not analyzing or counts["fresh_analyses"] >= cfg.analyze_max:
                return None
            tell(f"profiling {label} (analyze)")
            counts["fresh_analyses"] += 1
            r = await client.call_tool("analyze", {"reference": reference, "candidate": source,
                                                   "timeout_s": cfg.timeout_s})
            if r.is_error or not r.structured_content:
                text = tool_text(r)[:500]
                if cfg.analyze == "always":
                    raise RuntimeError(f"analyze failed on {label}: {text}")
                analysis_note = f"analyze failed on {label}: {text}"
                return None
            result = trim_analysis(r.structured_content)
            path.write_text(json.dumps({"key": key, "label": label, "result": result}, indent=1, default=str))
            counts["analyses"] += 1
            return result

        async def run_tool(source: str) -> tuple[Outcome, str, Any]:
            args = {"mode": "eval", "reference": reference, "candidate": source, "device": cfg.device,
                    "trials": cfg.trials, "tolerance": cfg.tolerance, "timing_budget_s": cfg.timing_budget_s,
                    "timeout_s": cfg.timeout_s, "measure_energy": energy}
            r = await client.call_tool("run", args)
            text = tool_text(r)
            worker = None if r.is_error else ((r.structured_content or {}).get("eval") or {}).get("worker")
            if worker:
                workers[worker] = workers.get(worker, 0) + 1
            out = outcome_from_run(None if r.is_error else r.structured_content, text if r.is_error else None,
                                   energy=energy)
            return out, text, None if r.is_error else r.structured_content

        async def with_profile(key: str, source: str, out: Outcome, label: str) -> Outcome:
            """Profile the start and each new best; their findings steer the expansions below them."""
            promising = worth_profiling(out, best["speedup"], label == "start")
            if out.ok:
                best["speedup"] = max(best["speedup"], out.speedup or 0.0)
            if not promising:
                return out
            result = await analyze(key, source, label)
            if result is not None:
                out.bottleneck, out.findings, out.severe, out.details = findings_of(result)
            return out

        async def evaluate_async(payload: dict[str, str]) -> Outcome:
            key = key_of(payload)
            label = "start" if counts.setdefault("evaluated", 0) == 0 else f"candidate {counts['evaluated']}"
            counts["evaluated"] += 1
            if payload.get("reference_start"):  # the reference itself is the 1.0x baseline: nothing to time
                out = Outcome("correct", speedup=1.0, note="the reference itself (the baseline)")
                return await with_profile(ref_key, payload["source"], out, "start")
            cached = cfg.out / "evals" / _key_file(key)
            if cached.is_file():
                counts["reused"] += 1
                rec = json.loads(cached.read_text())
                if rec.get("repaired_source"):
                    payload["source"] = rec["repaired_source"]
                out = Outcome(**rec["outcome"])
                return await with_profile(key, source_of(payload), out, label)
            source = source_of(payload)
            tell(f"evaluating {label} (run)")
            out, text, result = await run_tool(source)
            repaired = None
            if out.status == "compile-error" and hasattr(expander, "repair"):  # one bounded repair turn
                tell(f"repairing {label} (LLM)")
                fixed = await anyio.to_thread.run_sync(expander.repair, source, out.note or text)
                if fixed is not None:
                    out, text, result = await run_tool(fixed)
                    payload["source"] = repaired = fixed
            rec = {"key": key, "payload": payload, "outcome": out.__dict__, "summary": text[:4000],
                   "result": result, "repaired_source": repaired}
            cached.write_text(json.dumps(rec, indent=1, default=str))
            return await with_profile(key, repaired or source, out, label)

        ref_analysis = None
        if analyzing:
            ref_analysis = await analyze(ref_key, reference_as_candidate(reference), "the reference")

        def evaluate(config: dict[str, str]) -> Outcome:
            return anyio.from_thread.run(evaluate_async, config, token=token)

        def step(st: SearchState) -> None:
            if on_step is not None:
                on_step(st)
            if observer is not None:
                observer.step(st)

        def search() -> SearchState:
            cls = STRATEGIES[cfg.strategy]
            fields = {f.name for f in dataclasses.fields(cls)}
            strategy = cls(**{k: v for k, v in (("seed", cfg.seed), ("c", cfg.uct_c)) if k in fields})
            return run_search(strategy, expander, evaluate, start, budget=cfg.budget, on_step=step,
                              deadline=deadline, energy_weight=cfg.energy_weight if energy else 0.0,
                              parallel=parallel)

        st = await anyio.to_thread.run_sync(search)

    for n in st.nodes:
        (cfg.out / "candidates" / f"{n.id:04d}.py").write_text(source_of(n.payload))
    tree = st.root.to_dict()
    (cfg.out / "tree.json").write_text(json.dumps(tree, indent=1))
    best_node = st.best
    (cfg.out / "best.py").write_text(source_of(best_node.payload))
    from kernelscope.agent.proposers import llm_cost_usd

    summary = OptimizeSummary(
        evaluations=len(st.nodes), reused=counts["reused"], best_id=best_node.id,
        best_config={k: v for k, v in best_node.payload.items() if "source" not in best_node.payload},
        proposer=proposer, llm_calls=getattr(expander, "calls", 0), llm_tokens=dict(getattr(expander, "tokens", {})),
        llm_tool_calls=getattr(expander, "tool_calls", 0),
        llm_cost_usd=llm_cost_usd(cfg.model or "claude-sonnet-4-5" if proposer == "anthropic" else cfg.model,
                                  dict(getattr(expander, "tokens", {}))) if proposer != "offline" else None,
        best_speedup=best_node.outcome.speedup, start_speedup=st.root.outcome.speedup,
        best_status=best_node.outcome.status, history=[round(h, 4) for h in st.history], stopped=st.stopped,
        parallel=parallel, workers=dict(sorted(workers.items())),
        analyses=counts["analyses"], analysis_note=analysis_note,
        reference_bottleneck=(findings_of(ref_analysis)[0] if ref_analysis else None),
        best_bottleneck=best_node.outcome.bottleneck, wall_s=round(time.monotonic() - t0, 2), out=str(cfg.out))
    if cfg.report:
        from kernelscope.agent.report import write_report

        summary.report = str(write_report(cfg.out, summary=summary.model_dump(), tree=tree))
    (cfg.out / "summary.json").write_text(summary.model_dump_json(indent=1))
    return summary


# ------------------------------------------------------------------------------------------- CLI
def config_from_args(args: Any) -> OptimizeConfig:
    ref, cand = resolve_problem(Path(args.problem), Path(args.candidate) if args.candidate else None)
    return OptimizeConfig(reference=ref, candidate=cand, out=Path(args.out), budget=args.budget, time_s=args.time,
                          strategy=args.strategy, seed=args.seed, uct_c=args.uct_c, parallel=args.parallel,
                          server=args.server, device=args.device,
                          timing_budget_s=args.timing_budget, trials=args.trials, proposer=args.proposer,
                          model=args.model, analyze=args.analyze, analyze_max=args.analyze_max,
                          objective=args.objective, tolerance=args.tolerance)


def run_cli(args: Any) -> int:
    """`kernelscope optimize`: a live view on a terminal (one line per evaluation otherwise), the summary."""
    from kernelscope.agent.live import make_view

    cfg = config_from_args(args)
    view = make_view(cfg, live=args.live)
    with view:
        summary = anyio.run(lambda: optimize(cfg, observer=view))
    cost = f", ~${summary.llm_cost_usd:.2f}" if summary.llm_cost_usd is not None else ""
    print(f"best: node {summary.best_id} {summary.best_config or ''} at {summary.best_speedup or 0:.3f}x over the "
          f"reference (start {summary.start_speedup or 0:.3f}x), {summary.evaluations} evaluations "
          f"({summary.reused} reused, stopped on {summary.stopped}) in {summary.wall_s:.1f} s"
          + (f", {summary.parallel} at a time on {', '.join(f'{w} ({n})' for w, n in summary.workers.items())}"
             if summary.parallel > 1 else "") + "; proposer "
          f"{summary.proposer}"
          + (f" ({summary.llm_calls} LLM calls, {summary.llm_tokens} tokens{cost})" if summary.llm_calls else "")
          + (f"; {summary.analyses} profiles" if summary.analyses else f"; {summary.analysis_note}"
             if summary.analysis_note else "")
          + f"\nrun directory {summary.out}" + (f"; report {summary.report}" if summary.report else ""))
    return 0
