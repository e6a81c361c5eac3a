"""Faulty programs and hostile input, host-only parts (CI): each fault is contained within its limit, comes
back as a result through the real `run` tool, leaves no process behind, and the next job on the same GPU
lease runs at once. The GPU parts (illegal address, trap, barrier deadlock) are in test_faults_gpu.py.

A CPU machine has no GPU, so these tests give the server a pool with one GPU id ("0"): the lease, the
sandbox and program mode run exactly as on a GPU host, and the host-only programs never touch a device.
"""

from __future__ import annotations

import functools
import os
import re
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from _servers import tool_text as _text
from mcp import Client

from kernelscope.sandbox import gpu as gpu_mod
from kernelscope.sandbox.process import Limits, group_pids
from kernelscope.server.app import mcp

pytestmark = pytest.mark.anyio
FAULTY = (Path(__file__).parent / "fixtures" / "faults" / "faulty.cu").read_text()
REPORT = Path(__file__).parent / "fixtures" / "ncu" / "three-kernels.ncu-rep"




def job_processes(home: Path) -> list[int]:
    """Processes started from a job workspace of the server whose home is ``home`` (the staged program is
    <home>/workspaces/run-*/program), zombies excluded."""
    marker = str(home / "workspaces")
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            argv0 = Path(f"/proc/{name}/cmdline").read_bytes().split(b"\0")[0].decode(errors="replace")
            state = Path(f"/proc/{name}/stat").read_bytes().rsplit(b")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if argv0.startswith(marker) and state not in (b"Z", b"X"):
            found.append(int(name))
    return found


@pytest.fixture
def one_gpu(monkeypatch: pytest.MonkeyPatch) -> gpu_mod.GpuPool:
    pool = gpu_mod.GpuPool(["0"])
    monkeypatch.setattr(gpu_mod, "_pool", pool)
    return pool


@pytest.fixture
async def client() -> AsyncIterator[Client]:
    async with Client(mcp) as c:
        yield c


async def _faulty(c: Client) -> str:
    r = await c.call_tool("compile", {"source": FAULTY, "output": "executable", "filename": "faulty.cu"})
    assert not r.is_error and r.structured_content["success"], _text(r)
    return r.structured_content["artifact_id"]


async def _run(c: Client, aid: str, *args: str, timeout_s: float = 30.0) -> dict:
    r = await c.call_tool("run", {"mode": "program", "artifact_id": aid, "args": list(args), "timeout_s": timeout_s})
    assert not r.is_error, _text(r)
    return r.structured_content["program"]


async def _next_job_runs_at_once(c: Client, aid: str, pool: gpu_mod.GpuPool, home: Path) -> None:
    assert pool.busy() == [False]
    ok = await _run(c, aid, "ok")
    assert ok["exit_status"] == 0 and ok["stdout"] == "ok\n" and ok["gpu_wait_s"] < 0.5, ok
    assert job_processes(home) == []


def _note(what: str, **figures: object) -> None:
    """A figure for BENCHMARKS.md's reliability section (shown with `pytest -s`)."""
    print(f"\nreliability: {what}: " + ", ".join(f"{k}={v}" for k, v in figures.items()))


def _patch_limits(monkeypatch: pytest.MonkeyPatch, **small: int) -> None:
    """Smaller limits for program mode, so the test needs no gigabytes of disk."""
    from kernelscope.tools import run as run_mod

    monkeypatch.setattr(run_mod, "Limits", functools.partial(Limits, **small))


# mode, args, timeout, what the answer must say
CRASHES = [
    ("segv", [], lambda p: p["crashed"] and p["signal_name"] == "SIGSEGV"),
    ("abort", [], lambda p: p["crashed"] and p["signal_name"] == "SIGABRT" and "about to abort" in p["stderr"]),
    ("assert", [], lambda p: p["crashed"] and p["signal_name"] == "SIGABRT" and "the planted assertion" in p["stderr"]),
    ("nosuchmode", [], lambda p: not p["crashed"] and p["exit_status"] == 2 and "unknown mode" in p["stderr"]),
]


@pytest.mark.parametrize(("mode", "args", "check"), CRASHES, ids=[c[0] for c in CRASHES])
async def test_host_crashes_are_results(client: Client, one_gpu: gpu_mod.GpuPool, kernelscope_home: Path,
                                        mode: str, args: list[str], check) -> None:  # type: ignore[no-untyped-def]
    aid = await _faulty(client)
    t0 = time.monotonic()
    p = await _run(client, aid, mode, *args)
    assert check(p), p
    _note(f"host {mode}", answer=p["signal_name"] or p["exit_status"], s=round(time.monotonic() - t0, 2))
    await _next_job_runs_at_once(client, aid, one_gpu, kernelscope_home)


async def test_endless_loop_is_stopped_at_its_limit(client: Client, one_gpu: gpu_mod.GpuPool,
                                                    kernelscope_home: Path) -> None:
    aid = await _faulty(client)
    t0 = time.monotonic()
    p = await _run(client, aid, "loop", timeout_s=1.0)
    assert p["timed_out"] and not p["crashed"] and p["signal_name"] == "SIGTERM", p
    assert time.monotonic() - t0 < 6
    _note("endless loop, limit 1 s", s=round(time.monotonic() - t0, 2))
    await _next_job_runs_at_once(client, aid, one_gpu, kernelscope_home)


async def test_program_ignoring_sigterm_is_killed_after_the_grace_period(
        client: Client, one_gpu: gpu_mod.GpuPool, kernelscope_home: Path) -> None:
    aid = await _faulty(client)
    t0 = time.monotonic()
    p = await _run(client, aid, "ignore-term", timeout_s=1.0)
    took = time.monotonic() - t0
    assert p["timed_out"] and p["signal_name"] == "SIGKILL" and "ignoring SIGTERM" in p["stdout"], p
    assert took < 1.0 + Limits().kill_grace_s + 3, took
    _note("ignores SIGTERM, limit 1 s + 2 s grace", s=round(took, 2))
    await _next_job_runs_at_once(client, aid, one_gpu, kernelscope_home)


async def test_fork_bomb_is_killed_by_the_process_limit(client: Client, one_gpu: gpu_mod.GpuPool,
                                                        kernelscope_home: Path) -> None:
    """The program forks exponentially (bounded at 2,048 by itself); the job's process limit (256 by
    default) kills the whole group within a fraction of a second, long before its 30 s wall limit."""
    aid = await _faulty(client)
    t0 = time.monotonic()
    p = await _run(client, aid, "fork-bomb", timeout_s=30.0)
    took = time.monotonic() - t0
    assert took < 10
    assert p["crashed"] and p["signal_name"] == "SIGKILL" and not p["timed_out"], p
    assert f"started more than {Limits().max_processes} processes" in p["stderr"], p["stderr"]
    _note("fork bomb", processes_at_kill=re.search(r"\((\d+) at once", p["stderr"]).group(1), s=round(took, 2))
    await _next_job_runs_at_once(client, aid, one_gpu, kernelscope_home)


async def test_program_filling_the_disk_is_killed_by_the_disk_limit(
        client: Client, one_gpu: gpu_mod.GpuPool, kernelscope_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    budget = 64 << 20
    _patch_limits(monkeypatch, max_disk_bytes=budget)
    aid = await _faulty(client)
    free0 = os.statvfs(kernelscope_home).f_bavail * os.statvfs(kernelscope_home).f_frsize
    t0 = time.monotonic()
    p = await _run(client, aid, "fill-disk", timeout_s=60.0)
    took = time.monotonic() - t0
    assert p["crashed"] and p["signal_name"] == "SIGKILL", p
    m = re.search(r"free space of its file system fell by (\d+) MiB, more than the (\d+) MiB", p["stderr"])
    assert m and int(m.group(2)) == budget >> 20 and int(m.group(1)) < 4 * (budget >> 20), p["stderr"]
    _note("fills the disk, budget 64 MiB", mib_at_kill=m.group(1), s=round(took, 2))
    # the workspace (and what the program wrote there) is gone again
    free1 = os.statvfs(kernelscope_home).f_bavail * os.statvfs(kernelscope_home).f_frsize
    assert free1 > free0 - budget
    await _next_job_runs_at_once(client, aid, one_gpu, kernelscope_home)


async def test_oversized_file_hits_the_file_size_limit(
        client: Client, one_gpu: gpu_mod.GpuPool, kernelscope_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _patch_limits(monkeypatch, file_size_bytes=8 << 20)
    aid = await _faulty(client)
    t0 = time.monotonic()
    p = await _run(client, aid, "big-file")
    assert p["crashed"] and p["signal_name"] == "SIGXFSZ", p
    _note("oversized file, limit 8 MiB", answer=p["signal_name"], s=round(time.monotonic() - t0, 2))
    await _next_job_runs_at_once(client, aid, one_gpu, kernelscope_home)


async def test_gigabyte_of_output_is_capped(client: Client, one_gpu: gpu_mod.GpuPool, kernelscope_home: Path) -> None:
    aid = await _faulty(client)
    t0 = time.monotonic()
    p = await _run(client, aid, "print-gb", timeout_s=120.0)
    _note("prints 1 GiB", kept_bytes=len(p["stdout"]), s=round(time.monotonic() - t0, 2))
    assert p["exit_status"] == 0 and p["stdout_truncated"], {k: v for k, v in p.items() if k != "stdout"}
    assert len(p["stdout"]) < (1 << 20) + 200  # the answer keeps 1 MiB: head, a marker and the tail
    dropped = int(re.search(r"\[\.\.\. (\d+) bytes of output truncated by kernelscope", p["stdout"]).group(1))
    assert dropped + p["stdout"].count("x") == 1 << 30
    await _next_job_runs_at_once(client, aid, one_gpu, kernelscope_home)


async def test_shell_metacharacters_reach_the_program_verbatim(client: Client, one_gpu: gpu_mod.GpuPool) -> None:
    """Arguments go to execve as they are, never through a shell."""
    aid = await _faulty(client)
    nasty = ["$(id)", "; rm -rf ~", "`reboot`", "a b", "*", "|cat /etc/passwd", "&& echo pwned", "'\"", "--help"]
    p = await _run(client, aid, "echo", *nasty)
    assert p["exit_status"] == 0 and p["stdout"] == "".join(f"[{a}]\n" for a in nasty), p
    bad = await client.call_tool("run", {"mode": "program", "artifact_id": aid, "args": ["a\nb"]})
    assert bad.is_error and "printable ASCII" in _text(bad)


async def test_eval_candidate_fork_bomb_through_the_fork_server(
        client: Client, monkeypatch: pytest.MonkeyPatch, kernelscope_home: Path) -> None:
    """The eval harness runs candidates in children of a fork server; the same process watchdog applies."""
    pytest.importorskip("torch", reason="the eval harness needs torch")
    _patch_limits(monkeypatch, max_processes=16)
    ref = (Path(__file__).parent / "evalcases" / "ref_softmax.py").read_text()
    bomb = ("import os, signal, time\nimport torch\n"
            "class ModelNew(torch.nn.Module):\n"
            "    def forward(self, x):\n"
            "        for _ in range(60):  # bounded: 60 children that wait forever\n"
            "            if os.fork() == 0:\n"
            "                signal.pause()\n"
            "                os._exit(0)\n"
            "        time.sleep(30)\n"
            "        return torch.softmax(x, 1)\n")
    r = await client.call_tool("run", {"reference": ref, "candidate": bomb, "device": "cpu", "trials": 1,
                                       "timing_budget_s": 0.1, "timeout_s": 60})
    assert not r.is_error, _text(r)
    ev = r.structured_content["eval"]
    assert ev["status"] == "crashed" and "started more than 16 processes" in (ev["stderr_tail"] or ""), ev
    _note("eval candidate forking in the fork server, limit 16", wall_s=ev["wall_s"])


# ------------------------------------------------------------------------------------------ hostile input
def _malformed_reports(root: Path) -> dict[str, Path]:
    data = REPORT.read_bytes()
    flipped = bytearray(data)
    for i in range(1000, len(flipped), len(flipped) // 64):
        flipped[i] ^= 0xFF
    out = {"empty": b"", "text": b"not a report\n" * 100, "truncated-half": data[: len(data) // 2],
           "truncated-tail": data[:-100], "header-only": data[:64], "bytes-flipped": bytes(flipped)}
    paths = {}
    for name, content in out.items():
        p = root / f"{name}.ncu-rep"
        p.write_bytes(content)
        paths[name] = p
    return paths


async def test_malformed_reports_are_refused_clearly(client: Client, tmp_path: Path) -> None:
    for name, p in _malformed_reports(tmp_path).items():
        for tool, args in (("bottleneck_classify", {"report_path": str(p)}),
                           ("compare", {"before_report": str(REPORT), "before_kernel": "fma", "after_report": str(p)})):
            r = await client.call_tool(tool, args)
            text = _text(r)
            assert r.is_error, (name, tool, text)
            assert "Internal error" not in text and re.search(
                r"empty|not a readable|damaged or incomplete|holds no profiled kernels", text), (name, tool, text)
    ok = await client.call_tool("bottleneck_classify", {"report_path": str(REPORT)})
    assert not ok.is_error


SAXPY = "__global__ void k(float* p) { p[threadIdx.x] *= 2.f; }\n"
FLAG_INJECTIONS = ["-o", "/tmp/x", "-Xcompiler", "-ccbin=/tmp/evil", "--compiler-bindir=/tmp", "--options-file",
                   "-I/etc", "-L/tmp", "--keep-dir=/tmp", "@/etc/passwd", "-O3 -o /tmp/x", "-DX=$(id)", "-odir",
                   "--output-file=/tmp/x", "-Xlinker=-rpath=/tmp", "--linker-options=x", "-include/etc/passwd"]


@pytest.mark.parametrize("flag", FLAG_INJECTIONS)
async def test_nvcc_flag_injection_is_refused(client: Client, flag: str) -> None:
    r = await client.call_tool("compile", {"source": SAXPY, "flags": [flag]})
    assert r.is_error and "refused" in _text(r) and "Allowed:" in _text(r), _text(r)


@pytest.mark.parametrize(("tool", "args", "needle"), [
    ("ncu_profile", {"artifact_id": "0" * 24, "sections": ["SpeedOfLight --export /tmp/x"]}, "section identifiers"),
    ("ncu_profile", {"artifact_id": "0" * 24, "sections": ["--set=full"]}, "section identifiers"),
    ("ncu_profile", {"artifact_id": "0" * 24, "metrics": ["--launch-count=1"]}, "metric names are"),
    ("ncu_profile", {"artifact_id": "0" * 24, "metrics": ["dram__bytes.sum;id"]}, "metric names are"),
    ("ncu_profile", {"artifact_id": "0" * 24, "section_set": "full --export=/tmp/x"}, "validation error"),
    ("nsys_trace", {"script": "print(1)", "backend": "nsys --output=/tmp/x"}, "validation error"),
])
async def test_profiler_flag_injection_is_refused(client: Client, tool: str, args: dict, needle: str) -> None:
    r = await client.call_tool(tool, args)
    assert r.is_error and needle in _text(r), _text(r)


async def test_paths_symlinks_sizes_and_binary_input_are_refused(client: Client, tmp_path: Path) -> None:
    (tmp_path / "out.cu").symlink_to("/etc/passwd")
    (tmp_path / "bin.cu").write_bytes(Path("/bin/sh").resolve().read_bytes()[:65536])
    (tmp_path / "loop.cu").symlink_to(tmp_path / "loop.cu")
    (tmp_path / "huge.cu").write_bytes(b"// x\n" * 300_000)
    cases = [
        ({"path": "../../../../etc/passwd"}, "outside the allowed roots"),
        ({"path": str(tmp_path / "out.cu")}, "outside the allowed roots"),
        ({"path": str(tmp_path / "loop.cu")}, "Cannot resolve"),
        ({"path": str(tmp_path / "bin.cu")}, "looks binary"),
        ({"path": str(tmp_path / "huge.cu")}, "limited to"),
        ({"path": "/proc/self/environ"}, "outside the allowed roots"),
        ({"source": "x" * (2 << 20)}, "limited to"),
        ({"source": "int a;\x00\x7f\x01"}, "looks binary"),
        ({"source": "int a = 1;\udc80"}, "not valid UTF-8"),
        ({"source": SAXPY, "filename": "k;rm -rf ~.cu"}, "File name"),
        ({"source": SAXPY, "filename": "../../x.cu"}, "File name"),
        ({"source": SAXPY, "arch": "sm_90;id"}, "not a GPU architecture"),
    ]
    for args, needle in cases:
        r = await client.call_tool("compile", args)
        assert r.is_error and needle in _text(r), (args.get("path") or args.get("filename"), _text(r))
    for args in ({"report_path": "../../../../etc/passwd"}, {"report_path": str(tmp_path / "out.cu")}):
        r = await client.call_tool("bottleneck_classify", args)
        assert r.is_error and "outside the allowed roots" in _text(r), _text(r)
    # a compile that prints twenty thousand errors: a normal answer, with bounded diagnostics and log
    many = "\n".join(f"int f{i}() {{ return undefined_{i}; }}" for i in range(20_000))
    r = await client.call_tool("compile", {"source": many})
    sc = r.structured_content
    assert not r.is_error and sc["success"] is False and 0 < len(sc["diagnostics"]) <= 1000
    assert len(_text(r)) < 20_000


def test_group_pids_lists_the_group_and_nothing_else() -> None:
    mine = group_pids(os.getpgid(0))
    assert os.getpid() in mine and all(os.getpgid(p) == os.getpgid(0) for p in mine if Path(f"/proc/{p}").exists())
    assert group_pids(2**22 + 12345) == []


def test_malformed_cupti_trace_records_are_skipped(tmp_path: Path) -> None:
    from kernelscope.measure.timeline import load_cupti

    (tmp_path / "trace-1.jsonl").write_text('{"t": "kernel", "name": "k"}\n[1, 2]\n"x"\n{"t": "memcpy"}\n')
    tl = load_cupti(tmp_path)
    assert tl.ops == [] and any("4 malformed trace record(s) skipped" in n for n in tl.notes)
