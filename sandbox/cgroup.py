"""Per-job cgroup v2 memory limits, where the host delegates a cgroup v2 subtree with the memory controller.

Untrusted jobs (evaluations, programs, profiles: CUDA processes, which never get ``RLIMIT_AS``) each get
a cgroup ``job-<id>`` under a parent cgroup with ``memory.max`` = ``Settings.job_memory_bytes``,
``memory.swap.max`` = 0 and ``memory.oom.group`` = 1 (the kernel's OOM killer ends the whole job). The
job's first process is moved in before it runs anything (the launchers hold it at a gate until then),
so every process it starts is inside. Afterwards ``memory.events`` says whether the limit stopped it
and ``memory.peak`` how much it used.

The parent: ``KERNELSCOPE_JOB_CGROUP`` (a cgroup v2 directory the server may write, with ``memory`` in its
``cgroup.subtree_control`` or enabling it there) where set; else ``kernelscope-jobs`` under the server's
own cgroup when that cgroup has the memory controller and the server may write it (the server moves
itself into a ``kernelscope-server`` leaf first when it is the only process there: cgroup v2 lets only
a cgroup without processes hand controllers to its children). Where none can be had, the watchdog's
resident-size check applies instead, and the status says why (docs/isolation.md).
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
import uuid
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path


@dataclass(frozen=True)
class CgroupStatus:
    parent: Path | None
    detail: str

    @property
    def available(self) -> bool:
        return self.parent is not None


def _cgroup2_mount() -> Path | None:
    try:
        with open("/proc/self/mounts") as f:
            for line in f:
                fields = line.split()
                if len(fields) > 2 and fields[2] == "cgroup2":
                    return Path(fields[1])
    except OSError:
        return None
    return None


def _own_cgroup() -> str | None:
    try:
        with open("/proc/self/cgroup") as f:
            for line in f:
                if line.startswith("0::"):
                    return line[3:].strip()
    except OSError:
        return None
    return None


def _enable_memory(cg: Path) -> str | None:
    """Make sure ``cg``'s children get the memory controller; None when they do, else why not."""
    if not (cg / "cgroup.controllers").is_file():
        return f"{cg} is not a cgroup v2 directory"
    try:
        if "memory" in (cg / "cgroup.subtree_control").read_text().split():
            return None
        if "memory" not in (cg / "cgroup.controllers").read_text().split():
            return f"{cg} has no memory controller (not delegated to it)"
        (cg / "cgroup.subtree_control").write_text("+memory")
        return None
    except OSError as e:
        return f"cannot enable the memory controller in {cg}: {e.strerror or e}"


def _leave_for_leaf(base: Path) -> str | None:
    """Move this process into ``base/kernelscope-server`` when it is the only one in ``base`` (so ``base`` may
    hand the memory controller down); None when moved, else why not."""
    try:
        procs = [p for p in (base / "cgroup.procs").read_text().split() if p]
        if procs and procs != [str(os.getpid())]:
            return (f"the server's cgroup {base} holds {len(procs)} processes, and cgroup v2 lets only an empty "
                    "cgroup hand the memory controller to its children")
        leaf = base / "kernelscope-server"
        leaf.mkdir(exist_ok=True)
        (leaf / "cgroup.procs").write_text(str(os.getpid()))
        return None
    except OSError as e:
        return f"cannot move the server into a leaf cgroup of {base}: {e.strerror or e}"


@lru_cache(maxsize=4)
def cgroup_status(explicit: str | None = None) -> CgroupStatus:
    """Where job cgroups go (``explicit``: ``KERNELSCOPE_JOB_CGROUP``), or why there is no such place here."""
    fix = "; name a delegated cgroup v2 directory in KERNELSCOPE_JOB_CGROUP (docs/isolation.md)"
    if explicit:
        parent = Path(explicit)
        why = _enable_memory(parent) if parent.is_dir() else f"{parent} is not a directory"
        return CgroupStatus(parent if why is None else None, why or f"job cgroups under {parent}")
    mount, own = _cgroup2_mount(), _own_cgroup()
    if mount is None or own is None:
        return CgroupStatus(None, "no cgroup v2 hierarchy for this process (cgroup v1 or none)" + fix)
    base = mount / own.lstrip("/")
    if not (base / "cgroup.controllers").is_file() or "memory" not in (base / "cgroup.controllers").read_text():
        return CgroupStatus(None, f"the server's cgroup v2 {base} has no memory controller delegated" + fix)
    if not os.access(base, os.W_OK):
        return CgroupStatus(None, f"the server may not write its cgroup {base}" + fix)
    if _enable_memory(base) is not None:
        why = _leave_for_leaf(base) or _enable_memory(base)
        if why is not None:
            return CgroupStatus(None, why + fix)
    jobs = base / "kernelscope-jobs"
    try:
        jobs.mkdir(exist_ok=True)
    except OSError as e:
        return CgroupStatus(None, f"cannot create {jobs}: {e.strerror or e}" + fix)
    why = _enable_memory(jobs)
    return CgroupStatus(jobs if why is None else None, why + fix if why else f"job cgroups under {jobs}")


def job_cgroup_status() -> CgroupStatus:
    return cgroup_status(os.environ.get("KERNELSCOPE_JOB_CGROUP") or None)


class JobCgroup:
    """One job's cgroup: created with its memory limit, the job's first process moved in, read and
    removed when the job is over."""

    _lock = threading.Lock()

    def __init__(self, parent: Path, limit_bytes: int) -> None:
        self.limit = limit_bytes
        self.path = parent / f"job-{uuid.uuid4().hex[:12]}"
        self.path.mkdir()
        (self.path / "memory.max").write_text(str(limit_bytes))
        for name, value in (("memory.swap.max", "0"), ("memory.oom.group", "1")):
            with contextlib.suppress(OSError):
                (self.path / name).write_text(value)

    def attach(self, pid: int) -> str | None:
        """Move ``pid`` in; None when done, else why not."""
        try:
            (self.path / "cgroup.procs").write_text(str(pid))
            return None
        except OSError as e:
            return f"moving the job into {self.path} failed: {e.strerror or e}"

    def _read(self, name: str) -> str:
        try:
            return (self.path / name).read_text()
        except OSError:
            return ""

    def oom_kills(self) -> int:
        for line in self._read("memory.events").splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill" and value.strip().isdigit():
                return int(value)
        return 0

    def peak(self) -> int | None:
        value = self._read("memory.peak").strip()  # Linux 5.19 and later
        return int(value) if value.isdigit() else None

    def reason(self) -> str | None:
        """The memory cap, in words, when the kernel's OOM killer stopped the job under it."""
        if not self.oom_kills():
            return None
        peak = self.peak()
        used = f"; it used {peak >> 20} MiB at its peak" if peak is not None else ""
        return (f"it reached the job memory cap: {self.limit >> 20} MiB (cgroup v2 memory.max, "
                f"Settings.job_memory_bytes), and the kernel ended it{used}")

    def close(self) -> None:
        """Kill what is left in it and remove it."""
        with contextlib.suppress(OSError):
            (self.path / "cgroup.kill").write_text("1")  # Linux 5.14 and later
        for _ in range(100):
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(0.02)


class MemoryGuard:
    """A job's memory cap: its cgroup where one can be had, else the cap the watchdog enforces on the resident
    size of the job's processes (``watchdog_bytes``), with why there is no cgroup (``note``)."""

    def __init__(self, cap: int | None) -> None:
        self.cap = cap
        self.cgroup: JobCgroup | None = None
        self.note = ""
        if not cap:
            return
        st = job_cgroup_status()
        if st.parent is None:
            self.note = f"; no cgroup: {st.detail.split(';')[0]}"
            return
        try:
            self.cgroup = JobCgroup(st.parent, cap)
        except OSError as e:
            self.note = f"; creating its cgroup failed: {e.strerror or e}"

    @property
    def watchdog_bytes(self) -> int | None:
        return self.cap if self.cgroup is None else None

    def attach(self, pid: int) -> None:
        """Move the job's first process into its cgroup (else the watchdog takes the cap over)."""
        if self.cgroup is None:
            return
        why = self.cgroup.attach(pid)
        if why is not None:
            self.cgroup.close()
            self.cgroup, self.note = None, f"; {why}"

    def reason(self) -> str | None:
        return self.cgroup.reason() if self.cgroup is not None else None

    def close(self) -> None:
        if self.cgroup is not None:
            self.cgroup.close()
