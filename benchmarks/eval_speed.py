"""End-to-end evaluation time of one new candidate (compile + correctness + timing), warm server:
the NVRTC fast path vs a torch load_inline build of the same kernel, side by side.

    python benchmarks/eval_speed.py [--runs 3] [--problem softmax]

Each run evaluates a candidate whose CUDA source is new (a nonce comment), so the kernel build is
never a cache hit, while the process-level caches (Python, torch, CUDA driver) are warm after one
discarded warm-up evaluation per path. Target: fast path <= 1.5 s and >= 20x faster than load_inline.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import PROBLEMS, device_line, median, table, use_private_store


def with_nonce(src: str, marker: str) -> str:
    i = src.index(marker)
    return src[:i] + f"// nonce {uuid.uuid4().hex}\n" + src[i:]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--problem", default="softmax")
    ap.add_argument("--timing-budget", type=float, default=0.5, help="the run tool's default")
    ap.add_argument("--load-inline-runs", type=int, default=None,
                    help="runs of the load_inline side (default: --runs; each is a ~60 s build)")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="ks-evalspeed-"))
    use_private_store([tmp])
    from kernelscope.models.requests import EvalRequest
    from kernelscope.tools.run import eval_candidate

    prob = PROBLEMS / args.problem
    paths = {"fast path (NVRTC)": (prob / "better.py", 'extern "C"'),
             "load_inline": (prob / "load_inline.py", "__global__")}
    results: dict[str, list[tuple[float, float, str]]] = {}
    outside: dict[str, list[dict[str, float]]] = {}  # EvalResult.overhead_s per run
    for label, (path, marker) in paths.items():
        src = path.read_text()
        results[label] = []
        runs = args.runs if label != "load_inline" or args.load_inline_runs is None else args.load_inline_runs
        if runs < 1:  # --load-inline-runs 0: the fast path alone (no ~60 s build)
            del results[label]
            continue
        for i in range(runs + 1):
            cand = tmp / f"cand_{uuid.uuid4().hex[:8]}.py"
            cand.write_text(with_nonce(src, marker))
            r = eval_candidate(EvalRequest(reference_path=str(prob / "reference.py"), candidate_path=str(cand),
                                           device="cuda", timing_budget_s=args.timing_budget, timeout_s=900))
            ok = r.correctness.correct if r.correctness else False
            print(f"{label} run {i}: {r.wall_s:.2f} s (harness {r.harness_wall_s or 0:.2f} s) verdict={r.verdict} "
                  f"correct={ok} {r.error or ''} phases={r.phases_s} outside={r.overhead_s} "
                  f"pre-build={r.build_s} {r.build_note or ''}", file=sys.stderr)
            if i > 0:  # run 0 warms the process-level caches
                results[label].append((r.wall_s, r.harness_wall_s or 0.0, r.verdict))
                outside.setdefault(label, []).append(r.overhead_s)
    fast = median([w for w, _, _ in results["fast path (NVRTC)"]])
    slow = median([w for w, _, _ in results["load_inline"]]) if "load_inline" in results else None
    print(f"\nEnd-to-end eval of a new candidate, {args.problem} ({device_line()}), median of "
          f"{', '.join(f'{len(v)} ({k})' for k, v in results.items())}:")
    parts = ("prepare", "lease", "spawn", "setup", "hand_off")
    rows = [[label, median([w for w, _, _ in v]), median([h for _, h, _ in v]),
             *(median([o.get(p, 0.0) for o in outside.get(label, [])] or [0.0]) for p in parts),
             ", ".join(x for _, _, x in v)]
            for label, v in results.items()]
    print(table(["path", "wall s", "harness s", *(f"{p} s" for p in parts), "verdicts"], rows))
    print(f"\nfast path {fast:.2f} s (target <= 1.5 s): {'MET' if fast <= 1.5 else 'NOT MET'}"
          + (f"; load_inline / fast path = {slow / fast:.1f}x (target >= 20x): "
             f"{'MET' if slow / fast >= 20 else 'NOT MET'}" if slow is not None else "; load_inline not run"))


if __name__ == "__main__":
    main()
