"""Cancellation through real MCP clients: a cancelled run kills its process group promptly (even a program
that ignores SIGTERM: SIGKILL follows after the grace period) and frees the GPU lease, so the next job
starts at once. In-memory (the handler is interrupted directly), over stdio (notifications/cancelled)
and over streamable HTTP, in both protocol eras.

As in test_faults.py, servers get one GPU id ("0") so the lease and program mode run on a CPU machine
with host-only programs.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from _servers import http_server as serve_http
from _servers import tool_text as _text
from mcp import Client, StdioServerParameters

from kernelscope.sandbox import gpu as gpu_mod
from kernelscope.sandbox.process import Limits
from kernelscope.server.app import mcp

pytestmark = pytest.mark.anyio
FAULTY = (Path(__file__).parent / "fixtures" / "faults" / "faulty.cu").read_text()
REF = (Path(__file__).parent / "evalcases" / "ref_softmax.py").read_text()
HANG = (Path(__file__).parent / "evalcases" / "hang.py").read_text()
CAND = (Path(__file__).parent / "evalcases" / "ok_softmax.py").read_text()




def job_processes(home: Path) -> list[int]:
    """Live processes working in a job workspace of the server whose home is ``home``."""
    marker = str(home / "workspaces") + "/"
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            cwd = os.readlink(f"/proc/{name}/cwd")
            state = Path(f"/proc/{name}/stat").read_bytes().rsplit(b")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if cwd.startswith(marker) and state not in (b"Z", b"X") and not _is_sandbox(name):
            found.append(int(name))
    return found


def _is_sandbox(pid: str) -> bool:
    """bubblewrap's own processes (its monitor and the sandbox's init) around an isolated job."""
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip() == "bwrap"
    except OSError:
        return False


async def _compile_faulty(c: Client) -> str:
    r = await c.call_tool("compile", {"source": FAULTY, "output": "executable", "filename": "faulty.cu"})
    assert not r.is_error and r.structured_content["success"], _text(r)
    return r.structured_content["artifact_id"]


async def cancel_once_running(c: Client, args: dict, home: Path) -> float:
    """Call `run` with ``args``, cancel the call as soon as its job process exists, and return the seconds
    from the cancellation until no job process is left."""
    answered: list[object] = []
    scope = anyio.CancelScope()

    async def call() -> None:
        with scope:
            answered.append(await c.call_tool("run", args, read_timeout_seconds=300))

    async with anyio.create_task_group() as tg:
        tg.start_soon(call)
        deadline = time.monotonic() + 120
        while not job_processes(home):
            assert not answered, f"the job ended before it could be cancelled: {answered}"
            assert time.monotonic() < deadline, "the job never started"
            await anyio.sleep(0.02)
        t0 = time.monotonic()
        scope.cancel()
    assert not answered  # a cancelled request gets no answer
    while job_processes(home):
        assert time.monotonic() - t0 < 15, f"still running after cancel: {job_processes(home)}"
        await anyio.sleep(0.02)
    return time.monotonic() - t0


async def next_job_runs_at_once(c: Client, aid: str) -> None:
    r = await c.call_tool("run", {"mode": "program", "artifact_id": aid, "args": ["ok"]})
    assert not r.is_error, _text(r)
    p = r.structured_content["program"]
    # the lease is free once the cancelled job is reaped: at once, or at the latest after the SIGKILL that
    # follows the grace period (a cancel that lands while the job is still in its launcher)
    assert p["exit_status"] == 0 and p["gpu_wait_s"] < Limits().kill_grace_s + 1.0, p


@pytest.fixture
def one_gpu(monkeypatch: pytest.MonkeyPatch) -> gpu_mod.GpuPool:
    pool = gpu_mod.GpuPool(["0"])
    monkeypatch.setattr(gpu_mod, "_pool", pool)
    return pool


@pytest.mark.parametrize("mode", ["2026-07-28", "legacy"])
async def test_cancel_kills_a_program_that_ignores_sigterm_and_frees_the_lease(
        one_gpu: gpu_mod.GpuPool, kernelscope_home: Path, mode: str) -> None:
    async with Client(mcp, mode=mode) as c:  # type: ignore[arg-type]
        aid = await _compile_faulty(c)
        took = await cancel_once_running(c, {"mode": "program", "artifact_id": aid, "args": ["ignore-term"],
                                             "timeout_s": 600}, kernelscope_home)
        assert took < Limits().kill_grace_s + 1.5, took
        print(f"\nreliability: cancel in-memory {mode}, SIGTERM ignored: gone after {took:.2f} s")
        deadline = time.monotonic() + 5
        while one_gpu.busy() != [False]:
            assert time.monotonic() < deadline, "the lease was not released"
            await anyio.sleep(0.01)
        await next_job_runs_at_once(c, aid)


async def test_cancel_while_queued_never_starts_the_job(one_gpu: gpu_mod.GpuPool, kernelscope_home: Path) -> None:
    """Job A holds the GPU; job B waits for it (and says so in progress messages); B is cancelled in the
    queue and never runs; then A is cancelled and the GPU is free at once."""
    async with Client(mcp) as c:
        aid = await _compile_faulty(c)
        waiting: list[str] = []

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            if message and message.startswith("waiting for the GPU"):
                waiting.append(message)

        b_answer: list[object] = []
        b_scope = anyio.CancelScope()

        async def job_b() -> None:
            with b_scope:
                b_answer.append(await c.call_tool("run", {"mode": "program", "artifact_id": aid,
                                                          "args": ["hold", "1"]}, progress_callback=on_progress))

        async with anyio.create_task_group() as tg:
            a_scope = anyio.CancelScope()

            async def job_a() -> None:
                with a_scope:
                    await c.call_tool("run", {"mode": "program", "artifact_id": aid, "args": ["loop"],
                                              "timeout_s": 600})

            tg.start_soon(job_a)
            while not job_processes(kernelscope_home):
                await anyio.sleep(0.02)
            tg.start_soon(job_b)
            deadline = time.monotonic() + 30
            while not waiting:
                assert time.monotonic() < deadline, "job B never reported its place in the queue"
                await anyio.sleep(0.02)
            assert waiting[0].startswith("waiting for the GPU: 0 job(s) ahead")
            b_scope.cancel()
            await anyio.sleep(0.5)
            assert not b_answer and len(job_processes(kernelscope_home)) == 1  # only A's loop
            t0 = time.monotonic()
            a_scope.cancel()
        while job_processes(kernelscope_home):
            assert time.monotonic() - t0 < 5
            await anyio.sleep(0.02)
        assert time.monotonic() - t0 < Limits().kill_grace_s + 1.5  # `loop` dies at SIGTERM, else at SIGKILL
        await next_job_runs_at_once(c, aid)


async def test_cancel_an_eval_in_the_fork_server(kernelscope_home: Path) -> None:
    pytest.importorskip("torch", reason="the eval harness needs torch")
    async with Client(mcp) as c:
        took = await cancel_once_running(c, {"reference": REF, "candidate": HANG, "device": "cpu", "trials": 1,
                                             "timing_budget_s": 0.1, "timeout_s": 600}, kernelscope_home)
        assert took < Limits().kill_grace_s + 1.5, took
        print(f"\nreliability: cancel an eval (fork server): gone after {took:.2f} s")
        ok = await c.call_tool("run", {"reference": REF, "candidate": CAND, "device": "cpu", "trials": 1,
                                       "timing_budget_s": 0.1})
        assert not ok.is_error and ok.structured_content["eval"]["status"] == "ok", _text(ok)


# ------------------------------------------------------------------------------------- over the wire
def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "PYTHONPATH")}
    env.update(KERNELSCOPE_HOME=str(home), CUDA_VISIBLE_DEVICES="0")  # one GPU id: the lease runs on CPU too
    return env


@pytest.fixture
def http_server(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    home = tmp_path / "home"
    with serve_http(home, tmp_path, _env(home), "--no-prewarm") as url:
        yield url, home


@pytest.mark.parametrize("mode", ["2026-07-28", "legacy"])
async def test_cancel_over_stdio(tmp_path: Path, mode: str) -> None:
    home = tmp_path / "home"
    params = StdioServerParameters(command=sys.executable, args=["-m", "kernelscope", "serve", "--home", str(home),
                                                                 "--root", str(tmp_path), "--no-prewarm"],
                                   env=_env(home), cwd=str(tmp_path))
    async with Client(params, mode=mode) as c:  # type: ignore[arg-type]
        aid = await _compile_faulty(c)
        took = await cancel_once_running(c, {"mode": "program", "artifact_id": aid, "args": ["loop"],
                                             "timeout_s": 600}, home)
        assert took < Limits().kill_grace_s + 1.5, took  # `loop` dies at SIGTERM, by SIGKILL at the latest
        print(f"\nreliability: cancel over stdio {mode}: gone after {took:.2f} s")
        await next_job_runs_at_once(c, aid)


@pytest.mark.parametrize("mode", ["2026-07-28", "legacy"])
async def test_cancel_over_streamable_http(http_server: tuple[str, Path], mode: str) -> None:
    url, home = http_server
    async with Client(url, mode=mode) as c:  # type: ignore[arg-type]
        aid = await _compile_faulty(c)
        took = await cancel_once_running(c, {"mode": "program", "artifact_id": aid, "args": ["ignore-term"],
                                             "timeout_s": 600}, home)
        assert took < Limits().kill_grace_s + 1.5, took
        print(f"\nreliability: cancel over HTTP {mode}, SIGTERM ignored: gone after {took:.2f} s")
        await next_job_runs_at_once(c, aid)
