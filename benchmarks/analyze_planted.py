"""The planted suite through `analyze`: classification, top finding and its source line for each bad
kernel, silence on its fixed twin, and the wall time of the two-stage analyze against
`ncu --set full` on the same program (target: at most 40%).

    python benchmarks/analyze_planted.py                      # all cases, with the --set full baseline
    python benchmarks/analyze_planted.py --cases 01,07 --no-full
    python benchmarks/analyze_planted.py --save-fixtures tests/fixtures/planted   # regenerate the fixtures
    python benchmarks/analyze_planted.py --apps               # the applications instead (see APPS)
    python benchmarks/analyze_planted.py --light ncu          # both stages under Nsight Compute, not CUPTI

--apps runs the same comparison on programs that launch their kernels many times, as applications do
(examples/apps/mini_gpt.cu, examples/system/copy_loop.cu), and adds a second baseline: `--set full` on
the first launch of each kernel only (`--kernel-id ::regex:.*:1`), what an expert who knows the
program would ask ncu for.

analyze's default measures both stages in the program's own run (the CUPTI collector: light metrics, then the
deep metrics, stall reasons and source passes of each kernel's first launches); --light ncu runs the two stages
under Nsight Compute instead, after a CUPTI trace. Needs an NVIDIA GPU with Nsight Compute. --save-fixtures
(which implies --light ncu, as the CPU tests replay both Nsight Compute reports) writes, per case, the light
and deep reports analyze captured, the compile result (ptxas resources) and the SASS statistics of the program, which
the CPU tests replay.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import REPO, device_line, table, use_private_store

PLANTED = REPO / "examples" / "planted"
# name: (source, program arguments)
APPS: dict[str, tuple[Path, list[str]]] = {
    "mini_gpt (2 forward passes)": (REPO / "examples" / "apps" / "mini_gpt.cu", ["2"]),
    "copy_loop": (REPO / "examples" / "system" / "copy_loop.cu", []),
    "copy_loop fixed": (REPO / "examples" / "system" / "copy_loop.cu", ["fixed"]),
}
FULL = ["--set", "full", "--import-source", "yes", "--clock-control", "none", "--launch-count", "512"]


def cases(selected: list[str] | None) -> list[Path]:
    out = sorted(p for p in PLANTED.iterdir() if (p / "case.json").is_file())
    if selected:
        out = [p for p in out if any(p.name.startswith(s) for s in selected)]
    return out


def planted_line(cu: Path) -> int:
    return next(i for i, ln in enumerate(cu.read_text().splitlines(), 1) if "// PLANTED" in ln)


def check(case: dict, cu_name: str, line: int, result: object) -> dict:
    kernels = {k.mangled_name: k for k in result.kernels}  # type: ignore[attr-defined]
    bad, fixed = kernels.get(case["bad_kernel"]), kernels.get(case["fixed_kernel"])
    row = {"class": bad.bottleneck.cls if bad else "missing", "top": bad.findings[0].rule if bad and bad.findings
           else "-", "line": (bad.findings[0].line or "-") if bad and bad.findings else "-"}
    row["class_ok"] = row["class"] == case["expected_class"]
    row["top_ok"] = row["top"] == case["expected_rule"]
    row["line_ok"] = (not case.get("line_expected", True)) or f"{cu_name}:{line}" in str(row["line"])
    row["twin_ok"] = fixed is not None and all(f.rule != case["expected_rule"] for f in fixed.findings)
    return row


def full_capture(exe: Path, args: list[str], extra: Sequence[str] = ()) -> float:
    """Seconds of one `ncu --set full` run of the program (staged as analyze stages it)."""
    from kernelscope.toolkit.toolchain import require
    from kernelscope.tools.run import stage_program

    with tempfile.TemporaryDirectory() as tmp:
        prog = stage_program(exe, Path(tmp))
        t0 = time.monotonic()
        r = subprocess.run([str(require("ncu")), *FULL, *extra, "-f", "-o", f"{tmp}/full", str(prog), *args],
                           capture_output=True, text=True)
        took = time.monotonic() - t0
    if r.returncode != 0:
        raise SystemExit(f"ncu --set full failed:\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}")
    return took


def apps(light: str) -> int:
    """analyze against `ncu --set full` (every launch, and each kernel's first launch) on the applications."""
    from kernelscope.artifacts import get_store
    from kernelscope.models.requests import AnalyzeRequest, CompileRequest
    from kernelscope.tools.analyze import analyze
    from kernelscope.tools.compile import compile_cuda

    rows, tot = [], [0.0, 0.0, 0.0]
    for name, (src, argv) in APPS.items():
        comp = compile_cuda(CompileRequest(source=src.read_text(), filename=src.name, output="executable",
                                           flags=["-O3"]))
        if not comp.success or comp.artifact_id is None:
            print(f"{name}: compile failed\n{comp.log}", file=sys.stderr)
            return 1
        exe = Path(str(get_store().require(comp.artifact_id).path("executable")))
        t0 = time.monotonic()
        res = analyze(AnalyzeRequest(artifact_id=comp.artifact_id, args=argv, timeout_s=600, light=light))
        t_an = time.monotonic() - t0
        if res.status != "ok":
            print(f"{name}: analyze {res.status}: {res.explanation}", file=sys.stderr)
            return 1
        t_full = full_capture(exe, argv)
        t_first = full_capture(exe, argv, ["--kernel-id", "::regex:.*:1"])
        stage = {st.name: st.wall_s for st in res.stages}
        launches = res.system.launches if res.system else res.launches_profiled
        found = "; ".join(f"{k.name}: {k.bottleneck.cls}, {k.findings[0].rule if k.findings else '-'}"
                          for k in res.kernels)
        rows.append([name, launches, res.kernels_total, found, *(round(stage.get(n, 0), 2) for n in
                     ("trace", "light", "deep", "rules")), round(t_an, 2), round(t_full, 2),
                     f"{100 * t_an / t_full:.0f}%", round(t_first, 2), f"{100 * t_an / t_first:.0f}%"])
        for i, v in enumerate((t_an, t_full, t_first)):
            tot[i] += v
        print(f"{name}: analyze {t_an:.1f} s, full {t_full:.1f} s, full on first launches {t_first:.1f} s",
              file=sys.stderr, flush=True)
    print(device_line())
    print(table(["program", "launches", "kernels", "analyze: top kernels (class, top finding)", "trace s",
                 "light s", "deep s", "rules s", "analyze s", "full s", "analyze/full", "full 1st s",
                 "analyze/full 1st"], rows))
    print(f"\ntotal: analyze {tot[0]:.1f} s; ncu --set full {tot[1]:.1f} s ({100 * tot[0] / tot[1]:.0f}%); "
          f"--set full on each kernel's first launch {tot[2]:.1f} s ({100 * tot[0] / tot[2]:.0f}%)")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", help="comma-separated case prefixes (default: all)")
    ap.add_argument("--no-full", action="store_true", help="skip the ncu --set full baseline")
    ap.add_argument("--skip-full", default="", help="comma-separated case prefixes without the baseline")
    ap.add_argument("--save-fixtures", type=Path, help="write each case's reports and evidence here")
    ap.add_argument("--json", type=Path, help="write the rows as JSON here")
    ap.add_argument("--apps", action="store_true", help="the applications (APPS) instead of the planted suite")
    ap.add_argument("--light", choices=["auto", "ncu"], default="auto",
                    help="what measures analyze's light stage (auto: the CUPTI collector where it can)")
    args = ap.parse_args()
    if args.save_fixtures:
        args.light = "ncu"

    use_private_store()
    if args.apps:
        return apps(args.light)
    from kernelscope.artifacts import get_store
    from kernelscope.models.requests import AnalyzeRequest, CompileRequest
    from kernelscope.toolkit.toolchain import require
    from kernelscope.tools.analyze import analyze
    from kernelscope.tools.compile import compile_cuda
    from kernelscope.tools.sass import sass_for_artifact

    require("ncu")  # a clear error before any compile when Nsight Compute is missing
    rows, raw = [], []
    for d in cases(args.cases.split(",") if args.cases else None):
        case = json.loads((d / "case.json").read_text())
        cu = d / "planted.cu"
        # inline source: the reports then name a workspace file, not this checkout's path
        comp = compile_cuda(CompileRequest(source=cu.read_text(), filename="planted.cu", output="executable",
                                           flags=["-O3"]))
        if not comp.success or comp.artifact_id is None:
            print(f"{d.name}: compile failed\n{comp.log}", file=sys.stderr)
            return 1
        t0 = time.monotonic()
        res = analyze(AnalyzeRequest(artifact_id=comp.artifact_id, deep_kernels=4, timeout_s=600, light=args.light))
        t_an = time.monotonic() - t0
        if res.status != "ok":
            print(f"{d.name}: analyze {res.status}: {res.explanation}", file=sys.stderr)
        t_full = None
        if not args.no_full and not any(d.name.startswith(p) for p in args.skip_full.split(",") if p):
            t_full = full_capture(Path(str(get_store().require(comp.artifact_id).path("executable"))), [])
        chk = check(case, cu.name, planted_line(cu), res)
        stage: dict[str, float] = {}
        for st in res.stages:
            stage[st.name] = stage.get(st.name, 0.0) + st.wall_s
        tool = next((st.tool for st in res.stages if st.name == "light"), None)
        deep_by = "+".join(dict.fromkeys(st.tool or "?" for st in res.stages if st.name == "deep"))
        rows.append([d.name, f"{case['expected_class']} / {chk['class']}", "ok" if chk["class_ok"] else "WRONG",
                     chk["top"], "ok" if chk["top_ok"] else "WRONG", "ok" if chk["line_ok"] else "WRONG",
                     "ok" if chk["twin_ok"] else "WRONG", round(stage.get("trace", 0), 2), tool,
                     round(stage.get("light", 0), 2), deep_by,
                     round(stage.get("deep", 0), 2), round(t_an, 2),
                     round(t_full, 2) if t_full else "-", f"{100 * t_an / t_full:.0f}%" if t_full else "-"])
        light_stage = next((st for st in res.stages if st.name == "light"), None)
        raw.append({"case": d.name, **chk, "analyze_s": t_an, "full_s": t_full, "stages": stage, "light_by": tool,
                    "deep_by": deep_by,
                    "light_classes": light_stage.kernels if light_stage else [], "notes": res.notes})
        if args.save_fixtures:
            out = args.save_fixtures / d.name
            out.mkdir(parents=True, exist_ok=True)
            for rid, name in zip(res.report_ids, ("light", "deep"), strict=False):
                shutil.copyfile(get_store().require(rid).path("report"), out / f"{name}.ncu-rep")  # type: ignore[arg-type]
            (out / "compile.json").write_text(comp.model_dump_json(indent=1, exclude={"log"}))
            (out / "sass.json").write_text(sass_for_artifact(comp.artifact_id).model_dump_json(
                indent=1, exclude={"listing_excerpt"}))
            (out / "analyze.json").write_text(res.model_dump_json(indent=1))
        print(f"{d.name}: analyze {t_an:.1f} s, full {t_full or 0:.1f} s; light by {tool}: "
              f"{light_stage.kernels if light_stage else []}; notes: {res.notes}", file=sys.stderr, flush=True)

    print(device_line())
    print(table(["case", "expected / class", "class", "top finding", "top", "line", "twin", "trace s", "light by",
                 "light s", "deep by", "deep s",
                 "analyze s", "full s", "analyze/full"], rows))
    n = len(rows)
    ok = sum(1 for r in raw if r["class_ok"] and r["top_ok"] and r["line_ok"] and r["twin_ok"])
    fulls = [r for r in raw if r["full_s"]]
    if fulls:
        tot_an, tot_full = sum(r["analyze_s"] for r in fulls), sum(r["full_s"] for r in fulls)
        print(f"\nall checks right: {ok}/{n}; classes right: {sum(r['class_ok'] for r in raw)}/{n}; "
              f"analyze total {tot_an:.1f} s vs ncu --set full {tot_full:.1f} s = {100 * tot_an / tot_full:.0f}%")
    else:
        print(f"\nall checks right: {ok}/{n}; classes right: {sum(r['class_ok'] for r in raw)}/{n}")
    if args.json:
        args.json.write_text(json.dumps(raw, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
