"""Correctness: fresh seeded inputs per trial, memory poisoned before each candidate call (an output
the candidate never writes reads as NaN), outputs compared with a tolerance policy by dtype (written
into the answer), NaN/Inf always failing, shapes, dtypes and devices compared, and the candidate's
side effects checked: inputs mutated in place, outputs aliasing inputs, results cached across calls."""

from __future__ import annotations

import gc
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from kernelscope.harness.guard import Attributed, blame
from kernelscope.harness.memory import CHUNK_ELEMENTS
from kernelscope.harness.protocol import Config, Findings

TOLERANCES: dict[str, dict[str, tuple[float, float]]] = {
    # policy -> dtype -> (rtol, atol)
    "strict": {"float64": (1e-9, 1e-9), "float32": (1e-5, 1e-6), "float16": (2e-3, 1e-3), "bfloat16": (1e-2, 1e-2)},
    "default": {"float64": (1e-7, 1e-7), "float32": (1e-4, 1e-4), "float16": (1e-2, 1e-2), "bfloat16": (2e-2, 2e-2)},
    # KernelBench's get_tolerance_for_precision (src/kernelbench/eval.py, ScalingIntelligence/KernelBench at
    # commit 0d1222636478e6c238dc9886b6ba4be975b22efe): one value as both rtol and atol, fp32 1e-4, fp16 and
    # bf16 1e-2. It has no fp64 entry: fp64 outputs get the fp32 value.
    "kernelbench": {"float64": (1e-4, 1e-4), "float32": (1e-4, 1e-4), "float16": (1e-2, 1e-2),
                    "bfloat16": (1e-2, 1e-2)},
}


def flatten(out: Any) -> list[Any]:
    if isinstance(out, (tuple, list)):
        items: list[Any] = []
        for o in out:
            items.extend(flatten(o))
        return items
    return [out]


def dtype_name(dtype: Any) -> str:
    return str(dtype).replace("torch.", "")


def tolerance(cfg: Config, dtype: Any) -> tuple[float, float]:
    """(rtol, atol) for outputs of ``dtype`` under the job's policy; integers and booleans are exact."""
    table = TOLERANCES.get(cfg.tolerance, TOLERANCES["default"])
    rtol, atol = table.get(dtype_name(dtype), (0.0, 0.0))
    return (cfg.rtol if cfg.rtol is not None else rtol), (cfg.atol if cfg.atol is not None else atol)


def out_of_memory(e: BaseException) -> bool:
    """Whether ``e`` is CUDA running out of memory, raised directly or attributed to a party (``blame``)."""
    return isinstance(getattr(e, "cause", e), torch.cuda.OutOfMemoryError)


def release_memory() -> None:
    """Give back what an out-of-memory exception held: its traceback holds the frames it unwound, with their
    tensors, and wherever it sits in a reference cycle they stay allocated until the cyclic collector runs. The
    harness collects, and empties the allocator's cache, before it allocates again (seen on KernelBench's level-1
    Average_Pooling_2D: 64 GiB, the skipped layout trial's copies, still allocated when the next 16 GiB input was
    asked for)."""
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


class Inputs:
    """The reference's ``get_inputs()`` on the job's device, seeded; clones; and memory poisoning."""

    def __init__(self, device: Any, findings: Findings, sync: Callable[[], None]) -> None:
        self.device = device
        self.findings = findings
        self.sync = sync

    def make(self, ref: Any, seed: int) -> list[Any]:
        try:
            raw = self._generate(ref, seed)
        except Attributed as e:
            if not out_of_memory(e):
                raise
            oom = True
        else:
            oom = False
        if oom:  # once more after a collection: memory an earlier exception's frames held may be free now
            release_memory()
            raw = self._generate(ref, seed)
        out = [x.to(self.device) if isinstance(x, torch.Tensor) else x for x in raw]
        for i, x in enumerate(out):
            if isinstance(x, torch.Tensor) and x.is_floating_point() and x.numel() > 1 \
                    and bool((x == x.flatten()[0]).all()):
                self.findings.flag_once("degenerate-inputs", "invalid",
                                        f"get_inputs()[{i}] is constant ({float(x.flatten()[0])}); correctness on "
                                        "constant inputs proves nothing. Use random inputs (torch.randn).",
                                        {"input": i})
        return out

    def _generate(self, ref: Any, seed: int) -> list[Any]:
        torch.manual_seed(seed)
        random.seed(seed)
        with blame("reference", "get_inputs()"), torch.device(self.device):  # torch.randn & co. on the device
            return list(ref.get_inputs())

    @staticmethod
    def clone(inputs: list[Any]) -> list[Any]:
        return [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]

    def poison(self, like: list[Any], copies: int = 4) -> None:
        """Fill freed allocator blocks of each output's size with NaN bytes (0xFF), so an output the
        candidate never writes reads as NaN instead of leftovers of the reference's computation.
        The reference's own outputs stay alive meanwhile, so their memory cannot be handed out."""
        blocks = []
        for r in like:
            if isinstance(r, torch.Tensor) and r.numel():
                for _ in range(copies):
                    b = torch.empty(r.numel() * r.element_size(), dtype=torch.uint8, device=self.device)
                    b.fill_(0xFF)
                    blocks.append(b)
        self.sync()
        del blocks


# ------------------------------------------------------------------------------------ compare
def _compare_tensor(i: int, r: Any, c: Any, cfg: Config, findings: Findings, info: dict[str, Any],
                    worst: list[float]) -> bool:
    """One output tensor against the reference's; ``worst`` holds the largest abs and rel errors so far."""
    if type(c) is not torch.Tensor:
        info["error"] = (f"output {i} is a {type(c).__module__}.{type(c).__name__}, not a plain torch.Tensor "
                         "(lazy or subclassed outputs are refused)")
        findings.flag_once("lazy-output", "invalid", info["error"], {"output": i, "type": type(c).__name__})
        return False
    if c.shape != r.shape:
        info["error"] = f"output {i}: shape {tuple(c.shape)} != reference {tuple(r.shape)}"
        return False
    if c.dtype != r.dtype:
        info["error"] = f"output {i}: dtype {c.dtype} != reference {r.dtype}"
        if r.dtype == torch.float32 and c.dtype in (torch.float16, torch.bfloat16):
            findings.flag_once("precision-downgrade", "invalid", info["error"], {"output": i})
        return False
    if c.device != r.device:
        info["error"] = f"output {i}: on {c.device}, the reference on {r.device}"
        return False
    rtol, atol = tolerance(cfg, r.dtype)
    info.update({"rtol": rtol, "atol": atol, "dtype": dtype_name(r.dtype)})
    if not (r.is_floating_point() or r.is_complex()):
        if not bool(torch.equal(c, r)):
            info["error"] = f"output {i}: integer/bool outputs differ from the reference"
            return False
        return True
    e = _compare_values(c, r, rtol, atol)
    worst[0], worst[1] = max(worst[0], e.max_abs), max(worst[1], e.max_rel)
    if e.nonfinite:
        info["error"] = (f"output {i}: {e.nonfinite} NaN/Inf elements of {c.numel()}"
                         " (unwritten output elements read as the poison value)"
                         + (f"; the reference has {e.ref_nonfinite} itself" if e.ref_nonfinite else ""))
        return False
    if e.bad:
        info["error"] = (f"output {i}: {e.bad} of {c.numel()} elements outside rtol={rtol}, atol={atol}; "
                         f"first at flat index {e.first}: {e.first_values[0]} vs reference "
                         f"{e.first_values[1]}; max abs error {e.max_abs:.3g}")
        info["max_abs_error"], info["max_rel_error"] = worst
        return False
    return True


@dataclass
class Errors:
    """One floating output against the reference's: NaN/Inf counts, elements outside the tolerance (and
    the first of them), the largest absolute and relative errors."""

    nonfinite: int = 0
    ref_nonfinite: int = 0
    bad: int = 0
    first: int = -1
    first_values: tuple[float, float] = (0.0, 0.0)
    max_abs: float = 0.0
    max_rel: float = 0.0


def _chunks(t: Any, flat: bool) -> Any:
    """Flat pieces of ``t`` of at most CHUNK_ELEMENTS with their flat offsets: views of a contiguous ``t``
    (``flat``), else slabs along the first dimension (a non-contiguous slab copied one at a time)."""
    if t.dim() == 0 or flat:
        flat = t.reshape(-1)
        for a in range(0, flat.numel(), CHUNK_ELEMENTS):
            yield a, flat[a:a + CHUNK_ELEMENTS]
        return
    per_row = max(1, t[0].numel())
    rows = max(1, CHUNK_ELEMENTS // per_row)
    for a in range(0, t.shape[0], rows):
        yield a * per_row, t[a:a + rows].reshape(-1)


def _compare_values(c: Any, r: Any, rtol: float, atol: float) -> Errors:
    """Chunk by chunk, in the outputs' own dtype (fp32 for 16-bit ones): never a full-size copy. The
    allclose test itself is torch.isclose in the outputs' dtype, as before; NaN/Inf always fail."""
    e = Errors()
    if not c.numel():
        return e
    work = torch.float32 if c.is_floating_point() and c.element_size() < 4 else c.dtype
    flat = c.dim() == 0 or (c.is_contiguous() and r.is_contiguous())
    for (off, cc), (_, rc) in zip(_chunks(c, flat), _chunks(r, flat), strict=True):
        fin = torch.isfinite(cc)
        e.nonfinite += int((~fin).sum())
        e.ref_nonfinite += int((~torch.isfinite(rc)).sum())
        del fin
        if e.nonfinite:
            continue  # a failure whatever the rest holds; keep counting NaN/Inf only
        cw, rw = cc.to(work), rc.to(work)
        diff = (cw - rw).abs()
        e.max_abs = max(e.max_abs, float(diff.max()))
        e.max_rel = max(e.max_rel, float((diff / rw.abs().clamp_min(1e-12)).max()))
        del cw, rw, diff
        bad = ~torch.isclose(cc, rc, rtol=rtol, atol=atol)
        nbad = int(bad.sum())
        if nbad and e.first < 0:
            j = int(bad.nonzero()[0])
            e.first, e.first_values = off + j, (float(cc[j]), float(rc[j]))
        e.bad += nbad
    return e


def compare(ref_out: list[Any], cand_out: list[Any], trial: int, cfg: Config,
            findings: Findings) -> tuple[bool, dict[str, Any]]:
    info: dict[str, Any] = {"trial": trial}
    if len(ref_out) != len(cand_out):
        info["error"] = f"the candidate returned {len(cand_out)} outputs, the reference {len(ref_out)}"
        return False, info
    worst = [0.0, 0.0]
    for i, (r, c) in enumerate(zip(ref_out, cand_out, strict=True)):
        if not isinstance(r, torch.Tensor):
            if r != c:
                info["error"] = f"output {i}: {c!r} != reference {r!r}"
                return False, info
            continue
        if not _compare_tensor(i, r, c, cfg, findings, info, worst):
            return False, info
    info["max_abs_error"], info["max_rel_error"] = worst
    return True, info


# ------------------------------------------------------------------------------------ the trials
@dataclass
class Trials:
    """The correctness trials so far (the ``correctness`` field of the result, once finished)."""

    trials: int
    policy: str
    passed: int = 0
    results: list[dict[str, Any]] = field(default_factory=list)
    dtypes: set[str] = field(default_factory=set)  # the problem's floating dtypes (inputs and outputs)
    previous: tuple[list[Any], list[Any]] | None = None  # the last trial's outputs: reference, candidate
    keep_previous: bool = True  # off where memory is short (the memory plan): no cached-output check then

    def note_dtypes(self, values: list[Any]) -> None:
        for x in values:
            if isinstance(x, torch.Tensor) and x.is_floating_point():
                self.dtypes.add(dtype_name(x.dtype))

    def result(self, all_ok: bool, cfg: Config) -> dict[str, Any]:
        infos = self.results
        return {"trials": self.trials, "passed": self.passed, "policy": self.policy, "trial_results": infos,
                "correct": all_ok and self.passed == self.trials,
                "max_abs_error": max((i.get("max_abs_error", 0.0) or 0.0) for i in infos) if infos else None,
                "max_rel_error": max((i.get("max_rel_error", 0.0) or 0.0) for i in infos) if infos else None,
                "tolerances": {d: dict(zip(("rtol", "atol"), tolerance(cfg, getattr(torch, d)), strict=True))
                               for d in sorted(self.dtypes)}}


def side_effects(inputs: list[Any], cand_in: list[Any], cand_out: list[Any], ref_out: list[Any], trial: int,
                 state: Trials, findings: Findings, ok: bool, info: dict[str, Any]) -> bool:
    """The candidate's effects beyond its outputs: inputs modified in place (a failure), outputs that are
    (views of) inputs, and the same output for new inputs (results cached across calls)."""
    for i, (a, b) in enumerate(zip(inputs, cand_in, strict=True)):
        if isinstance(a, torch.Tensor) and not torch.equal(a, b):
            ok = False
            info.setdefault("error", f"the candidate modified input {i} in place")
            findings.flag_once("input-mutation", "invalid", f"the candidate modified input {i} in place",
                               {"input": i})
    in_ptrs = {x.untyped_storage().data_ptr() for x in cand_in if isinstance(x, torch.Tensor)}
    for i, c in enumerate(cand_out):
        if type(c) is torch.Tensor and c.numel() and c.untyped_storage().data_ptr() in in_ptrs:
            findings.flag_once("aliased-output", "review", f"output {i} shares storage with an input", {"output": i})
    if state.previous is not None and ok is False:
        p_ref, p_cand = state.previous
        same = all(isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.shape == b.shape
                   and torch.equal(a, b) for a, b in zip(p_cand, cand_out, strict=False))
        ref_differs = any(isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and not torch.equal(a, b)
                          for a, b in zip(p_ref, ref_out, strict=False))
        if same and ref_differs:
            findings.flag_once("cached-output", "invalid",
                               "the candidate returned the same output for new inputs (results cached "
                               "across calls)", {"trial": trial})
    state.previous = (ref_out, [c.clone() if type(c) is torch.Tensor else c for c in cand_out]) \
        if state.keep_previous else None
    return ok
