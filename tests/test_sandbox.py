import signal
import sys
import time
from pathlib import Path

import pytest

from kernelscope.sandbox import Limits, PathRefused, Workspace, contained_path, resolve_user_path, run_process


def test_exit_status_and_output(tmp_path: Path) -> None:
    r = run_process([sys.executable, "-c", "import sys; print('out'); print('err', file=sys.stderr); sys.exit(3)"],
                    cwd=tmp_path)
    assert r.returncode == 3 and r.stdout.strip() == "out" and r.stderr.strip() == "err" and not r.ok


def test_missing_executable_is_a_result(tmp_path: Path) -> None:
    r = run_process(["/nonexistent/binary"], cwd=tmp_path)
    assert r.returncode == 127 and "cannot execute" in r.stderr


def test_timeout_kills_whole_group_even_if_sigterm_ignored(tmp_path: Path) -> None:
    pidfile = tmp_path / "child.pid"
    code = (
        "import os, signal, subprocess, sys, time\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "c = subprocess.Popen([sys.executable, '-c', 'import signal,time; signal.signal(signal.SIGTERM, "
        "signal.SIG_IGN); time.sleep(600)'])\n"
        f"open({str(pidfile)!r}, 'w').write(str(c.pid))\n"
        "time.sleep(600)\n"
    )
    t0 = time.monotonic()
    r = run_process([sys.executable, "-c", code], cwd=tmp_path, limits=Limits(wall_s=1.5, kill_grace_s=0.5))
    assert r.timed_out and not r.ok and r.signal_name == "SIGKILL"
    assert time.monotonic() - t0 < 6
    child = int(pidfile.read_text())
    time.sleep(0.2)
    if r.isolation is None:
        stat = Path(f"/proc/{child}/stat")
        # the grandchild is gone too (or a zombie waiting for init to reap it)
        assert not stat.exists() or stat.read_text().split(")")[1].split()[0] in ("Z", "X")
    # isolated, the pid it wrote is its PID namespace's: look for it by its command line instead
    assert not _live_with_cmdline(b"time.sleep(600)'")


def _live_with_cmdline(marker: bytes) -> list[int]:
    found = []
    for d in Path("/proc").iterdir():
        try:
            if d.name.isdigit() and marker in (d / "cmdline").read_bytes() \
                    and (d / "stat").read_text().split(")")[1].split()[0] not in ("Z", "X"):
                found.append(int(d.name))
        except OSError:
            continue
    return found


def test_output_is_capped_with_marker(tmp_path: Path) -> None:
    r = run_process([sys.executable, "-c", "import sys; sys.stdout.write('x' * 5_000_000)"], cwd=tmp_path,
                    limits=Limits(output_bytes=10_000))
    assert r.stdout_truncated and r.stdout_bytes == 5_000_000
    assert "truncated by kernelscope" in r.stdout and len(r.stdout) < 11_000


def test_file_size_limit(tmp_path: Path) -> None:
    code = "f = open('big', 'wb')\nfor _ in range(100): f.write(b'x' * 1_000_000)\n"
    r = run_process([sys.executable, "-c", code], cwd=tmp_path, limits=Limits(file_size_bytes=2_000_000))
    assert not r.ok
    assert (tmp_path / "big").stat().st_size <= 2_000_000


def test_cpu_limit(tmp_path: Path) -> None:
    r = run_process([sys.executable, "-c", "while True: pass"], cwd=tmp_path, limits=Limits(cpu_s=1, wall_s=20))
    assert r.signal_name in ("SIGXCPU", "SIGKILL") and not r.timed_out


def test_minimal_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SECRET_TOKEN", "hunter2")
    r = run_process([sys.executable, "-c", "import os; print(sorted(os.environ))"], cwd=tmp_path)
    assert "SECRET_TOKEN" not in r.stdout and "PATH" in r.stdout


def test_cancel_event(tmp_path: Path) -> None:
    import threading

    ev = threading.Event()
    threading.Timer(0.3, ev.set).start()
    r = run_process([sys.executable, "-c", "import time; time.sleep(60)"], cwd=tmp_path, cancel=ev,
                    limits=Limits(kill_grace_s=0.5))
    assert r.cancelled and r.wall_s < 5 and r.signal_name in ("SIGTERM", "SIGKILL")


def test_signal_crash_is_reported(tmp_path: Path) -> None:
    r = run_process([sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)"], cwd=tmp_path)
    assert r.returncode == -signal.SIGSEGV and r.signal_name == "SIGSEGV"


def test_path_containment(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (root / "a.cu").write_text("x")
    (tmp_path / "secret").write_text("s")
    (root / "link").symlink_to(tmp_path / "secret")
    assert resolve_user_path("a.cu", [root]) == (root / "a.cu").resolve()
    for bad in ["../secret", str(tmp_path / "secret"), "link", "/etc/passwd", "", "a\x00b"]:
        with pytest.raises(PathRefused):
            resolve_user_path(bad, [root])
    with pytest.raises(PathRefused, match="No such file"):
        resolve_user_path("missing.cu", [root])
    assert contained_path(root, "sub/x") == (root / "sub" / "x").resolve()
    for bad in ["../x", "/etc", "link"]:
        with pytest.raises(PathRefused):
            contained_path(root, bad)


def test_workspace_is_removed(tmp_path: Path) -> None:
    with Workspace(parent=tmp_path) as ws:
        p = ws.path
        assert (p / "tmp").is_dir()
    assert not p.exists()
