"""The rule registry: every rule is registered once, with a family, a scope, a description and its
default thresholds, and thresholds can be overridden per rule."""

from __future__ import annotations

import inspect
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pytest

from kernelscope.heuristics import REGISTRY, SCOPES, Run, UnknownThreshold, check_overrides, load_all, rule
from kernelscope.heuristics.instructions import sass_findings
from kernelscope.heuristics.registry import Context, Thresholds, UndeclaredContext
from kernelscope.models import Finding, KernelProfile, KernelSassStats
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


# ------------------------------------------------------------------------------- the declaration's checks
def _declare(fn: object, **kw: object) -> None:
    args = {"family": "memory", "scope": "ncu", "description": "A test rule.", **kw}
    rule("memory.test-only", **args)(fn)  # type: ignore[arg-type]


def test_a_rule_function_must_take_its_scopes_model() -> None:
    def wrong_model(k: KernelSassStats, run: Run) -> Iterable[Finding]:
        return []

    def old_style(k: KernelProfile, th: Mapping[str, float], ctx: Mapping[str, Any]) -> Iterable[Finding]:
        return []

    with pytest.raises(TypeError, match="needs fn\\(data: KernelProfile, run: Run\\)"):
        _declare(wrong_model)
    with pytest.raises(TypeError, match="KernelProfile"):
        _declare(old_style)
    with pytest.raises(TypeError, match="TraceSummary"):
        _declare(wrong_model, scope="trace")
    assert "memory.test-only" not in REGISTRY


def test_a_declaration_names_a_known_scope_family_context_and_numeric_thresholds() -> None:
    def fn(k: KernelProfile, run: Run) -> Iterable[Finding]:
        return []

    with pytest.raises(ValueError, match="unknown scope"):
        _declare(fn, scope="nsys")
    with pytest.raises(ValueError, match="unknown family"):
        _declare(fn, family="misc")
    with pytest.raises(ValueError, match="provides no context arch"):
        _declare(fn, context=("arch",))
    with pytest.raises(ValueError, match="threshold 'Max'"):
        _declare(fn, thresholds={"Max": 1.0})
    with pytest.raises(ValueError, match="threshold 'flag'"):
        _declare(fn, thresholds={"flag": True})
    with pytest.raises(ValueError, match="duplicate rule id"):
        rule("memory.dram-saturated", family="memory", scope="ncu", description="again")(fn)
    assert "memory.test-only" not in REGISTRY


def test_findings_take_rule_and_family_from_the_declaration() -> None:
    r = REGISTRY["sass.local-memory"]
    assert r.family == "memory" and r.thresholds == {"high_count": 16}
    stats = sass_for_cubin_bytes((FIX / "spill.cubin").read_bytes()).kernels
    found = r.run(stats[0])
    assert found and all((f.rule, f.family) == ("sass.local-memory", "memory") for f in found)


def test_an_unknown_threshold_name_in_an_override_is_an_error() -> None:
    stats = sass_for_cubin_bytes((FIX / "naive_sgemm.cubin").read_bytes()).kernels
    with pytest.raises(UnknownThreshold, match=re.escape(
            "Rule sass.mufu-heavy has no threshold min_muf; it has: min_mufu, min_mufu_pct")):
        sass_findings(stats, overrides={"sass.mufu-heavy": {"min_muf": 1}})
    with pytest.raises(UnknownThreshold, match="no threshold bogus"):
        check_overrides({"launch.tiny-grid": {"bogus": 1.0}})
    with pytest.raises(ValueError, match=re.escape("No rule 'launch.nope'")):
        check_overrides({"launch.nope": {"x": 1.0}})
    check_overrides({"launch.tiny-grid": {"max_sm_fraction": 0.25}})


def test_thresholds_and_context_refuse_undeclared_names() -> None:
    th = Thresholds("x.y", {"a": 1.0}, {"a": 2.0})
    assert dict(th) == {"a": 2.0}
    with pytest.raises(UnknownThreshold, match="declares no threshold 'b'"):
        th["b"]
    ctx = Context("x.y", ("facts",), {"facts": 1, "arch": "sm_90"})
    assert dict(ctx) == {"facts": 1} and ctx.get("facts") == 1
    with pytest.raises(UndeclaredContext, match="reads context 'arch' without declaring it"):
        ctx.get("arch")


def test_every_rule_declares_the_context_it_reads() -> None:
    """A rule body reads its context only through run.ctx; each key it names there is declared."""
    for r in REGISTRY.values():
        src = inspect.getsource(r.fn)  # type: ignore[arg-type]
        read = set(re.findall(r"run\.ctx(?:\.get\(|\[)\"(\w+)\"", src))
        assert read == set(r.context), (r.id, read, r.context)
        assert set(r.context) <= set(SCOPES[r.scope].context)
