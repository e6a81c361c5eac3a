"""The evaluation pool on the CPU: the local backend's workers, slots, caches and build policy, and the
Ray backend on a local Ray cluster that the test starts (several CPU workers). The two-GPU behaviour is
in test_pool_gpu.py."""

from __future__ import annotations

import dataclasses
import io
import tarfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from types import SimpleNamespace

import pytest

from kernelscope.errors import InputError, NotAvailable
from kernelscope.models.requests import EvalRequest
from kernelscope.sandbox.gpu import GpuPool
from kernelscope.sandbox.pool import LocalPool, _pack, _unpack, build_cache, worker_dir
from kernelscope.tools.run import RUNNER, job_env, needs_build

torch = pytest.importorskip("torch", reason="evaluations need torch (its CPU build is enough)")

CASES = Path(__file__).parent / "evalcases"
REFERENCE = (CASES / "ref_softmax.py").read_text()
OK = (CASES / "ok_softmax.py").read_text()


def sleepy(seconds: float, tag: str = "") -> str:
    """A correct candidate whose import takes ``seconds`` (a stand-in for a long evaluation)."""
    return f"import time\ntime.sleep({seconds})  # {tag}\n" + OK


def request(candidate: str, **kw: object) -> EvalRequest:
    args: dict = {"device": "cpu", "timing_budget_s": 0.1, "min_runs": 5, "max_runs": 50, "trials": 2,
                  "timeout_s": 120}
    args.update(kw)
    return EvalRequest(reference=REFERENCE, candidate=candidate, **args)


# ------------------------------------------------------------------------------------------- local
def test_local_pool_spreads_cpu_evaluations_over_its_workers_and_no_more() -> None:
    pool = LocalPool(GpuPool([]), cpu_workers=2, build_workers=1)
    busy_seen: list[int] = []
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            busy_seen.append(sum(pool.cpus.busy()))
            time.sleep(0.02)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    t0 = time.monotonic()
    with ThreadPoolExecutor(4) as ex:
        results = list(ex.map(partial(pool.evaluate, runner=RUNNER), [request(sleepy(1.5, str(i))) for i in range(4)]))
    wall = time.monotonic() - t0
    stop.set()
    sampler.join()
    assert all(r.status == "ok" and r.correctness and r.correctness.correct for r in results), results
    assert {r.worker for r in results} == {"cpu0", "cpu1"}
    assert max(busy_seen) == 2  # both workers at once, never a third job
    assert wall >= 2 * 1.5  # four jobs of 1.5 s on two workers: at least two rounds
    # an "ok" answer comes before its process has exited (the CUDA teardown is not waited for): the
    # slots free themselves a moment later
    deadline = time.monotonic() + 10
    while any(pool.cpus.busy()) and time.monotonic() < deadline:
        time.sleep(0.02)
    st = pool.status()
    cpu = [w for w in st.workers if w.kind == "cpu"]
    assert [w.name for w in cpu] == ["cpu0", "cpu1"] and sum(w.jobs for w in cpu) == 4
    assert all(w.busy_s >= 1.5 and not w.busy for w in cpu)
    assert st.backend == "local" and st.queued == 0 and "no GPU" in (st.note or "")
    assert st.gpu_workers == 0 and [w.kind for w in st.workers].count("build") == 1


def test_each_worker_has_its_own_caches_and_builds_are_shared_by_content(tmp_path: Path) -> None:
    gpus = GpuPool(["3", "5"])
    with gpus.lease() as a, gpus.lease() as b:
        ea = job_env(tmp_path / "ws", tmp_path, a, candidate="src one")
        eb = job_env(tmp_path / "ws", tmp_path, b, candidate="src one")
        ec = job_env(tmp_path / "ws", tmp_path, b, candidate="src two")
    assert (ea["CUDA_VISIBLE_DEVICES"], eb["CUDA_VISIBLE_DEVICES"]) == ("3", "5")
    assert a.worker == "gpu3" and b.worker == "gpu5"
    for var in ("CUPY_CACHE_DIR", "TRITON_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR"):
        assert ea[var].startswith(str(worker_dir(tmp_path, "gpu3"))) and eb[var].startswith(
            str(worker_dir(tmp_path, "gpu5")))
    # the build cache is one for all workers; extension builds get one folder per candidate source
    # and so do NVRTC cubins: a job writes only its own source's, never one another candidate's job loads
    assert ea["KERNELSCOPE_NVRTC_CACHE"] == eb["KERNELSCOPE_NVRTC_CACHE"] != ec["KERNELSCOPE_NVRTC_CACHE"]
    assert Path(ea["KERNELSCOPE_NVRTC_CACHE"]).parent == build_cache(tmp_path) / "nvrtc"
    assert Path(job_env(tmp_path / "ws", tmp_path, a)["KERNELSCOPE_NVRTC_CACHE"]).is_relative_to(tmp_path / "ws")
    assert ea["TORCH_EXTENSIONS_DIR"] == eb["TORCH_EXTENSIONS_DIR"] != ec["TORCH_EXTENSIONS_DIR"]
    cpus = GpuPool(["cpu0"], kind="cpu")
    with cpus.lease() as c:
        env = job_env(tmp_path / "ws", tmp_path, c, candidate="src one")
    assert env["CUDA_VISIBLE_DEVICES"] == "" and c.worker == "cpu0"
    assert env["TORCH_EXTENSIONS_DIR"] == ea["TORCH_EXTENSIONS_DIR"]  # a CPU pre-build fills what a GPU job loads
    assert env["KERNELSCOPE_NVRTC_CACHE"] == ea["KERNELSCOPE_NVRTC_CACHE"]


def test_builds_go_ahead_on_the_cpu_when_there_is_something_to_build() -> None:
    fast = "from kernelscope.fast import CudaKernel\nK = CudaKernel('...', 'k')\n"
    ext = "from torch.utils.cpp_extension import load_inline\nmod = load_inline('ext', cpp_sources='')\n"
    assert needs_build(ext, None) and needs_build(ext, "sm_90")  # extensions: always, GPU or not
    assert needs_build(fast, "sm_90") and not needs_build(fast, None)  # cubins: only for a known target
    assert not needs_build(OK, "sm_90")


@pytest.mark.parametrize("src,builds", [
    ("from torch.utils.cpp_extension import load_inline\n", False),  # the import alone builds nothing
    ("import torch.utils.cpp_extension\nclass ModelNew: pass\n", False),
    ("from torch.utils.cpp_extension import load_inline\nm = load_inline(name='x', cpp_sources='')\n", True),
    ("from torch.utils.cpp_extension import load_inline as li\nm = li(name='x', cpp_sources='')\n", True),
    ("from torch.utils.cpp_extension import load\nm = load(name='x', sources=['a.cu'])\n", True),
    ("import torch.utils.cpp_extension as ce\nm = ce.load(name='x', sources=['a.cu'])\n", True),
    ("from torch.utils import cpp_extension\nm = cpp_extension.load_inline('x', '')\n", True),
    ("import torch\nm = torch.utils.cpp_extension.load_inline('x', '')\n", True),
    ("import torch, json\nw = torch.load('w.pt')\nc = json.load(open('c'))\n", False),  # other loads
    ("def f(:\n load_inline", True),  # does not parse: a build slot, to be safe
])
def test_only_real_compilations_take_a_build_slot(src: str, builds: bool) -> None:
    assert needs_build(src, None) is builds


def test_a_fast_path_pre_build_never_waits_behind_extension_builds(monkeypatch: pytest.MonkeyPatch) -> None:
    from kernelscope.tools import run as run_tool

    monkeypatch.setattr(run_tool, "_local_arch", lambda pool: "sm_90")

    fast = "from kernelscope.fast import CudaKernel\nK = CudaKernel('...', 'k')\n"
    pool = LocalPool(GpuPool(["0"]), cpu_workers=1, build_workers=1)
    job = SimpleNamespace(device="cuda", cand_src=fast, cancel=None)
    with pool.gpus.lease(), pool.builds.lease():  # every GPU and every build slot busy
        took, note = run_tool._build_first(job, pool)  # type: ignore[arg-type]
    assert took is None and "every build slot is busy" in (note or "")
    assert run_tool._build_first(SimpleNamespace(device="cuda", cand_src=OK, cancel=None), pool) == (None, None)


def test_gpu_slots_say_when_a_new_job_would_wait_and_count_their_work() -> None:
    gpus = GpuPool(["0", "1"])
    assert not gpus.contended()
    with gpus.lease():
        assert not gpus.contended()  # one GPU still free
        with gpus.lease():
            assert gpus.contended()
            time.sleep(0.05)
    assert not gpus.contended()
    stats = gpus.stats()
    assert [s.jobs for s in stats] == [1, 1] and all(s.busy_s >= 0.05 for s in stats)
    with pytest.raises(InputError, match="no build workers"), GpuPool([], kind="build").lease():
        pass


def test_a_ray_node_ships_a_source_it_built_before_without_building_again(
        kernelscope_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import kernelscope
    from kernelscope.sandbox import pool as pool_mod

    calls: list[str | None] = []

    def fake_build(req, s, builds: Path, arch):  # type: ignore[no-untyped-def]
        calls.append(arch)  # the build step itself (NVRTC, extension builds) is exercised on the GPU
        (builds / "nvrtc").mkdir(parents=True)
        (builds / "nvrtc" / f"{len(calls)}.cubin").write_bytes(b"cubin")
        return 0.5, ("failed" if "broken" in req.candidate else None)

    runner = dataclasses.replace(RUNNER, build=fake_build)
    v = kernelscope.__version__
    first = pool_mod._ray_build(runner, request(OK + "# a\n").model_dump_json(), "sm_90", v)
    again = pool_mod._ray_build(runner, request(OK + "# a\n").model_dump_json(), "sm_90", v)
    other = pool_mod._ray_build(runner, request(OK + "# a\n").model_dump_json(), "sm_100", v)
    assert calls == ["sm_90", "sm_100"] and first["build_s"] == 0.5 and again["build_s"] == 0.0
    assert again["packed"] == first["packed"] and other["packed"] != first["packed"]
    for _ in range(2):  # a failed build is never kept: the next evaluation tries again
        assert pool_mod._ray_build(runner, request(OK + "# broken\n").model_dump_json(), "sm_90", v)["note"] == "failed"
    assert len(calls) == 4
    assert "error" in pool_mod._ray_build(runner, request(OK).model_dump_json(), "sm_90", "0.0.0-other")


def test_build_outputs_travel_as_files_and_nothing_else(tmp_path: Path) -> None:
    src = tmp_path / "built"
    (src / "nvrtc").mkdir(parents=True)
    (src / "nvrtc" / "abc.cubin").write_bytes(b"\x7fELF cubin")
    (src / "torch-extensions" / "k" / "ext").mkdir(parents=True)
    (src / "torch-extensions" / "k" / "ext" / "ext.so").write_bytes(b"so")
    dest = tmp_path / "cache"
    assert _unpack(_pack(src), dest) == 2
    assert (dest / "nvrtc" / "abc.cubin").read_bytes() == b"\x7fELF cubin"
    assert _unpack(_pack(src), dest) == 0  # content-keyed names: what is there is kept
    # a hostile archive: a path out of the cache, an absolute path and a link are all skipped
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name in ("../escape.txt", "/tmp/abs-escape.txt", "ok.txt"):
            info = tarfile.TarInfo(name)
            info.size = 2
            tar.addfile(info, io.BytesIO(b"hi"))
        link = tarfile.TarInfo("link")
        link.type = tarfile.SYMTYPE
        link.linkname = "/etc/passwd"
        tar.addfile(link)
    assert _unpack(buf.getvalue(), dest) == 1
    assert (dest / "ok.txt").is_file() and not (tmp_path / "escape.txt").exists() and not (dest / "link").exists()


# ------------------------------------------------------------------------------------------- Ray
@pytest.fixture(scope="module")
def ray_cluster():  # type: ignore[no-untyped-def]
    ray = pytest.importorskip("ray", reason="the Ray pool tests need the `ray` extra")
    if ray.is_initialized():
        ray.shutdown()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        yield ray
    finally:
        ray.shutdown()


def test_ray_pool_runs_evaluations_as_tasks_on_its_cpu_workers(ray_cluster) -> None:  # type: ignore[no-untyped-def]
    from kernelscope.sandbox.pool import RayPool

    pool = RayPool()
    st = pool.status()
    assert st.backend == "ray" and st.ray_resources.get("CPU") == 2 and st.gpu_workers == 0
    with ThreadPoolExecutor(2) as ex:  # warm both workers (their fork servers import torch once)
        warm = list(ex.map(partial(pool.evaluate, runner=RUNNER), [request(OK), request(sleepy(0.5))]))
    assert all(r.correctness and r.correctness.correct for r in warm), warm
    t0 = time.monotonic()
    with ThreadPoolExecutor(4) as ex:
        results = list(ex.map(partial(pool.evaluate, runner=RUNNER), [request(sleepy(2.0, str(i))) for i in range(4)]))
    wall = time.monotonic() - t0
    assert all(r.status == "ok" and r.correctness and r.correctness.correct for r in results), results
    assert all((r.worker or "").startswith("ray:") and r.worker.endswith("/cpu0") for r in results)
    assert 4.0 <= wall < 4 * 2.0 + 1.0  # two tasks at a time: faster than one after another
    assert pool.status().queued == 0


def test_ray_pool_refuses_what_the_cluster_cannot_do(ray_cluster) -> None:  # type: ignore[no-untyped-def]
    from kernelscope.sandbox.pool import RayPool

    pool = RayPool()
    with pytest.raises(NotAvailable, match="has no GPUs"):
        pool.evaluate(request(OK, device="cuda"), runner=RUNNER)
    with pytest.raises(InputError, match="Ray chooses the GPU"):
        pool.evaluate(request(OK, gpu=1), runner=RUNNER)
    with pytest.raises(InputError, match="syntax error"):
        pool.evaluate(request("def broken(:\n"), runner=RUNNER)
    # a node with another kernelscope version refuses the task, and the answer says so
    ref = pool._eval.options(num_cpus=1, max_retries=0).remote(RUNNER, request(OK).model_dump_json(), None,
                                                                "0.0.0-other")
    with pytest.raises(ray_cluster.exceptions.RayTaskError, match="install the same version"):
        ray_cluster.get(ref)


def test_cancelling_a_ray_evaluation_stops_it(ray_cluster) -> None:  # type: ignore[no-untyped-def]
    from kernelscope.sandbox.pool import RayPool

    pool = RayPool()
    cancel = threading.Event()
    threading.Timer(3.0, cancel.set).start()
    t0 = time.monotonic()
    r = pool.evaluate(request(sleepy(60.0)), runner=RUNNER, cancel=cancel)
    assert r.status == "error" and "cancelled" in (r.error or "")
    assert time.monotonic() - t0 < 10
    # the CPU the cancelled task held is free again: the next evaluation runs
    r2 = pool.evaluate(request(OK), runner=RUNNER)
    assert r2.correctness and r2.correctness.correct


@pytest.mark.anyio
async def test_the_server_sends_evaluations_to_ray(tmp_path: Path) -> None:
    """`kernelscope serve --pool ray --ray-address local` over stdio: capabilities describe the Ray pool and a
    client's parallel `run` calls come back from Ray tasks."""
    pytest.importorskip("ray", reason="the Ray pool tests need the `ray` extra")
    import os
    import sys

    import anyio
    from mcp import Client, StdioServerParameters

    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "PYTHONPATH")}
    env["KERNELSCOPE_HOME"] = str(tmp_path)
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "kernelscope", "serve", "--home", str(tmp_path), "--root", str(tmp_path),
                                      "--pool", "ray", "--ray-address", "local", "--cpu-workers", "2"],
        env=env, cwd=str(tmp_path))
    async with Client(params) as c:
        caps = (await c.call_tool("capabilities", {})).structured_content
        assert caps["pool"]["backend"] == "ray" and caps["pool"]["ray_resources"]["CPU"] == 2
        answers: list = []

        async def one(i: int) -> None:
            args = request(sleepy(0.2, str(i))).model_dump(include={"reference", "candidate", "device", "trials",
                                                                    "timing_budget_s", "timeout_s"})
            answers.append(await c.call_tool("run", {"mode": "eval", **args}))

        async with anyio.create_task_group() as tg:
            for i in range(2):
                tg.start_soon(one, i)
        for r in answers:
            ev = r.structured_content["eval"]
            assert not r.is_error and ev["correctness"]["correct"], r
            assert ev["worker"].startswith("ray:")
        bad = await c.call_tool("run", {"mode": "eval", "reference": REFERENCE, "candidate": OK, "device": "cuda"})
        assert bad.is_error and "has no GPUs" in "".join(getattr(b, "text", "") for b in bad.content)


@pytest.mark.anyio
async def test_the_servers_parallel_evaluations_land_on_different_workers(tmp_path: Path) -> None:
    """`kernelscope serve --cpu-workers 2` over stdio: a client's two `run` calls at once run side by side on
    the two CPU workers of the local pool (on a GPU host, the same path gives each its own GPU)."""
    import os
    import sys

    import anyio
    from mcp import Client, StdioServerParameters

    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "PYTHONPATH")}
    env["KERNELSCOPE_HOME"] = str(tmp_path)
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "kernelscope", "serve", "--home", str(tmp_path), "--root", str(tmp_path),
                                      "--cpu-workers", "2", "--build-workers", "1"],
        env=env, cwd=str(tmp_path))
    async with Client(params) as c:
        caps = (await c.call_tool("capabilities", {})).structured_content
        assert caps["pool"]["backend"] == "local"
        assert [w["name"] for w in caps["pool"]["workers"] if w["kind"] == "cpu"] == ["cpu0", "cpu1"]
        await c.call_tool("run", {"mode": "eval", **request(OK).model_dump(  # warm the fork server
            include={"reference", "candidate", "device", "trials", "timing_budget_s", "timeout_s"})})
        answers: list = []

        async def one(i: int) -> None:
            args = request(sleepy(2.0, str(i))).model_dump(include={"reference", "candidate", "device", "trials",
                                                                    "timing_budget_s", "timeout_s"})
            answers.append(await c.call_tool("run", {"mode": "eval", **args}))

        t0 = time.monotonic()
        async with anyio.create_task_group() as tg:
            for i in range(2):
                tg.start_soon(one, i)
        wall = time.monotonic() - t0
        evs = [r.structured_content["eval"] for r in answers]
        assert all(not r.is_error for r in answers) and all(e["correctness"]["correct"] for e in evs), answers
        assert {e["worker"] for e in evs} == {"cpu0", "cpu1"}
        assert wall < 2 * 2.0 + 1.5, wall  # side by side, not one after the other


def test_optimize_keeps_one_evaluation_in_flight_per_gpu_the_capabilities_report(tmp_path: Path) -> None:
    from kernelscope.agent.optimize import OptimizeConfig, resolve_parallel
    from kernelscope.models import PoolStatus, WorkerStatus

    def caps(pool: PoolStatus) -> dict:  # as the agent receives it: the capabilities tool's JSON
        return {"pool": pool.model_dump(mode="json")}

    gpu = [WorkerStatus(name=f"gpu{i}", kind="gpu", busy=False, jobs=0, busy_s=0.0) for i in range(3)]
    local = PoolStatus(backend="local", workers=[*gpu, WorkerStatus(name="cpu0", kind="cpu", busy=False, jobs=0,
                                                                    busy_s=0.0)])
    ray = PoolStatus(backend="ray", ray_resources={"CPU": 64.0, "GPU": 8.0})
    cfg = OptimizeConfig(reference=tmp_path / "r.py", candidate=tmp_path / "c.py", out=tmp_path / "o", device="cuda")
    assert resolve_parallel(caps(local), cfg) == 3 and resolve_parallel(caps(ray), cfg) == 8
    assert resolve_parallel(caps(PoolStatus(backend="local")), cfg) == 1 and resolve_parallel({}, cfg) == 1
    assert resolve_parallel(caps(local), cfg.model_copy(update={"parallel": 2})) == 2
    assert resolve_parallel(caps(local), cfg.model_copy(update={"device": "cpu"})) == 1


def test_a_fast_path_kernel_leaves_its_source_where_the_job_says(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """NVRTC's line tables name ``<kernel>.cu`` in the folder it compiled in; a job's fast-path kernels leave their
    source under that name in the job's own folder, so a profile's hot lines can show their code."""
    from kernelscope.fast import _leave_source

    env = job_env(tmp_path / "ws", tmp_path, None, candidate="src")
    assert env["KERNELSCOPE_KERNEL_SOURCES"] == str(tmp_path / "ws")
    monkeypatch.setenv("KERNELSCOPE_KERNEL_SOURCES", str(tmp_path))
    _leave_source("relu_knobs", "__global__ void relu_knobs() {}\n")
    assert (tmp_path / "relu_knobs.cu").read_text() == "__global__ void relu_knobs() {}\n"
    _leave_source("../escape", "x")  # a name that is not an identifier leaves nothing
    assert not (tmp_path.parent / "escape.cu").exists() and sorted(p.name for p in tmp_path.iterdir()) == \
        ["relu_knobs.cu"]
    monkeypatch.delenv("KERNELSCOPE_KERNEL_SOURCES")
    _leave_source("other", "x")  # outside a job: nothing written anywhere
    assert not (tmp_path / "other.cu").exists()
