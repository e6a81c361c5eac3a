"""The extension build cache (sandbox/extcache.py): a candidate's load_inline build from `run` is what every
later job of the same source loads (analyze's captures included), each source has its own entry, and a sealed
entry cannot be changed by any job. The builds are real (C++ only, g++ on the CPU); the evidence that a job
built nothing is ninja's own "no work to do" and the entry's files, byte for byte and time for time."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import pytest
from _settings import override_settings

from kernelscope.config import get_settings
from kernelscope.models.requests import AnalyzeRequest, EvalRequest
from kernelscope.sandbox import extcache, forkserver
from kernelscope.sandbox.forkserver import get_fork_server
from kernelscope.sandbox.isolation import binds_for, isolation_status, job_view, plan_job
from kernelscope.sandbox.process import Limits, ProcessResult, run_process
from kernelscope.sandbox.workspace import Workspace
from kernelscope.tools.analyze import Analysis, prepare_target
from kernelscope.tools.run import HARNESS, eval_candidate, forkserver_env, job_env

CASES = Path(__file__).parent / "evalcases"
# A load_inline candidate whose extension has the same name in every variant (TAG changes only the source);
# verbose, so torch prints the build's commands, or ninja's "no work to do" for a build it reuses. A job
# told to (tamper.txt in its workspace) tries to append to each path listed there and prints what happened.
CANDIDATE = '''
import os
import torch
from torch.utils.cpp_extension import load_inline

_ext = load_inline(name="ks_cache_probe", cpp_sources=["int tag_TAG(int x) { return x + 1; }"],
                   functions=["tag_TAG"], verbose=True)
for target in (open("tamper.txt").read().split() if os.path.exists("tamper.txt") else []):
    try:
        with open(target, "ab") as f:
            f.write(b"planted")
        print("WROTE", target, flush=True)
    except OSError as e:
        print("REFUSED", target, e.errno, flush=True)


class ModelNew(torch.nn.Module):
    def forward(self, x):
        return torch.relu(x) + 0 * _ext.tag_TAG(1)
'''


def _candidate(tmp: Path, tag: str) -> Path:
    p = tmp / f"cand_{tag}.py"
    p.write_text(CANDIDATE.replace("TAG", tag))
    return p


def _snapshot(entry: Path) -> dict[str, tuple[int, bytes]]:
    return {str(p.relative_to(entry)): (p.stat().st_mtime_ns, p.read_bytes()) for p in sorted(entry.rglob("*"))
            if p.is_file()}


def _entry(candidate: Path) -> Path:
    s = get_settings()
    return Path(job_env(s.workspaces_dir, s.home, None, candidate=candidate.read_text())["TORCH_EXTENSIONS_DIR"])


def _analyze_job(candidate: Path, kind: str, tamper: list[Path] = ()) -> tuple[ProcessResult, dict]:
    """The harness job analyze profiles (its workspace, configuration and environment, from analyze's own code),
    run as the job kind of its capture: ``profile`` (under Nsight Compute) or ``eval`` (the CUPTI collector),
    or on the evaluations' fork server; with no GPU here, the harness itself stands in for the profiler and runs
    on the CPU."""
    req = AnalyzeRequest(reference_path=str(CASES / "ref_relu.py"), candidate_path=str(candidate))
    with Workspace(prefix="analyze-") as ws:
        prep = prepare_target(req, ws.path, get_settings())
        cfg = json.loads((ws.path / "config.json").read_text())
        (ws.path / "config.json").write_text(json.dumps({**cfg, "device": "cpu"}))
        (ws.path / "tamper.txt").write_text("\n".join(map(str, tamper)))
        a = Analysis(req=req, settings=get_settings(), prep=prep, ws=ws.path, lease=None)  # type: ignore[arg-type]
        if kind == "fork-server":  # the evaluation's executor, with the same environment
            fs = get_fork_server(HARNESS, forkserver_env(get_settings().home))
            assert fs is not None
            proc = fs.run(cfg=ws.path / "config.json", out=ws.path / "result.json", cwd=ws.path, env=a.env,
                          limits=Limits(wall_s=600))
        else:
            proc = run_process(prep.argv, cwd=ws.path, env=a.env, limits=Limits(wall_s=600, job=kind))  # type: ignore[arg-type]
        result = json.loads((ws.path / "result.json").read_text()) if (ws.path / "result.json").is_file() else {}
    return proc, result


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Source A evaluated by `run` on the CPU (its pre-build job, then the evaluation on the fork server)."""
    pytest.importorskip("torch", reason="extension builds need torch (the CPU build is enough)")
    pytest.importorskip("ninja", reason="torch's extension builds need ninja")
    tmp = tmp_path_factory.mktemp("extcache")
    a = _candidate(tmp, "a")
    r = eval_candidate(EvalRequest(reference_path=str(CASES / "ref_relu.py"), candidate_path=str(a), device="cpu",
                                   timing_budget_s=0.1, min_runs=5, max_runs=20, trials=1, timeout_s=600))
    assert r.status == "ok" and r.correctness and r.correctness.correct, (r.error, r.build_note, r.stderr_tail)
    assert r.build_s is not None and r.build_note is None  # run built it in its pre-build job
    return {"tmp": tmp, "a": a, "entry": _entry(a)}


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["profile", "eval", "fork-server"])
def test_analyze_loads_the_build_run_made(built: dict[str, Path], kind: str) -> None:
    entry = built["entry"]
    assert extcache.is_sealed(entry)  # sealed by the launcher after run's build
    before = _snapshot(entry)
    proc, result = _analyze_job(built["a"], kind)
    out = proc.stdout + proc.stderr
    assert result.get("status") == "ok", out[-3000:]
    assert "ninja: no work to do." in out and "c++" not in out, out[-3000:]  # nothing compiled, nothing linked
    assert _snapshot(entry) == before


@pytest.mark.slow
def test_another_source_builds_its_own_entry(built: dict[str, Path]) -> None:
    b = _candidate(built["tmp"], "b")
    before = _snapshot(built["entry"])
    proc, result = _analyze_job(b, "profile")  # never run: analyze's capture builds it
    out = proc.stdout + proc.stderr
    assert result.get("status") == "ok", out[-3000:]
    assert "c++" in out and "ninja: no work to do." not in out, out[-3000:]  # the same extension name, built anew
    assert _entry(b) != built["entry"] and extcache.is_sealed(_entry(b))
    assert _snapshot(built["entry"]) == before


@pytest.fixture
def required_isolation() -> object:
    if not isolation_status().available:
        if os.environ.get("KERNELSCOPE_REQUIRE_BWRAP"):
            pytest.fail(f"bubblewrap is required here: {isolation_status().detail}")
        pytest.skip(f"no isolation here: {isolation_status().detail}")
    with override_settings(isolation="required"):
        forkserver.shutdown_all()
        yield
        forkserver.shutdown_all()


@pytest.mark.slow
@pytest.mark.parametrize("tag", ["a", "c"])  # A: its own sealed entry; C: another source's
def test_no_job_writes_into_a_sealed_entry(built: dict[str, Path], required_isolation: object, tag: str) -> None:
    entry = built["entry"]
    so = entry / "ks_cache_probe" / "ks_cache_probe.so"
    targets = [so, entry / "ks_cache_probe" / "planted.so", entry / "planted.so"]
    before = _snapshot(entry)
    proc, result = _analyze_job(_candidate(built["tmp"], tag), "eval", tamper=targets)
    out = proc.stdout + proc.stderr
    assert result.get("status") == "ok", out[-3000:]
    if tag == "a":  # its own build: the job writes into its private copy, gone with its workspace
        assert f"WROTE {so}" in out, out[-3000:]
    else:  # another source's entry is not even there
        assert out.count("REFUSED") == len(targets), out[-3000:]
    assert _snapshot(entry) == before and not list(entry.rglob("planted.so"))
    proc, _ = _analyze_job(built["a"], "eval")  # and the next job of A still reuses the build as it was
    assert "ninja: no work to do." in proc.stdout + proc.stderr


# ------------------------------------------------------------------------------------------- the parts
def _fake_build(entry: Path) -> Path:
    ext = entry / "ext"
    ext.mkdir(parents=True)
    (ext / "main.cpp").write_text("int f() { return 1; }")
    (ext / "ext.so").write_bytes(b"\x7fELF built")
    return ext


def test_an_entry_is_sealed_only_once_its_build_is_finished(tmp_path: Path) -> None:
    entry = tmp_path / "build-cache" / extcache.CACHE_FOLDER / "k1"
    assert not extcache.seal(entry)  # nothing there
    ext = _fake_build(entry)
    (ext / "lock").write_text("")  # torch's lock: a build under way (or killed)
    assert not extcache.seal(entry) and not extcache.is_sealed(entry)
    (ext / "lock").unlink()
    outside = tmp_path / "elsewhere"
    outside.write_text("x")
    (ext / "link").symlink_to(outside)
    os.link(outside, ext / "hard")
    assert extcache.seal(entry) and extcache.is_sealed(entry)
    assert not (ext / "link").exists()  # links are dropped, hard links broken: the files are the entry's own
    assert (ext / "hard").stat().st_ino != outside.stat().st_ino and outside.stat().st_mode & 0o200
    assert not (ext / "ext.so").stat().st_mode & 0o222
    files = json.loads(extcache.manifest_path(entry).read_text())["files"]
    assert set(files) == {"ext/main.cpp", "ext/ext.so", "ext/hard"}


def test_a_private_copy_keeps_times_and_refuses_a_changed_entry(tmp_path: Path) -> None:
    entry = tmp_path / extcache.CACHE_FOLDER / "k2"
    ext = _fake_build(entry)
    os.utime(ext / "ext.so", ns=(1_000_000_123, 2_000_000_456))
    assert extcache.seal(entry)
    copy, ok = extcache.private_copy(entry, tmp_path / "ws")
    assert ok and (copy / "ext" / "ext.so").read_bytes() == b"\x7fELF built"
    assert (copy / "ext" / "ext.so").stat().st_mtime_ns == 2_000_000_456 and os.access(copy / "ext", os.W_OK)
    os.chmod(ext / "ext.so", 0o644)
    (ext / "ext.so").write_bytes(b"\x7fELF planted")
    copy, ok = extcache.private_copy(entry, tmp_path / "ws")
    assert not ok and not any(copy.iterdir())  # the job builds for itself instead


def test_keys_follow_the_source_and_the_build_settings() -> None:
    env = {"TORCH_CUDA_ARCH_LIST": "9.0", "PATH": "/usr/bin"}
    k = extcache.extension_key("src", env, "torch 2.5")
    assert k == extcache.extension_key("src", dict(env), "torch 2.5")
    assert len({k, extcache.extension_key("src ", env, "torch 2.5"), extcache.extension_key("src", env, "torch 2.6"),
                extcache.extension_key("src", {**env, "TORCH_CUDA_ARCH_LIST": "8.0"}, "torch 2.5")}) == 4


def test_run_and_analyze_name_the_same_entry(tmp_path: Path) -> None:
    s = get_settings()
    run_env = job_env(tmp_path / "eval-1", s.home, None, candidate="y = 2\n")
    req = AnalyzeRequest(reference="x = 1\n", candidate="y = 2\n")
    prep = prepare_target(req, tmp_path, s)
    a = Analysis(req=req, settings=s, prep=prep, ws=tmp_path / "analyze-1", lease=None)  # type: ignore[arg-type]
    assert a.env["TORCH_EXTENSIONS_DIR"] == run_env["TORCH_EXTENSIONS_DIR"]  # analyze finds what run built
    other = job_env(tmp_path, s.home, None, candidate="y = 2 \n")  # keyed by the source's exact text
    assert other["TORCH_EXTENSIONS_DIR"] != run_env["TORCH_EXTENSIONS_DIR"]
    assert Path(run_env["TORCH_EXTENSIONS_DIR"]).parent == s.home / "build-cache" / extcache.CACHE_FOLDER
    own = job_env(tmp_path / "w", s.home, None)["TORCH_EXTENSIONS_DIR"]  # no candidate: its own workspace
    assert Path(own).is_relative_to(tmp_path / "w")


def test_sealed_entries_are_bound_as_private_copies(tmp_path: Path) -> None:
    entry = tmp_path / extcache.CACHE_FOLDER / "k3"
    ws = tmp_path / "ws"
    ws.mkdir()
    env = {"TORCH_EXTENSIONS_DIR": str(entry)}
    for kind in ("eval", "profile"):  # open: the entry itself, writable
        assert entry in binds_for(kind, ws, argv=["x"], env=env).rw  # type: ignore[arg-type]
    assert entry not in binds_for("program", ws, argv=["x"], env=env).rw
    _fake_build(entry)
    assert extcache.seal(entry)
    for kind in ("eval", "profile"):  # sealed: never the entry, a copy mounted where it is
        b = binds_for(kind, ws, argv=["x"], env=env)  # type: ignore[arg-type]
        assert entry not in b.rw and b.moved == ((ws / extcache.PRIVATE_FOLDER / "k3", entry),)
    plan = plan_job(["x"], cwd=ws, env=env, kind="eval")
    if plan.prefix:
        view = job_view(dataclasses.replace(plan, writable=(tmp_path,)), ws, env)
        assert view is not None and str(entry.resolve()) not in view["keep"]
        assert view["bind"] == [[str((ws / extcache.PRIVATE_FOLDER / "k3").resolve()), str(entry.resolve())]]


def test_ray_ships_builds_without_their_seal(tmp_path: Path) -> None:
    """A build packed on one Ray node names that node's paths: the evaluating node unpacks it open, builds where
    the paths differ and seals its own."""
    from kernelscope.sandbox.pool import _pack, _unpack

    entry = tmp_path / "a" / extcache.CACHE_FOLDER / "k4"
    _fake_build(entry)
    assert extcache.seal(entry)
    there = tmp_path / "b"
    assert _unpack(_pack(tmp_path / "a"), there) == 2
    assert not extcache.is_sealed(there / extcache.CACHE_FOLDER / "k4")
    assert (there / extcache.CACHE_FOLDER / "k4" / "ext" / "ext.so").read_bytes() == b"\x7fELF built"
