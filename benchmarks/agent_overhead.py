"""The agent's own time per evaluation, outside the model and the server's tools: one command over a suite.

    python3 -m kernelscope bench KB --level 1 --problems 19-22,25 --candidates examples/kernelbench \\
        --proposer offline --device cuda --budget 4 --out build/kb-bench      # the suite (on a GPU host)
    python3 benchmarks/agent_overhead.py build/kb-bench                        # this table

Per problem of a ``kernelscope bench`` directory: the run's wall time (``bench.json``), the time inside the
MCP tool calls the agent made (``run``, ``analyze``, ``capabilities``: each line of ``trajectory.jsonl`` has its
``duration_s``), the time inside model calls, and what is left, the agent's own overhead (the search, the
prompts, the files it writes, the MCP round trips' framing), per evaluation. Tool calls that overlap (parallel
evaluations) are counted once, by the union of their intervals, so the overhead is never negative because of
parallelism. The table goes with the device and date into BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import device_line, table


def _union_s(intervals: list[tuple[datetime, datetime]]) -> float:
    """Seconds covered by the union of these intervals."""
    total, end = 0.0, None
    for a, b in sorted(intervals):
        if end is None or a > end:
            total += (b - a).total_seconds()
            end = b
        elif b > end:
            total += (b - end).total_seconds()
            end = b
    return total


def _intervals(lines: list[dict], kind: str) -> list[tuple[datetime, datetime]]:
    out = []
    for ln in lines:
        meta = ln.get("meta") or {}
        if ln.get("type") != kind or "started" not in meta or meta.get("duration_s") is None:
            continue
        start = datetime.fromisoformat(meta["started"])
        out.append((start, start + timedelta(seconds=float(meta["duration_s"]))))
    return out


def problem_row(run_dir: Path) -> list[object] | None:
    """The row of one problem's run directory; None where it has no result yet."""
    res = run_dir / "bench.json"
    if not res.is_file():
        return None
    r = json.loads(res.read_text())
    traj = run_dir / "trajectory.jsonl"
    lines = [json.loads(x) for x in traj.read_text().splitlines() if x.strip()] if traj.is_file() else []
    tools, model = _union_s(_intervals(lines, "tool")), _union_s(_intervals(lines, "model"))
    calls = sum(1 for ln in lines if ln.get("type") == "tool")
    wall, evals = float(r.get("wall_s") or 0.0), int(r.get("evaluations") or 0)
    own = max(wall - tools - model, 0.0)
    return [r.get("key", run_dir.name), evals, calls, round(wall, 1), round(tools, 1), round(model, 1), round(own, 2),
            round(own / evals, 3) if evals else "-"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("suite", type=Path, help="a `kernelscope bench` output directory")
    args = ap.parse_args(argv)
    if not args.suite.is_dir():
        print(f"{args.suite}: no such directory (run `kernelscope bench ... --out DIR` first)", file=sys.stderr)
        return 2
    rows = [row for res in sorted(args.suite.rglob("bench.json")) if (row := problem_row(res.parent))]
    if not rows:
        print(f"{args.suite}: no finished problem (no */bench.json)", file=sys.stderr)
        return 2
    print(device_line())
    print(table(["problem", "evals", "tool calls", "wall s", "in tools s", "in model s", "agent s", "agent s/eval"],
                rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
