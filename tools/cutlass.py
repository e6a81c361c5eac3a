"""The CUTLASS/CuTe verbs: ``search_cutlass`` (:func:`search`) and ``read_cutlass_file``
(:func:`read_file`), and the capability report's view of CUTLASS (:func:`info`).

Where the headers are is :mod:`kernelscope.toolkit.cutlass_headers` (the nvidia-cutlass wheel, or a checkout
named by ``KERNELSCOPE_CUTLASS_ROOT``); the search index over their sources is
:mod:`kernelscope.toolkit.cutlass_index`. This module binds both to the server's settings. A query ranks
definitions of the name above plain text matches, and ``include/`` above ``examples/`` above
``tools/``. Output is bounded (``limit`` hits; counts stop at :data:`MAX_TEXT_MATCHES`).
"""

from __future__ import annotations

import heapq
import os
import re
import time
from pathlib import Path
from typing import Literal

from kernelscope.config import Settings, ensure_dirs, get_settings
from kernelscope.errors import InputError
from kernelscope.models import CutlassFileResult, CutlassHit, CutlassInfo, CutlassSearchResult
from kernelscope.sandbox.paths import PathRefused, contained_path
from kernelscope.toolkit import cutlass_headers, cutlass_index
from kernelscope.toolkit.cutlass_headers import CUTLASS_FIX, ENV_VAR, CutlassRoot, compile_flags, headers_fingerprint
from kernelscope.toolkit.cutlass_index import MAX_TEXT_MATCHES, Index, Ranked, Scope, snippet

MAX_READ_FILE_BYTES = 8 << 20
MAX_LIMIT = 100
MAX_READ_LINES = 1000
Kind = Literal["any", "definitions", "text"]

__all__ = [
    "CUTLASS_FIX", "ENV_VAR", "MAX_TEXT_MATCHES", "CutlassRoot", "Kind", "Scope", "compile_flags",
    "headers_fingerprint", "info", "locate", "open_index", "read_file", "require", "reset_cache", "search",
]


# ------------------------------------------------------------------------------------ the root
def locate(settings: Settings | None = None) -> tuple[CutlassRoot | None, str | None]:
    """The CUTLASS root the settings name (else the wheel's) and, when there is none, why."""
    return cutlass_headers.locate((settings or get_settings()).cutlass_root)


def require(settings: Settings | None = None) -> CutlassRoot:
    return cutlass_headers.require((settings or get_settings()).cutlass_root)


def info(settings: Settings | None = None) -> CutlassInfo:
    """The capability report's view of CUTLASS."""
    root, note = locate(settings)
    if root is None:
        return CutlassInfo(found=False, note=note)
    note = None if root.has_examples else ("this CUTLASS root has no examples/ folder: search_cutlass covers the "
                                           "headers only")
    return CutlassInfo(found=True, root=str(root.root), origin=root.origin, version=root.version,
                       include_dirs=[str(p) for p in root.include_dirs], searched_dirs=list(root.areas),
                       has_examples=root.has_examples, note=note)


def reset_cache() -> None:
    """Forget the located roots and the opened indexes."""
    cutlass_headers.reset_cache()
    cutlass_index.reset_cache()


def open_index(settings: Settings | None = None) -> tuple[Index, bool]:
    """The index of the configured CUTLASS root, built on first use. Returns (index, built_now)."""
    s = ensure_dirs(settings)
    return cutlass_index.open_index(require(s), s.cache_dir)


# ------------------------------------------------------------------------------------ searching
def _check_query(query: str, limit: int) -> str:
    if not isinstance(query, str) or not query.strip():
        raise InputError("The query is empty: give a symbol (make_tma_copy, SM90_TMA_LOAD, cute::Layout) or words "
                         "to find (e.g. 'warpgroup_wait').")
    query = query.strip()
    if len(query) > 200 or "\x00" in query or not query.isprintable():
        raise InputError("The query must be printable text of at most 200 characters.")
    if not 1 <= limit <= MAX_LIMIT:
        raise InputError(f"limit must be between 1 and {MAX_LIMIT}.")
    return query


def _symbol_name(query: str) -> str | None:
    """The name a query asks for when it is one (possibly qualified) identifier: cute::make_tensor -> make_tensor."""
    q = query.strip()
    if not re.fullmatch(r"(?:[A-Za-z_]\w*::)*~?[A-Za-z_]\w*", q):
        return None
    return q.rsplit("::", 1)[-1]


def search(query: str, *, limit: int = 20, kind: Kind = "any", scope: Scope = "all",
           settings: Settings | None = None) -> CutlassSearchResult:
    """Definitions and text matches of ``query`` in the CUTLASS sources, best first."""
    query = _check_query(query, limit)
    t0 = time.perf_counter()
    idx, built = open_index(settings)
    paths = idx.paths()
    defs: list[Ranked] = []
    name = _symbol_name(query)
    if name is not None and kind != "text":
        defs = cutlass_index.find_definitions(idx, name, scope, paths)
    scan = None
    if kind != "definitions":
        scan = cutlass_index.find_text(idx, query, scope, paths, skip={(h[0], h[1]) for _, h in defs})
    scored = defs + (scan.hits if scan is not None else [])
    best = heapq.nsmallest(limit, scored, key=lambda kh: kh[0])
    hits = [CutlassHit(path=p, line=ln, kind=k, symbol=sym,  # type: ignore[arg-type]
                       snippet=sn if k != "text" else snippet(sn)) for _, (p, ln, k, sym, sn) in best]
    return CutlassSearchResult(
        query=query, root=str(idx.root.root), version=idx.root.version, hits=hits, definitions=len(defs),
        text_matches=scan.matches if scan else 0, text_matches_capped=scan.capped if scan else False,
        truncated=len(scored) > limit, searched_files=scan.searched if scan else 0, index_built=built,
        index_build_s=round(idx.build_s, 3) if built and idx.build_s else None,
        query_ms=round((time.perf_counter() - t0) * 1000, 2),
    )


# ------------------------------------------------------------------------------------ reading
# ------------------------------------------------------------------------------------ reading
def read_file(path: str, *, start_line: int = 1, end_line: int | None = None, max_lines: int = 300,
              settings: Settings | None = None) -> CutlassFileResult:
    """Lines ``start_line..end_line`` (1-based, inclusive) of a file under the CUTLASS root."""
    root = require(settings)
    if not isinstance(path, str) or not path.strip():
        raise InputError("Give `path`: a file relative to the CUTLASS root, as search_cutlass prints it "
                         "(e.g. include/cute/tensor.hpp).")
    rel = path.strip()
    if "\x00" in rel or len(rel) > 1000:
        raise InputError("The path contains a NUL byte or is too long.")
    if os.path.isabs(rel) or rel.startswith("~"):
        raise InputError(f"{rel!r} is absolute: give a path relative to the CUTLASS root, e.g. "
                         "include/cute/tensor.hpp.")
    if ".." in Path(rel).parts:
        raise InputError(f"{rel!r} refused: '..' is not allowed; paths stay inside the CUTLASS root.")
    if not 1 <= max_lines <= MAX_READ_LINES:
        raise InputError(f"max_lines must be between 1 and {MAX_READ_LINES}.")
    if start_line < 1:
        raise InputError("start_line counts from 1.")
    if end_line is not None and end_line < start_line:
        raise InputError(f"end_line ({end_line}) is before start_line ({start_line}).")
    target: Path | None = None
    shown = rel
    for base_rel in ("", "include"):  # "cute/tensor.hpp" means include/cute/tensor.hpp
        cand_rel = f"{base_rel}/{rel}" if base_rel else rel
        try:
            cand = contained_path(root.root, cand_rel)
        except PathRefused:
            raise InputError(f"{rel!r} refused: it resolves outside the CUTLASS root (a symlink out of it).") from None
        if cand.is_file():
            target, shown = cand, cand_rel
            break
    if target is None:
        raise InputError(f"No file {rel!r} under the CUTLASS root ({root.origin}, version {root.version or '?'}); "
                         "find paths with search_cutlass.")
    size = target.stat().st_size
    if size > MAX_READ_FILE_BYTES:
        raise InputError(f"{shown} is {size} bytes; files over {MAX_READ_FILE_BYTES} bytes are not read.")
    raw = target.read_bytes()
    if b"\x00" in raw[:8192]:
        raise InputError(f"{shown} is binary, not source text.")
    lines = raw.decode("utf-8", errors="replace").splitlines()
    total = len(lines)
    if total and start_line > total:
        raise InputError(f"start_line {start_line} is past the end of {shown} ({total} lines).")
    want_end = total if end_line is None else min(end_line, total)
    last = min(want_end, start_line + max_lines - 1)
    truncated = last < want_end
    return CutlassFileResult(
        path=shown, root=str(root.root), version=root.version, start_line=start_line, end_line=max(last, 0),
        total_lines=total, text="\n".join(lines[start_line - 1: last]), truncated=truncated,
        next_start_line=last + 1 if truncated else None,
    )
