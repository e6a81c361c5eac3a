"""`kernelscope optimize`: the command, and the agent's public entry points.

The agent is an ordinary MCP client of the server, built in layers (see docs/optimize.md):

- ``config``: what a run is asked (``OptimizeConfig``) and answers (``OptimizeSummary``);
- ``problems`` and ``answers``: problems as files, and the tools' answers read as outcomes and findings;
- ``client``: the server as an MCP peer (`run`, `analyze`, `capabilities`, the CUTLASS lookups);
- ``store``: the run directory, and resuming from it;
- ``loop``: the search driving proposals and evaluations (``optimize``);
- ``proposers``: the offline knob proposer's entry and the LLM proposers; ``search``: the tree search;
- ``report`` and ``live``: the HTML report and what a terminal shows while it runs.

Nothing in the agent imports ``kernelscope.tools``: the same loop works against a remote server.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio

from kernelscope.agent.answers import findings_of, outcome_from_run
from kernelscope.agent.client import resolve_parallel
from kernelscope.agent.config import OptimizeConfig, OptimizeSummary
from kernelscope.agent.live import make_view
from kernelscope.agent.loop import optimize, worth_profiling
from kernelscope.agent.problems import resolve_problem

__all__ = ["OptimizeConfig", "OptimizeSummary", "config_from_args", "findings_of", "optimize", "outcome_from_run",
           "resolve_parallel", "run_cli", "summary_text", "worth_profiling"]


def config_from_args(args: Any) -> OptimizeConfig:
    ref, cand = resolve_problem(Path(args.problem), Path(args.candidate) if args.candidate else None)
    return OptimizeConfig(reference=ref, candidate=cand, out=Path(args.out), budget=args.budget, time_s=args.time,
                          strategy=args.strategy, seed=args.seed, uct_c=args.uct_c, parallel=args.parallel,
                          server=args.server, device=args.device,
                          timing_budget_s=args.timing_budget, trials=args.trials, proposer=args.proposer,
                          model=args.model, analyze=args.analyze, analyze_max=args.analyze_max,
                          objective=args.objective, tolerance=args.tolerance)


def summary_text(summary: OptimizeSummary) -> str:
    """What the command prints at the end of a run."""
    s = summary
    cost = f", ~${s.llm_cost_usd:.2f}" if s.llm_cost_usd is not None else ""
    where = f", {s.parallel} at a time on {', '.join(f'{w} ({n})' for w, n in s.workers.items())}" \
        if s.parallel > 1 else ""
    llm = f" ({s.llm_calls} LLM calls, {s.llm_tokens} tokens{cost})" if s.llm_calls else ""
    profiles = f"; {s.analyses} profiles" if s.analyses else f"; {s.analysis_note}" if s.analysis_note else ""
    if s.best_speedup is not None:
        ci = f" (95% CI {s.best_ci[0]:.3f}-{s.best_ci[1]:.3f})" if s.best_ci else ""
        how = ", confirmed by a longer measurement" if s.confirmed else ""
        figure = f"at {s.best_speedup:.3f}x over the reference{ci}{how}"
    else:
        figure = f"{s.best_status}, no speedup to state"
    if s.llm_cached or s.llm_failed:
        llm += f"; {s.llm_cached} replies reused, {s.llm_failed} model calls failed after retries"
    return (f"best: node {s.best_id} {s.best_config or ''} {figure} "
            f"(start {s.start_speedup or 0:.3f}x), {s.evaluations} evaluations ({s.reused} reused, stopped on "
            f"{s.stopped}) in {s.wall_s:.1f} s{where}; proposer {s.proposer}{llm}{profiles}"
            f"\nrun directory {s.out}" + (f"; report {s.report}" if s.report else ""))


def run_cli(args: Any) -> int:
    """`kernelscope optimize`: a live view on a terminal (one line per evaluation otherwise), the summary."""
    cfg = config_from_args(args)
    view = make_view(cfg, live=args.live)
    try:
        with view:
            summary = anyio.run(lambda: optimize(cfg, observer=view))
    except KeyboardInterrupt:  # the run directory has the summary and the report as of the latest evaluation
        path = cfg.out / "summary.json"
        if path.is_file():
            print("interrupted; " + summary_text(OptimizeSummary.model_validate_json(path.read_text())))
        else:
            print(f"interrupted before the first evaluation; run directory {cfg.out}")
        return 130
    print(summary_text(summary))
    return 0
