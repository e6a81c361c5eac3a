"""Content-addressed artifact store.

An artifact is a directory ``<home>/artifacts/<id>/`` holding the files of one build (source, cubin
or executable, compile log, derived listings) and ``meta.json``. The id is a hash of everything that
determines the build, so an identical request is a cache hit, and a client can refer to earlier
results by id. Writes are atomic (a temporary directory renamed into place), so concurrent identical
compiles are safe: the first one to finish wins and the other reuses it.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from kernelscope.config import ensure_dirs
from kernelscope.errors import ArtifactNotFound, InputError

ID_LEN = 24
_ID_RE = re.compile(rf"^[0-9a-f]{{{ID_LEN}}}$")
_FILE_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,127}$")

ArtifactKind = Literal["cubin", "executable", "uploaded-cubin", "ncu-report", "trace"]


class ArtifactMeta(BaseModel):
    id: str
    kind: ArtifactKind
    created_unix: float = Field(default_factory=time.time)
    arch: str | None = None
    source_name: str | None = None
    flags: list[str] = Field(default_factory=list)
    compiler_version: str | None = None
    files: dict[str, str] = Field(default_factory=dict, description="role -> file name in the artifact dir")
    extra: dict[str, Any] = Field(default_factory=dict)


class Artifact:
    def __init__(self, root: Path, meta: ArtifactMeta) -> None:
        self.root = root
        self.meta = meta

    @property
    def id(self) -> str:
        return self.meta.id

    def path(self, role: str) -> Path | None:
        name = self.meta.files.get(role)
        return self.root / name if name else None

    def read_text(self, role: str, limit: int | None = None) -> str | None:
        p = self.path(role)
        if p is None or not p.is_file():
            return None
        data = p.read_bytes() if limit is None else p.open("rb").read(limit)
        return data.decode("utf-8", errors="replace")

    @property
    def binary_path(self) -> Path | None:
        """The cubin if there is one, else the executable (cuobjdump reads both)."""
        return self.path("cubin") or self.path("executable")


def content_id(parts: dict[str, Any]) -> str:
    blob = json.dumps(parts, sort_keys=True, separators=(",", ":"), default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:ID_LEN]


def check_id(artifact_id: str) -> str:
    if not isinstance(artifact_id, str) or not _ID_RE.match(artifact_id.strip().lower()):
        raise InputError(
            f"{str(artifact_id)[:80]!r} is not an artifact id: ids are {ID_LEN} lowercase hex characters, "
            "as returned by the compile tool."
        )
    return artifact_id.strip().lower()


class ArtifactStore:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.root.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()

    def get(self, artifact_id: str) -> Artifact | None:
        aid = check_id(artifact_id)
        meta_path = self.root / aid / "meta.json"
        if not meta_path.is_file():
            return None
        try:
            meta = ArtifactMeta.model_validate_json(meta_path.read_text())
        except (OSError, ValueError):
            return None
        return Artifact(self.root / aid, meta)

    def require(self, artifact_id: str) -> Artifact:
        art = self.get(artifact_id)
        if art is None:
            raise ArtifactNotFound(artifact_id)
        return art

    def put(self, meta: ArtifactMeta, files: dict[str, tuple[str, bytes | Path]]) -> Artifact:
        """Store ``files`` (role -> (file name, bytes or a path to copy)) under ``meta.id``."""
        check_id(meta.id)
        final = self.root / meta.id
        existing = self.get(meta.id)
        if existing is not None:
            return existing
        tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=self.root))
        try:
            for role, (name, data) in files.items():
                if not _FILE_RE.match(name):
                    raise ValueError(f"bad artifact file name {name!r}")
                if isinstance(data, Path):
                    shutil.copyfile(data, tmp / name)
                else:
                    (tmp / name).write_bytes(data)
                meta.files[role] = name
            (tmp / "meta.json").write_text(meta.model_dump_json(indent=2))
            try:
                os.rename(tmp, final)
            except OSError:  # another writer won the race
                shutil.rmtree(tmp, ignore_errors=True)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        art = self.get(meta.id)
        assert art is not None
        return art

    def add_file(self, artifact: Artifact, role: str, name: str, data: bytes) -> Path:
        """Add a derived file (a SASS listing, a report) to an existing artifact, atomically."""
        if not _FILE_RE.match(name) or name == "meta.json":
            raise ValueError(f"bad artifact file name {name!r}")
        with self._lock:
            target = artifact.root / name
            fd, tmp = tempfile.mkstemp(dir=artifact.root, prefix=".tmp-")
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, target)
            artifact.meta.files[role] = name
            meta_tmp = artifact.root / ".meta.json.tmp"
            meta_tmp.write_text(artifact.meta.model_dump_json(indent=2))
            os.replace(meta_tmp, artifact.root / "meta.json")
        return target


_stores: dict[Path, ArtifactStore] = {}
_stores_lock = threading.Lock()


def get_store() -> ArtifactStore:
    root = ensure_dirs().artifacts_dir
    with _stores_lock:
        store = _stores.get(root)
        if store is None:
            store = _stores[root] = ArtifactStore(root)
        return store
