"""Hardware metrics collected inside the profiled program (CUPTI's range profiler), for analyze's light stage.

``native/cupti_metrics.cpp`` is loaded into the program through ``CUDA_INJECTION64_PATH`` (built once with
nvcc, like the CUPTI tracer: :func:`kernelscope.tools.cupti.build_metrics_collector`). It profiles the first
launch of each kernel and launch configuration with kernel replay, in the program's own run: there is no
separate profiler process, so none of the ~1.5 s that every Nsight Compute run costs before its first pass.
The metric names are Nsight Compute's (Perfworks), and the values agree with ncu's on the same launches
(``tests/test_metrics_gpu.py``).

What the range profiler cannot give, ncu's launch metrics, is computed here from the launch configuration,
the driver's occupancy answer (active blocks per SM) and the device's attributes: grid and block size,
registers and static shared memory (the driver's, else the compile's ptxas report), waves per SM and the
theoretical occupancy. The occupancy limiters per resource are left to the deep stage's ncu sections.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from kernelscope.config import Settings
from kernelscope.models import KernelProfile, KernelResources, MetricValue, Profile
from kernelscope.sandbox.process import Limits, ProcessResult, run_process
from kernelscope.tools.ncu import KEY_METRICS, key_fields, rule_metrics

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


class DeviceInfo(BaseModel):
    name: str | None = None
    sm_count: int | None = None
    cc_major: int | None = None
    cc_minor: int | None = None
    max_threads_per_sm: int | None = None
    max_blocks_per_sm: int | None = None
    regs_per_sm: int | None = None
    smem_per_sm: int | None = None
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
    values: dict[str, float | None] = Field(default_factory=dict)


class Collected(BaseModel):
    """What one collector run wrote: the configuration, the profiled launches, and what went wrong."""

    chip: str | None = None
    metrics: list[str] = Field(default_factory=list)
    refused: list[str] = Field(default_factory=list, description="Requested metrics this GPU or CUPTI does not know.")
    passes: int | None = None
    device: DeviceInfo = Field(default_factory=DeviceInfo)
    launches: list[CollectedLaunch] = Field(default_factory=list)
    launches_seen: int | None = Field(None, description="Kernel launches the process made (profiled or not).")
    errors: list[str] = Field(default_factory=list, description="CUPTI calls that failed, as the collector said.")
    ended: bool = Field(False, description="The process reached its exit handler (the end line was written).")
    notes: list[str] = Field(default_factory=list)


def collector_env(lib: Path, out_dir: Path, metrics: list[str], *, max_launches: int = 64,
                  filter_mode: str = "per-config") -> dict[str, str]:
    """Environment variables that load the collector into a CUDA process (see the C++ source's header)."""
    return {"CUDA_INJECTION64_PATH": str(lib), "KERNELSCOPE_METRICS_DIR": str(out_dir),
            "KERNELSCOPE_METRICS": ",".join(metrics), "KERNELSCOPE_METRICS_FILTER": filter_mode,
            "KERNELSCOPE_METRICS_MAX": str(max_launches)}


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
                        c.device = DeviceInfo.model_validate(rec.get("device") or {})
                    elif kind == "launch":
                        for key in ("regs", "static_smem", "local_bytes", "max_blocks_per_sm"):
                            rec[key] = _int(rec.get(key))  # -1: the driver did not say
                        c.launches.append(CollectedLaunch.model_validate(rec))
                    elif kind == "error":
                        c.errors.append(f"{rec.get('call')}: {rec.get('what')}"[:300])
                    elif kind == "end":
                        c.ended = True
                        c.launches_seen = (c.launches_seen or 0) + (_int(rec.get("launches")) or 0)
                    else:
                        bad += 1
                except (ValueError, ValidationError, TypeError, AttributeError):
                    bad += 1
    if bad:
        c.notes.append(f"{bad} line(s) of the collector's output were not its own and were skipped")
    c.errors = c.errors[:20]
    return c


def run_collector(argv: list[str], ws: Path, env: dict[str, str], metrics: list[str], timeout_s: float,
                  s: Settings, cancel: threading.Event | None, *, max_launches: int = 64
                  ) -> tuple[ProcessResult, Collected]:
    """Run ``argv`` once with the collector injected; (process result, what it collected)."""
    from kernelscope.tools.cupti import build_metrics_collector

    lib = build_metrics_collector(s)
    out = ws / "metrics"
    out.mkdir(exist_ok=True)
    for old in out.glob("metrics-*.jsonl"):
        old.unlink()
    proc = run_process(argv, cwd=ws, env={**env, **collector_env(lib, out, metrics, max_launches=max_launches)},
                       cancel=cancel, limits=Limits(wall_s=timeout_s, output_bytes=256 * 1024, isolate_network=True))
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


def launch_profile(i: int, ln: CollectedLaunch, dev: DeviceInfo, kept: list[str],
                   resources: dict[str, KernelResources] | None = None) -> KernelProfile:
    """One collected launch as a KernelProfile, with ncu's launch metrics computed from its configuration:
    registers and static shared memory come from the driver, else from the compile's ptxas report."""
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
    for m, (v, unit) in computed.items():
        metrics[m] = MetricValue(value=v, unit=unit)
    return KernelProfile(id=i, name=ln.demangled or ln.name, mangled_name=ln.name, device=dev.name,
                         **key_fields(metrics), metrics=metrics)


def collected_profile(c: Collected, resources: dict[str, KernelResources] | None = None,
                      report: str = "collector") -> Profile:
    """Every profiled launch as a KernelProfile, in launch order (the shape ``load_profile`` gives an ncu
    report), keeping every metric the rules read (None where not collected)."""
    kept = list(dict.fromkeys([*KEY_METRICS.values(), *rule_metrics()]))
    launches = sorted(c.launches, key=lambda ln: ln.seq)
    return Profile(report=report, kernels=[launch_profile(i, ln, c.device, kept, resources)
                                           for i, ln in enumerate(launches)])
