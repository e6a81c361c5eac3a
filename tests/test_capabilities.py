"""The capability report: real NVML, real tools, real probes (no stand-ins for NVML or the tools).

Tests marked ``nogpu`` describe a host without an NVIDIA GPU and are skipped where one is present;
``gpu`` tests need the H100 of the device machine (the suite's conftest skips them elsewhere)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelscope.errors import NotAvailable
from kernelscope.models import CapabilityReport, CutlassInfo, ToolInfo
from kernelscope.toolkit.toolchain import TOOL_NAMES
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


# ------------------------------------------------------------------------- CPU runs (issue 25)
def _assess_without_gpu() -> dict[str, caps._Verdict]:
    tools = {name: ToolInfo(name=name, found=True, usable=True, path=f"/bin/{name}") for name in TOOL_NAMES}
    return caps._assess(tools, [], "no NVIDIA driver/GPU found (NVML: gone)", None, "no GPU", None, "no GPU",
                        CutlassInfo(found=True))


def test_without_a_gpu_eval_runs_work_on_the_cpu_with_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(caps, "_module_present", lambda name: name == "torch")
    v = _assess_without_gpu()
    assert v["run_cpu"].ok and not v["run"].ok
    reason = caps._reason(v["run"])
    assert "GPU" in reason and "device='cpu'" in reason and "need a GPU" in reason
    assert "device='cpu'" not in caps._reason(v["ncu_profile"])


def test_without_torch_no_run_works(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(caps, "_module_present", lambda name: False)
    v = _assess_without_gpu()
    assert not v["run_cpu"].ok and not v["run"].ok
    assert "torch" in caps._reason(v["run_cpu"]) and "device='cpu'" not in caps._reason(v["run"])


@nogpu
def test_doctor_says_cpu_runs_work_here(report: CapabilityReport) -> None:
    pytest.importorskip("torch")
    assert report.can["run_cpu"] is True
    assert "device='cpu'" in report.reasons["run"]
    assert "run_cpu" in caps.render_report(report).split("Works here: ")[1].splitlines()[0]


# ------------------------------------------------------------------------- the Hopper device
@pytest.mark.gpu
def test_the_hopper_gpu_is_seen(report: CapabilityReport) -> None:
    """The device machine lends an H100, at times an H200: both are sm_90 Hopper parts."""
    assert report.gpus, report.gpu_note
    g = report.gpus[0]
    assert "H100" in g.name or "H200" in g.name, g.name
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


