"""run: evaluate a candidate against a reference (eval mode), or run a compiled program (program mode).

Both go through the sandbox: a private workspace, the job's own process group, a wall-clock limit
(the whole group is killed), capped output, a minimal environment without network where the host
allows, and a GPU lease (one timed job per GPU). A crash (illegal address, trap, segfault, abort)
or a hang is a structured result, and the next job on that GPU starts in a fresh process.
"""

from __future__ import annotations

import ast
import csv
import importlib.metadata
import importlib.util
import io
import json
import logging
import os
import platform
import re
import sys
import threading
import time
from contextlib import AbstractContextManager, ExitStack
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import kernelscope
from kernelscope.artifacts import Artifact, get_store
from kernelscope.config import Settings, ensure_dirs, get_settings
from kernelscope.errors import InputError, NotAvailable
from kernelscope.models import (
    EvalResult,
    KernelTime,
    ProgramResult,
)
from kernelscope.models.requests import EvalRequest, ProgramRequest
from kernelscope.sandbox.extcache import CACHE_FOLDER, PRIVATE_FOLDER, extension_key
from kernelscope.sandbox.forkserver import ForkServerError, get_fork_server, unavailable_reason
from kernelscope.sandbox.gpu import GpuPool, Lease, WaitCallback, gpu_pool
from kernelscope.sandbox.paths import resolve_user_path
from kernelscope.sandbox.pool import LocalPool, Runner, build_cache, current_pool, worker_dir
from kernelscope.sandbox.process import Limits, ProcessResult, build_env, run_process
from kernelscope.sandbox.workspace import Workspace
from kernelscope.toolkit.probes import local_default_arch
from kernelscope.toolkit.toolchain import ToolMissing, require, tool_info
from kernelscope.tools.run_answer import assemble, overhead, parse_harness_result

log = logging.getLogger("kernelscope.tools.run")
# The evaluation harness runs as a module of this package (-s: no user site-packages); the sandboxed job
# finds the package through PYTHONPATH. The parent of the package as imported, not resolved: a symlinked
# install must hand its children the path it was imported from.
HARNESS = ("-s", "-m", "kernelscope.harness")
PACKAGE_PARENT = os.path.dirname(os.path.dirname(os.path.abspath(kernelscope.__file__)))


def harness_argv(config: Path, result: Path) -> list[str]:
    """The command line of one harness job (CONFIG -> RESULT), spawned without the fork server."""
    return [sys.executable, *HARNESS, str(config), str(result)]


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
    digits = "".join(ch for ch in local_default_arch() if ch.isdigit())
    return f"{digits[:-1]}.{digits[-1]}" if len(digits) >= 2 else "9.0"


def job_env(ws: Path, home: Path, lease: Lease | None, *, candidate: str | None = None,
            builds: Path | None = None) -> dict[str, str]:
    """A sandboxed job's environment. ``lease``: the GPU (or CPU worker) it runs on, whose own cache
    directory holds what is compiled while it runs; ``candidate``: the source whose extension builds
    live in the shared build cache (``builds``, default the home's), keyed by its content."""
    env = build_env(home=ws)
    env["PYTHONPATH"] = PACKAGE_PARENT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    shared = builds if builds is not None else build_cache(home)
    own = worker_dir(home, lease.worker if lease is not None else "cpu")
    env["CUPY_CACHE_DIR"] = str(own / "cupy")
    env["TRITON_CACHE_DIR"] = str(own / "triton")
    env["TORCHINDUCTOR_CACHE_DIR"] = str(own / "inductor")
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["KERNELSCOPE_KERNEL_SOURCES"] = str(ws)  # fast-path kernels leave <kernel>.cu here, for hot lines' code
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
    # every nvcc the job runs (load_inline's builds) adds line tables, so the profilers' source view and analyze's
    # per-line reading see the candidate's own lines; nvcc reads this itself, and -lineinfo changes no code
    flags = env.get("NVCC_APPEND_FLAGS", "")
    env["NVCC_APPEND_FLAGS"] = flags if "-lineinfo" in flags.split() else f"{flags} -lineinfo".strip()
    # load_inline builds: one write-once entry of the shared cache per candidate source and build setting
    # (sandbox/extcache.py), so every job of a source (run's build, its evaluation, analyze's captures)
    # loads the one build, and no source's job ever sees another's; a job of no candidate builds in its
    # own workspace
    # so are the fast path's NVRTC cubins (by content within the entry): a job can write only its own source's
    # cubins, never one another candidate's job would load
    key = extension_key(candidate, env, _build_versions()) if candidate is not None else None
    env["TORCH_EXTENSIONS_DIR"] = str(ws / PRIVATE_FOLDER / "own" if key is None else shared / CACHE_FOLDER / key)
    env["KERNELSCOPE_NVRTC_CACHE"] = str(ws / PRIVATE_FOLDER / "nvrtc" if key is None else shared / "nvrtc" / key)
    return env


@lru_cache(maxsize=1)
def _build_versions() -> str:
    """What decides an extension build besides its source and the job's environment: Python, the machine,
    torch's version (its local label names its CUDA build: ``2.5.1+cu124``) and the CUDA toolkit's nvcc."""
    try:
        torch_version = importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        torch_version = "none"
    try:
        nvcc = tool_info("nvcc")
        cuda = f"{nvcc.path}:{nvcc.version}"
    except Exception:  # no toolkit: C++-only extensions still build
        cuda = "none"
    return "\0".join((sys.version, platform.machine(), torch_version, cuda))



def prewarm() -> bool:
    """Start the evaluation fork server now (imports torch once) so the first eval is fast; False
    where torch is not importable here."""
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
    return current_pool().evaluate(req, settings, runner=RUNNER, cancel=cancel, on_wait=on_wait)


def resolve_sources(req: EvalRequest, s: Settings) -> tuple[str, str]:
    """The reference's and the candidate's source text (read from the allowed roots where paths were given)."""
    return (_read_source(req.reference, req.reference_path, "reference", s),
            _read_source(req.candidate, req.candidate_path, "candidate", s))


_FAST_MARKERS = ("kernelscope.fast", "CudaKernel")


def needs_build(candidate: str, arch: str | None) -> bool:
    """Whether a candidate has something to build before it takes a GPU: extensions it really compiles
    (a call of load_inline/load, not the import alone), or fast-path kernels when the GPUs' target ``arch``
    is known (given only while every GPU is busy, so the NVRTC build overlaps the wait)."""
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


class _SharedWorkspace:
    """An evaluation's workspace, used by the caller (which reads the result from it) and by the job's
    thread (whose process runs in it until it exits): removed when the last of them lets go."""

    def __init__(self) -> None:
        self.workspace = Workspace(prefix="eval-")
        self.path = self.workspace.path
        self._users = 1
        self._lock = threading.Lock()

    def share(self) -> None:
        with self._lock:
            self._users += 1

    def release(self) -> None:
        with self._lock:
            self._users -= 1
            last = self._users == 0
        if last:
            self.workspace.cleanup()

    def __enter__(self) -> _SharedWorkspace:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


@dataclass
class _EvalJob:
    """One evaluation on this host: its request, sources, device and workspace, and the wall-clock marks
    (start, lease: the lease asked for, submit: the job handed to the process runner) for its overhead."""

    req: EvalRequest
    s: Settings
    cand_src: str
    device: str
    ws: Path
    cancel: threading.Event | None
    marks: dict[str, float] = field(default_factory=dict)
    executor: str | None = None
    isolation: str | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def config(self) -> Path:
        return self.ws / "config.json"

    @property
    def result(self) -> Path:
        return self.ws / "result.json"

    @property
    def limits(self) -> Limits:
        return _eval_limits(self.req)

    def execute(self, lease: Lease) -> ProcessResult:
        """The harness job, on the fork server (or, without one, a spawned interpreter, with the reason in
        ``notes``)."""
        env = job_env(self.ws, self.s.home, lease, candidate=self.cand_src)
        self.marks["submit"] = time.time()
        fs = get_fork_server(HARNESS, forkserver_env(self.s.home)) if self.req.executor == "auto" else None
        if fs is not None:
            try:
                self.executor, self.isolation = "fork-server", fs.isolation
                return fs.run(cfg=self.config, out=self.result, cwd=self.ws, env=env, limits=self.limits,
                              cancel=self.cancel)
            except ForkServerError as e:
                if self.result.exists():  # the job finished; only its exit report was lost (server shutdown)
                    return ProcessResult(argv=harness_argv(self.config, self.result), returncode=None,
                                         stderr=str(e))
                log.warning("fork server failed (%s); spawning this job", e)
                self.notes.append(f"the fork server failed ({e}); this job ran in a freshly started interpreter")
        elif self.req.executor == "auto":
            why = unavailable_reason(HARNESS) or "unknown"
            self.notes.append(f"the fork server is unavailable ({why}); this job ran in a freshly started "
                              "interpreter (seconds of imports)")
        self.executor = "spawn"
        proc = run_process(harness_argv(self.config, self.result), cwd=self.ws, limits=self.limits, env=env,
                           cancel=self.cancel)
        self.isolation = proc.isolation
        return proc


class _JobThread:
    """The timed job on a thread that holds the lease and a share of the workspace until its process has
    exited (the time limit still applies). ``answer`` returns a complete "ok" result as soon as it is
    written: tearing down a CUDA context takes ~0.1 s that the caller need not wait for."""

    def __init__(self, job: _EvalJob, lease: AbstractContextManager[Lease], shared: _SharedWorkspace) -> None:
        self.job = job
        self.proc: ProcessResult | None = None
        self.error: BaseException | None = None
        self.finished = threading.Event()
        with ExitStack() as held:  # taken here; released by the thread when its process has exited
            shared.share()
            held.callback(shared.release)
            self.lease = held.enter_context(lease)
            self._held = held.pop_all()
        threading.Thread(target=self._work, name="eval-job", daemon=True).start()

    def _work(self) -> None:
        try:
            with self._held:  # the lease first, then the thread's share of the workspace
                self.proc = self.job.execute(self.lease)
        except BaseException as e:
            self.error = e
        finally:
            self.finished.set()

    def answer(self) -> tuple[dict | None, ProcessResult | None]:
        """An "ok" result as soon as it is written (its raw JSON), else the finished process."""
        while not self.finished.wait(0.01):
            raw = _ok_result(self.job.result)
            if raw is not None:
                return raw, None
        if self.error is not None:
            raise self.error
        return None, self.proc


def _ok_result(path: Path) -> dict | None:
    if not path.is_file():
        return None
    try:
        raw = json.loads(path.read_text())
    except (OSError, ValueError):
        return None  # still being written
    return raw if raw.get("status") == "ok" else None


def _local_arch(pool: LocalPool) -> str | None:
    """The target of this host's GPUs (``sm_90``) for builds ahead of time; None where it cannot be known."""
    if not len(pool.gpus):
        return None
    try:
        return local_default_arch()
    except Exception:
        return None


def _build_first(job: _EvalJob, pool: LocalPool) -> tuple[float | None, str | None]:
    """Builds run first, on a CPU build worker without the GPU: minutes of compiling extensions
    (load_inline) must not hold the lease, and while every GPU is busy a fast-path candidate's NVRTC
    build goes ahead too, so it overlaps the evaluations under way (but only on a free build slot: it
    never waits behind extension builds). A candidate with nothing to build goes straight to the GPU.
    The outputs are cached by content, so the evaluation loads them at once. A failed pre-build is not an
    answer: the evaluation then builds (and reports) it itself."""
    arch = _local_arch(pool) if job.device == "cuda" and pool.gpus.contended() else None
    if not needs_build(job.cand_src, arch):
        return None, None
    if not needs_extension_build(job.cand_src) and pool.builds.contended():
        # only an NVRTC pre-build (well under a second): never queued behind minutes of extension builds;
        # the evaluation compiles its kernels itself
        return None, "pre-build skipped: every build slot is busy; the fast path compiles on the GPU worker"
    with pool.builds.lease(cancel=job.cancel):
        return _prebuild(job.ws, job.s, job.req, job.limits, job.cancel, job.cand_src, arch)


def evaluate_here(req: EvalRequest, settings: Settings | None, pool: LocalPool, *,
                  cancel: threading.Event | None = None, on_wait: WaitCallback | None = None) -> EvalResult:
    """One evaluation on this host: a build on a CPU build worker where there is something to build,
    then the timed job on a GPU worker (or a CPU worker for ``device='cpu'``)."""
    s = ensure_dirs(settings)
    ref_src, cand_src = resolve_sources(req, s)
    device = _resolve_device(req.device, pool.gpus)
    t_start = time.monotonic()
    with _SharedWorkspace() as shared:
        job = _EvalJob(req, s, cand_src, device, shared.path, cancel)
        _write_config(job.ws, req, ref_src, cand_src, device)
        job.marks["start"] = time.time()
        build_s, build_note = _build_first(job, pool)
        gpu = device == "cuda"
        slots = pool.gpus if gpu else pool.cpus
        job.marks["lease"] = time.time()
        running = _JobThread(job, slots.lease(req.gpu if gpu else None, cancel=cancel,
                                              on_wait=on_wait if gpu else None), shared)
        raw, proc = running.answer()
        if raw is not None:
            result, clock = parse_harness_result(raw), raw.get("clock")
        else:
            assert proc is not None
            result, clock = assemble(job.result, proc, req.timeout_s)
    result.wall_s = time.monotonic() - t_start
    result.overhead_s = overhead(job.marks, clock, time.time())
    result.gpu_wait_s = running.lease.waited_s if gpu else 0.0
    result.build_s, result.build_note = build_s, build_note
    result.worker = running.lease.worker
    result.executor = job.executor
    result.notes += job.notes
    result.isolation = job.isolation or (proc.isolation if proc is not None else None)
    return result


_BUILDERS = {"load_inline", "load"}  # torch.utils.cpp_extension's functions that compile and load an extension


def _builder_names(tree: ast.AST) -> tuple[set[str], set[str]]:
    """Local names bound to cpp_extension's builders (``from ... import load_inline as li``), and names the
    ``cpp_extension`` module itself is bound to (``from torch.utils import cpp_extension as ce``)."""
    funcs: set[str] = set()
    modules = {"cpp_extension"}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").endswith("cpp_extension"):
            funcs |= {a.asname or a.name for a in node.names if a.name in _BUILDERS}
        elif isinstance(node, ast.ImportFrom) and (node.module or "") == "torch.utils":
            modules |= {a.asname or a.name for a in node.names if a.name == "cpp_extension"}
        elif isinstance(node, ast.Import):
            modules |= {a.asname for a in node.names if a.name.endswith("cpp_extension") and a.asname}
    return funcs, modules


def needs_extension_build(source: str) -> bool:
    """Whether the candidate really compiles an extension: a call of cpp_extension's ``load_inline`` or
    ``load`` (by an imported name, an alias, or through the module), not merely the import. A source that
    does not parse is given the benefit of the doubt (a build slot if it names load_inline)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return "load_inline" in source or "cpp_extension" in source
    funcs, modules = _builder_names(tree)
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        if isinstance(f, ast.Name) and (f.id in funcs or f.id == "load_inline"):
            return True
        if isinstance(f, ast.Attribute) and f.attr in _BUILDERS:
            root = f.value
            named = root.attr if isinstance(root, ast.Attribute) else (root.id if isinstance(root, ast.Name) else "")
            if named in modules or f.attr == "load_inline":
                return True
    return False


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
            proc = run_process(harness_argv(ws / "build.json", out), cwd=ws,
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


# What the evaluation pool runs (sandbox/pool.py schedules, this module evaluates); module-level
# functions, so Ray ships them to its nodes by reference.
RUNNER = Runner(request=EvalRequest, here=evaluate_here, build=build_only, sources=resolve_sources,
                needs_build=needs_build, arch=_local_arch)


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
