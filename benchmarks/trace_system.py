"""The trace tool's CUPTI path on real programs: which system rules fire on each case (and stay silent
on the fixed twins), and the overhead of tracing a PyTorch model of many small kernels against the
same run untraced, eager and as a CUDA graph.

    python benchmarks/trace_system.py                                   # the rule table and the overhead table
    python benchmarks/trace_system.py --save-fixtures tests/fixtures/trace   # also write the CPU-test fixtures
    python benchmarks/trace_system.py --skip-overhead

Needs an NVIDIA GPU, nvcc and CUPTI (the tracer is built with nvcc), and torch for the PyTorch cases.
Cases: examples/system/copy_loop.cu (planted offload loop and its pipelined twin), the planted suite's
12-many-tiny-launches program, and examples/system/small_ops.py eager and as a CUDA graph.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import REPO, device_line, median, table, use_private_store

SYSTEM = REPO / "examples" / "system"
EVERY = {"system.launch-overhead", "system.copies-in-loop", "system.pageable-copies", "system.synchronization",
         "system.allocation-churn", "system.copies-not-overlapped"}
# case -> (program, args, rules that must fire, class expected or None)
CASES: dict[str, tuple[str, list[str], set[str], str | None]] = {
    "copy-loop-planted": ("copy_loop", [], {"system.copies-in-loop", "system.pageable-copies", "system.synchronization",
                                            "system.allocation-churn", "system.copies-not-overlapped"}, None),
    # pinned, preallocated, pipelined over two streams: none of those fire
    "copy-loop-fixed": ("copy_loop", ["fixed"], set(), None),
    # one-shot program: its 12 MB of pageable copies in and out are real too
    "many-tiny-launches": ("planted12", [], {"system.launch-overhead", "system.pageable-copies"}, "launch-bound"),
    "torch-eager": ("small_ops", ["--steps", "20", "--warmup", "3"], {"system.launch-overhead"}, "launch-bound"),
    "torch-graph": ("small_ops", ["--graph", "--steps", "20", "--warmup", "3"], set(), None),
}


def build(name: str) -> list[str]:
    """The command line of a case's program (C++ ones compiled through the compile tool)."""
    from kernelscope.artifacts import get_store
    from kernelscope.models.requests import CompileRequest
    from kernelscope.tools.compile import compile_cuda

    if name == "small_ops":
        return [sys.executable, str(SYSTEM / "small_ops.py")]
    cu = SYSTEM / "copy_loop.cu" if name == "copy_loop" else REPO / "examples/planted/12-many-tiny-launches/planted.cu"
    comp = compile_cuda(CompileRequest(source=cu.read_text(), filename=cu.name, output="executable", flags=["-O3"]))
    if not comp.success or comp.artifact_id is None:
        raise SystemExit(f"{cu.name}: compile failed\n{comp.log}")
    from kernelscope.tools.run import stage_program

    exe = get_store().require(comp.artifact_id).path("executable")
    assert exe is not None
    return [str(stage_program(exe, Path(tempfile.mkdtemp(prefix="ks-trace-bench-"))))]  # as the tools run it


def traced_run(argv: list[str], trace_dir: Path, lib: Path) -> tuple[subprocess.CompletedProcess[str], float]:
    from kernelscope.measure.cupti import tracer_env

    trace_dir.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, **tracer_env(lib, trace_dir)}
    t0 = time.perf_counter()
    r = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=trace_dir)
    return r, time.perf_counter() - t0


def plain_run(argv: list[str]) -> tuple[subprocess.CompletedProcess[str], float]:
    t0 = time.perf_counter()
    r = subprocess.run(argv, capture_output=True, text=True)
    return r, time.perf_counter() - t0


def step_us(r: subprocess.CompletedProcess[str]) -> float:
    return float(json.loads(r.stdout.strip().splitlines()[-1])["step_us"])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--save-fixtures", type=Path, help="write each case's trace (gzipped JSON Lines) here")
    ap.add_argument("--skip-overhead", action="store_true")
    ap.add_argument("--repeats", type=int, default=5, help="runs per variant in the overhead table")
    ap.add_argument("--steps", type=int, default=200, help="steps per run in the overhead table")
    args = ap.parse_args()

    use_private_store()
    from kernelscope.measure.cupti import build_tracer
    from kernelscope.measure.timeline import load_cupti
    from kernelscope.measure.trace import diagnose_timeline

    t0 = time.perf_counter()
    lib = build_tracer()
    print(f"tracer built in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    programs = {name: build(name) for name in {c[0] for c in CASES.values()}}
    rows, failures = [], 0
    for case, (prog, cargs, must, cls) in CASES.items():
        with tempfile.TemporaryDirectory() as tmp:
            r, wall = traced_run([*programs[prog], *cargs], Path(tmp) / "trace", lib)
            if r.returncode != 0:
                print(f"{case}: exit {r.returncode}\n{r.stdout[-1500:]}\n{r.stderr[-1500:]}", file=sys.stderr)
                return 1
            tl = load_cupti(Path(tmp) / "trace")
            summary, _facts, findings = diagnose_timeline(tl)
            fired = {f.rule for f in findings}
            ok = must <= fired and not ((EVERY - must) & fired) and (cls is None or summary.system_class == cls)
            failures += not ok
            rows.append([case, summary.system_class, f"{summary.gpu_busy_pct:.0f}%",
                         f"{summary.launch_overhead_pct:.0f}%", summary.launches, summary.launch_calls,
                         ", ".join(sorted(x.removeprefix("system.") for x in fired)) or "-", "ok" if ok else "WRONG",
                         round(wall, 2)])
            if args.save_fixtures:
                out = args.save_fixtures / case
                shutil.rmtree(out, ignore_errors=True)
                out.mkdir(parents=True)
                for i, f in enumerate(sorted((Path(tmp) / "trace").glob("trace-*.jsonl"))):
                    # the pid in the name is this run's; a stable name keeps the fixture diff clean
                    (out / f"trace-{1000 + i}.jsonl.gz").write_bytes(gzip.compress(f.read_bytes(), mtime=0))
                (out / "summary.json").write_text(summary.model_dump_json(indent=1))
                (out / "case.json").write_text(json.dumps({"program": prog, "args": cargs, "must_fire": sorted(must),
                                                           "class": cls, "stdout": r.stdout[-500:]}, indent=1))
    print(device_line())
    print(table(["case", "system class", "GPU busy", "waiting for launches", "kernels", "launch calls",
                 "rules fired", "expected", "traced wall s"], rows))
    if args.skip_overhead:
        return 1 if failures else 0

    # overhead: the same PyTorch run with and without the tracer, interleaved
    orows = []
    for mode in ("eager", "graph"):
        argv = [*programs["small_ops"], "--steps", str(args.steps), *(["--graph"] if mode == "graph" else [])]
        plain_s, traced_s, plain_w, traced_w = [], [], [], []
        for _ in range(args.repeats):
            r, w = plain_run(argv)
            plain_s.append(step_us(r))
            plain_w.append(w)
            with tempfile.TemporaryDirectory() as tmp:
                r, w = traced_run(argv, Path(tmp) / "trace", lib)
                traced_s.append(step_us(r))
                traced_w.append(w)
        orows.append([mode, round(median(plain_s), 1), round(median(traced_s), 1),
                      f"{median(traced_s) / median(plain_s):.2f}x", round(median(plain_w), 2),
                      round(median(traced_w), 2), f"{median(traced_w) / median(plain_w):.2f}x",
                      f"{min(plain_s):.1f}-{max(plain_s):.1f} / {min(traced_s):.1f}-{max(traced_s):.1f}"])
    print(f"\noverhead: examples/system/small_ops.py, {args.steps} steps of 150 kernels, {args.repeats} runs each "
          "(medians)")
    print(table(["mode", "step us untraced", "step us traced", "step ratio", "process s untraced",
                 "process s traced", "process ratio", "step us range (untraced / traced)"], orows))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
