"""The in-process CUPTI collector on a real GPU: its metrics against Nsight Compute's on the same launches, and
the profiled program's own results left as they were (kernel replay restores memory between passes)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from kernelscope.artifacts import get_store
from kernelscope.config import ensure_dirs
from kernelscope.heuristics.pipeline import COLLECTOR_METRICS, STAGE1_METRICS
from kernelscope.measure.collector import collected_profile, run_collector
from kernelscope.measure.ncu import load_profile
from kernelscope.measure.stages import collector_request
from kernelscope.models.requests import CompileRequest
from kernelscope.sandbox.gpu import gpu_pool
from kernelscope.toolkit.toolchain import require
from kernelscope.tools.compile import compile_cuda
from kernelscope.tools.run import job_env, stage_program

pytestmark = pytest.mark.gpu
PLANTED = Path(__file__).resolve().parent.parent / "examples" / "planted"


def _program(case: str, ws: Path) -> Path:
    r = compile_cuda(CompileRequest(source=(PLANTED / case / "planted.cu").read_text(), filename="planted.cu",
                                    output="executable", flags=["-O3"]))
    assert r.success and r.artifact_id, r.log
    return stage_program(Path(str(get_store().require(r.artifact_id).path("executable"))), ws)


@pytest.mark.parametrize("case", ["01-strided-copy", "07-ffma-matmul"])
def test_the_collector_agrees_with_nsight_compute(case: str, tmp_path: Path) -> None:
    s = ensure_dirs()
    prog = _program(case, tmp_path)
    with gpu_pool().lease() as lease:
        env = job_env(tmp_path, s.home, lease)
        proc, got = run_collector([str(prog)], tmp_path, env, COLLECTOR_METRICS, 300, s, None)
        assert proc.returncode == 0 and not got.errors and not got.refused and got.ended, (proc.stderr, got)
        # ncu without its cache flush before each pass, as the collector's replay runs
        ncu = subprocess.run([str(require("ncu")), "--export", str(tmp_path / "l"), "-f", "--clock-control", "none",
                              "--cache-control", "none", "--metrics", ",".join(STAGE1_METRICS), str(prog)], env=env,
                             capture_output=True, text=True, timeout=300)
        assert ncu.returncode == 0, ncu.stdout[-2000:] + ncu.stderr[-2000:]
    mine = {k.mangled_name: k for k in collected_profile(got).kernels}
    theirs = {k.mangled_name: k for k in load_profile(tmp_path / "l.ncu-rep", top_lines=0).kernels}
    assert set(mine) == set(theirs)
    for name, k in mine.items():
        n = theirs[name]
        # the launch metrics kernelscope computes: exactly ncu's
        for f in ("grid_size", "block_size", "registers_per_thread", "shared_mem_static_bytes", "device"):
            assert getattr(k, f) == getattr(n, f), (name, f, getattr(k, f), getattr(n, f))
        assert k.waves_per_sm == pytest.approx(n.waves_per_sm, rel=1e-6)
        assert k.theoretical_occupancy_pct == pytest.approx(n.theoretical_occupancy_pct, rel=1e-6)
        # the measured ones: the same counters, one run apart
        assert k.duration_ns == pytest.approx(n.duration_ns, rel=0.15), name
        assert k.sm_throughput_pct == pytest.approx(n.sm_throughput_pct, rel=0.15), name
        assert k.achieved_occupancy_pct == pytest.approx(n.achieved_occupancy_pct, rel=0.1), name
        ffma = "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum.per_cycle_elapsed"
        assert k.num(ffma) == pytest.approx(n.num(ffma), rel=0.05, abs=1.0), name


@pytest.mark.parametrize("deep", [False, True], ids=["light", "deep-and-source-passes"])
def test_the_programs_results_are_unchanged_by_the_replay(tmp_path: Path, deep: bool) -> None:
    """Case 08 accumulates with atomics: a replay pass, or a source pass, that did not restore memory would change
    its sums (the deep launches run twice more, on checkpoints of the memory, besides their metric passes)."""
    s = ensure_dirs()
    prog = _program("08-atomic-contention", tmp_path)
    with gpu_pool().lease() as lease:
        env = job_env(tmp_path, s.home, lease)
        plain = subprocess.run([str(prog)], env=env, capture_output=True, text=True, timeout=120, cwd=tmp_path)
        proc, got = run_collector([str(prog)], tmp_path, env, COLLECTOR_METRICS, 300, s, None,
                                  deep=collector_request() if deep else None)
    assert plain.returncode == 0 and plain.stdout.startswith("ok "), plain.stdout
    assert proc.returncode == 0 and proc.stdout == plain.stdout, (proc.stdout, plain.stdout)
    assert len(got.launches) == 2 and (got.passes or 0) > 1 and not got.errors, got.errors
    if deep:
        assert all(ln.deep for ln in got.launches) and len(got.sources) == 2
        assert all(src.sampled and src.counted and src.samples > 0 for src in got.sources)
