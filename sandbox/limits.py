"""Resource limits and network isolation, applied by a job's own process before the job runs.

Stdlib only, and one copy for both ways a job starts: the launcher of ``run_process`` (``python -I -S
-c``, whose code is this file's source followed by its own few lines) and the evaluation fork server's
child (which loads this file by its path, without importing the rest of kernelscope). Whatever cannot
be applied is returned in words: the launcher and the child report it instead of running on without it.
"""

from __future__ import annotations

import ctypes
import os
import resource

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
