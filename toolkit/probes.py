"""The host's facts, as probes: the GPUs (NVML), the permission to read performance counters, whether
Nsight Systems can build reports, and the arch a compile targets by default.

Why a top-level module beside :mod:`kernelscope.toolkit.toolchain` (which finds the CUDA tools and their
versions) and not ``measure/``: these are facts about the machine, not measurement backends, and
they are needed below the MCP verbs by more than one of them: ``compile`` (the default arch),
``capabilities`` (the report), ``nsys_trace`` (can nsys report here?) and ``run``. Keeping them out
of ``tools/capabilities.py`` lets those verbs import them at module level without importing each
other (the old function-level imports hid a cycle through capabilities). This module depends only on
the data models, the sandbox launcher and the toolchain.

Every probe is cheap and never raises, except the active ones (``probe=True``): a trivial CUDA
program is built with nvcc in a workspace and run under ``ncu`` (are the performance counters
readable?) and ``nsys`` (can it build a report?). Each runs at most once per process (until
:func:`reset_probes`) and within :data:`PROBE_WALL_S` seconds, through
:func:`kernelscope.sandbox.process.run_process`.
"""

from __future__ import annotations

import contextlib
import os
import re
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from kernelscope.models import GpuInfo, ToolInfo
from kernelscope.sandbox.process import Limits, build_env, run_process
from kernelscope.sandbox.workspace import Workspace
from kernelscope.toolkit.toolchain import tool_info

FALLBACK_ARCH = "sm_90"
PROBE_WALL_S = 120.0
NVIDIA_PARAMS = Path("/proc/driver/nvidia/params")
CAP_SYS_ADMIN = 21

COUNTER_FIX = (
    "run kernelscope as root (or with CAP_SYS_ADMIN), or let every user read the counters: "
    "`echo 'options nvidia NVreg_RestrictProfilingToAdminUsers=0' | sudo tee "
    "/etc/modprobe.d/nvidia-profiling.conf`, then reload the nvidia kernel module (or reboot); in a "
    "container, start it with `--cap-add SYS_ADMIN`. See https://developer.nvidia.com/ERR_NVGPUCTRPERM"
)

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
            f"no NVIDIA driver/GPU found (NVML: {e}); compile, SASS and eval runs on the CPU work without one, "
            "GPU runs and profiling need one",
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
        notes.append("the NVIDIA driver is loaded but reports no GPU; GPU runs and profiling need one")
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


_default_arch_cache: dict[str, str] = {}
_arch_lock = threading.Lock()


def local_default_arch() -> str:
    """:func:`default_arch` of this host's GPUs, looked up once per process (sm_90 if NVML fails)."""
    with _arch_lock:
        if "arch" not in _default_arch_cache:
            try:
                _default_arch_cache["arch"] = default_arch(gpu_inventory()[0])
            except Exception:
                _default_arch_cache["arch"] = FALLBACK_ARCH
        return _default_arch_cache["arch"]


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


def reset_probes() -> None:
    """Forget the probe results (the next check with ``probe=True`` runs them again)."""
    with _probe_lock:
        _probe_cache.clear()
        _probe_running.clear()
