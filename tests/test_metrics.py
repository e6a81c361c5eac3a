"""The CUPTI collector's output, replayed on CPU from real H100 captures (tests/fixtures/collector/capture.py, which
captures what analyze's CUPTI run collects: light metrics, deep metrics, stall reasons and source passes): its
profiles against the Nsight Compute reports of the same programs (tests/fixtures/planted/), the planted suite's
answers from the collector alone, and a damaged or hostile output folder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kernelscope.heuristics import run_rules
from kernelscope.heuristics.classify import MIN_DURATION_NS, classify
from kernelscope.heuristics.pipeline import COLLECTOR_METRICS, diagnose_stages, stage2_plan, trace_totals
from kernelscope.measure.collector import OCCUPANCY_LIMITS, collected_profile, load_collected, source_counters
from kernelscope.measure.ncu import load_profile
from kernelscope.measure.stages import collector_request, collector_totals
from kernelscope.measure.timeline import load_cupti
from kernelscope.measure.trace import diagnose_timeline
from kernelscope.models import CompileResult, KernelResources, SassResult

REPO = Path(__file__).resolve().parent.parent
PLANTED = REPO / "examples" / "planted"
FIX = Path(__file__).parent / "fixtures"
CASES = sorted(p.name for p in PLANTED.iterdir() if (p / "case.json").is_file())
TRACES = {"12-many-tiny-launches": "many-tiny-launches"}  # cases with more than one launch per kernel


def _resources(case: str) -> dict[str, KernelResources]:
    comp = CompileResult.model_validate_json((FIX / "planted" / case / "compile.json").read_text())
    return {k.mangled_name: k for k in comp.kernels}


def _collected(case: str):  # type: ignore[no-untyped-def]
    return load_collected(FIX / "collector" / f"{case}.jsonl")


def _assert_planted_answer(case: str, diags: list) -> str | None:  # type: ignore[type-arg]
    """The planted class, top finding and source line of the bad kernel, its fixed twin silent (the checks of
    tests/test_planted.py); the top finding's line."""
    by = {k.mangled_name: k for k in diags}
    spec = json.loads((PLANTED / case / "case.json").read_text())
    bad, fixed = by[spec["bad_kernel"]], by[spec["fixed_kernel"]]
    assert bad.bottleneck.cls == spec["expected_class"], bad.bottleneck.reasoning
    assert bad.findings and bad.findings[0].rule == spec["expected_rule"], [f.rule for f in bad.findings]
    line = bad.findings[0].line
    if spec.get("line_expected", True):
        marked = [i for i, ln in enumerate((PLANTED / case / "planted.cu").read_text().splitlines(), 1)
                  if "// PLANTED" in ln]
        assert f"planted.cu:{marked[0]} " in (line or "") + " ", line
    assert all(f.rule != spec["expected_rule"] for f in fixed.findings)
    assert bad.launches == spec.get("bad_launches", 1)
    return line if spec.get("line_expected", True) else None


def test_every_planted_case_has_a_clean_capture() -> None:
    deep = collector_request()
    for case in CASES:
        got = _collected(case)
        assert got.ended and not got.errors and not got.notes and not got.refused, (case, got)
        assert got.chip == "GH100" and got.device.name == "NVIDIA H100 80GB HBM3" and got.device.sm_count == 132
        assert got.metrics == COLLECTOR_METRICS and (got.passes or 0) >= 1 and (got.deep_passes or 0) > got.passes
        # the deep metrics in any order: the rules register them, and their order is no part of the capture
        assert set(got.deep_metrics) == set(deep.metrics) and got.sass_metrics == list(deep.sass_metrics)
        assert len(got.launches) == 2, case  # the bad kernel and its fixed twin: one configuration each
        for ln in got.launches:
            assert ln.deep and set(ln.values) == {*COLLECTOR_METRICS, *deep.metrics}, (case, ln.name)
            assert ln.values["gpu__time_duration.sum"]
        # both source passes ran for each launch, on the program's memory as the launch found it
        assert [src.seq for src in got.sources] == [ln.seq for ln in got.launches]
        for src in got.sources:
            assert src.sampled and src.counted and src.samples > 0 and src.dropped == 0, (case, src.name)
            # (-lineinfo) nearly every instruction has a line: the program's, or a toolkit header's (wmma's mma.h)
            assert sum(1 for pc in src.pcs if pc.file and pc.line > 0) >= 0.9 * len(src.pcs), (case, src.name)
            assert any(pc.file.endswith("planted.cu") for pc in src.pcs)
        assert sum(c.launches for c in got.configs) == got.launches_seen and not got.configs_capped


@pytest.mark.parametrize("case", CASES)
def test_the_collector_profiles_like_nsight_computes_light_stage(case: str) -> None:
    """Same kernels, the same launch metrics (computed here from the configuration and the driver's occupancy),
    and the same bottleneck class as ncu's light report of the same program (captured another day)."""
    mine = {k.mangled_name: k for k in collected_profile(_collected(case), _resources(case)).kernels}
    ncu = {k.mangled_name: k for k in load_profile(FIX / "planted" / case / "light.ncu-rep", top_lines=0).kernels}
    assert set(mine) == set(ncu)
    for name, k in mine.items():
        n = ncu[name]
        for f in ("grid_size", "block_size", "registers_per_thread", "shared_mem_static_bytes",
                  "shared_mem_dynamic_bytes", "device"):
            assert getattr(k, f) == getattr(n, f), (case, name, f, getattr(k, f), getattr(n, f))
        assert k.waves_per_sm == pytest.approx(n.waves_per_sm, rel=1e-6), (case, name)
        assert k.theoretical_occupancy_pct == pytest.approx(n.theoretical_occupancy_pct, rel=1e-6), (case, name)
        # the occupancy limit per resource: ncu's, but shared memory's at the largest carveout (ncu: the launch's)
        for m in OCCUPANCY_LIMITS:
            mine_v, theirs_v = k.num(m), n.num(m)
            if m == "launch__occupancy_limit_shared_mem":
                assert mine_v is not None and theirs_v is not None and mine_v >= theirs_v, (case, name)
            else:
                assert mine_v == theirs_v, (case, name, m, mine_v, theirs_v)
        assert k.metrics["gpu__time_duration.sum"].unit == "ns" and k.metrics["dram__bytes_read.sum"].unit == "byte"
        if classify(k).cls != classify(n).cls:
            # the one disagreement: a ~5 µs kernel on either side of the launch/tail threshold, as the collector's
            # replay runs with the L2 as the memory restore leaves it (warm, as in the program itself, whose trace
            # has it at 3.7 µs) and ncu's with the L2 flushed
            assert (case, name) == ("12-many-tiny-launches", "full_scale_bias"), (case, name, classify(k).reasoning,
                                                                                 classify(n).reasoning)
            assert (k.duration_ns or 0) < MIN_DURATION_NS < (n.duration_ns or 0)


@pytest.mark.parametrize("case", CASES)
def test_the_planted_answers_hold_with_the_collector_as_the_light_stage(case: str) -> None:
    """The collector's classes choose the same deep sections as ncu's light stage did for the recorded deep
    report, and the rules over both give the planted class, top finding and line (tests/test_planted.py's
    checks)."""
    d = FIX / "planted" / case
    light = collected_profile(_collected(case), _resources(case))
    deep = load_profile(d / "deep.ncu-rep")
    recorded = json.loads((d / "analyze.json").read_text())
    classes = sorted({classify(k).cls for k in light.kernels})
    # the deep sections the collector's classes call for were all in the recorded deep capture (the same list but
    # for case 12, where ncu's classes added MemoryWorkloadAnalysis), so the replay is what analyze would answer
    recorded_sections = next(s for s in recorded["stages"] if s["name"] == "deep")["sections"]
    assert set(stage2_plan(classes)[0]) <= set(recorded_sections)
    sass = SassResult.model_validate_json((d / "sass.json").read_text())
    totals = None
    if case in TRACES:  # the collector profiles one launch per configuration: the trace counts them all
        totals = trace_totals(diagnose_timeline(load_cupti(FIX / "trace" / TRACES[case])).summary)
    diags, _ = diagnose_stages(light, deep, deep_kernels=4, sass=sass.kernels,
                               ptxas=list(_resources(case).values()), totals=totals)
    _assert_planted_answer(case, diags)


@pytest.mark.parametrize("case", CASES)
def test_the_planted_answers_hold_from_the_collector_alone(case: str) -> None:
    """What analyze answers from its one CUPTI run, with no Nsight Compute report: the planted class, top finding
    and source line of the bad kernel, the fixed twin silent, the launches counted by the collector."""
    got = _collected(case)
    light = collected_profile(got, _resources(case), texts={"planted.cu": (PLANTED / case / "planted.cu").read_text()
                                                             .splitlines()})
    sass = SassResult.model_validate_json((FIX / "planted" / case / "sass.json").read_text())
    diags, _ = diagnose_stages(light, None, deep_kernels=4, sass=sass.kernels, ptxas=list(_resources(case).values()),
                               totals=collector_totals(got, light))
    line = _assert_planted_answer(case, diags)
    assert line is None or "`" in line  # with the line's code, from the compiled source


def test_local_memory_traffic_is_placed_by_the_lines_local_counters() -> None:
    """Case 03's spills are placed by the per-line local-memory measurement, not by stall samples: Nsight Compute's
    local sectors per line from its report, the collector's local-memory instructions per line from its run; both
    name the planted line, and the finding shows the value. Without either, the most memory-stalled line."""
    case = "03-register-spills"
    planted = next(i for i, ln in enumerate((PLANTED / case / "planted.cu").read_text().splitlines(), 1)
                   if "// PLANTED" in ln)
    report = load_profile(FIX / "planted" / case / "deep.ncu-rep")
    ncu = next(k for k in report.kernels if k.name.startswith("spilling"))
    got = _collected(case)
    collected = next(k for k in collected_profile(got, _resources(case)).kernels if k.name.startswith("spilling"))
    for k, metric in ((ncu, "memory_l2_theoretical_sectors_local"), (collected, "inst_executed_op_local")):
        f = next(f for f in run_rules("ncu", k) if f.rule == "memory.local-memory-traffic")
        assert f.line and f.line.split("  ")[0].endswith(f"planted.cu:{planted}"), f.line
        ev = next(e for e in f.evidence if e.metric == metric)
        assert ev.line == f.line and ev.value > 0 and "the line " in f.diagnosis
        for s in k.source_lines:  # with the local counters gone, the long-scoreboard samples place it
            s.counters.pop(metric, None)
        f = next(f for f in run_rules("ncu", k) if f.rule == "memory.local-memory-traffic")
        assert f.evidence[-1].metric == "smsp__pcsamp_warps_issue_stalled_long_scoreboard"
        assert "most stalled on memory" in f.diagnosis


def test_source_counters_sum_by_line_with_ncus_names_and_excess() -> None:
    """The bank-conflicted transpose: SASS metrics give each line's shared wavefronts and their ideal, the
    excess is ncu's derived one, and the PC samples are counted once each (the *_not_issued reasons are
    subsets)."""
    got = _collected("02-transpose-bank-conflicts")
    src = next(x for x in got.sources if x.name == "transpose_conflicted")
    per_line, totals = source_counters(src)
    planted = next(i for i, ln in enumerate((PLANTED / "02-transpose-bank-conflicts" / "planted.cu").read_text()
                                            .splitlines(), 1) if "// PLANTED" in ln)
    worst = max(per_line.items(), key=lambda kv: kv[1].get("derived__memory_l1_wavefronts_shared_excessive", 0))
    assert worst[0][1] == planted
    c = worst[1]
    assert c["memory_l1_wavefronts_shared"] == c["memory_l1_wavefronts_shared_ideal"] + c[
        "derived__memory_l1_wavefronts_shared_excessive"] and c["memory_l1_wavefronts_shared"] >= 8 * c[
        "memory_l1_wavefronts_shared_ideal"]
    assert totals["smsp__pcsamp_sample_count"] == src.samples  # every sample once
    assert sum(v.get("inst_executed", 0) for v in per_line.values()) <= totals["inst_executed"]


def test_registers_and_shared_memory_come_from_ptxas_where_the_driver_did_not_say(tmp_path: Path) -> None:
    case = "07-ffma-matmul"
    lines = (FIX / "collector" / f"{case}.jsonl").read_text().splitlines()
    out = []
    for raw in lines:
        rec = json.loads(raw)
        if rec["t"] == "launch":
            rec.update(regs=-1, static_smem=-1, attr_error=400)  # CUDA_ERROR_INVALID_HANDLE
        out.append(json.dumps(rec))
    f = tmp_path / "metrics-1.jsonl"
    f.write_text("\n".join(out) + "\n")
    got = load_collected(tmp_path)
    assert all(ln.regs is None and ln.static_smem is None for ln in got.launches)
    blind = {k.mangled_name: k for k in collected_profile(got).kernels}
    assert blind["ffma_matmul"].registers_per_thread is None  # unknown stays None, never 0
    told = {k.mangled_name: k for k in collected_profile(got, _resources(case)).kernels}
    res = _resources(case)
    assert told["ffma_matmul"].registers_per_thread == res["ffma_matmul"].registers == 128
    strided = collected_profile(load_collected(FIX / "collector" / "01-strided-copy.jsonl"), {}).kernels[0]
    assert strided.registers_per_thread == 16  # ptxas' 10, as ncu's launch__registers_per_thread reads it
    assert told["ffma_matmul"].shared_mem_static_bytes == res["ffma_matmul"].shared_bytes


def test_lines_that_are_not_the_collectors_are_skipped_with_a_note(tmp_path: Path) -> None:
    real = (FIX / "collector" / "01-strided-copy.jsonl").read_text().splitlines()
    junk = ["not json", "[1, 2]", '{"t": "launch", "name": 3}', '{"t": "launch", "seq": 1, "name": "x", "grid": "big"}',
            '{"t": "surprise"}', "\x00\xff"]
    (tmp_path / "metrics-1.jsonl").write_text("\n".join(real[:2] + junk + real[2:]) + "\n")
    (tmp_path / "metrics-2.jsonl").write_text('{"t": "error", "call": "cuptiRangeProfilerStart", "what": "x"}\n')
    (tmp_path / "other.txt").write_text("ignored: not a collector file\n")
    got = load_collected(tmp_path)
    assert [ln.name for ln in got.launches] == ["strided_copy", "coalesced_copy"]
    assert got.notes == [f"{len(junk)} line(s) of the collector's output were not its own and were skipped"]
    assert got.errors == ["cuptiRangeProfilerStart: x"]


def test_an_empty_folder_collects_nothing(tmp_path: Path) -> None:
    got = load_collected(tmp_path)
    assert not got.launches and not got.ended and got.metrics == []
    assert collected_profile(got).kernels == []
