"""Every reference of a KernelBench checkout through `run`, as its own candidate: does the harness hold up
at KernelBench's sizes (no harness errors, no out-of-memory answers; what truly cannot fit named with its
numbers)?

    python benchmarks/kernelbench_sweep.py KERNELBENCH [--level 1 --level 2] [--problems 1-10] \
        [--device cuda|cpu] [--out sweep.jsonl] [--stop-after SECONDS]

KERNELBENCH is a checkout of ScalingIntelligence/KernelBench (pinned: commit 0d12226, the one whose
tolerances the `kernelbench` policy follows; benchmarks/pack_kernelbench.sh packs it for the GPU machine),
or any folder of KernelBench-format problems (tests/fixtures/kernelbench runs on the CPU in CI).

Each problem's reference goes through the run tool's eval path (the tools layer, as the other benchmarks)
with ``ModelNew`` = ``Model``: the expected answer is correct outputs and the delegation check's
``invalid`` (it hands everything to PyTorch), with the speed verdict beside it. Per problem the table has
the answer's status and verdict, its wall time, the harness' own peak (PyTorch's caching allocator, exact) and
the GPU's peak memory use while it ran (NVML, sampled
every 20 ms, less the use before it: the sandboxed evaluation's whole footprint, CUDA context included).
Results are appended to the JSONL file as each problem finishes; a rerun skips the problems already there.
The summary line counts harness errors, out-of-memory answers and too-large answers, and names every
reference that drew a flag other than the delegation check's: a reference run as its own candidate is
honest by construction, so any other flag (a distribution failure, a pointer-cache or global-state flag)
is a false positive of a cheat check, which an honest candidate for that problem would get too.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import device_line, table, use_private_store

OOM = re.compile(r"out of memory|CUDA_ERROR_OUT_OF_MEMORY|OutOfMemoryError", re.I)


class PeakMemory:
    """The GPU's peak memory use (NVML) while the block runs, less its use before; None without NVML."""

    def __init__(self, device: str, index: int = 0) -> None:
        self.handle: Any = None
        self.peak: int | None = None
        if device == "cpu":
            return
        try:
            import pynvml

            pynvml.nvmlInit()
            self.handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            self.nvml = pynvml
        except Exception:  # no NVML here: the column stays empty
            self.handle = None

    def used(self) -> int:
        return int(self.nvml.nvmlDeviceGetMemoryInfo(self.handle).used)

    def __enter__(self) -> PeakMemory:
        self.stop = threading.Event()
        if self.handle is not None:
            self.base = self.used()
            self.top = self.base
            self.thread = threading.Thread(target=self.poll, daemon=True)
            self.thread.start()
        return self

    def poll(self) -> None:
        while not self.stop.wait(0.02):
            self.top = max(self.top, self.used())

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        if self.handle is not None:
            self.thread.join()
            self.top = max(self.top, self.used())
            self.peak = self.top - self.base


def classify(ev: dict[str, Any]) -> str:
    """The answer in one word: ok (correct, judged), oom, too-large, harness-error, or the status."""
    status = ev.get("status") or "?"
    text = " ".join(str(ev.get(k) or "") for k in ("error", "stderr_tail", "traceback"))
    if OOM.search(text) and status != "too-large":
        return "oom"
    if status in ("too-large", "harness-error"):
        return status
    correct = (ev.get("correctness") or {}).get("correct")
    if status in ("ok", "invalid") and correct:
        return "ok"
    return status if status != "ok" else "incorrect"


def sweep_one(prob: Any, tmp: Path, args: argparse.Namespace) -> dict[str, Any]:
    from kernelscope.agent.problems import reference_as_candidate
    from kernelscope.models.requests import EvalRequest
    from kernelscope.tools.run import eval_candidate

    cand = tmp / f"{prob.key.replace('/', '__')}.py"
    cand.write_text(reference_as_candidate(prob.reference.read_text()))
    t0 = time.monotonic()
    with PeakMemory(args.device) as mem:
        try:
            r = eval_candidate(EvalRequest(reference_path=str(prob.reference), candidate_path=str(cand),
                                           device=args.device, trials=args.trials, tolerance="kernelbench",
                                           timing_budget_s=args.timing_budget, timeout_s=args.timeout))
            ev = r.model_dump(mode="json")
        except Exception as e:  # the tool itself raised: that is a harness error too
            ev = {"status": "harness-error", "error": f"{type(e).__name__}: {e}"}
    eager = next((s for s in ev.get("speedups") or [] if s.get("baseline") == "eager"), {})
    return {"key": prob.key, "outcome": classify(ev), "status": ev.get("status"), "verdict": ev.get("verdict"),
            "speed_verdict": eager.get("verdict"), "wall_s": round(time.monotonic() - t0, 2),
            "peak_gpu_mib": round(mem.peak / 2**20) if mem.peak is not None else None,
            "torch_peak_mib": ev.get("gpu_memory_peak_mib"),
            "reference_us": ((ev.get("timings") or {}).get("reference") or {}).get("median_us"),
            "flags": [f.get("id") for f in ev.get("flags") or []], "notes": (ev.get("notes") or [])[:3],
            "phases_s": ev.get("phases_s") or {},
            "error": (ev.get("error") or "")[:400] or None, "device": args.device}


def load_done(path: Path) -> dict[str, dict[str, Any]]:
    done: dict[str, dict[str, Any]] = {}
    if path.is_file():
        for line in path.read_text().splitlines():
            if line.strip():
                rec = json.loads(line)
                done[rec["key"]] = rec
    return done


# what the reference as its own candidate is expected to draw: it hands every operator back to PyTorch
DELEGATION_FLAGS = frozenset({"reference-ops", "shared-torch-ops"})


def false_flags(row: dict[str, Any]) -> list[str]:
    """The flags a reference drew as its own candidate beyond the delegation check's: false positives."""
    return [f for f in row.get("flags") or [] if f not in DELEGATION_FLAGS]


def summary_line(rows: list[dict[str, Any]]) -> str:
    count = {k: sum(r["outcome"] == k for r in rows) for k in ("ok", "harness-error", "oom", "too-large")}
    other = len(rows) - sum(count.values())
    large = [f"{r['key']} ({r['error']})" for r in rows if r["outcome"] == "too-large"]
    wrong = [f"{r['key']} ({','.join(false_flags(r))})" for r in rows if false_flags(r)]
    return (f"{len(rows)} problems: {count['ok']} judged correct, {count['harness-error']} harness errors, "
            f"{count['oom']} out of memory, {count['too-large']} too large, {other} other, "
            f"{len(wrong)} with a false flag"
            + (f"; too large: {'; '.join(large)}" if large else "")
            + (f"; false flags: {'; '.join(wrong)}" if wrong else ""))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("source", help="KernelBench checkout, or a folder of KernelBench-format problems")
    ap.add_argument("--level", type=int, action="append", help="levels (repeatable; default all)")
    ap.add_argument("--problems", help="ids or ranges, e.g. 1-10,19")
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    ap.add_argument("--out", default="kernelbench_sweep.jsonl", help="results, one JSON line per problem "
                                                                     "(appended; a rerun skips those there)")
    ap.add_argument("--trials", type=int, default=2)
    ap.add_argument("--timing-budget", type=float, default=0.5)
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per problem")
    ap.add_argument("--stop-after", type=float, metavar="SECONDS", help="start no new problem after this long "
                                                                         "(a rerun goes on from there)")
    ap.add_argument("--table", action="store_true", help="print the table of what --out holds; run nothing")
    args = ap.parse_args()
    from kernelscope.agent.kernelbench import find_problems

    source = Path(args.source).resolve()
    problems = find_problems(source, args.level, args.problems)
    tmp = Path(tempfile.mkdtemp(prefix="ks-sweep-"))
    use_private_store([source, tmp])
    out = Path(args.out)
    done = load_done(out)
    t0 = time.monotonic()
    for prob in [] if args.table else problems:
        if prob.key in done:
            continue
        if args.stop_after is not None and time.monotonic() - t0 > args.stop_after:
            break
        rec = sweep_one(prob, tmp, args)
        done[prob.key] = rec
        with out.open("a") as f:
            f.write(json.dumps(rec) + "\n")
        print(f"{rec['key']}: {rec['outcome']} ({rec['status']}, {rec['verdict']}) {rec['wall_s']} s "
              f"peak {rec['peak_gpu_mib']} MiB", file=sys.stderr, flush=True)
    rows = [done[p.key] for p in problems if p.key in done]
    print(f"\nKernelBench references as their own candidates ({device_line()}, {args.device}):")
    print(table(["problem", "outcome", "status", "verdict", "speed", "wall s", "peak GPU MiB", "torch peak MiB",
                 "flags"],
                [[r["key"], r["outcome"], r["status"], r["verdict"], r["speed_verdict"] or "-", r["wall_s"],
                  r["peak_gpu_mib"] if r["peak_gpu_mib"] is not None else "-",
                  r.get("torch_peak_mib") if r.get("torch_peak_mib") is not None else "-", ",".join(r["flags"]) or "-"]
                 for r in rows]))
    print("\n" + summary_line(rows) + (f" ({len(problems) - len(rows)} of {len(problems)} not swept yet: rerun "
                                         "to go on)" if len(rows) < len(problems) else ""))


if __name__ == "__main__":
    main()
