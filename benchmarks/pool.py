"""The evaluation pool: candidates evaluated per minute with 1 and 2 GPUs on the same search, and the Ray
backend's overhead per task against the local backend.

    python benchmarks/pool.py gpus [--problem softmax] [--budget 32]
    python benchmarks/pool.py ray [--evals 15] [--device cpu]

``gpus`` runs `kernelscope optimize` (offline proposer, MCTS, no profiling) on one knob-annotated
problem, each configuration with a fresh server and run directory: one GPU with one evaluation in
flight (the sequential search), then every GPU with one evaluation in flight per GPU (several nodes
expanded per round, virtual loss). The rate is evaluations per minute between the first and the last
evaluation (server start-up excluded, the same for both); the target is >= 1.8x on 2 GPUs.

``ray`` evaluates a small candidate again and again, each time with a new source (as a search does,
so no build is cached), one at a time, through the local pool and
through the Ray pool on a local Ray cluster started here, after warm-up on both, and reports the median
wall time per evaluation and the difference (Ray's overhead per task: scheduling, shipping the sources
and the result).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import PROBLEMS, REPO, device_line, table, use_private_store


def search_rate(problem: str, budget: int, gpus: list[str], parallel: int, out: Path) -> dict[str, object]:
    import anyio

    from kernelscope.agent.optimize import OptimizeConfig, optimize

    d = PROBLEMS / problem
    os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(gpus)  # what the server started for this run sees
    stamps: list[float] = []

    def on_step(st) -> None:  # type: ignore[no-untyped-def]
        stamps.append(time.monotonic())

    cfg = OptimizeConfig(reference=d / "reference.py", candidate=d / "candidate.py", out=out, budget=budget,
                         analyze="never", device="cuda", parallel=parallel, report=False)
    t0 = time.monotonic()
    s = anyio.run(lambda: optimize(cfg, on_step=on_step))
    span = stamps[-1] - stamps[0]
    return {"gpus": len(gpus), "parallel": parallel, "evaluations": s.evaluations,
            "per_min": 60.0 * (len(stamps) - 1) / span if span > 0 else float("nan"), "wall_s": time.monotonic() - t0,
            "best": s.best_speedup or 0.0, "workers": ", ".join(f"{w}:{n}" for w, n in s.workers.items())}


def cmd_gpus(args: argparse.Namespace) -> None:
    from kernelscope.sandbox.gpu import GpuPool

    ids = GpuPool.from_environment().visible  # what the server would see (CUDA_VISIBLE_DEVICES honoured)
    if not ids:
        raise SystemExit("no GPU here: `gpus` measures evaluations per minute on real GPUs")
    configs = [([ids[0]], 1)]
    if len(ids) >= 2:
        configs.append((ids[:2], 2))
    else:
        print("one GPU here: only the 1-GPU row can be measured", file=sys.stderr)
    rows = []
    base = Path(tempfile.mkdtemp(prefix="ks-poolbench-"))
    for i, (gpus, parallel) in enumerate(configs):
        r = search_rate(args.problem, args.budget, gpus, parallel, base / f"run{i}")
        print(r, file=sys.stderr)
        rows.append(r)
    one = rows[0]["per_min"]
    print(f"\nEvaluations per minute, `optimize` on {args.problem} (budget {args.budget}, offline proposer, MCTS, "
          f"no profiling), {device_line()}")
    print(table(["GPUs", "in flight", "evaluations", "per minute", "vs 1 GPU", "wall s", "best speedup", "per worker"],
                [[r["gpus"], r["parallel"], r["evaluations"], r["per_min"], r["per_min"] / one,  # type: ignore[operator]
                  r["wall_s"], r["best"], r["workers"]] for r in rows]))


def cmd_ray(args: argparse.Namespace) -> None:
    import ray

    use_private_store()
    from kernelscope.models.requests import EvalRequest
    from kernelscope.sandbox.pool import LocalPool, RayPool
    from kernelscope.tools.run import RUNNER

    cases = REPO / "tests" / "evalcases"
    ref = (cases / "ref_softmax.py").read_text()
    cand = (cases / "ok_softmax.py").read_text()
    if args.device == "cuda":
        ref, cand = ((PROBLEMS / "softmax" / n).read_text() for n in ("reference.py", "better.py"))

    def req() -> EvalRequest:  # a new source each time (a nonce comment), as in a search: nothing cached
        nonce = f"# nonce {uuid.uuid4().hex}\n" if args.device == "cpu" else None
        src = nonce + cand if nonce else cand.replace('extern "C"', f"// nonce {uuid.uuid4().hex}\n" + 'extern "C"', 1)
        return EvalRequest(reference=ref, candidate=src, device=args.device, trials=2, timing_budget_s=0.1,
                           min_runs=5, max_runs=50)

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    pools = {"local": LocalPool(cpu_workers=1, build_workers=1), "ray (local cluster)": RayPool()}
    walls: dict[str, list[float]] = {}
    for pool in pools.values():
        for _ in range(2):  # warm-up: the fork server (and on Ray, the worker process) starts once
            pool.evaluate(req(), runner=RUNNER)
    for _ in range(args.evals):  # interleaved, so drift on this machine hits both alike
        for name, pool in pools.items():
            t0 = time.monotonic()
            r = pool.evaluate(req(), runner=RUNNER)
            assert r.correctness and r.correctness.correct, r.error
            walls.setdefault(name, []).append(time.monotonic() - t0)
    ray.shutdown()
    local = statistics.median(walls["local"])
    print(f"\nOne evaluation at a time, {args.evals} each, interleaved, device={args.device}, {device_line()}")
    rows = []
    for name, w in walls.items():
        q = statistics.quantiles(w, n=4)
        med = statistics.median(w)
        rows.append([name, med, q[0], q[2], med - local])
    print(table(["pool", "median s/eval", "p25", "p75", "overhead vs local s"], rows))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("gpus", help="evaluations per minute with 1 and 2 GPUs")
    g.add_argument("--problem", default="softmax")
    g.add_argument("--budget", type=int, default=32)
    g.set_defaults(fn=cmd_gpus)
    r = sub.add_parser("ray", help="Ray's overhead per task against the local pool")
    r.add_argument("--evals", type=int, default=15)
    r.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    r.set_defaults(fn=cmd_ray)
    args = ap.parse_args()
    args.fn(args)


if __name__ == "__main__":
    main()
