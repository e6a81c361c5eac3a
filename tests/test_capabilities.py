"""The capability report: real NVML, real tools, real probes (no stand-ins for NVML or the tools).

Tests marked ``nogpu`` describe a host without an NVIDIA GPU and are skipped where one is present;
``gpu`` tests need the H100 of the device machine (the suite's conftest skips them elsewhere)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelscope.errors import NotAvailable
from kernelscope.models import CapabilityReport, GpuInfo, ToolInfo
from kernelscope.toolchain import TOOL_NAMES
from kernelscope.tools import capabilities as caps

HAS_GPU = bool(caps.gpu_inventory()[0])
nogpu = pytest.mark.skipif(HAS_GPU, reason="describes a host without an NVIDIA GPU; this one has one")
GiB = 2**30


@pytest.fixture(scope="module")
def report() -> CapabilityReport:
    return caps.capability_report(probe=True)


def _tool(report: CapabilityReport, name: str) -> ToolInfo:
    return next(t for t in report.tools if t.name == name)


# ------------------------------------------------------------------------- any host
def test_report_lists_every_tool_and_feature(report: CapabilityReport) -> None:
    assert [t.name for t in report.tools] == list(TOOL_NAMES)
    assert set(report.can) == set(caps.FEATURES)
    assert report.kernelscope_version
    assert report.python.count(".") == 2
    assert report.default_arch.startswith("sm_")


def test_every_unavailable_feature_has_a_reason_with_a_fix(report: CapabilityReport) -> None:
    for feature, ok in report.can.items():
        if ok:
            assert feature not in report.reasons
            continue
        why, sep, fix = report.reasons[feature].partition(". Fix: ")
        assert sep, report.reasons[feature]
        assert why.strip() and fix.strip(), report.reasons[feature]


def test_nvcc_found_and_compile_available(report: CapabilityReport) -> None:
    nvcc = _tool(report, "nvcc")
    assert nvcc.found and nvcc.usable, nvcc.note
    assert nvcc.version and nvcc.version.startswith("13"), nvcc.version
    assert report.can["compile"] is True
    caps.require_capability("compile", report)


def test_disassemblers_found(report: CapabilityReport) -> None:
    for name in ("cuobjdump", "nvdisasm"):
        t = _tool(report, name)
        assert t.found and t.usable, t.note
        assert t.origin in ("nvidia-wheel", "PATH"), t.origin
        assert t.path and Path(t.path).is_file()
    assert report.can["sass"] is True


def test_missing_tools_say_how_to_get_them(report: CapabilityReport) -> None:
    for t in report.tools:
        if not t.found:
            assert t.note and "fix" in t.note.lower(), t


def test_report_round_trips_as_json(report: CapabilityReport) -> None:
    assert CapabilityReport.model_validate_json(report.model_dump_json()) == report


def test_render_is_short_and_names_the_tools(report: CapabilityReport) -> None:
    text = caps.render_report(report)
    assert len(text.splitlines()) <= 60
    assert all(len(line) <= 1100 for line in text.splitlines())
    assert "nvcc" in text and "Default arch" in text
    for feature, ok in report.can.items():
        if not ok:
            assert feature in text


def test_unknown_feature_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="unknown feature"):
        caps.require_capability("teleport")


def test_quick_report_skips_probes_but_agrees_on_static_facts(report: CapabilityReport) -> None:
    quick = caps.capability_report(probe=False)
    assert [g.uuid for g in quick.gpus] == [g.uuid for g in report.gpus]
    assert quick.default_arch == report.default_arch
    assert quick.can["compile"] == report.can["compile"]


# ------------------------------------------------------------------------- host without a GPU
@nogpu
def test_no_gpu_is_reported_with_a_clear_note(report: CapabilityReport) -> None:
    assert report.gpus == []
    assert report.gpu_note and "no NVIDIA" in report.gpu_note and "NVML" in report.gpu_note
    assert report.default_arch == "sm_90"
    assert report.counters_readable is None and report.counters_note


@nogpu
def test_run_needs_a_gpu(report: CapabilityReport) -> None:
    assert report.can["run"] is False
    assert "GPU" in report.reasons["run"]
    for feature in ("energy", "ncu_profile", "nsys_trace", "cupti_trace", "sanitizer"):
        assert report.can[feature] is False
        assert "GPU" in report.reasons[feature]


@nogpu
def test_require_capability_explains_and_fixes() -> None:
    with pytest.raises(NotAvailable) as info:
        caps.require_capability("ncu_profile")
    err = info.value
    assert "GPU" in err.why
    assert err.fix.strip()
    assert "not available here, because" in str(err) and "Fix:" in str(err)


@nogpu
def test_render_mentions_nvcc_and_the_missing_gpu(report: CapabilityReport) -> None:
    text = caps.render_report(report)
    assert "nvcc 13" in text
    assert "GPU: none" in text
    assert "run:" in text


# ------------------------------------------------------------------------- pure helpers
def test_default_arch() -> None:
    assert caps.default_arch([]) == "sm_90"
    assert caps.default_arch([GpuInfo(index=0, name="A100", sm_arch="sm_80")]) == "sm_80"
    assert caps.default_arch([GpuInfo(index=0, name="unknown")]) == "sm_90"


def test_nvidia_params_parsing(tmp_path: Path) -> None:
    p = tmp_path / "params"
    p.write_text("ResmanDebugLevel: 4294967295\nRmProfilingAdminOnly: 1\nEnableMSI: 1\n")
    assert caps.parse_nvidia_params(p.read_text())["RmProfilingAdminOnly"] == "1"
    assert caps.profiling_admin_only(p) is True
    p.write_text("RmProfilingAdminOnly: 0\n")
    assert caps.profiling_admin_only(p) is False
    p.write_text("EnableMSI: 1\n")
    assert caps.profiling_admin_only(p) is None
    assert caps.profiling_admin_only(tmp_path / "absent") is None


def test_cap_sys_admin_parsing() -> None:
    assert caps.has_cap_sys_admin("Name:\tpython\nCapEff:\t000001ffffffffff\n") is True
    assert caps.has_cap_sys_admin("CapEff:\t00000000a80425fb\n") is False  # docker's default set
    assert caps.has_cap_sys_admin("Name:\tpython\n") is None


def test_static_counter_access(tmp_path: Path) -> None:
    p = tmp_path / "params"
    p.write_text("RmProfilingAdminOnly: 1\n")
    ok, note = caps.static_counter_access(p, "CapEff:\t0000000000000000\n")
    assert ok is False
    assert "NVreg_RestrictProfilingToAdminUsers=0" in note and "SYS_ADMIN" in note
    ok, _ = caps.static_counter_access(p, "CapEff:\t000001ffffffffff\n")
    assert ok is True
    p.write_text("RmProfilingAdminOnly: 0\n")
    assert caps.static_counter_access(p, "CapEff:\t0000000000000000\n")[0] is True
    assert caps.static_counter_access(tmp_path / "absent")[0] is None


def test_ncu_probe_output_parsing() -> None:
    denied = (
        "==PROF== Connected to process 4242 (/tmp/probe)\n"
        "==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU Performance "
        "Counters on the target device 0.\n"
    )
    ok, note = caps.parse_ncu_probe(denied, 0)
    assert ok is False and "ERR_NVGPUCTRPERM" in note and "modprobe.d" in note
    read = (  # ncu 2025.3.1 on an H100, for the probe program
        "==WARNING== Note: Running with unmodified GPU clocks. If not controlled otherwise, profiling "
        "results may be inconsistent.\n"
        "==PROF== Connected to process 671 (/tmp/p/probe)\n"
        '==PROF== Profiling "kernelscope_probe(float *)" - 0 (1/1): 0%....50%....100% - 1 pass\n'
        "kernelscope probe ok\n"
        "==PROF== Disconnected from process 671\n"
        "[671] probe@127.0.0.1\n"
        "  kernelscope_probe(float *) (1, 1, 1)x(32, 1, 1), Context 1, Stream 7, Device 0, CC 9.0\n"
        "    Section: Command line profiler metrics\n"
        "    ---------------------- ----------- ------------\n"
        "    Metric Name            Metric Unit Metric Value\n"
        "    ---------------------- ----------- ------------\n"
        "    sm__cycles_elapsed.avg       cycle     4,545.17\n"
        "    ---------------------- ----------- ------------\n"
    )
    assert caps.parse_ncu_probe(read, 0)[0] is True
    assert caps.parse_ncu_probe("==WARNING== No kernels were profiled.\n", 0)[0] is None
    assert caps.parse_ncu_probe("", 1)[0] is None


def test_cuda_visible_devices() -> None:
    gpus = [
        GpuInfo(index=0, name="a", uuid="GPU-aaaa-1111"),
        GpuInfo(index=1, name="b", uuid="GPU-bbbb-2222"),
    ]
    assert caps.parse_cuda_visible_devices(None, gpus) == (gpus, None)
    assert caps.parse_cuda_visible_devices("1", gpus)[0] == [gpus[1]]
    assert caps.parse_cuda_visible_devices("GPU-bbbb,0", gpus)[0] == [gpus[1], gpus[0]]
    visible, note = caps.parse_cuda_visible_devices("0,7,1", gpus)  # CUDA stops at the invalid entry
    assert visible == [gpus[0]] and note and "hides 1" in note
    assert caps.parse_cuda_visible_devices("", gpus)[0] == []
    assert caps.parse_cuda_visible_devices("MIG-xyz", gpus)[0] == gpus


def test_nsys_layout_check(tmp_path: Path) -> None:
    elf = b"\x7fELF" + b"\0" * 60
    # Nsight Systems' own layout: <root>/target-linux-x64/nsys and <root>/host-linux-x64/QdstrmImporter
    full = tmp_path / "nsight-systems" / "2025.1"
    (full / "target-linux-x64").mkdir(parents=True)
    (full / "host-linux-x64").mkdir()
    (full / "target-linux-x64" / "nsys").write_bytes(elf)
    (full / "host-linux-x64" / "QdstrmImporter").write_bytes(elf)
    assert caps.nsys_importer(full / "target-linux-x64" / "nsys") == full / "host-linux-x64" / "QdstrmImporter"
    assert caps.static_nsys_reports(full / "target-linux-x64" / "nsys")[0] is None
    # The copy inside Nsight Compute: host/target-linux-x64/nsys, importer elsewhere.
    ncu = tmp_path / "nsight-compute" / "2025.3.1" / "host"
    (ncu / "target-linux-x64").mkdir(parents=True)
    (ncu / "linux-desktop-glibc_2_11_3-x64").mkdir()
    (ncu / "target-linux-x64" / "nsys").write_bytes(elf)
    (ncu / "linux-desktop-glibc_2_11_3-x64" / "QdstrmImporter").write_bytes(elf)
    ok, note = caps.static_nsys_reports(ncu / "target-linux-x64" / "nsys")
    assert ok is False and "Importer error" in note
    # A wrapper script is not judged.
    script = tmp_path / "bin" / "nsys"
    script.parent.mkdir()
    script.write_text('#!/bin/sh\nexec /opt/nvidia/nsight-systems/bin/nsys "$@"\n')
    assert caps.static_nsys_reports(script)[0] is None


# ------------------------------------------------------------------------- the H100 device
@pytest.mark.gpu
def test_h100_is_seen(report: CapabilityReport) -> None:
    assert report.gpus, report.gpu_note
    g = report.gpus[0]
    assert "H100" in g.name
    assert g.compute_capability == "9.0" and g.sm_arch == "sm_90"
    assert g.memory_total_bytes is not None and g.memory_total_bytes > 70 * GiB
    assert g.uuid and g.uuid.startswith("GPU-")
    assert g.sm_count is None or 100 <= g.sm_count <= 144
    assert g.power_limit_w is not None and g.power_limit_w > 100
    assert g.energy_counter is True
    assert report.default_arch == "sm_90"
    assert report.driver_version and report.cuda_driver_version


@pytest.mark.gpu
def test_h100_counters_and_ncu(report: CapabilityReport) -> None:
    ncu = _tool(report, "ncu")
    assert ncu.found and ncu.usable, ncu.note
    assert report.counters_readable is True, report.counters_note
    assert report.can["ncu_profile"] is True, report.reasons.get("ncu_profile")
    caps.require_capability("ncu_profile")


@pytest.mark.gpu
def test_h100_nsys_decided(report: CapabilityReport) -> None:
    assert report.nsys_can_report is not None, report.nsys_note
    assert report.nsys_note
    if report.nsys_can_report is False:
        assert report.can["nsys_trace"] is False
        assert "CUPTI" in report.reasons["nsys_trace"] or "CUPTI" in report.nsys_note


@pytest.mark.gpu
def test_h100_probe_results_are_cached(report: CapabilityReport) -> None:
    ncu = _tool(report, "ncu")
    assert caps.check_counter_access(ncu, report.gpus, probe=False) == (
        report.counters_readable,
        report.counters_note,
    )


def test_probe_runs_once_and_concurrent_callers_share_it() -> None:
    import threading

    calls: list[int] = []
    key = ("test-probe", str(id(calls)))

    def probe() -> tuple[bool | None, str]:
        calls.append(1)
        threading.Event().wait(0.2)
        return True, "probed"

    assert caps._cached_probe(key, probe, run=False) is None
    results: list[object] = []
    threads = [threading.Thread(target=lambda: results.append(caps._cached_probe(key, probe, True))) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [(True, "probed")] * 4 and len(calls) == 1
    assert caps._cached_probe(key, probe, run=False) == (True, "probed")


def test_missing_nsys_points_to_cupti() -> None:
    nsys = ToolInfo(name="nsys", found=False, note="nsys not found; fix: install Nsight Systems")
    ok, note = caps.check_nsys_reports(nsys, [])
    assert ok is False and "CUPTI" in note
