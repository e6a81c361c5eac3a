"""The host's facts (kernelscope.toolkit.probes): NVML's GPU list under CUDA_VISIBLE_DEVICES, the driver's
counter permission, the ncu and nsys probes' parsing and caching, and the nsys install layout."""

from __future__ import annotations

from pathlib import Path

from kernelscope.models import GpuInfo, ToolInfo
from kernelscope.toolkit import probes as host


def test_default_arch() -> None:
    assert host.default_arch([]) == "sm_90"
    assert host.default_arch([GpuInfo(index=0, name="A100", sm_arch="sm_80")]) == "sm_80"
    assert host.default_arch([GpuInfo(index=0, name="unknown")]) == "sm_90"


def test_nvidia_params_parsing(tmp_path: Path) -> None:
    p = tmp_path / "params"
    p.write_text("ResmanDebugLevel: 4294967295\nRmProfilingAdminOnly: 1\nEnableMSI: 1\n")
    assert host.parse_nvidia_params(p.read_text())["RmProfilingAdminOnly"] == "1"
    assert host.profiling_admin_only(p) is True
    p.write_text("RmProfilingAdminOnly: 0\n")
    assert host.profiling_admin_only(p) is False
    p.write_text("EnableMSI: 1\n")
    assert host.profiling_admin_only(p) is None
    assert host.profiling_admin_only(tmp_path / "absent") is None


def test_cap_sys_admin_parsing() -> None:
    assert host.has_cap_sys_admin("Name:\tpython\nCapEff:\t000001ffffffffff\n") is True
    assert host.has_cap_sys_admin("CapEff:\t00000000a80425fb\n") is False  # docker's default set
    assert host.has_cap_sys_admin("Name:\tpython\n") is None


def test_static_counter_access(tmp_path: Path) -> None:
    p = tmp_path / "params"
    p.write_text("RmProfilingAdminOnly: 1\n")
    ok, note = host.static_counter_access(p, "CapEff:\t0000000000000000\n")
    assert ok is False
    assert "NVreg_RestrictProfilingToAdminUsers=0" in note and "SYS_ADMIN" in note
    ok, _ = host.static_counter_access(p, "CapEff:\t000001ffffffffff\n")
    assert ok is True
    p.write_text("RmProfilingAdminOnly: 0\n")
    assert host.static_counter_access(p, "CapEff:\t0000000000000000\n")[0] is True
    assert host.static_counter_access(tmp_path / "absent")[0] is None


def test_ncu_probe_output_parsing() -> None:
    denied = (
        "==PROF== Connected to process 4242 (/tmp/probe)\n"
        "==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU Performance "
        "Counters on the target device 0.\n"
    )
    ok, note = host.parse_ncu_probe(denied, 0)
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
    assert host.parse_ncu_probe(read, 0)[0] is True
    assert host.parse_ncu_probe("==WARNING== No kernels were profiled.\n", 0)[0] is None
    assert host.parse_ncu_probe("", 1)[0] is None


def test_cuda_visible_devices() -> None:
    gpus = [
        GpuInfo(index=0, name="a", uuid="GPU-aaaa-1111"),
        GpuInfo(index=1, name="b", uuid="GPU-bbbb-2222"),
    ]
    assert host.parse_cuda_visible_devices(None, gpus) == (gpus, None)
    assert host.parse_cuda_visible_devices("1", gpus)[0] == [gpus[1]]
    assert host.parse_cuda_visible_devices("GPU-bbbb,0", gpus)[0] == [gpus[1], gpus[0]]
    visible, note = host.parse_cuda_visible_devices("0,7,1", gpus)  # CUDA stops at the invalid entry
    assert visible == [gpus[0]] and note and "hides 1" in note
    assert host.parse_cuda_visible_devices("", gpus)[0] == []
    assert host.parse_cuda_visible_devices("MIG-xyz", gpus)[0] == gpus


def test_nsys_layout_check(tmp_path: Path) -> None:
    elf = b"\x7fELF" + b"\0" * 60
    # Nsight Systems' own layout: <root>/target-linux-x64/nsys and <root>/host-linux-x64/QdstrmImporter
    full = tmp_path / "nsight-systems" / "2025.1"
    (full / "target-linux-x64").mkdir(parents=True)
    (full / "host-linux-x64").mkdir()
    (full / "target-linux-x64" / "nsys").write_bytes(elf)
    (full / "host-linux-x64" / "QdstrmImporter").write_bytes(elf)
    assert host.nsys_importer(full / "target-linux-x64" / "nsys") == full / "host-linux-x64" / "QdstrmImporter"
    assert host.static_nsys_reports(full / "target-linux-x64" / "nsys")[0] is None
    # The copy inside Nsight Compute: host/target-linux-x64/nsys, importer elsewhere.
    ncu = tmp_path / "nsight-compute" / "2025.3.1" / "host"
    (ncu / "target-linux-x64").mkdir(parents=True)
    (ncu / "linux-desktop-glibc_2_11_3-x64").mkdir()
    (ncu / "target-linux-x64" / "nsys").write_bytes(elf)
    (ncu / "linux-desktop-glibc_2_11_3-x64" / "QdstrmImporter").write_bytes(elf)
    ok, note = host.static_nsys_reports(ncu / "target-linux-x64" / "nsys")
    assert ok is False and "Importer error" in note
    # A wrapper script is not judged.
    script = tmp_path / "bin" / "nsys"
    script.parent.mkdir()
    script.write_text('#!/bin/sh\nexec /opt/nvidia/nsight-systems/bin/nsys "$@"\n')
    assert host.static_nsys_reports(script)[0] is None


def test_probe_runs_once_and_concurrent_callers_share_it() -> None:
    import threading

    calls: list[int] = []
    key = ("test-probe", str(id(calls)))

    def probe() -> tuple[bool | None, str]:
        calls.append(1)
        threading.Event().wait(0.2)
        return True, "probed"

    assert host._cached_probe(key, probe, run=False) is None
    results: list[object] = []
    threads = [threading.Thread(target=lambda: results.append(host._cached_probe(key, probe, True))) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [(True, "probed")] * 4 and len(calls) == 1
    assert host._cached_probe(key, probe, run=False) == (True, "probed")


def test_missing_nsys_points_to_cupti() -> None:
    nsys = ToolInfo(name="nsys", found=False, note="nsys not found; fix: install Nsight Systems")
    ok, note = host.check_nsys_reports(nsys, [])
    assert ok is False and "CUPTI" in note
