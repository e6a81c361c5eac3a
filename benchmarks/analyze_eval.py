"""analyze on eval-mode candidates (the agent's path): both stages measured in the candidate's own run by the
CUPTI collector, gated on the harness' profiler range, against Nsight Compute on the same candidate.

    python benchmarks/analyze_eval.py --kernelbench KERNELBENCH [--runs 1] [--json out.json]

KERNELBENCH is a KernelBench checkout (benchmarks/kernelbench_sweep.py says which commit;
benchmarks/pack_kernelbench.sh packs it for the GPU machine) or any folder of KernelBench-format problems
(default tests/fixtures/kernelbench, tiny sizes, where only 19_ReLU has a reference). The candidates: the five
level-1 ones of examples/kernelbench (19, 20, 21, 22, 25; NVRTC through kernelscope.fast) with their
KernelBench references, and examples/problems/softmax/load_inline.py (a `load_inline` extension) with its
reference.

Per candidate, each wall time the tool's own (server warm; the CUPTI libraries built before the first row):
`run` (eval_candidate, which also builds a load_inline extension into the shared cache, so the analyses
after it load that build, as the agent's do); analyze (CUPTI, the default); analyze with `light="ncu"` (two
Nsight Compute captures); and one `ncu --set full` capture of the same candidate by the ncu_profile tool
(`section_set="full"`: --profile-from-start off, the harness' profiled forward calls only, source imported,
clocks not locked). Target: analyze at most 40% of `--set full`. "same" compares the CUPTI path's top
kernel, its class and its top finding with the Nsight Compute path's. Needs an NVIDIA GPU with Nsight Compute.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import PROBLEMS, REPO, device_line, median, table, use_private_store

CANDIDATES = REPO / "examples" / "kernelbench"
LEVEL1 = "19,20,21,22,25"


@dataclass
class Case:
    name: str
    reference: Path
    candidate: Path


def cases(kernelbench: Path) -> list[Case]:
    from kernelscope.agent.kernelbench import find_problems

    out = [Case(p.key, p.reference, p.candidate) for p in find_problems(kernelbench, [1], LEVEL1, CANDIDATES)
           if p.candidate is not None]
    found = {c.name.split("/")[-1].split("_")[0] for c in out}
    missing = sorted(set(LEVEL1.split(",")) - found, key=int)
    if missing:
        print(f"no reference (or candidate) for level-1 problem(s) {', '.join(missing)} under {kernelbench}: "
              "skipped", file=sys.stderr)
    return [*out, Case("softmax (load_inline)", PROBLEMS / "softmax" / "reference.py",
                       PROBLEMS / "softmax" / "load_inline.py")]


def top(res: Any) -> tuple[str, str, str]:
    """The answer's top kernel: (name, class, top finding's rule)."""
    if not res.kernels:
        return ("-", "-", "-")
    k = res.kernels[0]
    return (k.mangled_name, k.bottleneck.cls, k.findings[0].rule if k.findings else "-")


def timed(fn: Any, runs: int) -> tuple[float, Any]:
    """Median wall seconds of ``runs`` calls, and the last call's answer."""
    walls, res = [], None
    for _ in range(runs):
        t0 = time.monotonic()
        res = fn()
        walls.append(time.monotonic() - t0)
    return median(walls), res


def one(case: Case, runs: int) -> dict[str, Any]:
    from kernelscope.agent.search.knobs import apply_knobs, default_config, parse_knobs
    from kernelscope.models.requests import AnalyzeRequest, EvalRequest, ProfileRequest
    from kernelscope.tools.analyze import analyze
    from kernelscope.tools.ncu_profile import ncu_profile
    from kernelscope.tools.run import eval_candidate

    src = case.candidate.read_text()  # the knob-annotated examples at their first values, as the agent starts
    target = {"reference_path": str(case.reference), "candidate": apply_knobs(src, default_config(parse_knobs(src)))}
    t_run, ev = timed(lambda: eval_candidate(EvalRequest(**target, timeout_s=900)), 1)
    t_an, an = timed(lambda: analyze(AnalyzeRequest(**target, timeout_s=600)), runs)
    t_ncu, nc = timed(lambda: analyze(AnalyzeRequest(**target, timeout_s=600, light="ncu")), runs)
    t_full, full = timed(lambda: ncu_profile(ProfileRequest(**target, section_set="full", timeout_s=600)), runs)
    tools = "+".join(dict.fromkeys(s.tool or "?" for s in an.stages if s.name in ("light", "deep")))
    return {"case": case.name, "run_status": ev.status, "verdict": ev.verdict, "run_s": t_run,
            "analyze_s": t_an, "analyze_status": an.status, "analyze_tools": tools, "top": top(an),
            "ncu_s": t_ncu, "ncu_status": nc.status, "ncu_top": top(nc),
            "full_s": t_full, "full_status": full.status, "notes": an.notes,
            "stages": [(s.name, s.tool, s.wall_s) for s in an.stages]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kernelbench", type=Path, default=REPO / "tests" / "fixtures" / "kernelbench",
                    help="a KernelBench checkout, or a folder of KernelBench-format problems")
    ap.add_argument("--runs", type=int, default=1, help="runs of each analysis and capture (the median is shown)")
    ap.add_argument("--json", type=Path, help="write the rows as JSON here")
    args = ap.parse_args()
    use_private_store([args.kernelbench.resolve()])
    from kernelscope.config import get_settings
    from kernelscope.measure.cupti import build_metrics_collector, build_tracer
    from kernelscope.toolkit.toolchain import require

    require("ncu")  # a clear error before any run when Nsight Compute is missing
    build_metrics_collector(get_settings())  # once per install: not part of any row
    build_tracer(get_settings())
    raw = []
    for case in cases(args.kernelbench):
        row = one(case, args.runs)
        raw.append(row)
        print(f"{case.name}: run {row['run_s']:.1f} s, analyze {row['analyze_s']:.1f} s ({row['analyze_tools']}), "
              f"light=ncu {row['ncu_s']:.1f} s, --set full {row['full_s']:.1f} s; notes {row['notes']}",
              file=sys.stderr, flush=True)
    rows = [[r["case"], f"{r['run_status']}/{r['verdict']}", round(r["run_s"], 2), r["analyze_tools"],
             round(r["analyze_s"], 2), round(r["ncu_s"], 2), round(r["full_s"], 2),
             f"{100 * r['analyze_s'] / r['full_s']:.0f}%" if r["full_status"] == "ok" else r["full_status"],
             f"{r['top'][0]}: {r['top'][1]}, {r['top'][2]}",
             "yes" if r["top"] == r["ncu_top"] else f"NO (ncu: {r['ncu_top'][1]}, {r['ncu_top'][2]})"] for r in raw]
    print(device_line())
    print(table(["candidate", "run", "run s", "analyze by", "analyze s", "light=ncu s", "--set full s",
                 "analyze/full", "top kernel: class, top finding (CUPTI)", "same as ncu"], rows))
    ok = [r for r in raw if r["full_status"] == "ok"]
    if ok:
        an, full = sum(r["analyze_s"] for r in ok), sum(r["full_s"] for r in ok)
        print(f"\nanalyze total {an:.1f} s vs ncu --set full {full:.1f} s = {100 * an / full:.0f}% (target <= 40%); "
              f"same top kernel, class and finding as the ncu path: {sum(r['top'] == r['ncu_top'] for r in raw)}"
              f"/{len(raw)}; light=ncu total {sum(r['ncu_s'] for r in ok):.1f} s")
    if args.json:
        args.json.write_text(json.dumps(raw, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
