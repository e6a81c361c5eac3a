"""Run one command in its own process session with time, CPU, file-size and output limits.

Design notes
- The child is started through a tiny launcher (``python -I -S -c``) that sets resource limits and
  optionally enters a new network namespace before ``exec``: ``preexec_fn`` is not safe in a
  threaded server (the MCP server runs tools on worker threads). Its limit code is
  ``sandbox/limits.py``, which the evaluation fork server's children run too; a limit it cannot apply
  stops the job before it runs (exit status 125, the reason on stderr).
- Isolation (``sandbox/isolation.py``): where bubblewrap is available the launcher itself runs inside
  ``bwrap`` with the binds of the job's kind (compile, sass, eval, program, profile; given in
  ``Limits.job`` or inferred from the command), so the limits below apply inside the sandbox. bwrap
  keeps the caller's process group (no ``--new-session``: ``start_new_session`` already leaves the
  job without a controlling terminal), so the watchdog and the group kill work as without it.
- ``RLIMIT_AS`` only for compilers and disassemblers (``Settings.compiler_memory_bytes``): it breaks the
  CUDA driver, which reserves large virtual ranges. The result carries the peak resident size of the
  job's processes (``wait4``) and says when the cap stopped it.
- On timeout or cancellation the whole process group gets SIGTERM (again every 0.2 s), then SIGKILL after a grace
  period, so a hung kernel or a child that ignores SIGTERM cannot outlive its limit by more than
  ``Limits.kill_grace_s``. After a normal exit, stragglers left in the group are killed too.
- Output is read on threads and capped: the head and the tail are kept, the middle is replaced by a
  marker saying how much was dropped.
- A watchdog polls the job while it runs: more than ``Limits.max_processes`` processes in its group
  (a fork bomb) or more than ``Limits.max_disk_bytes`` taken from its file system (a program filling
  the disk) kill the whole group at once, and the result says which limit it hit. For users other
  than root, ``RLIMIT_NPROC`` also stops an exponential fork bomb in the kernel (root is exempt from
  it, so there the watchdog alone contains one).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from functools import lru_cache
from pathlib import Path
from typing import IO

from pydantic import BaseModel, Field

from kernelscope.config import get_settings
from kernelscope.sandbox import extcache
from kernelscope.sandbox import limits as limit_code
from kernelscope.sandbox.cgroup import MemoryGuard
from kernelscope.sandbox.isolation import JobKind, Plan, plan_job
from kernelscope.sandbox.watchdog import Watchdog, group_pids, kill_group_until_empty  # noqa: F401 (re-exported)

# Environment variables passed through to children (everything else is dropped).
PASSTHROUGH_ENV = (
    "CUDA_VISIBLE_DEVICES",
    "CUDA_DEVICE_ORDER",
    "CUDA_HOME",
    "CUDA_PATH",
    "LD_LIBRARY_PATH",
    "NVIDIA_VISIBLE_DEVICES",
    "NVIDIA_DRIVER_CAPABILITIES",
    "PYTHONPATH",
    "SYSTEMROOT",
)
DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"

# The launcher: sandbox/limits.py (the one copy of the limit code, which the fork server's child runs
# too), then these lines; it runs with ``python -I -S -c`` and execs the job.
_LAUNCHER_MAIN = r"""
import json, signal, sys
cfg = json.loads(sys.argv[1])
failed, net = apply_limits(cfg["rlimits"], cfg["unshare_net"])
for problem in failed:
    sys.stderr.write("kernelscope sandbox: cannot apply the limit %s\n" % problem)
if failed:
    os._exit(125)
if net is not None:
    if cfg["require_net_isolation"]:
        sys.stderr.write("kernelscope sandbox: cannot isolate the network: %s\n" % net)
        os._exit(125)
    sys.stderr.write("kernelscope sandbox: the job keeps the network (%s)\n" % net)
# Python ignores SIGPIPE and SIGXFSZ, and ignored signals survive exec: give the program the defaults
# (a write past RLIMIT_FSIZE then kills it with SIGXFSZ, as in a shell); SIGTERM is ignored by bwrap's
# side of an isolated job (so a timeout's SIGTERM reaches the job alone), never by the job
for sig in ("SIGPIPE", "SIGXFZ", "SIGXFSZ", "SIGTERM"):
    if hasattr(signal, sig):
        signal.signal(getattr(signal, sig), signal.SIG_DFL)
try:
    os.execvpe(sys.argv[2], sys.argv[2:], os.environ)
except OSError as e:
    sys.stderr.write("kernelscope sandbox: cannot execute %r: %s\n" % (sys.argv[2], e))
    os._exit(127)
"""
_LAUNCHER = Path(limit_code.__file__).read_text() + _LAUNCHER_MAIN


class Limits(BaseModel):
    """Limits for one process (and its children, which share the process group)."""

    wall_s: float = Field(60.0, gt=0, description="Wall-clock limit; the whole group is killed after it.")
    cpu_s: int | None = Field(None, gt=0, description="RLIMIT_CPU per process, seconds.")
    file_size_bytes: int | None = Field(
        1 << 30, gt=0, description="RLIMIT_FSIZE: largest file a process may write."
    )
    max_processes: int | None = Field(
        256, gt=0, description="Processes the job's group may hold at once; more (a fork bomb) kill the group. "
                               "Non-root users also get RLIMIT_NPROC: 16 tasks per allowed process above their "
                               "count at the start.")
    max_disk_bytes: int | None = Field(
        8 << 30, gt=0, description="How far the job may lower the free space of its working directory's file system "
                                   "(at most half of what was free at its start); beyond that the group is killed. "
                                   "Other writers on that file system count too.")
    output_bytes: int = Field(1 << 20, gt=0, description="Bytes kept of stdout and of stderr each.")
    kill_grace_s: float = Field(2.0, ge=0, description="Time between SIGTERM and SIGKILL.")
    isolate_network: bool = Field(False, description="Enter a new network namespace where the host allows; also "
                                                     "marks the job as untrusted code (it needs isolation).")
    job: JobKind | None = Field(None, description="What the job is, for its sandbox binds; None: from the command.")
    address_space_bytes: int | None = Field(
        None, gt=0, description="RLIMIT_AS per process; None: the compilers' cap for compile and sass jobs, no cap "
                                "for others (never give one to a CUDA process).")
    memory_bytes: int | None = Field(
        None, gt=0, description="Memory of the job's processes together (a cgroup v2 memory.max where delegated, else "
                                "the watchdog's resident-size limit); None: Settings.job_memory_bytes for eval, "
                                "program and profile jobs, none for others.")


class ProcessResult(BaseModel):
    argv: list[str]
    returncode: int | None = Field(description="Exit status; negative for a signal; None if never started.")
    signal_name: str | None = None
    stdout: str = ""
    stderr: str = ""
    stdout_bytes: int = 0
    stderr_bytes: int = 0
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    wall_s: float = 0.0
    timed_out: bool = False
    cancelled: bool = False
    limit_exceeded: str | None = Field(None, description="The limit the watchdog killed the job for, in words.")
    network_isolated: bool = False
    isolation: str | None = Field(None, description="The sandbox the job ran in (bubblewrap and its version); None: "
                                                    "none.")
    warning: str | None = Field(None, description="Set when the job ran without isolation.")
    peak_rss_bytes: int | None = Field(None, description="Largest resident size of one of the job's processes.")
    memory_cap_bytes: int | None = Field(None, description="The address-space cap (RLIMIT_AS) the job ran under.")

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out and not self.cancelled and not self.limit_exceeded

    def describe_failure(self) -> str:
        if self.limit_exceeded:
            return f"was killed because {self.limit_exceeded}"
        if self.timed_out:
            return f"timed out after {self.wall_s:.1f} s (the process group was killed)"
        if self.cancelled:
            return "cancelled (the process group was killed)"
        if self.signal_name:
            return f"killed by {self.signal_name}"
        return f"exited with status {self.returncode}"


class _Capped:
    """Collects a stream keeping the first ``head`` and last ``tail`` bytes."""

    def __init__(self, cap: int) -> None:
        self.head_cap = cap - cap // 4
        self.tail_cap = cap // 4
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def feed(self, data: bytes) -> None:
        self.total += len(data)
        room = self.head_cap - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data and self.tail_cap > 0:
            self.tail += data
            if len(self.tail) > self.tail_cap:
                del self.tail[: len(self.tail) - self.tail_cap]

    @property
    def truncated(self) -> bool:
        return self.total > len(self.head) + len(self.tail)

    def text(self) -> str:
        head = self.head.decode("utf-8", errors="replace")
        if not self.truncated:
            return head + self.tail.decode("utf-8", errors="replace")
        dropped = self.total - len(self.head) - len(self.tail)
        marker = f"\n[... {dropped} bytes of output truncated by kernelscope ...]\n"
        return head + marker + self.tail.decode("utf-8", errors="replace")


def _pump(stream: IO[bytes], sink: _Capped) -> None:
    try:
        while True:
            chunk = stream.read(65536)
            if not chunk:
                break
            sink.feed(chunk)
    except (OSError, ValueError):
        pass
    finally:
        with contextlib.suppress(OSError):
            stream.close()


def build_env(
    extra: Mapping[str, str] | None = None, *, home: Path | None = None, path: str | None = None
) -> dict[str, str]:
    """A minimal environment: PATH, HOME, locale, TMPDIR and the CUDA variables of the server."""
    env = {k: os.environ[k] for k in PASSTHROUGH_ENV if k in os.environ}
    env["PATH"] = path or os.environ.get("PATH", DEFAULT_PATH)
    env["LANG"] = "C.UTF-8"
    env["LC_ALL"] = "C.UTF-8"
    if home is not None:
        env["HOME"] = str(home)
        tmp = home / "tmp"
        if tmp.is_dir():
            env["TMPDIR"] = str(tmp)
    if extra:
        env.update(extra)
    return env


def _killpg(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _signal_name(returncode: int | None) -> str | None:
    if returncode is None or returncode >= 0:
        return None
    try:
        return signal.Signals(-returncode).name
    except ValueError:
        return f"signal {-returncode}"


NPROC_MARGIN_PER_PROCESS = 16  # tasks (threads) per allowed process under RLIMIT_NPROC


def _user_tasks(uid: int) -> int:
    """Tasks (threads) of ``uid`` now: what RLIMIT_NPROC counts."""
    tasks = 0
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            if os.stat(f"/proc/{name}").st_uid == uid:
                with open(f"/proc/{name}/stat", "rb") as f:
                    tasks += int(f.read().rsplit(b")", 1)[1].split()[17])  # num_threads
        except (OSError, ValueError, IndexError):
            continue
    return tasks


def job_rlimits(limits: Limits) -> dict[str, int]:
    """The resource limits a job's process sets before it runs the job."""
    rlimits: dict[str, int] = {"RLIMIT_CORE": 0}
    if limits.cpu_s:
        rlimits["RLIMIT_CPU"] = int(limits.cpu_s)
    if limits.file_size_bytes:
        rlimits["RLIMIT_FSIZE"] = int(limits.file_size_bytes)
    uid = os.getuid()
    if limits.max_processes and uid != 0:  # root is exempt from RLIMIT_NPROC; the watchdog covers it
        with contextlib.suppress(OSError):  # no /proc: no RLIMIT_NPROC
            rlimits["RLIMIT_NPROC"] = _user_tasks(uid) + limits.max_processes * NPROC_MARGIN_PER_PROCESS
    return rlimits


def limit_note(reason: str) -> str:
    return f"\n[kernelscope: the job was killed because {reason}]\n"


def stop_reason(cancel: threading.Event | None, deadline: float) -> tuple[bool, bool]:
    """(cancelled, timed_out) for a job polled against its cancel event and wall-clock deadline."""
    if cancel is not None and cancel.is_set():
        return True, False
    return False, time.monotonic() >= deadline


def run_process(
    argv: Sequence[str],
    *,
    cwd: Path,
    limits: Limits | None = None,
    env: Mapping[str, str] | None = None,
    stdin: bytes | None = None,
    cancel: threading.Event | None = None,
) -> ProcessResult:
    """Run ``argv`` (never through a shell) in ``cwd`` under ``limits``; never raises for the
    child's own failures: a missing executable, a crash or a timeout are all results."""
    limits = limits or Limits()
    argv = [str(a) for a in argv]
    if not argv:
        raise ValueError("empty command")
    child_env = dict(env) if env is not None else build_env(home=cwd)
    plan = plan_job(argv, cwd=cwd, env=child_env, kind=limits.job, isolate_network=limits.isolate_network,
                    address_space_bytes=limits.address_space_bytes)
    net = plan.network_isolated or bool(limits.isolate_network and not plan.prefix and network_isolation_status()[0])
    rlimits = job_rlimits(limits)
    if plan.address_space_bytes:
        rlimits["RLIMIT_AS"] = int(plan.address_space_bytes)
    cfg = json.dumps({"rlimits": rlimits,
                      "unshare_net": net and not plan.prefix, "require_net_isolation": False})
    full = [*plan.prefix, sys.executable, "-I", "-S", "-c", _LAUNCHER, cfg, *argv]
    memory = MemoryGuard(job_memory(limits, plan.untrusted))

    start = time.monotonic()
    out, err = _Capped(limits.output_bytes), _Capped(limits.output_bytes)
    try:
        proc = _popen(full, cwd, child_env, stdin, memory)
    except OSError as e:
        memory.close()
        return ProcessResult(argv=argv, returncode=None, stderr=f"cannot start: {e}")
    pumps = _start_pumps(proc, out, err, stdin)
    sup = _supervise(proc, limits, cwd, cancel, deadline=start + limits.wall_s, memory=memory)
    wall = time.monotonic() - start
    # Children left in the group (daemonised helpers, fork bombs) die with the job.
    kill_group_until_empty(proc.pid)
    for t in pumps:
        t.join(timeout=5.0)
    returncode = proc.returncode
    if plan.prefix and returncode is not None and 128 < returncode < 128 + 65:
        returncode = 128 - returncode  # bwrap exits 128+N for a job killed by signal N
    exceeded = sup.exceeded or memory.reason() or _memory_cap_reason(plan, returncode, sup.peak_rss, err)
    memory.close()
    notes = limit_note(exceeded) if exceeded else ""
    extcache.seal_after_job(child_env)  # an extension build it finished is reused, unchanged, by later jobs
    if plan.warning and plan.kind in ("compile", "sass"):  # their answers show the log: the warning is in it
        notes += "\n" + plan.warning + "\n"
    return ProcessResult(
        argv=argv,
        returncode=returncode,
        signal_name=_signal_name(returncode),
        stdout=out.text(),
        stderr=err.text() + notes,
        stdout_bytes=out.total,
        stderr_bytes=err.total,
        stdout_truncated=out.truncated,
        stderr_truncated=err.truncated,
        wall_s=wall,
        timed_out=sup.timed_out,
        cancelled=sup.cancelled,
        limit_exceeded=exceeded,
        network_isolated=net,
        isolation=plan.isolation,
        warning=plan.warning,
        peak_rss_bytes=sup.peak_rss,
        memory_cap_bytes=plan.address_space_bytes,
    )


def _popen(full: list[str], cwd: Path, env: dict[str, str], stdin: bytes | None,
           memory: MemoryGuard) -> subprocess.Popen[bytes]:
    """Start the job in its own session; with a cgroup, behind a gate it passes once it is inside it."""
    gate = os.pipe() if memory.cgroup is not None else None
    if gate is not None:  # the job waits in a Python gate until it is inside its cgroup (a shell's `<&N`
        full = [sys.executable, "-I", "-S", "-c", _GATE, str(gate[0]), *full]  # takes one-digit fds only)
    try:
        proc = subprocess.Popen(full, cwd=str(cwd), env=env, stdin=subprocess.PIPE if stdin is not None
                                else subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                start_new_session=True, close_fds=True, pass_fds=gate[:1] if gate else ())
    except OSError:
        if gate is not None:
            os.close(gate[1])
        raise
    finally:
        if gate is not None:
            os.close(gate[0])
    if gate is not None:
        try:
            memory.attach(proc.pid)
            with contextlib.suppress(OSError):
                os.write(gate[1], b"go\n")
        finally:  # without "go" (attach failed) the gate exits and the job never runs uncapped
            os.close(gate[1])
    return proc


# The cgroup gate: wait for "go" on the inherited fd, then become the job; EOF without it ends here.
_GATE = ("import os, sys\nfd = int(sys.argv[1])\nok = os.read(fd, 3) == b'go\\n'\nos.close(fd)\n"
         "if not ok:\n    sys.exit('the job was not moved into its cgroup; it did not start')\n"
         "os.execvp(sys.argv[2], sys.argv[2:])\n")


# What a process prints when an allocation fails (C/C++ runtimes, gcc, cicc, Python).
_OOM_MARKERS = (b"bad_alloc", b"out of memory", b"Out of memory", b"virtual memory exhausted",
                b"Cannot allocate memory", b"MemoryError", b"memory allocation failed")


def _memory_cap_reason(plan: Plan, returncode: int | None, peak: int | None, err: _Capped) -> str | None:
    """The address-space cap, in words, when it is what stopped a failed job: an allocation failure in its
    output, or a crash (an unchecked failed allocation), under a cap."""
    cap = plan.address_space_bytes
    if not cap or returncode == 0 or returncode is None:
        return None
    text = bytes(err.head) + bytes(err.tail)
    crashed = returncode < 0 and -returncode in (signal.SIGSEGV, signal.SIGABRT, signal.SIGBUS)
    if not crashed and not any(m in text for m in _OOM_MARKERS):
        return None
    used = f"; its largest process reached {peak >> 20} MiB resident" if peak else ""
    return (f"it reached the compiler memory cap: {cap >> 20} MiB of address space per process (RLIMIT_AS, "
            f"Settings.compiler_memory_bytes){used}")


def _start_pumps(proc: subprocess.Popen[bytes], out: _Capped, err: _Capped,
                 stdin: bytes | None) -> list[threading.Thread]:
    """Threads that drain the child's stdout and stderr into capped buffers (and feed its stdin)."""
    pumps = [
        threading.Thread(target=_pump, args=(proc.stdout, out), daemon=True),
        threading.Thread(target=_pump, args=(proc.stderr, err), daemon=True),
    ]
    for t in pumps:
        t.start()
    if stdin is not None and proc.stdin is not None:

        def _feed() -> None:
            try:
                proc.stdin.write(stdin)  # type: ignore[union-attr]
                proc.stdin.close()  # type: ignore[union-attr]
            except OSError:
                pass

        threading.Thread(target=_feed, daemon=True).start()
    return pumps


class _Supervised(BaseModel):
    timed_out: bool = False
    cancelled: bool = False
    exceeded: str | None = None
    peak_rss: int | None = None


def _terminate(proc: subprocess.Popen[bytes], grace_s: float) -> int | None:
    """SIGTERM the group, again every 0.2 s of the grace period: a process that starts while the first one is
    sent (a job still in its launcher, where bwrap's side keeps SIGTERM ignored) gets a later one, instead
    of living until the SIGKILL. ``_reap``'s answer: None while the job still runs after ``grace_s``."""
    deadline = time.monotonic() + grace_s
    while True:
        _killpg(proc.pid, signal.SIGTERM)
        peak = _reap(proc, max(0.0, min(0.2, deadline - time.monotonic())))
        if peak is not None or time.monotonic() >= deadline:
            return peak


def _reap(proc: subprocess.Popen[bytes], timeout: float | None) -> int | None:
    """Wait up to ``timeout`` seconds (None: for ever) for the child with ``wait4``: its peak resident size
    in bytes (of itself and the descendants it reaped) once it has exited, else None."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        if proc.returncode is not None:
            return 0
        try:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        except ChildProcessError:  # reaped elsewhere
            proc.wait()
            return 0
        if pid:
            proc.returncode = os.waitstatus_to_exitcode(status)
            return int(usage.ru_maxrss) * 1024
        if deadline is not None and time.monotonic() >= deadline:
            return None
        time.sleep(0.01)


def job_memory(limits: Limits, untrusted: bool) -> int | None:
    """The memory cap of a job: its own, else the settings' for untrusted jobs (evaluations, labelled programs
    and profiles: CUDA processes); the server's own probes and tools get none."""
    return limits.memory_bytes or (get_settings().job_memory_bytes if untrusted else None)


def _supervise(proc: subprocess.Popen[bytes], limits: Limits, cwd: Path, cancel: threading.Event | None, *,
               deadline: float, memory: MemoryGuard) -> _Supervised:
    """Wait for the child, killing its process group when it exceeds a watched limit, passes its deadline
    or is cancelled."""
    res = _Supervised()
    watchdog = Watchdog(limits, cwd, memory_bytes=memory.watchdog_bytes, memory_note=memory.note)
    peak: int | None
    while True:
        peak = _reap(proc, 0.05)
        if peak is not None:
            break
        res.exceeded = watchdog.check(proc.pid)
        if res.exceeded:
            kill_group_until_empty(proc.pid)
            peak = _reap(proc, None)
            break
        res.cancelled, res.timed_out = stop_reason(cancel, deadline)
        if res.timed_out or res.cancelled:
            peak = _terminate(proc, limits.kill_grace_s)
            if peak is None:
                _killpg(proc.pid, signal.SIGKILL)
                peak = _reap(proc, None)
            break
    res.peak_rss = max(peak or 0, watchdog.peak_rss) or None
    return res


@lru_cache(maxsize=1)
def network_isolation_status() -> tuple[bool, str]:
    """Whether children can be put in a fresh network namespace here, and why not."""
    if not sys.platform.startswith("linux"):
        return False, "network namespaces exist only on Linux"
    code = "import ctypes,sys; l=ctypes.CDLL(None,use_errno=True); sys.exit(0 if l.unshare(0x40000000)==0 else 1)"
    try:
        r = subprocess.run([sys.executable, "-I", "-S", "-c", code], timeout=10, capture_output=True)
    except (OSError, subprocess.TimeoutExpired) as e:
        return False, f"probe failed: {e}"
    if r.returncode == 0:
        return True, "children run in a private network namespace (no network)"
    return False, "unshare(CLONE_NEWNET) is not permitted here (needs CAP_SYS_ADMIN); children keep the network"
