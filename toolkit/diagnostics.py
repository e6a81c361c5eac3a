"""What nvcc, cudafe, ptxas, nvlink and the host compiler print, parsed: diagnostics (with cudafe's
template instantiation chains trimmed to what the reader acts on), the first error made readable,
and ptxas' ``-v`` resource report per function. Pure text in, data models out; used by ``compile``.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from kernelscope.models import Diagnostic, KernelResources

__all__ = [
    "first_error_text", "is_user_file", "parse_diagnostics", "parse_ptxas_report", "shorten_signature",
    "trim_instantiation",
]

# --------------------------------------------------------------------------------------- parsing
_CUDAFE = re.compile(
    r"^(?P<file>[^\s(][^(]*?)\((?P<line>\d+)\): (?P<sev>catastrophic error|error|warning|remark)"
    r"(?: #[\w\-]+)?: (?P<msg>.*)$"
)
_GCC = re.compile(
    r"^(?P<file>[^\s:][^:]*):(?P<line>\d+):(?:(?P<col>\d+):)? (?P<sev>fatal error|error|warning|note): (?P<msg>.*)$"
)
_PTXAS = re.compile(r"^ptxas(?: (?P<file>\S+?), line (?P<line>\d+);)? ?(?P<sev>fatal|error|warning)\s*: (?P<msg>.*)$")
_NVLINK = re.compile(r"^nvlink (?P<sev>fatal|error|warning)\s*: (?P<msg>.*)$")
_NVCC = re.compile(r"^nvcc (?P<sev>fatal|error|warning)\s*: (?P<msg>.*)$")


# cudafe's instantiation context: 'detected during:' then one frame per line, or one
# 'detected during instantiation of "..." at line N of FILE' line.
_FRAME_LINE = re.compile(r'^(?:detected during )?(?P<what>.+?) at line (?P<line>\d+) of (?P<file>.+)$')
_NOT_SHOWN = re.compile(r"^\[\s*(?P<n>\d+) instantiation contexts? not shown\s*\]$")
MAX_FRAME_CHARS = 240


def shorten_signature(text: str, limit: int = MAX_FRAME_CHARS) -> str:
    """A template signature made readable: no cute:: prefixes, collapsed spaces, and a long
    '[with ...]' binding list cut in the middle."""
    t = " ".join(text.replace("cute::", "").split())
    if len(t) <= limit:
        return t
    head, sep, bindings = t.partition(" [with ")
    if sep and len(head) < limit - 40:
        room = limit - len(head) - len(sep) - 5
        return f"{head}{sep}{bindings[:room]} ...]"
    return t[: limit - 5] + " ..."


def _frame(raw: str, rename: dict[str, str]) -> tuple[str, str, int] | None:
    m = _FRAME_LINE.match(raw)
    if not m:
        return None
    what = m["what"].strip()
    sig = re.sub(r'^(?:instantiation of (?:class )?|processing of template argument list for )"(.*)"$', r"\1", what)
    file = m["file"].strip()
    return shorten_signature(sig), rename.get(file, file), int(m["line"])


def is_user_file(file: str) -> bool:
    return not file.startswith(("/", "<"))


def trim_instantiation(frames: list[tuple[str, str, int]], is_user: Callable[[str], bool] = is_user_file,
                       hidden: int = 0) -> list[str]:
    """The chain (innermost first) trimmed to what the reader acts on: the innermost frame (which
    library template failed), every frame in the user's own files, and the outermost one; runs of
    library frames in between become one '... N frames in library headers ...' line."""
    keep = {0, len(frames) - 1} | {i for i, (_, f, _) in enumerate(frames) if is_user(f)}
    out: list[str] = []
    skipped = 0
    for i, (sig, file, line) in enumerate(frames):
        if i not in keep:
            skipped += 1
            continue
        if skipped:
            out.append(f"... {skipped} frame(s) in library headers ...")
            skipped = 0
        out.append(f"{file}:{line} instantiates {sig}")
    if hidden:
        out.append(f"... {hidden} more context(s) the compiler did not show ...")
    return out


def first_error_text(diags: list[Diagnostic], source_lines: dict[str, list[str]] | None = None,
                     is_user: Callable[[str], bool] = is_user_file) -> str | None:
    """The first error, readable: where, what, the echoed source line, the innermost place in the
    user's code that led there, and the trimmed chain."""
    err = next((d for d in diags if d.severity in ("error", "fatal")), None)
    if err is None:
        return None
    loc = f"{err.file}:{err.line}" if err.file and err.line else (err.file or err.tool)
    msg_lines = err.message.splitlines()
    out = [f"{err.severity} at {loc}: {msg_lines[0]}"]
    out += [f"    {x}" for x in msg_lines[1:3]]
    user = next((f for f in err.instantiation
                 if " instantiates " in f and is_user(f.partition(" instantiates ")[0].rpartition(":")[0])), None)
    if user is not None and not (err.file and is_user(err.file)):
        where, _, what = user.partition(" instantiates ")
        file, _, line = where.rpartition(":")
        out.append(f"  from your code at {where}: {what}")
        src = (source_lines or {}).get(file)
        if src and line.isdigit() and 0 < int(line) <= len(src):
            out.append(f"    {src[int(line) - 1].strip()[:200]}")
    if err.instantiation:
        out.append(f"  instantiation chain (innermost first; {err.instantiation_depth} frame(s), the raw log has them "
                   "all):")
        out += [f"    {f}" for f in err.instantiation]
    more = sum(d.severity in ("error", "fatal") for d in diags) - 1
    if more:
        out.append(f"  (+{more} more error(s), often the same cause repeated: fix this one first)")
    return "\n".join(out)


def _header(line: str, rename: dict[str, str]) -> tuple[Diagnostic, int] | None:
    """A diagnostic's first line -> (the diagnostic, continuation lines counted as used: 0 lets up
    to four follow, 99 none), or None for any other line."""
    if m := _CUDAFE.match(line):
        sev = "fatal" if m["sev"] == "catastrophic error" else m["sev"]
        return Diagnostic(file=rename.get(m["file"], m["file"]), line=int(m["line"]),
                          severity=sev, message=m["msg"].strip(), tool="nvcc"), 0  # type: ignore[arg-type]
    if m := _PTXAS.match(line):
        return Diagnostic(file=None, line=None, severity=m["sev"], message=m["msg"].strip(), tool="ptxas"), 99
    if m := _NVLINK.match(line):
        return Diagnostic(severity=m["sev"], message=m["msg"].strip(), tool="nvlink"), 99
    if m := _NVCC.match(line):
        return Diagnostic(severity=m["sev"], message=m["msg"].strip(), tool="nvcc"), 99
    m = _GCC.match(line)
    if m and not line.startswith("ptxas"):
        sev = "fatal" if m["sev"] == "fatal error" else m["sev"]
        return Diagnostic(file=rename.get(m["file"], m["file"]), line=int(m["line"]),
                          column=int(m["col"]) if m["col"] else None, severity=sev,  # type: ignore[arg-type]
                          message=m["msg"].strip(), tool="host"), 0
    return None


class _DiagnosticReader:
    """The state of :func:`parse_diagnostics` over the log's lines."""

    def __init__(self, rename: dict[str, str], is_user: Callable[[str], bool]) -> None:
        self.rename, self.is_user = rename, is_user
        self.diags: list[Diagnostic] = []
        self.extra_lines = 0
        self.frames: list[tuple[str, str, int]] = []
        self.hidden = 0
        self.in_chain = False

    def close_chain(self) -> None:
        if self.diags and self.frames:
            self.diags[-1].instantiation = trim_instantiation(self.frames, self.is_user, self.hidden)
            self.diags[-1].instantiation_depth = len(self.frames) + self.hidden
        self.frames, self.hidden, self.in_chain = [], 0, False

    def _chain_line(self, raw: str, stripped: str) -> bool:
        """Takes a line of cudafe's instantiation context; False for any other line."""
        if self.diags and stripped == "detected during:":
            self.in_chain = True
            return True
        if self.diags and (self.in_chain or stripped.startswith("detected during ")) and raw.startswith(" "):
            if (fr := _frame(stripped, self.rename)) is not None:
                self.frames.append(fr)
                return True
            if (nm := _NOT_SHOWN.match(stripped)) is not None:
                self.hidden += int(nm["n"])
                return True
        return False

    def feed(self, raw: str) -> None:
        line = raw.rstrip()
        if self._chain_line(raw, line.strip()):
            return
        if self.in_chain or self.frames:
            self.close_chain()
        if not line:
            self.extra_lines = 99
            return
        if (head := _header(line, self.rename)) is not None:
            self.diags.append(head[0])
            self.extra_lines = head[1]
            return
        if self.diags and self.extra_lines < 4 and raw.startswith(" ") and "ptxas info" not in line:
            text = line.strip()
            if text and set(text) != {"^"}:
                self.diags[-1].message += "\n" + text
            self.extra_lines += 1


def parse_diagnostics(log: str, *, rename: dict[str, str] | None = None,
                      is_user: Callable[[str], bool] = is_user_file) -> list[Diagnostic]:
    """Compiler output -> diagnostics. Continuation lines (the echoed source line, the caret) are
    appended to the previous message, a few at most; cudafe's 'detected during' instantiation
    context becomes the diagnostic's trimmed ``instantiation`` chain."""
    reader = _DiagnosticReader(rename or {}, is_user)
    for raw in log.splitlines():
        reader.feed(raw)
    reader.close_chain()
    return reader.diags


_ENTRY = re.compile(r"Compiling entry function '(?P<name>[^']+)' for '(?P<arch>[^']+)'")
_PROPS = re.compile(r"Function properties for (?P<name>\S+)")
_FRAME = re.compile(
    r"(?P<stack>\d+) bytes stack frame, (?P<st>\d+) bytes spill stores, (?P<ld>\d+) bytes spill loads"
)
_USED = re.compile(r"Used (?P<regs>\d+) registers")
_BARRIERS = re.compile(r"used (?P<n>\d+) barriers")
_SMEM = re.compile(r"(?P<n>\d+) bytes smem")
_CMEM = re.compile(r"(?P<n>\d+) bytes cmem\[0\]")
_LMEM = re.compile(r"(?P<n>\d+) bytes lmem")


def parse_ptxas_report(log: str) -> list[KernelResources]:
    """The ``ptxas -v`` report -> one entry per function (entry kernels and device functions)."""
    funcs: dict[str, KernelResources] = {}
    current: KernelResources | None = None
    entries: set[str] = set()
    arch_of: dict[str, str] = {}
    for line in log.splitlines():
        m = _ENTRY.search(line)
        if m:
            entries.add(m["name"])
            arch_of[m["name"]] = m["arch"]
            current = funcs.setdefault(m["name"], KernelResources(name=m["name"], mangled_name=m["name"]))
            continue
        m = _PROPS.search(line)
        if m:
            current = funcs.setdefault(m["name"], KernelResources(name=m["name"], mangled_name=m["name"]))
            continue
        if current is None:
            continue
        m = _FRAME.search(line)
        if m:
            current.stack_bytes = int(m["stack"])
            current.spill_stores_bytes = int(m["st"])
            current.spill_loads_bytes = int(m["ld"])
            continue
        m = _USED.search(line)
        if m:
            current.registers = int(m["regs"])
            if b := _BARRIERS.search(line):
                current.barriers = int(b["n"])
            current.shared_bytes = int(s["n"]) if (s := _SMEM.search(line)) else 0
            if c := _CMEM.search(line):
                current.constant_bytes = int(c["n"])
            current.local_bytes = int(lm["n"]) if (lm := _LMEM.search(line)) else None
    for name, k in funcs.items():
        k.is_entry = name in entries
        k.arch = arch_of.get(name)
    return list(funcs.values())
