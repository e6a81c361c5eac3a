"""The second planted suite (examples/planted2/, docs/planted.md): its sources compile for sm_90, its
expectations name real rules and classes and cover every rule family, its dev/validation split is the
documented rule's, and, once the H100 captures exist (benchmarks/capture_planted2.py), the replay of
every capture through the rules meets the accuracy floor, part by part."""

from __future__ import annotations

import gzip
import os
import re
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import get_args

import _planted2
import pytest

from kernelscope.heuristics import REGISTRY
from kernelscope.heuristics.registry import FAMILIES
from kernelscope.models.profile import BottleneckClass

REPO = Path(__file__).resolve().parents[1]
SUITE = REPO / "examples" / "planted2"
# Regression floors, per part: what the replay of the H100 captures measured on 2026-11-27 (BENCHMARKS.md), so a
# rule change that loses a case fails here. The target is higher (issue 29: class and top finding right on 95% of
# the validation part); `python benchmarks/planted2.py` reports both parts against it. Raise a floor when the
# measured figure rises; never lower one to let a change in.
FLOORS: dict[str, dict[str, float]] = {
    "dev": {"class": 107 / 120, "top": 73 / 75, "line": 58 / 65},
    "validation": {"class": 75 / 77, "top": 47 / 49, "line": 40 / 42},
}
# Known misses of the twin / second-problem / must-not checks, with why they stand; a new one fails the test
KNOWN_OTHER_MISSES = {
    "48-compaction-global-counter": "validation: the warp-aggregated twin still queues ~500K atomics on its counters",
    "112-feature-map-treap-walk": "the 32-ary B-tree twin still walks 7 dependent levels a lookup (against ~55): "
                                  "its dependent-load finding is true",
    "82-octree-leaf-lookup": "the twin walks four octree chains a thread at once, still 81% of its stalls on them with "
                             "memory at 40%: the chain its SASS shows is still the cost, its finding is true",
    "113-mvcc-undo-chain-walk": "validation: the twin still walks undo chains (shown in its SASS) under the roof; "
                                "its dependent-load finding is true",
    "118-pic-deposit-sorted-bunch": "validation: its twin (one update a run of equal cells) still draws the atomic "
                                    "finding since the slow-rate path; not read, to keep validation honest",
    "145-splat-tile-bin-slots": "the warp-aggregated twin still claims 3.9M slots with atomics whose results its "
                                "warps wait on (89% of stalls, memory at 38%, 457 us against the 85 us its author "
                                "expected): the contention between warps is still its cost, its finding is true",
    "123-tst-digest-lookup-warp": "validation: the twin walks four tree lookups a warp at once, still chains under "
                                  "the roof; its dependent-load finding is true",
    "124-skiplist-range-scan": "the flat-array twin is still latency-bound (78% of its stalls on loads, memory at "
                               "26%) with few chains: the finding stays, saying the loads are independent but few",
    "121-healthy-md-step-cell-slots": "scattered cell-slot atomics are uncoalesced by design; the finding is a note "
                                      "(info), which the case's author ruled out at any severity",
    "151-sssp-relax-hub-destinations": "validation (wave 17, first capture): no atomic finding, dependent loads on "
                                       "top; not tuned away",
    "154-tof-spectrum-lockmass-runs": "the run-merging twin still sends 17.6 atomics per 100 instructions onto five "
                                      "peaks (busiest slice 2.3x the average, memory at 37%, 128 us against the 50-90 "
                                      "us its author expected): contention between warps is still its cost",
    "155-groupby-guest-checkout-customers": "the twin's per-block flush still lands on the dominant keys' slice "
                                            "(2.2x the average, memory at 29%, 155 us against the 60-120 us its "
                                            "author expected): its finding is true",
    "156-healthy-gc-binned-fragment-depth": "one atomic per fragment on a randomly placed counter is uncoalesced by "
                                            "design; the finding is a note (info), which the author ruled out",
    "160-radix-tile-split-scan-barriers": "validation (wave 17, first capture): the twin still draws barrier-heavy; "
                                          "not read, to keep validation honest",
    "168-healthy-edge-gated-scatter-spread": "validation (wave 18, first capture): a healthy scatter warned "
                                             "uncoalesced; not tuned away",
    "175-healthy-pivot-partition-cas": "dev (wave 18): 44% of its shared wavefronts are conflict replays on the tile "
                                       "staging; a note (info) since its warps hardly wait on shared memory, which "
                                       "the author ruled out at any severity",
    "179-healthy-order-partition-walk": "dev (wave 19): its cp.async copies (LDGSTS.E.BYPASS.128) of contiguous "
                                        "16-byte records make L2 serve 16.9M read sectors for 8.4M of data while "
                                        "DRAM reads the data once; the uncoalesced finding is a note (info) on that "
                                        "L2 traffic, which the author ruled out at any severity",
    "193-healthy-ctr-hashed-scores-group8": "dev (wave 20): weights gathered through hashed feature ids spread over "
                                            "256 MB; the uncoalesced finding is a note (info: the spread is the "
                                            "data's), which the author ruled out at any severity",
    "194-healthy-sort-apply-ranks-scatter": "dev (wave 20): a random permutation scattered a 4-byte key at a time; "
                                            "the uncoalesced note (info: the data's spread) the author ruled out",
    "195-healthy-hashed-grad-spread-red": "validation (wave 20, first capture): the uncoalesced finding on its spread "
                                          "atomics, a note (info) since the change developed on 193 and 194",
    "196-healthy-join-payload-gather-f64": "validation (wave 20, first capture): the uncoalesced finding on its "
                                           "gather, a note (info) since the change developed on 193 and 194",
    "164-cdf-chained-scan-serial": "the look-back twin scans 20 MB (L2-resident) in 21 us across 640 tiles: waiting "
                                   "on predecessors is a real share of so short a kernel, its note is true",
}
# Known healthy kernels with a warning, with why they stand (validation misses are not tuned away); a new one fails.
# A healthy kernel whose label a measurement refuted (its challenger ran CONFIRM_SPEEDUP x faster) is not listed:
# its warning may be right, and the replay reports it apart
KNOWN_LOUD_HEALTHY: dict[str, str] = {}


P2 = _planted2.suite()
CASES = P2.load_cases()
IDS = [c.id for c in CASES]


def test_the_suite_is_large_with_healthy_and_two_problem_cases() -> None:
    assert len(CASES) >= 36
    assert sorted(p.name for p in SUITE.iterdir() if p.is_dir()) == sorted(IDS)
    assert sum(c.kind == "healthy" for c in CASES) >= 6
    assert sum(bool(c.also_expected) for c in CASES) >= 5  # two problems at once: the dominant one on top


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_expectations_name_real_rules_classes_and_kernels(case: P2.PlantedCase) -> None:
    unknown = sorted(r for r in case.rule_ids() if r not in REGISTRY)
    assert not unknown, f"{case.id}: rule ids not in the registry: {unknown}"
    classes = set(get_args(BottleneckClass))
    assert set(case.classes) <= classes, f"{case.id}: {case.classes} not among {sorted(classes)}"
    if case.expected_rule:
        assert case.family == REGISTRY[case.expected_rule].family, (case.id, REGISTRY[case.expected_rule].family)
    else:
        assert case.family == "healthy"
    src = (SUITE / case.id / "planted.cu").read_text()
    for k in filter(None, (case.kernel, case.fixed_kernel, *case.challengers)):
        bounds = r"(__launch_bounds__\((?:[^()]|\([^()]*\))*\)\s+)?"  # its argument may hold one level of ()
        assert re.search(rf'extern "C" __global__ void\s+{bounds}{k}\(', src), (case.id, k)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_planted_lines_are_the_marked_lines(case: P2.PlantedCase) -> None:
    marked = P2.marked_lines((SUITE / case.id / "planted.cu").read_text())
    if case.kind == "healthy":
        assert not marked, f"{case.id}: a healthy kernel has nothing planted"
        return
    assert marked, f"{case.id}: the planted statement carries // PLANTED"
    assert case.lines in ([], marked), f"{case.id}: lines {case.lines} but // PLANTED on {marked}"


def test_every_rule_family_is_planted_somewhere() -> None:
    planted = {REGISTRY[r].family for c in CASES for r in [*c.top_rules, *c.also_expected]}
    assert set(FAMILIES) <= planted, sorted(set(FAMILIES) - planted)


def test_the_split_is_the_documented_rule_and_stratified() -> None:
    split = P2.read_split()
    assert split == P2.split_of(CASES), "split.json drifted: python benchmarks/planted2.py --write-split"
    n_val = sum(p == "validation" for p in split.values())
    assert 3 * n_val >= len(CASES), f"{n_val} of {len(CASES)} cases in validation: under a third"
    strata: dict[str, set[str]] = {}
    for c in CASES:
        strata.setdefault(c.family, set()).add(split[c.id])
    for fam, parts in strata.items():
        if sum(c.family == fam for c in CASES) > 1:
            assert parts == {"dev", "validation"}, f"family {fam} is in {parts} only"


@pytest.fixture(scope="module")
def builds(tmp_path_factory: pytest.TempPathFactory) -> dict[str, subprocess.CompletedProcess[str]]:
    """Every program compiled for sm_90 as the suite documents (nvcc -O3 -arch=sm_90 -lineinfo), in parallel."""
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc not found: the planted sources are compiled where the CUDA toolkit is")
    out = tmp_path_factory.mktemp("planted2")

    def one(cid: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([nvcc, "-O3", "-arch=sm_90", "-lineinfo", "-c", "-o", str(out / f"{cid}.o"),
                               str(SUITE / cid / "planted.cu")], capture_output=True, text=True, timeout=600)

    with ThreadPoolExecutor(max(1, min(8, os.cpu_count() or 1))) as pool:
        return dict(zip(IDS, pool.map(one, IDS), strict=True))


@pytest.mark.slow
@pytest.mark.parametrize("cid", IDS)
def test_source_compiles_for_sm90_without_warnings(cid: str, builds: dict[str, subprocess.CompletedProcess[str]]
                                                   ) -> None:
    r = builds[cid]
    assert r.returncode == 0, f"{cid}:\n{r.stdout}\n{r.stderr}"
    assert "warning" not in (r.stdout + r.stderr).lower(), f"{cid}:\n{r.stderr}"


# ------------------------------------------------------------------------------------------ the replay
def _captured() -> list[str]:
    return [m for c in CASES if (m := P2.fixture_state(c))]


@pytest.fixture(scope="module")
def scores() -> list:
    missing = _captured()
    if missing:
        pytest.skip(f"the H100 captures of the second planted suite are not recorded yet ({len(missing)} of "
                    f"{len(CASES)} cases missing, e.g. {missing[0]}); capture them on a GPU host with "
                    "`python benchmarks/capture_planted2.py` (docs/planted.md)")
    split = P2.read_split()
    return [P2.score_case(c, split[c.id]) for c in CASES]


def _misses(rows: list, pred: str) -> str:
    return "\n".join(f"  {s.case} ({s.part}): " + "; ".join(s.misses) for s in rows if getattr(s, pred) is False)


@pytest.mark.parametrize("part", ["dev", "validation"])
def test_replay_meets_the_accuracy_floor(part: str, scores: list) -> None:
    rows = [s for s in scores if s.part == part]
    sm = P2.summary(rows)
    for key, pred in (("class", "class_ok"), ("top", "top_ok"), ("line", "line_ok")):
        ok, n, floor = *sm[key], FLOORS[part][key]
        assert n == 0 or ok >= floor * n - 1e-9, f"{part}: {key} right on {ok}/{n} (floor {floor:.0%}); misses:\n" + \
            _misses([s for s in rows if key != "top" or s.kind != "healthy"], pred)


def test_every_healthy_kernel_gets_no_warning(scores: list) -> None:
    loud = [s for s in scores if s.kind == "healthy" and not s.top_ok and not s.refuted
            and s.case not in KNOWN_LOUD_HEALTHY]
    assert not loud, "healthy kernels with a warning:\n" + _misses(loud, "top_ok")
    quiet = [s.case for s in scores if s.case in KNOWN_LOUD_HEALTHY and s.top_ok]
    assert not quiet, f"known loud healthy kernels that are silent now (take them off the list): {quiet}"


def test_fixed_twins_and_second_problems(scores: list) -> None:
    """The twins do not raise their case's rule; the second problem of a two-problem case is found; no
    finding a case rules out appears (reported together, so that one run lists them all)."""
    bad = [s for s in scores if (s.twin_ok is False or not s.also_ok or not s.must_not_ok)
           and s.case not in KNOWN_OTHER_MISSES]
    assert not bad, "\n".join(f"  {s.case} ({s.part}): " + "; ".join(s.misses) for s in bad)
    clean = [s.case for s in scores if s.case in KNOWN_OTHER_MISSES
             and s.twin_ok is not False and s.also_ok and s.must_not_ok]
    assert not clean, f"known misses that no longer miss (take them off the list): {clean}"


# Healthy kernels measured below any roof (their label is doubtful), with why they stay; a new one fails
KNOWN_BELOW_ROOF = {
    "53-healthy-tiled-stencil-2d": "dev: a tiled 2D stencil, DRAM at 56%; a challenger doing four outputs a "
                                   "thread runs 1.41x faster (DRAM 79%): the label is refuted",
    "106-healthy-rle-run-ends": "dev: run-length encoding with decoupled look-back, DRAM at 48% (its blocks wait on "
                                "their predecessors); the challenger writing runs from registers ran 0.82x",
    "126-healthy-ema-lookback": "dev (wave 14): an EMA scan with decoupled look-back, DRAM at 58% (blocks wait on "
                                "their predecessors); its challenger with twice the tile ran 1.18x: the label stands",
    "127-healthy-pivot-partition-lookback": "dev (wave 14): a three-way partition with look-back, DRAM at 48%; its "
                                            "challenger with twice the tile ran 1.16x: the label stands",
    "173-healthy-csr-rowptr-lookback": "dev (wave 18): a row-pointer scan with look-back, DRAM at 54% (blocks wait on "
                                       "their predecessors); its challenger with half the tile ran 0.68x",
    "174-healthy-detection-select-acquire": "validation (wave 18): a select with acquire-polled look-back, memory at "
                                            "29%; its second challenger (the same tiles, status and count in one "
                                            "64-bit word polled relaxed) ran 1.42x: the label is refuted",
    "176-healthy-session-maxscan-persistent": "dev (wave 18): a persistent segmented max-scan, DRAM at 54%; its "
                                              "challenger (a tile a block) ran 1.19x: the label stands",
    "177-healthy-meter-segsum-window": "dev (wave 19): a session-reset sum with a 32-tile look-back polled with "
                                       "packed 64-bit words and a 32 ns sleep, memory at 57% (576 MB in 306 us); its "
                                       "challenger (256 threads, 2K tiles) ran 0.97x: the label stands",
    "180-healthy-token-offsets-partial-wait": "dev (wave 19): token offsets with a look-back that waits only for the "
                                              "unfinished tiles, memory at 58% (768 MB in 405 us); its challenger "
                                              "(4K tiles) ran 0.98x: the label stands",
    "194-healthy-sort-apply-ranks-scatter": "dev (wave 20): 32M 4-byte keys scattered to a random permutation, memory "
                                            "at 31% (DRAM moves 5.6x the ideal sectors: each partial sector costs a "
                                            "full one); its challenger (8 a thread) ran 1.00x: the label is doubtful",
    "195-healthy-hashed-grad-spread-red": "validation (wave 20): 24M spread float atomicAdds into a 400 MB table, "
                                          "memory at 36%; its challenger ran 1.00x: the label is doubtful",
    "158-healthy-lookback-sparsify-select": "dev (wave 17): a select with a 32-tile acquire-polled look-back, DRAM at "
                                            "46%; its challenger (one lane walking back) ran 0.25x: the label stands",
}


def test_every_healthy_kernel_runs_near_a_roof(scores: list) -> None:
    """Measured, no rule involved: a healthy kernel's busiest unit runs at ROOF_PCT of its peak or more, or the
    case plants nothing but is not healthy either (there is time to win). Known exceptions are listed."""
    low = [f"  {s.case} ({s.part}): busiest unit at {s.roof_pct:.1f}% of its peak" for s in scores
           if P2.below_roof(s) and s.case not in KNOWN_BELOW_ROOF]
    assert not low, "healthy kernels below any roof (redesign them, or say why they stay):\n" + "\n".join(low)
    assert all(P2.below_roof(s) for s in scores if s.case in KNOWN_BELOW_ROOF), "a known exception is at a roof now"


def test_every_captured_case_plants_a_measurable_problem(scores: list) -> None:
    """Measured, no rule involved: each planted kernel's fixed twin ran at least CONFIRM_SPEEDUP times faster
    on the H100 (total time over every launch), or the case plants nothing the rules could be right about.
    Fails, naming each unconfirmed case and its speedup, until such cases are redesigned and re-captured."""
    weak = [f"  {s.case} ({s.part}): " + (f"twin {s.twin_speedup:.2f}x" if s.twin_speedup is not None else
                                         "the kernel or its twin has no duration in the capture (renamed since?)")
            for s in scores if s.kind == "planted" and not s.confirmed]
    assert not weak, (f"unconfirmed cases (the fixed twin is not {P2.CONFIRM_SPEEDUP}x faster, or was not measured; "
                      "redesign them and re-capture with benchmarks/capture_planted2.py --cases ...):\n"
                      + "\n".join(weak))


@pytest.fixture(scope="module")
def programs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Every program built (linked) for sm_90, in parallel."""
    nvcc = shutil.which("nvcc")
    assert nvcc is not None, "nvcc is needed to build the planted programs"
    out = tmp_path_factory.mktemp("planted2-exe")

    def one(cid: str) -> Path:
        subprocess.run([nvcc, "-O3", "-arch=sm_90", "-lineinfo", "-o", str(out / cid), str(SUITE / cid / "planted.cu")],
                       check=True, capture_output=True, timeout=600)
        return out / cid

    with ThreadPoolExecutor(max(1, os.cpu_count() or 1)) as pool:
        return dict(zip(IDS, pool.map(one, IDS), strict=True))


@pytest.mark.gpu
@pytest.mark.slow
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_program_runs_and_its_twins_agree(case: P2.PlantedCase, programs: dict[str, Path]) -> None:
    """On a GPU: each program checks its kernel against its twin (or a CPU reference) and prints ok."""
    for args in ([], ["fixed"]) if case.kind == "system" else ([],):
        r = subprocess.run([str(programs[case.id]), *args], capture_output=True, text=True, timeout=300)
        assert r.returncode == 0 and r.stdout.startswith("ok "), (args, r.stdout, r.stderr)


# ------------------------------------------------------------------------------------------ the scorer itself
def test_the_scorer_on_recorded_captures_of_the_first_suite() -> None:
    """The replay and scoring path, on real H100 captures that exist already (tests/fixtures/planted/): the
    first suite's strided copy scored with its own expectations is right on every count, and scored with a
    wrong expectation it says, in words, what was found instead."""
    import json

    first = REPO / "examples" / "planted" / "01-strided-copy"
    spec = json.loads((first / "case.json").read_text())
    case = P2.PlantedCase(id=spec["id"], title=spec["title"], kind="planted", family="memory",
                          kernel=spec["bad_kernel"], fixed_kernel=spec["fixed_kernel"],
                          expected_class=spec["expected_class"], expected_rule=spec["expected_rule"],
                          lines=P2.marked_lines((first / "planted.cu").read_text()))
    root = REPO / "tests" / "fixtures" / "planted"
    s = P2.score_case(case, "dev", root)
    assert s.all_ok and s.class_ok and s.top_ok and s.line_ok and s.twin_ok, s.misses
    # measured, no rule: the coalesced twin is faster; a kernel launched n times counts n x its mean duration
    assert s.confirmed and s.twin_speedup is not None and s.twin_speedup >= P2.CONFIRM_SPEEDUP
    light = P2.load_reports(root / case.id)[0]
    assert P2.twin_speedup(case.model_copy(update={"launches": 3}), light) == pytest.approx(3 * s.twin_speedup)
    wrong = case.model_copy(update={"expected_rule": "memory.shared-bank-conflicts", "expected_class": "mixed",
                                    "must_not": [spec["expected_rule"]]})
    w = P2.score_case(wrong, "validation", root)
    assert not (w.class_ok or w.top_ok or w.must_not_ok) and w.line_ok is False
    assert any(spec["expected_rule"] in m for m in w.misses) and len(w.misses) >= 3, w.misses
    assert P2.summary([s, w])["top"] == [1, 2]


def test_the_scorer_on_recorded_timelines() -> None:
    """System cases score the traced program's system findings, and its `fixed` run's (recorded CUPTI
    timelines of examples/system/copy_loop.cu, tests/fixtures/trace/)."""
    import json

    trace = REPO / "tests" / "fixtures" / "trace"
    must = json.loads((trace / "copy-loop-planted" / "case.json").read_text())["must_fire"]
    bad, fixed = P2.replay_system(trace / "copy-loop-planted"), P2.replay_system(trace / "copy-loop-fixed")
    case = P2.PlantedCase(id="00-copy-loop", title="copy loop", kind="system", family="system", kernel="-",
                          expected_rule="system.copies-in-loop", also_expected=must)
    s = P2.score_findings(case, "dev", None, bad, fixed)
    assert s.also_ok and s.twin_ok and s.class_ok is None and s.line_ok is None, s.misses
    assert s.top_ok == (bad[0].rule == "system.copies-in-loop")


def test_the_suite_page_lists_every_case_in_its_part() -> None:
    page = (REPO / "docs" / "planted.md").read_text()
    split = P2.read_split()
    for c in CASES:
        assert f"| {c.id} | {split[c.id]} |" in page, f"docs/planted.md: no row for {c.id} ({split[c.id]})"
        if c.classes:  # the expected classes as case.json has them
            row = f"| {c.id} | {split[c.id]} | `{c.kernel}` | {' or '.join(c.classes)} |"
            assert row in page, f"docs/planted.md: {c.id}'s row should begin {row}"


def test_a_single_capture_replays_as_both_stages(tmp_path: Path) -> None:
    """A case captured in one Nsight Compute run has only deep.ncu-rep.gz: the replay reads it as both stages.
    On the first suite's recorded strided copy, its deep report alone gives the same kernels and classes."""
    src = REPO / "tests" / "fixtures" / "planted" / "01-strided-copy"
    two, one = tmp_path / "two", tmp_path / "one"
    for d, reports in ((two, ("light", "deep")), (one, ("deep",))):
        d.mkdir()
        for name in ("compile.json", "sass.json"):
            shutil.copyfile(src / name, d / name)
        for r in reports:
            (d / f"{r}.ncu-rep.gz").write_bytes(gzip.compress((src / f"{r}.ncu-rep").read_bytes(), mtime=0))
    both, alone = P2.replay_kernels(two), P2.replay_kernels(one)
    assert alone["strided_copy"].findings[0].rule == both["strided_copy"].findings[0].rule
