"""Distribution checks: correctness trials beyond the problem's ``get_inputs``, on transformed inputs
within the reference's domain (sign flipped, scaled by 1e-3 and 1e3, offset, a non-contiguous layout).

- Each transform gets its own tolerance: the policy's ``atol`` is scaled by how much the transform moves
  the reference's outputs (the mean magnitude of the transformed reference output over the original one),
  so a sum of inputs scaled by 1e3 is compared with an ``atol`` 1e3 times larger, as its output is.
- A transform is outside the reference's domain, and skipped with the reason recorded, where the
  reference raises, where its output is not finite, or where the reference itself is ill-conditioned:
  its native output differs from the same reference computed in float64 by more than that tolerance.
- A candidate wrong on a value transform (sign, scale, offset) is right only on the original
  distribution (a ReLU that returns its input is right on non-negative inputs): ``invalid`` with the
  transform that broke it; the ``kernelbench`` policy lowers this to a review flag, and says so.
- A failure on the layout transform alone is a ``non-contiguous-inputs`` review flag, never ``invalid``:
  KernelBench's inputs are contiguous, and a kernel that reads raw pointers assumes they are.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import torch

from kernelscope.harness.correctness import compare, flatten, out_of_memory, release_memory, tolerance
from kernelscope.harness.guard import RefCall, unguarded_reference
from kernelscope.harness.memory import CHUNK_ELEMENTS
from kernelscope.harness.protocol import Config, Findings

LAYOUT = "non-contiguous layout"
#: inputs above this size get no float64 reference (its copies would not fit next to the job's)
FP64_MAX_BYTES = 1 << 30


def _strided(x: torch.Tensor) -> torch.Tensor:
    """The same values in a non-contiguous layout: every other element of a buffer twice as wide."""
    if x.dim() == 0 or x.numel() == 0:
        return x
    buf = torch.empty(*x.shape[:-1], 2 * x.shape[-1], dtype=x.dtype, device=x.device)
    view = buf[..., ::2]
    view.copy_(x)
    return view


Transform = Callable[[torch.Tensor], torch.Tensor]
TRANSFORMS: list[tuple[str, Transform]] = [
    ("sign flip (-x)", lambda x: -x),
    ("scale by 1e-3", lambda x: x * 1e-3),
    ("scale by 1e3", lambda x: x * 1e3),
    ("offset by +3", lambda x: x + 3),
    (LAYOUT, _strided),
]
Call = Callable[[str], AbstractContextManager[Any]]


def transform_inputs(inputs: list[Any], fn: Transform) -> list[Any]:
    """``fn`` applied to every floating-point tensor input (integers, indices and scalars kept)."""
    return [fn(x) if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in inputs]


def _floating(t: Any) -> bool:
    return isinstance(t, torch.Tensor) and (t.is_floating_point() or t.is_complex())


def _finite(outs: list[Any]) -> bool:
    return all(bool(torch.isfinite(o).all()) for o in outs if _floating(o))


def _flat_chunks(t: torch.Tensor) -> Iterator[torch.Tensor]:
    flat = t.reshape(-1)
    for a in range(0, flat.numel(), CHUNK_ELEMENTS):
        yield flat[a:a + CHUNK_ELEMENTS]


def magnitude(t: Any) -> float:
    """The mean absolute value of a floating tensor, chunk by chunk (no full-size temporary)."""
    if not _floating(t) or not t.numel():
        return 0.0
    total = sum(float(c.abs().double().sum()) for c in _flat_chunks(t))
    return total / t.numel()


def scaled_tolerances(cfg: Config, original: list[float], transformed: list[Any]) -> list[tuple[float, float]]:
    """(rtol, atol) per output for a transform: the policy's atol times the ratio of the transformed
    reference output's magnitude to the original's (``original``: those magnitudes; a ratio of 1 where
    either is 0, and (0, 0) for outputs that are not floating)."""
    out = []
    for m0, r1 in zip(original, transformed, strict=True):
        if not _floating(r1):
            out.append((0.0, 0.0))
            continue
        rtol, atol = tolerance(cfg, r1.dtype)
        m1 = magnitude(r1)
        out.append((rtol, atol * (m1 / m0 if m0 > 0 and m1 > 0 else 1.0)))
    return out


def compare_scaled(ref: list[Any], cand: list[Any], tols: list[tuple[float, float]], cfg: Config
                   ) -> tuple[bool, dict[str, Any]]:
    """The regular comparison, output by output, each under its own (rtol, atol)."""
    if len(ref) != len(cand):
        return compare(ref, cand, 0, cfg, Findings())
    for r, c, (rtol, atol) in zip(ref, cand, tols, strict=True):
        ok, info = compare([r], [c], 0, dataclasses.replace(cfg, rtol=rtol, atol=atol), Findings())
        if not ok:
            return False, info
    return True, {}


def _model_bytes(model: Any) -> int:
    tensors = list(getattr(model, "parameters", list)()) + list(getattr(model, "buffers", list)())
    return sum(t.numel() * t.element_size() for t in tensors)


class Float64:
    """The reference in float64, built once for all the transforms (None where it cannot be: too large,
    or not a module that converts)."""

    def __init__(self, ref_model: Any) -> None:
        self.ref_model = ref_model
        self.model: Any = None
        self.tried = False

    def get(self) -> Any:
        if not self.tried:
            self.tried = True
            try:
                if _model_bytes(self.ref_model) <= FP64_MAX_BYTES:
                    self.model = copy.deepcopy(self.ref_model).double()
            except Exception:  # not a module, or no memory for the copy: no conditioning check
                self.model = None
        return self.model


def ill_conditioned(fp64: Float64, inputs: list[Any], native: list[Any], tols: list[tuple[float, float]],
                    cfg: Config, reference: RefCall = unguarded_reference) -> str | None:
    """Why the reference itself is unreliable on these inputs (its native output against the same model
    in float64 differs by more than the tolerance), or None; None also where no float64 run is possible."""
    if not any(_floating(o) and o.dtype != torch.float64 for o in native):
        return None
    if sum(x.numel() * x.element_size() for x in inputs if isinstance(x, torch.Tensor)) > FP64_MAX_BYTES:
        return None
    if (model64 := fp64.get()) is None:
        return None
    try:
        with torch.no_grad(), reference(replay=True):  # the same random draws as the native run
            exact = flatten(model64(*[x.double() if _floating(x) else x for x in inputs]))
        exact = [e.to(n.dtype) if _floating(e) and _floating(n) else e for e, n in zip(exact, native, strict=True)]
    except Exception:  # no float64 kernel, or no memory for it: no verdict on the conditioning
        return None
    if not _finite(exact):
        return "the reference's float64 output is not finite"
    ok, info = compare_scaled(exact, native, tols, cfg)
    return None if ok else f"the reference loses precision against float64 ({info.get('error')})"


def trial(name: str, fn: Transform, inputs: list[Any], ref_model: Any, cand_model: Any, cfg: Config,
          sync: Callable[[], None], call: Call | None = None, fp64: Float64 | None = None,
          reference: RefCall = unguarded_reference) -> dict[str, Any]:
    """One transformed trial: ``{"transform", "outcome": ok|failed|skipped, "error"?, "atol"?}``."""
    ref_in = transform_inputs(inputs, fn)
    try:  # each side gets its own transformed copies (the layout transform keeps its strides)
        with torch.no_grad():  # the original output's magnitudes only: it is not kept
            own = [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]  # a reference may write them
            original = [magnitude(o) for o in flatten(ref_model(*own))]
            del own
            with reference():  # the candidate's call below draws what this one draws
                ref_out = flatten(ref_model(*ref_in))
        sync()
    except torch.cuda.OutOfMemoryError:
        raise
    except Exception as e:  # the reference refuses these inputs: outside its domain
        return {"transform": name, "outcome": "skipped", "error": f"reference raised {type(e).__name__}"}
    if not _finite(ref_out):
        return {"transform": name, "outcome": "skipped", "error": "reference output not finite"}
    tols = scaled_tolerances(cfg, original, ref_out)
    if (why := ill_conditioned(fp64 or Float64(ref_model), ref_in, ref_out, tols, cfg, reference)) is not None:
        return {"transform": name, "outcome": "skipped", "error": why}
    del ref_in
    cand_in = transform_inputs(inputs, fn)
    with (call or (lambda _: nullcontext()))(f"forward (distribution trial: {name})"), torch.no_grad():
        cand_out = flatten(cand_model(*cand_in))
        sync()
    ok, info = compare_scaled(ref_out, cand_out, tols, cfg)  # the regular trials raise the other flags
    out: dict[str, Any] = {"transform": name, "outcome": "ok" if ok else "failed",
                           "atol": [round(a, 12) for _, a in tols]}
    if not ok:
        out["error"] = info.get("error", "outputs differ")
    return out


def check(make: Callable[[int], list[Any]], ref_model: Any, cand_model: Any, cfg: Config, findings: Findings,
          sync: Callable[[], None], transforms: list[tuple[str, Transform]] | None = None,
          call: Call | None = None, reference: RefCall = unguarded_reference) -> list[dict[str, Any]]:
    """Every transform on fresh seeded inputs; the first value-transform failure raises a ``distribution``
    flag, a layout failure a ``non-contiguous-inputs`` review flag. ``call``: the context each candidate
    call runs in (the harness's state guard); ``reference``: the one each compared reference call runs in."""
    results: list[dict[str, Any]] = []
    fp64 = Float64(ref_model)
    for k, (name, fn) in enumerate(transforms if transforms is not None else TRANSFORMS):
        inputs = make(cfg.seed + 5000 + k)
        oom = False
        try:
            results.append(trial(name, fn, inputs, ref_model, cand_model, cfg, sync, call, fp64, reference))
        except Exception as e:
            if not (oom := out_of_memory(e)):  # the candidate raised on inputs the reference accepts
                results.append({"transform": name, "outcome": "failed", "error": f"{type(e).__name__}: {e}"})
            else:  # the extra copies do not fit: the harness's limit, not a failure
                results.append({"transform": name, "outcome": "skipped", "error": "out of GPU memory for the copies"})
        del inputs
        if oom:  # after the except clause: its exception, and the frames it holds, can go now
            release_memory()
    del fp64
    flag(results, cfg, findings)
    done = ", ".join(f"{r['transform']}: {r['outcome']}" + (f" ({r['error']})" if r["outcome"] == "skipped" else "")
                     for r in results)
    findings.notes.append(f"distribution trials: {done}")
    return results


def flag(results: list[dict[str, Any]], cfg: Config, findings: Findings) -> None:
    """The flags of a set of trial results (see the module's docstring)."""
    failed = [r for r in results if r["outcome"] == "failed" and r["transform"] != LAYOUT]
    if failed:
        lowered = cfg.tolerance == "kernelbench"
        first = failed[0]
        findings.flag_once(
            "distribution", "review" if lowered else "invalid",
            f"the candidate is right on get_inputs() but not on inputs with {first['transform']}, where the "
            f"reference's output stays finite and well-conditioned: {first['error']}"
            + (" (the kernelbench policy lowers this to review)" if lowered else ""),
            {"transform": first["transform"], "failed": [r["transform"] for r in failed], "policy": cfg.tolerance,
             "atol": first.get("atol")})
    layout = next((r for r in results if r["outcome"] == "failed" and r["transform"] == LAYOUT), None)
    if layout is not None:
        findings.flag_once(
            "non-contiguous-inputs", "review",
            "the candidate is right on get_inputs() but not when the same values come in a non-contiguous "
            f"layout: {layout['error']}. KernelBench's inputs are contiguous, so this is for review only; a "
            "kernel that reads raw pointers can call .contiguous() on its inputs (free when they already are).",
            {"transform": LAYOUT})
