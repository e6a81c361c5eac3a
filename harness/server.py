"""The fork server's side of ``sandbox/forkserver.py``: one long-lived process that has imported torch,
numpy, CuPy and NVML (but never touched CUDA) reads JSON job lines on stdin and forks one child per
job. The child becomes its own session, applies the job's limits and network isolation with the
sandbox launcher's own code (``sandbox/limits.py``), redirects its output into the job's workspace and
runs the job; its pid and exit status go back as JSON lines on stdout."""

from __future__ import annotations

import faulthandler
import importlib.util
import json
import os
import signal
import sys
import threading
import time
import traceback
from types import ModuleType
from typing import Any, NoReturn

from kernelscope.harness.job import run_job
from kernelscope.harness.protocol import ChildStart, wall_clock, write_result
from kernelscope.harness.stats import bootstrap_ratio_ci, timing_stats


def _sandbox_limits() -> ModuleType:
    """``sandbox/limits.py``, loaded by its path (stdlib only): importing it as ``kernelscope.sandbox.limits``
    would import the sandbox package, and with it pydantic and the server's modules. The path is the
    package's own, unresolved, so a symlinked install finds its sibling."""
    here = os.path.dirname(os.path.abspath(__file__))
    path = os.path.join(os.path.dirname(here), "sandbox", "limits.py")
    spec = importlib.util.spec_from_file_location("_kernelscope_sandbox_limits", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class Server:
    def __init__(self) -> None:
        self.limits = _sandbox_limits()
        self.cpu_threads = 0
        self.lock = threading.Lock()
        self.jobs: dict[int, str] = {}
        self.out = sys.stdout

    def warm_imports(self) -> None:
        """What every job needs, imported once in the fork server (never touching CUDA: a CUDA context
        must not cross fork; nor CPU thread pools: the server runs its warm-up single-threaded, since an
        OpenMP pool started before fork deadlocks the child's first parallel op)."""
        import numpy  # noqa: F401
        import torch
        from torch.utils._python_dispatch import TorchDispatchMode

        self.cpu_threads = torch.get_num_threads()
        torch.set_num_threads(1)

        class _Warm(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
                return func(*args, **(kwargs or {}))

        with _Warm():  # the first dispatch-mode entry costs ~2 s of lazy imports: pay it here
            torch.softmax(torch.ones(2, 2), dim=1)
        bootstrap_ratio_ci([1.0, 2.0, 3.0], [1.0, 2.0, 3.0])  # numpy's first-call costs, paid once
        timing_stats([1.0, 2.0])
        for optional in ("cupy", "pynvml", "triton"):
            try:
                __import__(optional)
            except Exception:  # optional accelerators
                continue

    def send(self, msg: dict[str, Any]) -> None:
        with self.lock:
            self.out.write(json.dumps(msg) + "\n")
            self.out.flush()

    def reap(self) -> None:
        """Report each job's exit status (a thread: the children are this process's)."""
        while True:
            try:
                pid, status = os.waitpid(-1, 0)
            except ChildProcessError:
                time.sleep(0.05)
                continue
            with self.lock:
                job = self.jobs.pop(pid, None)
            if job is None:
                continue
            code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
            self.send({"event": "exited", "job": job, "pid": pid, "returncode": code})

    def serve(self) -> NoReturn:
        self.warm_imports()
        threading.Thread(target=self.reap, daemon=True).start()
        self.send({"event": "ready", "pid": os.getpid()})
        for line in sys.stdin:
            try:
                req = json.loads(line)
            except ValueError:
                continue
            if req.get("op") == "ping":
                self.send({"event": "pong"})
                continue
            if req.get("op") != "run":
                continue
            gate = bool(req.get("gate"))
            with self.lock:
                if gate:  # blocked across the fork: the child waits for it (moved into its cgroup by then)
                    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR2})
                pid = os.fork()
                if pid == 0:
                    self.child(req)
                if gate:
                    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGUSR2})
                self.jobs[pid] = req["job"]
            self.send({"event": "started", "job": req["job"], "pid": pid})
        # stdin closed: the parent is gone (or closed it). End now, not after seconds of tearing torch down;
        # a sandboxed server's jobs end with its PID namespace
        os._exit(0)

    # -- in the forked child
    def child(self, job: dict[str, Any]) -> NoReturn:
        """Become a session leader; in a sandboxed server (``view`` in the job) take the job's private view and
        a PID namespace of its own: this process waits in the server's, a minimal init (pid 1, which mounts
        the new /proc and drops every capability) waits in the new one, and the job runs as its child (pid 2:
        a signal it sends itself, an abort, acts as anywhere else, which it would not for a pid 1). Then apply
        the limits (as the launcher does) and run one evaluation."""
        start = ChildStart(wall_clock())
        if job.get("gate"):  # the server moves this process into the job's cgroup, then says go
            signal.sigtimedwait({signal.SIGUSR2}, 30)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGUSR2})
        os.setsid()
        view = job.get("view")
        if view is not None:
            failed = self.limits.private_view(view["keep"], view["mask"], view.get("bind", []))
            if failed is None:
                _relay(os.fork(), init=False)  # the rest runs in the new PID namespace
                failed = self.limits.enter_pid_namespace()
                if failed is None:
                    _relay(os.fork(), init=True)
            if failed is not None:
                _redirect(job["stdout"], job["stderr"])
                _refuse(job["out"], start, [failed], what="cannot isolate the job: ")
        self.run_child(job, start)

    def run_child(self, job: dict[str, Any], start: ChildStart) -> NoReturn:
        """Apply the limits (as the launcher does), then run one evaluation."""
        failed, net = self.limits.apply_limits(job.get("rlimits", {}), bool(job.get("unshare_net")))
        os.chdir(job["cwd"])
        _redirect(job["stdout"], job["stderr"])
        os.environ.clear()
        os.environ.update(job["env"])
        faulthandler.enable()
        faulthandler.register(signal.SIGUSR1)  # `kill -USR1 <pid>` dumps the job's Python stacks to its stderr
        if failed:  # as the launcher: a job whose limits cannot be applied does not run
            _refuse(job["out"], start, failed)
        if net is not None:
            start.notes.append(f"the job could not leave the network and kept it: {net}")
            sys.stderr.write(f"kernelscope sandbox: the job keeps the network ({net})\n")
        if self.cpu_threads:
            import torch

            torch.set_num_threads(self.cpu_threads)
        code = 0
        try:
            code = run_job(job["cfg"], job["out"], start)
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 1
        except BaseException:
            traceback.print_exc()
            code = 1
        finally:
            try:
                sys.stdout.flush()
                sys.stderr.flush()
            finally:
                os._exit(code)


def _relay(pid: int, *, init: bool) -> None:
    """After a fork: in the child (``pid`` 0) return at once; in the parent wait for it and end as it ended,
    SIGTERM ignored meanwhile (the job's own default action ends it). A namespace's init cannot die by a
    signal it has no handler for, so it exits with 128+N for a child killed by signal N, and the waiter
    above it turns that back into the signal (as bwrap's exit status is read for spawned jobs)."""
    if pid == 0:
        return
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):  # let go of the server's pipes
        os.dup2(devnull, fd)
    while True:
        try:
            _, status = os.waitpid(pid, 0)
            break
        except InterruptedError:
            continue
    sig = os.WTERMSIG(status) if os.WIFSIGNALED(status) else None
    code = os.WEXITSTATUS(status) if sig is None else 128 + sig
    if init:
        os._exit(code)
    if sig is None and 128 < code < 128 + 65:
        sig = code - 128
    if sig is not None:
        signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
    os._exit(code)


def _redirect(stdout: str, stderr: str) -> None:
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    out = os.open(stdout, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    err = os.open(stderr, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(out, 1)
    os.dup2(err, 2)
    sys.stdout = os.fdopen(1, "w", buffering=1)
    sys.stderr = os.fdopen(2, "w", buffering=1)


def _refuse(out: str, start: ChildStart, failed: list[str], what: str = "cannot apply the limit ") -> NoReturn:
    """The job's limits (or its sandbox) could not be applied: say so on stderr and in the result, and run
    nothing."""
    error = "kernelscope sandbox: " + what + "; ".join(failed)
    sys.stderr.write(error + "\n")
    sys.stderr.flush()
    try:
        write_result(out, {"status": "error", "verdict": "invalid", "error": error,
                           "clock": {"child_start": start.wall, "main_start": None, "written": wall_clock()}})
    finally:
        os._exit(125)


def serve() -> NoReturn:
    Server().serve()
