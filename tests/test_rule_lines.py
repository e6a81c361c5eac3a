"""A finding points at the line of the instruction that carries its cost (issue 29): replayed from the CUPTI
collector's and Nsight Compute's recorded H100 runs of the planted atomic case (tests/fixtures/collector,
tests/fixtures/planted), where the closing brace after the atomic (line 21) holds the kernel's exit and the
warps' drain samples; a barrier's stalls on the barrier (its samples sit on an instruction after it) and a
divergence on the branch that splits the warps (tests/fixtures/planted2). Changed values are stated in each test."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import _planted2
import pytest

from kernelscope.heuristics import REGISTRY
from kernelscope.heuristics.memory import has_code
from kernelscope.heuristics.stalls import waits_on_other_blocks
from kernelscope.measure.collector import collected_profile, load_collected
from kernelscope.measure.lines import wait_owner as _wait_owner
from kernelscope.measure.ncu import load_profile
from kernelscope.measure.sourcemap import (
    SASS_INSTRUCTION_BYTES,
    WAIT_REACH,
    call_site,
    read_registers,
    waited_on,
    written_registers,
)
from kernelscope.models import KernelProfile
from kernelscope.models.profile import BARRIER_AFTER_POLL, GLOBAL_ATOMIC_INST, is_toolkit_header

FIX = Path(__file__).parent / "fixtures"
CASE = "08-atomic-contention"
SOURCE = Path(__file__).resolve().parent.parent / "examples" / "planted" / CASE / "planted.cu"
ATOMIC, BRACE = 20, 21
THROTTLES = ("smsp__pcsamp_warps_issue_stalled_lg_throttle", "smsp__pcsamp_warps_issue_stalled_membar")
DRAIN = "smsp__pcsamp_warps_issue_stalled_drain"


def _kernel(source: str) -> KernelProfile:
    if source == "collector":
        texts = {"planted.cu": SOURCE.read_text().splitlines()}
        kernels = collected_profile(load_collected(FIX / "collector" / f"{CASE}.jsonl"), texts=texts).kernels
    else:
        kernels = load_profile(FIX / "planted" / CASE / "deep.ncu-rep").kernels
    return next(k for k in kernels if k.name.startswith("contended_atomic_sum"))


def _line_no(label: str | None) -> int:
    assert label is not None
    return int(label.split("  ")[0].rsplit(":", 1)[1])


def _without_throttles(k: KernelProfile, drain_factor: float) -> KernelProfile:
    lines = []
    for s in k.source_lines:
        counters = {c: v for c, v in s.counters.items() if not c.startswith(THROTTLES)}
        if DRAIN in counters:
            counters[DRAIN] *= drain_factor
        lines.append(s.model_copy(update={"counters": counters}))
    return k.model_copy(update={"source_lines": lines})


@pytest.mark.parametrize("source", ["collector", "ncu"])
def test_the_atomic_finding_names_the_atomics_line_not_the_brace_after_it(source: str) -> None:
    k = _kernel(source)
    brace = next(s for s in k.source_lines if s.line == BRACE and s.file.endswith("planted.cu"))
    assert brace.counters.get(DRAIN, 0) > 50_000  # recorded: the warps' drain at the exit lands on the brace
    assert _line_no(REGISTRY["memory.atomic-contention"].run(k)[0].line) == ATOMIC
    # an atomic whose queue never throttles (stated: no lg_throttle/membar samples) with 10x the recorded drain
    # at the brace: the line is still the atomic's, found by the global memory it moves
    quiet = _without_throttles(k, drain_factor=10.0)
    f = REGISTRY["memory.atomic-contention"].run(quiet)[0]
    assert _line_no(f.line) == ATOMIC, f.line


def test_a_drain_stall_is_placed_on_the_stores_not_the_exit() -> None:
    """The collector's run with its stalls stated as mostly drain (the exit waiting for the atomics): the dominant
    stall finding names the line that moves global memory, not the closing brace that holds the exit."""
    k = _kernel("collector")
    k = k.model_copy(update={"stall_reasons": {"drain": 30.0, "long_scoreboard": 5.0, "selected": 1.0}})
    found = REGISTRY["stalls.dominant-stall-reason"].run(k, context={"sass": {}})
    assert found and found[0].topic == "drain"
    assert _line_no(found[0].line) == ATOMIC, found[0].line


def test_a_line_of_braces_holds_no_cost_of_its_own() -> None:
    k = _kernel("collector")
    by_line = {s.line: s for s in k.source_lines if s.file.endswith("planted.cu")}
    assert by_line[BRACE].code == "}" and not has_code(by_line[BRACE])
    assert has_code(by_line[ATOMIC]) and "atomicAdd" in (by_line[ATOMIC].code or "")


def test_findings_cite_the_users_file_not_the_workspace_copy() -> None:
    """The recorded reports name the compile workspace's copy (``.../workspaces/compile-<id>/planted.cu``); the
    rules stage names the file the user compiled (here as a path they gave, stated), and leaves toolkit headers as
    they are."""
    from kernelscope.heuristics.pipeline import diagnose_stages, user_file, user_sources

    d = FIX / "planted" / CASE
    light, deep = load_profile(d / "light.ncu-rep"), load_profile(d / "deep.ncu-rep")
    files = {s.file for k in deep.kernels for s in k.source_lines}
    copy = next(f for f in files if f.endswith("planted.cu"))
    assert "/workspaces/compile-" in copy
    shown = "src/kernels/planted.cu"
    assert user_file(copy, shown) == shown
    # the atomic, inlined from the toolkit's header, counts on its call site (measure.sourcemap): no header line
    # is left in the report's source lines, and a header named anyway stays as it is (stated path)
    assert not [f for f in files if is_toolkit_header(f)]
    header = "/opt/cuda/targets/x86_64-linux/include/sm_20_atomic_functions.hpp"
    assert is_toolkit_header(header) and user_file(header, shown) == header
    assert user_file(copy.replace("planted.cu", "common.cuh"), shown) == "common.cuh"
    # an eval candidate's files, wherever the job that built them ran: never the server's paths
    home = "/srv/ks-home"
    assert user_file(f"{home}/workspaces/eval-8a1b/relu_knobs.cu", None) == "relu_knobs.cu"  # run's build, reused
    assert user_file(f"{home}/build-cache/torch-extensions/62c3/ks_softmax_71/cuda.cu", None) == "ks_softmax_71/cuda.cu"
    assert user_file(f"{home}/elsewhere/x.cu", None, [f"{home}/elsewhere"]) == "x.cu"
    assert user_file("/usr/include/x.h", None, [""]) == "/usr/include/x.h"
    diags, _ = diagnose_stages(user_sources(light, shown), user_sources(deep, shown))
    f = next(x for k in diags for x in k.findings if x.rule == "memory.atomic-contention")
    assert f.line is not None and f.line.startswith(f"{shown}:{ATOMIC}") and "workspaces" not in f.diagnosis
    assert all("workspaces" not in line for k in diags for line in k.hot_lines)


# ------------------------------------------------------------------------------------------ barriers, branches
BARRIER = "smsp__pcsamp_warps_issue_stalled_barrier"


def _sass(code: dict[int, str]) -> Callable[[int], str]:
    """pc -> SASS text of a few stated instructions, '' elsewhere (as ncu_report's IAction.sass_by_pc answers)."""
    return lambda pc: code.get(pc, "")


def test_barrier_samples_belong_to_the_barrier_before_them() -> None:
    s = SASS_INSTRUCTION_BYTES
    code = _sass({0: "  BAR.SYNC.DEFER_BLOCKING 0x0", s: "  LDS R8, [R5]", 2 * s: "  @!P0 MEMBAR.SC.GPU",
                  3 * s: "  FADD R1, R2, R3"})
    assert _wait_owner(BARRIER, s, code) == 0  # sampled after the barrier: the barrier's
    assert _wait_owner(BARRIER, 0, code) == 0  # on the barrier itself: stays
    assert _wait_owner(BARRIER + "_not_issued", s, code) == 0
    assert _wait_owner("smsp__pcsamp_warps_issue_stalled_long_scoreboard", s, code) == s  # other reasons: as sampled
    assert _wait_owner("smsp__pcsamp_warps_issue_stalled_membar", 3 * s, code) == 2 * s  # a predicated MEMBAR
    # a deferred barrier blocks at the first instruction that needs it, a few instructions on: still the barrier's
    assert _wait_owner(BARRIER, 3 * s, code) == 0
    assert _wait_owner(BARRIER, s, _sass({})) == s  # no SASS: as sampled


def test_a_barrier_wait_is_not_charged_across_a_jump() -> None:
    s = SASS_INSTRUCTION_BYTES
    code = {0: "BAR.SYNC.DEFER_BLOCKING 0x0", s: "BRA 0x1000", 2 * s: "ISETP.NE.AND P0, PT, R1, RZ, PT",
            3 * s: "@P0 BRA 0x40", 4 * s: "LDS R2, [R3]"}
    assert waited_on(2 * s, _sass(code), {"BAR"}) is None  # reached from elsewhere: the jump above ends the search
    assert waited_on(4 * s, _sass(code), {"BAR"}) is None
    code[s] = "@P1 BRA 0x1000"  # a conditional branch falls through
    assert waited_on(4 * s, _sass(code), {"BAR"}) == 0
    far = {0: "BAR.SYNC 0x0", **{i * s: "FADD R1, R1, R2" for i in range(1, WAIT_REACH + 2)}}
    assert waited_on(WAIT_REACH * s, _sass(far), {"BAR"}) == 0
    assert waited_on((WAIT_REACH + 1) * s, _sass(far), {"BAR"}) is None  # beyond the reach


def test_a_deferred_barrier_wait_counts_on_the_barrier_line() -> None:
    """Case 109 (recorded): each BAR.SYNC.DEFER_BLOCKING's wait is sampled two or three instructions on, often on
    the next statement's line; the samples, and the line's sample count with them, go to the __syncthreads."""
    k = _planted2.kernel("109-batched-cholesky-sync-steps", "cholesky_elementwise")
    marked = set(_planted2.marked("109-batched-cholesky-sync-steps"))
    on = {_line_no(s.label): s.counters.get(BARRIER, 0.0) for s in k.source_lines}
    assert sum(v for ln, v in on.items() if ln in marked) >= 0.9 * sum(on.values())
    [f] = REGISTRY["stalls.barrier-heavy"].run(k)
    assert _line_no(f.line) in marked
    for s in k.source_lines:  # a line's samples are still the sum of its reasons
        c = s.counters
        reasons = sum(v for m, v in c.items() if m.startswith("smsp__pcsamp_warps_issue_stalled_")
                      and not m.endswith("_not_issued"))
        assert reasons == pytest.approx(c.get("smsp__pcsamp_sample_count", 0.0), rel=1e-6, abs=1e-3)


def test_a_barrier_heavy_kernel_names_its_barrier_line() -> None:
    """Case 40 (recorded: its 24 sweeps unrolled, each barrier's stall samples on the next sweep's first shared
    load): the barrier finding names the __syncthreads line, not the line of the loads after it."""
    k = _planted2.kernel("40-patch-diffusion-sweeps", "diffuse_block_barriers")
    [f] = REGISTRY["stalls.barrier-heavy"].run(k)
    assert [_line_no(f.line)] == _planted2.marked("40-patch-diffusion-sweeps")


def test_a_divergence_names_the_branch_that_splits_the_warps() -> None:
    """Case 14 of the second suite (Nsight Compute) and case 05 of the first (the CUPTI collector, which counts
    divergent branch targets per instruction): the finding names the branch line, where the warps split, not the
    masked loop after it. Without per-line branch counts it falls back to the most serialized sampled line."""
    k = _planted2.kernel("14-data-dependent-branch", "activate_branchy")
    [f] = REGISTRY["control.warp-divergence"].run(k)
    assert [_line_no(f.line)] == _planted2.marked("14-data-dependent-branch")
    got = load_collected(FIX / "collector" / "05-warp-divergence.jsonl")
    c = next(k for k in collected_profile(got).kernels if k.name.startswith("divergent_paths"))
    [f] = REGISTRY["control.warp-divergence"].run(c)
    planted = _planted2.suite().marked_lines((SOURCE.parents[1] / "05-warp-divergence" / "planted.cu").read_text())
    assert [_line_no(f.line)] == planted
    lines = [s.model_copy(update={"counters": {m: v for m, v in s.counters.items()
                                              if m != "smsp__branch_targets_threads_divergent"}})
             for s in c.source_lines]
    [f] = REGISTRY["control.warp-divergence"].run(c.model_copy(update={"source_lines": lines}))
    assert _line_no(f.line) == planted[0] + 2  # path B's loop, the hottest masked line


# ------------------------------------------------------------------------------------------ inlined intrinsics
HEADER = "/opt/cuda/targets/x86_64-linux/include/sm_20_atomic_functions.hpp"


def test_an_inlined_intrinsic_counts_at_its_call_site() -> None:
    """The instruction-level rule of measure.sourcemap, on stated SASS (as the recorded case 08 of the first suite
    has it: the loop's induction update scheduled between the atomic's argument set-up and the atomic)."""
    s = SASS_INSTRUCTION_BYTES
    code = {0: ("LDC.64 R4, c[0x0][0x218]", ("k.cu", 20)), s: ("LDG.E.CONSTANT R3, desc[UR6][R2.64]", ("k.cu", 20)),
            2 * s: ("IADD3 R0, R0, UR4, RZ", ("k.cu", 19)), 3 * s: ("ISETP.GE.U32.AND P0, PT, R0, 0x200000, PT",
                                                                    ("k.cu", 19)),
            4 * s: ("REDG.E.ADD.F32.FTZ.RN.STRONG.GPU desc[UR6][R4.64], R3", (HEADER, 84)),
            5 * s: ("@!P0 BRA 0x7faa6f7ac2c0", ("k.cu", 19)), 6 * s: ("BSYNC B0", (HEADER, 84))}

    def loc_of(pc: int) -> tuple[str, int] | None:
        return code[pc][1] if pc in code else None

    def sass_of(pc: int) -> str:
        return code[pc][0] if pc in code else ""

    assert read_registers(code[4 * s][0]) == {3, 4, 5} and written_registers(code[0][0]) == {4, 5}
    assert call_site(4 * s, (HEADER, 84), loc_of, sass_of) == ("k.cu", 20)  # who set up its address and value
    assert call_site(4 * s, (HEADER, 84), loc_of) == ("k.cu", 19)  # no SASS text: the nearest user line before
    assert call_site(6 * s, (HEADER, 84), loc_of, sass_of) == ("k.cu", 19)  # reads no register: nearest before
    assert call_site(2 * s, ("k.cu", 19), loc_of, sass_of) == ("k.cu", 19)  # the user's own lines stay
    alone = {0: ("REDG.E.ADD.F32 desc[UR6][R4.64], R3", (HEADER, 84))}
    assert call_site(0, (HEADER, 84), lambda pc: alone[pc][1] if pc in alone else None) == (HEADER, 84)


def test_an_atomic_finding_names_the_call_not_a_busier_load() -> None:
    """Case 90 (recorded): the tagger's loss is added with an atomicAdd that the line table places in the toolkit's
    header; the line that moves the most global memory is the logits' load four lines earlier. The finding names
    the atomicAdd's line, found by the atomic instructions each line runs."""
    case = "90-tagger-loss-atomic-per-token"
    k = _planted2.kernel(case, "tagger_loss_atomic")
    assert not [s for s in k.source_lines if is_toolkit_header(s.file)]
    [atomic] = [s for s in k.source_lines if s.counters.get(GLOBAL_ATOMIC_INST)]
    busiest = max(k.source_lines, key=lambda s: s.counters.get("memory_l2_theoretical_sectors_global", 0.0))
    text = (_planted2.REPO / "examples" / "planted2" / case / "planted.cu").read_text().splitlines()
    assert busiest.line != atomic.line and "atomicAdd" in text[atomic.line - 1]
    [f] = REGISTRY["memory.atomic-contention"].run(k)
    assert [_line_no(f.line)] == _planted2.marked(case) == [atomic.line]


def test_a_barrier_deferred_far_still_owns_its_wait() -> None:
    """Case 177 (recorded, dev, healthy): the compiler schedules 13 independent instructions after the tile's last
    BAR.SYNC.DEFER_BLOCKING (line 132), so its 19,379 barrier samples sit on the shared load 14 instructions on
    (line 133). They belong to the barrier, which ends the phase in which warp 0 polls the earlier tiles: most of the
    block's barrier wait is a wait on other blocks."""
    k = _planted2.kernel("177-healthy-meter-segsum-window", "meter_segsum_window")
    on = {_line_no(s.label): s.counters for s in k.source_lines}
    assert on[132].get(BARRIER, 0.0) >= 19000 and not on.get(133, {}).get(BARRIER)
    assert on[132].get(BARRIER_AFTER_POLL) == on[132][BARRIER]
    share = waits_on_other_blocks(k)
    assert share is not None and share[0] >= 0.7


def test_a_memory_intrinsic_counts_where_its_address_is_formed() -> None:
    """atomicAdd(&auth[v], c) on a double (case 165): the header's RED reads the address &auth[v], formed on the
    atomic's line, and the value c, computed on the line before and scheduled after the address. The address's
    writer names the statement (the live CUPTI path named the value's line, 54, before this)."""
    s = SASS_INSTRUCTION_BYTES
    code = {0: ("IMAD.WIDE R4, R9, 0x8, R4", ("k.cu", 55)), s: ("DMUL R6, R2, R6", ("k.cu", 54)),
            2 * s: ("RED.E.ADD.F64.RN.STRONG.GPU desc[UR4][R4.64], R6", (HEADER, 3402))}
    assert call_site(2 * s, (HEADER, 3402), lambda pc: code[pc][1] if pc in code else None,
                     lambda pc: code[pc][0] if pc in code else "") == ("k.cu", 55)
