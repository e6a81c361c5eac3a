"""A suite's outcome: one ``ProblemResult`` per problem, and the metrics KernelBench states over them.

The definitions follow KernelBench's own (``src/kernelbench/score.py`` at commit 0d12226 of
ScalingIntelligence/KernelBench), applied to the best candidate of each problem's run:

- correctness rate: problems whose best candidate is correct (and not the reference itself), over all
  problems of the suite;
- fast_p: the fraction of ALL problems whose best candidate is correct AND faster than the baseline by more
  than p (speedup > p); fast_0 is the correctness rate of timed candidates;
- geomean speedup: the geometric mean of the speedups of the correct problems only (KernelBench's
  ``geometric_mean_speed_ratio_correct_only``); beside it, the geometric mean over all problems with a
  problem without a correct candidate counted as 1.0x (you keep the reference), which is what a user
  gets over the whole suite.

Speedups are over eager PyTorch (the search's confirmed figure) and over ``torch.compile`` of the same
reference (the `run` tool timing the reference under ``torch.compile`` beside the candidate).
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

FAST_P = (0.0, 1.0, 1.5, 2.0)


class ProblemResult(BaseModel):
    """One problem's outcome in a suite (``bench.json`` in its run directory)."""

    key: str
    level: int | None = None
    pid: int | None = None
    name: str
    status: Literal["done", "failed"] = Field(description="done: the run finished (budget, time, cost or "
                                                           "exhausted); failed: it raised (see note).")
    correct: bool = Field(False, description="The best candidate is correct and is not the reference itself.")
    best_status: str | None = None
    speedup_eager: float | None = Field(None, description="The best's speedup over eager PyTorch (confirmed).")
    ci_eager: list[float] | None = None
    speedup_compile: float | None = Field(None, description="The best's speedup over torch.compile of the reference.")
    reference_us: float | None = Field(None, description="The reference's median time, eager (µs).")
    reference_compile_us: float | None = Field(None, description="The reference's median time under torch.compile.")
    compile_note: str | None = None
    evaluations: int = 0
    stopped: str | None = None
    llm_calls: int = 0
    llm_cached: int = 0
    tokens: dict[str, int] = Field(default_factory=dict)
    cost_usd: float | None = None
    wall_s: float = 0.0
    run_dir: str
    note: str | None = None


class SuiteSummary(BaseModel):
    """The suite's metrics (``suite.json``, with every problem's result)."""

    problems: int
    done: int
    correct: int
    correctness_rate: float
    fast_p: dict[str, float] = Field(description="p -> fraction of all problems correct with speedup > p, "
                                                 "over eager PyTorch.")
    fast_p_compile: dict[str, float] = Field(description="The same over torch.compile (a problem where it was not "
                                                         "measured counts as not faster); empty when it was "
                                                         "measured nowhere.")
    geomean_eager: float | None = Field(None, description="Geometric mean over the correct problems (KernelBench).")
    geomean_eager_all: float | None = Field(None, description="Over all problems, 1.0x where none was correct.")
    geomean_compile: float | None = None
    geomean_compile_all: float | None = None
    tokens: dict[str, int] = Field(default_factory=dict)
    cost_usd: float | None = None
    llm_calls: int = 0
    wall_s: float = 0.0
    results: list[ProblemResult] = Field(default_factory=list)


def fast_p(correct: Sequence[bool], speedups: Sequence[float | None], p: float) -> float:
    """KernelBench's fast_p: the fraction of ALL problems that are correct and have speedup > p."""
    if len(correct) != len(speedups):
        raise ValueError("fast_p: one correctness and one speedup per problem")
    n = len(correct)
    hits = sum(1 for c, s in zip(correct, speedups, strict=True) if c and s is not None and s > p)
    return hits / n if n else 0.0


def geomean(values: Sequence[float]) -> float | None:
    """The geometric mean of positive values (None for none)."""
    vals = [v for v in values if v is not None]
    if not vals:
        return None
    if any(v <= 0 or not math.isfinite(v) for v in vals):
        raise ValueError(f"geomean: speedups must be positive and finite, got {vals}")
    return math.exp(sum(math.log(v) for v in vals) / len(vals))


def _geomeans(results: Sequence[ProblemResult], attr: str) -> tuple[float | None, float | None]:
    correct = [getattr(r, attr) for r in results if r.correct and getattr(r, attr) is not None]
    every = [getattr(r, attr) if r.correct and getattr(r, attr) is not None else 1.0 for r in results]
    return geomean(correct), geomean(every)


def summarize(results: Sequence[ProblemResult], wall_s: float = 0.0) -> SuiteSummary:
    """The suite's metrics over its problems' results (every problem counts, failed ones as not correct)."""
    correct = [r.correct for r in results]
    eager = [r.speedup_eager for r in results]
    comp = [r.speedup_compile for r in results]
    n = len(results)
    measured = any(r.compile_note is not None for r in results)  # torch.compile was asked for somewhere
    tokens: dict[str, int] = {}
    for r in results:
        for k, v in r.tokens.items():
            tokens[k] = tokens.get(k, 0) + v
    costs = [r.cost_usd for r in results if r.cost_usd is not None]
    g_eager, g_eager_all = _geomeans(results, "speedup_eager")
    g_comp, g_comp_all = _geomeans(results, "speedup_compile") if measured else (None, None)
    return SuiteSummary(
        problems=n, done=sum(r.status == "done" for r in results), correct=sum(correct),
        correctness_rate=sum(correct) / n if n else 0.0,
        fast_p={f"{p:g}": fast_p(correct, eager, p) for p in FAST_P},
        fast_p_compile={f"{p:g}": fast_p(correct, comp, p) for p in FAST_P} if measured else {},
        geomean_eager=g_eager, geomean_eager_all=g_eager_all, geomean_compile=g_comp,
        geomean_compile_all=g_comp_all, tokens=tokens, cost_usd=round(sum(costs), 4) if costs else None,
        llm_calls=sum(r.llm_calls for r in results), wall_s=round(wall_s, 2), results=list(results))


def _x(v: float | None) -> str:
    return f"{v:.2f}x" if v is not None else "-"


def _rows(s: SuiteSummary) -> list[list[str]]:
    return [[r.key, r.status, "yes" if r.correct else "no", r.best_status or "-", _x(r.speedup_eager),
             _x(r.speedup_compile), str(r.evaluations), f"{r.wall_s:.0f}", str(sum(r.tokens.values())),
             f"{r.cost_usd:.2f}" if r.cost_usd is not None else "-"] for r in s.results]


HEADERS = ["problem", "run", "correct", "best", "vs eager", "vs compile", "evals", "wall s", "tokens", "$"]


def metric_lines(s: SuiteSummary) -> list[str]:
    fp = " ".join(f"fast_{k}={v:.2f}" for k, v in s.fast_p.items())
    fc = " ".join(f"fast_{k}={v:.2f}" for k, v in s.fast_p_compile.items())
    cost = f", ~${s.cost_usd:.2f}" if s.cost_usd is not None else ""
    return [f"{s.problems} problems, {s.done} finished, {s.correct} correct "
            f"(correctness rate {s.correctness_rate:.2f})",
            f"over eager PyTorch: {fp}; geomean {_x(s.geomean_eager)} over the correct ones, "
            f"{_x(s.geomean_eager_all)} over all (1.0x where none was correct)",
            (f"over torch.compile: {fc}; geomean {_x(s.geomean_compile)} over the correct ones, "
             f"{_x(s.geomean_compile_all)} over all" if s.fast_p_compile else
             "over torch.compile: not measured (--compile-baseline never, or auto on the CPU)"),
            f"{s.llm_calls} LLM calls, {sum(s.tokens.values())} tokens{cost}; {s.wall_s:.0f} s"]


def suite_table(s: SuiteSummary) -> str:
    """The suite as a plain-text table, then its metrics."""
    cells = [HEADERS, *_rows(s)]
    widths = [max(len(r[i]) for r in cells) for i in range(len(HEADERS))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join([*lines, "", *metric_lines(s)])


def write_suite(out: Path, s: SuiteSummary) -> tuple[Path, Path]:
    """``suite.json`` and ``suite.html`` in ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    js = out / "suite.json"
    js.write_text(s.model_dump_json(indent=1))
    page = out / "suite.html"
    page.write_text(suite_html(s))
    return js, page


def suite_html(s: SuiteSummary) -> str:
    """A self-contained page: the metrics, then one row per problem linking its run's report."""
    def cell(v: str) -> str:
        return f"<td>{html.escape(v)}</td>"

    rows = []
    for r, row in zip(s.results, _rows(s), strict=True):
        link = f'<a href="{html.escape(r.key)}/report.html">{html.escape(r.key)}</a>'
        cls = "ok" if r.correct else "bad"
        rows.append(f'<tr class="{cls}"><td>{link}</td>' + "".join(cell(c) for c in row[1:]) + "</tr>")
    metrics = "".join(f"<li>{html.escape(m)}</li>" for m in metric_lines(s))
    data = html.escape(json.dumps({"fast_p": s.fast_p, "fast_p_compile": s.fast_p_compile}))
    return ("<!doctype html><html><head><meta charset='utf-8'><title>kernelscope bench</title><style>"
            "body{font:14px system-ui,sans-serif;margin:2em}table{border-collapse:collapse}"
            "td,th{border:1px solid #ccc;padding:3px 8px;text-align:left}tr.ok td{background:#eefbea}"
            "tr.bad td{background:#fdf0ef}</style></head><body><h1>kernelscope bench</h1>"
            f"<ul>{metrics}</ul><p>fast_p: the fraction of all problems whose best candidate is correct and "
            "faster than the baseline by more than p (KernelBench's definition); geomean over the correct "
            f"problems, as KernelBench states it.</p><table data-metrics=\"{data}\"><tr>"
            + "".join(f"<th>{html.escape(h)}</th>" for h in HEADERS) + "</tr>" + "".join(rows)
            + "</table></body></html>\n")
