"""What the model is told of a profile, bounded: the server's `analyze` summary as a host reads it, or
the raw counters of the same answer, or nothing (``--feedback diagnosis|raw|none``); and the target GPU
with its peaks.

``fit`` keeps a text under a token budget by dropping its lowest-ranked parts first, whole lines only,
and says what it dropped. Tokens are estimated (``estimate_tokens``): deterministic and cheap, not the
model's own tokenizer. Plain functions over the tools' answers: nothing here talks to the server.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Literal

Feedback = Literal["none", "raw", "diagnosis"]
_PIECE = re.compile(r"[A-Za-z]+|\d+|[^\sA-Za-z\d]")


def estimate_tokens(text: str) -> int:
    """Tokens of ``text``, estimated: a word about one token per 4 letters, a number one per 3 digits,
    every other symbol and every line break one."""
    n = text.count("\n")
    for p in _PIECE.findall(text):
        n += math.ceil(len(p) / 4) if p[0].isalpha() else math.ceil(len(p) / 3) if p[0].isdigit() else 1
    return n


@dataclass
class Part:
    """Whole lines of a text that are kept or dropped together; ``rank``: lower is kept longer; a part
    goes when its ``parent`` goes."""

    lines: list[str]
    rank: float
    kind: str  # what it is, for the note on what was dropped (e.g. "finding", "fix 2")
    name: str = ""  # which one (a rule id, a kernel name)
    parent: Part | None = None
    dropped: bool = field(default=False, repr=False)

    def gone(self) -> bool:
        return self.dropped or (self.parent is not None and self.parent.gone())


def _note(parts: list[Part], budget: int) -> str:
    """One line naming what was dropped (parts whose parent stayed), grouped by kind."""
    groups: dict[str, list[str]] = {}
    for p in parts:
        if p.dropped and (p.parent is None or not p.parent.gone()):
            groups.setdefault(p.kind, []).append(p.name)
    what = []
    for kind, names in groups.items():
        named = [n for n in dict.fromkeys(names) if n][:3] if kind == "finding" else []
        more = f" +{len(names) - len(named)}" if named and len(names) > len(named) else ""
        what.append(f"{len(names)} x {kind}" + (f" ({', '.join(named)}{more})" if named else ""))
    return f"[dropped to fit {budget} tokens: {'; '.join(what)}]"


def fit(parts: list[Part], budget: int) -> str:
    """The parts' lines in their order, the lowest-ranked parts dropped (the later one first on a tie)
    until the text and the note on what was dropped fit ``budget`` estimated tokens."""
    order = sorted(range(len(parts)), key=lambda i: (-parts[i].rank, -i))

    def text() -> str:
        kept = [ln for p in parts if not p.gone() for ln in p.lines]
        if any(p.gone() for p in parts):
            kept.append(_note(parts, budget))
        return "\n".join(kept)

    out = text()
    for i in order:
        if estimate_tokens(out) <= budget:
            break
        if not parts[i].gone():
            parts[i].dropped = True
            out = text()
    if estimate_tokens(out) > budget:  # not even the note fits: nothing of the profile is sent
        return ""
    return out


# ------------------------------------------------------------------------------------------- the summary
_KERNEL = re.compile(r"^- (.{1,60})")
_FINDING = re.compile(r"^( {0,2})\d+\. \[[A-Z]+\] .*\(([\w.\-]+)\)\s*$")
_FIX = re.compile(r"^\s+fix (\d+): ")


def summary_parts(text: str) -> list[Part]:
    """The server's `analyze` summary, read line by line into ranked parts: the costliest kernel's class
    line first, the header, then the kernel's findings in their rank (title and diagnosis, evidence, first fix), its top
    stalls and hot lines, later fixes, notes, Nsight Compute's titles, the report ids last. A line of no
    known kind stays with the part before it."""
    parts: list[Part] = []
    kernel: Part | None = None
    finding: Part | None = None
    j, i, base = -1, 0, 0.0

    def add(line: str, rank: float, kind: str, name: str = "", parent: Part | None = None) -> Part:
        parts.append(Part([line], rank, kind, name, parent))
        return parts[-1]

    for line in text.splitlines():
        if m := _KERNEL.match(line):
            j, i, finding = j + 1, 0, None
            base = 4.0 * j
            kernel = add(line, base, "kernel", m.group(1).split(" [")[0][:40])
        elif m := _FINDING.match(line):
            owner = kernel if m.group(1) else None
            b = base if owner is not None else 0.5
            finding = add(line, b + 1 + 2 * i, "finding", m.group(2), owner)
            i += 1
        elif line.lstrip().startswith("evidence: ") and finding is not None:
            add(line, finding.rank + 0.5, "evidence", finding.name, finding)
        elif (m := _FIX.match(line)) and finding is not None:
            n = int(m.group(1))
            rank = finding.rank + 0.6 if n == 1 else 12.0 + 4.0 * max(j, 0) + n + finding.rank / 100
            add(line, rank, f"fix {n}", finding.name, finding)
        elif line.startswith("  top stalls"):
            add(line, base + 3.5, "top stalls", parent=kernel)
        elif line.startswith("  hot lines"):
            add(line, base + 3.0, "hot lines", parent=kernel)
        elif line.startswith("  Nsight Compute: "):
            add(line, 30.0 + j, "Nsight Compute titles", parent=kernel)
        elif line.startswith(("Note: ", "Not analyzed in depth: ")) or "more findings in the structured" in line:
            add(line, 25.0, "note")
        elif line.startswith("Reports: "):
            add(line, 40.0, "report ids")
        elif line.startswith("System: "):
            finding = None
            add(line, 1.0, "system class")
        elif parts and (line.startswith(" ") or kernel is not None):
            parts[-1].lines.append(line)  # a diagnosis, a wrapped line: with its part
        else:
            add(line, 0.5, "header")
    return parts


def fit_summary(text: str, budget: int) -> str:
    """The server's `analyze` summary under ``budget`` estimated tokens (whole lines; what was dropped
    is said)."""
    if estimate_tokens(text) <= budget:
        return text
    return fit(summary_parts(text), budget)


# ------------------------------------------------------------------------------------------- raw counters
def _num(v: Any) -> str:
    if isinstance(v, float):
        return str(int(v)) if v.is_integer() else f"{v:.4g}"
    return str(v)


def _kernel_rows(k: dict[str, Any], j: int) -> list[Part]:
    base = 4.0 * j
    dur = k.get("duration_ns")
    head = Part([f"kernel {k.get('name', '?')}: {k.get('launches', 1)} launch(es); launch__grid_size "
                 f"{k.get('grid_size')}, launch__block_size {k.get('block_size')}, launch__registers_per_thread "
                 f"{k.get('registers_per_thread')}"], base, "kernel", str(k.get("name", ""))[:40])
    rows: list[tuple[str, str, Any, str]] = []  # (key, metric, value, unit)
    if dur is not None:
        rows.append(("gpu__time_duration.sum", "gpu__time_duration.sum", dur, " ns"))
    b = k.get("bottleneck") or {}
    roof = b.get("roofline") or {}
    if roof.get("flops") is not None:
        rows.append(("flops", "FP32 FLOPs executed (FFMA x2 + FADD + FMUL)", roof["flops"], ""))
    if roof.get("dram_bytes") is not None:
        rows.append(("dram", "dram__bytes_read.sum + dram__bytes_write.sum", roof["dram_bytes"], " B"))
    evidence = list(b.get("evidence") or []) + [e for f in k.get("findings") or [] for e in f.get("evidence") or []]
    for e in evidence:
        if isinstance(e.get("value"), (int, float)) and "__" in (e.get("metric") or ""):  # a profiler metric
            at = f" at {e['line']}" if e.get("line") else ""
            unit = f" {e['unit']}" if e.get("unit") else ""
            rows.append((e["metric"] + at, e["metric"] + at, float(e["value"]), unit))
    for reason, v in (k.get("top_stalls") or {}).items():
        metric = f"smsp__average_warps_issue_stalled_{reason}_per_issue_active.ratio"
        rows.append((metric, metric, v, " cycles/issue"))
    seen: set[str] = set()
    out = [head]
    for n, (key, metric, value, unit) in enumerate(rows):
        if key in seen:
            continue
        seen.add(key)
        out.append(Part([f"  {metric} = {_num(value)}{unit}"], base + 1 + n / 100, "metric", metric[:60], head))
    for line in (k.get("hot_lines") or [])[:3]:
        out.append(Part([f"  most warp samples: {line}"], base + 2, "hot line", parent=head))
    return out


def raw_table(result: dict[str, Any], budget: int) -> str:
    """The raw arm: the measured values of an `analyze` answer (launch configuration, duration, FLOPs and
    DRAM bytes, the profiler metrics the classes and rules read, stall cycles, lines with the most samples)
    as one table per kernel, without class, findings, thresholds, fixes or the rules' derived figures;
    under ``budget`` estimated tokens."""
    if result.get("status") != "ok":
        return f"(no counters: analyze answered {result.get('status')}: {result.get('explanation') or ''})"[:400]
    parts = [p for j, k in enumerate(result.get("kernels") or []) for p in _kernel_rows(k, j)]
    if not parts:
        return "(no kernels were profiled)"
    return fit(parts, budget)


def feedback_text(mode: Feedback, summary: str | None, result: dict[str, Any] | None, budget: int,
                  details: list[str] | None = None) -> str:
    """What a prompt shows of one profile in ``mode`` (empty for ``none`` or no profile). A profile kept
    without its text (run directories written before the text was kept) shows ``details``: one sentence
    per finding."""
    if mode == "none" or result is None:
        return ""
    if mode == "raw":
        return raw_table(result, budget)
    if not summary and details:
        return fit([Part([f"- {d}"], float(i), "finding") for i, d in enumerate(details)], budget)
    return fit_summary(summary or "", budget)


# ------------------------------------------------------------------------------------------- the GPU
def gpu_text(gpu: dict[str, Any] | None, peaks: dict[str, Any] | None) -> str:
    """The target GPU (the server's `capabilities`) and its datasheet peaks (`bottleneck_classify`)."""
    if not gpu:
        return ""
    mem = gpu.get("memory_total_bytes")
    about = ", ".join(x for x in (gpu.get("sm_arch"), f"{gpu['sm_count']} SMs" if gpu.get("sm_count") else "",
                                  f"{mem / 2**30:.0f} GiB" if mem else "") if x)
    line = f"{gpu.get('name')}" + (f" ({about})" if about else "")
    if not peaks:
        return line + ": no peak table for this GPU on the server."
    ridge = peaks["fp32_tflops"] * 1e3 / peaks["dram_gbps"]
    return (f"{line}. Peaks ({peaks.get('name')}, {peaks.get('source', 'datasheet')}): DRAM "
            f"{_num(peaks['dram_gbps'])} GB/s; FP32 {_num(peaks['fp32_tflops'])} TFLOP/s; FP16/BF16 tensor cores "
            f"{_num(peaks['fp16_tensor_tflops'])} TFLOP/s dense (FP32 accumulate); TF32 tensor "
            f"{_num(peaks['tf32_tensor_tflops'])}; FP64 {_num(peaks['fp64_tflops'])}; ridge point {ridge:.1f} "
            "FLOP/byte (FP32 against DRAM).")
