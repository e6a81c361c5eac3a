"""Runtime settings: where artifacts live, which directories clients may read, and limits.

Settings come from the command line (``kernelscope serve --root ... --home ...``) or the environment
(``KERNELSCOPE_HOME``, ``KERNELSCOPE_ALLOWED_ROOTS``, a ``os.pathsep``-separated list;
``KERNELSCOPE_CUTLASS_ROOT``, a CUTLASS checkout to use instead of NVIDIA's wheel;
``KERNELSCOPE_ISOLATION``: required, auto or off, ``KERNELSCOPE_NO_ISOLATION=1`` meaning off;
``KERNELSCOPE_COMPILER_MEMORY_MB``, the compilers' address-space cap, 0 for none;
``KERNELSCOPE_JOB_MEMORY_MB``, an untrusted job's memory cap, 0 for none; ``KERNELSCOPE_BWRAP``, the
bubblewrap binary, read by ``sandbox/isolation.py``; ``KERNELSCOPE_JOB_CGROUP``, the delegated cgroup v2
directory for the jobs' cgroups, read by ``sandbox/cgroup.py``). Hosts launch MCP servers with a minimal
environment, so every variable must be passed explicitly in the host's config.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

MiB = 1024 * 1024
GiB = 1024 * MiB


def default_compiler_memory() -> int:
    """The compilers' address-space cap: a quarter of the machine's memory, at most 8 GiB (at least 1 GiB)."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 8 * GiB
    return max(1 * GiB, min(8 * GiB, total // 4))


def default_job_memory() -> int:
    """The memory cap of one untrusted job (evaluation, program, profile): three eighths of the machine's memory
    (two at once leave a quarter for the host and the server), at least 1 GiB."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 8 * GiB
    return max(1 * GiB, total * 3 // 8)


def _default_home() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "kernelscope"


class Settings(BaseModel):
    home: Path = Field(description="Directory for the artifact store and workspaces.")
    allowed_roots: list[Path] = Field(
        description="Directories whose files clients may name by path (sources, cubins). Nothing else."
    )
    cutlass_root: Path | None = Field(
        None, description="A CUTLASS checkout (the folder holding include/cute) to compile against and search; "
                          "None: the nvidia-cutlass wheel, where installed."
    )
    max_source_bytes: int = 1 * MiB
    max_binary_bytes: int = 64 * MiB
    compile_timeout_s: float = 180.0
    tool_timeout_s: float = 60.0
    max_output_bytes: int = 4 * MiB
    isolation: Literal["required", "auto", "off"] = Field(
        "auto", description="required (what `serve` uses): every job runs inside bubblewrap, and untrusted runs "
                            "(eval, programs, profiles) are refused where it is missing; auto: bubblewrap where "
                            "available, else jobs run unisolated with a warning; off (`serve --no-isolation`): never "
                            "isolate."
    )
    compiler_memory_bytes: int | None = Field(
        default_factory=default_compiler_memory, gt=0,
        description="RLIMIT_AS of each compiler and disassembler process (nvcc and its children, ptxas, cuobjdump, "
                    "nvdisasm); never applied to CUDA processes. None: no cap."
    )

    job_memory_bytes: int | None = Field(
        default_factory=default_job_memory, gt=0,
        description="Memory of one untrusted job (evaluation, program run, profile) and every process it starts: a "
                    "cgroup v2 memory.max where the host delegates a cgroup (KERNELSCOPE_JOB_CGROUP or the server's "
                    "own), else the watchdog's limit on their resident size together. None: no cap."
    )

    @property
    def artifacts_dir(self) -> Path:
        return self.home / "artifacts"

    @property
    def workspaces_dir(self) -> Path:
        return self.home / "workspaces"

    @property
    def cache_dir(self) -> Path:
        return self.home / "cache"


def settings_from_env(
    home: str | os.PathLike[str] | None = None, roots: list[str] | None = None
) -> Settings:
    home_path = Path(home or os.environ.get("KERNELSCOPE_HOME") or _default_home()).expanduser()
    if roots is None:
        env_roots = os.environ.get("KERNELSCOPE_ALLOWED_ROOTS")
        roots = [r for r in env_roots.split(os.pathsep) if r] if env_roots else [os.getcwd()]
    cutlass = os.environ.get("KERNELSCOPE_CUTLASS_ROOT")
    extra: dict[str, object] = {}
    if os.environ.get("KERNELSCOPE_NO_ISOLATION", "").strip() not in ("", "0"):
        extra["isolation"] = "off"
    elif os.environ.get("KERNELSCOPE_ISOLATION", "").strip() in ("required", "auto", "off"):
        extra["isolation"] = os.environ["KERNELSCOPE_ISOLATION"].strip()
    mem = os.environ.get("KERNELSCOPE_COMPILER_MEMORY_MB", "").strip()
    if mem:
        extra["compiler_memory_bytes"] = int(mem) * MiB if mem != "0" else None
    job_mem = os.environ.get("KERNELSCOPE_JOB_MEMORY_MB", "").strip()
    if job_mem:
        extra["job_memory_bytes"] = int(job_mem) * MiB if job_mem != "0" else None
    return Settings(
        home=home_path.resolve(),
        allowed_roots=[Path(r).expanduser().resolve() for r in roots],
        cutlass_root=Path(cutlass).expanduser() if cutlass else None,
        **extra,  # type: ignore[arg-type]
    )


_current: Settings | None = None


def get_settings() -> Settings:
    global _current
    if _current is None:
        _current = settings_from_env()
    return _current


def set_settings(settings: Settings) -> None:
    global _current
    _current = settings
    _cached_dirs.cache_clear()


@lru_cache(maxsize=8)
def _cached_dirs(home: Path) -> None:
    (home / "artifacts").mkdir(parents=True, exist_ok=True)
    (home / "workspaces").mkdir(parents=True, exist_ok=True)


def ensure_dirs(settings: Settings | None = None) -> Settings:
    s = settings or get_settings()
    _cached_dirs(s.home)
    return s
