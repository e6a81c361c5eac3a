"""The evaluation pool on real GPUs: a fast-path candidate built on the CPU and loaded by the GPU job,
parallel evaluations spread over every GPU of the host, and `optimize` keeping them all busy. The
two-GPU tests skip on a one-GPU machine with that reason."""

from __future__ import annotations

import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path

import pytest

from kernelscope.config import get_settings
from kernelscope.models.requests import EvalRequest
from kernelscope.sandbox.gpu import gpu_pool
from kernelscope.sandbox.pool import LocalPool, build_cache
from kernelscope.toolkit.probes import local_default_arch
from kernelscope.tools.run import RUNNER, build_only

pytestmark = pytest.mark.gpu
PROBLEMS = Path(__file__).resolve().parent.parent / "examples" / "problems"
SOFTMAX = PROBLEMS / "softmax"


def fresh(src: str) -> str:
    """The candidate with a new kernel source (a nonce comment), so nothing is cached for it yet."""
    i = src.index('extern "C"')
    return src[:i] + f"// nonce {uuid.uuid4().hex}\n" + src[i:]


def request(candidate: str) -> EvalRequest:
    return EvalRequest(reference=(SOFTMAX / "reference.py").read_text(), candidate=candidate, device="cuda",
                       trials=2, timing_budget_s=0.3)


def two_gpus() -> None:
    if len(gpu_pool()) < 2:
        pytest.skip(f"needs two GPUs; this machine has {len(gpu_pool())}")


def test_a_cpu_build_is_what_the_gpu_job_loads(kernelscope_home: Path) -> None:
    cand = fresh((SOFTMAX / "better.py").read_text())
    cubins = build_cache(kernelscope_home) / "nvrtc"  # one folder per candidate source
    before = set(cubins.glob("*/*.cubin")) if cubins.is_dir() else set()
    took, note = build_only(request(cand), get_settings(), build_cache(kernelscope_home), local_default_arch())
    built = set(cubins.glob("*/*.cubin")) - before
    assert note is None and len(built) == 1 and took > 0
    r = LocalPool(cpu_workers=1, build_workers=1).evaluate(request(cand), runner=RUNNER)
    assert r.correctness and r.correctness.correct and r.worker == "gpu" + gpu_pool().visible[0]
    assert set(cubins.glob("*/*.cubin")) - before == built  # the GPU job compiled nothing new: it loaded the build


def test_parallel_evaluations_use_every_gpu_and_build_while_they_are_busy() -> None:
    two_gpus()
    pool = LocalPool(build_workers=2)
    n = len(pool.gpus)
    peak = [0]
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            peak[0] = max(peak[0], sum(pool.gpus.busy()))
            time.sleep(0.005)

    threading.Thread(target=sample, daemon=True).start()
    better = (SOFTMAX / "better.py").read_text()
    with ThreadPoolExecutor(2 * n) as ex:
        results = list(ex.map(partial(pool.evaluate, runner=RUNNER), [request(fresh(better)) for _ in range(3 * n)]))
    stop.set()
    assert all(r.correctness and r.correctness.correct for r in results), [r.error for r in results]
    assert {r.worker for r in results} == {f"gpu{v}" for v in pool.gpus.visible}
    assert peak[0] == n
    # with every GPU busy, later candidates were built on the CPU first
    assert any(r.build_s for r in results) and not any(r.build_note for r in results)
    assert all(w.jobs >= 1 for w in pool.status().workers if w.kind == "gpu")


@pytest.mark.anyio
async def test_optimize_keeps_both_gpus_busy(tmp_path: Path) -> None:
    two_gpus()
    from kernelscope.agent.optimize import OptimizeConfig, optimize

    d = PROBLEMS / "elementwise_chain"
    cfg = OptimizeConfig(reference=d / "reference.py", candidate=d / "candidate.py", out=tmp_path / "run", budget=10,
                         timing_budget_s=0.3, trials=2, analyze="never", device="cuda")
    s = await optimize(cfg)
    assert s.parallel == len(gpu_pool()) and s.evaluations == 10 and s.best_status == "correct"
    assert set(s.workers) == {f"gpu{v}" for v in gpu_pool().visible} and sum(s.workers.values()) == 10


def test_ray_pool_schedules_evaluations_on_every_gpu() -> None:
    ray = pytest.importorskip("ray", reason="the Ray backend needs the `ray` extra")
    from kernelscope.sandbox.pool import RayPool

    n = len(gpu_pool())
    if ray.is_initialized():
        ray.shutdown()
    ray.init(num_cpus=4, num_gpus=n, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        pool = RayPool()
        assert pool.status().ray_resources.get("GPU") == n
        better = (SOFTMAX / "better.py").read_text()
        with ThreadPoolExecutor(2 * n) as ex:
            results = list(ex.map(partial(pool.evaluate, runner=RUNNER),
                                  [request(fresh(better)) for _ in range(3 * n)]))
        assert all(r.correctness and r.correctness.correct for r in results), [r.error for r in results]
        # Ray gave each task one GPU (CUDA_VISIBLE_DEVICES set per task): every GPU evaluated something
        used = {(r.worker or "").rsplit("/", 1)[-1] for r in results}
        assert used == {f"gpu{i}" for i in range(n)}, [r.worker for r in results]
        # the cubins were built by Ray's CPU build tasks and shipped to the GPU tasks
        assert all(r.build_s and not r.build_note for r in results), [(r.build_s, r.build_note) for r in results]
    finally:
        ray.shutdown()
