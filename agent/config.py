"""What `kernelscope optimize` is asked (``OptimizeConfig``) and what it answers (``OptimizeSummary``).

The run directory keeps both: ``config.json`` and ``summary.json``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field


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
    report: bool = Field(True, description="Write report.html (after every evaluation, and at the end).")
    confirm: bool = Field(True, description="Measure the search's best (and its runner-up) again against the "
                                            "reference with a longer timing budget; the summary states that "
                                            "confirmed speedup and its interval.")
    confirm_timing_budget_s: float | None = Field(None, gt=0, le=120, description="The confirmation's timing "
                                                  "budget per side (None: 4x timing_budget_s, at least 1 s).")
    llm_retries: int = Field(4, ge=0, le=20, description="Retries of a model error (rate limit, timeout, 5xx, "
                                                          "unparsable reply) before that proposal fails.")
    llm_backoff_s: float = Field(2.0, ge=0, le=600, description="First backoff before a retry (doubling; a "
                                                                "Retry-After header wins), at most 60 s.")

class OptimizeSummary(BaseModel):
    evaluations: int
    reused: int = Field(description="Evaluations taken from the run directory (resume).")
    best_id: int
    best_config: dict[str, str]
    best_speedup: float | None
    start_speedup: float | None
    best_status: str
    history: list[float] = Field(description="Best log2 speedup after each evaluation.")
    stopped: str = Field("budget", description="Why the search ended: budget, time, exhausted, interrupted, or "
                                               "running (a checkpoint written while it runs).")
    search_speedup: float | None = Field(None, description="The best's speedup as the search measured it.")
    best_ci: list[float] | None = Field(None, description="95% CI of best_speedup (the confirmation's, when made).")
    best_verdict: str | None = None
    confirmed: bool = Field(False, description="best_speedup comes from the longer confirmation measurement.")
    confirm_note: str | None = Field(None, description="What the confirmation measured (best and runner-up).")
    parallel: int = Field(1, description="Evaluations that were kept in flight at once.")
    workers: dict[str, int] = Field(default_factory=dict, description="Fresh evaluations per pool worker (gpu0 ...).")
    proposer: str
    llm_calls: int = 0
    llm_tokens: dict[str, int] = Field(default_factory=dict)
    llm_cost_usd: float | None = Field(None, description="Estimated from the model's list price, where known.")
    llm_tool_calls: int = Field(0, description="Server tool calls the LLM made while writing (CUTLASS lookups).")
    llm_cached: int = Field(0, description="Model replies taken from the run directory (resume): not asked again.")
    llm_failed: int = Field(0, description="Model calls that failed after their retries (that proposal failed).")
    llm_retried: int = Field(0, description="Model errors retried with backoff.")
    analyses: int = Field(0, description="`analyze` profiles made (reused ones included).")
    analysis_note: str | None = Field(None, description="Why profiles were not made, when they were not.")
    reference_bottleneck: str | None = None
    best_bottleneck: str | None = None
    wall_s: float
    out: str
    report: str | None = None

