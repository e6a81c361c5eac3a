"""The CUPTI collector's profiler-range gate (KERNELSCOPE_METRICS_GATED) without a GPU: the collector's own
callback and exit handler, compiled into a small program with this machine's nvcc and CUPTI, are fed the
driver's and runtime's callbacks in the order the driver makes them (torch.cuda.profiler.start() is the
runtime's cudaProfilerStart, which calls the driver's cuProfilerStart), and their end line is read back by
the Python reader as analyze reads it."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from _cupti import build_with_cupti

from kernelscope.config import Settings
from kernelscope.measure import cupti
from kernelscope.measure.collector import collector_env, load_collected
from kernelscope.measure.cupti import CuptiPaths, build_metrics_collector

PROGRAM = r"""
#include "cupti_metrics.cpp"
#include <cstring>

CUpti_CallbackData g_info{};
cuLaunchKernel_params g_params{};

void call(CUpti_CallbackDomain dom, CUpti_CallbackId id, CUpti_ApiCallbackSite site) {
    CUpti_CallbackData c{};
    c.callbackSite = site;
    on_callback(nullptr, dom, id, &c);
}
void launch() {  // a kernel launch as the driver reports it: API_ENTER, then API_EXIT
    for (auto site : {CUPTI_API_ENTER, CUPTI_API_EXIT}) {
        g_info.callbackSite = site;
        on_callback(nullptr, CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &g_info);
    }
}
void start() {  // cudaProfilerStart calls cuProfilerStart: both report, nested
    call(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaProfilerStart_v4000, CUPTI_API_ENTER);
    call(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuProfilerStart, CUPTI_API_ENTER);
    call(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuProfilerStart, CUPTI_API_EXIT);
    call(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaProfilerStart_v4000, CUPTI_API_EXIT);
}
void stop_runtime() {
    call(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaProfilerStop_v4000, CUPTI_API_ENTER);
    call(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuProfilerStop, CUPTI_API_ENTER);
    call(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuProfilerStop, CUPTI_API_EXIT);
    call(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaProfilerStop_v4000, CUPTI_API_EXIT);
}
void stop_driver() {  // cuProfilerStop called directly (a program on the driver API)
    call(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuProfilerStop, CUPTI_API_ENTER);
    call(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuProfilerStop, CUPTI_API_EXIT);
}

int main(int argc, char** argv) {
    const char* scenario = argc > 1 ? argv[1] : "";
    g_pid = getpid();
    g_out = stdout;
    g_gated = std::strcmp(argv[2], "1") == 0;
    g_max = 0;  // count the launches, profile none (no GPU here)
    g_params.gridDimX = 4; g_params.gridDimY = 1; g_params.gridDimZ = 1;
    g_params.blockDimX = 128; g_params.blockDimY = 1; g_params.blockDimZ = 1;
    g_info.functionParams = &g_params;
    g_info.symbolName = "candidate_kernel";
    if (std::strcmp(scenario, "range") == 0) {
        launch();  // the harness' and the reference's work, before the range
        launch();
        start();
        launch();  // the candidate's profiled calls
        launch();
        launch();
        stop_runtime();
        launch();  // after the range
        start();
        launch();
        stop_driver();
    }
    // "never": the harness stopped before its profiled calls; launches, but the range never opened
    if (std::strcmp(scenario, "never") == 0) { launch(); launch(); }
    at_exit();
    return 0;
}
"""


@pytest.fixture(scope="module")
def program(cupti_build_paths: CuptiPaths, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_with_cupti(cupti_build_paths, tmp_path_factory.mktemp("gate"), "gate", PROGRAM,
                            cupti.METRICS_SOURCE.parent, libs=("-ldl",))


def _end(program: Path, tmp: Path, scenario: str, gated: bool) -> Path:
    r = subprocess.run([str(program), scenario, "1" if gated else "0"], capture_output=True, timeout=60, cwd=tmp)
    assert r.returncode == 0, r.stderr
    (tmp / "metrics-1.jsonl").write_bytes(r.stdout)
    return tmp


def test_gated_counts_only_the_launches_inside_the_profiler_range(program: Path, tmp_path: Path) -> None:
    got = load_collected(_end(program, tmp_path, "range", gated=True))
    assert got.ended and got.gated and got.gate_opened == 2  # the runtime's start and the driver's open it once
    assert got.launches_seen == 4  # three in the first range, one in the second; none before, between or after
    [cfg] = got.configs
    assert (cfg.name, cfg.grid, cfg.block, cfg.launches) == ("candidate_kernel", (4, 1, 1), (128, 1, 1), 4)
    assert not got.notes and not got.errors


def test_ungated_counts_every_launch_and_ignores_the_range(program: Path, tmp_path: Path) -> None:
    got = load_collected(_end(program, tmp_path, "range", gated=False))
    assert got.ended and not got.gated and got.gate_opened == 0 and got.launches_seen == 7


def test_a_range_that_never_opened_is_told_apart(program: Path, tmp_path: Path) -> None:
    got = load_collected(_end(program, tmp_path, "never", gated=True))
    assert got.ended and got.gated and got.gate_opened == 0 and got.launches_seen == 0 and not got.configs


def test_the_collector_builds_with_the_gate(cupti_build_paths: CuptiPaths, tmp_path: Path) -> None:
    """The injection library itself (the project's build) compiles, links and loads here."""
    lib = build_metrics_collector(Settings(home=tmp_path, allowed_roots=[tmp_path]))
    assert lib.read_bytes()[:4] == b"\x7fELF"


def test_the_gate_is_set_only_when_asked(tmp_path: Path) -> None:
    lib, out = tmp_path / "lib.so", tmp_path / "out"
    assert collector_env(lib, out, ["m"], gated=True)["KERNELSCOPE_METRICS_GATED"] == "1"
    assert "KERNELSCOPE_METRICS_GATED" not in collector_env(lib, out, ["m"])


def test_a_runner_gets_the_library_inside_the_workspace(cupti_build_paths: CuptiPaths, tmp_path: Path) -> None:
    """analyze's eval jobs run on the evaluation fork server, whose jobs see their workspace and not the
    server's cache folders: the injection library is copied into the workspace and the job's environment
    names the copy. The runner here is a real process given that environment; it writes one launch line as
    the collector would, which the reader then finds."""
    import sys

    from kernelscope.measure.collector import run_collector
    from kernelscope.sandbox.process import Limits, ProcessResult, run_process

    s = Settings(home=tmp_path / "home", allowed_roots=[tmp_path])
    ws = tmp_path / "ws"
    ws.mkdir()
    seen: dict[str, object] = {}
    script = ("import json, os, pathlib; e = os.environ; "
              "pathlib.Path(e['KERNELSCOPE_METRICS_DIR'], 'metrics-1.jsonl').write_text("
              "json.dumps({'t': 'end', 'launches': 0, 'gated': True, 'gate_opened': 1}) + '\\n')")

    def runner(env: dict[str, str], limits: Limits) -> ProcessResult:
        seen.update(env=env, limits=limits)
        return run_process([sys.executable, "-c", script], cwd=ws, env=env, limits=limits)

    proc, got = run_collector(["unused"], ws, {}, ["m"], 60, s, None, gated=True, runner=runner)
    env = seen["env"]
    assert isinstance(env, dict) and proc.ok, proc.stderr
    lib = Path(env["CUDA_INJECTION64_PATH"])
    assert lib.parent == ws / "collector" and lib.read_bytes()[:4] == b"\x7fELF"
    assert env["KERNELSCOPE_METRICS_GATED"] == "1" and Path(env["KERNELSCOPE_METRICS_DIR"]) == ws / "metrics"
    assert got.ended and got.gated and got.gate_opened == 1 and got.launches_seen == 0
