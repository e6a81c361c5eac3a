"""Evaluation pools: where the `run` tool's evaluations execute, behind one interface.

``local`` (the default) runs on this host. It has one worker per visible GPU (the GPU's lease, with
``CUDA_VISIBLE_DEVICES`` pinned to it and its own cache directory for whatever is compiled while
evaluating: CuPy's, Triton's and Inductor's caches), CPU workers for evaluations on the CPU, and build
workers that compile a candidate's kernels on the CPU before a GPU is taken: ``load_inline`` extensions
always, NVRTC cubins of the fast path whenever every GPU is busy (when a GPU is free, building there
costs nobody anything and saves a process). Builds land in a shared cache keyed by content
(``build-cache/`` under the home), so a candidate is built once whichever GPU evaluates it. Parallel
tool calls therefore land on different GPUs, and compilation overlaps evaluation. The other GPU tools
(program runs, Nsight Compute, traces) lease the same GPUs, so nothing ever shares a GPU with a timed
job.

``ray`` schedules each evaluation as Ray tasks across a Ray cluster: a build task (``num_cpus=1``) on
any node, whose outputs (cubins, extension builds) travel as bytes to the evaluation task
(``num_gpus=1``, or ``num_cpus=1`` for CPU evaluations), which runs the same sandboxed evaluation as the
local pool on the node Ray picked and returns the typed result. Sources travel in the task arguments;
the nodes need the same kernelscope version installed (checked per task). Ray is an optional extra
(``pip install 'kernelscope[ray]'``).

The pool schedules; what an evaluation is comes from its caller as a ``Runner`` (``tools/run.py`` gives
its own ``evaluate_here`` and ``build_only``), so this layer never imports the tools. The runner's
functions are module-level, so Ray pickles them by reference and a node imports them itself.
"""

from __future__ import annotations

import hashlib
import io
import logging
import os
import socket
import tarfile
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import kernelscope
from kernelscope.config import Settings, ensure_dirs, get_settings, settings_from_env
from kernelscope.errors import InputError, NotAvailable
from kernelscope.models import EvalResult, PoolStatus, WorkerStatus
from kernelscope.sandbox.extcache import SEAL_SUFFIX
from kernelscope.sandbox.gpu import GpuPool, gpu_pool, worker_name

log = logging.getLogger("kernelscope.sandbox.pool")


@dataclass(frozen=True)
class Runner:
    """What an evaluation is, as the pool's caller defines it (``tools.run.RUNNER``). Module-level
    functions only: Ray ships them to its nodes by reference."""

    request: Any  # the request model (``EvalRequest``), rebuilt from JSON on a Ray node
    # one evaluation on this host: (request, settings, local pool, *, cancel, on_wait) -> EvalResult
    here: Callable[..., EvalResult]
    # build a candidate's kernels into a folder, no evaluation: (request, settings, folder, arch) -> (s, note)
    build: Callable[[Any, Settings, Path, str | None], tuple[float, str | None]]
    # the reference's and the candidate's source text: (request, settings) -> (reference, candidate)
    sources: Callable[[Any, Settings], tuple[str, str]]
    # whether a candidate has something to build before it takes a GPU: (candidate, arch) -> bool
    needs_build: Callable[[str, str | None], bool]
    # the target of this host's GPUs (``sm_90``), None where it cannot be known: (local pool) -> arch
    arch: Callable[[LocalPool], str | None]


class Pool(Protocol):
    backend: str

    def evaluate(self, req: Any, settings: Settings | None = None, *, runner: Runner,
                 cancel: threading.Event | None = None, on_wait: Any = None) -> EvalResult:
        """Evaluate a `run` eval request (``tools.run.EvalRequest``) on one of the pool's workers."""

    def status(self) -> PoolStatus: ...

    def close(self) -> None: ...


def _default_workers(env: str, fallback: int) -> int:
    raw = os.environ.get(env)
    if raw:
        try:
            n = int(raw)
        except ValueError:
            raise InputError(f"{env}={raw!r}: give a whole number of workers (1 or more).") from None
        if n < 1:
            raise InputError(f"{env}={raw!r}: give a whole number of workers (1 or more).")
        return n
    return fallback


def worker_dir(home: Path, worker: str) -> Path:
    """A worker's own cache directory (what it compiles while evaluating)."""
    return home / "workers" / worker


def build_cache(home: Path) -> Path:
    """The build cache every worker shares: NVRTC cubins and extension builds, one entry per candidate source."""
    return home / "build-cache"


class LocalPool:
    """This host's GPUs (the server-wide GPU leases), CPU workers and build workers."""

    backend = "local"

    def __init__(self, gpus: GpuPool | None = None, *, cpu_workers: int | None = None,
                 build_workers: int | None = None) -> None:
        cores = os.cpu_count() or 2
        self.gpus = gpus if gpus is not None else gpu_pool()
        n_cpu = cpu_workers or _default_workers("KERNELSCOPE_CPU_WORKERS", max(2, cores // 2))
        n_build = build_workers or _default_workers("KERNELSCOPE_BUILD_WORKERS", max(1, min(4, cores // 2)))
        self.cpus = GpuPool([f"cpu{i}" for i in range(n_cpu)], kind="cpu")
        self.builds = GpuPool([f"build{i}" for i in range(n_build)], kind="build")

    def evaluate(self, req: Any, settings: Settings | None = None, *, runner: Runner,
                 cancel: threading.Event | None = None, on_wait: Any = None) -> EvalResult:
        return runner.here(req, settings, self, cancel=cancel, on_wait=on_wait)

    def status(self) -> PoolStatus:
        home = get_settings().home
        workers: list[WorkerStatus] = []
        queued = 0
        for slots in (self.gpus, self.cpus, self.builds):
            busy = slots.busy()
            for i, st in enumerate(slots.stats()):
                name = worker_name(slots.kind, slots.visible[i])
                workers.append(WorkerStatus(
                    name=name, kind=slots.kind, busy=busy[i], jobs=st.jobs,  # type: ignore[arg-type]
                    busy_s=round(st.busy_s, 3),
                    cache_dir=str(worker_dir(home, name)) if slots.kind != "build" else None))
            queued += slots.queued()
        note = None if len(self.gpus) else "no GPU is visible: evaluations run on the CPU workers"
        return PoolStatus(backend="local", workers=workers, queued=queued, build_cache=str(build_cache(home)),
                          note=note)

    def close(self) -> None:
        return None


# ------------------------------------------------------------------------------------------- Ray
def _pack(folder: Path) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for p in sorted(folder.rglob("*")):
            # not an extension build's seal: its files name this node's paths, so the evaluation's node
            # builds again where they differ and seals its own (sandbox/extcache.py)
            if p.is_file() and not p.is_symlink() and not p.name.endswith(SEAL_SUFFIX):
                tar.add(p, arcname=str(p.relative_to(folder)), recursive=False)
    return buf.getvalue()


def _write_whole(path: Path, data: bytes) -> None:
    """Write ``path`` so that readers (other workers, other tasks) see the whole file or none of it."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def _unpack(data: bytes, folder: Path) -> int:
    """Unpack a build's outputs into ``folder`` (regular files only, every path inside it); returns the
    number of files written. Files already there are kept (the names are content keys)."""
    folder.mkdir(parents=True, exist_ok=True)
    n = 0
    root = folder.resolve()
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        for m in tar.getmembers():
            target = (folder / m.name).resolve()
            if not m.isfile() or not target.is_relative_to(root):
                continue
            if target.exists():
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            src = tar.extractfile(m)
            if src is None:
                continue
            _write_whole(target, src.read())
            n += 1
    return n


def _node_settings() -> Settings:
    """Settings on a Ray node: its own home (``KERNELSCOPE_HOME`` there, else the user's cache)."""
    return ensure_dirs(settings_from_env(roots=[]))


def _ray_build(runner: Runner, req_json: str, arch: str | None, version: str) -> dict[str, Any]:
    """A Ray task on any node's CPU: build the candidate's kernels into an empty folder and return it packed."""
    if kernelscope.__version__ != version:
        return {"error": f"this node runs kernelscope {kernelscope.__version__}, the server {version}"}
    req = runner.request.model_validate_json(req_json)
    s = _node_settings()
    # a source built before on this node (a retry, a second evaluation) ships the same outputs again
    key = hashlib.sha256("\0".join((version, arch or "", req.candidate or "")).encode()).hexdigest()[:24]
    packed = build_cache(s.home) / "packed" / f"{key}.tar.gz"
    if packed.is_file():
        return {"packed": packed.read_bytes(), "build_s": 0.0, "note": None, "node": _node_name()}
    with tempfile.TemporaryDirectory(prefix="ks-build-", dir=s.home) as d:
        took, note = runner.build(req, s, Path(d), arch)
        data = _pack(Path(d))
    if note is None:
        packed.parent.mkdir(parents=True, exist_ok=True)
        _write_whole(packed, data)
    return {"packed": data, "build_s": took, "note": note, "node": _node_name()}


def _node_name() -> str:
    return socket.gethostname()


def _ray_evaluate(runner: Runner, req_json: str, built: dict[str, Any] | None, version: str) -> str:
    """A Ray task holding one GPU (or one CPU): the local pool's evaluation, on the GPU Ray assigned."""
    if kernelscope.__version__ != version:
        raise RuntimeError(f"this Ray node runs kernelscope {kernelscope.__version__}, the server "
                           f"{version}: install the same version on every node")
    req = runner.request.model_validate_json(req_json)
    s = _node_settings()
    if built and built.get("packed"):
        _unpack(built["packed"], build_cache(s.home))
    # Ray sets CUDA_VISIBLE_DEVICES per task (and reuses worker processes), so the GPUs come from now
    gpus = GpuPool.from_environment() if req.device != "cpu" else GpuPool([])
    pool = LocalPool(gpus, cpu_workers=1, build_workers=1)
    cancel = threading.Event()
    box: dict[str, Any] = {}

    def work() -> None:
        try:
            box["result"] = pool.evaluate(req, s, runner=runner, cancel=cancel)
        except BaseException as e:
            box["error"] = e

    t = threading.Thread(target=work, daemon=True)
    t.start()
    try:
        while t.is_alive():
            t.join(0.1)
    except KeyboardInterrupt:  # ray.cancel: stop the sandboxed job (its process group), then end
        cancel.set()
        t.join(30)
        raise
    if "error" in box:
        raise box["error"]
    result: EvalResult = box["result"]
    result.worker = f"ray:{_node_name()}/{result.worker}"
    if built:
        result.build_s = built.get("build_s")
        result.build_note = built.get("note")
    return result.model_dump_json()


class RayPool:
    """Evaluations as Ray tasks across a Ray cluster."""

    backend = "ray"

    def __init__(self, address: str | None = None, *, local_cpus: int | None = None, arch: str | None = None) -> None:
        try:
            import ray
        except ImportError:
            raise NotAvailable("The Ray evaluation pool", "the `ray` package is not installed",
                               "pip install 'kernelscope[ray]'") from None
        self.ray = ray
        self.address = address or "auto"
        if not ray.is_initialized():
            if self.address == "local":  # a cluster of this host only, started with the server
                ray.init(num_cpus=local_cpus, include_dashboard=False, log_to_driver=False,
                         configure_logging=False)
            else:
                try:
                    ray.init(address=self.address, include_dashboard=False, log_to_driver=False,
                             configure_logging=False)
                except (ConnectionError, RuntimeError, ValueError) as e:
                    raise NotAvailable("The Ray evaluation pool", f"no Ray cluster at {self.address!r} ({e})",
                                       "start one (`ray start --head`), give its address (--ray-address "
                                       "HOST:PORT or ray://HOST:10001), or use --ray-address local") from None
        # the GPU nodes' target for builds on CPU nodes: given, else this host's GPUs' (found with the first
        # runner; None: each evaluation compiles its fast-path kernels on its GPU node; extension builds
        # still go ahead)
        self.arch = arch or os.environ.get("KERNELSCOPE_RAY_ARCH")
        self._arch_known = self.arch is not None
        self._build = ray.remote(_ray_build)
        self._eval = ray.remote(_ray_evaluate)
        self._lock = threading.Lock()
        self._queued = 0
        self._done = 0

    def resources(self) -> dict[str, float]:
        return {k: float(v) for k, v in self.ray.cluster_resources().items() if k in ("CPU", "GPU", "memory")}

    def target_arch(self, runner: Runner) -> str | None:
        if not self._arch_known:
            self.arch = runner.arch(LocalPool(cpu_workers=1, build_workers=1))
            self._arch_known = True
        return self.arch

    def evaluate(self, req: Any, settings: Settings | None = None, *, runner: Runner,
                 cancel: threading.Event | None = None, on_wait: Any = None) -> EvalResult:
        s = ensure_dirs(settings)
        ref_src, cand_src = runner.sources(req, s)
        res = self.resources()
        device = req.device
        if device == "auto":
            device = "cuda" if res.get("GPU", 0) >= 1 else "cpu"
        if device == "cuda" and res.get("GPU", 0) < 1:
            raise NotAvailable("Evaluating on a GPU through Ray", "the Ray cluster has no GPUs",
                               "add GPU nodes to the cluster, or pass device='cpu'")
        if req.gpu is not None:
            raise InputError("`gpu` picks one of this host's GPUs; with the Ray pool, Ray chooses the GPU.")
        shipped = runner.request.model_validate({**req.model_dump(), "reference": ref_src, "candidate": cand_src,
                                              "reference_path": None, "candidate_path": None, "device": device})
        payload = shipped.model_dump_json()
        version = kernelscope.__version__
        t0 = time.monotonic()
        refs: list[Any] = []
        with self._lock:
            self._queued += 1
        try:
            built: Any = None
            arch = self.target_arch(runner) if device == "cuda" else None
            if runner.needs_build(cand_src, arch):
                built = self._build.options(num_cpus=1).remote(runner, payload, arch, version)
                refs.append(built)
            opts = {"num_gpus": 1, "num_cpus": 0} if device == "cuda" else {"num_cpus": 1}
            ref = self._eval.options(max_retries=0, **opts).remote(runner, payload, built, version)
            refs.append(ref)
            while True:
                ready, _ = self.ray.wait([ref], timeout=0.2)
                if ready:
                    break
                if cancel is not None and cancel.is_set():
                    for r in refs:
                        self.ray.cancel(r)
                    return EvalResult(verdict="invalid", status="error", error="the evaluation was cancelled")
                if time.monotonic() - t0 > req.timeout_s + 120:  # queued for far too long
                    for r in refs:
                        self.ray.cancel(r)
                    return EvalResult(verdict="invalid", status="timeout",
                                      error=f"the Ray task did not finish within {req.timeout_s:.0f} s (+120 s "
                                            "for scheduling): the cluster is busy or short of the resources")
            try:
                text = self.ray.get(ref)
            except self.ray.exceptions.RayTaskError as e:
                cause = getattr(e, "cause", None) or e
                return EvalResult(verdict="invalid", status="error",
                                  error=f"the Ray evaluation task failed: {str(cause).strip()[-800:]}")
            except self.ray.exceptions.RayError as e:
                return EvalResult(verdict="invalid", status="error",
                                  error=f"the Ray worker running the evaluation was lost: {str(e)[-500:]}")
        finally:
            with self._lock:
                self._queued -= 1
                self._done += 1
        result = EvalResult.model_validate_json(text)
        result.wall_s = time.monotonic() - t0
        return result

    def status(self) -> PoolStatus:
        with self._lock:
            queued = self._queued
        return PoolStatus(backend="ray", ray_address=self.address, ray_resources=self.resources(), queued=queued,
                          note=f"{self._done} evaluation(s) sent so far; Ray places each on a node with a free "
                               "GPU (or CPU)")

    def close(self) -> None:
        if self.address == "local" and self.ray.is_initialized():
            self.ray.shutdown()


# ------------------------------------------------------------------------------------------- the pool
_pool: Pool | None = None
_pool_lock = threading.Lock()


def configure_pool(backend: str = "local", *, ray_address: str | None = None, cpu_workers: int | None = None,
                   build_workers: int | None = None) -> Pool:
    """Choose this process's evaluation pool (the server does this from its command line)."""
    with _pool_lock:
        return _set_pool(backend, ray_address, cpu_workers, build_workers)


def _set_pool(backend: str, ray_address: str | None, cpu_workers: int | None, build_workers: int | None) -> Pool:
    global _pool
    old = _pool
    if backend == "local":
        _pool = LocalPool(cpu_workers=cpu_workers, build_workers=build_workers)
    elif backend == "ray":
        _pool = RayPool(ray_address, local_cpus=cpu_workers)
    else:
        raise InputError(f"Unknown evaluation pool {backend!r}: use local or ray.")
    if old is not None and old is not _pool:
        old.close()
    return _pool


def current_pool() -> Pool:
    """The configured pool; by default the local one (``KERNELSCOPE_POOL=ray`` picks Ray, at
    ``KERNELSCOPE_RAY_ADDRESS``)."""
    pool = _pool
    if pool is not None:
        return pool
    with _pool_lock:  # two first callers at once get one pool
        if _pool is not None:
            return _pool
        return _set_pool(os.environ.get("KERNELSCOPE_POOL", "local"), os.environ.get("KERNELSCOPE_RAY_ADDRESS"),
                         None, None)
