"""The evaluation fork server under isolation (issue 28), on the CPU through a real MCP client, as
`kernelscope serve` runs it: the tool calls run on worker threads that end, and the fork server a
thread started must outlive it (bubblewrap's --die-with-parent killed it with that thread, so every
eval paid a cold start). Every job is a fork of the one warm server and still sees only its own
workspace: no planted secret, no other evaluation's workspace or cache, no other job's processes, a
private /tmp, no capabilities to undo its view."""

from __future__ import annotations

import ast
import os
import threading
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from _settings import override_settings
from mcp import Client

from kernelscope.config import get_settings
from kernelscope.sandbox import forkserver
from kernelscope.sandbox.isolation import isolation_status
from kernelscope.server.app import mcp
from kernelscope.tools.run import HARNESS, forkserver_env

pytestmark = pytest.mark.anyio
torch = pytest.importorskip("torch", reason="the eval harness needs torch (its CPU build is enough)")

SECRET = f"TOPSECRET-{uuid.uuid4().hex}"
REF = (Path(__file__).parent / "evalcases" / "ref_softmax.py").read_text()

CANDIDATE = '''
import ctypes, os, torch
found = []
def probe(name, fn):
    try:
        found.append(f"{{name}}=" + repr(repr(fn()))[:400].replace("|", "/"))
    except Exception as e:
        found.append(f"{{name}}!" + type(e).__name__)
def umount():
    libc = ctypes.CDLL(None, use_errno=True)
    return libc.umount2({root!r}.encode(), 2), ctypes.get_errno()
probe("secret", lambda: open({secret!r}).read())
probe("roots", lambda: sorted(os.listdir({root!r})))
probe("other", lambda: open({other!r}).read())
probe("cache", lambda: sorted(os.listdir({cache!r})))
probe("pid", lambda: os.getpid())
probe("procs", lambda: sorted(p for p in os.listdir("/proc") if p.isdigit()))
probe("capeff", lambda: [ln for ln in open("/proc/self/status") if ln.startswith("CapEff")][0].split()[1])
probe("umount", umount)
probe("write", lambda: open({outside!r}, "w").write("x"))
probe("tmpseen", lambda: sorted(os.listdir("/tmp")))
probe("tmpwrite", lambda: open("/tmp/{tag}", "w").write("x"))
raise RuntimeError("PROBE " + " | ".join(found))

class ModelNew(torch.nn.Module):
    def forward(self, x):
        return x
'''


@pytest.fixture
def isolated(tmp_path: Path, kernelscope_home: Path) -> Iterator[dict[str, Path]]:
    """Isolation required; a secret outside the workspaces, another evaluation's workspace and cache
    folder with secrets in them; no fork server running yet."""
    st = isolation_status()
    if not st.available:
        if os.environ.get("KERNELSCOPE_REQUIRE_BWRAP"):
            pytest.fail(f"bubblewrap is required here: {st.detail}")
        pytest.skip(f"no isolation here: {st.detail}")
    secret = tmp_path / "token.txt"
    secret.write_text(SECRET)
    other = kernelscope_home / "workspaces" / f"eval-other-{tmp_path.name}"
    other.mkdir(parents=True)
    (other / "candidate.py").write_text(SECRET)
    cache = kernelscope_home / "build-cache" / "torch-extensions" / "someone-elses"
    cache.mkdir(parents=True, exist_ok=True)
    (cache / "ext.so").write_text(SECRET)
    with override_settings(isolation="required"):
        forkserver.shutdown_all()
        try:
            yield {"secret": secret, "other": other / "candidate.py", "root": kernelscope_home / "workspaces",
                   "cache": cache.parent, "outside": tmp_path / "written-from-the-job"}
        finally:
            forkserver.shutdown_all()


@pytest.fixture
async def client() -> AsyncIterator[Client]:
    async with Client(mcp, raise_exceptions=True) as c:
        yield c


def _probes(error: str) -> dict[str, str]:
    assert "PROBE " in error, error
    items = error.split("PROBE ", 1)[1].split(" | ")
    return dict(item.replace("!", "=", 1).split("=", 1) for item in items)


def _value(seen: str) -> object:
    return ast.literal_eval(ast.literal_eval(seen))


async def test_fork_server_jobs_are_sandboxed_one_by_one_and_the_server_stays_warm(
        client: Client, isolated: dict[str, Path]) -> None:
    tags = [f"ks-tmp-{uuid.uuid4().hex}" for _ in range(2)]
    answers = []
    for tag in tags:
        cand = CANDIDATE.format(secret=str(isolated["secret"]), root=str(isolated["root"]), tag=tag,
                                other=str(isolated["other"]), cache=str(isolated["cache"]),
                                outside=str(isolated["outside"]))
        r = await client.call_tool("run", {"mode": "eval", "reference": REF, "candidate": cand, "device": "cpu",
                                           "trials": 1, "timing_budget_s": 0.1})
        assert SECRET not in repr(r.structured_content)
        answers.append(r.structured_content["eval"])
    for ev in answers:
        # a fork of the warm server, in bubblewrap with its own view; nothing fell back
        assert ev["executor"] == "fork-server", ev
        assert "per-job" in (ev["isolation"] or ""), ev
        assert not any("fork server" in n for n in ev["notes"]), ev["notes"]
        seen = _probes(ev["error"] or "")
        for name in ("secret", "other", "write"):
            assert seen[name].startswith(("FileNotFoundError", "PermissionError", "OSError")), (name, seen)
        ws_names = _value(seen["roots"])
        assert isinstance(ws_names, list) and len(ws_names) == 1 and ws_names[0].startswith("eval-"), ws_names
        # of the shared extension cache, only the job's own folder (keyed by its source) is there
        assert "someone-elses" not in seen["cache"] and len(_value(seen["cache"])) <= 1, seen["cache"]
        # its own PID namespace: its init (pid 1) and itself
        assert _value(seen["pid"]) == 2 and _value(seen["procs"]) == ["1", "2"], seen
        assert int(str(_value(seen["capeff"])), 16) == 0, seen["capeff"]
        assert _value(seen["umount"])[0] == -1, seen["umount"]  # cannot undo the masks
    # the second job does not see the first one's /tmp file
    assert tags[0] not in seen["tmpseen"], seen["tmpseen"]
    assert not isolated["outside"].exists()
    assert not any(Path("/tmp", t).exists() for t in tags)
    # one server served both calls, although the worker thread that started it may be gone
    fs = forkserver.get_fork_server(HARNESS, forkserver_env(get_settings().home))
    assert fs is not None and fs.alive()


def test_the_fork_server_outlives_the_thread_that_started_it(isolated: dict[str, Path]) -> None:
    started: list[forkserver.ForkServer | None] = []
    t = threading.Thread(target=lambda: started.append(
        forkserver.get_fork_server(HARNESS, forkserver_env(get_settings().home))))
    t.start()
    t.join()
    fs = started[0]
    assert fs is not None and fs.isolation and "bubblewrap" in fs.isolation
    assert fs.alive(), "the fork server died with the thread that started it"
    assert forkserver.get_fork_server(HARNESS, forkserver_env(get_settings().home)) is fs


def test_a_fallback_says_why(isolated: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KERNELSCOPE_NO_FORKSERVER", "1")
    assert forkserver.get_fork_server(HARNESS, forkserver_env(get_settings().home)) is None
    assert forkserver.unavailable_reason(HARNESS) == "KERNELSCOPE_NO_FORKSERVER is set"


ORPHAN = """
import os, sys, time
from pathlib import Path
from kernelscope.config import set_settings, settings_from_env
home = Path(sys.argv[1])
set_settings(settings_from_env(home=home, roots=[str(home)]).model_copy(update={"isolation": "required"}))
from kernelscope.sandbox import forkserver
from kernelscope.tools.run import HARNESS, forkserver_env
fs = forkserver.get_fork_server(HARNESS, forkserver_env(home))
print(fs._proc.pid if fs is not None else "none", flush=True)
time.sleep(600)
"""


def test_the_fork_server_ends_with_its_parent(isolated: dict[str, Path], tmp_path: Path) -> None:
    """Without --die-with-parent, the server's stdin closing is what ends it (and its jobs with its PID
    namespace): a server killed with SIGKILL leaves no sandbox behind."""
    import signal
    import subprocess
    import sys
    import time

    parent = subprocess.Popen([sys.executable, "-c", ORPHAN, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None
        line = parent.stdout.readline().strip()
        assert line.isdigit(), line
    finally:
        parent.send_signal(signal.SIGKILL)
        parent.wait()
    sandbox = int(line)
    deadline = time.monotonic() + 60
    while Path(f"/proc/{sandbox}").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    stat = Path(f"/proc/{sandbox}/stat")
    assert not stat.exists() or stat.read_text().split(")")[1].split()[0] == "Z", "the fork server outlived its parent"
