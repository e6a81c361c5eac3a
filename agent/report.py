"""The run's HTML report: one self-contained file (inline SVG, no scripts from elsewhere) that opens
from disk in any browser.

Sections: the outcome; the best speedup over evaluations (every evaluation plotted, failures on the
floor); the search tree with each node coloured by its reward; the roofline position of the reference's
costliest kernel and of the best candidate's (from their `analyze` profiles); the findings per node; the
best candidate's code. Everything is read from the run directory, so a report can be rebuilt from it.
"""

from __future__ import annotations

import html
import json
import math
from pathlib import Path
from typing import Any

from kernelscope.agent.answers import all_findings, top_kernel
from kernelscope.agent.problems import problem_name

W, H, PAD = 760, 300, 64


def _e(x: Any) -> str:
    return html.escape(str(x), quote=True)


def _nodes(tree: dict[str, Any]) -> list[dict[str, Any]]:
    out, stack = [], [tree]
    while stack:
        n = stack.pop()
        out.append(n)
        stack.extend(reversed(n.get("children") or []))
    return sorted(out, key=lambda n: n["id"])


def _load_analyses(out: Path) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    for f in sorted((out / "analysis").glob("*.json")):
        try:
            rec = json.loads(f.read_text())
            found[rec["key"]] = rec
        except (OSError, ValueError, KeyError):
            continue
    return found


def _speedup(n: dict[str, Any]) -> float | None:
    return n["speedup"] if n.get("status") == "correct" and n.get("speedup") else None


# ------------------------------------------------------------------------------------------- charts
def speedup_chart(nodes: list[dict[str, Any]]) -> str:
    """Each evaluation's speedup (dots; failures as crosses on the floor) and the best so far (a step line),
    on a log2 axis."""
    sp = [_speedup(n) for n in nodes]
    good = [s for s in sp if s]
    if not good:
        return '<p class="empty">No correct candidate: nothing to plot.</p>'
    lo, hi = math.log2(min([*good, 1.0])) - 0.25, math.log2(max([*good, 1.0])) + 0.25
    n = len(nodes)

    def x(i: int) -> float:
        return PAD + (W - 2 * PAD) * (i / max(1, n - 1))

    def y(v: float) -> float:
        return H - PAD - (H - 2 * PAD) * ((math.log2(v) - lo) / (hi - lo))

    parts = [f'<svg id="speedup-chart" viewBox="0 0 {W} {H}" width="{W}" height="{H}" role="img">',
             f'<line x1="{PAD}" y1="{H - PAD}" x2="{W - PAD}" y2="{H - PAD}" class="axis"/>',
             f'<line x1="{PAD}" y1="{PAD}" x2="{PAD}" y2="{H - PAD}" class="axis"/>']
    for t in range(math.floor(lo), math.ceil(hi) + 1):
        v = 2.0 ** t
        if lo <= t <= hi:
            parts.append(f'<line x1="{PAD}" y1="{y(v):.1f}" x2="{W - PAD}" y2="{y(v):.1f}" class="grid"/>'
                         f'<text x="{PAD - 6}" y="{y(v) + 4:.1f}" class="tick" text-anchor="end">{v:g}x</text>')
    parts.append(f'<line x1="{PAD}" y1="{y(1.0):.1f}" x2="{W - PAD}" y2="{y(1.0):.1f}" class="unity"/>')
    every = max(1, math.ceil(n / 10))
    parts += [f'<text x="{x(i):.1f}" y="{H - PAD + 16}" class="tick" text-anchor="middle">{i + 1}</text>'
              for i in range(0, n, every)]
    best, pts = 0.0, []
    for i, s in enumerate(sp):
        best = max(best, s or 0.0)
        if best:
            pts.append(f"{x(i):.1f},{y(best):.1f}")
    parts.append(f'<polyline id="best-line" points="{" ".join(pts)}" class="best"/>')
    for i, (node, s) in enumerate(zip(nodes, sp, strict=True)):
        tip = _e(f"node {node['id']}: {node.get('change', '')} -> {f'{s:.3f}x' if s else node.get('status')}")
        if s:
            parts.append(f'<circle class="eval ok" cx="{x(i):.1f}" cy="{y(s):.1f}" r="4"><title>{tip}</title></circle>')
        else:
            parts.append(f'<text class="eval fail" x="{x(i):.1f}" y="{H - PAD + 4}" text-anchor="middle">×'
                         f'<title>{tip}</title></text>')
    parts.append(f'<text x="{W / 2}" y="{H - 12}" class="label" text-anchor="middle">evaluation</text>'
                 f'<text x="12" y="{H / 2}" class="label" transform="rotate(-90 12 {H / 2})" text-anchor="middle">'
                 'speedup over the reference</text></svg>')
    return "".join(parts)


def tree_chart(tree: dict[str, Any], best_id: int) -> str:
    """The search tree: depth downwards, leaves spread left to right; colour = speedup (red slower,
    green faster, grey failed); the path to the best node drawn thick; pruned nodes dashed."""
    pos: dict[int, tuple[float, float]] = {}
    leaves = [0]
    depth_max = [0]

    def place(n: dict[str, Any], d: int) -> float:
        depth_max[0] = max(depth_max[0], d)
        kids = n.get("children") or []
        if not kids:
            xs = float(leaves[0])
            leaves[0] += 1
        else:
            xs = sum(place(c, d + 1) for c in kids) / len(kids)
        pos[n["id"]] = (xs, float(d))
        return xs

    place(tree, 0)
    nleaf, nd = max(1, leaves[0] - 1), max(1, depth_max[0])
    h = max(160, 70 * (nd + 1))

    def xy(i: int) -> tuple[float, float]:
        lx, d = pos[i]
        return PAD + (W - 2 * PAD) * (lx / nleaf if nleaf else 0.5), PAD / 2 + (h - PAD) * (d / nd)

    nodes = _nodes(tree)
    parent: dict[int, int] = {c["id"]: n["id"] for n in nodes for c in n.get("children") or []}
    path, i = {best_id}, best_id
    while i in parent:
        i = parent[i]
        path.add(i)
    parts = [f'<svg id="tree-chart" viewBox="0 0 {W} {h}" width="{W}" height="{h}" role="img">']
    for c, p in parent.items():
        (x1, y1), (x2, y2) = xy(p), xy(c)
        cls = "edge best" if c in path and p in path else "edge"
        parts.append(f'<line class="{cls}" x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}"/>')
    for n in nodes:
        cx, cy = xy(n["id"])
        s = _speedup(n)
        if s is None:
            fill = "#9e9e9e"
        else:
            t = max(-1.0, min(1.0, math.log2(s) / 2))  # +-4x saturates
            fill = f"hsl({60 + 60 * t:.0f}, 70%, 45%)"
        ring = ' stroke="#111" stroke-width="3"' if n["id"] == best_id else ""
        dash = ' stroke-dasharray="3 2" stroke="#555"' if n.get("dead") else ""
        tip = _e(f"node {n['id']} ({n.get('change', '')}): "
                 + (f"{s:.3f}x, reward {n.get('reward')}" if s else str(n.get("status")))
                 + (f"; {n['bottleneck']}" if n.get("bottleneck") else "")
                 + (f"; findings: {', '.join(n['findings'])}" if n.get("findings") else "")
                 + (f"; pruned: {n['dead']}" if n.get("dead") else ""))
        parts.append(f'<g class="node" data-id="{n["id"]}"><circle cx="{cx:.1f}" cy="{cy:.1f}" r="9" fill="{fill}"'
                     f'{ring}{dash}><title>{tip}</title></circle><text x="{cx:.1f}" y="{cy + 3.5:.1f}" '
                     f'class="nid" text-anchor="middle">{n["id"]}</text></g>')
    parts.append("</svg>")
    return "".join(parts)


def roofline_chart(points: list[tuple[str, dict[str, Any]]]) -> str:
    """Reference and best on the FP32/DRAM roofline of their GPU, from each profile's costliest kernel; kernels
    without measured FP32 FLOPs (copies, tensor-core or integer work) are listed by their DRAM bandwidth and
    fraction of the roof instead."""
    if not points:
        return ('<p class="empty" id="roofline-missing">No profiles in this run (see the summary\'s note): the '
                'roofline needs the `analyze` tool on a GPU.</p>')
    peaks = next((b.get("peaks") for _, b in points if b.get("peaks")), None)
    rows = []
    for label, b in points:
        r = b.get("roofline") or {}
        frac = r.get("fraction_of_roofline")
        rows.append(f'<tr class="roof-row"><td>{_e(label)}</td><td><code>{_e(b.get("kernel", ""))[:80]}</code></td>'
                    f'<td>{_e(b.get("cls"))}</td><td>{_fmt(r.get("arithmetic_intensity"), ".2f")}</td>'
                    f'<td>{_fmt(r.get("achieved_tflops"), ".2f")}</td>'
                    f'<td>{_fmt(r.get("achieved_dram_gbps"), ".0f")}</td>'
                    f'<td>{_fmt(frac * 100 if frac is not None else None, ".0f")}%</td></tr>')
    table = ('<table id="roofline-table"><tr><th></th><th>costliest kernel</th><th>class</th><th>FLOP/byte</th>'
             '<th>FP32 TFLOP/s</th><th>DRAM GB/s</th><th>of the roof</th></tr>' + "".join(rows) + "</table>")
    plotted = [(lab, b["roofline"]) for lab, b in points
               if (b.get("roofline") or {}).get("arithmetic_intensity") and (b["roofline"].get("achieved_tflops"))]
    if not peaks or not plotted:
        return table + '<p class="empty">No FP32 FLOPs measured in these kernels: no roofline point to plot.</p>'
    bw, fp = peaks["dram_gbps"] / 1000.0, peaks["fp32_tflops"]  # TB/s, TFLOP/s
    ais = [r["arithmetic_intensity"] for _, r in plotted]
    x_lo, x_hi = math.log10(min([*ais, fp / bw]) / 4), math.log10(max([*ais, fp / bw]) * 4)
    tf = [r["achieved_tflops"] for _, r in plotted]
    y_lo, y_hi = math.log10(max(1e-4, min(tf) / 4)), math.log10(fp * 2)

    def px(ai: float) -> float:
        return PAD + (W - 2 * PAD) * (math.log10(ai) - x_lo) / (x_hi - x_lo)

    def py(t: float) -> float:
        return H - PAD - (H - 2 * PAD) * (math.log10(max(t, 10 ** y_lo)) - y_lo) / (y_hi - y_lo)

    ridge = fp / bw
    roof = [(10 ** x_lo, bw * 10 ** x_lo), (ridge, fp), (10 ** x_hi, fp)]
    parts = [f'<svg id="roofline-chart" viewBox="0 0 {W} {H}" width="{W}" height="{H}" role="img">',
             f'<polyline class="roof" points="{" ".join(f"{px(a):.1f},{py(t):.1f}" for a, t in roof)}"/>',
             f'<text class="tick" x="{px(ridge):.1f}" y="{py(fp) - 6:.1f}">{_e(peaks.get("name", ""))} '
             f'FP32 {fp:g} TFLOP/s, DRAM {bw:g} TB/s</text>']
    for (label, r), colour in zip(plotted, ("#c62828", "#2e7d32", "#1565c0"), strict=False):
        cx, cy = px(r["arithmetic_intensity"]), py(r["achieved_tflops"])
        parts.append(f'<circle class="roof-point" cx="{cx:.1f}" cy="{cy:.1f}" r="6" fill="{colour}">'
                     f'<title>{_e(label)}</title></circle><text class="tick" x="{cx + 9:.1f}" y="{cy + 4:.1f}">'
                     f'{_e(label)}</text>')
    parts.append(f'<text x="{W / 2}" y="{H - 12}" class="label" text-anchor="middle">arithmetic intensity '
                 '(FLOP per DRAM byte, log)</text><text x="12" y="{0}" class="label" text-anchor="middle" '
                 'transform="rotate(-90 12 {0})">TFLOP/s (log)</text></svg>'.format(H / 2))
    return table + "".join(parts)


def _fmt(v: Any, spec: str) -> str:
    return format(v, spec) if isinstance(v, (int, float)) else "–"


# ------------------------------------------------------------------------------------------- page
CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:24px auto;max-width:980px;color:#1b1b1b}
h1{font-size:22px} h2{font-size:17px;margin-top:28px;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:8px 0} td,th{border:1px solid #ddd;padding:3px 8px;vertical-align:top}
th{background:#f4f4f4;text-align:left} .axis{stroke:#333} .grid{stroke:#eee} .unity{stroke:#999;stroke-dasharray:4 3}
.best{fill:none;stroke:#2e7d32;stroke-width:2.5} .eval.ok{fill:#1565c0} .eval.fail{fill:#c62828;font-size:13px}
.tick{font-size:11px;fill:#444} .label{font-size:12px;fill:#222} .edge{stroke:#bbb;stroke-width:1.5}
.edge.best{stroke:#2e7d32;stroke-width:3.5} .nid{font-size:9px;fill:#fff;pointer-events:none}
.roof{fill:none;stroke:#555;stroke-width:2} .empty{color:#666;font-style:italic} .sev-critical,.sev-high{color:#b71c1c}
.sev-warning{color:#e65100} code{font-size:12px} pre{background:#f7f7f7;padding:10px;overflow:auto;font-size:12px}
"""


def _ci(summary: dict[str, Any]) -> str:
    """The best's interval and how it was measured (confirmed, or the search's own figure)."""
    ci = summary.get("best_ci")
    text = f" (95% CI {ci[0]:.3f}-{ci[1]:.3f})" if ci else ""
    if summary.get("confirmed"):
        text += ", confirmed by a longer measurement"
        if summary.get("search_speedup"):
            text += f" (the search measured {summary['search_speedup']:.3f}x)"
    return text


def render_report(out: Path, summary: dict[str, Any], tree: dict[str, Any]) -> str:
    nodes = _nodes(tree)
    analyses = _load_analyses(out)
    best_id = summary["best_id"]
    cfg = json.loads((out / "config.json").read_text()) if (out / "config.json").is_file() else {}
    problem = problem_name(Path(cfg.get("reference", "problem")))

    def top_bottleneck(result: dict[str, Any]) -> dict[str, Any] | None:
        k = top_kernel(result)
        return k.get("bottleneck") if k else None

    points: list[tuple[str, dict[str, Any]]] = []
    ref = next((r for k, r in analyses.items() if k.startswith("reference:")), None)
    if ref and (b := top_bottleneck(ref["result"])):
        points.append(("reference", b))
    start = nodes[0]
    best = next(n for n in nodes if n["id"] == best_id)
    for label, n in (("start (node 0)", start), (f"best (node {best_id})", best)):
        rec = analyses.get(n["key"])
        if rec and (b := top_bottleneck(rec["result"])) and not (label.startswith("best") and best_id == 0):
            points.append((label, b))

    rows = []
    for n in nodes:
        rec = analyses.get(n["key"])
        fs = []
        if rec:
            for f in all_findings(rec["result"])[:6]:
                fix = (f.get("fixes") or [{}])[0].get("action", "")
                fs.append(f'<li><span class="sev-{_e(f.get("severity"))}">{_e(f.get("severity"))}</span> '
                          f'<b>{_e(f["rule"])}</b>: {_e(f.get("diagnosis", ""))}'
                          + (f" <i>Fix: {_e(fix)}</i>" if fix else "") + "</li>")
        s = _speedup(n)
        rows.append(f'<tr class="node-row" id="node-{n["id"]}"><td>{n["id"]}</td><td>{_e(n.get("change", ""))}</td>'
                    f'<td>{f"{s:.3f}x" if s else _e(n.get("status"))}</td><td>{_e(n.get("bottleneck") or "–")}</td>'
                    f'<td>{"<ul>" + "".join(fs) + "</ul>" if fs else ("profiled, no findings" if rec else "–")}</td>'
                    "</tr>")
    best_src = (out / "best.py").read_text() if (out / "best.py").is_file() else ""
    sp = summary.get("best_speedup")
    cost = summary.get("llm_cost_usd")
    facts = [("problem", problem), ("proposer", summary.get("proposer")), ("strategy", cfg.get("strategy", "")),
             ("evaluations", f"{summary['evaluations']} ({summary.get('reused', 0)} reused; stopped on "
                             f"{summary.get('stopped', 'budget')})"),
             ("best", f"node {best_id}: {sp:.3f}x over the reference{_ci(summary)}" if sp else
                      f"node {best_id}: {summary.get('best_status')}"),
             ("start", f"{summary['start_speedup']:.3f}x" if summary.get("start_speedup") else "–"),
             ("bottleneck (reference → best)", f"{summary.get('reference_bottleneck') or '–'} → "
                                               f"{summary.get('best_bottleneck') or '–'}"),
             ("profiles", summary.get("analyses", 0) or summary.get("analysis_note") or 0),
             ("wall time", f"{summary['wall_s']:.1f} s")]
    if summary.get("llm_calls"):
        facts.append(("LLM", f"{summary['llm_calls']} calls, {summary.get('llm_tokens')} tokens"
                             + (f", ~${cost:.2f}" if cost is not None else "")))
    facts_html = "".join(f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in facts)
    return (f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>kernelscope optimize: '
            f'{_e(problem)}</title><style>{CSS}</style></head><body>'
            f'<h1>kernelscope optimize: {_e(problem)}</h1><table id="facts">{facts_html}</table>'
            f'<h2>Speedup over evaluations</h2>{speedup_chart(nodes)}'
            f'<h2>Search tree</h2><p>Colour: red slower than the reference, green faster, grey failed; thick: '
            f'the path to the best; dashed: pruned. Hover for each node\'s change and findings.</p>'
            f'{tree_chart(tree, best_id)}'
            f'<h2>Roofline: reference vs best</h2>{roofline_chart(points)}'
            f'<h2>Findings per node</h2><table id="nodes"><tr><th>node</th><th>change</th><th>result</th>'
            f'<th>bottleneck</th><th>findings (profiled nodes)</th></tr>{"".join(rows)}</table>'
            f'<h2>Best candidate (node {best_id})</h2><pre id="best-source">{_e(best_src)}</pre>'
            "</body></html>")


def write_report(out: Path, *, summary: dict[str, Any] | None = None, tree: dict[str, Any] | None = None) -> Path:
    """Write ``report.html`` in the run directory ``out`` (from its summary.json and tree.json unless given)."""
    summary = summary or json.loads((out / "summary.json").read_text())
    tree = tree or json.loads((out / "tree.json").read_text())
    path = out / "report.html"
    path.write_text(render_report(out, summary, tree), encoding="utf-8")
    return path
