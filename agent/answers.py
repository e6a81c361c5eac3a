"""The server's answers as the agent reads them: a `run` answer as the search's ``Outcome``, an `analyze`
answer as a bottleneck class and ranked findings.

Plain functions over the tools' structured answers (JSON objects): the loop, the report and the
strategies benchmark share them, and none of them talks to the server.
"""

from __future__ import annotations

import re
from typing import Any

from kernelscope.agent.search import Outcome

SEVERITY_RANK = {"critical": 0, "high": 1, "warning": 2, "info": 3}
_BUILD_ERROR = re.compile(r"CompileException|NVRTC_ERROR|ptxas|nvcc|compil|build|SyntaxError|ImportError|"
                          r"ModuleNotFoundError|IndentationError", re.I)


def tool_text(r: Any) -> str:
    """The text blocks of an MCP tool result, joined."""
    return "\n".join(getattr(b, "text", "") for b in r.content)


# ------------------------------------------------------------------------------------------- run
def _failure_status(ev: dict[str, Any]) -> str:
    """The search's status for an evaluation that is not a correct, timed candidate."""
    if ev.get("status") == "invalid" or ev.get("verdict") == "invalid":
        return "invalid"
    if ev.get("status") in ("crashed", "timeout"):
        return "crashed"
    if ev.get("status") == "error":  # it did not build or import (repairable), or raised while running
        return "compile-error" if _BUILD_ERROR.search(ev.get("error") or "") else "crashed"
    return "incorrect"


def _energy_ratio(ev: dict[str, Any]) -> float | None:
    """Reference joules per call over the candidate's (above 1: the candidate spends less), where measured."""
    e = ev.get("energy") or {}
    c, r = (e.get("candidate") or {}).get("joules_per_call"), (e.get("reference") or {}).get("joules_per_call")
    return r / c if c and r else None


def outcome_from_run(result: dict[str, Any] | None, error: str | None, *, energy: bool = False) -> Outcome:
    """The `run` tool's structured answer (eval mode) as the search's Outcome."""
    if error is not None:
        low = error.lower()
        status = "compile-error" if ("syntax error" in low or "compile" in low or "build" in low) else "invalid"
        return Outcome(status, note=error[:300])  # type: ignore[arg-type]
    ev = (result or {}).get("eval") or {}
    corr = ev.get("correctness") or {}
    if ev.get("status") != "ok" or not corr.get("correct"):
        return Outcome(_failure_status(ev), note=(ev.get("error") or "")[-600:])  # type: ignore[arg-type]
    eager = next((s for s in ev.get("speedups", []) if s.get("baseline") == "eager"), None)
    return Outcome("correct", speedup=eager.get("speedup") if eager else None,
                   energy_ratio=_energy_ratio(ev) if energy else None, note=f"verdict {ev.get('verdict')}")


# ------------------------------------------------------------------------------------------- analyze
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


def _finding_sentence(f: dict[str, Any]) -> str:
    """One finding as a sentence: rule, severity, kernel and line, diagnosis, its first fix."""
    fix = (f.get("fixes") or [{}])[0]
    where = f" at {f['line']}" if f.get("line") else ""
    return (f"{f['rule']} ({f.get('severity')}{', ' + f['kernel'] if f.get('kernel') else ''}{where}): "
            f"{f.get('diagnosis', '')}" + (f" Fix: {fix['action']} ({fix.get('expected_effect', '')})"
                                            if fix.get("action") else ""))


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
    details = [_finding_sentence(f) for f in found[:8]]
    return (top["bottleneck"]["cls"] if top else None), rules, severe, details


def trim_analysis(result: dict[str, Any]) -> dict[str, Any]:
    """What the run directory keeps of an `analyze` answer (the full reports stay server artifacts)."""
    keep = ("status", "explanation", "fixes", "stages", "kernels_total", "launches_profiled", "report_ids",
            "trace_id", "wall_s", "system", "system_findings", "notes")
    out = {k: result.get(k) for k in keep if k in result}
    out["kernels"] = [{k: v for k, v in kern.items() if k not in ("hot_lines",)}
                      for kern in (result.get("kernels") or [])[:6]]
    return out
