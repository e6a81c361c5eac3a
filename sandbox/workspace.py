"""One private directory per job, removed afterwards unless asked to keep it."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from types import TracebackType

from kernelscope.config import ensure_dirs


class Workspace:
    """A fresh directory under the server's workspace root (``<home>/workspaces``)."""

    def __init__(self, prefix: str = "job-", *, keep: bool = False, parent: Path | None = None) -> None:
        root = parent or ensure_dirs().workspaces_dir
        root.mkdir(parents=True, exist_ok=True)
        self.path = Path(tempfile.mkdtemp(prefix=prefix, dir=root))
        (self.path / "tmp").mkdir()
        self.keep = keep

    def __enter__(self) -> Workspace:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.cleanup()

    def cleanup(self) -> None:
        if not self.keep:
            shutil.rmtree(self.path, ignore_errors=True)
