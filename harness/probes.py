"""Runtime cheat probes, after the correctness trials: work moved to background threads, lazy outputs
(deferred work in an exact ``torch.Tensor``: negative/conjugate views, no storage), and result caches
keyed by pointer (the same input storage given new contents must change the output)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import torch

from kernelscope.harness.correctness import compare, flatten
from kernelscope.harness.guard import RefCall, unguarded_reference
from kernelscope.harness.protocol import Config, Findings


def thread_snapshot() -> set[int]:
    """The Python threads alive now (their idents): taken before any candidate code runs."""
    return {t.ident for t in threading.enumerate() if t.ident is not None}


def check_threads(before: set[int], findings: Findings) -> list[str]:
    """Threads alive after the candidate's forward returned that were not there before its code ran."""
    new = [t for t in threading.enumerate() if t.ident not in before and t.is_alive()]
    if not new:
        return []
    names = sorted(f"{t.name} ({getattr(getattr(t, '_target', None), '__qualname__', '?')})" for t in new)
    findings.flag_once("background-threads", "invalid",
                       f"{len(new)} thread(s) the candidate started are still alive after its forward returned "
                       f"({', '.join(names[:5])}): work moved to background threads escapes the timed window.",
                       {"threads": names[:20]})
    return names


def lazy_reason(t: Any) -> str | None:
    """Why an output that is exactly a torch.Tensor still defers work, or None."""
    if type(t) is not torch.Tensor:
        return None  # subclasses: the comparison refuses them (lazy-output)
    if t.is_neg():
        return "a negative view (the negation is deferred until read)"
    if t.is_conj():
        return "a conjugate view (the conjugation is deferred until read)"
    if t.numel() and t.device.type != "meta" and t.untyped_storage().data_ptr() == 0:
        return "no materialised storage"
    if t.device.type == "meta":
        return "a meta tensor (no data)"
    return None


def check_lazy(outputs: list[Any], findings: Findings) -> None:
    for i, o in enumerate(outputs):
        if (why := lazy_reason(o)) is not None:
            findings.flag_once("lazy-output", "invalid", f"output {i} is {why}: its work is not done when the "
                               "forward returns.", {"output": i, "reason": why})
            return


def _refill(inputs: list[Any], fresh: list[Any]) -> bool:
    """Write ``fresh``'s values into ``inputs``' own tensors (every tensor: floats, integer indices and
    targets, boolean masks), so the inputs equal ``fresh`` with the old storage; False (nothing written)
    where that cannot be (a tensor whose shape or dtype changed between the two draws, or a non-tensor
    argument that differs)."""
    if len(inputs) != len(fresh):
        return False
    for x, y in zip(inputs, fresh, strict=True):
        if isinstance(x, torch.Tensor) != isinstance(y, torch.Tensor):
            return False
        if isinstance(x, torch.Tensor) and (x.shape != y.shape or x.dtype != y.dtype):
            return False
        if not isinstance(x, torch.Tensor):
            try:
                if not bool(x == y):
                    return False
            except Exception:  # containers of tensors, objects without a plain equality
                return False
    for x, y in zip(inputs, fresh, strict=True):
        if isinstance(x, torch.Tensor):
            x.copy_(y)
    return True


def check_pointer_cache(make: Callable[[int], list[Any]], ref_model: Any, cand_model: Any, cfg: Config,
                        findings: Findings, sync: Callable[[], None],
                        call: Callable[[str], AbstractContextManager[Any]] | None = None,
                        reference: RefCall = unguarded_reference) -> bool | None:
    """Call the candidate on inputs, write new values into the very same tensors (all of them, whatever
    their dtype), call it again: the output must follow the new contents (a cache keyed by pointer or
    tensor identity does not). ``call``: the context each candidate call runs in (the harness's state
    guard); ``reference``: the one the reference's call runs in. None where the probe cannot run (the
    problem's inputs change shape from one draw to the next), with a note."""
    inputs = make(cfg.seed + 9001)
    fresh = make(cfg.seed + 9002)
    guarded = call or (lambda _: nullcontext())
    with torch.no_grad():
        with guarded("forward (pointer-cache probe)"):
            first = flatten(cand_model(*inputs))
            sync()
        check_lazy(first, findings)
        if not _refill(inputs, fresh):
            findings.notes.append("pointer-cache probe not run: get_inputs() gives inputs of other shapes, "
                                  "dtypes or values from one call to the next, so they cannot be refilled in place")
            return None
        with reference():
            ref_out = flatten(ref_model(*[y.clone() if isinstance(y, torch.Tensor) else y for y in fresh]))
        with guarded("forward (pointer-cache probe)"):
            second = flatten(cand_model(*inputs))
            sync()
    ok, info = compare(ref_out, second, 0, cfg, Findings())
    if not ok:
        findings.flag_once("pointer-cache", "invalid",
                           "given new values in the same input tensors (same storage, same pointers), the "
                           f"candidate's output did not follow: {info.get('error')}. Results cached by pointer or "
                           "tensor identity are refused.", {"error": info.get("error")})
    return ok


def after_correctness(make: Callable[[int], list[Any]], ref_model: Any, cand_model: Any, cfg: Config,
                      findings: Findings, sync: Callable[[], None], threads_before: set[int],
                      call: Callable[[str], AbstractContextManager[Any]] | None = None,
                      reference: RefCall = unguarded_reference) -> None:
    """The probes, in order: pointer-keyed caches (with lazy outputs), then threads left behind."""
    check_pointer_cache(make, ref_model, cand_model, cfg, findings, sync, call, reference)
    check_threads(threads_before, findings)
