"""capabilities: what this host can do (GPUs, CUDA tools, counter permission, nsys reports) and, for
every feature it cannot offer, why not and how to fix it.

Three layers, cheapest first:

- static facts: NVML (through ``pynvml``) for the GPUs and the driver, :func:`tool_info` for the
  tools, ``/proc/driver/nvidia/params`` and the process' capabilities for counter permission, the
  Nsight Systems folder layout for its report importer, ``importlib.util.find_spec`` for torch/cupy
  (nothing heavy is imported);
- active probes (``probe=True``): a trivial CUDA program is built with nvcc in a workspace and run
  under ``ncu`` (are the performance counters readable?) and ``nsys`` (can it build a report?).
  Each probe runs at most once per process (until :func:`reset_caches`) and within
  :data:`PROBE_WALL_S` seconds;
- the verdicts: ``can[feature]`` and, for each ``False``, ``reasons[feature]`` = "why. Fix: how".

Every subprocess goes through :func:`kernelscope.sandbox.process.run_process`.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import platform
import re
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernelscope import toolchain
from kernelscope._version import __version__
from kernelscope.errors import KernelscopeError, NotAvailable
from kernelscope.models import CapabilityReport, CutlassInfo, GpuInfo, PoolStatus, ToolInfo
from kernelscope.sandbox.process import Limits, build_env, network_isolation_status, run_process
from kernelscope.sandbox.workspace import Workspace
from kernelscope.toolchain import TOOL_NAMES, tool_info
from kernelscope.tools.cutlass import CUTLASS_FIX
from kernelscope.tools.cutlass import info as cutlass_info
from kernelscope.tools.cutlass import reset_cache as reset_cutlass_cache

FALLBACK_ARCH = "sm_90"
PROBE_WALL_S = 120.0
NVIDIA_PARAMS = Path("/proc/driver/nvidia/params")
CAP_SYS_ADMIN = 21

FEATURES: dict[str, str] = {
    "compile": "Compiling CUDA C++ (nvcc)",
    "sass": "SASS disassembly (cuobjdump/nvdisasm)",
    "run": "Running and timing kernels",
    "energy": "Energy measurement (NVML energy counter)",
    "ncu_profile": "Profiling with Nsight Compute (ncu)",
    "nsys_trace": "Timeline tracing with Nsight Systems (nsys)",
    "cupti_trace": "Timeline tracing through CUPTI (our injection tracer, built with nvcc)",
    "sanitizer": "Memory and race checking (compute-sanitizer)",
    "cutlass": "CUTLASS/CuTe headers (compile with cutlass=true, search_cutlass, read_cutlass_file)",
}

COUNTER_FIX = (
    "run kernelscope as root (or with CAP_SYS_ADMIN), or let every user read the counters: "
    "`echo 'options nvidia NVreg_RestrictProfilingToAdminUsers=0' | sudo tee "
    "/etc/modprobe.d/nvidia-profiling.conf`, then reload the nvidia kernel module (or reboot); in a "
    "container, start it with `--cap-add SYS_ADMIN`. See https://developer.nvidia.com/ERR_NVGPUCTRPERM"
)
NO_GPU_FIX = "run kernelscope on a host with an NVIDIA GPU and its driver (compile and SASS work without one)"
GPU_RUNTIME_FIX = "`pip install 'kernelscope[gpu]'` (torch or cupy) in kernelscope's environment"
CUPTI_FIX = ("install the CUDA toolkit's CUPTI (cupti.h and libcupti, in the toolkit or the nvidia-cuda-cupti "
             "wheel) next to nvcc")

_FIX_SEP = ". Fix: "

# A kernel, a launch and a sync: enough for ncu to read one metric and for nsys to trace one kernel.
_PROBE_SOURCE = r"""
#include <cstdio>
__global__ void kernelscope_probe(float* x) { x[threadIdx.x] = 2.0f * threadIdx.x; }
int main() {
    float* d = nullptr;
    cudaError_t e = cudaMalloc(&d, 32 * sizeof(float));
    if (e != cudaSuccess) { std::printf("cudaMalloc failed: %s\n", cudaGetErrorString(e)); return 2; }
    kernelscope_probe<<<1, 32>>>(d);
    e = cudaDeviceSynchronize();
    cudaFree(d);
    if (e != cudaSuccess) { std::printf("kernel failed: %s\n", cudaGetErrorString(e)); return 3; }
    std::printf("kernelscope probe ok\n");
    return 0;
}
"""
_PROBE_KERNEL = "kernelscope_probe"


# ----------------------------------------------------------------------------------------- GPUs
def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _cores_per_sm(major: int, minor: int) -> int | None:
    """FP32 cores per SM (CUDA C++ Programming Guide, arithmetic-instruction throughput table);
    used only to turn NVML's core count into an SM count when NVML gives no SM count itself."""
    if major in (7,) or (major, minor) == (8, 0):
        return 64
    if major >= 8:
        return 128
    return None


def parse_cuda_visible_devices(value: str | None, gpus: Sequence[GpuInfo]) -> tuple[list[GpuInfo], str | None]:
    """The GPUs CUDA programs will see under ``CUDA_VISIBLE_DEVICES=value``, in CUDA's order.

    Entries are NVML indices or (prefixes of) ``GPU-`` UUIDs; as in CUDA, the list stops at the first
    entry that names no device. MIG entries are not resolved: the list is then returned unfiltered."""
    if value is None:
        return list(gpus), None
    entries = [e.strip() for e in value.split(",")]
    if any(e.upper().startswith("MIG-") for e in entries):
        return list(gpus), f"CUDA_VISIBLE_DEVICES={value!r} names MIG instances; all GPUs are listed"
    chosen: list[GpuInfo] = []
    for entry in entries:
        match: GpuInfo | None = None
        if re.fullmatch(r"\d+", entry):
            match = next((g for g in gpus if g.index == int(entry)), None)
        elif entry:
            match = next((g for g in gpus if g.uuid and g.uuid.lower().startswith(entry.lower())), None)
        if match is None or match in chosen:
            break
        chosen.append(match)
    hidden = len(gpus) - len(chosen)
    note = None
    if hidden:
        note = f"CUDA_VISIBLE_DEVICES={value!r} hides {hidden} of {len(gpus)} GPU(s) from kernelscope's programs"
    return chosen, note


def gpu_inventory() -> tuple[list[GpuInfo], str | None, str | None, str | None]:
    """(GPUs visible to CUDA programs, a note, driver version, CUDA driver version) from NVML.

    Never raises: without a driver the list is empty and the note says why and what still works."""
    try:
        import pynvml
    except ImportError as e:
        return [], f"NVML bindings are missing ({e}); fix: `pip install nvidia-ml-py`", None, None
    try:
        pynvml.nvmlInit()
    except Exception as e:
        return (
            [],
            f"no NVIDIA driver/GPU found (NVML: {e}); compile and SASS work, run/profile need a GPU",
            None,
            None,
        )
    notes: list[str] = []
    driver: str | None = None
    cuda: str | None = None
    gpus: list[GpuInfo] = []
    try:
        driver = _nvml_try(lambda: _text(pynvml.nvmlSystemGetDriverVersion()))
        cuda_int = _nvml_try(pynvml.nvmlSystemGetCudaDriverVersion_v2) or _nvml_try(
            pynvml.nvmlSystemGetCudaDriverVersion
        )
        if cuda_int:
            cuda = f"{cuda_int // 1000}.{(cuda_int % 1000) // 10}"
        count = _nvml_try(pynvml.nvmlDeviceGetCount) or 0
        for i in range(count):
            try:
                gpus.append(_gpu_info(pynvml, i, notes))
            except Exception as e:
                notes.append(f"GPU {i} could not be queried (NVML: {e})")
    except Exception as e:  # pragma: no cover - NVML failing after a successful init
        notes.append(f"NVML query failed: {e}")
    finally:
        with contextlib.suppress(Exception):
            pynvml.nvmlShutdown()
    if not gpus and not notes:
        notes.append("the NVIDIA driver is loaded but reports no GPU; run/profile need a GPU")
    visible, vis_note = parse_cuda_visible_devices(os.environ.get("CUDA_VISIBLE_DEVICES"), gpus)
    if vis_note:
        notes.append(vis_note)
    if gpus and not visible:
        notes.append("no GPU is visible to CUDA programs; fix: unset or correct CUDA_VISIBLE_DEVICES")
    return visible, "; ".join(notes) or None, driver, cuda


def _nvml_try(fn: Callable[[], Any]) -> Any:
    try:
        return fn()
    except Exception:
        return None


def _gpu_info(pynvml: Any, index: int, notes: list[str]) -> GpuInfo:
    h = pynvml.nvmlDeviceGetHandleByIndex(index)
    name = _text(pynvml.nvmlDeviceGetName(h))
    uuid = _nvml_try(lambda: _text(pynvml.nvmlDeviceGetUUID(h)))
    cc = _nvml_try(lambda: pynvml.nvmlDeviceGetCudaComputeCapability(h))
    major, minor = (int(cc[0]), int(cc[1])) if cc else (None, None)
    mem = _nvml_try(lambda: pynvml.nvmlDeviceGetMemoryInfo(h))
    sm_count = _nvml_try(lambda: int(pynvml.nvmlDeviceGetAttributes_v2(h).multiprocessorCount)) or None
    if sm_count is None and major is not None and minor is not None:
        cores = _nvml_try(lambda: int(pynvml.nvmlDeviceGetNumGpuCores(h)))
        per_sm = _cores_per_sm(major, minor)
        if cores and per_sm and cores % per_sm == 0:
            sm_count = cores // per_sm
    limit_mw = _nvml_try(lambda: pynvml.nvmlDeviceGetEnforcedPowerLimit(h)) or _nvml_try(
        lambda: pynvml.nvmlDeviceGetPowerManagementLimit(h)
    )
    try:
        pynvml.nvmlDeviceGetTotalEnergyConsumption(h)
        energy = True
    except Exception as e:
        energy = False
        notes.append(f"GPU {index}: NVML energy counter not readable ({e})")
    return GpuInfo(
        index=index,
        name=name,
        uuid=uuid,
        compute_capability=f"{major}.{minor}" if major is not None else None,
        sm_arch=f"sm_{major}{minor}" if major is not None else None,
        memory_total_bytes=int(mem.total) if mem is not None else None,
        sm_count=sm_count,
        power_limit_w=round(limit_mw / 1000.0, 1) if limit_mw else None,
        energy_counter=energy,
    )


def default_arch(gpus: Sequence[GpuInfo]) -> str:
    """The arch a compile request without one targets: the first visible GPU's, else sm_90."""
    if gpus and gpus[0].sm_arch:
        return gpus[0].sm_arch
    return FALLBACK_ARCH


# ------------------------------------------------------------------------- counter permission
def parse_nvidia_params(text: str) -> dict[str, str]:
    """``/proc/driver/nvidia/params`` ("Name: value" lines) -> dict."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip():
            out[key.strip()] = value.strip()
    return out


def profiling_admin_only(params_path: Path = NVIDIA_PARAMS) -> bool | None:
    """The driver's ``RmProfilingAdminOnly`` (NVreg_RestrictProfilingToAdminUsers): None if unknown."""
    try:
        value = parse_nvidia_params(params_path.read_text(errors="replace")).get("RmProfilingAdminOnly")
    except OSError:
        return None
    if value is None or not value.strip().isdigit():
        return None
    return int(value) != 0


def has_cap_sys_admin(status_text: str | None = None) -> bool | None:
    """Whether this process holds CAP_SYS_ADMIN (from ``CapEff`` in /proc/self/status)."""
    if status_text is None:
        try:
            status_text = Path("/proc/self/status").read_text()
        except OSError:
            return None
    m = re.search(r"^CapEff:\s*([0-9a-fA-F]+)\s*$", status_text, re.M)
    if not m:
        return None
    return bool(int(m.group(1), 16) >> CAP_SYS_ADMIN & 1)


def static_counter_access(params_path: Path = NVIDIA_PARAMS, status_text: str | None = None) -> tuple[bool | None, str]:
    """The answer the driver's settings give without running anything."""
    admin_only = profiling_admin_only(params_path)
    if admin_only is None:
        return None, f"{params_path} is not readable; counter access is unknown until ncu tries"
    if not admin_only:
        return True, "the driver lets every user read the counters (RmProfilingAdminOnly: 0)"
    cap = has_cap_sys_admin(status_text)
    if cap:
        return (
            True,
            "the driver restricts counters to admins (RmProfilingAdminOnly: 1); this process has CAP_SYS_ADMIN",
        )
    return False, (
        "the driver restricts GPU performance counters to admin users (RmProfilingAdminOnly: 1) and this "
        f"process is not one (euid {os.geteuid()}, no CAP_SYS_ADMIN); fix: {COUNTER_FIX}"
    )


def parse_ncu_probe(
    output: str, returncode: int | None, metric: str = "sm__cycles_elapsed.avg"
) -> tuple[bool | None, str]:
    """Interpret ``ncu --metrics <metric>`` output of the probe run."""
    if "ERR_NVGPUCTRPERM" in output:
        return False, (
            f"ncu reports ERR_NVGPUCTRPERM: this user may not access the GPU performance counters; fix: {COUNTER_FIX}"
        )
    if re.search(rf"^\s*{re.escape(metric)}\s+\S*\s*[\d,.]+\s*$", output, re.M) and "==ERROR==" not in output:
        return True, f"ncu read {metric} from a probe kernel"
    if "No kernels were profiled" in output:
        return None, "ncu profiled no kernel of the probe program: " + _first_lines(output)
    return None, f"the ncu probe was inconclusive (exit {returncode}): " + _first_lines(output)


def _first_lines(text: str, n: int = 4, width: int = 300) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    errors = [ln for ln in lines if "error" in ln.lower()] or lines
    return " | ".join(errors[:n])[:width] or "(no output)"


# --------------------------------------------------------------------------------- the probes
_probe_lock = threading.Lock()  # guards the two dicts below; never held while a probe runs
_probe_cache: dict[tuple[str, ...], tuple[bool | None, str]] = {}
_probe_running: dict[tuple[str, ...], threading.Lock] = {}


def _cached_probe(
    key: tuple[str, ...], fn: Callable[[], tuple[bool | None, str]], run: bool
) -> tuple[bool | None, str] | None:
    """The cached result of probe ``key``. With ``run`` it runs ``fn`` once (concurrent callers wait
    for that run); without, it returns None at once when no result is cached."""
    with _probe_lock:
        if key in _probe_cache or not run:
            return _probe_cache.get(key)
        key_lock = _probe_running.setdefault(key, threading.Lock())
    with key_lock:
        with _probe_lock:
            if key in _probe_cache:
                return _probe_cache[key]
        result = fn()
        with _probe_lock:
            _probe_cache[key] = result
        return result


def _build_probe(ws: Workspace, nvcc: str, arch: str, deadline: float) -> tuple[Path | None, str]:
    (ws.path / "probe.cu").write_text(_PROBE_SOURCE)
    r = run_process(
        [nvcc, f"-arch={arch}", "-O1", "-o", "probe", "probe.cu"],
        cwd=ws.path,
        limits=Limits(wall_s=max(1.0, min(90.0, deadline - time.monotonic())), output_bytes=64 * 1024),
        env=build_env(home=ws.path),
    )
    if not r.ok or not (ws.path / "probe").is_file():
        return (
            None,
            f"nvcc could not build the probe program for {arch} ({r.describe_failure()}): "
            + _first_lines(r.stdout + r.stderr),
        )
    return ws.path / "probe", ""


def _ncu_probe(ncu: str, nvcc: str, arch: str) -> tuple[bool | None, str]:
    deadline = time.monotonic() + PROBE_WALL_S
    with Workspace(prefix="probe-ncu-") as ws:
        prog, why = _build_probe(ws, nvcc, arch, deadline)
        if prog is None:
            return None, why
        r = run_process(
            [ncu, "--metrics", "sm__cycles_elapsed.avg", "--clock-control", "none", "-c", "1", str(prog)],
            cwd=ws.path,
            limits=Limits(wall_s=max(1.0, deadline - time.monotonic()), output_bytes=256 * 1024),
            env=build_env(home=ws.path),
        )
        if r.timed_out:
            return None, f"the ncu probe {r.describe_failure()}"
        return parse_ncu_probe(r.stdout + r.stderr, r.returncode)


def check_counter_access(ncu: ToolInfo, gpus: Sequence[GpuInfo], *, probe: bool = True) -> tuple[bool | None, str]:
    """Whether this user can read GPU performance counters: (answer, note). None means unknown.

    The driver's settings answer first; when ncu, nvcc and a GPU are present an ncu run of a trivial
    kernel decides (once per process, at most :data:`PROBE_WALL_S` s). With ``probe=False`` a probe
    result from earlier is still used."""
    if not gpus:
        return None, "no GPU here, so the performance counters cannot be checked"
    static, static_note = static_counter_access()
    if static is False:
        return static, static_note
    nvcc = tool_info("nvcc")
    if not (ncu.usable and ncu.path and nvcc.usable and nvcc.path):
        missing = "ncu" if not (ncu.usable and ncu.path) else "nvcc"
        return static, f"{static_note}; not confirmed with ncu ({missing} is not usable here)"
    arch = default_arch(gpus)
    ncu_path, nvcc_path = ncu.path, nvcc.path
    result = _cached_probe(("ncu", ncu_path, nvcc_path, arch), lambda: _ncu_probe(ncu_path, nvcc_path, arch), probe)
    if result is None:
        return static, f"{static_note}; not confirmed by an ncu probe run"
    if result[0] is None:
        return static, f"{static_note}; {result[1]}"
    return result


# -------------------------------------------------------------------------------- nsys reports
def nsys_importer(nsys_path: str | os.PathLike[str]) -> Path | None:
    """Nsight Systems' QdstrmImporter where nsys looks for it (``host-linux-*/`` beside the folder
    of the nsys binary), or None. Without it ``nsys profile`` ends with "Importer error status"."""
    real = Path(os.path.realpath(nsys_path))
    for base in (real.parent.parent, real.parent.parent.parent):
        for cand in sorted(base.glob("host-linux-*/QdstrmImporter")):
            if cand.is_file():
                return cand
    return None


def _nsys_probe(nsys: str, nvcc: str, arch: str) -> tuple[bool | None, str]:
    deadline = time.monotonic() + PROBE_WALL_S
    with Workspace(prefix="probe-nsys-") as ws:
        prog, why = _build_probe(ws, nvcc, arch, deadline)
        if prog is None:
            return None, why
        out = ws.path / "r"
        r = run_process(
            [
                nsys,
                "profile",
                "-o",
                str(out),
                "--force-overwrite",
                "true",
                "-t",
                "cuda",
                "-s",
                "none",
                "--cpuctxsw",
                "none",
                str(prog),
            ],
            cwd=ws.path,
            limits=Limits(wall_s=max(1.0, deadline - time.monotonic()), output_bytes=256 * 1024),
            env=build_env(home=ws.path),
        )
        text = r.stdout + r.stderr
        rep = out.with_suffix(".nsys-rep")
        if r.timed_out:
            return None, f"the nsys probe {r.describe_failure()}"
        if "Importer error" in text or not rep.is_file():
            importer = re.search(r"^.*Importer error.*$", text, re.M)
            written = ", ".join(sorted(p.name for p in ws.path.glob("r.*"))) or "nothing"
            detail = importer.group(0).strip() if importer else _first_lines(text)
            return False, f"`nsys profile` wrote {written} but no .nsys-rep: {detail}"
        s = run_process(
            [nsys, "stats", "--report", "cuda_gpu_kern_sum", "--format", "csv", str(rep)],
            cwd=ws.path,
            limits=Limits(wall_s=max(1.0, deadline - time.monotonic()), output_bytes=256 * 1024),
            env=build_env(home=ws.path),
        )
        if _PROBE_KERNEL in s.stdout:
            return True, "nsys traced a probe kernel and `nsys stats` summarised it"
        if s.timed_out:
            return None, f"`nsys stats` {s.describe_failure()}"
        return (
            False,
            f"nsys wrote a report but `nsys stats` could not read it ({_first_lines(s.stdout + s.stderr)})",
        )


def static_nsys_reports(nsys_path: str | os.PathLike[str]) -> tuple[bool | None, str]:
    """What the installation layout says: an nsys binary without its importer cannot build reports
    (nsys wrapper scripts, e.g. the CUDA toolkit's, are not judged: None)."""
    real = Path(os.path.realpath(nsys_path))
    try:
        with real.open("rb") as f:
            is_elf = f.read(4) == b"\x7fELF"
    except OSError:
        return None, f"cannot read {real}"
    importer = nsys_importer(real)
    if importer is not None:
        return None, f"nsys and its report importer ({importer}) are present"
    if not is_elf:
        return None, f"{nsys_path} is a wrapper; its report importer was not checked"
    return False, (
        f"its QdstrmImporter is not in host-linux-*/ beside {real.parent}, so captures end in "
        "'Importer error status' without a .nsys-rep"
    )


def check_nsys_reports(
    nsys: ToolInfo, gpus: Sequence[GpuInfo] | None = None, *, probe: bool = True
) -> tuple[bool | None, str]:
    """Whether nsys can capture a trace *and* build a report from it here: (answer, note).

    ``gpus`` defaults to :func:`gpu_inventory`'s. With a GPU and nvcc a trivial program is traced
    (once per process; ``probe=False`` uses an earlier result); otherwise the installation layout
    answers (a missing report importer is decisive)."""
    fallback = "the trace tool falls back to its CUPTI tracer"
    if not (nsys.found and nsys.path):
        note = nsys.note or "nsys not found"
        return False, note if "CUPTI" in note else f"{note}; {fallback}"
    if not nsys.usable:
        return False, f"nsys at {nsys.path} is not usable ({nsys.note}); {fallback}"
    if gpus is None:
        gpus = gpu_inventory()[0]
    static, static_note = static_nsys_reports(nsys.path)
    result: tuple[bool | None, str] | None = None
    nvcc = tool_info("nvcc")
    if gpus and nvcc.usable and nvcc.path:
        arch = default_arch(gpus)
        nsys_path, nvcc_path = nsys.path, nvcc.path
        result = _cached_probe(
            ("nsys", nsys_path, nvcc_path, arch), lambda: _nsys_probe(nsys_path, nvcc_path, arch), probe
        )
    if result is not None and result[0] is not None:
        ok, note = result
    else:
        ok = static
        if result is not None:
            note = f"{static_note}; {result[1]}"
        elif not gpus:
            note = f"{static_note}; not verified (no GPU here to trace a probe program)"
        elif not (nvcc.usable and nvcc.path):
            note = f"{static_note}; not verified (no usable nvcc to build a probe program)"
        else:
            note = f"{static_note}; not verified by a probe run"
    if ok is False:
        return False, (
            f"nsys is present ({nsys.path}) but cannot build reports here ({note}); fix: install the full "
            f"Nsight Systems package and put its nsys on PATH; {fallback}"
        )
    return ok, note


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
    no_gpu: tuple[str, str] | None = None
    if not gpus:
        why, fix = _split_note(gpu_note, NO_GPU_FIX) if gpu_note else ("no NVIDIA GPU was found", NO_GPU_FIX)
        why = why.split("; ")[0]  # the first clause says why; the rest repeats what still works
        no_gpu = (why if "GPU" in why else f"no usable NVIDIA GPU ({why})", fix)

    def verdict(*causes: tuple[str, str] | None) -> _Verdict:
        real = [c for c in causes if c is not None]
        return _Verdict(ok=not real, causes=real)

    has_runtime = _module_present("torch") or _module_present("cupy")
    runtime = None if has_runtime else ("neither torch nor cupy is importable", GPU_RUNTIME_FIX)
    cupti = _cupti_cause(tools["nvcc"])

    g0 = gpus[0] if gpus else None
    energy = None
    if g0 is not None and not g0.energy_counter:
        energy = (
            f"NVML's total-energy counter is not readable on GPU {g0.index} ({g0.name})",
            "use a Volta-or-newer GPU whose driver exposes nvmlDeviceGetTotalEnergyConsumption; timings still work",
        )
    counters_cause = None
    if counters is False:
        why, _, fix = counters_note.partition("; fix: ")
        counters_cause = (why, fix or COUNTER_FIX)
    nsys_cause = None
    if nsys_ok is False:
        nsys_cause = (nsys_note.split("; fix: ")[0], _nsys_fix(nsys_note))
    return {
        "compile": verdict(_tool_cause(tools["nvcc"])),
        "sass": verdict(_tool_cause(tools["cuobjdump"]), _tool_cause(tools["nvdisasm"])),
        "run": verdict(no_gpu, runtime),
        "energy": verdict(no_gpu, runtime, energy),
        "ncu_profile": verdict(no_gpu, _tool_cause(tools["ncu"]), counters_cause),
        "nsys_trace": verdict(no_gpu, _tool_cause(tools["nsys"]) or nsys_cause),
        "cupti_trace": verdict(no_gpu, cupti),
        "sanitizer": verdict(no_gpu, _tool_cause(tools["compute-sanitizer"])),
        "cutlass": verdict(_cutlass_cause(cutlass)),
    }


def _cutlass_cause(cutlass: CutlassInfo) -> tuple[str, str] | None:
    if cutlass.found:
        return None
    return _split_note(cutlass.note, CUTLASS_FIX)


def _cupti_cause(nvcc: ToolInfo) -> tuple[str, str] | None:
    """Why the CUPTI tracer cannot be built here (it needs nvcc, cupti.h and libcupti), or None."""
    from kernelscope.errors import NotAvailable
    from kernelscope.measure.cupti import cupti_paths

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
        cutlass=cutlass,
        pool=_pool_status(),
        can={name: v.ok for name, v in verdicts.items()},
        reasons={name: _reason(v) for name, v in verdicts.items() if not v.ok},
    )


def _pool_status() -> PoolStatus | None:
    from kernelscope.sandbox.pool import current_pool

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
    with _report_lock, _probe_lock:
        _report_cache.clear()
        _probe_cache.clear()
        _probe_running.clear()
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
