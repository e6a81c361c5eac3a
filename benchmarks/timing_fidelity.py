"""Timing fidelity of the run tool on the GPU:

1. reproducibility: the candidate median of 5 separate evaluations (fresh processes) spreads < 1%
   for kernels of 100 us and more;
2. agreement: those medians are within 3% of triton.testing.do_bench (median mode) on the same call;
3. sensitivity: a planted 5% slowdown (a calibrated spin kernel after the real one) is "slower";
4. specificity: two identical candidates are never called faster or slower (5 evaluations).

    python benchmarks/timing_fidelity.py [--calls 5]
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import PROBLEMS, device_line, table, use_private_store

KERNELS = ["row_sum", "elementwise_chain", "depthwise_conv2d"]  # the examples of >= 100 us

WRAP = '''
import importlib.util, torch
def _load(p, n):
    s = importlib.util.spec_from_file_location(n, p); m = importlib.util.module_from_spec(s)
    s.loader.exec_module(m); return m
_ref = _load({ref!r}, "_bench_ref")
_cand = _load({cand!r}, "_bench_cand")
get_inputs = _ref.get_inputs
get_init_inputs = _ref.get_init_inputs
class {cls}(_cand.ModelNew):
    pass
'''

SLOW = '''
from kernelscope.fast import CudaKernel
_spin = CudaKernel(r"""
extern "C" __global__ void spin(long long cycles) {{
    long long t0 = clock64(); while (clock64() - t0 < cycles) {{ }}
}}""", "spin")
class ModelNew(_Base):
    def forward(self, *xs):
        y = super().forward(*xs)
        _spin((1,), (1,), ({cycles},))
        return y
'''


def _load(path: Path, name: str):  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def do_bench_us(module_path: Path, ref_path: Path) -> float:
    import torch
    import triton.testing

    ref = _load(ref_path, "_db_ref")
    cand = _load(module_path, "_db_cand")
    torch.manual_seed(0)
    model = cand.ModelNew(*ref.get_init_inputs()).cuda().eval()
    torch.manual_seed(1)
    xs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in ref.get_inputs()]
    with torch.no_grad():
        return 1000.0 * float(triton.testing.do_bench(lambda: model(*xs), warmup=50, rep=500, return_mode="median"))


def calibrate_spin(target_us: float) -> int:
    """clock64 cycles for a single-thread spin kernel lasting about target_us."""
    import torch
    import triton.testing

    from kernelscope.fast import CudaKernel

    spin = CudaKernel('extern "C" __global__ void spin(long long c) { long long t=clock64(); '
                      "while (clock64()-t < c) { } }", "spin")
    cycles = 1000
    base = 1000.0 * triton.testing.do_bench(lambda: spin((1,), (1,), (cycles,)), warmup=20, rep=100)
    cycles2 = 200_000
    t2 = 1000.0 * triton.testing.do_bench(lambda: spin((1,), (1,), (cycles2,)), warmup=20, rep=100)
    per_cycle = (t2 - base) / (cycles2 - cycles)
    torch.cuda.synchronize()
    return max(1, int(target_us / per_cycle))


def _in_subprocess(*args: str) -> float:
    """do_bench and the spin calibration run in a child process: the benchmark process itself never
    holds a CUDA context (like the MCP server), so its allocations cannot shape the evaluations'."""
    import subprocess

    out = subprocess.run([sys.executable, __file__, *args], check=True, capture_output=True, text=True).stdout
    return float(out.strip().splitlines()[-1])


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--do-bench-child":
        print(do_bench_us(Path(sys.argv[2]), Path(sys.argv[3])))
        return
    if len(sys.argv) > 1 and sys.argv[1] == "--calibrate-child":
        print(calibrate_spin(float(sys.argv[2])))
        return
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=5)
    ap.add_argument("--kernels", default=",".join(KERNELS))
    ap.add_argument("--timing-budget", type=float, default=None,
                    help="timing_budget_s per evaluation (default: the run tool's default)")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="ks-fidelity-"))
    use_private_store([tmp])
    from kernelscope.models.requests import EvalRequest
    from kernelscope.tools.run import eval_candidate

    def evaluate(ref: Path, cand: Path):  # type: ignore[no-untyped-def]
        extra = {} if args.timing_budget is None else {"timing_budget_s": args.timing_budget}
        r = eval_candidate(EvalRequest(reference_path=str(ref), candidate_path=str(cand), device="cuda",
                                       timeout_s=600, **extra))
        assert r.status == "ok", (r.error, r.traceback)
        return r

    repro_rows, sens_rows = [], []
    for name in args.kernels.split(","):
        prob = PROBLEMS / name
        ref, better = prob / "reference.py", prob / "better.py"
        runs = [evaluate(ref, better) for _ in range(args.calls)]
        meds = [r.timings["candidate"].median_us for r in runs]
        probes = [r.flush_probe for r in runs if r.flush_probe is not None]
        med = sorted(meds)[len(meds) // 2]
        spread = 100.0 * (max(meds) - min(meds)) / med
        db = _in_subprocess("--do-bench-child", str(better), str(ref))
        repro_rows.append([name, med, spread, "yes" if spread < 1.0 else "NO", db, 100.0 * (med - db) / db,
                           "yes" if abs(med - db) / db < 0.03 else "NO",
                           " ".join(f"{p.quiet_us:.1f}/{p.median_us:.1f}" for p in probes),
                           " ".join(str(p.rounds_dropped) for p in probes)])
        flush = [(p.quiet_us, p.median_us, p.rounds_slow, p.rounds_dropped, p.rounds) for p in probes]
        host = [(r.host_cover.cover_us.get("candidate"), r.host_cover.host_median_us.get("candidate"))
                for r in runs if r.host_cover is not None]
        print(f"{name}: medians {[round(m, 2) for m in meds]} do_bench {db:.2f}; flush quiet/median µs, "
              f"rounds slow/dropped/all: {flush}; candidate's host cover/issue time µs: {host}", file=sys.stderr)

        # identical candidates: reference = the same kernel
        ident_ref = tmp / f"{name}_ident_ref.py"
        ident_ref.write_text(WRAP.format(ref=str(ref), cand=str(better), cls="Model"))
        ident = [evaluate(ident_ref, better) for _ in range(args.calls)]
        ident_verdicts = [r.verdict for r in ident]
        # planted slowdown: + a spin kernel of 5% of the median
        cycles = int(_in_subprocess("--calibrate-child", str(0.05 * med)))
        slow = tmp / f"{name}_slow.py"
        slow.write_text(WRAP.format(ref=str(ref), cand=str(better), cls="_Base") + SLOW.format(cycles=cycles))
        planted = 100.0 * (_in_subprocess("--do-bench-child", str(slow), str(ref)) - db) / db
        slow_runs = [evaluate(ident_ref, slow) for _ in range(args.calls)]
        slow_verdicts = [r.verdict for r in slow_runs]
        sp = [r.speedups[0].speedup for r in slow_runs]
        sens_rows.append([name, planted, ", ".join(slow_verdicts), f"{min(sp):.3f}-{max(sp):.3f}",
                          ", ".join(ident_verdicts),
                          "yes" if all(v == "slower" for v in slow_verdicts)
                          and all(v == "inconclusive" for v in ident_verdicts) else "NO"])

    print(f"\nTiming fidelity ({device_line()}), {args.calls} separate evaluations each:")
    print(table(["kernel", "median us", "spread %", "<1%", "do_bench us", "diff %", "<3%",
                 "flush quiet/median us, per evaluation", "rounds dropped"], repro_rows))
    print()
    print(table(["kernel", "planted slowdown %", "verdicts (planted)", "speedups", "verdicts (identical)", "ok"],
                sens_rows))


if __name__ == "__main__":
    main()
