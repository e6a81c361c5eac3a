"""What a job keeps on the GPU, counted before the trials against the memory free, and lowered where it
can be: fewer poisoned copies, no kept copy of the previous trial's outputs, fewer rotated input sets for
timing. A problem that fits in none of these is answered "too large for this GPU with these settings",
with the numbers and the fix. Pure functions (no torch), unit-tested."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

GIB = float(1 << 30)
CHUNK_ELEMENTS = 1 << 22  # elements compared at a time (outputs are compared in chunks, in place)
SCRATCH_PER_ELEMENT = 6 * 8  # the comparison's temporaries per chunk element: at most six 8-byte tensors


class TooLarge(Exception):
    """The problem does not fit on this GPU even with the fewest copies the checks allow."""


@dataclass(frozen=True)
class Sizes:
    """Bytes of one set of inputs, of the reference's outputs of one call, and the reference's working
    memory beyond its outputs (its peak during one call, less its outputs)."""

    inputs: int
    outputs: int
    work: int


@dataclass
class MemoryPlan:
    poison_copies: int
    keep_previous: bool  # the previous trial's outputs kept for the cached-output check
    rotate_sets: int
    needed: int = 0
    free: int = 0
    counted: dict[str, int] = field(default_factory=dict)
    lowered: list[str] = field(default_factory=list)

    def note(self) -> str | None:
        if not self.lowered:
            return None
        return (f"memory: lowered to fit ({'; '.join(self.lowered)}): needs {self.needed / GIB:.2f} GiB of "
                f"{self.free / GIB:.2f} GiB free")


def scratch_bytes(output_elements: int) -> int:
    return min(max(output_elements, 0), CHUNK_ELEMENTS) * SCRATCH_PER_ELEMENT


def counted(s: Sizes, output_elements: int, poison_copies: int, keep_previous: bool) -> dict[str, int]:
    """What the correctness trials still allocate while one set of inputs and the reference's outputs are
    alive: the candidate's copy of the inputs, then either the poisoned blocks or the candidate's own run
    (its outputs and, assumed like the reference's, its working memory), the kept outputs of the previous
    trial (reference and candidate) and the comparison's scratch."""
    return {"candidate inputs": s.inputs,
            "poisoned copies, or the candidate's outputs and work": max(poison_copies * s.outputs,
                                                                        s.outputs + s.work),
            "previous trial's outputs": 2 * s.outputs if keep_previous else 0,
            "comparison scratch": scratch_bytes(output_elements)}


def timing_needed(s: Sizes, rotate_sets: int, flush_bytes: int) -> int:
    """The timing's extra need beyond one set of inputs and one call's outputs: the other input sets,
    the working memory of a call and the L2 flush buffer."""
    return (rotate_sets - 1) * s.inputs + s.work + flush_bytes


def plan(free: int, s: Sizes, output_elements: int, *, poison_copies: int, rotate_sets: int,
         flush_bytes: int = 0, margin: float = 0.05) -> MemoryPlan:
    """The most checking that fits in ``free`` bytes (less ``margin`` for the allocator's rounding and
    fragmentation): for the trials, poisoned copies lowered first (to one), then the previous trial's kept
    outputs dropped; for the timing, the rotated input sets lowered (to one). Raises TooLarge with the
    numbers and the fix where nothing fits."""
    budget = int(free * (1 - margin))
    p = MemoryPlan(poison_copies=max(1, poison_copies), keep_previous=True, rotate_sets=max(1, rotate_sets),
                   free=free)

    def trials() -> int:
        return sum(counted(s, output_elements, p.poison_copies, p.keep_previous).values())

    def need() -> int:
        return max(trials(), timing_needed(s, p.rotate_sets, flush_bytes))

    while trials() > budget and p.poison_copies > 1:
        p.poison_copies = max(1, p.poison_copies // 2)
    if p.poison_copies != max(1, poison_copies):
        p.lowered.append(f"{p.poison_copies} poisoned cop{'y' if p.poison_copies == 1 else 'ies'} instead of "
                         f"{poison_copies}")
    if trials() > budget:
        p.keep_previous = False
        p.lowered.append("the previous trial's outputs not kept (no cached-output check)")
    while timing_needed(s, p.rotate_sets, flush_bytes) > budget and p.rotate_sets > 1:
        p.rotate_sets -= 1
    if p.rotate_sets != max(1, rotate_sets):
        p.lowered.append(f"{p.rotate_sets} input set(s) rotated while timing instead of {rotate_sets}")
    p.counted = counted(s, output_elements, p.poison_copies, p.keep_previous)
    p.counted["timing (other input sets, working memory, L2 flush)"] = timing_needed(s, p.rotate_sets, flush_bytes)
    p.needed = need()
    if p.needed > budget:
        raise TooLarge(too_large_message(p, s))
    return p


def too_large_message(p: MemoryPlan, s: Sizes) -> str:
    parts = ", ".join(f"{k} {v / GIB:.2f} GiB" for k, v in p.counted.items() if v)
    return (f"too large for this GPU with these settings: the checks need {p.needed / GIB:.2f} GiB more but "
            f"{p.free / GIB:.2f} GiB are free (with one set of inputs of {s.inputs / GIB:.2f} GiB and the "
            f"reference's outputs of {s.outputs / GIB:.2f} GiB already allocated; counted: {parts}; already "
            "lowered to one poisoned copy, no kept previous outputs, one input set). Fix: smaller inputs in "
            "get_inputs() (a smaller batch), or a GPU with more memory.")


def tensor_bytes(values: list[Any]) -> int:
    """Bytes of the tensors among ``values`` (anything with ``numel`` and ``element_size``)."""
    return sum(int(v.numel()) * int(v.element_size()) for v in values
               if hasattr(v, "numel") and hasattr(v, "element_size"))
