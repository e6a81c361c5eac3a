"""Resource limits and network isolation, applied by a job's own process before the job runs.

Stdlib only, and one copy for both ways a job starts: the launcher of ``run_process`` (``python -I -S
-c``, whose code is this file's source followed by its own few lines) and the evaluation fork server's
child (which loads this file by its path, without importing the rest of kernelscope). Whatever cannot
be applied is returned in words: the launcher and the child report it instead of running on without it.
"""

from __future__ import annotations

import ctypes
import os
import re
import resource
from collections.abc import Sequence

CLONE_NEWNET = 0x40000000


def set_rlimit(name: str, value: int) -> str | None:
    """Set the resource limit ``name`` (``RLIMIT_FSIZE``...) to ``value``, soft and hard; where the hard
    limit is already lower, the soft limit goes to it. None when applied, else why not."""
    lim = getattr(resource, name, None)
    if not isinstance(lim, int):
        return f"{name}: no such resource limit here"
    try:
        resource.setrlimit(lim, (value, value))
        return None
    except (ValueError, OSError) as e:
        first = e
    _, hard = resource.getrlimit(lim)
    if hard != resource.RLIM_INFINITY:
        try:
            resource.setrlimit(lim, (min(value, hard), hard))
            return None
        except (ValueError, OSError) as e:
            first = e
    return f"{name}={value}: {first}"


def leave_network() -> str | None:
    """Enter a new, empty network namespace (no network). None when done, else why not."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(CLONE_NEWNET) != 0:
        return f"unshare(CLONE_NEWNET) failed: {os.strerror(ctypes.get_errno())}"
    return None


def apply_limits(rlimits: dict[str, int], unshare_net: bool) -> tuple[list[str], str | None]:
    """Apply a job's resource limits, then (``unshare_net``) leave the network: the limits that could not
    be applied, and why the network could not be left (None: left, or not asked)."""
    failed = [p for p in (set_rlimit(name, value) for name, value in rlimits.items()) if p is not None]
    return failed, (leave_network() if unshare_net else None)


# -- a fork server job's private view (inside the fork server's bubblewrap sandbox) -----------------------------
CLONE_NEWNS = 0x00020000
CLONE_NEWPID = 0x20000000
MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_BIND, MS_MOVE, MS_REC, MS_PRIVATE = 0x2, 0x4, 0x8, 0x1000, 0x2000, 0x4000, 0x40000
PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS = 24, 38
_STASH = "/dev/shm"


def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
    return libc


def _mount(libc: ctypes.CDLL, src: str | None, dst: str, fstype: str | None, flags: int,
           data: str | None = None) -> None:
    enc = [None if v is None else v.encode() for v in (src, dst, fstype, data)]
    if libc.mount(enc[0], enc[1], enc[2], flags, enc[3]) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount {src or fstype} on {dst}: {os.strerror(err)}")


def _mounts_under(root: str) -> list[str]:
    """The outermost mount points strictly under ``root`` in this mount namespace (from mountinfo)."""
    points: list[str] = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), line.split()[4])  # \\040: a space
            if point.startswith(root.rstrip("/") + "/"):
                points.append(point)
    return [p for p in dict.fromkeys(points) if not any(p != q and p.startswith(q + "/") for q in points)]


def _aside(libc: ctypes.CDLL, path: str, name: str, how: int) -> str:
    aside = f"{_STASH}/.{name}"
    os.mkdir(aside)
    _mount(libc, path, aside, None, how)
    return aside


def _put_back(libc: ctypes.CDLL, moved: list[tuple[str, str]]) -> None:
    for aside, path in moved:
        os.makedirs(path, exist_ok=True)
        _mount(libc, aside, path, None, MS_MOVE)
        os.rmdir(aside)


def private_view(keep: list[str], masked: list[str], bind: Sequence[Sequence[str]] = ()) -> str | None:
    """Give this process (a fork server's job, which holds CAP_SYS_ADMIN in the sandbox's user namespace)
    its own mount namespace, in which every folder of ``masked`` (the workspace root, the shared caches) is
    an empty tmpfs except the folders of ``keep`` (its workspace, its caches) and the (source, destination)
    pairs of ``bind`` (a folder of its own mounted at another path: its copy of a sealed extension build),
    with a fresh ``/tmp`` (what the sandbox binds under /tmp is moved over) and ``/dev/shm``; and a new PID
    namespace for the child it forks next (:func:`enter_pid_namespace`). None when done, else why not (the
    job must not run then)."""
    libc = _libc()
    try:
        if libc.unshare(CLONE_NEWNS | CLONE_NEWPID) != 0:
            raise OSError(ctypes.get_errno(), f"unshare: {os.strerror(ctypes.get_errno())}")
        _mount(libc, None, "/", None, MS_REC | MS_PRIVATE)
        _mount(libc, "tmpfs", _STASH, "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777")
        pairs = [(path, path) for path in keep] + [(src, dst) for src, dst in bind]
        kept = [(_aside(libc, src, f"keep{i}", MS_BIND | MS_REC), dst) for i, (src, dst) in enumerate(pairs)]
        hidden = [os.path.normpath(m) for m in masked]
        # the sandbox's binds under /tmp (the package, a Python install) stay as they are, over a fresh /tmp
        moved = [(_aside(libc, point, f"tmp{i}", MS_MOVE), point) for i, point in enumerate(_mounts_under("/tmp"))
                 if point not in hidden and not any(point.startswith(m + "/") for m in hidden)]
        _mount(libc, "tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777")
        _put_back(libc, moved)
        for path in hidden:  # masked after the moves: a moved bind may hold one
            if os.path.isdir(path):
                _mount(libc, "tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755")
        _put_back(libc, kept)
    except OSError as e:
        return f"the job's private view: {e}"
    return None


def enter_pid_namespace() -> str | None:
    """In the first child after :func:`private_view` (pid 1 of its own PID namespace, before it forks the
    job): mount its own ``/proc``, then drop every capability for good (bounding set, then capset; no new
    privileges), so neither it nor the job can undo the masks or see or signal other jobs. None when done,
    else why not."""
    libc = _libc()
    try:
        _mount(libc, "proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    except OSError as e:
        return f"the job's /proc: {e.strerror or e}"
    return drop_capabilities(libc)


def drop_capabilities(libc: ctypes.CDLL | None = None) -> str | None:
    libc = libc or _libc()
    for cap in range(64):
        libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)  # EINVAL past the last capability
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
    data = (ctypes.c_uint32 * 6)()  # effective, permitted, inheritable: none (two 32-bit words each)
    if libc.capset(header, data) != 0 or libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        return f"dropping capabilities: {os.strerror(ctypes.get_errno())}"
    return None
