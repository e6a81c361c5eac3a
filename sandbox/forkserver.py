"""A fork server for evaluation jobs: one long-lived process that has imported torch, numpy, CuPy and
NVML (but never touched CUDA) forks a fresh child per job (its side is ``kernelscope.harness.server``).
The child becomes its own session and process group, applies the job's resource limits and leaves
the network with the launcher's own code (``sandbox/limits.py``; a limit it cannot apply fails the
job, with the reason in its result), redirects its output to files in the job's workspace and runs
the harness. Each job therefore starts in
milliseconds instead of paying seconds of imports, and still gets a fresh process (and CUDA context):
a crash, a hang or monkey-patching in one job cannot reach the next.

Time limits, cancellation and clean-up are enforced from here exactly as in ``run_process``: the
child's whole process group gets SIGTERM, then SIGKILL.

Isolation: where bubblewrap is available the fork server itself runs inside ``bwrap``
(``isolation.forkserver_plan``: the eval binds, the workspace root and the shared build caches writable);
the pids its jobs report are its PID namespace's and are translated to the host's. Each job narrows that
sandbox to its own view before it runs anything (its own mount and PID namespaces, only its workspace
and caches, no capabilities: ``sandbox/limits.py`` ``private_view``; docs/isolation.md). The server
outlives the thread that started it (no ``--die-with-parent``) and ends when its stdin closes. Memory:
each job's cgroup (``sandbox/cgroup.py``; the child waits for SIGUSR2 until it is inside) or the
watchdog's limit.
"""

from __future__ import annotations

import atexit
import contextlib
import itertools
import json
import logging
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from kernelscope.config import get_settings
from kernelscope.sandbox import extcache
from kernelscope.sandbox.cgroup import MemoryGuard
from kernelscope.sandbox.isolation import (
    Plan,
    forkserver_plan,
    host_pid,
    job_view,
    pid_namespace,
    require_isolation,
)
from kernelscope.sandbox.process import (
    Limits,
    ProcessResult,
    Watchdog,
    _signal_name,
    job_memory,
    job_rlimits,
    kill_group_until_empty,
    limit_note,
    network_isolation_status,
    stop_reason,
)

log = logging.getLogger("kernelscope.sandbox.forkserver")


class ForkServerError(RuntimeError):
    pass


class ForkServer:
    """``command``: the job's command line after the interpreter (``-s -m kernelscope.harness``); the
    server runs it with ``--serve``, a job with ``CONFIG RESULT``."""

    def __init__(self, command: Sequence[str], env: Mapping[str, str], start_timeout_s: float = 120.0,
                 log_path: Path | None = None) -> None:
        self.command = list(command)
        self.log_path = log_path
        self._env = dict(env)
        self._lock = threading.Lock()
        self._waiters: dict[str, queue.Queue[dict[str, Any]]] = {}
        self._ids = itertools.count()
        self._proc: subprocess.Popen[str] | None = None
        self._ready = threading.Event()
        self._active: set[int] = set()  # pids (= process groups) of running jobs
        self._plan: Plan = forkserver_plan([sys.executable, *self.command], self._env)
        self._namespace: str | None = None  # the sandbox's PID namespace, when it has one
        self._start(start_timeout_s)

    # -- lifecycle
    def _start(self, timeout_s: float) -> None:
        self._ready.clear()
        err = self.log_path.open("ab") if self.log_path is not None else subprocess.DEVNULL
        try:
            self._proc = subprocess.Popen(
                [*self._plan.prefix, sys.executable, *self.command, "--serve"], stdin=subprocess.PIPE,
                stdout=subprocess.PIPE, stderr=err, env=self._env, text=True, bufsize=1, start_new_session=True,
                close_fds=True,
            )
        finally:
            if err is not subprocess.DEVNULL:
                err.close()
        threading.Thread(target=self._reader, args=(self._proc,), daemon=True).start()
        if not self._ready.wait(timeout_s):
            self.close()
            where = f"; its stderr is in {self.log_path}" if self.log_path is not None else ""
            raise ForkServerError(f"the fork server did not become ready within {timeout_s:.0f} s{where}")
        if self._plan.prefix:
            self._namespace = pid_namespace(self._proc.pid)
            if self._namespace is None:
                self.close()
                raise ForkServerError("the fork server's sandbox has no PID namespace to find its jobs in")

    @property
    def isolation(self) -> str | None:
        """The sandbox its jobs run in (None: unisolated)."""
        return self._plan.isolation

    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def close(self) -> None:
        """Stop the server and every job it still runs (jobs are their own sessions, so they would
        outlive it otherwise)."""
        with self._lock:
            active = list(self._active)
        for pid in active:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
        p = self._proc
        if p is not None and p.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(p.pid, signal.SIGKILL)
            p.wait(timeout=10)

    def _reader(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            if msg.get("event") == "ready":
                self._ready.set()
                continue
            job = msg.get("job")
            with self._lock:
                q = self._waiters.get(job) if job is not None else None
            if q is not None:
                q.put(msg)
        # the server died: wake every waiter
        with self._lock:
            for q in self._waiters.values():
                q.put({"event": "server-died"})

    # -- one job
    def run(self, *, cfg: Path, out: Path, cwd: Path, env: Mapping[str, str], limits: Limits,
            cancel: threading.Event | None = None) -> ProcessResult:
        self._check_isolation(cwd)
        job = f"j{next(self._ids)}"
        q: queue.Queue[dict[str, Any]] = queue.Queue()
        rlimits = job_rlimits(limits)
        # a sandboxed server has no network to leave (and its jobs drop the capability to try)
        net = limits.isolate_network and not self._plan.prefix and network_isolation_status()[0]
        stdout_p, stderr_p = cwd / "job.stdout", cwd / "job.stderr"
        memory = MemoryGuard(job_memory(limits, True))
        req = {"op": "run", "job": job, "cfg": str(cfg), "out": str(out), "cwd": str(cwd), "env": dict(env),
               "rlimits": rlimits, "unshare_net": net, "stdout": str(stdout_p), "stderr": str(stderr_p),
               "view": job_view(self._plan, cwd, env), "gate": memory.cgroup is not None}
        argv = [sys.executable, *self.command, str(cfg), str(out)]
        with self._lock:
            self._waiters[job] = q
        start = time.monotonic()
        pid: int | None = None
        exceeded: str | None = None
        try:
            pid = self._submit(req, q, memory)
            deadline = start + limits.wall_s
            timed_out = cancelled = False
            watchdog = Watchdog(limits, cwd, memory_bytes=memory.watchdog_bytes, memory_note=memory.note)
            returncode: int | None = None
            while True:
                try:
                    done = q.get(timeout=0.05)
                    if done.get("event") == "server-died":
                        raise ForkServerError("the fork server died during the job")
                    returncode = int(done["returncode"])
                    break
                except queue.Empty:
                    pass
                exceeded = watchdog.check(pid)
                if exceeded:  # a runaway: no grace period
                    kill_group_until_empty(pid)
                    try:
                        returncode = int(q.get(timeout=10).get("returncode", -signal.SIGKILL))
                    except queue.Empty:
                        returncode = -signal.SIGKILL
                    break
                cancelled, timed_out = stop_reason(cancel, deadline)
                if timed_out or cancelled:
                    returncode = self._kill(pid, q, limits.kill_grace_s)
                    break
            kill_group_until_empty(pid)  # stragglers in the job's group
        except (OSError, ValueError) as e:
            raise ForkServerError(f"fork server I/O failed: {e}") from e
        finally:
            with self._lock:
                self._waiters.pop(job, None)
                if pid is not None:
                    self._active.discard(pid)
            exceeded = exceeded or memory.reason()
            memory.close()
        wall = time.monotonic() - start
        extcache.seal_after_job(env)  # an extension build it finished is reused, unchanged, by later jobs
        so, so_total = _tail(stdout_p, limits.output_bytes)
        se, se_total = _tail(stderr_p, limits.output_bytes)
        if exceeded:
            se += limit_note(exceeded)
        return ProcessResult(
            argv=argv, returncode=returncode, signal_name=_signal_name(returncode), stdout=so, stderr=se,
            stdout_bytes=so_total, stderr_bytes=se_total, stdout_truncated=so_total > limits.output_bytes,
            stderr_truncated=se_total > limits.output_bytes, wall_s=wall, timed_out=timed_out, cancelled=cancelled,
            limit_exceeded=exceeded, network_isolated=net or self._plan.network_isolated,
            isolation=self._plan.isolation, warning=self._plan.warning,
            peak_rss_bytes=watchdog.peak_rss or None,
        )

    def _submit(self, req: dict[str, Any], q: queue.Queue[dict[str, Any]], memory: MemoryGuard) -> int:
        """Hand the job to the server; its host pid once it started (and, with a cgroup, is inside it)."""
        proc = self._proc
        if proc is None or proc.stdin is None or proc.poll() is not None:
            raise ForkServerError("the fork server is not running")
        with self._lock:
            proc.stdin.write(json.dumps(req) + "\n")
            proc.stdin.flush()
        msg = q.get(timeout=60)
        if msg.get("event") != "started":
            raise ForkServerError(f"the fork server failed to start the job: {msg}")
        pid = self._host_pid(int(msg["pid"]))
        with self._lock:
            self._active.add(pid)
        if req["gate"]:  # the job waits for SIGUSR2 until it is inside its cgroup
            memory.attach(pid)
            os.kill(pid, signal.SIGUSR2)
        return pid

    def _host_pid(self, pid: int) -> int:
        """The host's pid of a job the sandboxed server reports by its PID namespace's pid."""
        if self._namespace is None:
            return pid
        found = host_pid(pid, self._namespace)
        if found is None:
            raise ForkServerError(f"the job's process (pid {pid} in the sandbox) was not found")
        return found

    def _check_isolation(self, cwd: Path) -> None:
        """Refuse the job without isolation where it is required, or when its workspace is not in the sandbox."""
        require_isolation(self._plan)
        roots = self._plan.writable
        if self._plan.prefix and not any(cwd.resolve().is_relative_to(r.resolve()) for r in roots):
            raise ForkServerError(f"the job's workspace {cwd} is outside the fork server's sandbox (the workspace "
                                  "root); spawn it instead")

    def _kill(self, pid: int, q: queue.Queue[dict[str, Any]], grace_s: float) -> int | None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGTERM)
        try:
            return int(q.get(timeout=grace_s).get("returncode", -signal.SIGTERM))
        except queue.Empty:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
            try:
                return int(q.get(timeout=10).get("returncode", -signal.SIGKILL))
            except queue.Empty:
                return -signal.SIGKILL


def _tail(path: Path, cap: int) -> tuple[str, int]:
    try:
        size = path.stat().st_size
    except OSError:
        return "", 0
    with path.open("rb") as f:
        if size <= cap:
            data = f.read()
            return data.decode("utf-8", errors="replace"), size
        head = f.read(cap - cap // 4)
        f.seek(size - cap // 4)
        tail = f.read()
    marker = f"\n[... {size - len(head) - len(tail)} bytes of output truncated by kernelscope ...]\n"
    return head.decode("utf-8", errors="replace") + marker + tail.decode("utf-8", errors="replace"), size


_servers: dict[str, ForkServer] = {}
_servers_lock = threading.Lock()
_why_not: dict[str, str] = {}  # per command: why the last start failed, or why the last server ended


def unavailable_reason(command: Sequence[str]) -> str | None:
    """Why ``get_fork_server(command)`` last returned None (for the job's answer)."""
    if not hasattr(os, "fork"):
        return "this platform has no fork"
    if os.environ.get("KERNELSCOPE_NO_FORKSERVER"):
        return "KERNELSCOPE_NO_FORKSERVER is set"
    return _why_not.get(_key(command))


def _key(command: Sequence[str]) -> str:
    """One server per command and isolation mode: a server started unisolated never serves a job that must be
    isolated (nor the other way round) after the settings change."""
    return f"{' '.join(command)} [isolation={get_settings().isolation}]"


def get_fork_server(command: Sequence[str], env: Mapping[str, str]) -> ForkServer | None:
    """The running fork server for ``command`` (started on first use; restarted if it died), or None
    where fork servers cannot work (no fork, or it failed to start: jobs then spawn processes)."""
    if not hasattr(os, "fork") or os.environ.get("KERNELSCOPE_NO_FORKSERVER"):
        return None
    key = _key(command)
    with _servers_lock:
        fs = _servers.get(key)
        if fs is not None and fs.alive():
            return fs
        if fs is not None:  # it ended: say how (a restart costs the warm start again)
            assert fs._proc is not None
            code = fs._proc.returncode
            log.warning("the fork server (pid %s) ended with %s; starting it again", fs._proc.pid,
                        _signal_name(code) or f"exit status {code}")
        try:
            home = env.get("HOME")
            log_path = Path(home) / "forkserver.log" if home else None
            fs = _servers[key] = ForkServer(command, env, log_path=log_path)
        except (ForkServerError, OSError) as e:
            log.warning("fork server unavailable, spawning processes instead: %s", e)
            _why_not[key] = f"the fork server could not start: {e}"
            _servers.pop(key, None)
            return None
        return fs


def shutdown_all() -> None:
    with _servers_lock:
        for fs in _servers.values():
            fs.close()
        _servers.clear()


atexit.register(shutdown_all)
