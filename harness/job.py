"""One evaluation job: load the reference and the candidate, check correctness, audit the ops, time
both interleaved, compute the statistics and the verdict, with the observers plugged in. Also the
build job (import the candidate, pre-build its kernels) and the profiled run (the candidate's calls in
a profiler range)."""

from __future__ import annotations

import contextlib
import importlib.util
import os
import sys
import traceback
from typing import Any

import torch

from kernelscope.harness import delegation, distribution, probes
from kernelscope.harness.cheats import Integrity, audit_ops, fallback_findings, implausible_speedup
from kernelscope.harness.context import JobContext
from kernelscope.harness.correctness import Inputs, Trials, compare, flatten, side_effects
from kernelscope.harness.guard import Attributed, StateGuard, blame, is_device_fault
from kernelscope.harness.kernels import OwnKernels, candidate_kernels
from kernelscope.harness.memory import MemoryPlan, Sizes, TooLarge, plan, tensor_bytes
from kernelscope.harness.observers import Measured, Observer, default_observers
from kernelscope.harness.protocol import (
    ChildStart,
    Config,
    Findings,
    Flag,
    Invalid,
    Phases,
    perf_counter,
    read_config,
    wall_clock,
    write_result,
)
from kernelscope.harness.stats import speedups, timing_stats
from kernelscope.harness.timing import Timer


def load_module(path: str, name: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


POISON_COPIES = 4  # poisoned blocks per output before each candidate call (fewer where memory is short)


class Harness:
    def __init__(self, cfg: dict[str, Any] | Config, observers: list[Observer] | None = None) -> None:
        self.cfg = cfg if isinstance(cfg, Config) else Config.from_dict(cfg)
        self.findings = Findings()
        self.phases = Phases()
        self.cuda = self.cfg.device.startswith("cuda")
        self.threads_before = probes.thread_snapshot()  # before any candidate code runs
        self.device = torch.device(self.cfg.device)
        if self.cuda:
            torch.cuda.init()
        # originals, captured before candidate code is imported
        self.integrity = Integrity(torch, self.cuda, self.findings, allow_tf32=self.cfg.allow_tf32)
        self.guard = StateGuard(torch, self.cuda, self.findings)
        self.plan: MemoryPlan | None = None
        self.peak_reserved = 0  # the caching allocator's peak, over the resets reference_outputs makes
        self.own_kernels = OwnKernels()  # the kernels the candidate's sources define (delegation.py)
        self.delegation: dict[str, Any] | None = None
        self.ctx = JobContext(self.cfg, self.findings, self.integrity.originals, self.device, self.cuda)
        self.observers = observers if observers is not None else default_observers(self.cfg, self.cuda)
        for o in self.observers:
            o.register(self.ctx)
        self.inputs = Inputs(self.device, self.findings, self.ctx.sync)
        self.timer = Timer(self.ctx, self.observers, self.guard)
        self.phases.close("import_torch_and_init_cuda")

    def time_interleaved(self, fns: dict[str, Any], sets: list[dict[str, list[Any]]]) -> dict[str, list[float]]:
        """Per-call times (µs) of each fn, interleaved (see ``timing.Timer``)."""
        return self.timer.time_interleaved(fns, sets)

    # -- the whole evaluation
    def run(self) -> dict[str, Any]:
        cfg = self.cfg
        if cfg.import_only:
            return self.build()
        result: dict[str, Any] = {"device": str(self.device), "torch": torch.__version__}
        if self.cuda:
            result["gpu"] = torch.cuda.get_device_name(self.device)
        ref, ref_model, cand_model = self.load()
        if cfg.profile_only:
            return self.profile_only(ref, ref_model, cand_model, result)
        result["correctness"] = corr = self.correctness(ref, ref_model, cand_model)
        if corr["correct"]:  # distribution trials and the runtime probes (see distribution.py, probes.py)
            make = lambda seed: self.inputs.make(ref, seed)  # noqa: E731
            args = (make, ref_model, cand_model, cfg, self.findings, self.ctx.sync)
            result["distribution"] = distribution.check(*args, call=self.guard.call, reference=self.guard.reference)
            probes.after_correctness(*args, self.threads_before, call=self.guard.call,
                                     reference=self.guard.reference)
            self.phases.close("distribution_and_probes")
        result["ops"] = self.op_audit(ref, ref_model, cand_model)
        result["delegation"] = self.delegation
        if not corr["correct"]:
            result["verdict"] = "invalid" if self.findings.invalid() else "incorrect"
            return result
        result.update(self.timing(ref, ref_model, cand_model))
        eager = result["speedup"].get("eager")
        if self.findings.invalid():
            result["verdict"] = "invalid"
        else:
            result["verdict"] = eager["verdict"] if eager else "inconclusive"
        return result

    def build(self) -> dict[str, Any]:
        """A build job: importing the candidate builds its extensions; then its NVRTC cubins for the GPU
        that will run it."""
        with blame("candidate", "import (build)"):
            load_module(self.cfg.candidate_path, "ks_candidate")
        out: dict[str, Any] = {"status": "ok", "verdict": "inconclusive", "built": True}
        fast = sys.modules.get("kernelscope.fast")
        if self.cfg.prebuild_arch and fast is not None:
            cubins, failed = fast.prebuild(self.cfg.prebuild_arch)
            out.update(cubins=[str(c) for c in cubins], prebuild_failed=failed)
        self.phases.close("build")
        return out

    def load(self) -> tuple[Any, Any, Any]:
        """The reference module and both models, built alike from the same seed."""
        cfg = self.cfg
        with blame("reference", "import"):
            ref = load_module(cfg.reference_path, "ks_reference")
        with open(cfg.candidate_path) as f:
            cand_src = f.read()
        self.own_kernels = candidate_kernels(cfg.candidate_path, cand_src)
        for flag in fallback_findings(cand_src):
            self.findings.flags.append(Flag(**flag))
        with self.guard.call("import", rng=False):
            cand = load_module(cfg.candidate_path, "ks_candidate")
        self.integrity.check_tampering("at import")
        if not hasattr(cand, "ModelNew"):
            raise Invalid("the candidate module defines no `ModelNew` class")
        for name in ("Model", "get_inputs", "get_init_inputs"):
            if not hasattr(ref, name):
                raise Invalid(f"the reference module defines no `{name}`")
        torch.manual_seed(cfg.seed)
        with blame("reference", "get_init_inputs() and Model(...)"), torch.device(self.device):
            init = ref.get_init_inputs()
            ref_model = ref.Model(*init).to(self.device).eval()
        torch.manual_seed(cfg.seed)
        with self.guard.call("ModelNew(...)", rng=False), torch.device(self.device):
            cand_model = cand.ModelNew(*init).to(self.device).eval()
        self.integrity.check_tampering("in ModelNew.__init__")
        self.phases.close("load_and_construct")
        return ref, ref_model, cand_model

    # -- correctness
    def correctness(self, ref: Any, ref_model: Any, cand_model: Any) -> dict[str, Any]:
        cfg = self.cfg
        state = Trials(cfg.trials, cfg.tolerance)
        all_ok = True
        with torch.no_grad():
            for trial in range(cfg.trials):
                if not self.trial(ref, ref_model, cand_model, trial, state):
                    all_ok = False
                    if not cfg.all_trials:
                        break
        with self.guard.as_candidate():  # the flags the candidate set, though restored around its calls
            self.integrity.check_precision(state.dtypes)
        corr = state.result(all_ok, cfg)
        self.phases.close("correctness")
        return corr

    def trial(self, ref: Any, ref_model: Any, cand_model: Any, trial: int, state: Trials) -> bool:
        """One trial on fresh inputs: the reference's outputs, memory poisoned, the candidate's outputs
        compared and its side effects checked."""
        inputs = self.inputs.make(ref, self.cfg.seed + 1000 * (trial + 1))
        state.note_dtypes(inputs)
        ref_out, work = self.reference_outputs(ref_model, inputs)  # kept alive until compared
        state.note_dtypes(ref_out)
        if self.plan is None:
            self.plan = self.memory_plan(inputs, ref_out, work)
            state.keep_previous = self.plan.keep_previous
        cand_in = Inputs.clone(inputs)
        self.inputs.poison(ref_out, self.plan.poison_copies)
        with self.guard.call(f"forward (correctness trial {trial})"):
            cand_raw = cand_model(*cand_in)
            self.ctx.sync()
        self.integrity.check_tampering("during forward")
        cand_out = flatten(cand_raw)
        ok, info = compare(ref_out, cand_out, trial, self.cfg, self.findings)
        ok = side_effects(inputs, cand_in, cand_out, ref_out, trial, state, self.findings, ok, info)
        state.results.append(info)
        if ok:
            state.passed += 1
        return ok

    def reference_outputs(self, ref_model: Any, inputs: list[Any]) -> tuple[list[Any], int]:
        """The reference's outputs on a copy of ``inputs``, and its working memory beyond them (bytes at its
        peak during the call, less its outputs; 0 on the CPU)."""
        ref_in = Inputs.clone(inputs)
        if self.cuda:
            self.note_peak()  # before the reset below forgets it
            torch.cuda.reset_peak_memory_stats(self.device)
            before = torch.cuda.memory_allocated(self.device)
        with blame("reference", "forward"), self.guard.reference():
            ref_out = flatten(ref_model(*ref_in))
            self.ctx.sync()
        del ref_in
        if not self.cuda:
            return ref_out, 0
        peak = torch.cuda.max_memory_allocated(self.device) - before
        return ref_out, max(0, peak - tensor_bytes(ref_out))

    def note_peak(self) -> int:
        """The most GPU memory PyTorch's caching allocator has held in this job so far (bytes; 0 on the CPU)."""
        if self.cuda:
            self.peak_reserved = max(self.peak_reserved, int(torch.cuda.max_memory_reserved(self.device)))
        return self.peak_reserved

    def memory_plan(self, inputs: list[Any], ref_out: list[Any], work: int) -> MemoryPlan:
        """What the trials and the timing keep, against the GPU memory free now (see ``memory.plan``)."""
        rotate = self.timer.rotation(inputs)
        if not self.cuda:
            return MemoryPlan(poison_copies=POISON_COPIES, keep_previous=True, rotate_sets=rotate)
        free, _ = torch.cuda.mem_get_info(self.device)
        free += torch.cuda.memory_reserved(self.device) - torch.cuda.memory_allocated(self.device)
        elems = max((int(x.numel()) for x in ref_out if isinstance(x, torch.Tensor)), default=0)
        sizes = Sizes(tensor_bytes(inputs), tensor_bytes(ref_out), work)
        p = plan(free, sizes, elems, poison_copies=POISON_COPIES, rotate_sets=rotate,
                 flush_bytes=(self.cfg.flush_mb << 20) if self.cfg.flush_l2 else 0)
        self.timer.max_sets = p.rotate_sets
        if (note := p.note()) is not None:
            self.findings.notes.append(note)
        return p

    def op_audit(self, ref: Any, ref_model: Any, cand_model: Any) -> dict[str, list[str]]:
        """One forward each, outside timing: the aten ops each side runs; then the delegation policy
        (on a GPU, the candidate's profiled GPU time by op; see delegation.py)."""
        inputs = self.inputs.make(ref, self.cfg.seed + 7)
        with blame("reference", "forward (op audit)"):
            ref_ops = audit_ops(ref_model, Inputs.clone(inputs), self.ctx.sync)
        with self.guard.call("forward (op audit)"):
            cand_ops = audit_ops(cand_model, Inputs.clone(inputs), self.ctx.sync)
        self.delegation = delegation.audit(cand_model, Inputs.clone(inputs), ref_ops, cand_ops, self.findings,
                                           policy=self.cfg.tolerance, cuda=self.cuda, sync=self.ctx.sync,
                                           own=self.own_kernels, call=self.guard.call)
        self.phases.close("op_audit")
        return {"reference": sorted(set(ref_ops)), "candidate": sorted(set(cand_ops))}

    # -- timing
    def baselines(self, ref_model: Any, cand_model: Any) -> dict[str, Any]:
        fns: dict[str, Any] = {"candidate": cand_model, "reference": ref_model}
        if "compile" in self.cfg.reference_modes:
            try:
                fns["reference_compile"] = torch.compile(ref_model)
            except Exception as e:  # torch.compile unavailable for this model
                self.findings.notes.append(f"torch.compile reference failed: {type(e).__name__}: {e}")
        return fns

    def timing(self, ref: Any, ref_model: Any, cand_model: Any) -> dict[str, Any]:
        """The timed rounds, their statistics and speedups, and the observers' checks after the timing."""
        cfg, seed = self.cfg, self.cfg.seed
        fns = self.baselines(ref_model, cand_model)
        inputs = self.inputs.make(ref, seed + 11)
        # Rotate several input sets (fresh allocations): where a buffer lands in physical memory (DRAM
        # channels, TLB reach) shifts a memory-bound kernel's time by whole percents from one
        # allocation to the next, which a single input set bakes into a whole run.
        sets = [inputs] + [self.inputs.make(ref, seed + 11 + j) for j in range(1, self.timer.rotation(inputs))]
        self.phases.close("compile_baselines")
        samples = self.timer.time_interleaved(fns, [{n: s for n in fns} for s in sets])
        self.phases.close("timing")
        run = self.timer.last
        assert run is not None
        self.phases.seconds["timing_warm_up"] = run.warm_up.s  # the part of "timing" spent warming up
        self.integrity.check_tampering("during timing")
        out: dict[str, Any] = {"timings": {n: timing_stats(v) for n, v in samples.items()},
                               "flush_probe": None, "host_cover": None}
        out["samples_us"] = {n: [round(x, 3) for x in v] for n, v in samples.items()} if cfg.keep_samples else None
        out["speedup"] = speedups(samples, seed, cfg.verdict_margin)
        self.phases.close("statistics")
        measured = Measured(fns, inputs, out["timings"], out["speedup"], run)
        for o in self.observers:  # side streams, energy
            o.after_timing(measured)
            if o.phase is not None:
                self.phases.close(o.phase)
            out.update(o.results())
        implausible_speedup(out["speedup"], out["timings"], cfg.flag_speedup_above, self.findings)
        return out

    # -- under a profiler
    def profile_only(self, ref: Any, ref_model: Any, cand_model: Any, result: dict[str, Any]) -> dict[str, Any]:
        """Under a profiler started with profiling off (ncu --profile-from-start off): warm the
        candidate up (builds, autotuning, lazy loading), then open the profiler range only around its
        own forward calls, so neither the harness' nor the reference's kernels are captured."""
        calls = self.cfg.profile_calls
        with torch.no_grad():
            inputs = self.inputs.make(ref, self.cfg.seed + 1000)
            with blame("reference", "forward"):
                ref_out = flatten(ref_model(*Inputs.clone(inputs)))
            cand_in = Inputs.clone(inputs)
            with self.guard.call("forward (warm-up)"):
                cand_model(*cand_in)  # warm-up, outside the profiled range
                self.ctx.sync()
            self.phases.close("warm_up")
            if self.cuda:
                torch.cuda.profiler.start()
            try:
                with self.guard.call("forward (profiled)"):
                    for _ in range(calls):
                        out = cand_model(*cand_in)
                    self.ctx.sync()
            finally:
                if self.cuda:
                    torch.cuda.profiler.stop()
            self.phases.close("profiled_calls")
            ok, info = compare(ref_out, flatten(out), 0, self.cfg, self.findings)
        result.update({"verdict": "inconclusive", "profiled_calls": calls, "correct": ok})
        if not ok:
            self.findings.notes.append("the candidate's output did not match the reference in the profiled run: "
                                       f"{info.get('error') or info}")
        return result


def failure(e: BaseException, h: Harness | None) -> dict[str, Any]:
    """The answer for an exception that ended the job, by whose it is: the candidate's own (its code
    raised, or its kernel left a sticky CUDA error) is its answer (``error``, incorrect); the reference's
    makes the job invalid; a problem too large for the GPU is ``too-large``; anything else is the harness's
    own failure (``harness-error``), which says nothing about the candidate."""
    tb = traceback.format_exc(limit=20)[-6000:]
    if h is None:  # the job never started (its limits, torch's import, CUDA's init)
        return {"status": "error", "verdict": "invalid", "error": f"{type(e).__name__}: {e}", "traceback": tb}
    if isinstance(e, Attributed) and e.party == "candidate":
        return {"status": "error", "verdict": "incorrect", "traceback": tb,
                "error": f"the candidate raised in {e.where}: {e}"}
    if isinstance(e, Attributed):
        return {"status": "error", "verdict": "invalid", "traceback": tb,
                "error": f"the reference raised in {e.where}: {e}"}
    if isinstance(e, TooLarge):
        return {"status": "too-large", "verdict": "inconclusive", "error": str(e)}
    if is_device_fault(e):
        return {"status": "error", "verdict": "incorrect", "traceback": tb,
                "error": f"a CUDA error surfaced in the harness's synchronisation (the candidate's kernel): "
                         f"{type(e).__name__}: {e}"}
    memory = f" (memory plan: {h.plan.counted}, free {h.plan.free} bytes)" if h.plan is not None else ""
    return {"status": "harness-error", "verdict": "inconclusive", "traceback": tb,
            "error": f"the harness itself failed ({type(e).__name__}: {e}){memory}; this says nothing about "
                     "the candidate. Please report it with the traceback."}


def run_job(cfg_path: str, out_path: str, child: ChildStart | None = None) -> int:
    """Run the job CONFIG -> RESULT. The candidate's exceptions are the answer, not a harness crash."""
    cfg = read_config(cfg_path)
    os.environ.setdefault("PYTHONHASHSEED", "0")
    t0 = perf_counter()
    main_start = wall_clock()
    result: dict[str, Any]
    h: Harness | None = None
    try:
        h = Harness(cfg)
        result = h.run()
        result["status"] = "ok"
    except Invalid as e:
        result = {"status": "invalid", "verdict": "invalid", "error": str(e)}
    except BaseException as e:
        result = failure(e, h)
        if isinstance(e, KeyboardInterrupt):
            raise
    if h is not None:
        result["flags"] = h.findings.flags_json()
        result["notes"] = h.findings.notes
        result["phases_s"] = h.phases.seconds
        if h.cuda:
            with contextlib.suppress(Exception):  # a broken context after a failure: no figure, still an answer
                result["gpu_memory_peak_mib"] = round(h.note_peak() / 2**20)
    if child is not None and child.notes:
        result["notes"] = child.notes + result.get("notes", [])
    result["harness_wall_s"] = perf_counter() - t0
    # wall-clock marks (s since the epoch) for the caller's account of the time outside the harness
    result["clock"] = {"child_start": child.wall if child is not None else None, "main_start": main_start,
                       "written": wall_clock()}
    write_result(out_path, result)
    return 0
