"""Who a failure belongs to, and the global state around every candidate call.

- Attribution: an exception raised inside the candidate's code (its import, ``ModelNew.__init__``, its
  forward calls) is the candidate's answer (``status: error``); one raised by the reference is the
  reference's; anything else raised inside the harness (its comparison, its timing, its bookkeeping) is a
  ``harness-error``, never read as the candidate's failure.
- Global state: torch's backend flags (TF32 for matmul and cuDNN, cuDNN benchmark/deterministic, the fp32
  matmul precision, reduced-precision reductions), the default dtype, the RNG states and the current
  stream are snapshotted before and restored after every candidate call, so the reference is always
  checked and timed in the harness's own state. The candidate keeps the flags it set (they are applied
  again before each of its calls), and a candidate that changes anything is flagged once, naming what.
- Random draws inside forward: a reference may draw from the RNG in its forward (KernelBench's LSTM draws
  its initial states with ``torch.randn``). A candidate call that follows a reference call on the same
  inputs (a correctness trial, a distribution trial, the pointer-cache probe) starts from the RNG state
  that reference call started from, so both draw the same numbers; and drawing is a change of state only
  where the reference does not draw itself (or where the candidate draws differently from it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any

from kernelscope.harness.protocol import Findings, Flag, Invalid

# the context a reference call compared with a candidate call runs in (``StateGuard.reference``), and the
# one to use without a guard
RefCall = Callable[..., AbstractContextManager[Any]]


def unguarded_reference(replay: bool = False) -> AbstractContextManager[Any]:
    return nullcontext()


class Attributed(Exception):
    """An exception raised by one party's code: ``party`` is "candidate" or "reference"."""

    def __init__(self, party: str, where: str, cause: BaseException) -> None:
        super().__init__(f"{type(cause).__name__}: {cause}")
        self.party = party
        self.where = where
        self.cause = cause


@contextmanager
def blame(party: str, where: str) -> Iterator[None]:
    """Exceptions raised inside the block are ``party``'s (already attributed ones pass through)."""
    try:
        yield
    except (Attributed, Invalid):
        raise
    except Exception as e:
        raise Attributed(party, where, e) from e


def is_device_fault(e: BaseException) -> bool:
    """A sticky CUDA error (illegal address, a trap, a launch failure) that surfaced in the harness's own
    synchronisation: the harness launches only PyTorch's kernels, so it is the candidate's kernel."""
    accel = type(e).__name__ == "AcceleratorError"
    msg = str(e)
    return accel or ("CUDA error" in msg and "out of memory" not in msg)


# ------------------------------------------------------------------------------------ global state
FLAGS = ("matmul.allow_tf32", "cudnn.allow_tf32", "cudnn.benchmark", "cudnn.deterministic",
         "float32_matmul_precision", "matmul.allow_fp16_reduced_precision_reduction",
         "matmul.allow_bf16_reduced_precision_reduction", "default_dtype")


def read_flags(torch: Any) -> dict[str, Any]:
    """The global settings a candidate could change for everyone after it (CPU builds have them too)."""
    m, c = torch.backends.cuda.matmul, torch.backends.cudnn
    return {"matmul.allow_tf32": bool(m.allow_tf32), "cudnn.allow_tf32": bool(c.allow_tf32),
            "cudnn.benchmark": bool(c.benchmark), "cudnn.deterministic": bool(c.deterministic),
            "float32_matmul_precision": torch.get_float32_matmul_precision(),
            "matmul.allow_fp16_reduced_precision_reduction": bool(m.allow_fp16_reduced_precision_reduction),
            "matmul.allow_bf16_reduced_precision_reduction": bool(m.allow_bf16_reduced_precision_reduction),
            "default_dtype": torch.get_default_dtype()}


def write_flags(torch: Any, flags: dict[str, Any]) -> None:
    """Set the flags that differ from ``flags`` (setting the matmul precision also sets allow_tf32, so it
    goes first)."""
    now = read_flags(torch)
    m, c = torch.backends.cuda.matmul, torch.backends.cudnn
    if now["float32_matmul_precision"] != flags["float32_matmul_precision"]:
        torch.set_float32_matmul_precision(flags["float32_matmul_precision"])
    setters = {"matmul.allow_tf32": lambda v: setattr(m, "allow_tf32", v),
               "cudnn.allow_tf32": lambda v: setattr(c, "allow_tf32", v),
               "cudnn.benchmark": lambda v: setattr(c, "benchmark", v),
               "cudnn.deterministic": lambda v: setattr(c, "deterministic", v),
               "matmul.allow_fp16_reduced_precision_reduction":
                   lambda v: setattr(m, "allow_fp16_reduced_precision_reduction", v),
               "matmul.allow_bf16_reduced_precision_reduction":
                   lambda v: setattr(m, "allow_bf16_reduced_precision_reduction", v),
               "default_dtype": torch.set_default_dtype}
    now = read_flags(torch)
    for k, set_ in setters.items():
        if now[k] != flags[k]:
            set_(flags[k])


class StateGuard:
    """The harness's global state, and the candidate's, kept apart around every candidate call."""

    def __init__(self, torch: Any, cuda: bool, findings: Findings) -> None:
        self.torch = torch
        self.cuda = cuda
        self.findings = findings
        self.harness = read_flags(torch)
        self.candidate = dict(self.harness)  # the flags the candidate set, applied again before its calls
        self.stream = torch.cuda.current_stream() if cuda else None
        self.changed: dict[str, str] = {}  # what the candidate changed -> "before -> after"
        self._rng: tuple[Any, Any] | None = None  # the harness's RNG state, saved around a candidate call
        self._paired_end: tuple[Any, Any] | None = None  # where the reference call it is paired with ended
        self._pending: tuple[tuple[Any, Any], tuple[Any, Any]] | None = None  # the last reference call's
        self.reference_draws = False  # start and end RNG states, and whether the reference's forward draws

    def _rng_state(self) -> tuple[Any, Any]:
        return self.torch.get_rng_state(), (self.torch.cuda.get_rng_state() if self.cuda else None)

    def _set_rng(self, state: tuple[Any, Any]) -> None:
        self.torch.set_rng_state(state[0])
        if state[1] is not None:
            self.torch.cuda.set_rng_state(state[1])

    def _same_rng(self, a: tuple[Any, Any], b: tuple[Any, Any]) -> bool:
        return bool(self.torch.equal(a[0], b[0]) and (a[1] is None or self.torch.equal(a[1], b[1])))

    @contextmanager
    def reference(self, replay: bool = False) -> Iterator[None]:
        """One call of the reference's forward whose outputs the next candidate call is compared with: the
        candidate's call will start from the RNG state this one started from. ``replay``: another reference
        run in the same pairing (the float64 copy): it starts from that state too and changes no pairing."""
        if replay and self._pending is not None:
            self._set_rng(self._pending[0])
        start = self._rng_state()
        yield
        end = self._rng_state()
        if not replay:
            self._pending = (start, end)
        if not self._same_rng(start, end):
            self.reference_draws = True

    def enter(self, rng: bool = True) -> None:
        """Before a candidate call: the harness's RNG state saved (``rng``; not around the models'
        construction, whose parameters are drawn from the job's seed), the candidate's flags applied. Right
        after a reference call (see ``reference``), the RNG starts where that call started."""
        self._rng = self._rng_state() if rng else None
        self._paired_end = None
        if rng and self._pending is not None:
            start, self._paired_end = self._pending
            self._set_rng(start)
        self._pending = None
        if self.candidate != self.harness:
            write_flags(self.torch, self.candidate)

    def restore_stream(self) -> None:
        """Right after the call (before the harness records its end event): the harness's stream back."""
        if self.stream is not None and self.torch.cuda.current_stream() != self.stream:
            self._note("current stream", str(self.stream), str(self.torch.cuda.current_stream()))
            self.torch.cuda.set_stream(self.stream)

    def exit(self) -> None:
        """After a candidate call: what it changed noted, the harness's flags and RNG state restored."""
        self.restore_stream()
        now = read_flags(self.torch)
        for k in FLAGS:
            if now[k] != self.harness[k]:
                self._note(k, str(self.harness[k]), str(now[k]))
        self.candidate = now
        if self._rng is not None:
            end = self._rng_state()
            if self._paired_end is not None:
                if not self._same_rng(end, self._paired_end):
                    self._note("RNG state", "drawn as the reference draws", "drawn differently")
            elif not self.reference_draws and not self._same_rng(end, self._rng):
                self._note("RNG state", "saved", "advanced")
            self._set_rng(self._rng)
            self._rng = self._paired_end = None
        if now != self.harness:
            write_flags(self.torch, self.harness)

    @contextmanager
    def call(self, where: str, rng: bool = True) -> Iterator[None]:
        """One candidate call (or its import, or its construction): state kept apart, failures its own."""
        self.enter(rng)
        try:
            with blame("candidate", where):
                yield
        finally:
            self.exit()

    @contextmanager
    def as_candidate(self) -> Iterator[None]:
        """The candidate's flags in force for the block (for checks that read the global state)."""
        write_flags(self.torch, self.candidate)
        try:
            yield
        finally:
            write_flags(self.torch, self.harness)

    def _note(self, what: str, before: str, after: str) -> None:
        if what in self.changed:
            return
        self.changed[what] = f"{before} -> {after}"
        self.findings.flags = [f for f in self.findings.flags if f.id != "global-state"]
        listed = "; ".join(f"{k}: {v}" for k, v in self.changed.items())
        self.findings.flags.append(Flag(
            "global-state", "review",
            f"the candidate changed global state ({listed}). The harness restores its own state after every "
            "candidate call, so the reference is checked and timed in its own state; a candidate should leave "
            "global state as it found it.", {"changed": dict(self.changed)}))
