"""`kernelscope bench`: the optimize agent over a suite of problems (a KernelBench checkout or a folder).

One server serves the whole suite (a URL given with ``--server``, else one `kernelscope serve` over stdio
with its home in the suite's directory), so its evaluation pool spreads every problem's evaluations over
its GPUs; ``jobs`` problems run at once (default: one per GPU worker of the pool, one on the CPU), each in
its own run directory ``OUT/<key>`` (``level1/19_ReLU``) through the ordinary `optimize` loop, with the
budget per problem in evaluations, wall time and model dollars.

A problem whose run finished has ``bench.json`` in its run directory and is skipped on a rerun; one that
was interrupted (or failed) runs again and resumes from its run directory, asking the model nothing it
already answered. After a problem's search, its best correct candidate is measured once more against the
reference timed both eager and under ``torch.compile`` (the `run` tool's ``reference_modes``), which gives
the speedup over ``torch.compile``. The suite's table is printed and written (``suite.json``,
``suite.html``) with the metrics of ``suite``.
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Literal

import anyio
from pydantic import BaseModel, Field

from kernelscope.agent.answers import tool_text
from kernelscope.agent.client import ServerPeer, resolve_parallel
from kernelscope.agent.config import OptimizeConfig, OptimizeSummary
from kernelscope.agent.confirm import confirm_budget
from kernelscope.agent.kernelbench import SuiteProblem, find_problems
from kernelscope.agent.loop import optimize
from kernelscope.agent.proposers import llm_cost_usd, model_name, resolve_proposer
from kernelscope.agent.store import RunStore
from kernelscope.agent.suite import ProblemResult, SuiteSummary, suite_table, summarize, write_suite

RESULT_FILE = "bench.json"


class BenchConfig(BaseModel):
    """What `kernelscope bench` is asked."""

    source: Path = Field(description="A KernelBench checkout (or its KernelBench/ folder), or a folder of problems.")
    levels: list[int] | None = Field(None, description="KernelBench levels to run (None: all there).")
    problems: str | None = Field(None, description="Problem ids or ranges, e.g. 1-10,19 (None: all).")
    candidates: Path | None = Field(None, description="Folder of starting candidates named like the problems.")
    out: Path = Field(description="The suite's directory: one run directory per problem, suite.json/html.")
    jobs: int | None = Field(None, ge=1, le=256, description="Problems at once (None: one per GPU worker).")
    parallel: int | None = Field(None, ge=1, le=256, description="Evaluations in flight per problem (None: the "
                                                                   "pool's GPU workers shared among the jobs).")
    budget: int = Field(10, ge=1, le=10_000, description="Evaluations per problem.")
    time_s: float | None = Field(None, gt=0, description="Wall-clock budget per problem (per invocation).")
    cost_usd: float | None = Field(None, gt=0, description="Model dollars per problem (estimated).")
    compile_baseline: Literal["auto", "always", "never"] = Field(
        "auto", description="Measure the best against torch.compile of the reference (auto: not on the CPU).")
    options: dict[str, Any] = Field(default_factory=dict, description="Further OptimizeConfig fields for every "
                                                                      "problem (proposer, model, device, ...).")


def problem_config(cfg: BenchConfig, prob: SuiteProblem, parallel: int | None) -> OptimizeConfig:
    return OptimizeConfig.model_validate({
        **cfg.options, "reference": prob.reference, "candidate": prob.candidate, "out": cfg.out / prob.key,
        "budget": cfg.budget, "time_s": cfg.time_s, "max_cost_usd": cfg.cost_usd, "parallel": parallel})


def check_config(cfg: BenchConfig, base: OptimizeConfig) -> None:
    """Refuse what cannot work before anything runs: a dollar budget for a model without a known price."""
    if cfg.cost_usd is not None:
        name = resolve_proposer(base)
        if name == "offline":
            raise ValueError("--cost applies to an LLM proposer; the offline proposer spends no model dollars")
        if llm_cost_usd(model_name(base, name), {}) is None:
            raise ValueError(f"--cost: no list price known for model {model_name(base, name)!r}; give it with "
                             "KERNELSCOPE_LLM_PRICE='input,output' (USD per million tokens)")


def _tree_nodes(tree: dict[str, Any]) -> list[dict[str, Any]]:
    out = [tree]
    for c in tree.get("children") or []:
        out += _tree_nodes(c)
    return out


def result_of(prob: SuiteProblem, ocfg: OptimizeConfig, s: OptimizeSummary) -> tuple[ProblemResult, int | None]:
    """A finished run as the suite's result, and the node whose source is the problem's answer (None: no
    correct candidate). The reference itself (an LLM run's start) is never the answer: when it ranks best,
    the best correct candidate of the tree is (slower than the reference, with its search figure)."""
    reference_best = s.best_id == 0 and ocfg.candidate is None
    base = dict(key=prob.key, level=prob.level, pid=prob.pid, name=prob.name, status="done",
                best_status="reference" if reference_best else s.best_status, evaluations=s.evaluations,
                stopped=s.stopped, llm_calls=s.llm_calls,
                llm_cached=s.llm_cached, tokens=dict(s.llm_tokens), cost_usd=s.llm_cost_usd, wall_s=s.wall_s,
                run_dir=str(ocfg.out))
    if s.best_status == "correct" and s.best_speedup is not None and not reference_best:
        return ProblemResult(**base, correct=True, speedup_eager=s.best_speedup, ci_eager=s.best_ci), s.best_id
    tree = json.loads((ocfg.out / "tree.json").read_text())
    first = 0 if ocfg.candidate is None else -1  # node 0 is the reference itself when no candidate was given
    ok = [n for n in _tree_nodes(tree) if n["id"] != first and n["status"] == "correct" and n.get("speedup")]
    if not ok:
        why = "the reference itself ranked best" if reference_best else f"best is {s.best_status}"
        return ProblemResult(**base, note=f"no correct candidate ({why})"), None
    best = max(ok, key=lambda n: (n["speedup"], -n["id"]))
    note = f"node {best['id']}: the best correct candidate, slower than the reference (search figure)"
    return ProblemResult(**base, correct=True, speedup_eager=best["speedup"], note=note), best["id"]


async def measure_compile(peer: ServerPeer, ocfg: OptimizeConfig, source: str, r: ProblemResult) -> None:
    """The answer measured once more against the reference eager and under torch.compile (kept in the run
    directory's ``tools/``, so a rerun does not measure again)."""
    store = RunStore(ocfg.out)
    args = {"mode": "eval", "reference": peer.reference, "candidate": source, "device": ocfg.device,
            "trials": ocfg.trials, "tolerance": ocfg.tolerance, "timing_budget_s": confirm_budget(ocfg),
            "timeout_s": ocfg.timeout_s, "reference_modes": ["eager", "compile"]}
    key = {"source": hashlib.sha256(source.encode()).hexdigest(), "budget": args["timing_budget_s"]}
    kept = store.cached_tool("run:compile-baseline", key)
    if kept is None:
        ans = await peer.client.call_tool("run", args)
        kept = {"result": None if ans.is_error else ans.structured_content, "error": tool_text(ans)[:2000]
                if ans.is_error else None}
        store.save_tool("run:compile-baseline", key, kept)
    compile_figures(kept, r)


def compile_figures(kept: dict[str, Any], r: ProblemResult) -> None:
    """The speedup over torch.compile (and both reference timings) from a `run` answer with the reference
    timed eager and compiled (``{"result": structured answer, "error": text of an error answer}``)."""
    ev = (kept.get("result") or {}).get("eval") or {}
    timings = ev.get("timings") or {}
    r.reference_us = (timings.get("reference") or {}).get("median_us")
    r.reference_compile_us = (timings.get("reference_compile") or {}).get("median_us")
    comp = next((x for x in ev.get("speedups") or [] if x.get("baseline") == "compile"), None)
    if ev.get("status") == "ok" and (ev.get("correctness") or {}).get("correct") and comp:
        r.speedup_compile = comp["speedup"]
        r.compile_note = f"95% CI {comp['ci_low']:.3f}-{comp['ci_high']:.3f}, {comp['verdict']}"
    else:
        why = kept.get("error") or ev.get("error") or ev.get("status") or "no compile timing"
        r.compile_note = f"not measured against torch.compile: {str(why)[:300]}"


Connect = Callable[[OptimizeConfig, str], Any]


class Suite:
    """One invocation of `kernelscope bench`: its problems, its shared server, their results."""

    def __init__(self, cfg: BenchConfig, problems: list[SuiteProblem], *,
                 sleep: Callable[[float], None] | None = None,
                 on_result: Callable[[ProblemResult], None] | None = None) -> None:
        self.cfg, self.problems, self.sleep, self.on_result = cfg, problems, sleep, on_result
        self.results: dict[str, ProblemResult] = {}
        self.client: Any = None

    @asynccontextmanager
    async def connect(self, ocfg: OptimizeConfig, reference: str) -> AsyncIterator[ServerPeer]:
        """A problem's server: the suite's one client, with this problem's reference and settings."""
        yield ServerPeer(self.client, ocfg, reference)

    def finished(self, prob: SuiteProblem) -> ProblemResult | None:
        path = self.cfg.out / prob.key / RESULT_FILE
        if not path.is_file():
            return None
        r = ProblemResult.model_validate_json(path.read_text())
        return r if r.status == "done" else None

    async def run_problem(self, prob: SuiteProblem, parallel: int | None) -> ProblemResult:
        done = self.finished(prob)
        if done is not None:
            return done
        ocfg = problem_config(self.cfg, prob, parallel)
        t0 = time.monotonic()
        try:
            summary = await optimize(ocfg, connect=self.connect, sleep=self.sleep)
            r, node = result_of(prob, ocfg, summary)
            want = self.cfg.compile_baseline == "always" or (self.cfg.compile_baseline == "auto"
                                                             and ocfg.device != "cpu")
            if node is not None and want:
                source = (ocfg.out / "candidates" / f"{node:04d}.py").read_text()
                async with self.connect(ocfg, prob.reference.read_text()) as peer:
                    await measure_compile(peer, ocfg, source, r)
        except Exception as e:  # this problem failed (a bad problem, a proposer that cannot start): the suite goes on
            r = ProblemResult(key=prob.key, level=prob.level, pid=prob.pid, name=prob.name, status="failed",
                              run_dir=str(ocfg.out), wall_s=round(time.monotonic() - t0, 2),
                              note=f"{type(e).__name__}: {e}"[:600])
        ocfg.out.mkdir(parents=True, exist_ok=True)
        (ocfg.out / RESULT_FILE).write_text(r.model_dump_json(indent=1))
        return r

    async def run(self) -> SuiteSummary:
        cfg = self.cfg
        cfg.out.mkdir(parents=True, exist_ok=True)
        base = problem_config(cfg, self.problems[0], cfg.parallel).model_copy(update={"out": cfg.out})
        check_config(cfg, base)
        t0 = time.monotonic()
        async with ServerPeer.connect(base, "") as shared:
            self.client = shared.client
            caps = await shared.capabilities()
            workers = resolve_parallel(caps, base.model_copy(update={"parallel": None}))
            jobs = cfg.jobs or workers
            parallel = cfg.parallel or max(1, workers // jobs)
            limit = anyio.CapacityLimiter(jobs)

            async def one(prob: SuiteProblem) -> None:
                async with limit:
                    r = await self.run_problem(prob, parallel)
                self.results[prob.key] = r
                if self.on_result is not None:
                    self.on_result(r)

            async with anyio.create_task_group() as tg:
                for prob in self.problems:
                    tg.start_soon(one, prob)
        ordered = [self.results[p.key] for p in self.problems if p.key in self.results]
        summary = summarize(ordered, time.monotonic() - t0)
        write_suite(cfg.out, summary)
        return summary


def progress_line(r: ProblemResult) -> str:
    fig = f"{r.speedup_eager:.2f}x" if r.speedup_eager is not None else "no speedup"
    comp = f", {r.speedup_compile:.2f}x over torch.compile" if r.speedup_compile is not None else ""
    return f"{r.key}: {r.status}, {'correct' if r.correct else 'not correct'}, {fig}{comp}" + \
        (f" ({r.note})" if r.note else "")


async def bench(cfg: BenchConfig, *, sleep: Callable[[float], None] | None = None,
                on_result: Callable[[ProblemResult], None] | None = None) -> SuiteSummary:
    """Run (or resume) the suite ``cfg`` describes; the summary is also in ``OUT/suite.json``."""
    problems = find_problems(cfg.source, cfg.levels, cfg.problems, cfg.candidates)
    keys = [p.key for p in problems]
    if len(set(keys)) != len(keys):
        twice = sorted({k for k in keys if keys.count(k) > 1})
        raise ValueError(f"two problems under {cfg.source} share a name: {twice}")
    return await Suite(cfg, problems, sleep=sleep, on_result=on_result).run()


OPTION_ARGS = ("strategy", "seed", "server", "device", "trials", "tolerance", "proposer", "model", "analyze",
               "analyze_max")


def config_from_args(args: Any) -> BenchConfig:
    levels = sorted({int(x) for spec in args.level or [] for x in str(spec).split(",") if x.strip()}) or None
    opts = {k: getattr(args, k) for k in OPTION_ARGS if getattr(args, k, None) is not None}
    opts["timing_budget_s"] = args.timing_budget
    return BenchConfig(source=Path(args.source), levels=levels, problems=args.problems,
                       candidates=Path(args.candidates) if args.candidates else None, out=Path(args.out),
                       jobs=args.jobs, parallel=args.parallel, budget=args.budget, time_s=args.time,
                       cost_usd=args.cost, compile_baseline=args.compile_baseline, options=opts)


def run_cli(cfg: BenchConfig) -> int:
    """`kernelscope bench`: one line per finished problem, then the suite's table."""
    def show(r: ProblemResult) -> None:
        print(progress_line(r), flush=True)

    try:
        summary = anyio.run(lambda: bench(cfg, on_result=show))
    except KeyboardInterrupt:
        print(f"interrupted; finished problems are kept in {cfg.out} (rerun the command to resume)",
              file=sys.stderr)
        return 130
    print(suite_table(summary))
    print(f"suite directory {cfg.out}: suite.json, suite.html")
    return 0
