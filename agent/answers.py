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
    """The search's status for an evaluation that is not a correct, timed candidate. The verdict decides
    first: an ``invalid`` or ``incorrect`` verdict is a failure whatever the status and the speedup."""
    if ev.get("status") == "invalid" or ev.get("verdict") == "invalid" or _invalid_flags(ev):
        return "invalid"
    if ev.get("status") in ("crashed", "timeout", "harness-error", "too-large"):
        return "crashed"  # not ranked; the feedback says when the harness, not the candidate, failed
    if ev.get("status") == "error":  # it did not build or import (repairable), or raised while running
        return "compile-error" if _BUILD_ERROR.search(ev.get("error") or "") else "crashed"
    return "incorrect"


def _invalid_flags(ev: dict[str, Any]) -> list[dict[str, Any]]:
    return [f for f in ev.get("flags") or [] if f.get("severity") == "invalid"]


def _mismatch(corr: dict[str, Any]) -> str:
    """Where the outputs differed: trials passed, the first failing trial, the largest errors."""
    bad = [t for t in corr.get("trial_results") or [] if not t.get("ok")]
    parts = [f"{corr.get('passed', '?')}/{corr.get('trials', '?')} correctness trials passed "
             f"(tolerance policy {corr.get('policy', '?')})"]
    if bad:
        t = bad[0]
        parts.append(f"first failing trial {t.get('trial')}" + (f": {t['error']}" if t.get("error") else ""))
    for k, name in (("max_abs_error", "max abs error"), ("max_rel_error", "max rel error")):
        v = corr.get(k) if corr.get(k) is not None else (bad[0].get(k) if bad else None)
        if v is not None:
            parts.append(f"{name} {v:.4g}")
    return "; ".join(parts)


def feedback_of(ev: dict[str, Any], status: str, speedup: dict[str, Any] | None) -> str:
    """What an evaluation teaches the next prompt and the search memory, in words (bounded)."""
    if status == "invalid":
        msgs = [f"{f.get('id')}: {f.get('message')}" for f in _invalid_flags(ev)]
        why = "; ".join(msgs) or ev.get("error") or "flagged invalid by the server"
        return ("INVALID (the server's integrity checks rejected it; it counts as a failure): " + why)[:900]
    if status == "incorrect":
        corr = ev.get("correctness") or {}
        return ("INCORRECT: " + (_mismatch(corr) if corr else (ev.get("error") or "outputs differ")))[:900]
    if ev.get("status") in ("harness-error", "too-large"):
        why = ev.get("error") or ""
        return (f"NOT JUDGED ({ev.get('status')}: the evaluation itself failed, not this candidate): {why}")[:900]
    if status in ("compile-error", "crashed"):
        head = "DID NOT BUILD/IMPORT" if status == "compile-error" else f"CRASHED ({ev.get('status')})"
        tail = ev.get("error") or ev.get("stderr_tail") or ev.get("traceback") or ""
        return f"{head}: {tail[-800:]}"
    if speedup is None or speedup.get("speedup") is None:
        return "correct, not timed"
    s, lo, hi = speedup.get("speedup"), speedup.get("ci_low"), speedup.get("ci_high")
    ci = f"95% CI {lo:.3f}-{hi:.3f}, " if lo is not None and hi is not None else ""
    text = f"correct, {s:.3f}x over eager PyTorch ({ci}{speedup.get('verdict') or ev.get('verdict')})"
    if (speedup.get("verdict") or ev.get("verdict")) == "slower":
        text += ": SLOWER than the reference"
    return text


def _energy_ratio(ev: dict[str, Any]) -> float | None:
    """Reference joules per call over the candidate's (above 1: the candidate spends less), where measured."""
    e = ev.get("energy") or {}
    c, r = (e.get("candidate") or {}).get("joules_per_call"), (e.get("reference") or {}).get("joules_per_call")
    return r / c if c and r else None


def outcome_from_run(result: dict[str, Any] | None, error: str | None, *, energy: bool = False) -> Outcome:
    """The `run` tool's structured answer (eval mode) as the search's Outcome: a correct candidate only
    when the status is ok, the outputs matched and the verdict is neither invalid nor incorrect."""
    if error is not None:
        low = error.lower()
        status = "compile-error" if ("syntax error" in low or "compile" in low or "build" in low) else "invalid"
        return Outcome(status, note=error[:300], feedback=f"{status}: {error[:800]}")  # type: ignore[arg-type]
    ev = (result or {}).get("eval") or {}
    corr = ev.get("correctness") or {}
    verdict = ev.get("verdict")
    if ev.get("status") != "ok" or not corr.get("correct") or verdict in ("invalid", "incorrect") \
            or _invalid_flags(ev):
        status = _failure_status(ev)
        return Outcome(status, note=(ev.get("error") or "")[-600:], verdict=verdict,  # type: ignore[arg-type]
                       feedback=feedback_of(ev, status, None))
    eager = next((s for s in ev.get("speedups", []) if s.get("baseline") == "eager"), None)
    return Outcome("correct", speedup=eager.get("speedup") if eager else None,
                   ci_low=eager.get("ci_low") if eager else None, ci_high=eager.get("ci_high") if eager else None,
                   verdict=(eager or {}).get("verdict") or verdict,
                   energy_ratio=_energy_ratio(ev) if energy else None, note=f"verdict {verdict}",
                   feedback=feedback_of(ev, "correct", eager))


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
