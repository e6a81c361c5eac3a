"""ncu-profile and analyze without a GPU: request validation, the stage-2 plan, profile merging, the
rule registry's contract, and the explained answers when ncu or the GPU is missing."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from kernelscope.errors import InputError, KernelscopeError
from kernelscope.heuristics import REGISTRY, load_all, pipeline
from kernelscope.measure import capture
from kernelscope.measure.ncu import load_profile
from kernelscope.tools import analyze as prof

FIX = Path(__file__).parent / "fixtures" / "ncu"
TOOLS_DIR = Path(prof.__file__).parent
load_all()


def test_tool_modules_do_not_shadow_the_standard_library() -> None:
    # the eval harness runs as a script from tools/, so tools/<name>.py shadows a stdlib <name>
    clash = {p.stem for p in TOOLS_DIR.glob("*.py")} & set(sys.stdlib_module_names)
    assert not clash, f"tools/ modules shadow the standard library: {clash}"


def test_at_least_twenty_rules_each_a_complete_plugin() -> None:
    assert len(REGISTRY) >= 20
    families = {r.family for r in REGISTRY.values()}
    assert {"memory", "occupancy", "stalls", "launch", "control", "compute", "tensor", "latency"} <= families
    for r in REGISTRY.values():
        assert r.id.count(".") == 1 and r.description and r.fn is not None
        assert r.scope in ("ncu", "sass", "ptxas", "trace")
        for s in r.supersedes:
            assert s in REGISTRY, f"{r.id} supersedes unknown rule {s}"
        for m in r.metrics:
            assert capture.METRIC_RE.match(m), m


def test_stage2_plan_follows_the_class() -> None:
    mem_secs, _, mem_metrics = pipeline.stage2_plan(["memory-bound"])
    assert "MemoryWorkloadAnalysis" in mem_secs and "SourceCounters" in mem_secs
    assert "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum" in mem_metrics
    cmp_secs, cmp_fams, cmp_metrics = pipeline.stage2_plan(["compute-bound"])
    assert "InstructionStats" in cmp_secs and "tensor" in cmp_fams
    assert "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active" in cmp_metrics
    assert "MemoryWorkloadAnalysis_Tables" not in cmp_secs
    lat_secs, lat_fams, _ = pipeline.stage2_plan(["latency-bound"])
    assert "WarpStateStats" in lat_secs and "latency" in lat_fams
    both, _, _ = pipeline.stage2_plan(["memory-bound", "compute-bound"])
    assert set(mem_secs) | set(cmp_secs) == set(both) and len(both) == len(set(both))
    for cls in pipeline.STAGE2:
        assert pipeline.stage2_plan([cls])[0]


def test_merge_prefers_the_deep_capture() -> None:
    k = load_profile(FIX / "three-kernels.ncu-rep").kernels[0]
    light = k.model_copy(update={"stall_reasons": {}, "source_lines": [], "duration_ns": 1.0})
    merged = pipeline.merge_profiles(light, k)
    assert merged.stall_reasons == k.stall_reasons and merged.source_lines == k.source_lines
    assert merged.duration_ns == k.duration_ns and merged.id == light.id
    assert pipeline.merge_profiles(light, None) is light


@pytest.mark.parametrize(("opts", "needle"), [
    ({"sections": ["SpeedOfLight; rm -rf /"]}, "section identifiers"),
    ({"metrics": ["dram__bytes_read.sum,--foo"]}, "metric names"),
    ({"kernel_regex": "([unclosed"}, "not a valid regular expression"),
])
def test_capture_options_are_validated(opts: dict, needle: str) -> None:
    with pytest.raises(InputError, match=needle):
        capture.validate_options(prof.NcuOptions(**opts))


def _ncu_here() -> bool:
    from kernelscope.toolkit.toolchain import ToolMissing, require

    try:
        require("ncu")
    except ToolMissing:
        return False
    return True


@pytest.mark.skipif(_ncu_here(), reason="ncu is installed here; the missing-ncu answer is for hosts without it")
def test_missing_ncu_is_an_explained_error() -> None:
    """Where Nsight Compute must measure (light='ncu' here; eval mode, or no CUPTI) and is missing."""
    with pytest.raises(KernelscopeError, match="ncu") as e:
        prof.analyze(prof.AnalyzeRequest(artifact_id="0" * 24, light="ncu"))
    assert "Nsight Compute" in str(e.value)


def test_program_and_eval_targets_are_exclusive(tmp_path: Path) -> None:
    t = prof.ProfileTarget(artifact_id="0" * 24, candidate="class ModelNew: pass")
    with pytest.raises(InputError, match="not both"):
        prof.prepare_target(t, tmp_path, __import__("kernelscope.config").config.get_settings())


def test_no_kernels_log_is_explained_with_the_launched_names() -> None:
    """ncu's own output (captured on the H100) for a filter that matches nothing."""
    log = (FIX / "logs" / "no-kernels.log").read_text()
    prep = capture.Prepared(argv=["program"], display="program")
    status, expl, fixes = capture.diagnose_capture(False, 0, None, log, "", False, prep, 60)
    assert status == "no-kernels"
    assert "coalesced_copy" in expl and "strided_copy" in expl
    assert any("kernel_regex" in f for f in fixes)


@pytest.mark.parametrize(("args", "status"), [
    ((False, None, None, "==ERROR== ERR_NVGPUCTRPERM - The user does not have permission", "", False),
     "counters-not-permitted"),
    ((True, None, "SIGKILL", "", "", False), "timed-out"),
    ((False, None, "SIGSEGV", "", "", False), "program-failed"),
    ((False, 1, None, "==ERROR== something else", "", False), "ncu-error"),
    ((False, 3, None, "", "", True), "ok"),
])
def test_capture_failures_are_explained(args: tuple, status: str) -> None:
    prep = capture.Prepared(argv=["program"], display="program")
    got, expl, fixes = capture.diagnose_capture(*args, prep, 60)
    assert got == status
    if status != "ok":
        assert expl and fixes
    else:
        assert "status 3" in (expl or "")


def test_threshold_overrides_are_checked_by_name() -> None:
    prof.check_overrides({"launch.tiny-grid": {"max_sm_fraction": 0.25}})
    with pytest.raises(InputError, match=r"No rule 'launch\.nope'"):
        prof.check_overrides({"launch.nope": {"x": 1.0}})
    with pytest.raises(InputError, match="has no threshold bogus; it has: high_sm_fraction"):
        prof.check_overrides({"launch.tiny-grid": {"bogus": 1.0}})


def test_report_artifacts_feed_the_recorded_report_tools() -> None:
    """A report stored the way analyze/ncu_profile store theirs is usable by id in classify and compare."""
    from kernelscope.tools.classify import classify_report
    from kernelscope.tools.compare import compare_profiles

    rid = capture.store_report(FIX / "three-kernels.ncu-rep", target="test", stage="light")
    assert rid == capture.store_report(FIX / "three-kernels.ncu-rep", target="test", stage="light")  # by content
    res = classify_report(rid, kernel="copy_strided")
    assert [k.bottleneck.cls for k in res.kernels] == ["memory-bound"]
    cmp = compare_profiles(rid, rid, before_kernel="copy_strided", after_kernel="copy_coalesced")
    assert cmp.speedup and cmp.speedup > 5
    with pytest.raises(KernelscopeError, match=r"(?i)no artifact|not found"):
        classify_report("f" * 24)
