"""run: evaluate a candidate against a reference (eval mode), or run a compiled program (program mode).

Both go through the sandbox: a private workspace, the job's own process group, a wall-clock limit
(the whole group is killed), capped output, a minimal environment without network where the host
allows, and a GPU lease (one timed job per GPU). A crash (illegal address, trap, segfault, abort)
or a hang is a structured result, and the next job on that GPU starts in a fresh process.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import logging
import os
import re
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import ValidationError

import kernelscope
from kernelscope.artifacts import Artifact, get_store
from kernelscope.config import Settings, ensure_dirs, get_settings
from kernelscope.errors import InputError, NotAvailable
from kernelscope.models import (
    CheatFlag,
    Correctness,
    EnergyReading,
    EvalResult,
    FlushProbe,
    HostCover,
    KernelTime,
    ProgramResult,
    Speedup,
    TimingStats,
    TrialResult,
)
from kernelscope.models.requests import EvalRequest, ProgramRequest
from kernelscope.sandbox.forkserver import ForkServerError, get_fork_server
from kernelscope.sandbox.gpu import GpuPool, Lease, gpu_pool
from kernelscope.sandbox.paths import resolve_user_path
from kernelscope.sandbox.process import Limits, ProcessResult, build_env, run_process
from kernelscope.sandbox.workspace import Workspace
from kernelscope.toolkit.toolchain import ToolMissing, require

if TYPE_CHECKING:
    from kernelscope.sandbox.pool import LocalPool

log = logging.getLogger("kernelscope.tools.run")
HARNESS = Path(__file__).with_name("eval_harness.py")
PACKAGE_PARENT = str(Path(kernelscope.__file__).resolve().parent.parent)
WaitCallback = Callable[[int, float], None]


def _read_source(text: str | None, path: str | None, what: str, s: Settings) -> str:
    if (text is None) == (path is None):
        raise InputError(f"Give exactly one of `{what}` (the Python source) or `{what}_path`.")
    if path is not None:
        p = resolve_user_path(path, s.allowed_roots)
        if not p.is_file():
            raise InputError(f"{path!r} is not a regular file.")
        if p.stat().st_size > s.max_source_bytes:
            raise InputError(f"{path!r} is larger than {s.max_source_bytes} bytes.")
        data = p.read_bytes()
    else:
        assert text is not None
        data = text.encode("utf-8", errors="surrogatepass")
        if len(data) > s.max_source_bytes:
            raise InputError(f"The {what} source is {len(data)} bytes; the limit is {s.max_source_bytes}.")
    if b"\x00" in data:
        raise InputError(f"The {what} source contains NUL bytes.")
    try:
        src = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputError(f"The {what} source is not valid UTF-8 (byte {e.start}).") from None
    try:
        compile(src, f"{what}.py", "exec")
    except SyntaxError as e:
        raise InputError(f"The {what} source has a Python syntax error at line {e.lineno}: {e.msg}.") from None
    return src


def _resolve_device(device: str, gpus: GpuPool) -> str:
    import importlib.util

    n_gpus = len(gpus)
    if importlib.util.find_spec("torch") is None:
        raise NotAvailable("Evaluating candidates", "torch is not importable in kernelscope's Python environment",
                           "pip install 'kernelscope[gpu]' (torch and CuPy), or torch's CPU build to evaluate on CPU")
    if device == "cuda" and not n_gpus:
        raise NotAvailable("Evaluating on a GPU", "no NVIDIA GPU is visible to this server",
                           "run kernelscope on a GPU host, or pass device='cpu' to check correctness on the CPU")
    if device != "auto":
        return device
    return "cuda" if n_gpus else "cpu"


def _torch_arch_list() -> str:
    from kernelscope.tools.compile import local_default_arch

    digits = "".join(ch for ch in local_default_arch() if ch.isdigit())
    return f"{digits[:-1]}.{digits[-1]}" if len(digits) >= 2 else "9.0"


def job_env(ws: Path, home: Path, lease: Lease | None, *, candidate: str | None = None,
            builds: Path | None = None) -> dict[str, str]:
    """A sandboxed job's environment. ``lease``: the GPU (or CPU worker) it runs on, whose own cache
    directory holds what is compiled while it runs; ``candidate``: the source whose extension builds
    live in the shared build cache (``builds``, default the home's), keyed by its content."""
    from kernelscope.sandbox.pool import build_cache, worker_dir

    env = build_env(home=ws)
    env["PYTHONPATH"] = PACKAGE_PARENT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    shared = builds if builds is not None else build_cache(home)
    env["KERNELSCOPE_NVRTC_CACHE"] = str(shared / "nvrtc")  # fast-path cubins, by content, for every worker
    # load_inline builds, one folder per candidate source: two candidates that name their extension
    # alike never build into (or load) each other's folder
    key = hashlib.sha256(candidate.encode()).hexdigest()[:16] if candidate is not None else "shared"
    env["TORCH_EXTENSIONS_DIR"] = str(shared / "torch-extensions" / key)
    own = worker_dir(home, lease.worker if lease is not None else "cpu")
    env["CUPY_CACHE_DIR"] = str(own / "cupy")
    env["TRITON_CACHE_DIR"] = str(own / "triton")
    env["TORCHINDUCTOR_CACHE_DIR"] = str(own / "inductor")
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    cutlass_root = get_settings().cutlass_root
    if cutlass_root is not None:  # CudaKernel(cutlass=True) in a candidate uses the server's CUTLASS
        env["KERNELSCOPE_CUTLASS_ROOT"] = str(cutlass_root)
    if lease is not None and lease.kind == "gpu":
        env["CUDA_VISIBLE_DEVICES"] = lease.visible
    else:
        env["CUDA_VISIBLE_DEVICES"] = ""  # a CPU job sees no GPU
    # extension builds target the GPUs here whether or not the job sees one, so a pre-build (no GPU)
    # and the evaluation (with one) produce the same cached build
    env.setdefault("TORCH_CUDA_ARCH_LIST", _torch_arch_list())
    return env


def prewarm() -> bool:
    """Start the evaluation fork server now (imports torch once) so the first eval is fast; False
    where torch is not importable here."""
    import importlib.util

    if importlib.util.find_spec("torch") is None:
        return False
    s = ensure_dirs()
    return get_fork_server(HARNESS, forkserver_env(s.home)) is not None


def forkserver_env(home: Path) -> dict[str, str]:
    env = build_env(home=home)
    env["PYTHONPATH"] = PACKAGE_PARENT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def eval_candidate(req: EvalRequest, settings: Settings | None = None, *, cancel: threading.Event | None = None,
                   on_wait: WaitCallback | None = None) -> EvalResult:
    """Evaluate a candidate against its reference on the configured evaluation pool (``tools.pool``:
    this host's GPUs by default, or a Ray cluster)."""
    from kernelscope.sandbox.pool import current_pool

    return current_pool().evaluate(req, settings, cancel=cancel, on_wait=on_wait)


def resolve_sources(req: EvalRequest, s: Settings) -> tuple[str, str]:
    """The reference's and the candidate's source text (read from the allowed roots where paths were given)."""
    return (_read_source(req.reference, req.reference_path, "reference", s),
            _read_source(req.candidate, req.candidate_path, "candidate", s))


_FAST_MARKERS = ("kernelscope.fast", "CudaKernel")


def needs_build(candidate: str, arch: str | None) -> bool:
    """Whether a candidate has something to build before it takes a GPU: extensions (load_inline), or
    fast-path kernels when the GPUs' target ``arch`` is known."""
    return needs_extension_build(candidate) or (arch is not None and any(m in candidate for m in _FAST_MARKERS))


def _write_config(ws: Path, req: EvalRequest, ref_src: str, cand_src: str, device: str) -> None:
    (ws / "reference.py").write_text(ref_src)
    (ws / "candidate.py").write_text(cand_src)
    cfg = req.model_dump(exclude={"reference", "candidate", "reference_path", "candidate_path", "timeout_s",
                                  "gpu", "device", "executor"})
    cfg.update({"reference_path": str(ws / "reference.py"), "candidate_path": str(ws / "candidate.py"),
                "device": "cuda:0" if device == "cuda" else "cpu"})
    if cfg["rtol"] is None:
        cfg.pop("rtol")
    if cfg["atol"] is None:
        cfg.pop("atol")
    (ws / "config.json").write_text(json.dumps(cfg))


def _eval_limits(req: EvalRequest) -> Limits:
    return Limits(wall_s=req.timeout_s, output_bytes=256 * 1024, isolate_network=True, file_size_bytes=4 << 30)


def build_only(req: EvalRequest, s: Settings, builds: Path, arch: str | None) -> tuple[float, str | None]:
    """Build a candidate's extensions and (for ``arch``) its fast-path cubins into ``builds`` on this CPU,
    with no evaluation: the Ray pool's build task."""
    ref_src, cand_src = resolve_sources(req, s)
    with Workspace(prefix="build-") as ws:
        _write_config(ws.path, req, ref_src, cand_src, "cpu")
        return _prebuild(ws.path, s, req, _eval_limits(req), None, cand_src, arch, builds)


def evaluate_here(req: EvalRequest, settings: Settings | None, pool: LocalPool, *,
                  cancel: threading.Event | None = None, on_wait: WaitCallback | None = None) -> EvalResult:
    """One evaluation on this host: a build on a CPU build worker where there is something to build,
    then the timed job on a GPU worker (or a CPU worker for ``device='cpu'``)."""
    s = ensure_dirs(settings)
    ref_src, cand_src = resolve_sources(req, s)
    device = _resolve_device(req.device, pool.gpus)
    t_start = time.monotonic()
    ws = Workspace(prefix="eval-")
    try:
        _write_config(ws.path, req, ref_src, cand_src, device)
    except BaseException:
        ws.cleanup()
        raise
    result_path = ws.path / "result.json"
    # -s: no user site-packages; PYTHONPATH (set by job_env) makes kernelscope.fast importable
    argv = [sys.executable, "-s", str(HARNESS), str(ws.path / "config.json"), str(result_path)]
    limits = _eval_limits(req)

    marks: dict[str, float] = {"start": time.time()}  # wall-clock marks for EvalResult.overhead_s

    def execute(lease: Lease) -> ProcessResult:
        env = job_env(ws.path, s.home, lease, candidate=cand_src)
        marks["submit"] = time.time()
        fs = get_fork_server(HARNESS, forkserver_env(s.home)) if req.executor == "auto" else None
        if fs is not None:
            try:
                return fs.run(cfg=ws.path / "config.json", out=result_path, cwd=ws.path, env=env, limits=limits,
                              cancel=cancel)
            except ForkServerError as e:
                if result_path.exists():  # the job finished; only its exit report was lost (server shutdown)
                    return ProcessResult(argv=argv, returncode=None, stderr=str(e))
                log.warning("fork server failed (%s); spawning this job", e)
        return run_process(argv, cwd=ws.path, limits=limits, env=env, cancel=cancel)

    # Builds run first, on a CPU build worker without the GPU: minutes of compiling extensions
    # (load_inline) must not hold the lease, and while every GPU is busy a fast-path candidate's NVRTC
    # build goes ahead too, so it overlaps the evaluations under way. The outputs are cached by content,
    # so the evaluation below loads them at once. A failed pre-build is not an answer: the evaluation
    # then builds (and reports) it itself.
    build_s: float | None = None
    build_note: str | None = None
    arch = pool.arch() if device == "cuda" and pool.gpus.contended() else None
    if needs_build(cand_src, arch):
        try:
            with pool.builds.lease(cancel=cancel):
                build_s, build_note = _prebuild(ws.path, s, req, limits, cancel, cand_src, arch)
        except BaseException:
            ws.cleanup()
            raise

    # The job runs on a worker thread that holds the lease and the workspace until the process has
    # exited (the time limit still applies). A complete "ok" result is answered as soon as it is
    # written: tearing down a CUDA context takes ~0.1 s that the caller need not wait for.
    slots = pool.gpus if device == "cuda" else pool.cpus
    lease_cm = slots.lease(req.gpu if device == "cuda" else None, cancel=cancel,
                           on_wait=on_wait if device == "cuda" else None)
    marks["lease"] = time.time()
    try:
        lease = lease_cm.__enter__()
    except BaseException:
        ws.cleanup()
        raise
    box: dict[str, ProcessResult] = {}
    finished = threading.Event()
    detached = threading.Event()

    def worker() -> None:
        try:
            box["proc"] = execute(lease)
        finally:
            lease_cm.__exit__(None, None, None)
            finished.set()
            if detached.is_set():
                ws.cleanup()

    threading.Thread(target=worker, name="eval-job", daemon=True).start()
    early: dict | None = None
    while not finished.wait(0.01):
        if result_path.is_file():
            try:
                raw = json.loads(result_path.read_text())
            except (OSError, ValueError):
                continue
            if raw.get("status") == "ok":
                early = raw
                detached.set()
                if finished.is_set():  # the worker ended meanwhile: clean up here
                    ws.cleanup()
                break
    try:
        if early is not None:
            result, clock = parse_harness_result(early), early.get("clock")
        else:
            result, clock = _assemble(result_path, box["proc"], req)
    finally:
        if early is None:
            ws.cleanup()
    result.wall_s = time.monotonic() - t_start
    result.overhead_s = _overhead(marks, clock, time.time())
    result.gpu_wait_s = lease.waited_s if device == "cuda" else 0.0
    result.build_s, result.build_note = build_s, build_note
    result.worker = lease.worker
    return result


_BUILD_MARKERS = ("load_inline", "cpp_extension")


def needs_extension_build(source: str) -> bool:
    return any(m in source for m in _BUILD_MARKERS)


def _prebuild(ws: Path, s: Settings, req: EvalRequest, limits: Limits, cancel: threading.Event | None,
              candidate: str, arch: str | None, builds: Path | None = None) -> tuple[float, str | None]:
    cfg = json.loads((ws / "config.json").read_text())
    cfg.update({"import_only": True, "device": "cpu", "prebuild_arch": arch})
    (ws / "build.json").write_text(json.dumps(cfg))
    env = job_env(ws, s.home, None, candidate=candidate, builds=builds)
    t0 = time.monotonic()
    out = ws / "build-result.json"
    fs = get_fork_server(HARNESS, forkserver_env(s.home)) if req.executor == "auto" else None
    try:
        if fs is not None:
            proc = fs.run(cfg=ws / "build.json", out=out, cwd=ws, env=env, limits=limits, cancel=cancel)
        else:
            proc = run_process([sys.executable, "-s", str(HARNESS), str(ws / "build.json"), str(out)], cwd=ws,
                               limits=limits, env=env, cancel=cancel)
    except ForkServerError as e:
        return time.monotonic() - t0, f"pre-build skipped: {e}"
    took = time.monotonic() - t0
    try:
        raw = json.loads(out.read_text())
    except (OSError, ValueError):
        return took, f"pre-build failed ({proc.describe_failure()}); the evaluation builds it"
    if raw.get("status") != "ok":
        return took, f"pre-build failed ({raw.get('error')}); the evaluation builds it"
    if raw.get("prebuild_failed"):
        return took, f"pre-build of {'; '.join(raw['prebuild_failed'])[:300]} failed; the evaluation reports it"
    return took, None


def _assemble(path: Path, proc: ProcessResult, req: EvalRequest) -> tuple[EvalResult, dict | None]:
    """The answer from a finished job, and the harness's clock marks when it wrote a result."""
    tail = proc.stderr[-4000:] if proc.stderr else None
    if proc.timed_out:
        return EvalResult(verdict="invalid", status="timeout", stderr_tail=tail,
                          error=f"the evaluation did not finish within {req.timeout_s:.0f} s and was killed (a hung "
                                "kernel or an endless loop); the GPU is free again."), None
    if proc.cancelled:
        return EvalResult(verdict="invalid", status="error", error="the evaluation was cancelled",
                          stderr_tail=tail), None
    if not path.is_file():
        why = proc.describe_failure()
        return EvalResult(verdict="incorrect", status="crashed", stderr_tail=tail,
                          error=f"the evaluation process {why} before writing a result (a crash in the candidate's "
                                "code or kernel: illegal address, trap, segfault or abort). stderr has the "
                                "details; the next job gets a fresh process."), None
    try:
        raw = json.loads(path.read_text())
    except ValueError as e:
        return EvalResult(verdict="invalid", status="error", error=f"unreadable harness result: {e}",
                          stderr_tail=tail), None
    return parse_harness_result(raw, stderr_tail=tail), raw.get("clock")


def _overhead(marks: dict[str, float], clock: dict | None, answered: float) -> dict[str, float]:
    """The evaluation's time outside the harness, from the caller's wall-clock ``marks`` (start, lease: the
    lease asked for, submit: the job handed to the process runner) and the harness's (child_start: the forked
    job's first step, main_start, written: the result on disk): ``prepare`` (sources, workspace, any build),
    ``lease`` (asking for and waiting on the worker), ``spawn`` (the job handed over until its first step; with
    no fork server, the interpreter's start and imports too), ``setup`` (the job's limits, namespace and
    environment), ``hand_off`` (the result written until answered). Empty where the job wrote no marks."""
    if not clock or clock.get("main_start") is None or clock.get("written") is None or "submit" not in marks:
        return {}
    first = clock.get("child_start") or clock["main_start"]
    parts = {"prepare": marks["lease"] - marks["start"], "lease": marks["submit"] - marks["lease"],
             "spawn": first - marks["submit"], "setup": clock["main_start"] - first,
             "hand_off": answered - clock["written"]}
    return {k: round(max(v, 0.0), 4) for k, v in parts.items()}


def parse_harness_result(raw: dict, *, stderr_tail: str | None = None) -> EvalResult:
    """The harness's JSON -> EvalResult (typed, with the speedups in a list)."""
    corr = raw.get("correctness")
    correctness = None
    if corr:
        correctness = Correctness(
            correct=bool(corr.get("correct")), trials=corr["trials"], passed=corr["passed"], policy=corr["policy"],
            tolerances=corr.get("tolerances", {}), max_abs_error=corr.get("max_abs_error"),
            max_rel_error=corr.get("max_rel_error"),
            trial_results=[TrialResult(trial=t["trial"], ok="error" not in t, error=t.get("error"),
                                       max_abs_error=t.get("max_abs_error"), max_rel_error=t.get("max_rel_error"))
                           for t in corr.get("trial_results", [])],
        )
    speedups = [Speedup(baseline=k, **v) for k, v in (raw.get("speedup") or {}).items()]  # type: ignore[arg-type]
    try:
        return EvalResult(
            verdict=raw.get("verdict", "invalid"), status=raw.get("status", "error"), error=raw.get("error"),
            device=raw.get("device"), gpu=raw.get("gpu"), torch=raw.get("torch"), correctness=correctness,
            timings={k: TimingStats(**v) for k, v in (raw.get("timings") or {}).items()},
            speedups=speedups, candidate_synced_us_per_call=raw.get("candidate_synced_us_per_call"),
            flush_probe=FlushProbe(**raw["flush_probe"]) if raw.get("flush_probe") else None,
            host_cover=HostCover(**raw["host_cover"]) if raw.get("host_cover") else None,
            energy={k: EnergyReading(**v) for k, v in (raw.get("energy") or {}).items()},
            flags=[CheatFlag(**f) for f in raw.get("flags", [])], notes=raw.get("notes", []),
            ops=raw.get("ops") or {}, harness_wall_s=raw.get("harness_wall_s"),
            phases_s=raw.get("phases_s") or {}, traceback=raw.get("traceback"), samples_us=raw.get("samples_us"),
            stderr_tail=stderr_tail if raw.get("status") != "ok" else None,
        )
    except ValidationError as e:
        return EvalResult(verdict="invalid", status="error", error=f"malformed harness result: {e}",
                          stderr_tail=stderr_tail)


# ----------------------------------------------------------------------------------- program mode
_ARG_RE = re.compile(r"^[\x20-\x7e]{0,4096}$")


def program_artifact(artifact_id: str, args: list[str], *, otherwise: str) -> tuple[Artifact, Path]:
    """An artifact and its executable, with the program's command-line arguments checked. ``otherwise`` ends the
    refusal for an artifact that is not an executable (what to do instead)."""
    art = get_store().require(artifact_id)
    exe = art.path("executable")
    if exe is None:
        raise InputError(f"Artifact {art.id} is a {art.meta.kind}, not an executable: compile a program with main() "
                         f"(output='executable'){otherwise}")
    for a in args:
        if not _ARG_RE.match(a):
            raise InputError(f"Program argument {a[:40]!r} refused: printable ASCII only, at most 4096 characters.")
    return art, exe


def stage_program(exe: Path, ws: Path) -> Path:
    """A private, executable copy of a stored program in a job's workspace (the store keeps files read-only)."""
    local = ws / "program"
    local.write_bytes(exe.read_bytes())
    local.chmod(0o755)
    return local


def run_program(req: ProgramRequest, settings: Settings | None = None, *, cancel: threading.Event | None = None,
                on_wait: WaitCallback | None = None) -> ProgramResult:
    s = ensure_dirs(settings)
    art, exe = program_artifact(req.artifact_id, req.args, otherwise=" to run it, or use eval mode for kernels.")
    if len(gpu_pool()) == 0:
        raise NotAvailable("Running a CUDA program", "no GPU is visible to this server",
                           "run kernelscope on a host with an NVIDIA GPU (compile and sass work without one)")
    with Workspace(prefix="run-") as ws, gpu_pool().lease(req.gpu, cancel=cancel, on_wait=on_wait) as lease:
        argv = [str(stage_program(exe, ws.path)), *req.args]
        note = None
        if req.kernel_times:
            try:
                ncu = require("ncu")
            except ToolMissing as e:
                raise NotAvailable("Per-kernel GPU times", "Nsight Compute (ncu) was not found", e.note) from None
            argv = [str(ncu), "--csv", "--print-units", "base", "--metrics", "gpu__time_duration.sum",
                    "--clock-control", "none", "--target-processes", "all", "--log-file", str(ws.path / "ncu.log"),
                    *argv]
            note = ("Durations from Nsight Compute's gpu__time_duration with clocks unlocked; ncu serializes "
                    "launches, so the sum can exceed the program's GPU time with concurrency.")
        proc = run_process(argv, cwd=ws.path, cancel=cancel, env=job_env(ws.path, s.home, lease),
                           stdin=req.stdin.encode() if req.stdin is not None else None,
                           limits=Limits(wall_s=req.timeout_s, output_bytes=1 << 20, isolate_network=True))
        times: list[KernelTime] | None = None
        if req.kernel_times:
            # with --log-file, ncu writes its messages and the CSV there; stdout stays the program's
            log = (ws.path / "ncu.log").read_text(errors="replace") if (ws.path / "ncu.log").is_file() else ""
            times, rest = parse_ncu_csv(log)
            if "ERR_NVGPUCTRPERM" in log:
                note = "ncu could not read performance counters (ERR_NVGPUCTRPERM): see `kernelscope doctor`."
            elif not times:
                note = "ncu profiled no kernels: " + (rest.strip()[-300:] or "the program launched none")
        return ProgramResult(
            artifact_id=art.id, exit_status=proc.returncode, signal_name=proc.signal_name,
            crashed=proc.signal_name is not None and not proc.timed_out, timed_out=proc.timed_out,
            stdout=proc.stdout, stderr=proc.stderr, stdout_truncated=proc.stdout_truncated,
            stderr_truncated=proc.stderr_truncated, wall_s=proc.wall_s, kernel_times=times, kernel_times_note=note,
            gpu_wait_s=lease.waited_s,
        )


def parse_ncu_csv(stdout: str) -> tuple[list[KernelTime], str]:
    """Split ncu's CSV rows (gpu__time_duration per launch) from the program's own stdout."""
    lines = stdout.splitlines(keepends=True)
    header_at = next((i for i, ln in enumerate(lines) if ln.startswith('"ID","Process ID"')), None)
    if header_at is None:
        return [], stdout
    program = "".join(ln for ln in lines[:header_at] if not ln.startswith("==PROF=="))
    rows = list(csv.reader(io.StringIO("".join(ln for ln in lines[header_at:] if ln.startswith('"')))))
    head, body = rows[0], rows[1:]
    try:
        ki, mi, vi, ui = (head.index(c) for c in ("Kernel Name", "Metric Name", "Metric Value", "Metric Unit"))
    except ValueError:
        return [], stdout
    per: dict[str, list[float]] = {}
    for r in body:
        if len(r) != len(head) or r[mi] != "gpu__time_duration.sum":
            continue
        try:
            v = float(r[vi].replace(",", ""))
        except ValueError:
            continue
        scale = {"ns": 1.0, "nsecond": 1.0, "us": 1e3, "usecond": 1e3, "ms": 1e6, "msecond": 1e6}.get(r[ui], 1.0)
        per.setdefault(r[ki], []).append(v * scale)
    times = [KernelTime(name=k, launches=len(v), total_ns=sum(v), mean_ns=sum(v) / len(v), min_ns=min(v),
                        max_ns=max(v)) for k, v in per.items()]
    times.sort(key=lambda k: -k.total_ns)
    return times, program
