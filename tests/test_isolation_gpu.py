"""Isolation on a real GPU (device machine): every GPU path works inside bubblewrap with isolation required
(eval on the fork server, each job in its own view; program runs; ncu; the CUPTI tracer and metrics
collector; energy through NVML), a GPU program sees the device nodes but not a planted secret or the
server's home, a GPU job's memory is capped (a cgroup where delegated: run with KERNELSCOPE_JOB_CGROUP
from .ci/cgroup), and the sandbox's cost per job is measured (benchmarks/isolation.py has the table)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from _settings import override_settings

from kernelscope.models.requests import (
    AnalyzeRequest,
    CompileRequest,
    EvalRequest,
    ProfileRequest,
    ProgramRequest,
    TraceRequest,
)
from kernelscope.sandbox.cgroup import job_cgroup_status
from kernelscope.sandbox.isolation import isolation_status
from kernelscope.sandbox.process import Limits, run_process
from kernelscope.tools.analyze import analyze
from kernelscope.tools.compile import compile_cuda
from kernelscope.tools.ncu_profile import ncu_profile
from kernelscope.tools.nsys_trace import trace
from kernelscope.tools.run import eval_candidate, run_program

pytestmark = pytest.mark.gpu
PROBLEMS = Path(__file__).resolve().parent.parent / "examples" / "problems"


@pytest.fixture(autouse=True)
def _isolated(kernelscope_home: Path) -> Iterator[None]:
    st = isolation_status()
    if not st.available:
        pytest.fail(f"the GPU machine must carry bubblewrap (KERNELSCOPE_BWRAP): {st.detail}")
    with override_settings(isolation="required"):
        yield


PROBE = r"""
#include <cstdio>
#include <cstdlib>
__global__ void twice(float* x) { x[threadIdx.x] *= 2.f; }
int main(int argc, char** argv) {
    FILE* f = fopen(argv[1], "r");
    printf("secret:%s\n", f ? "READ" : "hidden");
    FILE* g = fopen(argv[2], "w");
    printf("write:%s\n", g ? "WROTE" : "refused");
    float* d; cudaMalloc(&d, 32 * sizeof(float)); twice<<<1, 32>>>(d);
    printf("cuda:%s\n", cudaGetErrorString(cudaDeviceSynchronize()));
    return 0;
}
"""


def test_a_gpu_program_runs_isolated_and_sees_no_secret(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text(f"TOPSECRET-{uuid.uuid4().hex}")
    outside = tmp_path / "written"
    c = compile_cuda(CompileRequest(source=PROBE))
    assert c.success and c.artifact_id, c.log
    r = run_program(ProgramRequest(artifact_id=c.artifact_id, args=[str(secret), str(outside)]))
    assert r.exit_status == 0, r.stderr
    assert "secret:hidden" in r.stdout and "write:refused" in r.stdout and "cuda:no error" in r.stdout
    assert not outside.exists()


def test_eval_on_the_gpu_inside_the_sandbox_is_correct() -> None:
    ref = PROBLEMS / "softmax" / "reference.py"
    for _ in range(2):  # the second one on the same warm fork server
        r = eval_candidate(EvalRequest(reference_path=str(ref), candidate_path=str(PROBLEMS / "softmax" / "better.py"),
                                       device="cuda", timing_budget_s=0.5, trials=3, timeout_s=180,
                                       measure_energy=True, energy_window_s=0.5))
        assert r.status == "ok" and r.correctness and r.correctness.correct, (r.error, r.notes)
        assert r.executor == "fork-server" and "per-job" in (r.isolation or ""), (r.executor, r.isolation, r.notes)
        assert r.energy and all(e.joules_per_call and e.joules_per_call > 0 for e in r.energy.values()), r.energy


def _program() -> str:
    src = ("__global__ void k(float* x) { x[threadIdx.x] += 1.f; }\n"
           "int main() { float* d; cudaMalloc(&d, 128); for (int i = 0; i < 4; ++i) k<<<1, 32>>>(d);\n"
           "  return cudaDeviceSynchronize(); }\n")
    c = compile_cuda(CompileRequest(source=src, output="executable", flags=["-lineinfo"]))
    assert c.success and c.artifact_id, c.log
    return c.artifact_id


def test_ncu_profile_inside_the_sandbox() -> None:
    res = ncu_profile(ProfileRequest(artifact_id=_program(), launch_count=2))
    assert res.status == "ok" and res.kernels and res.kernels[0].name.startswith("k"), (res.status, res.explanation)


def test_the_cupti_tracer_inside_the_sandbox() -> None:
    res = trace(TraceRequest(artifact_id=_program(), backend="cupti"))
    assert res.status == "ok" and res.summary is not None and res.summary.launches == 4, res.explanation


def test_the_cupti_collector_inside_the_sandbox() -> None:
    res = analyze(AnalyzeRequest(artifact_id=_program()))
    assert res.status == "ok", (res.explanation, res.notes)
    assert [s.tool for s in res.stages][:2] == ["cupti", "cupti"] and res.kernels, res.stages


def test_a_gpu_jobs_memory_is_capped(tmp_path: Path) -> None:
    """A CUDA process (no RLIMIT_AS for it) that allocates host memory without end is stopped at the job cap:
    by its cgroup where one is delegated, else by the watchdog; the answer says which and how much."""
    bomb = ("#include <cstdlib>\n#include <cstring>\n#include <unistd.h>\n"
            "int main() { float* d; cudaMalloc(&d, 4);\n"
            "  for (;;) { char* p = (char*)malloc(64 << 20); memset(p, 1, 64 << 20); usleep(2000); } }\n")
    c = compile_cuda(CompileRequest(source=bomb, output="executable"))
    assert c.success and c.artifact_id, c.log
    with override_settings(job_memory_bytes=1 << 30):
        r = run_program(ProgramRequest(artifact_id=c.artifact_id, timeout_s=120))
    text = (r.stderr or "") + str(r.model_dump())
    via = "cgroup v2 memory.max" if job_cgroup_status().available else "the watchdog's resident-size limit"
    assert "job memory cap: 1024 MiB" in text and via in text, text[-2000:]


def test_ncu_kernel_times_inside_the_sandbox() -> None:
    src = ("__global__ void k(float* x) { x[threadIdx.x] += 1.f; }\n"
           "int main() { float* d; cudaMalloc(&d, 128); k<<<1, 32>>>(d); return cudaDeviceSynchronize(); }\n")
    c = compile_cuda(CompileRequest(source=src))
    assert c.artifact_id
    t = run_program(ProgramRequest(artifact_id=c.artifact_id, kernel_times=True))
    assert t.exit_status == 0 and t.kernel_times, (t.kernel_times_note, t.stderr)


def test_the_sandbox_costs_little_per_job(tmp_path: Path) -> None:
    """Measures what bwrap adds to starting nvidia-smi (a GPU job's start); printed for BENCHMARKS."""
    def median(mode: str) -> float:
        with override_settings(isolation=mode):
            times = []
            for _ in range(7):
                t0 = time.perf_counter()
                r = run_process(["nvidia-smi", "-L"], cwd=tmp_path, limits=Limits(wall_s=60))
                times.append(time.perf_counter() - t0)
                assert r.ok and "GPU" in r.stdout, r.stderr
                assert (r.isolation is not None) == (mode == "auto")
            return sorted(times)[3]

    isolated, bare = median("auto"), median("off")
    print(f"sandbox overhead per job: {1000 * (isolated - bare):.1f} ms (isolated {1000 * isolated:.1f} ms, "
          f"bare {1000 * bare:.1f} ms)")
    assert isolated - bare < 0.5
