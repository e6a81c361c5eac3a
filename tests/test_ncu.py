"""Parsing a real Nsight Compute capture from the H100 (tests/fixtures/ncu/, see regenerate.sh)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelscope.errors import InputError
from kernelscope.measure.ncu import load_profile

FIX = Path(__file__).parent / "fixtures" / "ncu"


@pytest.fixture(scope="module")
def profile():  # type: ignore[no-untyped-def]
    return load_profile(FIX / "three-kernels.ncu-rep")


def by_name(profile, prefix: str):  # type: ignore[no-untyped-def]
    (k,) = [k for k in profile.kernels if k.name.startswith(prefix)]
    return k


def test_kernels_and_launch_configuration(profile) -> None:  # type: ignore[no-untyped-def]
    assert [k.mangled_name for k in profile.kernels] == ["_Z14copy_coalescedPKfPfi", "_Z12copy_stridedPKfPfi",
                                                         "_Z9fma_heavyPfi"]
    k = by_name(profile, "copy_coalesced")
    assert k.device == "NVIDIA H100 80GB HBM3"
    assert (k.grid_size, k.block_size) == (262144, 256)  # n = 2^26, 256 threads per block
    assert k.registers_per_thread and k.registers_per_thread > 0
    assert k.metrics["gpu__time_duration.sum"].unit == "ns"


def test_coalesced_vs_strided_access(profile) -> None:  # type: ignore[no-untyped-def]
    good, bad = by_name(profile, "copy_coalesced"), by_name(profile, "copy_strided")
    assert good.global_load_sectors_per_request == 4.0  # 32 threads x 4 B = 4 sectors: ideal
    assert bad.global_load_sectors_per_request == 32.0  # every thread its own sector
    assert bad.duration_ns > 10 * good.duration_ns
    assert bad.sm_throughput_pct < 5 and bad.memory_throughput_pct > 50
    assert next(iter(bad.stall_reasons)) == "long_scoreboard"


def test_compute_bound_kernel(profile) -> None:  # type: ignore[no-untyped-def]
    k = by_name(profile, "fma_heavy")
    assert k.sm_throughput_pct > 90 and k.memory_throughput_pct < 5
    assert k.global_load_sectors_per_request is None  # no global loads: missing, not 0
    assert k.metrics["l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum"].value in (0, 0.0, None)


def test_ncu_rule_results_are_kept(profile) -> None:  # type: ignore[no-untyped-def]
    k = by_name(profile, "copy_strided")
    sol = [r for r in k.ncu_rules if r.rule == "SOLBottleneck"]
    assert sol and sol[0].title == "High Memory Throughput" and sol[0].section == "SpeedOfLight"
    assert "Memory is more heavily utilized than Compute" in sol[0].message and sol[0].type == "optimization"
    assert {"CPIStall", "AchievedOccupancy"} <= {r.rule for r in k.ncu_rules}


def test_source_line_counters(profile) -> None:  # type: ignore[no-untyped-def]
    k = by_name(profile, "copy_strided")
    assert k.source_lines, "the capture was built with -lineinfo and --import-source"
    top = k.source_lines[0]
    assert top.file.endswith("k.cu") and top.line == 3 and top.code and "copy_strided" in top.code
    assert top.counters.get("smsp__pcsamp_sample_count", 0) > 0


def test_missing_metric_is_none_not_zero() -> None:
    import ncu_report

    from kernelscope.measure.ncu import _value

    action = ncu_report.load_report(str(FIX / "three-kernels.ncu-rep")).range_by_idx(0).action_by_idx(0)
    assert _value(action, "no_such__metric.sum").value is None
    assert _value(action, "launch__shared_mem_per_block_dynamic").value == 0  # captured zero stays 0


@pytest.mark.parametrize("content", [b"", b"not a report at all" * 100])
def test_garbage_reports_are_refused(tmp_path: Path, content: bytes) -> None:
    p = tmp_path / "bad.ncu-rep"
    p.write_bytes(content)
    with pytest.raises(InputError):
        load_profile(p)
