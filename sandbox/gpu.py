"""GPU leases: one timed job per GPU at a time; other callers queue and can report their place.

A job runs with ``CUDA_VISIBLE_DEVICES`` set to the leased GPU only. Leases are released when the job
ends however it ends (crash, timeout, cancellation), so the next job on that GPU can start. The same
first-come, first-served slots also bound the evaluation pool's CPU workers and build workers
(``kind``), and each slot counts its jobs and busy time for the pool's status.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from kernelscope.errors import InputError, KernelscopeError

# on_wait(jobs_ahead, waited_s): how a queued job hears of its place in the GPU queue
WaitCallback = Callable[[int, float], None]


@dataclass
class Lease:
    index: int  # the device's position in this server's view (0..n-1)
    visible: str  # the value for the child's CUDA_VISIBLE_DEVICES
    waited_s: float
    kind: str = "gpu"

    @property
    def worker(self) -> str:
        return worker_name(self.kind, self.visible)


def worker_name(kind: str, visible: str) -> str:
    """A slot's worker name: ``gpu0`` for the GPU whose CUDA_VISIBLE_DEVICES value is 0; a CPU or build
    slot is named by its own id (``cpu1``, ``build0``)."""
    return f"gpu{visible}" if kind == "gpu" else visible


@dataclass
class SlotStats:
    jobs: int = 0
    busy_s: float = 0.0
    since: float | None = None  # when the current job took the slot


class LeaseCancelled(KernelscopeError):
    pass


class GpuPool:
    def __init__(self, visible: list[str], kind: str = "gpu") -> None:
        self.visible = visible
        self.kind = kind
        self._busy = [False] * len(visible)
        self._stats = [SlotStats() for _ in visible]
        self._queue: list[int] = []  # tickets in arrival order
        self._next = 0
        self._cond = threading.Condition()

    @classmethod
    def from_environment(cls) -> GpuPool:
        env = os.environ.get("CUDA_VISIBLE_DEVICES")
        if env is not None:
            ids = [x.strip() for x in env.split(",") if x.strip() and x.strip() != "-1"]
            return cls(ids)
        try:
            import pynvml

            pynvml.nvmlInit()
            try:
                n = pynvml.nvmlDeviceGetCount()
            finally:
                pynvml.nvmlShutdown()
        except Exception:
            n = 0
        return cls([str(i) for i in range(n)])

    def __len__(self) -> int:
        return len(self.visible)

    def busy(self) -> list[bool]:
        with self._cond:
            return list(self._busy)

    def queued(self) -> int:
        """Callers waiting for a slot now."""
        with self._cond:
            return len(self._queue)

    def contended(self) -> bool:
        """Whether a new job would wait: every slot busy, or callers already queued."""
        with self._cond:
            return bool(self._queue) or all(self._busy)

    def stats(self) -> list[SlotStats]:
        """Per slot: jobs finished and busy seconds (the running job's time included)."""
        now = time.monotonic()
        with self._cond:
            return [SlotStats(st.jobs, st.busy_s + (now - st.since if st.since is not None else 0.0), st.since)
                    for st in self._stats]

    @contextmanager
    def lease(self, device: int | None = None, *, cancel: threading.Event | None = None,
              on_wait: WaitCallback | None = None) -> Iterator[Lease]:
        """Hold one GPU (``device`` or the first free) for the duration of the block. While queued,
        ``on_wait(jobs_ahead, waited_s)`` is called as soon as the job has to queue, then about once a
        second."""
        if not self.visible:
            raise InputError("No GPU is visible to this server, so GPU jobs cannot run here."
                             if self.kind == "gpu" else f"This pool has no {self.kind} workers.")
        if device is not None and not 0 <= device < len(self.visible):
            raise InputError(f"GPU {device} does not exist here; this server sees {len(self.visible)} GPU(s).")
        t0 = time.monotonic()
        with self._cond:
            ticket = self._next
            self._next += 1
            self._queue.append(ticket)
            last_report = -1.0  # report at once when queued, then every second
            try:
                while True:
                    ahead = self._queue.index(ticket)
                    free_any = [i for i, b in enumerate(self._busy) if not b]
                    free = [i for i in free_any if device is None or i == device]
                    # FIFO: a waiter takes a GPU only if fewer earlier waiters than free GPUs remain
                    if free and ahead < len(free_any):
                        idx = free[0]
                        self._busy[idx] = True
                        self._stats[idx].since = time.monotonic()
                        break
                    if cancel is not None and cancel.is_set():
                        raise LeaseCancelled("cancelled while waiting for a GPU")
                    waited = time.monotonic() - t0
                    if on_wait is not None and waited - last_report >= 1.0:
                        last_report = waited
                        self._cond.release()
                        try:
                            on_wait(ahead, waited)
                        finally:
                            self._cond.acquire()
                    self._cond.wait(timeout=0.2)
            finally:
                self._queue.remove(ticket)
                self._cond.notify_all()
        try:
            yield Lease(index=idx, visible=self.visible[idx], waited_s=time.monotonic() - t0, kind=self.kind)
        finally:
            with self._cond:
                self._busy[idx] = False
                st = self._stats[idx]
                st.jobs += 1
                st.busy_s += time.monotonic() - (st.since or time.monotonic())
                st.since = None
                self._cond.notify_all()


_pool: GpuPool | None = None
_pool_lock = threading.Lock()


def gpu_pool() -> GpuPool:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = GpuPool.from_environment()
        return _pool
