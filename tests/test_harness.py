"""The harness package's seams: observers plugged into a job get their hooks called and contribute to
the result (on the CPU, with torch's CPU build), and a job whose limits cannot be applied is refused,
with the reason, by both ways a job starts (the launcher and the fork server's child)."""

from __future__ import annotations

import ast
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from kernelscope.sandbox import forkserver, process
from kernelscope.sandbox.process import Limits

CASES = Path(__file__).parent / "evalcases"


def test_the_launcher_refuses_a_job_whose_limits_it_cannot_apply(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(process, "job_rlimits", lambda limits: {"RLIMIT_CORE": 0, "RLIMIT_NOPE": 1})
    r = process.run_process([sys.executable, "-c", "print('ran')"], cwd=tmp_path)
    assert r.returncode == 125 and "ran" not in r.stdout
    assert "kernelscope sandbox: cannot apply the limit RLIMIT_NOPE" in r.stderr


def test_the_launcher_applies_the_limits(tmp_path: Path) -> None:
    code = "import resource; print(resource.getrlimit(resource.RLIMIT_FSIZE))"
    r = process.run_process([sys.executable, "-c", code], cwd=tmp_path, limits=Limits(file_size_bytes=1 << 20))
    assert r.ok and r.stdout.strip() == f"({1 << 20}, {1 << 20})", r.stderr


torch = pytest.importorskip("torch", reason="the harness needs torch (its CPU build is enough)")

from kernelscope.harness.job import Harness  # noqa: E402
from kernelscope.harness.observers import (  # noqa: E402
    Energy,
    FlushProbe,
    HostCover,
    L2Persistence,
    Measured,
    Observer,
    Round,
    SideStreams,
    SpeedOfLight,
    TimingRun,
    default_observers,
)
from kernelscope.harness.protocol import Config  # noqa: E402
from kernelscope.tools.run import HARNESS, forkserver_env, job_env  # noqa: E402
from kernelscope.tools.run_answer import parse_harness_result  # noqa: E402


class Recorder(Observer):
    """Counts its hooks, keeps every other round, and reports what it saw."""

    phase = "recorder"

    def __init__(self) -> None:
        self.events: list[str] = []
        self.calls: dict[str, int] = {}
        self.firsts = 0
        self.rounds = 0
        self.stops_asked = 0
        self.kept = 0

    def register(self, ctx: Any) -> None:
        super().register(ctx)
        self.events.append("register")

    def before_warm_up(self, run: TimingRun) -> None:
        self.events.append("before_warm_up")

    def before_rounds(self, run: TimingRun) -> None:
        assert run.warm_up.s > 0 and run.warm_host_s["candidate"]  # the warm-up is done
        self.events.append("before_rounds")

    def before_call(self, name: str, first: bool) -> None:
        self.calls[name] = self.calls.get(name, 0) + 1
        self.firsts += first

    def after_round(self, run: TimingRun, rnd: Round) -> None:
        assert set(rnd.times) == {"candidate", "reference"} and rnd is run.rounds[-1]
        self.rounds += 1

    def may_stop(self, run: TimingRun, min_runs: int) -> bool:
        self.stops_asked += 1
        return True

    def select_rounds(self, run: TimingRun, min_runs: int) -> list[int] | None:
        self.events.append("select_rounds")
        keep = list(range(0, len(run.rounds), 2))
        self.kept = len(keep)
        return keep

    def after_rounds(self, run: TimingRun) -> None:
        self.events.append("after_rounds")

    def after_timing(self, measured: Measured) -> None:
        assert set(measured.models) == {"candidate", "reference"} and measured.speedups["eager"]["speedup"] > 0
        self.events.append("after_timing")

    def results(self) -> dict[str, Any]:
        return {"recorder": {"rounds": self.rounds, "kept": self.kept}}


def _cfg(tmp_path: Path, candidate: str = "ok_softmax.py") -> dict[str, Any]:
    return {"device": "cpu", "reference_path": str(CASES / "ref_softmax.py"),
            "candidate_path": str(CASES / candidate), "trials": 2, "timing_budget_s": 0.02, "min_runs": 5,
            # the budget, not the cap, ends the timing, and the observers are asked whether it may stop however
            # fast or loaded the machine is: max_runs is far above what 0.02 s can hold, and min_runs is no more
            # than the 5 rounds after which a slow run stops at 4x its budget (that check comes second)
            "max_runs": 100_000, "seed": 1}


def test_an_observer_plugged_into_a_job_gets_its_hooks_and_adds_to_the_result(tmp_path: Path) -> None:
    rec = Recorder()
    h = Harness(_cfg(tmp_path), observers=[rec])
    assert h.observers == [rec] and rec.events == ["register"]
    result = h.run()
    assert result["verdict"] in ("faster", "slower", "inconclusive"), result
    assert rec.events == ["register", "before_warm_up", "before_rounds", "select_rounds", "after_rounds",
                          "after_timing"]
    # each round calls both sides once, the first of each round after a synchronize
    assert rec.rounds >= 5 and rec.calls == {"candidate": rec.rounds, "reference": rec.rounds}
    assert rec.firsts == rec.rounds and rec.stops_asked >= 1
    # the rounds it left out are out of the timings; its fields and its phase are in the result
    assert result["timings"]["candidate"]["runs"] == rec.kept == (rec.rounds + 1) // 2
    assert result["recorder"] == {"rounds": rec.rounds, "kept": rec.kept}
    assert "recorder" in h.phases.seconds and "flush_probe" in result and result["flush_probe"] is None


def test_an_incorrect_candidate_is_never_timed_so_no_observer_runs(tmp_path: Path) -> None:
    rec = Recorder()
    result = Harness(_cfg(tmp_path, "wrong.py"), observers=[rec]).run()
    assert result["verdict"] == "incorrect" and rec.events == ["register"] and "recorder" not in result


def test_the_default_observers() -> None:
    assert [type(o) for o in default_observers(Config(device="cpu"), cuda=False)] == [SideStreams]
    gpu = default_observers(Config(measure_energy=True), cuda=True)
    # the host cover's wait is enqueued before the flush, so it comes first; persisting L2 lines are reset
    # before the flush too, so that it evicts them
    assert [type(o) for o in gpu] == [HostCover, L2Persistence, FlushProbe, SideStreams, SpeedOfLight, Energy]
    assert [type(o) for o in default_observers(Config(flush_l2=False), cuda=True)] == [
        HostCover, L2Persistence, SideStreams, SpeedOfLight]


def test_the_fork_server_child_refuses_a_job_whose_limits_it_cannot_apply(
        tmp_path: Path, kernelscope_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The child applies the launcher's own limit code; a limit it cannot apply is not ignored: the job does
    not run, and its result says why."""
    monkeypatch.setattr(forkserver, "job_rlimits", lambda limits: {"RLIMIT_CORE": 0, "RLIMIT_NOPE": 1})
    # under the workspace root, as the tools make them: an isolated fork server sees no other place
    ws = kernelscope_home / "workspaces" / f"ws-{tmp_path.name}"
    ws.mkdir(parents=True)
    (ws / "config.json").write_text(json.dumps(_cfg(tmp_path)))
    out = ws / "result.json"
    fs = forkserver.ForkServer(HARNESS, forkserver_env(kernelscope_home))
    try:
        proc = fs.run(cfg=ws / "config.json", out=out, cwd=ws, env=job_env(ws, kernelscope_home, None),
                      limits=Limits(wall_s=120))
    finally:
        fs.close()
    assert proc.returncode == 125 and "cannot apply the limit RLIMIT_NOPE" in proc.stderr
    raw = json.loads(out.read_text())
    r = parse_harness_result(raw)
    assert r.status == "error" and r.verdict == "invalid" and "RLIMIT_NOPE: no such resource limit" in (r.error or "")
    assert r.correctness is None  # nothing of the job ran


def test_the_harness_imports_nothing_of_kernelscope_but_itself(tmp_path: Path) -> None:
    """It runs untrusted code: the server's modules (and pydantic) stay out of its process."""
    code = ("import sys, kernelscope.harness.__main__, kernelscope.harness.server as s; s._sandbox_limits(); "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('kernelscope', 'pydantic')))")
    r = process.run_process([sys.executable, "-s", "-c", code], cwd=tmp_path,
                            env=job_env(tmp_path, tmp_path, None), limits=Limits(wall_s=120))
    assert r.ok, r.stderr
    loaded = ast.literal_eval(r.stdout)
    assert loaded and all(m in ("kernelscope", "kernelscope._version") or m.startswith("kernelscope.harness")
                          for m in loaded), loaded
