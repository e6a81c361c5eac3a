"""Search strategies at equal evaluation budgets on the knob-annotated problems (examples/problems/*/
candidate.py): the agent's MCTS against greedy, beam and random search and against Kernel Tuner's
strategies, over the same measured search spaces.

Three steps, because a fair comparison needs many seeds and a GPU evaluation costs ~1 s:

1. ``measure`` (on the GPU): every configuration of every space is compiled (NVRTC), checked against
   the reference and timed interleaved with it by the run tool's own harness (CUDA events, L2 flushed
   before every call, warm-up until settled, >= 20 rounds); the samples go to a JSON table.

       python benchmarks/strategies.py measure --out benchmarks/data/spaces-h100.json

2. ``profile`` (on the GPU): every configuration's ``analyze`` diagnosis (bottleneck class and ranked findings),
   measured as analyze's CUPTI path measures a program (light and deep metrics, stall reasons, source passes) and
   put through the same rules; one program per space, each configuration's kernel renamed apart and launched once.
   Two differences from the agent's own profiles: ``optimize`` profiles a candidate in eval mode, where Nsight
   Compute measures (same metrics, cold L2), and no SASS or ptxas evidence is passed here (the rules that read
   only those do not fire).
   About 13 minutes on the H100 for the four spaces (two calls: matmul_fp16 alone takes 8).

       python benchmarks/strategies.py profile --out benchmarks/data/findings-h100.json

3. ``replay`` (anywhere, the default; about 7 minutes on two cores): each strategy searches each space with the
   table as its evaluator, 100 seeds each (medians over 20 seeds moved by 1-2 evaluations between seed sets). An
   evaluation's speedup is a bootstrap median of the recorded samples (its own draw per seed), so strategies see
   realistic timing noise; what a strategy *reached* is the true (full-sample) speedup of the configuration it
   believes best. Kernel Tuner runs in its simulation mode on a cache file written from the same draws.

       python benchmarks/strategies.py [--data benchmarks/data/spaces-h100.json] [--seeds 100] [--parallel 1,2,4]
       python benchmarks/strategies.py --first-seed 300 --seeds 200 --spaces softmax   # held-out seeds, one space

   ``--parallel`` adds rows for the agent's strategies with several evaluations in flight (``mcts p=4``:
   four at a time, as on four GPUs), simulated as workers of equal speed so that a replay is reproducible
   (results come back in submission order). Evaluations are counted as they complete: the figures are
   the work spent, the wall time being about that divided by the number in flight.

   The agent's strategies get the recorded diagnoses as ``kernelscope optimize`` gets its profiles: the start and
   every correct candidate within PROFILE_WITHIN of the best so far are profiled (ANALYZE_MAX - 1 of them, the
   reference taking one), and their class and findings order the offline proposer's moves and widen MCTS under severe
   findings. Rows marked "no profiles" search without them (``--no-profiles`` for all); Kernel Tuner has no use
   for them.

Printed: the fraction of the exhaustive best reached after 10, 25 and 50 evaluations (median over
seeds) and the evaluations needed to reach 95% of it, as a share of the space. Because that count is discrete and
often two-humped (a strategy either lands in the best region early or climbs to it), its median alone can rank two
strategies by luck, so each row also gives the mean and, paired on the same seeds (the same timing draws), how many
more evaluations the strategy needed than MCTS on the mean, with a 95% bootstrap interval: an interval above zero
means MCTS is ahead, one that contains zero a tie. A seed that never reaches 95% counts as the budget plus one.
"""

from __future__ import annotations

import argparse
import importlib.util
import itertools
import json
import math
import random
import re
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import PROBLEMS, device_line, table

from kernelscope.agent.answers import findings_of
from kernelscope.agent.config import OptimizeConfig
from kernelscope.agent.loop import worth_profiling
from kernelscope.agent.search import MCTS, Beam, Greedy, KnobExpander, Outcome, RandomSearch, run_search
from kernelscope.agent.search.knobs import Knob, apply_knobs, parse_knobs

DATA = Path(__file__).resolve().parent / "data" / "spaces-h100.json"
FINDINGS = DATA.with_name("findings-h100.json")  # every configuration's analyze diagnosis (``profile``)
TOL = {"softmax": (1e-4, 1e-7), "matmul_fp16": (1e-2, 1e-2)}  # softmax: outputs ~1/DIM; others 1e-4
KT_STRATEGIES = ("random_sample", "genetic_algorithm", "simulated_annealing", "greedy_ils", "mls",
                 "pso", "dual_annealing", "basinhopping", "diff_evo", "firefly_algorithm", "bayes_opt")
CHECKPOINTS = (10, 25, 50)
PAIRED_WITH = "mcts"  # the row every other row is compared with, seed by seed
BOOTSTRAP = 2000  # resamples of the seeds for the paired interval
ANALYZE_MAX = OptimizeConfig.model_fields["analyze_max"].default  # profiles per run, the reference's included
PROFILE_WITHIN = OptimizeConfig.model_fields["profile_within"].default  # profiled: within this of the best


def knob_problems() -> list[str]:
    return sorted(p.name for p in PROBLEMS.iterdir() if (p / "candidate.py").is_file())


def key(cfg: dict[str, str], names: list[str]) -> str:
    return ",".join(cfg[n] for n in names)


# ------------------------------------------------------------------------------------------- measure
def _module(path: Path, name: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def measure(out: Path, problems: list[str], budget_s: float) -> None:
    import torch

    from kernelscope.harness.job import Harness

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    data: dict[str, Any] = {"device": device_line(), "command": " ".join(sys.argv), "timing_budget_s": budget_s,
                            "problems": {}}
    tmp = Path(tempfile.mkdtemp(prefix="ks-spaces-"))
    for problem in problems:
        t0 = time.monotonic()
        ref = _module(PROBLEMS / problem / "reference.py", f"ref_{problem}")
        torch.manual_seed(0)
        inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in ref.get_inputs()]
        ref_model = ref.Model(*ref.get_init_inputs()).cuda()
        expected = ref_model(*inputs)
        template = (PROBLEMS / problem / "candidate.py").read_text()
        knobs = parse_knobs(template)
        names = [k.name for k in knobs]
        rtol, atol = TOL.get(problem, (1e-4, 1e-4))
        h = Harness({"device": "cuda", "timing_budget_s": budget_s, "min_runs": 20, "warmup_s": 0.05})
        configs: dict[str, Any] = {}
        extra = {v: PROBLEMS / problem / f"{v}.py" for v in ("naive", "better")}
        todo: list[tuple[str, Path]] = []
        for values in itertools.product(*(k.values for k in knobs)):
            cfg = dict(zip(names, values, strict=True))
            path = tmp / f"{problem}_{'_'.join(values)}.py"
            path.write_text(apply_knobs(template, cfg))
            todo.append((key(cfg, names), path))
        todo += [(f"@{v}", p) for v, p in extra.items()]
        for k, path in todo:
            rec: dict[str, Any] = {}
            try:
                mod = _module(path, f"cand_{problem}_{abs(hash(k))}")
                model = mod.ModelNew(*ref.get_init_inputs()).cuda()
                got = model(*inputs)
                torch.cuda.synchronize()
                rec["correct"] = bool(torch.allclose(got, expected, rtol=rtol, atol=atol))
            except Exception as e:  # a configuration that does not build or launch is a data point too
                rec = {"correct": False, "error": f"{type(e).__name__}: {str(e)[:200]}"}
            if rec["correct"]:
                s = h.time_interleaved({"ref": ref_model, "cand": model}, [{"ref": inputs, "cand": inputs}])
                rec["ref_us"] = [round(x, 2) for x in s["ref"]]
                rec["cand_us"] = [round(x, 2) for x in s["cand"]]
                rec["speedup"] = statistics.median(s["ref"]) / statistics.median(s["cand"])
            configs[k] = rec
            print(f"{problem} {k}: {rec.get('speedup', rec.get('error', 'incorrect'))}", flush=True)
        data["problems"][problem] = {"knobs": {k.name: list(k.values) for k in knobs}, "configs": configs,
                                     "measure_s": round(time.monotonic() - t0, 1)}
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(data, indent=None, separators=(",", ":")))
    print(f"wrote {out}")


# ------------------------------------------------------------------------------------------- profile
_KERNEL_NAME = re.compile(r"CudaKernel\(\s*\w+\s*,\s*\"(\w+)\"")

_PROGRAM = """import importlib.util, json, sys
import torch

def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod

todo = json.load(open(sys.argv[1]))
ref = load(todo["reference"], "reference")
torch.manual_seed(0)
inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in ref.get_inputs()]
for i, (key, path) in enumerate(todo["configs"]):
    try:
        model = load(path, f"cand{i}").ModelNew(*ref.get_init_inputs()).cuda()
        model(*inputs)
        torch.cuda.synchronize()
        print("launched", key, flush=True)
    except Exception as e:  # a configuration that does not build or launch has no profile
        print("failed", key, type(e).__name__, str(e).splitlines()[0][:120] if str(e) else "", flush=True)
"""


def _prebuild(path: str, arch: str) -> str | None:
    """Compile one configuration's kernels for ``arch`` (``sm_90``) into the NVRTC cache (a worker process; no GPU
    needed); what failed, or None."""
    from kernelscope.fast import prebuild

    try:
        failed = prebuild(arch, _module(Path(path), f"pre_{Path(path).stem}").KERNELS)[1]
    except Exception as e:  # refused at import (an invalid configuration by construction)
        return f"{Path(path).stem}: {type(e).__name__}"
    return "; ".join(failed) or None


def trim_diagnosis(d: Any) -> dict[str, Any]:
    """What the replay keeps of a kernel's diagnosis: what ``findings_of`` reads (class, rules, severity)."""
    return {"name": d.name, "duration_ns": d.duration_ns, "bottleneck": {"cls": d.bottleneck.cls},
            "findings": [{"rule": f.rule, "severity": f.severity, "family": f.family,
                          "impact": f.impact} for f in d.findings]}


def profile(out: Path, problems: list[str], timeout_s: float) -> None:
    """Every configuration of every space through analyze's own measurement and rules, in one program per space:
    the configurations' kernels are renamed apart (``<name>__c<i>``, the code otherwise unchanged), launched once
    each under the CUPTI collector with every launch deep (light and deep metrics, stall reasons, source passes),
    and each kernel's profile goes through the rules as analyze's CUPTI path does (``diagnose_stages``). What is
    kept per configuration is its diagnosis: class and ranked findings."""
    import os
    from concurrent.futures import ProcessPoolExecutor
    from multiprocessing import get_context

    from _common import use_private_store

    use_private_store()
    import torch

    from kernelscope.config import get_settings
    from kernelscope.heuristics.pipeline import COLLECTOR_METRICS, diagnose_stages
    from kernelscope.measure.collector import DeepRequest, collected_profile, run_collector
    from kernelscope.measure.stages import collector_totals as _collector_totals
    from kernelscope.measure.stages import deep_metrics
    from kernelscope.sandbox.gpu import gpu_pool
    from kernelscope.tools.run import job_env

    s = get_settings()
    arch = "sm_{}{}".format(*torch.cuda.get_device_capability())
    data: dict[str, Any] = {"device": device_line(), "command": " ".join(sys.argv), "problems": {}}
    if out.is_file():
        data["problems"] = json.loads(out.read_text()).get("problems", {})
    for problem in problems:
        t0 = time.monotonic()
        ws = Path(tempfile.mkdtemp(prefix=f"ks-prof-{problem}-"))
        template = (PROBLEMS / problem / "candidate.py").read_text()
        knobs = parse_knobs(template)
        names = [k.name for k in knobs]
        kernel = _KERNEL_NAME.search(template)
        if kernel is None:
            raise SystemExit(f"{problem}: no CudaKernel(..., \"name\") in candidate.py to rename")
        configs: list[tuple[str, str]] = []
        renamed: dict[str, str] = {}
        for i, values in enumerate(itertools.product(*(k.values for k in knobs))):
            cfg = dict(zip(names, values, strict=True))
            path = ws / f"c{i}.py"
            new = f"{kernel.group(1)}__c{i}"
            path.write_text(re.sub(rf"\b{kernel.group(1)}\b", new, apply_knobs(template, cfg)))
            configs.append((key(cfg, names), str(path)))
            renamed[new] = key(cfg, names)
        with gpu_pool().lease() as lease:
            env = job_env(ws, s.home, lease)
            os.environ["KERNELSCOPE_NVRTC_CACHE"] = env["KERNELSCOPE_NVRTC_CACHE"]
            # spawned, not forked: this process has initialised CUDA (the device's arch)
            with ProcessPoolExecutor(max(1, (os.cpu_count() or 2) - 1), mp_context=get_context("spawn")) as pool:
                failed = [f for f in pool.map(_prebuild, [p for _, p in configs], [arch] * len(configs)) if f]
            t_build = time.monotonic() - t0
            (ws / "todo.json").write_text(json.dumps({"reference": str(PROBLEMS / problem / "reference.py"),
                                                      "configs": configs}))
            (ws / "program.py").write_text(_PROGRAM)
            deep = DeepRequest(kernels=[f"{kernel.group(1)}__c"], metrics=deep_metrics(), max_launches=len(configs))
            proc, got = run_collector([sys.executable, "program.py", "todo.json"], ws, env, COLLECTOR_METRICS,
                                      timeout_s, s, None, max_launches=min(1024, len(configs) + 64), deep=deep)
        if proc.returncode != 0 or not got.launches:
            raise SystemExit(f"{problem}: the collector measured nothing: {proc.describe_failure()} "
                             f"{got.errors[:3]}\n{proc.stdout[-2000:]}")
        p1 = collected_profile(got, report=f"{problem} (CUPTI collector, every configuration)")
        diags, _ = diagnose_stages(p1, None, deep_kernels=10_000, totals=_collector_totals(got, p1))
        found = {}
        for d in diags:
            k = renamed.get(d.name) or renamed.get(d.mangled_name)
            if k is not None:
                found[k] = trim_diagnosis(d)
        launched = proc.stdout.count("launched ")
        data["problems"][problem] = {"configs": found, "launched": launched, "prebuild_failed": len(failed),
                                     "deep_launches": sum(ln.deep for ln in got.launches),
                                     "sourced": sum(bool(x.sampled or x.counted) for x in got.sources),
                                     "errors": got.errors[:5], "build_s": round(t_build, 1),
                                     "profile_s": round(time.monotonic() - t0 - t_build, 1)}
        print(f"{problem}: {len(found)} of {len(configs)} configurations diagnosed ({launched} launched, "
              f"{len(failed)} did not build), {data['problems'][problem]['deep_launches']} deep; build "
              f"{t_build:.0f} s, collector and rules {time.monotonic() - t0 - t_build:.0f} s", flush=True)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(data, indent=None, separators=(",", ":")))
    print(f"wrote {out}")


# ------------------------------------------------------------------------------------------- replay
class Space:
    """One measured space: true speedups and a seeded noisy evaluator."""

    def __init__(self, name: str, rec: dict[str, Any]) -> None:
        self.name = name
        self.knobs = rec["knobs"]
        self.names = list(self.knobs)
        self.configs = {k: v for k, v in rec["configs"].items() if not k.startswith("@")}
        self.extra = {k[1:]: v for k, v in rec["configs"].items() if k.startswith("@")}
        self.true = {k: v["speedup"] if v.get("correct") else None for k, v in self.configs.items()}
        self.best = max(s for s in self.true.values() if s)
        self.size = len(self.configs)

    def draw(self, seed: int) -> dict[str, float | None]:
        """One observed speedup per configuration: bootstrap medians of its recorded samples."""
        rng = random.Random(seed)
        seen: dict[str, float | None] = {}
        for k, v in self.configs.items():
            if not v.get("correct"):
                seen[k] = None
                continue
            ref = statistics.median(rng.choices(v["ref_us"], k=len(v["ref_us"])))
            cand = statistics.median(rng.choices(v["cand_us"], k=len(v["cand_us"])))
            seen[k] = ref / cand
        return seen

    def reached(self, order: list[str], observed: dict[str, float | None], budget: int) -> list[float]:
        """Fraction of the exhaustive best reached after each evaluation (the true speedup of the
        configuration the strategy believes best so far)."""
        out, best_k, best_obs = [], None, -1.0
        for k in order[:budget]:
            o = observed[k]
            if o is not None and o > best_obs:
                best_k, best_obs = k, o
            out.append((self.true[best_k] or 0.0) / self.best if best_k else 0.0)
        while out and len(out) < budget:  # a strategy that stopped early keeps what it had
            out.append(out[-1])
        return out


def run_ours(space: Space, strategy: str, seed: int, budget: int, observed: dict[str, float | None],
             parallel: int = 1, profiles: dict[str, Any] | None = None,
             mcts: dict[str, Any] | None = None) -> list[str]:
    """The order in which one of the agent's strategies evaluates the space. With ``profiles`` (each configuration's
    recorded analyze diagnosis), the evaluations carry findings as in ``kernelscope optimize``: the start and every
    correct candidate within PROFILE_WITHIN of the best so far are profiled, ANALYZE_MAX - 1 of them at most (the
    reference takes one), and their class and findings order the proposer's moves below them."""
    exp = KnobExpander([Knob(n, tuple(v), "cuda") for n, v in space.knobs.items()])
    best = {"speedup": 0.0, "evaluated": 0, "profiles": 0}

    def evaluate(cfg: dict[str, str]) -> Outcome:
        k = key(cfg, space.names)
        o = observed[k]
        out = Outcome("correct", speedup=o) if o is not None else Outcome("incorrect")
        first = best["evaluated"] == 0
        best["evaluated"] += 1
        best["speedup"] = max(best["speedup"], out.rank_speedup or 0.0)
        promising = worth_profiling(out, best["speedup"], first, PROFILE_WITHIN)
        if profiles is not None and promising and best["profiles"] < ANALYZE_MAX - 1 and k in profiles:
            best["profiles"] += 1
            out.bottleneck, out.findings, out.severe, _ = findings_of({"status": "ok", "kernels": [profiles[k]]})
        return out

    s = {"mcts": lambda: MCTS(seed=seed, **(mcts or {})), "greedy": Greedy, "beam": Beam,
         "random": lambda: RandomSearch(seed=seed)}[strategy]()
    st = run_search(s, exp, evaluate, exp.start(), budget=budget, parallel=parallel, simulate=True)
    return [key(n.payload, space.names) for n in st.nodes]


def run_kernel_tuner(space: Space, strategy: str, seed: int, budget: int,
                     observed: dict[str, float | None], tmp: Path) -> list[str]:
    import numpy as np
    from kernel_tuner import tune_kernel

    params = {n: [int(v) for v in vals] for n, vals in space.knobs.items()}
    cache = {}
    for k, o in observed.items():
        values = [int(v) for v in k.split(",")]
        entry: dict[str, Any] = dict(zip(space.names, values, strict=True))
        t = 1.0 / o if o else "RuntimeFailedConfig"  # time in units of the reference's: lower is better
        entry.update({"time": t, "times": [t] if o else [], "compile_time": 0.0, "verification_time": 0.0,
                      "benchmark_time": 0.0, "strategy_time": 0.0, "framework_time": 0.0,
                      "timestamp": "2026-11-22 00:00:00+00:00"})
        cache[",".join(map(str, values))] = entry
    path = tmp / f"{space.name}-{strategy}-{seed}.json"
    path.write_text(json.dumps({"device_name": "replay", "kernel_name": space.name, "problem_size": [1, 1, 1],
                                "tune_params_keys": space.names, "tune_params": params, "objective": "time",
                                "cache": cache}))
    np.random.seed(seed)
    random.seed(seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res, _ = tune_kernel(space.name, "__global__ void k() {}", (1, 1, 1), [], params, strategy=strategy,
                             cache=str(path), simulation_mode=True, strategy_options={"max_fevals": budget},
                             verbose=False, quiet=True)
    # Kernel Tuner never evaluates the start configuration (the knobs' declared defaults); every strategy of ours
    # spends its first evaluation on it, as the agent does (it is the candidate being optimized). So Kernel Tuner
    # is charged it too: the start first, then its own sequence (which does not use the start's result).
    start = ",".join(str(int(v[0])) for v in space.knobs.values())
    order: list[str] = [start]
    for r in res:
        k = ",".join(str(r[n]) for n in space.names)
        if k not in order:
            order.append(k)
    return order[:budget]


def replay(data_path: Path, seeds: int, kernel_tuner: bool, parallel: tuple[int, ...] = (1,),
           findings: Path | None = FINDINGS, first_seed: int = 0, only: list[str] | None = None) -> None:
    data = json.loads(data_path.read_text())
    print(f"# strategies on measured spaces ({data['device']}); replay {device_line()}\n")
    unknown = set(only or ()) - set(data["problems"])
    if unknown:
        raise SystemExit(f"no space {', '.join(sorted(unknown))} in {data_path.name}; it has "
                         f"{', '.join(data['problems'])}")
    spaces = [Space(n, r) for n, r in data["problems"].items() if not only or n in only]
    profiled: dict[str, dict[str, Any]] = {}
    if findings is not None and findings.is_file():
        prof = json.loads(findings.read_text())
        profiled = {n: r["configs"] for n, r in prof["problems"].items()}
        print(f"Profiles: every configuration's analyze diagnosis from {findings.name} ({prof['device']}); the agent's "
              f"strategies get them as `kernelscope optimize` does (the start and each candidate within "
              f"{PROFILE_WITHIN:.0%} of the best, {ANALYZE_MAX - 1} at "
              f"most); rows marked 'no profiles' search without them.\n")
    tmp = Path(tempfile.mkdtemp(prefix="ks-kt-"))
    ours = {s if p == 1 else f"{s} p={p}": (s, p, True) for s in ("mcts", "greedy", "beam", "random") for p in parallel}
    if profiled:
        ours |= {f"{s}, no profiles": (s, 1, False) for s in ("mcts", "greedy")}
    strategies = list(ours) + ([f"kt:{s}" for s in KT_STRATEGIES] if kernel_tuner else [])
    summary: dict[str, list[tuple[list[float], float]]] = {s: [] for s in strategies}
    verdicts: dict[str, list[str]] = {s: [] for s in strategies}  # per space: MCTS ahead, tie or behind
    for space in spaces:
        budget = min(space.size, max(max(CHECKPOINTS), math.ceil(space.size / 4)))
        quarter = math.ceil(space.size / 4)
        hand = space.extra.get("better", {}).get("speedup")
        naive = space.extra.get("naive", {}).get("speedup")
        start = space.true[key({n: v[0] for n, v in space.knobs.items()}, space.names)]
        print(f"## {space.name}: {space.size} configurations, exhaustive best {space.best:.2f}x over the reference "
              f"(start {start or 0:.2f}x; naive.py {naive or 0:.2f}x; hand-written better.py {hand or 0:.2f}x); "
              f"a quarter of the space is {quarter} evaluations\n")
        rows = []
        by_seed: dict[str, dict[int, float]] = {}  # evaluations to 95% per seed (the budget plus one if never)
        for strat in strategies:
            curves, errors = [], []
            for seed in range(first_seed, first_seed + seeds):
                observed = space.draw(seed)
                try:
                    order = (run_kernel_tuner(space, strat[3:], seed, budget, observed, tmp) if strat.startswith("kt:")
                             else run_ours(space, ours[strat][0], seed, budget, observed, ours[strat][1],
                                  profiled.get(space.name) if ours[strat][2] else None))
                except Exception as e:  # a strategy that cannot run on this space is reported, not hidden
                    errors.append(f"{type(e).__name__}: {str(e)[:80]}")
                    continue
                c = space.reached(order, observed, budget)
                curves.append(c)
                hit = next((i + 1 for i, f in enumerate(c) if f >= 0.95), None)
                by_seed.setdefault(strat, {})[seed] = hit if hit is not None else budget + 1
            if not curves:
                rows.append([strat, "error", "", "", "", "", "", "", errors[0] if errors else ""])
                continue
            at = [statistics.median(c[min(n, len(c)) - 1] for c in curves) for n in CHECKPOINTS]
            mine = by_seed[strat]
            hits = [h if h <= budget else math.inf for h in mine.values()]
            med_hit = statistics.median(hits)
            within = sum(h <= quarter for h in hits) / len(hits)
            summary[strat].append((at, med_hit / space.size if med_hit != math.inf else math.inf))
            mean = statistics.fmean(mine.values())
            vs = ""
            if strat != PAIRED_WITH and by_seed.get(PAIRED_WITH):
                gap = paired_gap(by_seed[PAIRED_WITH], mine)
                verdicts[strat].append(_standing(gap))
                vs = _verdict(gap)
            rows.append([strat, *(f"{a * 100:.1f}%" for a in at),
                         f"{med_hit:.0f} ({med_hit / space.size * 100:.0f}%)" if med_hit != math.inf else "not reached",
                         f"{'≥' if math.inf in hits else ''}{mean:.1f}", vs,
                         f"{within * 100:.0f}%", f"{len(errors)} seeds failed" if errors else ""])
        print(table(["strategy", "@10", "@25", "@50", "evals to 95%, median (of space)", "mean",
                     "more than MCTS, mean [95% CI]", "seeds ≤ quarter", "note"], rows))
        print()
    rows = []
    for strat, per in summary.items():
        if not per:
            continue
        means = [statistics.mean(p[0][i] for p in per) for i in range(len(CHECKPOINTS))]
        worst = max(p[1] for p in per)
        v = verdicts[strat]
        tally = (f"{v.count('MCTS ahead')} / {v.count('tie')} / {v.count('MCTS behind')}" if v else "")
        rows.append([strat, *(f"{m * 100:.1f}%" for m in means),
                     f"{worst * 100:.0f}%" if worst != math.inf else "not reached", tally])
    print(f"## all {len(spaces)} spaces (seeds {first_seed}-{first_seed + seeds - 1})\n")
    print(table(["strategy", "mean @10", "mean @25", "mean @50", "worst median evals to 95% (share of space)",
                 "spaces MCTS ahead / tie / behind"], rows))


def paired_gap(ours: dict[int, float], theirs: dict[int, float],
               resamples: int = BOOTSTRAP) -> tuple[float, float, float]:
    """How many more evaluations ``theirs`` needed than ``ours`` on the mean over the seeds both ran (evaluations to
    95% per seed), with a 95% percentile-bootstrap interval over seeds: (mean, low, high). Deterministic."""
    seeds = sorted(set(ours) & set(theirs))
    if not seeds:
        raise ValueError("no seed in common")
    gaps = [theirs[s] - ours[s] for s in seeds]
    rng = random.Random(0)
    means = sorted(statistics.fmean(rng.choices(gaps, k=len(gaps))) for _ in range(resamples))
    return statistics.fmean(gaps), means[int(0.025 * resamples)], means[int(0.975 * resamples) - 1]


def _standing(gap: tuple[float, float, float]) -> str:
    """MCTS ahead (the interval above zero), behind (below zero) or tie."""
    _, low, high = gap
    return "MCTS ahead" if low > 0 else "MCTS behind" if high < 0 else "tie"


def _verdict(gap: tuple[float, float, float]) -> str:
    mean, low, high = gap
    return f"{mean:+.1f} [{low:+.1f}, {high:+.1f}] {_standing(gap)}"


def _parallel(text: str) -> tuple[int, ...]:
    try:
        ns = tuple(dict.fromkeys(int(x) for x in text.split(",")))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of integers: {text!r}") from None
    if not ns or min(ns) < 1:
        raise argparse.ArgumentTypeError("every count is at least 1")
    return ns


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd")
    m = sub.add_parser("measure", help="time every configuration on this GPU")
    m.add_argument("--out", type=Path, default=DATA)
    m.add_argument("--problems", nargs="*", default=None)
    m.add_argument("--timing-budget", type=float, default=0.1)
    pr = sub.add_parser("profile", help="every configuration's analyze diagnosis on this GPU (CUPTI collector)")
    pr.add_argument("--out", type=Path, default=FINDINGS)
    pr.add_argument("--problems", nargs="*", default=None)
    pr.add_argument("--timeout", type=float, default=560.0)
    r = sub.add_parser("replay", help="compare strategies on a measured table (default)")
    for q in (p, r):
        q.add_argument("--data", type=Path, default=DATA)
        q.add_argument("--seeds", type=int, default=100)
        q.add_argument("--first-seed", type=int, default=0, help="seeds first_seed .. first_seed + seeds - 1")
        q.add_argument("--spaces", nargs="*", default=None, help="only these spaces (default: all)")
        q.add_argument("--no-kernel-tuner", action="store_true")
        q.add_argument("--parallel", type=_parallel, default=(1,), metavar="N[,N...]",
                       help="evaluations in flight for our strategies, one row each (default 1)")
        q.add_argument("--findings", type=Path, default=FINDINGS, help="every configuration's diagnosis (profile)")
        q.add_argument("--no-profiles", action="store_true", help="our strategies search without findings")
    args = p.parse_args()
    if args.cmd == "profile":
        profile(args.out, args.problems or knob_problems(), args.timeout)
        return 0
    if args.cmd == "measure":
        measure(args.out, args.problems or knob_problems(), args.timing_budget)
        return 0
    if not args.data.is_file():
        print(f"{args.data} not found: measure it first on a GPU (python benchmarks/strategies.py measure)")
        return 2
    replay(args.data, args.seeds, not args.no_kernel_tuner, args.parallel, None if args.no_profiles else args.findings,
           args.first_seed, args.spaces)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
