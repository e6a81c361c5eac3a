"""The rule registry: every rule is registered once, with a family, a scope, a description and its
default thresholds, and thresholds can be overridden per rule."""

from __future__ import annotations

from pathlib import Path

from kernelscope.heuristics import REGISTRY, load_all
from kernelscope.heuristics.instructions import sass_findings
from kernelscope.tools.sass import sass_for_cubin_bytes

FIX = Path(__file__).parent / "fixtures" / "sass"


def test_registry_is_complete() -> None:
    load_all()
    scopes = {r.scope for r in REGISTRY.values()}
    assert {"ptxas", "sass", "ncu", "trace"} <= scopes
    assert len(REGISTRY) >= 20
    prefixes = ("ptxas", "sass", "memory", "stalls", "occupancy", "launch", "control", "compute", "latency",
                "system")
    for r in REGISTRY.values():
        assert r.id.split(".")[0] in prefixes and r.family and r.description


def test_sass_thresholds_can_be_overridden() -> None:
    stats = sass_for_cubin_bytes((FIX / "naive_sgemm.cubin").read_bytes()).kernels
    assert any(f.rule == "sass.no-tensor-cores-on-mma-like" for f in sass_findings(stats))
    relaxed = sass_findings(stats, overrides={"sass.no-tensor-cores-on-mma-like": {"min_ffma": 10_000}})
    assert not any(f.rule == "sass.no-tensor-cores-on-mma-like" for f in relaxed)
