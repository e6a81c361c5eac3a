"""GPU leases (the pool logic runs on CPU: the 'GPUs' are just the ids handed to CUDA_VISIBLE_DEVICES)."""

from __future__ import annotations

import threading
import time

import pytest

from kernelscope.errors import InputError
from kernelscope.sandbox.gpu import GpuPool, LeaseCancelled


def test_one_job_per_gpu_and_queued_jobs_report_their_place() -> None:
    pool = GpuPool(["3"])
    active = 0
    peak = 0
    waits: list[tuple[int, float]] = []
    lock = threading.Lock()

    def job(i: int) -> None:
        nonlocal active, peak
        with pool.lease(on_wait=lambda ahead, waited: waits.append((ahead, waited))) as lease:
            assert lease.visible == "3"
            with lock:
                active += 1
                peak = max(peak, active)
            time.sleep(0.4)
            with lock:
                active -= 1

    threads = [threading.Thread(target=job, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert peak == 1 and pool.busy() == [False]
    assert waits and all(ahead >= 0 for ahead, _ in waits)


def test_two_gpus_run_two_jobs_at_once() -> None:
    pool = GpuPool(["0", "1"])
    got: list[str] = []
    barrier = threading.Barrier(2, timeout=5)

    def job() -> None:
        with pool.lease() as lease:
            got.append(lease.visible)
            barrier.wait()  # both hold a GPU at the same time, or this times out

    threads = [threading.Thread(target=job) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(got) == ["0", "1"]


def test_lease_is_released_when_the_job_raises() -> None:
    pool = GpuPool(["0"])
    with pytest.raises(RuntimeError), pool.lease():
        raise RuntimeError("crashed job")
    with pool.lease() as lease:
        assert lease.index == 0


def test_cancel_while_queued() -> None:
    pool = GpuPool(["0"])
    cancel = threading.Event()
    with pool.lease():
        threading.Timer(0.3, cancel.set).start()
        with pytest.raises(LeaseCancelled), pool.lease(cancel=cancel):
            pass


def test_no_gpu_or_bad_index() -> None:
    with pytest.raises(InputError, match="No GPU"), GpuPool([]).lease():
        pass
    with pytest.raises(InputError, match="does not exist"), GpuPool(["0"]).lease(device=3):
        pass
