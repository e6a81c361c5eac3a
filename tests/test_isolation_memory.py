"""Memory caps of untrusted jobs (issue 28, item 3): an evaluation or a program that allocates without end
is stopped at ``Settings.job_memory_bytes`` (a cgroup v2 memory.max where the host delegates one, else the
watchdog's resident-size limit), the answer says which limit stopped it and how much it used, and two such
bombs at once leave the server answering. Sized for CI's 2-core, 24 GB machine: the cap is 512 MiB, and
the watchdog samples often enough that a bomb overshoots it by well under a couple of GiB."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import anyio
import pytest
from _settings import override_settings
from mcp import Client

from kernelscope.sandbox import forkserver
from kernelscope.sandbox.cgroup import job_cgroup_status
from kernelscope.sandbox.process import Limits, run_process
from kernelscope.server.app import mcp

pytestmark = pytest.mark.anyio
CAP = 512 << 20
BOMB = "import time\nx = []\nwhile True:\n    x.append(bytearray(32 << 20))\n    time.sleep(0.005)\n"
REF = (Path(__file__).parent / "evalcases" / "ref_softmax.py").read_text()
CANDIDATE = (BOMB.replace("while True", "for _ in range(10 ** 6)")
             + "\nimport torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x\n")


@pytest.fixture
def capped() -> Iterator[None]:
    with override_settings(job_memory_bytes=CAP):
        yield


@pytest.fixture
async def client() -> AsyncIterator[Client]:
    async with Client(mcp, raise_exceptions=True) as c:
        yield c


def _stopped_by_the_cap(text: str) -> None:
    assert "job memory cap: 512 MiB" in text, text[-3000:]
    via = "cgroup v2 memory.max" if job_cgroup_status().available else "the watchdog's resident-size limit"
    assert via in text and ("it held" in text or "it used" in text), text[-3000:]


def test_a_program_that_allocates_without_end_is_stopped_at_the_cap(tmp_path: Path, capped: None) -> None:
    r = run_process([sys.executable, "-c", BOMB], cwd=tmp_path, limits=Limits(wall_s=120, job="program"))
    assert not r.ok and r.limit_exceeded is not None and not r.timed_out, r
    _stopped_by_the_cap(r.limit_exceeded + r.stderr)


def test_the_cap_is_for_untrusted_kinds_only(tmp_path: Path, capped: None) -> None:
    code = "x = bytearray(700 << 20); print(len(x))"  # over the cap, as a server-side tool: not capped
    r = run_process([sys.executable, "-c", code], cwd=tmp_path, limits=Limits(wall_s=120))
    assert r.ok and r.stdout.strip() == str(700 << 20), r


async def test_two_eval_bombs_at_once_are_stopped_and_the_server_answers(client: Client, capped: None) -> None:
    pytest.importorskip("torch", reason="the eval harness needs torch")
    forkserver.shutdown_all()  # the fork server's jobs read the cap from the settings at submission
    answers: list[dict] = []

    async def one() -> None:
        r = await client.call_tool("run", {"mode": "eval", "reference": REF, "candidate": CANDIDATE, "device": "cpu",
                                           "trials": 1, "timing_budget_s": 0.1, "timeout_s": 120})
        answers.append(r.structured_content["eval"])

    async with anyio.create_task_group() as tg:
        tg.start_soon(one)
        tg.start_soon(one)
    assert len(answers) == 2
    for ev in answers:
        assert ev["status"] == "crashed" and ev["status"] != "timeout", ev
        _stopped_by_the_cap(ev["error"] or "")
    ok = await client.call_tool("run", {"mode": "eval", "reference": REF, "candidate": REF.replace("Model", "ModelNew"),
                                        "device": "cpu", "trials": 1, "timing_budget_s": 0.1})
    assert ok.structured_content["eval"]["status"] == "ok", ok.structured_content  # the server still evaluates


def test_a_folder_that_is_no_delegated_cgroup_is_refused_with_the_reason(tmp_path: Path) -> None:
    from kernelscope.sandbox.cgroup import cgroup_status

    st = cgroup_status(str(tmp_path))
    assert not st.available and "cgroup" in st.detail and str(tmp_path) in st.detail, st
    st = cgroup_status(str(tmp_path / "missing"))
    assert not st.available and "not a directory" in st.detail


class _Recorder:
    """The gate's side of a MemoryGuard: records the pid it is handed, or fails to, as a real attach might."""

    def __init__(self, fail: bool = False) -> None:
        self.cgroup = object()
        self.fail = fail
        self.pids: list[int] = []

    def attach(self, pid: int) -> None:
        if self.fail:
            raise OSError("the cgroup went away")
        self.pids.append(pid)


@pytest.mark.parametrize("fail", [False, True])
def test_the_cgroup_gate_holds_the_job_until_attached_whatever_its_fd_number(tmp_path: Path, fail: bool) -> None:
    """The gate runs the job only after its first process is handed to the cgroup, and never without that:
    on the H100 the shell gate it replaced failed on a pipe fd above 9 ('Bad fd number')."""
    import os

    from kernelscope.sandbox.process import _popen

    held = [os.open(os.devnull, os.O_RDONLY) for _ in range(16)]  # push the gate's pipe above fd 9
    try:
        guard = _Recorder(fail)
        code = "import os; print(os.getpid())"
        if fail:
            with pytest.raises(OSError, match="went away"):
                _popen([sys.executable, "-c", code], tmp_path, dict(os.environ), None, guard)  # type: ignore[arg-type]
            return
        proc = _popen([sys.executable, "-c", code], tmp_path, dict(os.environ), None, guard)  # type: ignore[arg-type]
        out, err = proc.communicate(timeout=30)
        assert proc.returncode == 0, err
        assert guard.pids == [proc.pid] and int(out) == proc.pid  # the gate became the job: same process
    finally:
        for fd in held:
            os.close(fd)
