"""The run directory of `kernelscope optimize`, and resuming from it.

A run is a directory: ``config.json``, every evaluation (``evals/``) and profile (``analysis/``) keyed
by candidate, every model reply (``proposals/``, keyed by its prompt), the CUTLASS lookups the model made
and the confirmation measurements (``tools/``), every candidate's source (``candidates/``), the tree
(``tree.json``), the best candidate (``best.py``), ``summary.json`` and ``report.html``; the last four are
rewritten after every evaluation, so an interrupted run still has them. Everything found in the directory
is reused, so a run that was interrupted resumes where it stopped and asks the model nothing it already
answered (the search is deterministic given the same outcomes and replies).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernelscope.agent.config import OptimizeConfig, OptimizeSummary
from kernelscope.agent.report import write_report
from kernelscope.agent.search import Outcome


def key_file(key: str) -> str:
    """The file name of a candidate's record (its key hashed)."""
    return hashlib.sha256(key.encode()).hexdigest()[:20] + ".json"


@dataclass
class EvalRecord:
    """An evaluation kept in ``evals/``: its outcome, and the source a repair turn gave it, if any."""

    outcome: Outcome
    repaired_source: str | None


class RunStore:
    """Reads and writes one run directory."""

    def __init__(self, out: Path) -> None:
        self.out = out

    def prepare(self, cfg: OptimizeConfig) -> None:
        """Create the directory (or reuse it, to resume) and record the configuration."""
        for sub in ("candidates", "evals", "analysis", "proposals", "tools"):
            (self.out / sub).mkdir(parents=True, exist_ok=True)
        (self.out / "config.json").write_text(cfg.model_dump_json(indent=1))

    # --------------------------------------------------------------------------------- evaluations
    def cached_eval(self, key: str) -> EvalRecord | None:
        path = self.out / "evals" / key_file(key)
        if not path.is_file():
            return None
        rec = json.loads(path.read_text())
        return EvalRecord(Outcome(**rec["outcome"]), rec.get("repaired_source"))

    def save_eval(self, key: str, payload: dict[str, str], outcome: Outcome, text: str,
                  result: dict[str, Any] | None, repaired: str | None) -> None:
        rec = {"key": key, "payload": payload, "outcome": outcome.__dict__, "summary": text[:4000],
               "result": result, "repaired_source": repaired}
        (self.out / "evals" / key_file(key)).write_text(json.dumps(rec, indent=1, default=str))

    # --------------------------------------------------------------------------------- profiles
    def cached_analysis(self, key: str) -> dict[str, Any] | None:
        path = self.out / "analysis" / key_file(key)
        return json.loads(path.read_text())["result"] if path.is_file() else None

    def save_analysis(self, key: str, label: str, result: dict[str, Any]) -> None:
        path = self.out / "analysis" / key_file(key)
        path.write_text(json.dumps({"key": key, "label": label, "result": result}, indent=1, default=str))

    # --------------------------------------------------------------------------------- replies and tool answers
    def get_reply(self, key: str) -> dict[str, Any] | None:
        """A model reply kept for a prompt (``LLMExpander``'s reply cache)."""
        path = self.out / "proposals" / key_file(key)
        return json.loads(path.read_text()) if path.is_file() else None

    def put_reply(self, key: str, record: dict[str, Any]) -> None:
        _write_json(self.out / "proposals" / key_file(key), {"key": key, **record})

    def cached_tool(self, name: str, args: dict[str, Any]) -> dict[str, Any] | None:
        """A tool answer kept for these arguments (CUTLASS lookups, confirmation runs)."""
        path = self.out / "tools" / key_file(name + json.dumps(args, sort_keys=True, default=str))
        return json.loads(path.read_text())["answer"] if path.is_file() else None

    def save_tool(self, name: str, args: dict[str, Any], answer: dict[str, Any]) -> None:
        path = self.out / "tools" / key_file(name + json.dumps(args, sort_keys=True, default=str))
        _write_json(path, {"tool": name, "args": args, "answer": answer})

    # --------------------------------------------------------------------------------- the end
    def save_candidates(self, sources: dict[int, str], tree: dict[str, Any], best_source: str) -> None:
        """Every node's source (by node id), the tree and the best candidate."""
        for node_id, source in sources.items():
            (self.out / "candidates" / f"{node_id:04d}.py").write_text(source)
        _write_text(self.out / "tree.json", json.dumps(tree, indent=1))
        _write_text(self.out / "best.py", best_source)

    def save_summary(self, summary: OptimizeSummary, tree: dict[str, Any], *, report: bool) -> None:
        """``report.html`` (when asked; its path goes into the summary), then ``summary.json``."""
        if report:
            summary.report = str(write_report(self.out, summary=summary.model_dump(), tree=tree))
        _write_text(self.out / "summary.json", summary.model_dump_json(indent=1))


def _write_text(path: Path, text: str) -> None:
    """Write ``text`` whole or not at all (a file rewritten while the run goes on is never left half written)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    tmp.replace(path)


def _write_json(path: Path, obj: dict[str, Any]) -> None:
    _write_text(path, json.dumps(obj, indent=1, default=str))
