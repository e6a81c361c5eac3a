"""Where an instruction's cost belongs in the user's source.

Intrinsics such as ``atomicAdd`` or ``__shfl_xor_sync`` are inlined from the CUDA toolkit's headers, and
the line table names the header's line (``sm_20_atomic_functions.hpp:84``) for the instruction that
carries their cost. A user can act only on the call site, so the Nsight Compute report's reader charges a
header instruction to its call site:

- where the SASS text is known, the line of the nearest earlier instruction in the user's files that
  writes one of the registers the header instruction reads (the call's arguments: the address and the
  value of an atomic), since the scheduler freely moves unrelated instructions (a loop's induction
  update) between the argument set-up and the call;
- else the nearest instruction before it (or, failing that, after it) in the user's files.

The CUPTI collector's records carry no SASS text, and the nearest-line guess alone misplaces costs there
(the recorded 07-ffma-matmul run: the wait on a load, sampled on a half-to-float conversion inlined from
cuda_fp16.hpp, would land on the loop's header), so its header lines stay as the line table names them and
the rules prefer the user's lines over them (heuristics.memory.hottest_source).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from functools import lru_cache

from kernelscope.models.profile import is_toolkit_header

Location = tuple[str, int]  # (file, line)
SASS_INSTRUCTION_BYTES = 16  # every SASS instruction since Volta
CALL_SITE_REACH = 16  # instructions searched on each side of an inlined header instruction

_REG = re.compile(r"\bR(\d+)(\.64|\.128)?\b")
_WIDTH = {None: 1, ".64": 2, ".128": 4}
LOADS = frozenset({"LDG", "LD"})  # global and generic loads (not shared, local or constant)
STORES = frozenset({"STG", "ST"})  # global and generic stores
ATOMICS = frozenset({"ATOM", "ATOMG", "RED", "REDG"})  # global atomics and reductions


def opcode(sass: str) -> str:
    """The opcode of one SASS instruction with its modifiers, past any predicate guard
    (``@!P0 LDG.E.64.STRONG.SYS R4, ...`` -> ``LDG.E.64.STRONG.SYS``); '' for no instruction."""
    words = sass.strip().split()
    if words and words[0].startswith("@"):
        words = words[1:]
    return words[0] if words else ""


def base_opcode(sass: str) -> str:
    """The opcode without its modifiers (``@!P0 LDG.E.64.STRONG.SYS R4, ...`` -> ``LDG``); '' for no instruction."""
    return opcode(sass).split(".")[0]


def _operands(sass: str) -> list[str]:
    """The operands of one SASS instruction (``@P0 IADD3 R0, R0, UR4, RZ ;`` -> ['R0', 'R0', 'UR4', 'RZ'])."""
    words = sass.strip().rstrip(";").split(None, 1)
    if words and words[0].startswith("@"):  # a predicate guard
        words = words[1].split(None, 1) if len(words) > 1 else []
    return [o.strip() for o in words[1].split(",")] if len(words) > 1 else []


def registers(operand: str) -> set[int]:
    """The general registers an operand names, a 64- or 128-bit pair or quad counted register by register."""
    out: set[int] = set()
    for m in _REG.finditer(operand):
        base = int(m.group(1))
        out.update(range(base, base + _WIDTH[m.group(2)]))
    return out


def read_registers(sass: str) -> set[int]:
    """Every general register the instruction names (its sources, and for stores and reductions, which write
    no register, all of them)."""
    return set().union(*(registers(o) for o in _operands(sass))) if sass else set()


def written_registers(sass: str) -> set[int]:
    """The registers the instruction's first operand (its destination, where it has one) names, as wide as the
    opcode's modifiers make it (``LDC.64 R4``, ``IMAD.WIDE R2`` and ``CS2R R4`` write a pair, ``LDG.E.128 R8`` a
    quad)."""
    ops = _operands(sass)
    if not ops:
        return set()
    regs = registers(ops[0])
    base, *mods = opcode(sass).split(".")
    width = 4 if "128" in mods else 2 if "64" in mods or "WIDE" in mods or base == "CS2R" else 1  # CS2R: a pair
    if len(regs) == 1 and width > 1:
        (base,) = regs
        regs = set(range(base, base + width))
    return regs


def call_site(pc: int, loc: Location | None, loc_of: Callable[[int], Location | None],
              sass_of: Callable[[int], str] | None = None, step: int = SASS_INSTRUCTION_BYTES,
              reach: int = CALL_SITE_REACH) -> Location | None:
    """``loc`` (the line table's location of the instruction at ``pc``), or, where that is a toolkit header, the
    location of its call site in the user's files (the module's doc says how it is found, ``reach`` instructions
    each way). ``loc_of`` gives another PC's location and ``sass_of`` its SASS text ('' or None where unknown).
    Where no user instruction is that close, ``loc`` stands."""
    if loc is None or not is_toolkit_header(loc[0]):
        return loc
    text = (sass_of(pc) or "") if sass_of is not None else ""
    # a memory intrinsic's statement is where its address is formed (atomicAdd(&out[v], c): the &out[v]), so the
    # writers of its address registers are looked for first, then those of anything it reads
    address = {int(t[1:]) for t in _address_tokens(text) if t.startswith("R")}
    for reads in (address, read_registers(text)):
        for i in range(1, reach + 1) if reads else ():
            other = loc_of(pc - i * step)
            if other is not None and not is_toolkit_header(other[0]) and \
                    written_registers(sass_of(pc - i * step) or "") & reads:  # type: ignore[misc]
                return other
    for direction in (-1, 1):
        for i in range(1, reach + 1):
            other = loc_of(pc + direction * i * step)
            if other is not None and not is_toolkit_header(other[0]):
                return other
    return loc


# ------------------------------------------------------------------------------------------ spin-waits
WAIT_REACH = 32  # instructions before a barrier-stalled one searched for the barrier it waits on
_FLOW_ENDS = frozenset({"BRA", "BRX", "JMP", "JMX", "RET", "EXIT", "CALL"})


def waited_on(pc: int, sass_of: Callable[[int], str], ops: frozenset[str] | tuple[str, ...],
              step: int = SASS_INSTRUCTION_BYTES, reach: int = WAIT_REACH) -> int | None:
    """The synchronizing instruction (opcode in ``ops``, e.g. ``BAR``) a stall sampled at ``pc`` waits on: ``pc``
    itself, or the nearest one at most ``reach`` instructions before it in straight-line code. A deferred barrier
    (``BAR.SYNC.DEFER_BLOCKING``) lets the warp issue the independent instructions after it, so the wait is
    sampled on the first one that depends on it, up to a dozen or more instructions on (often on another line).
    The search stops at an unconditional control transfer, above which ``pc`` is reached from elsewhere. None
    where no such instruction is found."""
    for i in range(reach + 1):
        text = sass_of(pc - i * step)
        op = base_opcode(text)
        if not op:
            return None
        if op in ops:
            return pc - i * step
        if i and op in _FLOW_ENDS and not text.strip().startswith("@"):
            return None
    return None


def barriers_after_polls(barriers: Iterable[int], polls_at: Iterable[int]) -> set[int]:
    """The barriers (their PCs) that end a phase holding a poll: a polling instruction after the previous barrier in
    program order and before this one. The rest of the block waits there while a warp waits for other blocks (a
    decoupled look-back's status loads, a ticket), so that wait is the other blocks', not the barrier's."""
    order = sorted(set(barriers))
    polled = sorted(set(polls_at))
    out: set[int] = set()
    prev = -1
    for bar in order:
        if any(prev < p < bar for p in polled):
            out.add(bar)
        prev = bar
    return out


_PRED = re.compile(r"\bU?P([0-6])\b")
SPIN_REACH = 32  # instructions after a load searched for the back edge of the loop around it


def _guard(sass: str) -> str | None:
    """The predicate guarding an instruction (``@!P0 BRA ...`` -> 'P0'), None where unguarded."""
    words = sass.strip().split(None, 1)
    if words and words[0].startswith("@"):
        return words[0].lstrip("@!")
    return None


def _tokens(operand: str) -> set[str]:
    """The registers (R<n>, counted register by register) and predicates (P<n>, UP<n>) an operand names."""
    return {f"R{r}" for r in registers(operand)} | {m.group(0) for m in _PRED.finditer(operand)}


def _branch_target(sass: str) -> int | None:
    m = re.search(r"\bBRA\b[^;]*?(0x[0-9a-fA-F]+)", sass)
    return int(m.group(1), 16) if m and base_opcode(sass) == "BRA" and ".DIV" not in opcode(sass) else None


def spins_on_load(pc: int, sass_of: Callable[[int], str], step: int = SASS_INSTRUCTION_BYTES,
                  reach: int = SPIN_REACH) -> bool:
    """Whether the load at ``pc`` is polled: it sits in a short loop (a backward branch to it or before it within
    ``reach`` instructions) that a branch guarded by a predicate computed from the loaded value leaves or repeats,
    as in ``do { s = ld.cg(flag); } while (s == 0)``. A streaming loop's branches test an index, not the data."""
    _, written, _ = _effects(sass_of(pc) or "")
    return _spins(pc, sass_of, set(written), step, reach)


def _spins(pc: int, sass_of: Callable[[int], str], tainted: set[str], step: int, reach: int) -> bool:
    """Whether a branch of the short loop around ``pc`` tests a value derived from ``tainted`` (what the
    instruction at ``pc`` writes) before the loop's back edge (:func:`spins_on_load`)."""
    if not tainted:
        return False
    data_branch = False
    for i in range(1, reach + 1):
        q = pc + i * step
        text = sass_of(q) or ""
        if not text:
            return False
        target = _branch_target(text)
        if target is not None:
            if _guard(text) in tainted:
                data_branch = True
            if target <= pc:  # the loop's back edge
                return data_branch
            continue
        _taint(tainted, text)
    return False


def _taint(tainted: set[str], text: str) -> None:
    """One instruction's step of a taint walk: what it writes is tainted where it reads a tainted token (its guard
    included), and clean where it does not (overwritten with a value the taint does not reach: a carry-out, a new
    compare, a zeroed register)."""
    reads, writes, guard = _effects(text)
    if reads & tainted or (guard is not None and guard in tainted):
        tainted |= writes
    else:
        tainted -= writes


def _atomic_operands(text: str) -> tuple[set[str], set[str]]:
    """(the registers an ATOM/ATOMG returns into, the registers of its data operands), a .64 atomic's counted as
    pairs: ``ATOMG.E.CAS.64.STRONG.GPU PT, R4, [R24], R4, R6`` returns into R4:R5, compares R4:R5, swaps in R6:R7."""
    args = _operands(text)
    if args and _PRED_OUT.fullmatch(args[0]):
        args = args[1:]  # the predicate output some atomics write first
    if len(args) < 2:
        return set(), set()
    width = 2 if "64" in opcode(text).split(".") else 1

    def regs(operand: str) -> set[str]:
        return {f"R{r + i}" for r in registers(operand) for i in range(width)}
    return regs(args[0]), set().union(*(regs(a) for a in args[2:]))


def atomic_read_poll(pc: int, sass_of: Callable[[int], str], step: int = SASS_INSTRUCTION_BYTES,
                     reach: int = SPIN_REACH) -> bool:
    """Whether the atomic at ``pc`` is a read that spins: ``atomicAdd(p, 0)``, ``atomicOr(p, 0)`` or
    ``atomicCAS(p, 0, 0)`` in a short loop its own result decides (:func:`spins_on_load`), its data operands not
    derived from that result. A CAS retry loop (``do { old = atomicCAS(p, seen, f(seen)); } while (old != seen)``)
    computes its next operands from the value it got back: an update that contends, not a wait for other blocks."""
    dest, data = _atomic_operands(sass_of(pc) or "")
    if not dest or not _spins(pc, sass_of, set(dest), step, reach):
        return False
    loop = _loop_around(pc, sass_of, step, reach)
    if loop is None:
        return False
    head, back = loop
    tainted = set(dest)  # around the loop once, from the atomic back to it: what its result reaches
    for q in (*range(pc + step, back + step, step), *range(head, pc, step)):
        _taint(tainted, sass_of(q) or "")
    return not data & tainted


def polls(pc: int, sass_of: Callable[[int], str], step: int = SASS_INSTRUCTION_BYTES) -> bool:
    """Whether the instruction at ``pc`` waits for other blocks' writes (models.profile.POLL_INST): a NANOSLEEP
    (a spin-wait's back-off), a volatile load (STRONG.SYS), an acquire load (a STRONG load the compiler follows
    with CCTL.IVALL), a STRONG.GPU load (ld.cg, ld.relaxed) in a loop that its own value decides
    (:func:`spins_on_load`), or an atomic used as such a read (:func:`atomic_read_poll`). A STRONG.GPU load outside
    such a loop is __ldcg streaming data."""
    text = sass_of(pc) or ""
    op, base = opcode(text), base_opcode(text)
    if base == "NANOSLEEP":
        return True
    if base in ("ATOM", "ATOMG"):
        return atomic_read_poll(pc, sass_of, step)
    if base not in LOADS or ".STRONG." not in op:
        return False
    after = sass_of(pc + step) or ""
    return ".STRONG.SYS" in op or (base_opcode(after) == "CCTL" and "IVALL" in after) \
        or spins_on_load(pc, sass_of, step)


# ------------------------------------------------------------------------------------------ dependent loads
LOOP_REACH = 128  # instructions after a load searched for the back edge of the loop around it
CHAIN_WINDOW = 64  # straight-line instructions before a load (no loop around it) searched for its chain
CHAIN_DEPTH = 2  # loads before this one on its address's path, within one pass, that make it a chain
# a predicate right after the destination is a second result (ISETP's, a carry-out: ``IADD3 R8, P3, R2, ...``); a
# predicate among the sources, or a negated one, is read (a carry-in, a select's condition)
_PRED_OUT = re.compile(r"U?P(?:[0-6]|T)")
_ADDRESS = re.compile(r"\[([^\]]*)\]")


def _address_tokens(sass: str) -> set[str]:
    """The registers of a memory instruction's address operand (``[R4.64+0x8]``, ``desc[UR6][R2.64]``)."""
    out: set[str] = set()
    for group in _ADDRESS.findall(sass):
        out |= _tokens(group)
    return out


@lru_cache(maxsize=65536)
def _effects(text: str) -> tuple[frozenset[str], frozenset[str], str | None]:
    """(tokens read, tokens written, guard predicate) of one instruction, predicates included."""
    args = _operands(text)
    guard = _guard(text)
    if not args:
        return frozenset(), frozenset(), guard
    base = base_opcode(text)
    if base.startswith("ST") or base in ("RED", "REDG", "BRA", "BSSY", "BSYNC", "BAR", "WARPSYNC"):
        return frozenset().union(*(_tokens(a) for a in args)), frozenset(), guard  # no register written
    writes = {f"R{r}" for r in written_registers(text)} | {t for t in _tokens(args[0]) if t.startswith(("P", "UP"))}
    first_source = 1
    while first_source < len(args) and _PRED_OUT.fullmatch(args[first_source]):  # ISETP's second result, a carry
        writes |= {t for t in _tokens(args[first_source])}
        first_source += 1
    reads = set().union(*(_tokens(a) for a in args[first_source:])) if len(args) > first_source else set()
    if base in LOADS | {"ATOM", "ATOMG", "LDS", "LDL"}:
        reads = _address_tokens(text) | (reads - writes)
    return frozenset(reads), frozenset(writes), guard


def _loop_around(pc: int, sass_of: Callable[[int], str], step: int, reach: int) -> tuple[int, int] | None:
    """(head, back edge) of the innermost loop holding ``pc``: the first backward branch after it (within ``reach``
    instructions) whose target is at or before it; None where straight-line code ends first."""
    for i in range(1, reach + 1):
        q = pc + i * step
        text = sass_of(q) or ""
        if not text:
            return None
        target = _branch_target(text)
        if target is not None and target <= pc:
            return target, q
        if base_opcode(text) in ("EXIT", "RET") and _guard(text) is None:
            return None
    return None


def _pass_of(pc: int, sass_of: Callable[[int], str], step: int, reach: int) -> tuple[list[int], tuple[int, int] | None]:
    """The PCs of one pass over the code that runs the instruction at ``pc`` (the body of the innermost loop around
    it, else the CHAIN_WINDOW straight-line instructions up to it), and that loop (None where there is none)."""
    loop = _loop_around(pc, sass_of, step, reach)
    if loop is not None:
        return list(range(loop[0], loop[1] + step, step)), loop
    body = [q for q in range(pc - CHAIN_WINDOW * step, pc + step, step) if q >= 0]
    while body and not sass_of(body[0]):
        body = body[1:]
    return body, None


def indexed_access(pc: int, sass_of: Callable[[int], str], step: int = SASS_INSTRUCTION_BYTES,
                   reach: int = LOOP_REACH) -> bool:
    """Whether the global load, store or atomic at ``pc`` takes its address from a value a global load produced
    in the same pass (a gather ``w[id[i]]``, a scatter ``out[rank[i]] = v``): its neighbouring lanes' addresses are
    as spread as that data. In a loop the index may come from the previous iteration's load (the compiler loads
    the next index ahead), so the loop body is walked twice. An address that only steps through a run (an
    induction variable, its base loaded before the loop) is not indexed."""
    text = sass_of(pc) or ""
    if base_opcode(text) not in LOADS | STORES | ATOMICS:
        return False
    body, loop = _pass_of(pc, sass_of, step, reach)
    loaded: set[str] = set()  # tokens that derive from a global load's value
    passes = 2 if loop is not None else 1
    for i in range(passes):
        for q in body:
            t = sass_of(q) or ""
            if q == pc and i == passes - 1:
                return bool(_address_tokens(t) & loaded)
            if base_opcode(t) in LOADS:  # a load's value is data whatever its address
                loaded |= _effects(t)[1]
            else:
                _taint(loaded, t)
    return False


def chained_load(pc: int, sass_of: Callable[[int], str], step: int = SASS_INSTRUCTION_BYTES,
                 reach: int = LOOP_REACH) -> bool:
    """Whether the global load at ``pc`` waits for an earlier load's value to know its address: a chain of
    dependent loads, which no number of loads in flight shortens (a pointer or index chase, a tree descent, a
    binary search, a hash chain). Two ways count:

    - loop-carried: in the loop around it, its address derives from a value a load produced in the previous
      iteration (``node = next[node]``; a search's bounds set from the compared value), through registers,
      predicates and the branches those predicates decide;
    - in one pass (the loop's body, or the straight-line code before it): CHAIN_DEPTH loads or more on its
      address's path (``a[b[c[i]]]``). A gather through one index (``x[col[j]]``) is not a chain: its loads are
      independent across iterations and threads.
    """
    text = sass_of(pc) or ""
    if base_opcode(text) not in LOADS:
        return False
    body, loop = _pass_of(pc, sass_of, step, reach)
    texts = [sass_of(q) or "" for q in body]

    def walk(state: dict[str, int], carried: set[str] | None) -> bool:
        """One pass over the body: ``state`` maps a token to the loads on its path in this pass; ``carried`` (the
        second pass) holds the tokens that derive from the previous iteration's loads. True where the load at
        ``pc`` is reached with a chained address."""
        for q, t in zip(body, texts, strict=True):
            reads, writes, guard = _effects(t)
            if guard is not None:
                reads = reads | {guard}
            base = base_opcode(t)
            depth = max((state.get(r, 0) for r in reads), default=0)
            from_last = carried is not None and bool(reads & carried)
            if q == pc:
                addr = _address_tokens(t)
                if max((state.get(r, 0) for r in addr), default=0) >= CHAIN_DEPTH:
                    return True
                if carried is not None and addr & carried:
                    return True
            if base in LOADS:
                depth += 1
            # a guarded write counts as a write: the guard is read (a select on a loaded value carries the load),
            # and the compiler guards a register's producers and consumers alike, so the old value is not what
            # a guarded consumer reads
            for w in writes:
                state[w] = depth
                if carried is not None:
                    if from_last:
                        carried.add(w)
                    else:
                        carried.discard(w)
        return False

    first: dict[str, int] = {}
    if walk(first, None):
        return True
    if loop is None:
        return False
    return walk({}, {r for r, d in first.items() if d > 0})
