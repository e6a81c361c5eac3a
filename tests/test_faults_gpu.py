"""GPU faults through the real `run` tool (device machine): an illegal address, a trap, a device-side assert
and a deadlock on a barrier are each contained, come back as a result, and the next call on the same GPU
computes correctly. The host-only faults are in test_faults.py (CI)."""

from __future__ import annotations

import re
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from _servers import tool_text as _text
from mcp import Client

from kernelscope.sandbox.gpu import gpu_pool
from kernelscope.sandbox.process import Limits
from kernelscope.server.app import mcp

pytestmark = [pytest.mark.gpu, pytest.mark.anyio]
SOURCE = (Path(__file__).parent / "fixtures" / "faults" / "gpu_faults.cu").read_text()




@pytest.fixture
async def client() -> AsyncIterator[Client]:
    async with Client(mcp) as c:
        yield c


async def _program(c: Client) -> str:
    r = await c.call_tool("compile", {"source": SOURCE, "output": "executable", "filename": "gpu_faults.cu"})
    assert not r.is_error and r.structured_content["success"], _text(r)
    return r.structured_content["artifact_id"]


async def _run(c: Client, aid: str, mode: str, timeout_s: float = 60.0) -> dict:
    r = await c.call_tool("run", {"mode": "program", "artifact_id": aid, "args": [mode], "timeout_s": timeout_s})
    assert not r.is_error, _text(r)
    return r.structured_content["program"]


async def _gpu_still_works(c: Client, aid: str) -> None:
    ok = await _run(c, aid, "ok")
    assert ok["exit_status"] == 0 and ok["stdout"] == "ok\n", ok
    assert gpu_pool().busy() == [False] * len(gpu_pool())


@pytest.mark.parametrize(("mode", "errors"), [
    ("illegal-address", {"cudaErrorIllegalAddress"}),
    ("trap", {"cudaErrorLaunchFailure", "cudaErrorIllegalInstruction"}),
    ("assert", {"cudaErrorAssert"}),
])
async def test_kernel_fault_is_a_result_and_the_gpu_still_works(client: Client, mode: str, errors: set[str]) -> None:
    aid = await _program(client)
    await _gpu_still_works(client, aid)
    p = await _run(client, aid, mode)
    assert p["exit_status"] == 1 and not p["timed_out"] and not p["crashed"], p
    reported = re.findall(r"^\w+: (cudaError\w+) \(", p["stdout"], re.M)  # the program's own report line
    assert reported and reported[-1] in errors, p
    if mode == "assert":  # the device printf of the failed assertion reaches the answer
        assert "n == 12345" in p["stdout"] + p["stderr"], p
    await _gpu_still_works(client, aid)


async def test_barrier_deadlock_is_stopped_at_its_limit_and_the_gpu_still_works(client: Client) -> None:
    aid = await _program(client)
    t0 = time.monotonic()
    p = await _run(client, aid, "deadlock", timeout_s=8.0)
    took = time.monotonic() - t0
    assert p["timed_out"] and p["exit_status"] != 0, p
    assert took < 8.0 + Limits().kill_grace_s + 10, took
    await _gpu_still_works(client, aid)
