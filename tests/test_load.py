"""Load: eight clients at once, five over streamable HTTP (one `kernelscope serve --transport http` process,
both protocol eras) and three over stdio (a server process each), issuing mixed calls: compiles of their
own kernels, SASS, capabilities, recorded-report classification and comparison, bad input, and GPU jobs.

Checked: every call is answered with the answer to its own request (each client's kernels carry its
name), GPU jobs on the HTTP server never overlap (one lease per GPU: the HTTP server gets one GPU id, "0",
so program mode runs host-only programs on a CPU machine too), and CPU tools are not blocked behind GPU
jobs: while one client's job holds the GPU for seconds, the other clients' compiles and SASS calls finish.
The stdio servers see no GPU, so their GPU tools answer "no GPU" (or "no ncu") at once.

`python -m pytest -q -s tests/test_load.py` prints the latency table; KERNELSCOPE_LOAD_REPORT=file.json
also writes it as JSON.
"""

from __future__ import annotations

import itertools
import json
import os
import statistics
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import pytest
from _servers import http_server as serve_http
from _servers import tool_text as _text
from mcp import Client, StdioServerParameters

pytestmark = pytest.mark.anyio
REPO = Path(__file__).resolve().parent.parent
FAULTY = (Path(__file__).parent / "fixtures" / "faults" / "faulty.cu").read_text()
REPORT = str(Path(__file__).parent / "fixtures" / "ncu" / "three-kernels.ncu-rep")
LONG_HOLD_MS = 8000
HOLD_MS = 400




def kernel_source(client: str, n: int) -> str:
    return (f"__global__ void {client}_k{n}(float* __restrict__ y, const float* __restrict__ x, int m) {{\n"
            f"    int i = blockIdx.x * blockDim.x + threadIdx.x;\n    if (i < m) y[i] = {n + 2}.0f * x[i];\n}}\n")


@dataclass
class Call:
    client: str
    tool: str
    start: float  # time.time(), seconds
    end: float = 0.0
    ok: bool = False  # the answer is the one this request asked for
    detail: str = ""


@dataclass
class Log:
    calls: list[Call] = field(default_factory=list)
    holds: list[tuple[int, int, str]] = field(default_factory=list)  # program start/end ns (CLOCK_REALTIME)


def _env(home: Path, gpu: bool) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "PYTHONPATH")}
    env["KERNELSCOPE_HOME"] = str(home)
    env["CUDA_VISIBLE_DEVICES"] = "0" if gpu else ""
    return env


@pytest.fixture
def http_server(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    home = tmp_path / "http-home"
    with serve_http(home, REPO, _env(home, gpu=True), "--no-prewarm") as url:
        yield url, home


def _job_running(home: Path) -> bool:
    marker = str(home / "workspaces") + "/run-"
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                if os.readlink(f"/proc/{name}/cwd").startswith(marker):
                    return True
            except OSError:
                continue
    return False


async def _call(c: Client, log: Log, who: str, tool: str, args: dict, check) -> dict | None:  # type: ignore[no-untyped-def]
    call = Call(who, tool, time.time())
    log.calls.append(call)
    r = await c.call_tool(tool, args, read_timeout_seconds=300)
    call.end = time.time()
    try:
        call.detail = check(r) or ""
        call.ok = True
    except AssertionError as e:
        call.detail = f"{e}: {_text(r)[:300]}"
    return r.structured_content


def _compiled(name: str):  # type: ignore[no-untyped-def]
    def check(r) -> None:  # type: ignore[no-untyped-def]
        assert not r.is_error and r.structured_content["success"]
        assert [k["name"].split("(")[0] for k in r.structured_content["kernels"]] == [name]
    return check


def _sass_of(name: str):  # type: ignore[no-untyped-def]
    def check(r) -> None:  # type: ignore[no-untyped-def]
        assert not r.is_error and r.structured_content["kernels"][0]["name"].split("(")[0] == name
    return check


def _refused(*needles: str):  # type: ignore[no-untyped-def]
    def check(r) -> None:  # type: ignore[no-untyped-def]
        assert r.is_error and any(n in _text(r) for n in needles)
    return check


def _classified(r) -> None:  # type: ignore[no-untyped-def]
    assert not r.is_error and len(r.structured_content["kernels"]) == 3


def _compared(r) -> None:  # type: ignore[no-untyped-def]
    assert not r.is_error and r.structured_content["speedup"] > 10


def _capable(r) -> None:  # type: ignore[no-untyped-def]
    assert not r.is_error and r.structured_content["can"]["compile"] is True


def _held(log: Log, who: str):  # type: ignore[no-untyped-def]
    def check(r) -> None:  # type: ignore[no-untyped-def]
        assert not r.is_error
        p = r.structured_content["program"]
        assert p["exit_status"] == 0
        lines = dict(ln.split() for ln in p["stdout"].split("\n") if ln)
        log.holds.append((int(lines["start"]), int(lines["end"]), who))
    return check


async def cpu_work(c: Client, log: Log, who: str, gpu_answers: bool) -> None:
    """One client's mixed calls. ``gpu_answers``: its server has a (fake) GPU, so program runs are real."""
    for n in range(2):
        name = f"{who}_k{n}"
        sc = await _call(c, log, who, "compile", {"source": kernel_source(who, n), "arch": "sm_90"}, _compiled(name))
        if sc and sc.get("artifact_id"):
            await _call(c, log, who, "sass", {"artifact_id": sc["artifact_id"]}, _sass_of(name))
    await _call(c, log, who, "capabilities", {}, _capable)
    await _call(c, log, who, "bottleneck_classify", {"report_path": REPORT}, _classified)
    await _call(c, log, who, "compare", {"before_report": REPORT, "after_report": REPORT, "before_kernel": "strided",
                                         "after_kernel": "coalesced"}, _compared)
    await _call(c, log, who, "compile", {"path": "/etc/passwd"}, _refused("outside the allowed roots"))
    await _call(c, log, who, "compile", {"source": "x", "flags": ["-o", "/tmp/x"]}, _refused("refused"))
    await _call(c, log, who, "sass", {"cubin_base64": "bm90IGEgY3ViaW4="}, _refused("not a CUDA ELF cubin"))
    if not gpu_answers:
        await _call(c, log, who, "run", {"mode": "program", "artifact_id": "0" * 24}, _refused("No artifact"))
        await _call(c, log, who, "nsys_trace", {"script": "print(1)"}, _refused("no GPU"))
        await _call(c, log, who, "analyze", {"artifact_id": "0" * 24}, _refused("ncu", "No artifact", "GPU"))


async def gpu_work(c: Client, log: Log, who: str, aid: str, hold_ms: int, times: int) -> None:
    for _ in range(times):
        await _call(c, log, who, "run", {"mode": "program", "artifact_id": aid, "args": ["hold", str(hold_ms)]},
                    _held(log, who))


def _report(log: Log) -> dict:
    by_tool: dict[str, list[float]] = {}
    for call in log.calls:
        by_tool.setdefault(call.tool, []).append(call.end - call.start)
    return {"calls": len(log.calls), "answered_correctly": sum(c.ok for c in log.calls),
            "latency_s": {t: {"n": len(v), "median": round(statistics.median(v), 3), "max": round(max(v), 3)}
                          for t, v in sorted(by_tool.items())}}


async def test_eight_clients_over_http_and_stdio(http_server: tuple[str, Path], tmp_path: Path) -> None:
    url, http_home = http_server
    log = Log()
    async with Client(url) as c:  # the program used for GPU jobs, compiled once
        r = await c.call_tool("compile", {"source": FAULTY, "output": "executable", "filename": "faulty.cu"})
        assert not r.is_error and r.structured_content["success"], _text(r)
        aid = r.structured_content["artifact_id"]

    async def http_client(i: int) -> None:
        who = f"http{i}"
        async with Client(url, mode="legacy" if i % 2 else "2026-07-28") as c:  # type: ignore[arg-type]
            if i == 0:  # holds the GPU for seconds while everyone else works
                await gpu_work(c, log, who, aid, LONG_HOLD_MS, 1)
                return
            with anyio.fail_after(60):
                while not _job_running(http_home):
                    await anyio.sleep(0.02)
            await cpu_work(c, log, who, gpu_answers=True)
            await gpu_work(c, log, who, aid, HOLD_MS, 2)

    async def stdio_client(i: int) -> None:
        who = f"stdio{i}"
        home = tmp_path / f"stdio-home-{i}"
        params = StdioServerParameters(command=sys.executable, args=["-m", "kernelscope", "serve", "--home", str(home),
                                                                     "--root", str(REPO), "--no-prewarm"],
                                       env=_env(home, gpu=False), cwd=str(REPO))
        async with Client(params, mode="legacy" if i % 2 else "2026-07-28") as c:  # type: ignore[arg-type]
            await cpu_work(c, log, who, gpu_answers=False)

    t0 = time.monotonic()
    async with anyio.create_task_group() as tg:
        for i in range(5):
            tg.start_soon(http_client, i)
        for i in range(3):
            tg.start_soon(stdio_client, i)
    wall = time.monotonic() - t0

    report = _report(log)
    report.update(clients=8, wall_s=round(wall, 1), gpu_jobs=len(log.holds))

    # every call answered, each with the answer to its own request
    assert all(c.end > 0 for c in log.calls)
    bad = [c for c in log.calls if not c.ok]
    assert not bad, bad
    assert len({c.client for c in log.calls}) == 8
    # GPU jobs on one GPU never overlap: the lease serializes them
    holds = sorted(log.holds)
    assert len(holds) == 1 + 4 * 2
    for (_, end, who), (start, _, who2) in itertools.pairwise(holds):
        assert start >= end, f"{who2}'s job started before {who}'s ended"
    # CPU tools were not queued behind the GPU: the other HTTP clients began only once the long (8 s) job held the
    # GPU, and each of them had compiles and SASS answered before that job ended
    long_end = next(end for _, end, who in holds if who == "http0")
    during = [c for c in log.calls if c.client.startswith("http") and c.tool in ("compile", "sass")
              and c.end * 1e9 < long_end]
    assert {c.client for c in during} == {"http1", "http2", "http3", "http4"}, [(c.client, c.tool) for c in during]
    report["cpu_calls_answered_while_gpu_held"] = len(during)
    print("\nload:", json.dumps(report))
    if os.environ.get("KERNELSCOPE_LOAD_REPORT"):
        Path(os.environ["KERNELSCOPE_LOAD_REPORT"]).write_text(json.dumps(report, indent=1))
