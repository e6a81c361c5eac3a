"""Distribution checks: correctness trials beyond the problem's ``get_inputs``, on transformed inputs
within the reference's domain (sign flipped, scaled by 1e-3 and 1e3, offset, a non-contiguous layout).
A transform whose reference output is not finite (or that the reference refuses) is outside the domain
and skipped. A candidate right only on the original distribution (a ReLU that returns its input is right
on non-negative inputs) is ``invalid`` with the transform that broke it; the ``kernelbench`` policy
lowers this to a review flag, and says so."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from kernelscope.harness.correctness import compare, flatten
from kernelscope.harness.protocol import Config, Findings


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
    ("non-contiguous layout", _strided),
]


def transform_inputs(inputs: list[Any], fn: Transform) -> list[Any]:
    """``fn`` applied to every floating-point tensor input (integers, indices and scalars kept)."""
    return [fn(x) if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in inputs]


def _finite(outs: list[Any]) -> bool:
    return all(bool(torch.isfinite(o).all()) for o in outs
               if isinstance(o, torch.Tensor) and (o.is_floating_point() or o.is_complex()))


def trial(name: str, fn: Transform, inputs: list[Any], ref_model: Any, cand_model: Any, cfg: Config,
          sync: Callable[[], None]) -> dict[str, Any]:
    """One transformed trial: ``{"transform", "outcome": ok|failed|skipped, "error"?}``."""
    try:  # each side gets its own transformed copies (the layout transform keeps its strides)
        with torch.no_grad():
            ref_out = flatten(ref_model(*transform_inputs(inputs, fn)))
        sync()
    except Exception as e:  # the reference refuses these inputs: outside its domain
        return {"transform": name, "outcome": "skipped", "error": f"reference raised {type(e).__name__}"}
    if not _finite(ref_out):
        return {"transform": name, "outcome": "skipped", "error": "reference output not finite"}
    cand_in = transform_inputs(inputs, fn)
    with torch.no_grad():
        cand_out = flatten(cand_model(*cand_in))
    sync()
    ok, info = compare(ref_out, cand_out, 0, cfg, Findings())  # the regular trials raise the other flags
    out: dict[str, Any] = {"transform": name, "outcome": "ok" if ok else "failed"}
    if not ok:
        out["error"] = info.get("error", "outputs differ")
    return out


def check(make: Callable[[int], list[Any]], ref_model: Any, cand_model: Any, cfg: Config, findings: Findings,
          sync: Callable[[], None], transforms: list[tuple[str, Transform]] | None = None) -> list[dict[str, Any]]:
    """Every transform on fresh seeded inputs; the first failure raises a ``distribution`` flag."""
    results: list[dict[str, Any]] = []
    for k, (name, fn) in enumerate(transforms if transforms is not None else TRANSFORMS):
        inputs = make(cfg.seed + 5000 + k)
        try:
            results.append(trial(name, fn, inputs, ref_model, cand_model, cfg, sync))
        except torch.cuda.OutOfMemoryError:  # the extra copies do not fit: the harness's limit, not a failure
            results.append({"transform": name, "outcome": "skipped", "error": "out of GPU memory for the copies"})
            torch.cuda.empty_cache()
        except Exception as e:  # the candidate raised on inputs the reference accepts
            results.append({"transform": name, "outcome": "failed", "error": f"{type(e).__name__}: {e}"})
        del inputs
    failed = [r for r in results if r["outcome"] == "failed"]
    if failed:
        lowered = cfg.tolerance == "kernelbench"
        first = failed[0]
        findings.flag_once(
            "distribution", "review" if lowered else "invalid",
            f"the candidate is right on get_inputs() but not on inputs with {first['transform']}, where the "
            f"reference's output stays finite: {first['error']}"
            + (" (the kernelbench policy lowers this to review)" if lowered else ""),
            {"transform": first["transform"], "failed": [r["transform"] for r in failed], "policy": cfg.tolerance})
    done = ", ".join(f"{r['transform']}: {r['outcome']}" for r in results)
    findings.notes.append(f"distribution trials: {done}")
    return results
