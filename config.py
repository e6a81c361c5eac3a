"""Runtime settings: where artifacts live, which directories clients may read, and limits.

Settings come from the command line (``kernelscope serve --root ... --home ...``) or the environment
(``KERNELSCOPE_HOME``, ``KERNELSCOPE_ALLOWED_ROOTS``, a ``os.pathsep``-separated list;
``KERNELSCOPE_CUTLASS_ROOT``, a CUTLASS checkout to use instead of NVIDIA's wheel). Hosts launch
MCP servers with a minimal environment, so every variable must be passed explicitly in the host's
config.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

from pydantic import BaseModel, Field

MiB = 1024 * 1024


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
    return Settings(
        home=home_path.resolve(),
        allowed_roots=[Path(r).expanduser().resolve() for r in roots],
        cutlass_root=Path(cutlass).expanduser() if cutlass else None,
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
