"""Per-PC profiler values summed by source line, with the counters derived from each instruction's SASS.

Both readers use it: Nsight Compute's report (measure.ncu, which knows each PC's SASS and source line) and the
CUPTI collector's per-instruction passes (measure.collector, given the compiled binary's listing). What is derived
is in models.profile (global atomics, polls, global and chained loads, barrier waits after a poll, the excess sectors
of atomics and of indexed accesses); how, in measure.sourcemap.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable

from kernelscope.measure.sourcemap import (
    ATOMICS,
    LOADS,
    barriers_after_polls,
    base_opcode,
    call_site,
    chained_load,
    indexed_access,
    opcode,
    polls,
    waited_on,
)
from kernelscope.models.profile import (
    ATOMIC_EXCESS_SECTORS,
    BARRIER_AFTER_POLL,
    CHAINED_LOAD_INST,
    EXCESS_SECTORS,
    GLOBAL_ATOMIC_INST,
    GLOBAL_LOAD_INST,
    INDEXED_EXCESS_SECTORS,
    POLL_INST,
)

# stalls a warp waits out with its PC already on the next instruction: the wait belongs to the synchronizing
# instruction before it (a BAR for barrier stalls, a MEMBAR for memory-barrier ones), not to whatever follows
SAMPLES = "smsp__pcsamp_sample_count"
BARRIER_SAMPLES = "smsp__pcsamp_warps_issue_stalled_barrier"
_WAIT_AFTER = {"barrier": frozenset({"BAR"}), "membar": frozenset({"MEMBAR"})}


def wait_owner(name: str, pc: int, sass_of: Callable[[int], str]) -> int:
    """The PC a per-PC sample of ``name`` belongs to: for a barrier-like stall sampled on an instruction after the
    synchronizing one (measure.sourcemap.waited_on), that instruction; else ``pc``."""
    for reason, ops in _WAIT_AFTER.items():
        if name.endswith((f"_stalled_{reason}", f"_stalled_{reason}_not_issued")):
            owner = waited_on(pc, sass_of, ops)
            return pc if owner is None else owner
    return pc


Location = tuple[str, int]


class LineSums:
    """Per-PC metric values summed by source line, with the derived per-line counters the reader adds from each
    instruction's SASS (models.profile: global atomics, polls, global and chained loads, barrier waits after a
    poll). Barrier and memory-barrier stall samples that sit on an instruction after the barrier (a deferred
    barrier blocks at the first instruction that needs it) count on the barrier's line, their samples with them;
    instructions inlined from a toolkit header count on their call site's (measure.sourcemap). ``loc_of`` gives a
    PC's (file, line) or None, ``sass_of`` its SASS text ('' where unknown: nothing is derived there)."""

    def __init__(self, loc_of: Callable[[int], Location | None], sass_of: Callable[[int], str]) -> None:
        self._loc_of, self._sass_of = loc_of, sass_of
        self.per_line: dict[Location, dict[str, float]] = defaultdict(lambda: defaultdict(float))
        self._locs: dict[int, Location | None] = {}
        self._texts: dict[int, str] = {}
        self._sites: dict[int, Location | None] = {}
        self._polled: set[int] = set()  # PCs of instructions that wait for other blocks
        self._barriers: set[int] = set()  # PCs of block-wide barriers that wait (not BAR.ARV)
        self._barrier_wait: dict[int, float] = defaultdict(float)  # barrier stall samples by the barrier waited on

    def loc_of(self, pc: int) -> Location | None:
        if pc not in self._locs:
            self._locs[pc] = self._loc_of(pc)
        return self._locs[pc]

    def sass_of(self, pc: int) -> str:
        if pc not in self._texts:
            self._texts[pc] = self._sass_of(pc)
        return self._texts[pc]

    def site(self, pc: int) -> Location | None:
        if pc not in self._sites:
            self._sites[pc] = call_site(pc, self.loc_of(pc), self.loc_of, self.sass_of)
        return self._sites[pc]

    def add(self, name: str, sampled: int, v: float) -> None:
        """One per-PC value of metric ``name`` at PC ``sampled``."""
        pc = wait_owner(name, sampled, self.sass_of) if "_stalled_" in name else sampled
        loc = self.site(pc)
        if loc is None:
            return
        self.per_line[loc][name] += v
        if name == EXCESS_SECTORS and v:
            if base_opcode(self.sass_of(pc)) in ATOMICS:
                self.per_line[loc][ATOMIC_EXCESS_SECTORS] += v
            if indexed_access(pc, self.sass_of):
                self.per_line[loc][INDEXED_EXCESS_SECTORS] += v
        if name == BARRIER_SAMPLES:
            self._barrier_wait[pc] += v
        if pc != sampled and not name.endswith("_not_issued") and (was := self.site(sampled)) != loc:
            # the samples move with their stall reason: a line's sample count stays the sum of its reasons
            self.per_line[loc][SAMPLES] += v
            if was is not None:
                self.per_line[was][SAMPLES] -= v
        if name == "inst_executed":
            self._count_instruction(pc, loc, v)

    def _count_instruction(self, pc: int, loc: Location, v: float) -> None:
        text = self.sass_of(pc)
        full, op = opcode(text), base_opcode(text)
        counters = self.per_line[loc]
        if op == "BAR" and ".ARV" not in full:
            self._barriers.add(pc)
        polled = polls(pc, self.sass_of)  # an atomic can be a poll: a read that spins on other blocks' writes
        if op in ATOMICS and not polled:
            counters[GLOBAL_ATOMIC_INST] += v
        elif polled:
            counters[POLL_INST] += v
            self._polled.add(pc)
        elif op in LOADS:
            counters[GLOBAL_LOAD_INST] += v
            if chained_load(pc, self.sass_of):
                counters[CHAINED_LOAD_INST] += v

    def finish(self) -> dict[Location, dict[str, float]]:
        """The sums, with the barrier samples at barriers that end a polling phase counted."""
        for pc in barriers_after_polls(self._barriers, self._polled):
            if self._barrier_wait.get(pc) and (loc := self.site(pc)) is not None:
                self.per_line[loc][BARRIER_AFTER_POLL] += self._barrier_wait[pc]
        return self.per_line
