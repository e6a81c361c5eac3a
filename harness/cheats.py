"""Cheat checks: what the candidate's source and its calls say about whether its speed is its own.

- static: try/except fallbacks to PyTorch in the source (``fallback_findings``);
- the op audit: the aten ops each side runs in one forward, and a candidate that hands the reference's
  main work back to PyTorch (``reference_op_findings``);
- the environment: timer/Event monkey-patching and precision downgrades (``Integrity``);
- the verdict: a speedup too good to be plausible.

Importable without torch (the static checks run anywhere); what needs torch is given it.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from typing import Any

from kernelscope.harness.context import Originals
from kernelscope.harness.protocol import Findings

# aten ops that move, view or allocate memory rather than compute: using them is not "calling the
# reference's ops".
NON_COMPUTE = {
    "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "zeros", "zeros_like", "ones",
    "ones_like", "full", "full_like", "new_zeros", "new_ones", "new_full", "view", "_unsafe_view", "reshape",
    "as_strided", "t", "transpose", "permute", "contiguous", "clone", "copy_", "detach", "expand", "select",
    "slice", "unsqueeze", "squeeze", "size", "stride", "fill_", "zero_", "alias", "lift_fresh", "split",
    "chunk", "unbind", "narrow", "flatten", "view_as", "expand_as", "_reshape_alias", "resize_", "set_",
    "lift_fresh_copy", "unfold", "diagonal", "item", "_local_scalar_dense", "is_same_size", "arange",
    "randn", "rand", "normal_", "uniform_", "_to_copy", "to", "_copy_from", "numel", "dim", "sym_size",
    "sym_stride", "sym_numel", "sym_storage_offset", "storage_offset", "record_stream", "stack", "cat",
}
# Which ops are a problem's "main work", by tier: a candidate calling one of the reference's
# top-tier ops has handed the main work back to PyTorch.
TIERS = [
    {"mm", "bmm", "addmm", "matmul", "baddbmm", "addbmm", "linear", "convolution", "_convolution",
     "cudnn_convolution", "conv2d", "conv1d", "conv3d", "conv_transpose2d", "_scaled_dot_product_flash_attention",
     "_scaled_dot_product_efficient_attention", "scaled_dot_product_attention", "einsum", "tensordot",
     "mkldnn_convolution", "_scaled_dot_product_cudnn_attention", "_scaled_mm", "dot", "mv", "addmv"},
    {"_softmax", "softmax", "_log_softmax", "log_softmax", "native_layer_norm", "layer_norm", "native_batch_norm",
     "_native_batch_norm_legit", "_native_batch_norm_legit_no_training", "native_group_norm", "group_norm",
     "rms_norm", "_fused_rms_norm", "cumsum", "cumprod", "sort", "topk", "argmax", "argmin", "max", "min",
     "amax", "amin", "sum", "mean", "var", "std", "prod", "norm", "linalg_vector_norm", "logsumexp",
     "max_pool2d_with_indices", "avg_pool2d", "adaptive_avg_pool2d", "embedding", "index_select", "gather",
     "scatter_add", "scan"},
]


# ------------------------------------------------------------------------------------ static
def _calls_torch(call: ast.Call) -> str | None:
    """The name an except handler's call reaches PyTorch through, or None."""
    f = call.func
    root = f
    while isinstance(root, ast.Attribute):
        root = root.value
    name = root.id if isinstance(root, ast.Name) else ""
    attr = f.attr if isinstance(f, ast.Attribute) else (f.id if isinstance(f, ast.Name) else "")
    if name in ("torch", "F", "nn", "functional") or attr in ("forward", "Model") or (
            isinstance(root, ast.Call) and isinstance(root.func, ast.Name) and root.func.id == "super"):
        return name or attr
    return None


def fallback_findings(source: str) -> list[dict[str, Any]]:
    """try/except blocks whose handler calls torch (a fallback to PyTorch when the kernel fails)."""
    flags: list[dict[str, Any]] = []
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return flags
    for node in ast.walk(tree):
        if not isinstance(node, ast.Try):
            continue
        for handler in node.handlers:
            via = next((v for sub in ast.walk(handler) if isinstance(sub, ast.Call)
                        and (v := _calls_torch(sub)) is not None), None)
            if via is not None:
                flags.append({
                    "id": "fallback-to-torch", "severity": "invalid",
                    "message": f"line {handler.lineno}: an except handler calls {via}... — a "
                               "fallback to PyTorch when the custom kernel fails. Remove the try/except: "
                               "a candidate must succeed or fail on its own kernel.",
                    "evidence": {"line": handler.lineno},
                })
                break  # one finding per try block
    return flags


# ------------------------------------------------------------------------------------ op audit
def audit_ops(fn: Any, inputs: list[Any], sync: Callable[[], None]) -> list[str]:
    """The aten ops one forward of ``fn`` dispatches, in order."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    seen: list[str] = []

    class Recorder(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
            seen.append(func._overloadpacket.__name__)
            return func(*args, **(kwargs or {}))

    with torch.no_grad(), Recorder():
        fn(*inputs)
    sync()
    return seen


def reference_op_findings(ref_ops: list[str], cand_ops: list[str], findings: Findings, *, note: str = "",
                          strict: bool = False, glue_only: bool = False) -> None:
    """The op audit: the candidate calling the reference's main ops (any compute op under ``strict``) is
    ``invalid``; other shared ops are glue, for review. ``glue_only``: the main ops were judged already
    (by the delegation policy on the GPU)."""
    rc = {o for o in ref_ops if o not in NON_COMPUTE}
    cc = {o for o in cand_ops if o not in NON_COMPUTE}
    shared = rc & cc
    if not shared:
        return
    main_tier = rc if strict else next((tier & rc for tier in TIERS if tier & rc), rc)
    main_used = [] if glue_only else sorted(main_tier & cc)
    if main_used:
        findings.flag_once("reference-ops", "invalid",
                           f"the candidate calls the reference's main PyTorch ops ({', '.join(main_used)}) instead "
                           f"of its own kernel{note}.", {"ops": main_used, "policy": "op-audit"})
    else:
        findings.flag_once("shared-torch-ops", "review",
                           f"the candidate also calls PyTorch ops the reference uses ({', '.join(sorted(shared))}); "
                           "fine for glue, not for the main work.", {"ops": sorted(shared)})


# ------------------------------------------------------------------------------------ environment
def precision_state(torch: Any) -> dict[str, Any]:
    return {"matmul.allow_tf32": bool(torch.backends.cuda.matmul.allow_tf32),
            "cudnn.allow_tf32": bool(torch.backends.cudnn.allow_tf32),
            "float32_matmul_precision": torch.get_float32_matmul_precision()}


class Integrity:
    """Timer tampering and precision downgrades, against the state captured before the candidate ran."""

    def __init__(self, torch: Any, cuda: bool, findings: Findings, *, allow_tf32: bool) -> None:
        self.torch = torch
        self.findings = findings
        self.allow_tf32 = allow_tf32
        self.originals = Originals.capture(torch, cuda)
        self.precision_before = precision_state(torch)

    def check_tampering(self, when: str) -> None:
        now = Originals.capture(self.torch, self.originals.Event is not None).checked()
        before = self.originals.checked()
        changed = sorted(k for k, v in now.items() if v is not before.get(k))
        if changed and not self.findings.has("timer-tampering"):
            self.findings.flag_once("timer-tampering", "invalid",
                                    f"the candidate replaced timing functions ({', '.join(changed)}) {when}. "
                                    "Timing uses the originals, but the candidate is refused.",
                                    {"replaced": changed})

    def check_precision(self, problem_dtypes: set[str]) -> None:
        if "float32" not in problem_dtypes or self.allow_tf32:
            return
        now, before = precision_state(self.torch), self.precision_before
        loosened = [k for k in ("matmul.allow_tf32", "cudnn.allow_tf32") if now[k] and not before[k]]
        if now["float32_matmul_precision"] != before["float32_matmul_precision"] and \
                now["float32_matmul_precision"] != "highest":
            loosened.append(f"float32_matmul_precision={now['float32_matmul_precision']}")
        if loosened:
            self.findings.flag_once("precision-downgrade", "invalid",
                                    "the candidate enabled TF32 / reduced fp32 matmul precision ("
                                    + ", ".join(loosened) + ") on an fp32 problem; allow it explicitly "
                                    "with allow_tf32 if that is intended.", {"changed": loosened})


# ------------------------------------------------------------------------------------ the verdict
def implausible_speedup(speed: dict[str, Any], timings: dict[str, Any], limit: float, findings: Findings) -> None:
    eager = speed.get("eager")
    if eager and eager["speedup"] > limit:
        findings.flag_once("implausible-speedup", "review",
                           f"speedup {eager['speedup']:.1f}x over eager PyTorch is above {limit:.0f}x: check the "
                           "candidate does the same work (shapes, all outputs, no skipped computation).",
                           {"speedup": eager["speedup"], "candidate_median_us": timings["candidate"]["median_us"],
                            "reference_median_us": timings["reference"]["median_us"]})
