"""Loads that wait for an earlier load's value (measure.sourcemap.chained_load) and the latency rule that reads them
(issue 29: lines from the instruction that carries the cost, causes before symptoms). The SASS listings are nvcc 13's
for sm_90 (``nvcc -O3 -arch=sm_90 -cubin``, ``cuobjdump -sass``) of the small kernels quoted with each; the recorded
kernels are the second planted suite's H100 captures (tests/fixtures/planted2)."""

from __future__ import annotations

import _planted2
import pytest

from kernelscope.heuristics import REGISTRY
from kernelscope.heuristics.latency import chained_share
from kernelscope.heuristics.pipeline import diagnose_kernels
from kernelscope.measure.sourcemap import chained_load, indexed_access
from kernelscope.models import MetricValue
from kernelscope.models.profile import CHAINED_LOAD_INST, INDEXED_EXCESS_SECTORS

# while (lo < hi) { int mid = (lo + hi) >> 1; if (a[mid] < key) lo = mid + 1; else hi = mid; }  (key = q[t] before)
SEARCH = """\
00c0 LDC.64 R4, c[0x0][0x210]
00d0 LEA R2, P0, R0, UR6, 0x2
00e0 LEA.HI.X R3, R0, UR7, R11, 0x2, P0
00f0 LDG.E.CONSTANT R8, desc[UR4][R2.64]
0100 ULDC UR6, c[0x0][0x228]
0110 BSSY B0, 0x1e0
0120 IMAD.MOV.U32 R7, RZ, RZ, RZ
0130 IMAD.U32 R6, RZ, RZ, UR6
0140 IMAD.IADD R2, R7, 0x1, R6
0150 SHF.R.S32.HI R9, RZ, 0x1, R2
0160 IMAD.WIDE R2, R9, 0x4, R4
0170 LDG.E.CONSTANT R3, desc[UR4][R2.64]
0180 FSETP.GEU.AND P0, PT, R3, R8, PT
0190 SEL R6, R6, R9, !P0
01a0 @!P0 VIADD R7, R9, 0x1
01b0 ISETP.GE.AND P0, PT, R7, R6, PT
01c0 @!P0 BRA 0x140
01d0 BSYNC B0
01e0 ULDC.64 UR6, c[0x0][0x220]
01f0 EXIT"""

# for (h = 0; h < hops; ++h) j = next[j];  (the loop nvcc unrolls by four; its remainder)
CHASE = """\
0550 IMAD.WIDE R2, R0, 0x4, R4
0560 LDG.E.CONSTANT R0, desc[UR4][R2.64]
0570 IADD3 R6, R6, -0x1, RZ
0580 ISETP.NE.AND P0, PT, R6, RZ, PT
0590 @P0 BRA 0x550
05a0 EXIT"""

# for (j = rp[r]; j < rp[r + 1]; ++j) s += v[j] * x[col[j]];  (the remainder loop: a gather through one index)
GATHER = """\
0280 MOV R10, R15
0290 MOV R11, R16
02a0 LDG.E.CONSTANT R9, desc[UR4][R10.64]
02b0 MOV R10, R13
02c0 MOV R11, R14
02d0 LDG.E.CONSTANT R12, desc[UR4][R10.64]
02e0 IMAD.WIDE R8, R9, 0x4, R4
02f0 LDG.E.CONSTANT R9, desc[UR4][R8.64]
0300 IADD3 R6, R6, -0x1, RZ
0310 ISETP.NE.AND P1, PT, R6, RZ, PT
0320 IADD3 R15, P2, R15, 0x4, RZ
0330 IADD3 R13, P3, R13, 0x4, RZ
0340 IADD3 R7, R7, 0x1, RZ
0350 IADD3.X R16, RZ, R16, RZ, P2, !PT
0360 IADD3.X R14, RZ, R14, RZ, P3, !PT
0370 FFMA R22, R9, R12, R22
0380 @P1 BRA 0x280
0390 EXIT"""

# an argmax walk (as recorded case 103 has it): the compare on the loaded value sets P3, and the address update's
# carry-out then writes P3 again: the carry, not the compare, reaches the next iteration's address
CARRY = """\
0100 LDG.E.128.CONSTANT R4, desc[UR8][R2.64]
0110 FSETP.GT.AND P3, PT, R4, R23, PT
0120 FSEL R23, R4, R23, P3
0130 IADD3 R8, P3, R2, 0x4000, RZ
0140 IMAD.X R3, RZ, RZ, R3, P3
0150 MOV R2, R8
0160 ISETP.GE.AND P2, PT, R0, 0x1b40, PT
0170 VIADD R0, R0, 0x400
0180 @!P2 BRA 0x100
0190 EXIT"""


def _code(listing: str):  # type: ignore[no-untyped-def]
    code = {int(a, 16): t for a, t in (ln.split(" ", 1) for ln in listing.splitlines())}
    return lambda pc: code.get(pc, "")


def test_a_load_whose_address_comes_from_the_last_iteration_is_chained() -> None:
    assert chained_load(0x560, _code(CHASE))  # j = next[j]
    assert chained_load(0x170, _code(SEARCH))  # the bounds come from the compared value, through a select
    assert not chained_load(0xF0, _code(SEARCH))  # key = q[t]: its address is the thread's index


def test_a_gather_through_one_index_is_not_a_chain() -> None:
    code = _code(GATHER)
    assert not any(chained_load(pc, code) for pc in (0x2A0, 0x2D0, 0x2F0))


def test_a_carry_out_overwrites_the_predicate_it_names() -> None:
    assert not chained_load(0x100, _code(CARRY))
    # the same walk with the address taken from the compared value: a chain
    chain = CARRY.replace("0130 IADD3 R8, P3, R2, 0x4000, RZ", "0130 SEL R8, R2, R4, P3")
    assert chained_load(0x100, _code(chain))


def test_three_loads_in_a_row_are_a_chain_without_a_loop() -> None:
    code = _code("0000 LDG.E R2, desc[UR4][R6.64]\n0010 IMAD.WIDE R4, R2, 0x4, R8\n0020 LDG.E R3, desc[UR4][R4.64]\n"
                 "0030 IMAD.WIDE R4, R3, 0x4, R8\n0040 LDG.E R5, desc[UR4][R4.64]\n0050 EXIT")
    assert [chained_load(pc, code) for pc in (0x00, 0x20, 0x40)] == [False, False, True]  # a[b[c[i]]]


@pytest.mark.parametrize("case,kernel", [("21-binary-search", "search_one"), ("82-octree-leaf-lookup", "locate_one"),
                                         ("112-feature-map-treap-walk", "lookup_treap")])
def test_recorded_chains_are_found_on_their_line(case: str, kernel: str) -> None:
    """Development cases (recorded): the reader counts the walk's loads as chained, on the marked line, and the
    latency finding names that line."""
    k = _planted2.kernel(case, kernel)
    share = chained_share(k)
    assert share is not None and share[0] >= 0.8
    assert share[1] is not None and int(share[1].rsplit(":", 1)[1]) in _planted2.marked(case)
    [f] = REGISTRY["latency.dependent-loads"].run(k)
    assert f.line == share[1] and any(e.metric == "chained_global_load_share" for e in f.evidence)


@pytest.mark.parametrize("case,kernel", [("103-healthy-vocab-argmax-block-row", "argmax_block_row"),
                                         ("55-healthy-embedding-gather", "gather_rows"),
                                         ("15-csr-spmv-scalar", "spmv_csr_scalar")])
def test_streams_and_gathers_have_no_chain(case: str, kernel: str) -> None:
    k = _planted2.kernel(case, kernel)
    share = chained_share(k)
    assert share is not None and share[0] < 0.1
    assert not any(s.counters.get(CHAINED_LOAD_INST) for s in k.source_lines) or share[0] < 0.1


def test_a_shown_chain_is_named_under_the_roof_only() -> None:
    """Stated on case 21 (recorded: memory 19%, compute 29%): with the chain shown in the SASS, memory at 50% is still
    a chain's latency; at 60% (a unit near its roof) it is not; without the per-line counts (the CUPTI collector)
    the unshown limit of 40% applies."""
    k = _planted2.kernel("21-binary-search", "search_one")
    rule = REGISTRY["latency.dependent-loads"]
    assert rule.run(k.model_copy(update={"memory_throughput_pct": 50.0}))
    assert not rule.run(k.model_copy(update={"memory_throughput_pct": 60.0}))
    bare = [s.model_copy(update={"counters": {m: v for m, v in s.counters.items() if not m.startswith("derived__")}})
            for s in k.source_lines]
    unshown = k.model_copy(update={"source_lines": bare})
    assert chained_share(unshown) is None
    assert rule.run(unshown) and not rule.run(unshown.model_copy(update={"memory_throughput_pct": 50.0}))
    few = k.model_copy(update={"metrics": {**k.metrics, "smsp__sass_inst_executed_op_global_ld.sum":
                                           MetricValue(value=100 * (k.num("smsp__sass_inst_executed_op_global_ld.sum")
                                                                    or 0.0))}})
    assert not rule.run(few.model_copy(update={"memory_throughput_pct": 50.0}))  # a small share of the loads


# out[rank[i]] = v[i] (nvcc 13, sm_90): the store's address is the loaded rank
SCATTER = """\
00b0 IMAD.WIDE R4, R7, 0x4, R4
00c0 LDG.E.CONSTANT R5, desc[UR4][R4.64]
00d0 IMAD.WIDE R2, R7, 0x4, R2
00e0 LDC.64 R6, c[0x0][0x220]
00f0 LDG.E.CONSTANT R3, desc[UR4][R2.64]
0100 IMAD.WIDE R6, R5, 0x4, R6
0110 STG.E desc[UR4][R6.64], R3
0120 EXIT"""

# for (j = ptr[r]; j < ptr[r + 1]; ++j) s += v[j];  a thread walks its row: ptr[r] is loaded before the loop,
# inside it the address only steps
ROW_WALK = """\
00a0 IMAD.WIDE R2, R5, 0x4, R2
00b0 LDG.E.CONSTANT R0, desc[UR4][R2.64]
00c0 LDG.E.CONSTANT R7, desc[UR4][R2.64+0x4]
00d0 BSSY B0, 0x1e0
00e0 IMAD.MOV.U32 R9, RZ, RZ, RZ
00f0 ISETP.GE.AND P0, PT, R0, R7, PT
0100 @P0 BRA 0x1d0
0110 LDC.64 R2, c[0x0][0x218]
0120 IMAD.MOV.U32 R9, RZ, RZ, RZ
0130 IMAD.WIDE R2, R0, 0x4, R2
0140 MOV R4, R2
0150 IMAD.MOV.U32 R2, RZ, RZ, R4
0160 LDG.E.CONSTANT R2, desc[UR4][R2.64]
0170 IADD3 R0, R0, 0x1, RZ
0180 IADD3 R4, P1, R4, 0x4, RZ
0190 ISETP.GE.AND P0, PT, R0, R7, PT
01a0 IMAD.X R3, RZ, RZ, R3, P1
01b0 FADD R9, R2, R9
01c0 @!P0 BRA 0x150
01d0 BSYNC B0
01e0 EXIT"""


def test_gathers_and_scatters_through_an_index_are_indexed() -> None:
    scatter = _code(SCATTER)
    assert indexed_access(0x110, scatter)  # the store to out[rank[i]]
    assert not indexed_access(0xC0, scatter) and not indexed_access(0xF0, scatter)  # rank[i], v[i]: streams
    gather = _code(GATHER)
    assert indexed_access(0x2F0, gather) and not indexed_access(0x2A0, gather)  # x[col[j]] in a loop; col[j]
    # the next index loaded at the end of the body, used at the top of the next iteration
    ahead = _code("0100 IMAD.WIDE R4, R9, 0x4, R2\n0110 LDG.E R6, desc[UR4][R4.64]\n0120 IADD3 R10, P0, R10, 0x4, RZ\n"
                  "0130 IMAD.X R11, RZ, RZ, R11, P0\n0140 LDG.E R9, desc[UR4][R10.64]\n0150 FADD R8, R8, R6\n"
                  "0160 ISETP.NE.AND P1, PT, R10, R12, PT\n0170 @P1 BRA 0x100\n0180 EXIT")
    assert indexed_access(0x110, ahead) and not indexed_access(0x140, ahead)
    walk = _code(ROW_WALK)
    assert not indexed_access(0x160, walk)  # v[j]: its base was loaded before the loop; inside it only steps
    assert not indexed_access(0xB0, walk)


def test_a_spread_gather_is_a_note_and_a_thread_walking_its_run_is_not() -> None:
    """Cases 193 and 194 (recorded, dev, healthy): weights gathered through hashed ids and a permutation scattered a
    key at a time; all of their excess sectors are indexed accesses and L1 hits 0-1%: the spread is the data's, a
    note with data-order fixes. Case 199 (dev, planted): a thread per embedding bag walks each row one float at a
    time; 91% of its excess is indexed, but L1 hits 75% (each lane re-reads its row's sectors): a remap fixes it."""
    rule = REGISTRY["memory.uncoalesced-global-access"]
    for case, name in (("193-healthy-ctr-hashed-scores-group8", "ctr_score_group8"),
                       ("194-healthy-sort-apply-ranks-scatter", "apply_ranks_vec4")):
        k = _planted2.kernel(case, name)
        [f] = rule.run(k)
        assert f.severity == "info" and "spread as the data" in f.diagnosis and "sort" in f.fixes[0].action
        assert not [g for g in diagnose_kernels([k])[0].findings if g.severity != "info"]
        hits = k.model_copy(update={"l1_hit_rate_pct": 60.0})  # stated: the same sectors re-read
        assert rule.run(hits)[0].severity == "high"
    bag = _planted2.kernel("199-embbag-weighted-thread-per-bag", "embbag_thread_per_bag")
    [f] = rule.run(bag)
    assert f.severity == "high" and "threadIdx.x" in f.fixes[0].action
    indexed = sum(s.counters.get(INDEXED_EXCESS_SECTORS, 0.0) for s in bag.source_lines)
    assert indexed >= 0.9 * (bag.num("derived__memory_l2_theoretical_sectors_global_excessive") or 0.0)
