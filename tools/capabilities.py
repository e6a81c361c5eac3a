"""capabilities: what this host can do (GPUs, CUDA tools, counter permission, nsys reports) and, for
every feature it cannot offer, why not and how to fix it.

The facts come from :mod:`kernelscope.toolkit.probes` (GPUs through NVML, counter permission, the nsys report
probe), :mod:`kernelscope.toolkit.toolchain` (the CUDA tools and their versions), the CUTLASS locator and
the evaluation pool; ``importlib.util.find_spec`` answers for torch/cupy (nothing heavy is imported).
This module turns them into verdicts, ``can[feature]`` and, for each ``False``,
``reasons[feature]`` = "why. Fix: how", and renders the report (``kernelscope doctor``).
"""

from __future__ import annotations

import importlib.util
import platform
import threading
from collections.abc import Sequence
from dataclasses import dataclass

from kernelscope._version import __version__
from kernelscope.config import get_settings
from kernelscope.errors import KernelscopeError, NotAvailable
from kernelscope.measure.cupti import cupti_paths
from kernelscope.models import CapabilityReport, CutlassInfo, GpuInfo, PoolStatus, ToolInfo
from kernelscope.sandbox.cgroup import job_cgroup_status
from kernelscope.sandbox.isolation import isolation_status
from kernelscope.sandbox.pool import current_pool
from kernelscope.sandbox.process import network_isolation_status
from kernelscope.toolkit import toolchain
from kernelscope.toolkit.cutlass_headers import CUTLASS_FIX
from kernelscope.toolkit.probes import (
    COUNTER_FIX,
    check_counter_access,
    check_nsys_reports,
    default_arch,
    gpu_inventory,
    reset_probes,
)
from kernelscope.toolkit.toolchain import TOOL_NAMES, tool_info
from kernelscope.tools.cutlass import info as cutlass_info
from kernelscope.tools.cutlass import reset_cache as reset_cutlass_cache

FEATURES: dict[str, str] = {
    "compile": "Compiling CUDA C++ (nvcc)",
    "sass": "SASS disassembly (cuobjdump/nvdisasm)",
    "run": "Running and timing kernels on a GPU",
    "run_cpu": "Eval runs on the CPU (run with device='cpu': correctness and CPU timing of PyTorch programs)",
    "energy": "Energy measurement (NVML energy counter)",
    "ncu_profile": "Profiling with Nsight Compute (ncu)",
    "nsys_trace": "Timeline tracing with Nsight Systems (nsys)",
    "cupti_trace": "Timeline tracing through CUPTI (our injection tracer, built with nvcc)",
    "sanitizer": "Memory and race checking (compute-sanitizer)",
    "cutlass": "CUTLASS/CuTe headers (compile with cutlass=true, search_cutlass, read_cutlass_file)",
}

NO_GPU_FIX = "run kernelscope on a host with an NVIDIA GPU and its driver (compile and SASS work without one)"
GPU_RUNTIME_FIX = "`pip install 'kernelscope[gpu]'` (torch or cupy) in kernelscope's environment"
CPU_RUNTIME_FIX = "`pip install torch` (a CPU build is enough) in kernelscope's environment"
CUPTI_FIX = ("install the CUDA toolkit's CUPTI (cupti.h and libcupti, in the toolkit or the nvidia-cuda-cupti "
             "wheel) next to nvcc")
# What a host without a GPU still runs, and what needs one (said with run's verdict there).
CPU_RUNS_NOTE = ("eval runs still work on the CPU here (run with device='cpu', or 'auto'); GPU timing, program "
                 "runs, energy and profiling need a GPU")

_FIX_SEP = ". Fix: "


# ------------------------------------------------------------------------------------ verdicts
@dataclass
class _Verdict:
    ok: bool
    causes: list[tuple[str, str]]  # (why, fix) for each missing piece


def _split_note(note: str | None, default_fix: str) -> tuple[str, str]:
    """A tool note "X not found; fix: Y" -> ("X not found", "Y")."""
    if not note:
        return "it is not available", default_fix
    why, sep, fix = note.partition("; fix: ")
    return why.rstrip(". "), (fix if sep else default_fix)


def _tool_cause(t: ToolInfo) -> tuple[str, str] | None:
    if t.usable:
        return None
    if not t.found:
        return _split_note(t.note, f"install {t.name}")
    return (
        _line(t.note, 300).rstrip(". ") or f"{t.name} at {t.path} does not run",
        f"check the installation of {t.name} at {t.path}",
    )


Cause = tuple[str, str]  # (why, fix)


def _verdict(*causes: Cause | None) -> _Verdict:
    real = [c for c in causes if c is not None]
    return _Verdict(ok=not real, causes=real)


def _no_gpu_cause(gpus: Sequence[GpuInfo], gpu_note: str | None) -> Cause | None:
    if gpus:
        return None
    why, fix = _split_note(gpu_note, NO_GPU_FIX) if gpu_note else ("no NVIDIA GPU was found", NO_GPU_FIX)
    why = why.split("; ")[0]  # the first clause says why; the rest repeats what still works
    return (why if "GPU" in why else f"no usable NVIDIA GPU ({why})", fix)


def _energy_cause(gpus: Sequence[GpuInfo]) -> Cause | None:
    g0 = gpus[0] if gpus else None
    if g0 is None or g0.energy_counter:
        return None
    return (
        f"NVML's total-energy counter is not readable on GPU {g0.index} ({g0.name})",
        "use a Volta-or-newer GPU whose driver exposes nvmlDeviceGetTotalEnergyConsumption; timings still work",
    )


def _run_verdicts(no_gpu: Cause | None, energy: Cause | None) -> dict[str, _Verdict]:
    """``run`` (on a GPU), ``run_cpu`` (device='cpu': torch only) and ``energy``. Without a GPU but
    with torch, run's reason says that eval runs work on the CPU and what needs a GPU."""
    has_torch = _module_present("torch")
    runtime = None if has_torch or _module_present("cupy") else ("neither torch nor cupy is importable",
                                                                GPU_RUNTIME_FIX)
    run_gpu = no_gpu
    if no_gpu is not None and has_torch:
        run_gpu = (f"{no_gpu[0]}; {CPU_RUNS_NOTE}", no_gpu[1])
    return {
        "run": _verdict(run_gpu, runtime),
        "run_cpu": _verdict(None if has_torch else ("torch is not importable", CPU_RUNTIME_FIX)),
        "energy": _verdict(no_gpu, runtime, energy),
    }


def _assess(
    tools: dict[str, ToolInfo],
    gpus: Sequence[GpuInfo],
    gpu_note: str | None,
    counters: bool | None,
    counters_note: str,
    nsys_ok: bool | None,
    nsys_note: str,
    cutlass: CutlassInfo,
) -> dict[str, _Verdict]:
    no_gpu = _no_gpu_cause(gpus, gpu_note)
    counters_cause = None
    if counters is False:
        why, _, fix = counters_note.partition("; fix: ")
        counters_cause = (why, fix or COUNTER_FIX)
    nsys_cause = None
    if nsys_ok is False:
        nsys_cause = (nsys_note.split("; fix: ")[0], _nsys_fix(nsys_note))
    runs = _run_verdicts(no_gpu, _energy_cause(gpus))
    return {
        "compile": _verdict(_tool_cause(tools["nvcc"])),
        "sass": _verdict(_tool_cause(tools["cuobjdump"]), _tool_cause(tools["nvdisasm"])),
        "run": runs["run"],
        "run_cpu": runs["run_cpu"],
        "energy": runs["energy"],
        "ncu_profile": _verdict(no_gpu, _tool_cause(tools["ncu"]), counters_cause),
        "nsys_trace": _verdict(no_gpu, _tool_cause(tools["nsys"]) or nsys_cause),
        "cupti_trace": _verdict(no_gpu, _cupti_cause(tools["nvcc"])),
        "sanitizer": _verdict(no_gpu, _tool_cause(tools["compute-sanitizer"])),
        "cutlass": _verdict(_cutlass_cause(cutlass)),
    }


def _cutlass_cause(cutlass: CutlassInfo) -> tuple[str, str] | None:
    if cutlass.found:
        return None
    return _split_note(cutlass.note, CUTLASS_FIX)


def _cupti_cause(nvcc: ToolInfo) -> tuple[str, str] | None:
    """Why the CUPTI tracer cannot be built here (it needs nvcc, cupti.h and libcupti), or None."""
    nvcc_cause = _tool_cause(nvcc)
    if nvcc_cause is not None:
        return nvcc_cause
    try:
        cupti_paths()
    except NotAvailable as e:
        return (e.why, e.fix or CUPTI_FIX)
    return None


def _nsys_fix(note: str) -> str:
    _, sep, fix = note.partition("; fix: ")
    if sep:
        return fix
    return "install Nsight Systems and put its nsys on PATH; meanwhile nsys_trace uses its CUPTI tracer"


def _module_present(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def _reason(v: _Verdict) -> str:
    why = "; ".join(c[0] for c in v.causes)
    fixes: list[str] = []
    for c in v.causes:
        if c[1] not in fixes:
            fixes.append(c[1])
    return f"{why}{_FIX_SEP}{'; '.join(fixes)}"


# -------------------------------------------------------------------------------------- report
_report_lock = threading.Lock()
_report_cache: dict[bool, CapabilityReport] = {}


def capability_report(*, probe: bool = True) -> CapabilityReport:
    """Everything kernelscope knows about this host. ``probe=False`` skips the active ncu/nsys
    probes (fast enough for start-up) but uses their results when they ran before."""
    gpus, gpu_note, driver, cuda = gpu_inventory()
    tools = {name: tool_info(name) for name in TOOL_NAMES}
    counters, counters_note = check_counter_access(tools["ncu"], gpus, probe=probe)
    nsys_ok, nsys_note = check_nsys_reports(tools["nsys"], gpus, probe=probe)
    isolated, isolation_note = network_isolation_status()
    sandboxed, sandbox_note = isolation_in_force()
    cutlass = cutlass_info()
    verdicts = _assess(tools, gpus, gpu_note, counters, counters_note, nsys_ok, nsys_note, cutlass)
    return CapabilityReport(
        kernelscope_version=__version__,
        platform=platform.platform(),
        python=platform.python_version(),
        gpus=list(gpus),
        gpu_note=gpu_note,
        driver_version=driver,
        cuda_driver_version=cuda,
        tools=list(tools.values()),
        default_arch=default_arch(gpus),
        counters_readable=counters,
        counters_note=counters_note,
        nsys_can_report=nsys_ok,
        nsys_note=nsys_note,
        network_isolation=isolated,
        network_isolation_note=isolation_note,
        isolation=sandboxed,
        isolation_note=sandbox_note,
        cutlass=cutlass,
        pool=_pool_status(),
        can={name: v.ok for name, v in verdicts.items()},
        reasons={name: _reason(v) for name, v in verdicts.items() if not v.ok},
    )


def isolation_in_force() -> tuple[bool, str]:
    """Whether jobs run inside bubblewrap here, in words: its path and version, or why not and the fix."""
    mode = get_settings().isolation
    if mode == "off":
        return False, ("OFF: the server was started with --no-isolation; compiles, evaluations and programs run "
                       "with the server's own rights")
    st = isolation_status()
    if st.available:
        return True, f"{st.detail} ({st.bwrap}; user namespaces work); {memory_caps()}"
    then = ("untrusted runs (eval, programs, profiles) are refused" if mode == "required"
            else "jobs run without it, with a warning")
    return False, f"none: {st.detail}; {then}. Fix: {st.fix}"


def memory_caps() -> str:
    """The memory caps in force, in words (docs/isolation.md, Memory caps)."""
    s = get_settings()
    comp = f"{s.compiler_memory_bytes >> 20} MiB of address space" if s.compiler_memory_bytes else "none"
    if not s.job_memory_bytes:
        return f"memory caps: compilers {comp}, untrusted jobs none"
    cg = job_cgroup_status()
    how = (f"a cgroup v2 memory.max ({cg.parent})" if cg.available
           else f"the watchdog's resident-size limit ({cg.detail})")
    return f"memory caps: compilers {comp}, untrusted jobs {s.job_memory_bytes >> 20} MiB by {how}"


def _pool_status() -> PoolStatus | None:
    try:
        return current_pool().status()
    except KernelscopeError as e:
        return PoolStatus(backend="local", note=f"the evaluation pool is not available: {e}")


def cached_report(*, probe: bool = False) -> CapabilityReport:
    """:func:`capability_report`, computed once per process (per ``probe``) until :func:`reset_caches`."""
    with _report_lock:
        if probe not in _report_cache:
            _report_cache[probe] = capability_report(probe=probe)
        return _report_cache[probe]


def reset_caches() -> None:
    """Forget the tool lookups, the probe results and the cached reports (re-probe on next use)."""
    with _report_lock:
        _report_cache.clear()
    reset_probes()
    toolchain.reset_cache()
    reset_cutlass_cache()


def require_capability(feature: str, report: CapabilityReport | None = None) -> None:
    """Raise :class:`NotAvailable` (what, why, fix) unless ``feature`` works here.

    Without ``report`` a cached one is used; for ``ncu_profile`` and ``nsys_trace`` it includes the
    active probe (run once per process), so the answer reflects what the tool would actually hit."""
    if feature not in FEATURES:
        raise ValueError(f"unknown feature {feature!r}; known: {', '.join(FEATURES)}")
    if report is None:
        report = cached_report(probe=feature in ("ncu_profile", "nsys_trace"))
    if report.can.get(feature, False):
        return
    reason = report.reasons.get(feature, f"the capability report has no verdict for {feature}")
    why, sep, fix = reason.partition(_FIX_SEP)
    raise NotAvailable(FEATURES[feature], why, fix if sep else "see the capabilities tool's report")


# -------------------------------------------------------------------------------------- render
def _gib(n: int | None) -> str:
    return f"{n / 2**30:.1f} GiB" if n else "? GiB"


def _line(text: str | None, width: int = 400) -> str:
    """A note on one line, bounded (tool notes can quote multi-line usage text)."""
    flat = " ".join((text or "").split())
    return flat if len(flat) <= width else flat[: width - 3] + "..."


def _yes_no(v: bool | None) -> str:
    return {True: "yes", False: "NO", None: "unknown"}[v]


def render_report(report: CapabilityReport) -> str:
    """A short text summary for people and models: what works, what does not, why, and the fix."""
    out = [f"kernelscope {report.kernelscope_version} · Python {report.python} · {report.platform}"]
    if report.gpus:
        drv = f"driver {report.driver_version or '?'}, CUDA {report.cuda_driver_version or '?'}"
        out.append(f"GPUs ({drv}):")
        for g in report.gpus[:8]:
            bits = [f"{g.sm_arch or '?'} (cc {g.compute_capability or '?'})", _gib(g.memory_total_bytes)]
            if g.sm_count:
                bits.append(f"{g.sm_count} SMs")
            if g.power_limit_w:
                bits.append(f"{g.power_limit_w:g} W limit")
            bits.append(f"energy counter {_yes_no(g.energy_counter)}")
            out.append(f"  [{g.index}] {g.name}: " + ", ".join(bits))
        if len(report.gpus) > 8:
            out.append(f"  ... and {len(report.gpus) - 8} more")
        if report.gpu_note:
            out.append(f"  note: {_line(report.gpu_note)}")
    else:
        out.append(f"GPU: none. {_line(report.gpu_note) or 'no NVIDIA GPU found'}")
    out.append(f"Default arch: {report.default_arch}")
    out.append("Tools:")
    for t in report.tools:
        if t.usable:
            out.append(f"  {t.name} {t.version or '?'} ({t.origin}: {t.path})")
        else:
            out.append(f"  {t.name}: {_line(t.note, 200) or 'not usable'}")
    out.append(f"Performance counters readable: {_yes_no(report.counters_readable)}: {_line(report.counters_note)}")
    out.append(f"nsys reports: {_yes_no(report.nsys_can_report)}: {_line(report.nsys_note)}")
    c = report.cutlass
    if c is not None and c.found:
        where = "KERNELSCOPE_CUTLASS_ROOT" if c.origin == "env" else "the nvidia-cutlass wheel"
        out.append(f"CUTLASS/CuTe: {c.version or '?'} from {where} ({c.root}); searched: "
                   f"{', '.join(c.searched_dirs)}" + (f"; note: {_line(c.note)}" if c.note else ""))
    elif c is not None:
        out.append(f"CUTLASS/CuTe: not found: {_line(c.note)}")
    if report.pool is not None:
        out.append(render_pool(report.pool))
    out.append(f"Sandbox (bubblewrap) for every job: {_yes_no(report.isolation)}: {report.isolation_note or ''}")
    out.append(
        f"Network isolation of child processes: {_yes_no(report.network_isolation)}"
        + (f": {report.network_isolation_note}" if report.network_isolation_note else "")
    )
    works = [f for f, ok in report.can.items() if ok]
    out.append("Works here: " + (", ".join(works) if works else "nothing"))
    missing = [f for f, ok in report.can.items() if not ok]
    if missing:
        out.append("Not available:")
        for f in missing:
            out.append(f"  {f}: {_line(report.reasons.get(f), 1000) or '(no reason recorded)'}")
    return "\n".join(out)


def render_pool(p: PoolStatus) -> str:
    """The evaluation pool in one or two lines."""
    if p.backend == "ray":
        res = ", ".join(f"{v:g} {k}" for k, v in p.ray_resources.items() if k != "memory") or "no resources"
        line = f"Evaluation pool: Ray at {p.ray_address} ({res}); {p.queued} evaluation(s) under way"
    else:
        kinds = {k: [w for w in p.workers if w.kind == k] for k in ("gpu", "cpu", "build")}
        gpus = ", ".join(f"{w.name}{' busy' if w.busy else ''} ({w.jobs} jobs)" for w in kinds["gpu"]) or "none"
        line = (f"Evaluation pool: local; GPU workers: {gpus}; {len(kinds['cpu'])} CPU worker(s), "
                f"{len(kinds['build'])} build worker(s); {p.queued} queued")
    return line + (f"; note: {_line(p.note)}" if p.note else "")
