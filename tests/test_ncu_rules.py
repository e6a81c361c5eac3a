"""Rules over the real H100 capture: the strided copy is diagnosed, its coalesced twin is not."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelscope.heuristics import REGISTRY, load_all, run_rules
from kernelscope.measure.ncu import load_profile
from kernelscope.models import KernelProfile

FIX = Path(__file__).parent / "fixtures" / "ncu"
load_all()


@pytest.fixture(scope="module")
def kernels() -> dict[str, KernelProfile]:
    return {k.name.split("(")[0]: k for k in load_profile(FIX / "three-kernels.ncu-rep").kernels}


def rules_for(k: KernelProfile) -> dict[str, object]:
    return {f.rule: f for f in run_rules("ncu", k)}


def test_every_rule_is_registered_with_thresholds() -> None:
    for rid in ("memory.uncoalesced-global-access", "memory.dram-saturated", "stalls.dominant-stall-reason",
                "occupancy.low-theoretical", "occupancy.achieved-below-theoretical"):
        r = REGISTRY[rid]
        assert r.scope == "ncu" and r.thresholds and r.description


def test_strided_copy_is_uncoalesced_at_its_source_line(kernels: dict[str, KernelProfile]) -> None:
    f = rules_for(kernels["copy_strided"])["memory.uncoalesced-global-access"]
    assert f.severity == "high"  # type: ignore[attr-defined]
    ev = f.evidence[0]  # type: ignore[attr-defined]
    assert ev.metric == "excessive_global_sectors_pct" and ev.value > 80
    assert ev.line and ev.line.startswith("/tmp/k.cu:3") and "copy_strided" in ev.line
    assert f.fixes and "consecutive threads" in f.fixes[0].action  # type: ignore[attr-defined]


def test_coalesced_twin_does_not_trigger(kernels: dict[str, KernelProfile]) -> None:
    assert "memory.uncoalesced-global-access" not in rules_for(kernels["copy_coalesced"])


def test_memory_latency_stall_is_named(kernels: dict[str, KernelProfile]) -> None:
    f = rules_for(kernels["copy_coalesced"])["stalls.dominant-stall-reason"]
    assert "long_scoreboard" in f.diagnosis and f.evidence[1].value > 80  # type: ignore[attr-defined]


def test_compute_bound_kernel_has_no_memory_findings(kernels: dict[str, KernelProfile]) -> None:
    found = rules_for(kernels["fma_heavy"])
    assert not any(r.startswith("memory.") for r in found)


def test_thresholds_are_overridable(kernels: dict[str, KernelProfile]) -> None:
    k = kernels["copy_coalesced"]
    assert "memory.dram-saturated" not in rules_for(k)  # 70% < 80% default
    found = run_rules("ncu", k, overrides={"memory.dram-saturated": {"memory_throughput_pct": 60.0}})
    assert any(f.rule == "memory.dram-saturated" for f in found)
