"""Path containment: a client may only name files under the allowed roots."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from kernelscope.errors import InputError


class PathRefused(InputError):
    """A path that points outside the directories the server may touch (an InputError, so the MCP
    layer passes its sentence to the client as it is)."""


def _check_text(path: str) -> None:
    if not path or not path.strip():
        raise PathRefused("The path is empty: give a file path under one of the allowed roots.")
    if "\x00" in path:
        raise PathRefused("The path contains a NUL byte.")
    if len(path) > 4096:
        raise PathRefused("The path is longer than 4096 characters.")


def resolve_user_path(path: str, roots: Sequence[Path], *, must_exist: bool = True) -> Path:
    """Resolve ``path`` (relative paths are taken against the first root), following symlinks,
    and refuse it unless the real location lies inside one of ``roots``."""
    _check_text(path)
    if not roots:
        raise PathRefused("No allowed roots are configured, so no file can be read by path.")
    p = Path(os.path.expanduser(path))
    if not p.is_absolute():
        p = roots[0] / p
    try:
        real = p.resolve(strict=must_exist)
    except FileNotFoundError:
        raise PathRefused(f"No such file: {path!r}.") from None
    except (OSError, RuntimeError) as e:  # symlink loops, permission errors
        raise PathRefused(f"Cannot resolve {path!r}: {e}.") from None
    for root in roots:
        if real == root or real.is_relative_to(root):
            return real
    allowed = ", ".join(str(r) for r in roots)
    raise PathRefused(
        f"{path!r} resolves outside the allowed roots ({allowed}). Pass the source inline, or start "
        "the server with --root pointing at the directory that holds it."
    )


def contained_path(base: Path, relative: str) -> Path:
    """Join ``relative`` to ``base`` and refuse anything that escapes ``base`` (``..``, absolute
    paths, symlinks pointing out)."""
    _check_text(relative)
    if os.path.isabs(relative):
        raise PathRefused(f"{relative!r} is absolute; give a path relative to the workspace.")
    real_base = base.resolve()
    target = (real_base / relative).resolve()
    if target != real_base and not target.is_relative_to(real_base):
        raise PathRefused(f"{relative!r} escapes the workspace.")
    return target
