"""CUTLASS/CuTe: where the headers are, and a search index over their sources.

The headers come from NVIDIA's ``nvidia-cutlass`` wheel (``pip install 'kernelscope[cutlass]'``: it
ships ``cutlass_library/source/{include,examples,tools}``) or from a CUTLASS checkout named by
``KERNELSCOPE_CUTLASS_ROOT`` (the checkout's root, or its ``include`` folder), which wins when set.
:func:`compile_flags` gives what ``compile(cutlass=true)`` adds; :func:`search` and :func:`read_file`
serve the ``search_cutlass`` and ``read_cutlass_file`` tools.

The index is built once per CUTLASS root and cached under ``<home>/cache/cutlass/<key>/`` (the key
hashes the root's path, its version and the names, sizes and modification times of the files it
indexes) as a SQLite file (standard library only):

- ``files``: each indexed file's text (headers, examples, the util headers);
- ``symbols``: definitions found by patterns over the text: classes, structs, unions, enums, aliases
  (``using X =``), typedefs, macros and function definitions (a name followed by ``(`` whose
  statement opens a body before any ``;``);
- ``postings``: for each lower-case identifier and each of its parts (split at ``_`` and camelCase),
  the files that contain it, so a text query reads only the files that can match.

A query ranks definitions of the name (exact, then case-insensitive, prefix, substring) above plain
text matches, and ``include/`` above ``examples/`` above ``tools/``. Output is bounded (``limit``
hits; counts stop at :data:`MAX_TEXT_MATCHES`).
"""

from __future__ import annotations

import bisect
import hashlib
import heapq
import importlib.util
import os
import re
import sqlite3
import threading
import time
from array import array
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Literal

from kernelscope.config import Settings, ensure_dirs, get_settings
from kernelscope.errors import InputError, NotAvailable
from kernelscope.models import CutlassFileResult, CutlassHit, CutlassInfo, CutlassSearchResult
from kernelscope.sandbox.paths import PathRefused, contained_path

ENV_VAR = "KERNELSCOPE_CUTLASS_ROOT"
CUTLASS_FIX = ("`pip install 'kernelscope[cutlass]'` (NVIDIA's nvidia-cutlass wheel, which ships the headers and "
               f"examples), or set {ENV_VAR} to a CUTLASS checkout (the folder holding include/cute)")
INDEX_FORMAT = "3"  # bump when extraction or the schema changes
# Folders indexed, relative to the root, and their weight in the ranking.
AREAS: tuple[tuple[str, int], ...] = (("include", 3), ("examples", 2), ("tools/util/include", 1))
TEXT_SUFFIXES = {".h", ".hpp", ".hh", ".cuh", ".cu", ".cpp", ".cc", ".inl", ".inc", ".md", ".txt", ".py"}
MAX_INDEXED_FILE_BYTES = 4 << 20
MAX_READ_FILE_BYTES = 8 << 20
MAX_TEXT_MATCHES = 5000
MAX_LIMIT = 100
MAX_READ_LINES = 1000
SNIPPET_CHARS = 200


# ------------------------------------------------------------------------------------ discovery
@dataclass(frozen=True)
class CutlassRoot:
    root: Path
    origin: Literal["env", "wheel"]
    version: str | None
    include_dirs: tuple[Path, ...]
    areas: tuple[str, ...]  # indexed folders that exist here

    @property
    def has_examples(self) -> bool:
        return "examples" in self.areas


def _version(include: Path) -> str | None:
    try:
        text = (include / "cutlass" / "version.h").read_text(errors="replace")
    except OSError:
        return None
    parts = [re.search(rf"#define\s+CUTLASS_{k}\s+(\d+)", text) for k in ("MAJOR", "MINOR", "PATCH")]
    return ".".join(m.group(1) for m in parts) if all(parts) else None  # type: ignore[union-attr]


def _valid(root: Path) -> bool:
    inc = root / "include"
    return (inc / "cute" / "tensor.hpp").is_file() and (inc / "cutlass" / "cutlass.h").is_file()


def _make(root: Path, origin: Literal["env", "wheel"]) -> CutlassRoot:
    include = root / "include"
    incs = [include]
    util = root / "tools" / "util" / "include"
    if util.is_dir():
        incs.append(util)
    areas = tuple(a for a, _ in AREAS if (root / a).is_dir())
    return CutlassRoot(root=root, origin=origin, version=_version(include), include_dirs=tuple(incs), areas=areas)


def _wheel_root() -> Path | None:
    """``cutlass_library/source`` of the nvidia-cutlass wheel, found without importing the package."""
    try:
        spec = importlib.util.find_spec("cutlass_library")
    except (ImportError, ValueError):
        spec = None
    for loc in (spec.submodule_search_locations or []) if spec is not None else []:
        cand = Path(loc) / "source"
        if _valid(cand):
            return cand.resolve()
    return None


_locate_lock = threading.Lock()
_located: dict[str, tuple[CutlassRoot | None, str | None]] = {}


def locate(settings: Settings | None = None) -> tuple[CutlassRoot | None, str | None]:
    """The CUTLASS root to use and, when there is none (or the configured one is unusable), why."""
    s = settings or get_settings()
    key = str(s.cutlass_root or "")
    with _locate_lock:
        if key in _located:
            return _located[key]
        result: tuple[CutlassRoot | None, str | None]
        if s.cutlass_root is not None:
            given = Path(s.cutlass_root).expanduser()
            cands = [given, given.parent] if given.name == "include" else [given]
            root = next((c.resolve() for c in cands if _valid(c)), None)
            if root is None:
                result = (None, f"{ENV_VAR}={given} holds no include/cute/tensor.hpp and include/cutlass/cutlass.h; "
                                f"fix: point it at a CUTLASS checkout, or unset it to use the nvidia-cutlass wheel")
            else:
                result = (_make(root, "env"), None)
        else:
            wheel = _wheel_root()
            result = (_make(wheel, "wheel"), None) if wheel else (
                None, f"the CUTLASS/CuTe headers were not found; fix: {CUTLASS_FIX}")
        _located[key] = result
        return result


def require(settings: Settings | None = None) -> CutlassRoot:
    root, note = locate(settings)
    if root is None:
        why, _, fix = (note or "").partition("; fix: ")
        raise NotAvailable("CUTLASS/CuTe", why or "the headers were not found", fix or CUTLASS_FIX)
    return root


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
    with _locate_lock:
        _located.clear()
    with _index_lock:
        _indexes.clear()


# ------------------------------------------------------------------------------------ compiling
def compile_flags(root: CutlassRoot) -> list[str]:
    """nvcc flags for CUTLASS: its include folders (as -I, added by kernelscope itself)."""
    return [f"-I{d}" for d in root.include_dirs]


def headers_fingerprint(root: CutlassRoot) -> str:
    """A hash of the root, its version and the names, sizes and times of its headers: part of the
    compile cache key, so editing a checkout's headers is never a stale cache hit."""
    h = hashlib.sha256(f"{root.root}\0{root.version}".encode())
    for inc in root.include_dirs:
        for dirpath, dirnames, filenames in os.walk(inc):
            dirnames.sort()
            for fn in sorted(filenames):
                try:
                    st = os.stat(os.path.join(dirpath, fn))
                except OSError:
                    continue
                h.update(f"{dirpath}/{fn}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return h.hexdigest()[:20]


def shorten_paths(text: str, root: CutlassRoot) -> str:
    """Write the CUTLASS root as ``<cutlass>`` in compiler output."""
    return text.replace(str(root.root) + "/", "<cutlass>/")


# ------------------------------------------------------------------------------------ the index
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_RECORD = re.compile(
    r"^[ \t]*(?:template[ \t]*<[^\n]*>[ \t]*)?(?P<kw>struct|class|union|enum(?:[ \t]+class|[ \t]+struct)?)[ \t]+"
    r"(?:(?:alignas|__align__|__declspec)[ \t]*\([^)\n]*\)[ \t]*|(?:CUTE|CUTLASS)_[A-Z_]+[ \t]+"
    r"|\[\[[^\]\n]*\]\][ \t]*)*"
    r"(?P<name>[A-Za-z_]\w*)(?P<rest>[^\n]*)$", re.M)
_ALIAS = re.compile(r"^[ \t]*(?:template[ \t]*<[^\n]*>[ \t]*)?using[ \t]+(?P<name>[A-Za-z_]\w*)[ \t]*=", re.M)
_TYPEDEF = re.compile(r"^[ \t]*typedef\b[^;\n]*?\b(?P<name>[A-Za-z_]\w*)[ \t]*;", re.M)
_MACRO = re.compile(r"^[ \t]*#[ \t]*define[ \t]+(?P<name>[A-Za-z_]\w*)", re.M)
_FUNC = re.compile(r"^[ \t]{0,4}(?:[A-Za-z_][\w:<>,*& \t]*?[ \t*&])?(?P<name>~?[A-Za-z_]\w*)[ \t]*\(", re.M)
_NOT_FUNCS = {
    "if", "for", "while", "switch", "return", "sizeof", "alignof", "static_assert", "decltype", "alignas",
    "defined", "catch", "throw", "new", "delete", "else", "do", "case", "typeid", "noexcept", "requires",
    "CUTE_STATIC_ASSERT", "CUTE_STATIC_ASSERT_V", "CUTLASS_PRAGMA_UNROLL", "CUTE_UNROLL", "CUTLASS_ASSERT",
    "assert", "printf", "print", "using", "template", "asm", "__asm__", "namespace", "public", "private",
}


# After a definition's parameter list: qualifiers, a trailing return type or a constructor's
# initializer list, then its body.
_BODY_FOLLOWS = re.compile(
    r"(?:\s|//[^\n]*|/\*.*?\*/|const\b|volatile\b|override\b|final\b|&&?|noexcept\b(?:\s*\([^()]*\))?|->[^;{}()]*(?:\([^;{}]*\))?"
    r"|requires\b[^;{}]*)*(?:\{|:(?!:))")


_NEXT_CHAR = re.compile(r"\s*(?://[^\n]*\s*|/\*.*?\*/\s*)*(\S)", re.S)


_PAREN_TOKENS = re.compile(r"//[^\n]*|[(){};]")


def _matching_paren(text: str, start: int, limit: int = 4000) -> int:
    """Offset of the ``)`` closing the parenthesis opened just before ``start``, or -1 (also at a
    ``;``, ``{`` or ``}`` first: then it was no parameter list). Line comments are skipped."""
    depth = 1
    for m in _PAREN_TOKENS.finditer(text, start, min(len(text), start + limit)):
        c = m.group(0)
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return m.start()
        elif c in ";{}":
            return -1
    return -1


@lru_cache(maxsize=1 << 18)
def _parts(identifier: str) -> frozenset[str]:
    """Lower-case parts of an identifier, and the identifier itself: make_tma_copy -> make, tma, copy,
    make_tma_copy; ClusterBarrier -> cluster, barrier, clusterbarrier."""
    out = {identifier.lower()}
    for chunk in identifier.split("_"):
        if not chunk:
            continue
        out.add(chunk.lower())
        for p in _CAMEL.split(chunk):
            if p:
                out.add(p.lower())
    return frozenset(p for p in out if len(p) >= 2)


def _query_parts(query: str) -> list[str]:
    parts: set[str] = set()
    for ident in _IDENT.findall(query):
        parts |= _parts(ident)
    return sorted(parts)


class _Lines:
    """Offset -> 1-based line number for one text."""

    def __init__(self, text: str) -> None:
        self.starts = [0] + [m.end() for m in re.finditer("\n", text)]

    def line(self, offset: int) -> int:
        return bisect.bisect_right(self.starts, offset)


def _line_text(text: str, lines: _Lines, lineno: int) -> str:
    start = lines.starts[lineno - 1]
    end = text.find("\n", start)
    return text[start: end if end >= 0 else len(text)]


def _snippet(line: str) -> str:
    s = " ".join(line.strip().split())
    return s if len(s) <= SNIPPET_CHARS else s[: SNIPPET_CHARS - 3] + "..."


def extract_symbols(text: str) -> list[tuple[str, str, int, str]]:
    """Definitions in a C++ text: (name, kind, line, snippet)."""
    lines = _Lines(text)
    out: list[tuple[str, str, int, str]] = []
    seen: set[tuple[str, int]] = set()

    def add(name: str, kind: str, offset: int) -> None:
        ln = lines.line(offset)
        if (name, ln) in seen:
            return
        seen.add((name, ln))
        out.append((name, kind, ln, _snippet(_line_text(text, lines, ln))))

    for m in _RECORD.finditer(text):
        rest = re.sub(r"//.*$", "", m["rest"]).strip()
        if not rest:  # the name ends the line: a definition only if its base clause or body follows
            nxt = _NEXT_CHAR.match(text, m.end())
            if nxt is None or nxt.group(1) not in "{:":
                continue  # e.g. a template parameter on a line of its own
        elif rest[0] not in "{:<" and not rest.startswith("final"):
            continue  # a variable of that type, a template parameter, an elaborated type name
        elif ";" in rest and "{" not in rest.split(";")[0]:
            continue  # a forward declaration
        kw = m["kw"].split()[0]
        add(m["name"], "enum" if kw == "enum" else kw, m.start("name"))
    for m in _ALIAS.finditer(text):
        add(m["name"], "alias", m.start("name"))
    for m in _TYPEDEF.finditer(text):
        add(m["name"], "typedef", m.start("name"))
    for m in _MACRO.finditer(text):
        add(m["name"], "macro", m.start("name"))
    for m in _FUNC.finditer(text):
        name = m["name"]
        if name in _NOT_FUNCS or (name.isupper() and len(name) > 3):  # keywords and macro invocations
            continue
        if m.group(0).lstrip().startswith(("return ", "else ", "case ", "new ", "co_return ")):
            continue
        close = _matching_paren(text, m.end())
        if close < 0 or not _BODY_FOLLOWS.match(text, close + 1):
            continue  # a call or a declaration, not a definition
        add(name, "function", m.start("name"))
    out.sort(key=lambda t: t[2])
    return out


def _source_files(root: CutlassRoot) -> list[tuple[str, Path, os.stat_result]]:
    files: list[tuple[str, Path, os.stat_result]] = []
    for area in root.areas:
        base = root.root / area
        for dirpath, dirnames, filenames in os.walk(base):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
            for fn in sorted(filenames):
                p = Path(dirpath) / fn
                if p.suffix.lower() not in TEXT_SUFFIXES or p.is_symlink():
                    continue
                try:
                    st = p.stat()
                except OSError:
                    continue
                if st.st_size <= MAX_INDEXED_FILE_BYTES:
                    files.append((p.relative_to(root.root).as_posix(), p, st))
    return files


def _index_key(root: CutlassRoot, files: Iterable[tuple[str, Path, os.stat_result]]) -> str:
    h = hashlib.sha256(f"{INDEX_FORMAT}\0{root.root}\0{root.version}".encode())
    for rel, _, st in files:
        h.update(f"{rel}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return h.hexdigest()[:20]


def _area_weight(path: str) -> int:
    return next((w for a, w in AREAS if path.startswith(a + "/")), 0)


_SCHEMA = """
CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE files(id INTEGER PRIMARY KEY, path TEXT NOT NULL, weight INTEGER NOT NULL, text TEXT NOT NULL);
CREATE TABLE symbols(name TEXT NOT NULL, lname TEXT NOT NULL, kind TEXT NOT NULL, file_id INTEGER NOT NULL,
                     line INTEGER NOT NULL, snippet TEXT NOT NULL);
CREATE TABLE postings(term TEXT PRIMARY KEY, file_ids BLOB NOT NULL) WITHOUT ROWID;
"""


def _build(db_path: Path, root: CutlassRoot, files: list[tuple[str, Path, os.stat_result]]) -> None:
    tmp = db_path.with_name(f".{db_path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.unlink(missing_ok=True)
    con = sqlite3.connect(tmp)
    try:
        con.executescript("PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF;" + _SCHEMA)
        postings: dict[str, array] = {}
        sym_rows: list[tuple[str, str, str, int, int, str]] = []
        file_rows: list[tuple[int, str, int, str]] = []
        for fid, (rel, path, _st) in enumerate(files):
            try:
                raw = path.read_bytes()
            except OSError:
                continue
            if b"\x00" in raw[:8192]:
                continue
            text = raw.decode("utf-8", errors="replace")
            file_rows.append((fid, rel, _area_weight(rel), text))
            terms: set[str] = set()
            for ident in set(_IDENT.findall(text)):
                terms |= _parts(ident)
            for t in terms:
                postings.setdefault(t, array("I")).append(fid)
            if path.suffix.lower() not in (".md", ".txt", ".py"):
                sym_rows += [(n, n.lower(), k, fid, ln, sn) for n, k, ln, sn in extract_symbols(text)]
        con.executemany("INSERT INTO files VALUES (?,?,?,?)", file_rows)
        con.executemany("INSERT INTO symbols VALUES (?,?,?,?,?,?)", sym_rows)
        con.executemany("INSERT INTO postings VALUES (?,?)", ((t, a.tobytes()) for t, a in postings.items()))
        con.execute("CREATE INDEX symbols_lname ON symbols(lname)")
        con.executemany("INSERT INTO meta VALUES (?,?)", [
            ("root", str(root.root)), ("version", root.version or ""), ("format", INDEX_FORMAT),
            ("files", str(len(file_rows))), ("symbols", str(len(sym_rows))), ("built", str(time.time())),
        ])
        con.commit()
    finally:
        con.close()
    os.replace(tmp, db_path)


@dataclass
class _Index:
    root: CutlassRoot
    path: Path
    build_s: float | None  # set when this process built it
    files: int
    local: threading.local

    def con(self) -> sqlite3.Connection:
        c = getattr(self.local, "con", None)
        if c is None:
            c = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, check_same_thread=False)
            self.local.con = c
        return c


_index_lock = threading.Lock()
_indexes: dict[tuple[str, str], _Index] = {}


def open_index(settings: Settings | None = None) -> tuple[_Index, bool]:
    """The index of the configured CUTLASS root, built on first use (then cached on disk and in this
    process). Returns (index, built_now)."""
    s = ensure_dirs(settings)
    root = require(s)
    with _index_lock:
        key = (str(root.root), str(s.home))
        idx = _indexes.get(key)
        if idx is not None:
            return idx, False
        files = _source_files(root)
        if not files:
            raise NotAvailable("Searching CUTLASS", f"no source files were found under {root.root}",
                               f"check the CUTLASS root; {CUTLASS_FIX}")
        folder = s.cache_dir / "cutlass" / _index_key(root, files)
        db_path = folder / "index.sqlite"
        built = False
        build_s: float | None = None
        if not db_path.is_file():
            folder.mkdir(parents=True, exist_ok=True)
            t0 = time.perf_counter()
            _build(db_path, root, files)
            build_s = time.perf_counter() - t0
            built = True
        idx = _Index(root=root, path=db_path, build_s=build_s, files=len(files), local=threading.local())
        _indexes[key] = idx
        return idx, built


# ------------------------------------------------------------------------------------ searching
Kind = Literal["any", "definitions", "text"]
Scope = Literal["all", "include", "examples"]
_KIND_WEIGHT = {"class": 6, "struct": 6, "union": 5, "enum": 5, "alias": 5, "typedef": 4, "function": 4, "macro": 3}


def _scope_ok(path: str, scope: Scope) -> bool:
    return scope == "all" or path.startswith(scope + "/")


def _symbol_name(query: str) -> str | None:
    """The name a query asks for when it is one (possibly qualified) identifier: cute::make_tensor -> make_tensor."""
    q = query.strip()
    if not re.fullmatch(r"(?:[A-Za-z_]\w*::)*~?[A-Za-z_]\w*", q):
        return None
    return q.rsplit("::", 1)[-1]


def _find_all(text: str, word: str) -> Iterable[int]:
    """Offsets of ``word`` in ``text``, case-insensitively. ASCII text (nearly all of CUTLASS) is
    lower-cased and searched with str.find, ten times faster than a re.IGNORECASE scan."""
    w = word.lower()
    if text.isascii():
        if not w.isascii():
            return  # nothing non-ASCII in this file to match
        low = text.lower()
        pos = low.find(w)
        while pos >= 0:
            yield pos
            pos = low.find(w, pos + 1)
    else:
        for m in re.finditer(re.escape(word), text, re.I):
            yield m.start()


def search(query: str, *, limit: int = 20, kind: Kind = "any", scope: Scope = "all",
           settings: Settings | None = None) -> CutlassSearchResult:
    """Definitions and text matches of ``query`` in the CUTLASS sources, best first."""
    if not isinstance(query, str) or not query.strip():
        raise InputError("The query is empty: give a symbol (make_tma_copy, SM90_TMA_LOAD, cute::Layout) or words "
                         "to find (e.g. 'warpgroup_wait').")
    query = query.strip()
    if len(query) > 200 or "\x00" in query or not query.isprintable():
        raise InputError("The query must be printable text of at most 200 characters.")
    if not 1 <= limit <= MAX_LIMIT:
        raise InputError(f"limit must be between 1 and {MAX_LIMIT}.")
    t0 = time.perf_counter()
    idx, built = open_index(settings)
    con = idx.con()
    paths = {fid: (p, w) for fid, p, w in con.execute("SELECT id, path, weight FROM files")}

    scored: list[tuple[tuple, tuple[str, int, str, str | None, str]]] = []  # (rank key, hit fields)
    seen: set[tuple[str, int]] = set()
    definitions = 0
    name = _symbol_name(query)
    if name is not None and kind != "text":
        lname = name.lower()
        rows = con.execute("SELECT name, kind, file_id, line, snippet FROM symbols WHERE lname LIKE ? ESCAPE '\\'",
                           ("%" + lname.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%",))
        for sym, skind, fid, line, snippet in rows:
            path, weight = paths[fid]
            if not _scope_ok(path, scope):
                continue
            if sym == name:
                rank = 4
            elif sym.lower() == lname:
                rank = 3
            elif sym.lower().startswith(lname):
                rank = 2
            else:
                rank = 1
            definitions += 1
            seen.add((path, line))
            key = (0, -rank, -weight, -_KIND_WEIGHT.get(skind, 0), len(sym), path, line)
            scored.append((key, (path, line, skind, sym, snippet)))

    text_matches = 0
    capped = False
    searched = 0
    if kind != "definitions":
        words = query.split()
        parts = _query_parts(query)
        candidates: set[int] | None = None
        for part in parts:
            row = con.execute("SELECT file_ids FROM postings WHERE term = ?", (part,)).fetchone()
            if row is None:
                continue  # not a whole identifier part anywhere: do not narrow on it
            ids = set(array("I", row[0]))
            candidates = ids if candidates is None else candidates & ids
        if candidates is None:
            candidates = set(paths)
        order = sorted((fid for fid in candidates if _scope_ok(paths[fid][0], scope)),
                       key=lambda f: (-paths[f][1], paths[f][0]))
        first = words[0]
        rest = [w.lower() for w in words[1:]]
        exact = re.compile(re.escape(query))
        word_re = re.compile(r"(?<![A-Za-z0-9_])" + re.escape(query) + r"(?![A-Za-z0-9_])", re.I)
        for start in range(0, len(order), 200):
            if capped:
                break
            chunk = order[start: start + 200]
            marks = ",".join("?" * len(chunk))
            for fid, text in con.execute(f"SELECT id, text FROM files WHERE id IN ({marks})", chunk):
                searched += 1
                path, weight = paths[fid]
                lines: _Lines | None = None
                last_line = -1
                for pos in _find_all(text, first):
                    if lines is None:
                        lines = _Lines(text)
                    ln = lines.line(pos)
                    if ln == last_line:
                        continue
                    last_line = ln
                    line_text = _line_text(text, lines, ln)
                    low = line_text.lower()
                    if rest and not all(w in low for w in rest):
                        continue
                    text_matches += 1
                    if text_matches >= MAX_TEXT_MATCHES:
                        capped = True
                        break
                    if (path, ln) in seen:
                        continue
                    bonus = (2 if exact.search(line_text) else 0) + (1 if word_re.search(line_text) else 0)
                    key = (1, -bonus, -weight, path, ln)
                    scored.append((key, (path, ln, "text", None, line_text)))
                if capped:
                    break

    best = heapq.nsmallest(limit, scored, key=lambda kh: kh[0])
    hits = [CutlassHit(path=p, line=ln, kind=k, symbol=sym,  # type: ignore[arg-type]
                       snippet=sn if k != "text" else _snippet(sn)) for _, (p, ln, k, sym, sn) in best]
    return CutlassSearchResult(
        query=query, root=str(idx.root.root), version=idx.root.version, hits=hits, definitions=definitions,
        text_matches=text_matches, text_matches_capped=capped, truncated=len(scored) > limit,
        searched_files=searched, index_built=built,
        index_build_s=round(idx.build_s, 3) if built and idx.build_s else None,
        query_ms=round((time.perf_counter() - t0) * 1000, 2),
    )


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
