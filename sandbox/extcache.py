"""The extension build cache: a candidate's ``load_inline``/``load`` builds, one write-once entry per key.

An entry is the folder ``build-cache/torch-extensions/<key>`` that a job's ``TORCH_EXTENSIONS_DIR`` names.
The key (``tools/run.py`` ``extension_key``) is a hash of the candidate's full source (which carries its
``load_inline`` flags) and of what else decides the build (torch's and the CUDA toolkit's versions, the
Python, the target architectures, the compilers named in the environment), so two sources never share an
entry. The entry's life:

- **open** (no seal yet): the jobs of that one source bind it writable and build into it (torch's own lock
  keeps two of them apart); no other source's job sees it;
- **sealed** after the first job that leaves a finished build there (a shared library, no torch lock): the
  launcher (``run_process``, the fork server) writes a manifest beside it, ``<key>.sealed`` (every file's
  size and SHA-256), drops symbolic links and special files, breaks hard links and makes the files
  read-only. From then on no job binds the entry itself: each job gets a private copy, checked against
  the manifest, mounted at the entry's path (torch's build files name absolute paths, so the copy must
  sit where the build was made), and what a job writes there is gone with its workspace.

Unsandboxed (``--no-isolation``) jobs use the entry in place; read-only files are all that stands in
their way there.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import stat
from collections.abc import Mapping
from pathlib import Path

log = logging.getLogger("kernelscope.sandbox.extcache")

CACHE_FOLDER = "torch-extensions"  # the entries' parent under the build cache
SEAL_SUFFIX = ".sealed"
PRIVATE_FOLDER = ".extensions"  # in a job's workspace: its private copy of a sealed entry
_LOCK = "lock"  # torch.utils.file_baton's lock file, in each extension's build folder


# the environment's build settings in a key: target architectures, the CUDA root, compilers, ninja's jobs
BUILD_VARS = ("TORCH_CUDA_ARCH_LIST", "CUDA_HOME", "CUDA_PATH", "CXX", "CC", "MAX_JOBS", "PATH", "NVCC_PREPEND_FLAGS",
              "NVCC_APPEND_FLAGS")


def extension_key(candidate: str, env: Mapping[str, str], versions: str) -> str:
    """The cache key of a candidate source's builds: its full text (which carries its load_inline flags),
    ``versions`` (what decides a build besides: Python, torch, the CUDA toolkit) and the environment's build
    settings."""
    settings = "\0".join(f"{v}={env.get(v, '')}" for v in BUILD_VARS)
    data = "\0".join(("kernelscope-extension-v1", versions, settings, candidate))
    return hashlib.sha256(data.encode("utf-8", errors="surrogatepass")).hexdigest()[:32]


def is_entry(path: Path) -> bool:
    """Whether ``path`` is an entry of an extension cache (a folder directly under ``torch-extensions``)."""
    return path.is_absolute() and path.parent.name == CACHE_FOLDER and path.name not in ("", ".", "..")


def manifest_path(entry: Path) -> Path:
    return entry.with_name(entry.name + SEAL_SUFFIX)


def is_sealed(entry: Path) -> bool:
    return is_entry(entry) and manifest_path(entry).is_file()


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _walk(entry: Path) -> list[Path]:
    """Everything under ``entry`` (not following links), deepest first."""
    out: list[Path] = []
    for root, dirs, files in os.walk(entry, topdown=False, followlinks=False):
        out += [Path(root) / n for n in files + dirs]
    return out


def seal(entry: Path) -> bool:
    """Seal a finished build (see the module's docstring); False where there is none to seal yet (no shared
    library, or a torch lock left: a build under way or killed)."""
    if not is_entry(entry) or not entry.is_dir() or entry.is_symlink():
        return False
    if is_sealed(entry):
        return True
    paths = _walk(entry)
    if any(p.name == _LOCK for p in paths) or not any(p.suffix == ".so" and p.is_file() for p in paths):
        return False
    files: dict[str, dict[str, int | str]] = {}
    for p in paths:
        st = os.lstat(p)
        if stat.S_ISDIR(st.st_mode):
            continue
        if not stat.S_ISREG(st.st_mode):  # a link or a special file: nothing a build needs
            p.unlink()
            continue
        if st.st_nlink > 1:  # a hard link shares its inode with a file outside: keep a copy of our own
            tmp = p.with_name(f".{p.name}.seal")
            shutil.copyfile(p, tmp)
            os.utime(tmp, ns=(st.st_atime_ns, st.st_mtime_ns))
            os.replace(tmp, p)
        os.chmod(p, 0o555 if st.st_mode & 0o100 else 0o444)
        files[str(p.relative_to(entry))] = {"size": p.stat().st_size, "sha256": _sha256(p)}
    tmp = manifest_path(entry).with_name(f".{entry.name}{SEAL_SUFFIX}.{os.getpid()}")
    tmp.write_text(json.dumps({"files": files}, sort_keys=True))
    os.replace(tmp, manifest_path(entry))
    return True


def private_copy(entry: Path, workspace: Path) -> tuple[Path, bool]:
    """A job's own writable copy of a sealed entry, in its workspace, with the files' times kept (so ninja
    sees the build up to date); (the copy, whether it matched the manifest). A copy that does not match is
    emptied: the job then builds in it, for itself."""
    dst = workspace / PRIVATE_FOLDER / entry.name
    if dst.exists():
        shutil.rmtree(dst)
    dst.mkdir(parents=True)
    try:
        files = json.loads(manifest_path(entry).read_text())["files"]
        for rel, want in sorted(files.items()):
            src, out = entry / rel, dst / rel
            if not out.resolve().is_relative_to(dst.resolve()) or not stat.S_ISREG(os.lstat(src).st_mode):
                raise ValueError(f"{rel}: not a file of the entry")
            out.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, out)
            st = os.stat(src)
            os.chmod(out, 0o755 if st.st_mode & 0o100 else 0o644)
            os.utime(out, ns=(st.st_atime_ns, st.st_mtime_ns))
            if _sha256(out) != want["sha256"]:
                raise ValueError(f"{rel}: changed since it was sealed")
    except (OSError, ValueError, KeyError, TypeError) as e:
        shutil.rmtree(dst)
        dst.mkdir(parents=True)
        log.warning("extension cache entry %s not used: %s; the job builds its own", entry.name, e)
        return dst, False
    return dst, True


def sealed_binds(env: Mapping[str, str], workspace: Path) -> list[tuple[Path, Path]]:
    """(source, destination) writable binds of a sandboxed job: its private copy of the sealed entry its
    ``TORCH_EXTENSIONS_DIR`` names, mounted at the entry's path; none for an open entry."""
    value = env.get("TORCH_EXTENSIONS_DIR")
    if not value or not is_sealed(Path(value)):
        return []
    copy, _ok = private_copy(Path(value), workspace)
    return [(copy, Path(value))]


def seal_after_job(env: Mapping[str, str]) -> bool:
    """After a job ended (the launcher's last step): seal the entry it may have built into. Never raises."""
    value = env.get("TORCH_EXTENSIONS_DIR")
    if not value or not is_entry(Path(value)):
        return False
    try:
        return seal(Path(value))
    except OSError:
        return False
