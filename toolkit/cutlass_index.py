"""A search index over the CUTLASS/CuTe sources (headers, examples, util headers), and its queries.

The index is built once per CUTLASS root and cached under ``<cache>/cutlass/<key>/`` (the key hashes
the root's path, its version and the names, sizes and modification times of the files it indexes)
as a SQLite file (standard library only):

- ``files``: each indexed file's text (headers, examples, the util headers);
- ``symbols``: definitions found by patterns over the text: classes, structs, unions, enums, aliases
  (``using X =``), typedefs, macros and function definitions (a name followed by ``(`` whose
  statement opens a body before any ``;``);
- ``postings``: for each lower-case identifier and each of its parts (split at ``_`` and camelCase),
  the files that contain it, so a text query reads only the files that can match.

:func:`find_definitions` and :func:`find_text` return ranked hits: definitions of the name (exact,
then case-insensitive, prefix, substring) above plain text matches, and ``include/`` above
``examples/`` above ``tools/``. The ``search_cutlass`` verb (:mod:`kernelscope.tools.cutlass`)
validates the query, merges and bounds them.
"""

from __future__ import annotations

import bisect
import hashlib
import os
import re
import sqlite3
import threading
import time
from array import array
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Literal

from kernelscope.errors import NotAvailable
from kernelscope.toolkit.cutlass_headers import AREAS, CUTLASS_FIX, CutlassRoot

INDEX_FORMAT = "3"  # bump when extraction or the schema changes
TEXT_SUFFIXES = {".h", ".hpp", ".hh", ".cuh", ".cu", ".cpp", ".cc", ".inl", ".inc", ".md", ".txt", ".py"}
MAX_INDEXED_FILE_BYTES = 4 << 20
MAX_TEXT_MATCHES = 5000
SNIPPET_CHARS = 200


# ------------------------------------------------------------------------------------ extraction
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


class Lines:
    """Offset -> 1-based line number for one text."""

    def __init__(self, text: str) -> None:
        self.starts = [0] + [m.end() for m in re.finditer("\n", text)]

    def line(self, offset: int) -> int:
        return bisect.bisect_right(self.starts, offset)


def _line_text(text: str, lines: Lines, lineno: int) -> str:
    start = lines.starts[lineno - 1]
    end = text.find("\n", start)
    return text[start: end if end >= 0 else len(text)]


def snippet(line: str) -> str:
    s = " ".join(line.strip().split())
    return s if len(s) <= SNIPPET_CHARS else s[: SNIPPET_CHARS - 3] + "..."


def extract_symbols(text: str) -> list[tuple[str, str, int, str]]:
    """Definitions in a C++ text: (name, kind, line, snippet)."""
    lines = Lines(text)
    out: list[tuple[str, str, int, str]] = []
    seen: set[tuple[str, int]] = set()

    def add(name: str, kind: str, offset: int) -> None:
        ln = lines.line(offset)
        if (name, ln) in seen:
            return
        seen.add((name, ln))
        out.append((name, kind, ln, snippet(_line_text(text, lines, ln))))

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


# ------------------------------------------------------------------------------------ the index
@dataclass
class Index:
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

    def paths(self) -> dict[int, tuple[str, int]]:
        """File id -> (path relative to the root, area weight)."""
        return {fid: (p, w) for fid, p, w in self.con().execute("SELECT id, path, weight FROM files")}


_index_lock = threading.Lock()
_indexes: dict[tuple[str, str], Index] = {}


def open_index(root: CutlassRoot, cache_dir: Path) -> tuple[Index, bool]:
    """The index of ``root``, built on first use (then cached on disk under ``cache_dir`` and in this
    process). Returns (index, built_now)."""
    with _index_lock:
        key = (str(root.root), str(cache_dir))
        idx = _indexes.get(key)
        if idx is not None:
            return idx, False
        files = _source_files(root)
        if not files:
            raise NotAvailable("Searching CUTLASS", f"no source files were found under {root.root}",
                               f"check the CUTLASS root; {CUTLASS_FIX}")
        folder = cache_dir / "cutlass" / _index_key(root, files)
        db_path = folder / "index.sqlite"
        built = False
        build_s: float | None = None
        if not db_path.is_file():
            folder.mkdir(parents=True, exist_ok=True)
            t0 = time.perf_counter()
            _build(db_path, root, files)
            build_s = time.perf_counter() - t0
            built = True
        idx = Index(root=root, path=db_path, build_s=build_s, files=len(files), local=threading.local())
        _indexes[key] = idx
        return idx, built


def reset_cache() -> None:
    with _index_lock:
        _indexes.clear()


# ------------------------------------------------------------------------------------ queries
Scope = Literal["all", "include", "examples"]
Hit = tuple[str, int, str, str | None, str]  # path, line, kind, symbol, snippet (the line for text hits)
Ranked = tuple[tuple, Hit]  # (rank key: smaller is better, hit)
_KIND_WEIGHT = {"class": 6, "struct": 6, "union": 5, "enum": 5, "alias": 5, "typedef": 4, "function": 4, "macro": 3}


def scope_ok(path: str, scope: Scope) -> bool:
    return scope == "all" or path.startswith(scope + "/")


def find_definitions(idx: Index, name: str, scope: Scope, paths: dict[int, tuple[str, int]]) -> list[Ranked]:
    """Definitions whose name contains ``name`` (case-insensitively): exact, then case-insensitive,
    prefix and substring matches; within each, include/ before examples/ and types before macros."""
    lname = name.lower()
    rows = idx.con().execute(
        "SELECT name, kind, file_id, line, snippet FROM symbols WHERE lname LIKE ? ESCAPE '\\'",
        ("%" + lname.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%",))
    out: list[Ranked] = []
    for sym, skind, fid, line, snip in rows:
        path, weight = paths[fid]
        if not scope_ok(path, scope):
            continue
        if sym == name:
            rank = 4
        elif sym.lower() == lname:
            rank = 3
        elif sym.lower().startswith(lname):
            rank = 2
        else:
            rank = 1
        key = (0, -rank, -weight, -_KIND_WEIGHT.get(skind, 0), len(sym), path, line)
        out.append((key, (path, line, skind, sym, snip)))
    return out


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


@dataclass
class TextScan:
    """Text matches of one query: the ranked hits (lines already shown as definitions are counted,
    not repeated), how many lines matched (stops at :data:`MAX_TEXT_MATCHES`) and files read."""

    query: str
    skip: set[tuple[str, int]]
    hits: list[Ranked] = field(default_factory=list)
    matches: int = 0
    capped: bool = False
    searched: int = 0
    first: str = field(init=False)
    rest: list[str] = field(init=False)
    exact: re.Pattern[str] = field(init=False)
    word_re: re.Pattern[str] = field(init=False)

    def __post_init__(self) -> None:
        words = self.query.split()
        self.first = words[0]
        self.rest = [w.lower() for w in words[1:]]
        self.exact = re.compile(re.escape(self.query))
        self.word_re = re.compile(r"(?<![A-Za-z0-9_])" + re.escape(self.query) + r"(?![A-Za-z0-9_])", re.I)

    def scan_file(self, text: str, path: str, weight: int) -> None:
        """Every line of ``text`` holding all the query's words (the first as the anchor)."""
        self.searched += 1
        lines: Lines | None = None
        last_line = -1
        for pos in _find_all(text, self.first):
            if lines is None:
                lines = Lines(text)
            ln = lines.line(pos)
            if ln == last_line:
                continue
            last_line = ln
            shown = _line_text(text, lines, ln)
            low = shown.lower()
            if self.rest and not all(w in low for w in self.rest):
                continue
            self.matches += 1
            if self.matches >= MAX_TEXT_MATCHES:
                self.capped = True
                return
            if (path, ln) in self.skip:
                continue
            bonus = (2 if self.exact.search(shown) else 0) + (1 if self.word_re.search(shown) else 0)
            self.hits.append(((1, -bonus, -weight, path, ln), (path, ln, "text", None, shown)))


def _candidate_files(con: sqlite3.Connection, query: str, paths: dict[int, tuple[str, int]],
                     scope: Scope) -> list[int]:
    """The files that hold every identifier part of the query (parts found nowhere do not narrow),
    in scope, best area first."""
    candidates: set[int] | None = None
    for part in _query_parts(query):
        row = con.execute("SELECT file_ids FROM postings WHERE term = ?", (part,)).fetchone()
        if row is None:
            continue  # not a whole identifier part anywhere: do not narrow on it
        ids = set(array("I", row[0]))
        candidates = ids if candidates is None else candidates & ids
    if candidates is None:
        candidates = set(paths)
    return sorted((fid for fid in candidates if scope_ok(paths[fid][0], scope)),
                  key=lambda f: (-paths[f][1], paths[f][0]))


def find_text(idx: Index, query: str, scope: Scope, paths: dict[int, tuple[str, int]],
              skip: set[tuple[str, int]]) -> TextScan:
    """Lines that contain the query's words, reading only the files its identifiers can be in."""
    con = idx.con()
    scan = TextScan(query=query, skip=skip)
    order = _candidate_files(con, query, paths, scope)
    for start in range(0, len(order), 200):
        chunk = order[start: start + 200]
        marks = ",".join("?" * len(chunk))
        for fid, text in con.execute(f"SELECT id, text FROM files WHERE id IN ({marks})", chunk):
            path, weight = paths[fid]
            scan.scan_file(text, path, weight)
            if scan.capped:
                return scan
    return scan
