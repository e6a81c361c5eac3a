"""The watchdog polled while a job runs (fork bombs, a disk filled, resident memory without a cgroup), and
the process-group helpers it and the launchers share."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kernelscope.sandbox.process import Limits


def _killpg(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def group_pids(pgid: int) -> list[int]:
    """The processes (zombies included: they still hold a pid) whose process group is ``pgid``, from /proc;
    empty where there is no /proc."""
    pids: list[int] = []
    try:
        names = os.listdir("/proc")
    except OSError:
        return pids
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
            if int(fields[2]) == pgid:
                pids.append(int(name))
        except (OSError, ValueError, IndexError):
            continue
    return pids


def _host_tasks() -> int | None:
    """Tasks on the host now (the total in /proc/loadavg): one read, so it is polled often."""
    try:
        with open("/proc/loadavg", "rb") as f:
            return int(f.read().split()[3].split(b"/")[1])
    except (OSError, ValueError, IndexError):
        return None


def _free_bytes(path: Path) -> int | None:
    try:
        st = os.statvfs(path)
    except OSError:
        return None
    return st.f_bavail * st.f_frsize


class Watchdog:
    """Polled while a job runs: says when its process group holds too many processes or its file system
    lost more free space than the job may take. Cheap enough for every poll: a statvfs and one read of
    /proc/loadavg; the group's processes are counted every ``scan_every_s`` and at once when the host's
    task count jumps."""

    def __init__(self, limits: Limits, cwd: Path, *, scan_every_s: float = 0.25, memory_bytes: int | None = None,
                 memory_note: str = "") -> None:
        self.max_processes = limits.max_processes or (256 if memory_bytes else None)
        self.memory_bytes = memory_bytes  # resident bytes the group may hold together (None: the cgroup caps it)
        self.memory_note = memory_note
        self.peak_total = 0  # the most resident bytes seen in the group at once
        self.scan_every_s = scan_every_s
        self._last_scan = time.monotonic()
        self._tasks_at_scan = _host_tasks() if self.max_processes else None
        self.cwd = cwd
        self.peak_rss = 0  # the largest resident high-water mark seen in the group, bytes
        self.disk_budget: int | None = None
        self._free0: int | None = None
        if limits.max_disk_bytes:
            self._free0 = _free_bytes(cwd)
            if self._free0 is not None:
                self.disk_budget = min(limits.max_disk_bytes, self._free0 // 2)

    def check(self, pgid: int) -> str | None:
        """None while the job is within its limits, else the limit it broke, in words."""
        if self.disk_budget is not None and self._free0 is not None:
            free = _free_bytes(self.cwd)
            if free is not None and self._free0 - free > self.disk_budget:
                return (f"it filled the disk: the free space of its file system fell by {(self._free0 - free) >> 20} "
                        f"MiB, more than the {self.disk_budget >> 20} MiB a job may take")
        if self.max_processes:
            now = time.monotonic()
            tasks = _host_tasks()
            jump = (tasks is not None and self._tasks_at_scan is not None
                    and tasks - self._tasks_at_scan > self.max_processes // 2)
            if jump or now - self._last_scan >= self.scan_every_s:
                self._last_scan, self._tasks_at_scan = now, tasks
                pids = group_pids(pgid)
                n = len(pids)
                self.peak_rss = max(self.peak_rss, _peak_resident(pids))
                if n > self.max_processes:
                    return f"it started more than {self.max_processes} processes ({n} at once; a fork bomb?)"
                return self._memory(pids)
        return None

    def _memory(self, pids: list[int]) -> str | None:
        if not self.memory_bytes:
            return None
        now = _resident(pids)
        self.peak_total = max(self.peak_total, now)
        if self.memory_bytes and now > self.memory_bytes:
            return (f"it reached the job memory cap: {self.memory_bytes >> 20} MiB resident in its processes "
                    "together (proportional set size; the watchdog's resident-size limit, "
                    f"Settings.job_memory_bytes{self.memory_note}); "
                    f"it held {now >> 20} MiB when it was stopped")
        return None


def _resident(pids: list[int]) -> int:
    """The memory ``pids`` hold together: the sum of their proportional set sizes (Pss: a page shared by n of
    them counts 1/n in each, so the pages a fork server's job shares with its server and its waiters count
    once), or of their VmRSS where smaps_rollup cannot be read."""
    return sum(_pss_kib(pid) for pid in pids) * 1024


def _pss_kib(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/smaps_rollup", "rb") as f:
            for line in f:
                if line.startswith(b"Pss:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return _status_kib(pid, b"VmRSS:")


def _status_kib(pid: int, key: bytes) -> int:
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            for line in f:
                if line.startswith(key):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def _peak_resident(pids: list[int]) -> int:
    """The largest resident high-water mark (VmHWM) of ``pids``, in bytes."""
    peak = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/status", "rb") as f:
                for line in f:
                    if line.startswith(b"VmHWM:"):
                        peak = max(peak, int(line.split()[1]) * 1024)
                        break
        except (OSError, ValueError, IndexError):
            continue
    return peak


def kill_group_until_empty(pgid: int, timeout_s: float = 2.0) -> None:
    """SIGKILL the group again until nothing is left in it (a fork bomb may fork while the first signal is
    on its way)."""
    deadline = time.monotonic() + timeout_s
    while True:
        _killpg(pgid, signal.SIGKILL)
        alive = [p for p in group_pids(pgid) if not _is_zombie(p)]
        if not alive or time.monotonic() > deadline:
            return
        time.sleep(0.01)


def _is_zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] in (b"Z", b"X")
    except (OSError, IndexError):
        return True
