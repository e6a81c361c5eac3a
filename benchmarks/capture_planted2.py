"""Capture the second planted suite on a GPU host, in one command: tests/fixtures/planted2/<case>/.

    python benchmarks/capture_planted2.py                       # every case (about 4-5 min on an H100)
    python benchmarks/capture_planted2.py --cases 07,13 --jobs 16

Two phases. CPU, ``--jobs`` cases at a time: each program compiled by kernelscope's compile tool (the flags
and -lineinfo analyze's programs get; ``compile.json``, the ptxas resources) and its SASS statistics
(``sass.json``). GPU, one program at a time: a profiled or traced program shares the GPU with nothing,
because a kernel replayed by Nsight Compute next to another process's kernels would measure both.

Per kernel case, ONE Nsight Compute run profiles every launch of both kernels with the union of what
analyze's two stages can ask for: the light stage's metrics, and the sections and rule metrics of the
deep stage for every class (so the replay does not depend on which class the light stage found, and
survives a change of the classifier). It is written as ``deep.ncu-rep.gz``; the replay uses it for both
stages. A case that launches a kernel more than once (13: 256 launches) gets analyze's own split: a
light run of every launch (metrics only) as ``light.ncu-rep.gz``, and the deep run of each kernel's first
launch. A system case is traced twice with kernelscope's CUPTI tracer (the program, then the program
with ``fixed``): ``trace-bad/`` and ``trace-fixed/``. ``capture.json`` records each step's wall time.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import use_private_store
from planted2 import FIXTURES, SUITE, PlantedCase, load_cases


def deep_plan() -> tuple[list[str], list[str]]:
    """Sections and metrics: the deep stage's for every class, with the light stage's metrics."""
    from kernelscope.heuristics.pipeline import STAGE1_METRICS, STAGE2, stage2_plan

    plan = stage2_plan(sorted(STAGE2))
    return plan.sections, list(dict.fromkeys([*STAGE1_METRICS, *plan.metrics]))


def build(case: PlantedCase, out: Path) -> dict[str, Any]:
    """Phase 1 (CPU): compile the case's program, write compile.json and sass.json; the executable's path."""
    from kernelscope.artifacts import get_store
    from kernelscope.models.requests import CompileRequest
    from kernelscope.tools.compile import compile_cuda
    from kernelscope.tools.sass import sass_for_artifact

    t0 = time.monotonic()
    src = (SUITE / case.id / "planted.cu").read_text()
    # inline source named planted.cu: the reports name planted.cu:<line>, as the expectations do
    comp = compile_cuda(CompileRequest(source=src, filename="planted.cu", output="executable", flags=["-O3"]))
    if not comp.success or comp.artifact_id is None:
        raise SystemExit(f"{case.id}: compile failed\n{comp.log}")
    d = out / case.id
    d.mkdir(parents=True, exist_ok=True)
    (d / "compile.json").write_text(comp.model_dump_json(indent=1, exclude={"log"}))
    (d / "sass.json").write_text(sass_for_artifact(comp.artifact_id).model_dump_json(
        indent=1, exclude={"listing_excerpt"}))
    exe = Path(str(get_store().require(comp.artifact_id).path("executable")))
    return {"exe": exe, "build_s": round(time.monotonic() - t0, 2)}


def ncu_run(exe: Path, report: Path, *, sections: list[str], metrics: list[str], kernel_id: str | None,
            import_source: bool, timeout_s: float) -> float:
    """One Nsight Compute run of the program, flags as analyze builds them; its wall seconds."""
    from kernelscope.measure.capture import ncu_binary, ncu_flags
    from kernelscope.models.requests import NcuOptions
    from kernelscope.tools.run import stage_program

    opts = NcuOptions(sections=sections, metrics=metrics, clock_control="none", import_source=import_source)
    with tempfile.TemporaryDirectory(prefix="planted2-") as tmp:
        ws = Path(tmp)
        prog = stage_program(exe, ws)
        argv = [str(ncu_binary()), "--export", str(ws / "rep"), "--force-overwrite", *ncu_flags(opts, ws, kernel_id),
                str(prog)]
        t0 = time.monotonic()
        r = subprocess.run(argv, cwd=ws, capture_output=True, text=True, timeout=timeout_s)
        took = time.monotonic() - t0
        if not (ws / "rep.ncu-rep").is_file():
            raise SystemExit(f"ncu wrote no report for {report.parent.name} (exit {r.returncode}):\n"
                             f"{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
        if r.returncode != 0 or not re.search(r"^ok ", r.stdout, re.M):  # kept: the kernels ran, but say so
            print(f"warning: {report.parent.name}: exit {r.returncode}, the program did not print ok:\n"
                  f"{r.stdout[-1000:]}", file=sys.stderr)
        # kept gzipped (a seventh of the size); mtime 0, so an unchanged report is an unchanged file
        report.write_bytes(gzip.compress((ws / "rep.ncu-rep").read_bytes(), compresslevel=9, mtime=0))
    return round(took, 2)


def trace_run(exe: Path, dest: Path, args: list[str], timeout_s: float) -> float:
    """One run under kernelscope's CUPTI tracer; the timeline gzipped into ``dest``; its wall seconds."""
    from kernelscope.config import get_settings
    from kernelscope.measure.trace import run_cupti
    from kernelscope.tools.run import stage_program

    with tempfile.TemporaryDirectory(prefix="planted2-") as tmp:
        ws = Path(tmp)
        prog = stage_program(exe, ws)
        t0 = time.monotonic()
        run = run_cupti([str(prog), *args], ws, dict(os.environ), timeout_s, get_settings(), None)
        took = time.monotonic() - t0
        files = sorted((ws / "trace").glob("trace-*.jsonl"))
        if run.timeline is None or not files:
            raise SystemExit(f"trace of {exe.name} {args} wrote no timeline: {run.notes} {run.proc.stderr[-2000:]}")
        if dest.exists():
            shutil.rmtree(dest)
        dest.mkdir(parents=True)
        for i, f in enumerate(files):  # one file per traced process; the pid in the name is not kept
            with f.open("rb") as src, gzip.open(dest / f"trace-{1000 + i}.jsonl.gz", "wb", compresslevel=9) as gz:
                shutil.copyfileobj(src, gz)
    return round(took, 2)


def capture(case: PlantedCase, exe: Path, out: Path, plan: tuple[list[str], list[str]], timeout_s: float) -> dict:
    """Phase 2 (GPU) for one case: its reports or traces under out/<case>/; the wall time of each step."""
    d = out / case.id
    for stale in ("light.ncu-rep.gz", "deep.ncu-rep.gz"):
        (d / stale).unlink(missing_ok=True)
    if case.kind == "system":
        return {"trace_bad_s": trace_run(exe, d / "trace-bad", [], timeout_s),
                "trace_fixed_s": trace_run(exe, d / "trace-fixed", ["fixed"], timeout_s)}
    from kernelscope.heuristics.pipeline import STAGE1_METRICS

    sections, metrics = plan
    times: dict[str, float] = {}
    kid = None
    if case.launches > 1:  # analyze's split: every launch light, the first launch of each kernel deep
        times["light_s"] = ncu_run(exe, d / "light.ncu-rep.gz", sections=[], metrics=list(STAGE1_METRICS),
                                   kernel_id=None, import_source=False, timeout_s=timeout_s)
        names = "|".join(re.escape(k) for k in (case.kernel, case.fixed_kernel, *case.challengers) if k)
        kid = f"::regex:^({names})$:1"
    times["deep_s"] = ncu_run(exe, d / "deep.ncu-rep.gz", sections=sections, metrics=metrics, kernel_id=kid,
                              import_source=True, timeout_s=timeout_s)
    return times


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", help="comma-separated case prefixes (default: all)")
    ap.add_argument("--out", type=Path, default=FIXTURES)
    ap.add_argument("--jobs", type=int, default=min(16, os.cpu_count() or 4), help="parallel builds (CPU phase)")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per profiled or traced run")
    ap.add_argument("--build-only", action="store_true", help="phase 1 only: compile.json and sass.json (no GPU)")
    args = ap.parse_args()
    use_private_store()
    from kernelscope.measure.capture import ncu_binary

    if not args.build_only:
        ncu_binary()  # a clear error before any build when Nsight Compute is missing
    cases = load_cases()
    if args.cases:
        cases = [c for c in cases if any(c.id.startswith(p) for p in args.cases.split(","))]
    t0 = time.monotonic()
    with ThreadPoolExecutor(max(1, args.jobs)) as pool:
        built = dict(zip([c.id for c in cases], pool.map(lambda c: build(c, args.out), cases), strict=True))
    t_build = time.monotonic() - t0
    print(f"built {len(cases)} programs in {t_build:.1f} s", file=sys.stderr, flush=True)
    if args.build_only:
        return 0
    plan = deep_plan()
    log: dict[str, Any] = {}
    for c in cases:
        t = capture(c, built[c.id]["exe"], args.out, plan, args.timeout)
        log[c.id] = {"build_s": built[c.id]["build_s"], **t}
        print(f"{c.id}: {t}", file=sys.stderr, flush=True)
    t_gpu = time.monotonic() - t0 - t_build
    (args.out / "capture.json").write_text(json.dumps(
        {"sections": plan[0], "metrics": plan[1], "build_wall_s": round(t_build, 1), "gpu_wall_s": round(t_gpu, 1),
         "cases": log}, indent=1) + "\n")
    print(f"done: {len(cases)} cases, build {t_build:.0f} s, GPU phase {t_gpu:.0f} s -> {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
