"""Isolation on a real GPU (device machine; written for the H100, not yet run there): every GPU path works
inside bubblewrap (eval, program runs, ncu kernel times), a GPU program sees the device nodes but not a
planted secret or the server's home, and the sandbox's cost per job is measured."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest

from kernelscope.config import get_settings, set_settings
from kernelscope.models.requests import CompileRequest, EvalRequest, ProgramRequest
from kernelscope.sandbox.isolation import isolation_status
from kernelscope.sandbox.process import Limits, run_process
from kernelscope.tools.compile import compile_cuda
from kernelscope.tools.run import eval_candidate, run_program

pytestmark = pytest.mark.gpu
PROBLEMS = Path(__file__).resolve().parent.parent / "examples" / "problems"


@pytest.fixture(autouse=True)
def _isolated(kernelscope_home: Path) -> None:
    st = isolation_status()
    if not st.available:
        pytest.fail(f"the GPU machine must carry bubblewrap (KERNELSCOPE_BWRAP): {st.detail}")


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
    r = eval_candidate(EvalRequest(reference_path=str(ref), candidate_path=str(PROBLEMS / "softmax" / "better.py"),
                                   device="cuda", timing_budget_s=0.5, trials=3, timeout_s=180))
    assert r.status == "ok" and r.correctness and r.correctness.correct, (r.error, r.notes)


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
        before = get_settings()
        set_settings(before.model_copy(update={"isolation": mode}))
        try:
            times = []
            for _ in range(7):
                t0 = time.perf_counter()
                r = run_process(["nvidia-smi", "-L"], cwd=tmp_path, limits=Limits(wall_s=60))
                times.append(time.perf_counter() - t0)
                assert r.ok and "GPU" in r.stdout, r.stderr
                assert (r.isolation is not None) == (mode == "auto")
            return sorted(times)[3]
        finally:
            set_settings(before)

    isolated, bare = median("auto"), median("off")
    print(f"sandbox overhead per job: {1000 * (isolated - bare):.1f} ms (isolated {1000 * isolated:.1f} ms, "
          f"bare {1000 * bare:.1f} ms)")
    assert isolated - bare < 0.5
