"""Hardware metrics collected inside the profiled program (CUPTI), for both of analyze's stages.

``native/cupti_metrics.cpp`` is loaded into the program through ``CUDA_INJECTION64_PATH`` (built once with
nvcc, like the CUPTI tracer: :func:`kernelscope.measure.cupti.build_metrics_collector`). It profiles the first
launch of each kernel and launch configuration with the range profiler's kernel replay, in the program's own
run: there is no separate profiler process, so none of the ~1.5 s that every Nsight Compute run costs before
its first pass. The metric names are Nsight Compute's (Perfworks), and the values agree with ncu's on the
same launches (``tests/test_metrics_gpu.py``). Deep launches (``DeepRequest``) also get further metrics and
two source passes per launch (PC sampling and SASS metrics, per instruction and source line), read here
under the names of Nsight Compute's source counters.

What the range profiler cannot give, ncu's launch metrics, is computed here from the launch configuration,
the driver's occupancy answer (active blocks per SM) and the device's attributes: grid and block size,
registers and static shared memory (the driver's, else the compile's ptxas report), waves per SM, the
theoretical occupancy and the occupancy limit per resource.
"""

from __future__ import annotations

import json
import shutil
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError

from kernelscope.config import Settings
from kernelscope.measure.cupti import build_metrics_collector
from kernelscope.measure.lines import LineSums
from kernelscope.measure.ncu import KEY_METRICS, derived_fields, key_fields, rule_metrics
from kernelscope.models import KernelProfile, KernelResources, MetricValue, Profile, SourceLineCounters
from kernelscope.sandbox.process import Limits, ProcessResult, run_process

# ncu's units for the metrics the collector reads (a metric missing here keeps no unit)
UNITS: dict[str, str] = {
    "gpu__time_duration.sum": "ns",
    "dram__bytes_read.sum": "byte",
    "dram__bytes_write.sum": "byte",
    "smsp__cycles_elapsed.avg": "cycle",
    "sm__cycles_elapsed.avg": "cycle",
}
MAX_LINES = 100_000  # a program that floods the output folder is not read past this
MIN_REGISTERS = 16  # ncu's launch__registers_per_thread never reads lower (ptxas' 10, 12, 14: 16 on the H100)
# CUPTI's SASS metrics (per instruction, by binary patching) and the names of Nsight Compute's source counters
# they give (ncu's SourceCounters section reads the same patched counters)
SASS_TO_SOURCE: dict[str, str] = {
    "smsp__sass_inst_executed": "inst_executed",
    "smsp__sass_thread_inst_executed": "thread_inst_executed",
    "smsp__sass_thread_inst_executed_pred_on": "thread_inst_executed_true",
    "smsp__sass_sectors_mem_global": "memory_l2_theoretical_sectors_global",
    "smsp__sass_sectors_mem_global_ideal": "memory_l2_theoretical_sectors_global_ideal",
    "smsp__sass_l1tex_pipe_lsu_wavefronts_mem_shared": "memory_l1_wavefronts_shared",
    "smsp__sass_l1tex_pipe_lsu_wavefronts_mem_shared_ideal": "memory_l1_wavefronts_shared_ideal",
    "smsp__sass_inst_executed_op_local": "inst_executed_op_local",
    "smsp__sass_branch_targets_threads_divergent": "smsp__branch_targets_threads_divergent",
}
SASS_METRICS: tuple[str, ...] = tuple(SASS_TO_SOURCE)
# warp stall reasons the range profiler measures on the H100 (no_instructions and warpgroup_arrive it refuses),
# in cycles per issued instruction as ncu's WarpStateStats section gives them
STALL_REASONS = ("barrier", "branch_resolving", "dispatch_stall", "drain", "imc_miss", "lg_throttle", "long_scoreboard",
                 "math_pipe_throttle", "membar", "mio_throttle", "misc", "not_selected", "selected", "short_scoreboard",
                 "sleeping", "tex_throttle", "wait")
STALL_METRICS = tuple(f"smsp__average_warps_issue_stalled_{r}_per_issue_active.ratio" for r in STALL_REASONS)
SAMPLED = "smsp__pcsamp_warps_issue_stalled_"
# per-line excess as ncu derives it in SourceCounters: (derived name, measured, ideal)
EXCESS = (("derived__memory_l2_theoretical_sectors_global_excessive", "memory_l2_theoretical_sectors_global",
           "memory_l2_theoretical_sectors_global_ideal"),
          ("derived__memory_l1_wavefronts_shared_excessive", "memory_l1_wavefronts_shared",
           "memory_l1_wavefronts_shared_ideal"))
# the kernel totals a deep launch's source passes give (so never asked of the range profiler)
SOURCE_TOTALS = ("smsp__pcsamp_sample_count", "memory_l2_theoretical_sectors_global",
                 "memory_l2_theoretical_sectors_global_ideal", *(d for d, _, _ in EXCESS))
# H100 (and every GPU since Volta): registers are allocated per warp in units of 256, shared memory per block
# in units of 128 bytes
REG_UNIT, SMEM_UNIT = 256, 128
OCCUPANCY_LIMITS = ("launch__occupancy_limit_registers", "launch__occupancy_limit_shared_mem",
                    "launch__occupancy_limit_blocks", "launch__occupancy_limit_warps")


class DeviceInfo(BaseModel):
    name: str | None = None
    sm_count: int | None = None
    cc_major: int | None = None
    cc_minor: int | None = None
    max_threads_per_sm: int | None = None
    max_blocks_per_sm: int | None = None
    regs_per_sm: int | None = None
    smem_per_sm: int | None = None
    reserved_smem_per_block: int | None = None
    warp_size: int | None = None
    l2_bytes: int | None = None


class CollectedLaunch(BaseModel):
    seq: int = Field(description="The launch's position among all kernel launches of the process (1-based).")
    name: str = Field(description="Mangled name.")
    demangled: str | None = None
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    dyn_smem: int = 0
    regs: int | None = None
    static_smem: int | None = None
    local_bytes: int | None = None
    max_blocks_per_sm: int | None = None
    wall_ns: float | None = Field(None, description="Host time the profiled launch took, replay passes included.")
    deep: bool = Field(False, description="Profiled with the deep metrics as well as the light ones.")
    values: dict[str, float | None] = Field(default_factory=dict)


class CollectedConfig(BaseModel):
    """How many times the process launched a kernel with one launch configuration (profiled or not)."""

    name: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    dyn_smem: int = 0
    launches: int


class CollectedPc(BaseModel):
    """One instruction of a deep launch: its PC offset in the function, source line, and counts."""

    pc: int
    file: str = ""
    line: int = 0
    stall: list[int] = Field(default_factory=list, description="PC samples per stall reason (CollectedSource.reasons).")
    sass: list[int] = Field(default_factory=list, description="SASS metric values (CollectedSource.sass_metrics).")


class CollectedSource(BaseModel):
    """The per-instruction passes of one deep launch (PC sampling, SASS metrics), on checkpoints of its memory."""

    seq: int
    name: str
    period: int | None = Field(None, description="PC sampling period, log2 of cycles.")
    sampled: bool = False
    counted: bool = False
    samples: int = 0
    dropped: int = 0
    wall_ns: float | None = None
    reasons: list[str] = Field(default_factory=list)
    sass_metrics: list[str] = Field(default_factory=list)
    cubin: str = Field("", description="The collector's copy of the module the kernel ran from (a file name in its "
                                       "output folder; '' where none): the SASS its PC offsets are read against.")
    pcs: list[CollectedPc] = Field(default_factory=list)


class Collected(BaseModel):
    """What one collector run wrote: the configuration, the profiled launches, and what went wrong."""

    chip: str | None = None
    metrics: list[str] = Field(default_factory=list)
    refused: list[str] = Field(default_factory=list, description="Requested metrics this GPU or CUPTI does not know.")
    passes: int | None = None
    deep_metrics: list[str] = Field(default_factory=list, description="The deep launches' further metrics.")
    deep_passes: int | None = None
    sass_metrics: list[str] = Field(default_factory=list, description="SASS metrics configured for the source passes.")
    sass_catalogue: list[str] = Field(default_factory=list, description="Every SASS metric this GPU's CUPTI offers.")
    device: DeviceInfo = Field(default_factory=DeviceInfo)
    launches: list[CollectedLaunch] = Field(default_factory=list)
    sources: list[CollectedSource] = Field(default_factory=list)
    configs: list[CollectedConfig] = Field(default_factory=list, description="Launches per kernel and configuration.")
    configs_capped: bool = False
    launches_seen: int | None = Field(None, description="Kernel launches the process made (profiled or not).")
    errors: list[str] = Field(default_factory=list, description="CUPTI calls that failed, as the collector said.")
    ended: bool = Field(False, description="The process reached its exit handler (the end line was written).")
    gated: bool = Field(False, description="Only launches inside the profiler range were counted and profiled.")
    gate_opened: int = Field(0, description="How many times the profiler range opened (gated runs).")
    notes: list[str] = Field(default_factory=list)


class DeepRequest(BaseModel):
    """What the deep launches (those of these kernels) get besides the light metrics."""

    kernels: list[str] = Field(description="Mangled or demangled name substrings of the deep kernels.")
    metrics: list[str] = Field(default_factory=list, description="Further range-profiler metrics.")
    source: bool | Literal["pc", "sass"] = Field(
        True, description="The per-instruction passes: PC sampling and SASS metrics (or only one of them).")
    sass_metrics: list[str] = Field(default_factory=lambda: list(SASS_METRICS))
    pcsamp_period: int = Field(9, ge=5, le=31, description="PC sampling period, log2 of cycles.")
    max_launches: int = Field(16, ge=1, le=1024, description="Deep launches at most; later ones get the light metrics.")


def collector_env(lib: Path, out_dir: Path, metrics: list[str], *, max_launches: int = 64,
                  filter_mode: str = "per-config", deep: DeepRequest | None = None,
                  gated: bool = False) -> dict[str, str]:
    """Environment variables that load the collector into a CUDA process (see the C++ source's header).
    ``gated``: only the launches inside the process's profiler range (cuProfilerStart to cuProfilerStop) are
    counted and profiled, as under ``ncu --profile-from-start off``."""
    env = {"CUDA_INJECTION64_PATH": str(lib), "KERNELSCOPE_METRICS_DIR": str(out_dir),
           "KERNELSCOPE_METRICS": ",".join(metrics), "KERNELSCOPE_METRICS_FILTER": filter_mode,
           "KERNELSCOPE_METRICS_MAX": str(max_launches)}
    if gated:
        env["KERNELSCOPE_METRICS_GATED"] = "1"
    if deep is not None and deep.kernels:
        env |= {"KERNELSCOPE_DEEP_KERNELS": "|".join(deep.kernels), "KERNELSCOPE_METRICS_DEEP": ",".join(deep.metrics),
                "KERNELSCOPE_SOURCE": {True: "1", False: "0"}.get(deep.source, str(deep.source)),
                "KERNELSCOPE_SASS_METRICS": ",".join(deep.sass_metrics),
                "KERNELSCOPE_PCSAMP_PERIOD": str(deep.pcsamp_period), "KERNELSCOPE_DEEP_MAX": str(deep.max_launches)}
    return env


def _int(v: Any) -> int | None:
    return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0 else None


def load_collected(path: Path) -> Collected:
    """Read the collector's output: a folder's ``metrics-<pid>.jsonl`` files, or one such file. The profiled
    program can write into that folder, so a line that is not one of the collector's is skipped with a note,
    never trusted."""
    c = Collected()
    bad = 0
    read = 0
    for file in sorted(path.glob("metrics-*.jsonl")) if path.is_dir() else [path]:
        with file.open(errors="replace") as f:
            for raw in f:
                read += 1
                if read > MAX_LINES:
                    c.notes.append(f"collector output cut at {MAX_LINES} lines")
                    return c
                try:
                    rec = json.loads(raw)
                    kind = rec.get("t") if isinstance(rec, dict) else None
                    if kind == "meta":
                        c.chip = str(rec.get("chip") or "") or None
                        c.metrics = [str(m) for m in rec.get("metrics", [])]
                        c.refused = [str(m) for m in rec.get("refused", [])]
                        c.passes = _int(rec.get("passes"))
                        c.deep_metrics = [str(m) for m in rec.get("deep_metrics", [])]
                        c.deep_passes = _int(rec.get("deep_passes")) or None
                        c.sass_metrics = [str(m) for m in rec.get("sass_metrics", [])]
                        c.sass_catalogue = [str(m) for m in rec.get("sass_catalogue", [])]
                        c.device = DeviceInfo.model_validate(rec.get("device") or {})
                    elif kind == "launch":
                        for key in ("regs", "static_smem", "local_bytes", "max_blocks_per_sm"):
                            rec[key] = _int(rec.get(key))  # -1: the driver did not say
                        c.launches.append(CollectedLaunch.model_validate(rec))
                    elif kind == "source":
                        c.sources.append(CollectedSource.model_validate(rec))
                    elif kind == "error":
                        c.errors.append(f"{rec.get('call')}: {rec.get('what')}"[:300])
                    elif kind == "end":
                        c.ended = True
                        c.launches_seen = (c.launches_seen or 0) + (_int(rec.get("launches")) or 0)
                        c.configs += [CollectedConfig.model_validate(x) for x in rec.get("configs") or []]
                        c.configs_capped = c.configs_capped or bool(rec.get("configs_capped"))
                        c.gated = c.gated or rec.get("gated") is True
                        c.gate_opened += _int(rec.get("gate_opened")) or 0
                    else:
                        bad += 1
                except (ValueError, ValidationError, TypeError, AttributeError):
                    bad += 1
    if bad:
        c.notes.append(f"{bad} line(s) of the collector's output were not its own and were skipped")
    c.errors = c.errors[:20]
    return c


# runs the measured job with the given environment and limits instead of spawning ``argv`` (the eval harness's
# fork server: no fresh interpreter, no torch import per analysis)
Runner = Callable[[dict[str, str], Limits], ProcessResult]


def run_collector(argv: list[str], ws: Path, env: dict[str, str], metrics: list[str], timeout_s: float,
                  s: Settings, cancel: threading.Event | None, *, max_launches: int = 64,
                  deep: DeepRequest | None = None, gated: bool = False,
                  runner: Runner | None = None) -> tuple[ProcessResult, Collected]:
    """Run ``argv`` once with the collector injected; (process result, what it collected). ``gated``: only
    the launches inside the process's profiler range (an eval harness' profiled forward calls). ``runner``:
    runs the job instead of a spawned ``argv``; the library is then copied into the workspace, the one folder
    of the server's a fork server's job is sure to see (CUDA loads it when the job's process initialises CUDA,
    which a fork server's job does after the fork)."""
    lib = build_metrics_collector(s)
    if runner is not None:
        staged = ws / "collector" / lib.name
        staged.parent.mkdir(exist_ok=True)
        shutil.copy2(lib, staged)
        lib = staged
    out = ws / "metrics"
    out.mkdir(exist_ok=True)
    for old in [*out.glob("metrics-*.jsonl"), *out.glob("cubin-*.cubin")]:  # a second run's own
        old.unlink()
    env = {**env, **collector_env(lib, out, metrics, max_launches=max_launches, deep=deep, gated=gated)}
    limits = Limits(wall_s=timeout_s, output_bytes=256 * 1024, isolate_network=True)
    proc = runner(env, limits) if runner is not None else run_process(argv, cwd=ws, env=env, cancel=cancel,
                                                                       limits=limits)
    return proc, load_collected(out)


# ------------------------------------------------------------------------------------------ profiles
def _unit(metric: str) -> str | None:
    if metric in UNITS:
        return UNITS[metric]
    if ".pct" in metric or metric.endswith("_pct"):
        return "%"
    if metric.endswith(".per_cycle_elapsed"):
        return "inst/cycle"
    return None


def occupancy_limits(regs: int | None, block: int, smem: int | None, dyn_smem: int,
                     dev: DeviceInfo) -> dict[str, int | None]:
    """Blocks per SM each resource allows, as ncu's launch__occupancy_limit_* (equal to ncu's on the planted
    suite's 24 kernels, tests/test_metrics.py); shared memory at the largest carveout, where ncu reads the
    carveout the driver chose for the launch (which the driver makes large enough not to bind first)."""
    out: dict[str, int | None] = dict.fromkeys(OCCUPANCY_LIMITS)
    if not block or not dev.warp_size:
        return out
    warps = -(-block // dev.warp_size)
    out["launch__occupancy_limit_blocks"] = dev.max_blocks_per_sm
    if dev.max_threads_per_sm:
        out["launch__occupancy_limit_warps"] = (dev.max_threads_per_sm // dev.warp_size) // warps
    if regs is not None and dev.regs_per_sm:
        per_warp = -(-regs * dev.warp_size // REG_UNIT) * REG_UNIT
        out["launch__occupancy_limit_registers"] = dev.regs_per_sm // (per_warp * warps) if per_warp else None
    if smem is not None and dev.smem_per_sm:
        per_block = -(-(smem + dyn_smem) // SMEM_UNIT) * SMEM_UNIT + (dev.reserved_smem_per_block or 0)
        out["launch__occupancy_limit_shared_mem"] = dev.smem_per_sm // per_block if per_block else None
    return out


def _pc_counts(pc: CollectedPc, reasons: list[str], names: list[str]) -> dict[str, float]:
    """One instruction's record under Nsight Compute's source-counter names, with its sample count."""
    counts: dict[str, float] = {}
    for reason, n in zip(reasons, pc.stall, strict=False):
        if n:
            counts[reason] = counts.get(reason, 0.0) + n
    if "smsp__pcsamp_sample_count" not in counts:  # every sample has one reason; *_not_issued are subsets
        n = sum(v for k, v in counts.items() if k.startswith(SAMPLED) and not k.endswith("_not_issued"))
        if n:
            counts["smsp__pcsamp_sample_count"] = n
    for name, v in zip(names, pc.sass, strict=False):
        if v:
            counts[name] = counts.get(name, 0.0) + v
    return counts


def _derived_lines(src: CollectedSource, counted: list[dict[str, float]], sass_of: Callable[[int], str]
                   ) -> dict[tuple[str, int], dict[str, float]]:
    """The per-line sums with the counters derived from each instruction's SASS (measure.lines.LineSums), as
    Nsight Compute's reader makes them: the excess per instruction, stall samples on the barrier they wait at.
    ``counted``: each of ``src.pcs``' records (_pc_counts)."""
    where = {pc.pc: (pc.file, pc.line) if pc.line > 0 and pc.file else None for pc in src.pcs}
    sums = LineSums(where.get, sass_of)
    for pc, counts in zip(src.pcs, counted, strict=True):
        excess = {derived: max(0.0, counts[measured] - counts.get(ideal, 0.0))
                  for derived, measured, ideal in EXCESS if measured in counts}
        for k, v in {**counts, **excess}.items():
            if v:
                sums.add(k, pc.pc, v)
    return {loc: dict(c) for loc, c in sums.finish().items()}


def source_counters(src: CollectedSource, sass_of: Callable[[int], str] | None = None
                    ) -> tuple[dict[tuple[str, int], dict[str, float]], dict[str, float]]:
    """A deep launch's per-instruction records summed by source line, under Nsight Compute's source-counter
    names (the SASS metrics as SASS_TO_SOURCE names them, the PC samples by stall reason as CUPTI names them,
    which are ncu's), with ncu's derived excess; and the kernel's totals of the same. With ``sass_of`` (PC offset
    in the function -> SASS text, from the binary that ran), the lines also get the counters Nsight Compute's
    reader derives from the SASS (measure.lines)."""
    names = [SASS_TO_SOURCE.get(m, m) for m in src.sass_metrics]
    counted = [_pc_counts(pc, src.reasons, names) for pc in src.pcs]
    per_line: dict[tuple[str, int], dict[str, float]] = {}
    totals: dict[str, float] = {}
    for pc, counts in zip(src.pcs, counted, strict=True):
        for k, v in counts.items():
            totals[k] = totals.get(k, 0.0) + v
        if sass_of is None and pc.line > 0 and pc.file:
            line = per_line.setdefault((pc.file, pc.line), {})
            for k, v in counts.items():
                line[k] = line.get(k, 0.0) + v
    for derived, measured, ideal in EXCESS:
        for d in [*per_line.values(), totals]:
            if measured in d:
                d[derived] = max(0.0, d[measured] - d.get(ideal, 0.0))
    if sass_of is not None:
        per_line = _derived_lines(src, counted, sass_of)
    return per_line, totals


def source_lines(src: CollectedSource, texts: dict[str, list[str]] | None = None, top: int = 10,
                 sass_of: Callable[[int], str] | None = None) -> tuple[list[SourceLineCounters], dict[str, float]]:
    """The hottest source lines by PC samples (ncu keeps the same), with their code where ``texts`` (file name
    or base name -> lines) has it; and the kernel's totals. ``sass_of``: see source_counters."""
    per_line, totals = source_counters(src, sass_of)
    ranked = sorted(per_line.items(), key=lambda kv: -kv[1].get("smsp__pcsamp_sample_count", 0.0))
    # lines that only the SASS metrics saw (never sampled) still carry their excess: keep the worst of them too
    shown = {loc for loc, _ in ranked[:top]}
    worst = sorted((kv for kv in per_line.items() if kv[0] not in shown),
                   key=lambda kv: -max(kv[1].get(d, 0.0) for d, _, _ in EXCESS))[:top // 2]
    out = []
    for (file, line), counters in [*ranked[:top], *worst]:
        lines = (texts or {}).get(file) or (texts or {}).get(Path(file).name) or []
        out.append(SourceLineCounters(file=file, line=line,
                                      code=lines[line - 1].strip()[:300] if 0 < line <= len(lines) else None,
                                      counters={k: round(v, 4) for k, v in counters.items() if v}))
    return out, totals


def launch_profile(i: int, ln: CollectedLaunch, dev: DeviceInfo, kept: list[str],
                   resources: dict[str, KernelResources] | None = None, source: CollectedSource | None = None,
                   texts: dict[str, list[str]] | None = None,
                   sass: Mapping[str, Mapping[int, str]] | None = None) -> KernelProfile:
    """One collected launch as a KernelProfile, with ncu's launch metrics computed from its configuration:
    registers and static shared memory come from the driver, else from the compile's ptxas report. A deep
    launch's source passes give its source lines and the source-derived totals."""
    res = (resources or {}).get(ln.name)
    regs = ln.regs if ln.regs is not None else (res.registers if res else None)
    if regs is not None:  # as ncu reports them: at least the 16 per thread every thread is given
        regs = max(regs, MIN_REGISTERS)
    smem = ln.static_smem if ln.static_smem is not None else (res.shared_bytes if res else None)
    grid = ln.grid[0] * ln.grid[1] * ln.grid[2]
    block = ln.block[0] * ln.block[1] * ln.block[2]
    waves = theo = None
    if ln.max_blocks_per_sm and dev.sm_count:
        waves = grid / (ln.max_blocks_per_sm * dev.sm_count)
        if dev.max_threads_per_sm and dev.warp_size:
            warps_per_block = -(-block // dev.warp_size)
            theo = 100.0 * ln.max_blocks_per_sm * warps_per_block * dev.warp_size / dev.max_threads_per_sm
    metrics: dict[str, MetricValue] = {m: MetricValue(value=None, unit=None) for m in kept}
    for m, v in ln.values.items():
        metrics[m] = MetricValue(value=v, unit=_unit(m))
    computed: dict[str, tuple[float | str | None, str | None]] = {
        "launch__grid_size": (grid, None), "launch__block_size": (block, None),
        "launch__registers_per_thread": (regs, "register/thread"),
        "launch__shared_mem_per_block_static": (smem, "byte/block"),
        "launch__shared_mem_per_block_dynamic": (ln.dyn_smem, "byte/block"),
        "launch__waves_per_multiprocessor": (waves, None),
        "sm__maximum_warps_per_active_cycle_pct": (theo, "%"),
        "device__attribute_multiprocessor_count": (dev.sm_count, None),
        "device__attribute_display_name": (dev.name, None),
    }
    computed |= {m: (v, "block") for m, v in occupancy_limits(regs, block, smem, ln.dyn_smem, dev).items()}
    for m, (v, unit) in computed.items():
        metrics[m] = MetricValue(value=v, unit=unit)
    lines: list[SourceLineCounters] = []
    if source is not None:
        listing = (sass or {}).get(ln.name)
        lines, totals = source_lines(source, texts, sass_of=(lambda pc: listing.get(pc, "")) if listing else None)
        for m in SOURCE_TOTALS:
            if m in totals:
                metrics[m] = MetricValue(value=totals[m], unit=None)
    return KernelProfile(id=i, name=ln.demangled or ln.name, mangled_name=ln.name, device=dev.name,
                         **key_fields(metrics), **derived_fields(metrics), metrics=metrics, source_lines=lines)


def collected_profile(c: Collected, resources: dict[str, KernelResources] | None = None,
                      report: str = "collector", texts: dict[str, list[str]] | None = None,
                      sass: Mapping[str, Mapping[int, str]] | None = None) -> Profile:
    """Every profiled launch as a KernelProfile, in launch order (the shape ``load_profile`` gives an ncu
    report), keeping every metric the rules read (None where not collected). ``sass`` (mangled kernel name -> PC
    offset -> SASS text, from the binary that ran: tools.sass_maps.instruction_maps) lets the source lines carry the
    counters Nsight Compute's reader derives from the SASS."""
    kept = list(dict.fromkeys([*KEY_METRICS.values(), *rule_metrics(), *STALL_METRICS]))
    launches = sorted(c.launches, key=lambda ln: ln.seq)
    by_seq = {src.seq: src for src in c.sources}
    return Profile(report=report, kernels=[
        launch_profile(i, ln, c.device, kept, resources, by_seq.get(ln.seq), texts, sass)
        for i, ln in enumerate(launches)])
