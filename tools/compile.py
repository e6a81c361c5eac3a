"""compile: CUDA C++ source -> cubin or executable, with parsed diagnostics and ptxas' resource report.

Builds run through the sandbox (own process group, time and output limits, minimal environment) with
flags from the allowlist only. Results are stored content-addressed: the id hashes the source (and
the local headers it includes), the flags, the arch, the output kind and the compiler version, so an
identical request is a cache hit and returns the stored result.
"""

from __future__ import annotations

import hashlib
import re
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from kernelscope.artifacts import ArtifactMeta, content_id, get_store
from kernelscope.config import Settings, ensure_dirs
from kernelscope.errors import InputError, NotAvailable
from kernelscope.heuristics.resources import resource_findings
from kernelscope.models import CompileResult, Diagnostic, KernelResources
from kernelscope.models.requests import CompileRequest
from kernelscope.sandbox.flags import arch_from_flags, check_nvcc_flags, has_arch_flag, normalize_arch
from kernelscope.sandbox.paths import PathRefused, resolve_user_path
from kernelscope.sandbox.process import Limits, build_env, run_process
from kernelscope.sandbox.workspace import Workspace
from kernelscope.toolchain import ToolMissing, demangle, require, tool_info
from kernelscope.tools import cutlass as cutlass_mod

_SAFE_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-]{0,63}\.(cu|cuh|cpp|cc)$")
LOG_LIMIT = 16_000


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


def _is_user_file(file: str) -> bool:
    return not file.startswith(("/", "<"))


def trim_instantiation(frames: list[tuple[str, str, int]], is_user: Callable[[str], bool] = _is_user_file,
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
                     is_user: Callable[[str], bool] = _is_user_file) -> str | None:
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


def parse_diagnostics(log: str, *, rename: dict[str, str] | None = None,
                      is_user: Callable[[str], bool] = _is_user_file) -> list[Diagnostic]:
    """Compiler output -> diagnostics. Continuation lines (the echoed source line, the caret) are
    appended to the previous message, a few at most; cudafe's 'detected during' instantiation
    context becomes the diagnostic's trimmed ``instantiation`` chain."""
    rename = rename or {}
    diags: list[Diagnostic] = []
    extra_lines = 0
    frames: list[tuple[str, str, int]] = []
    hidden = 0
    in_chain = False

    def close_chain() -> None:
        nonlocal frames, hidden, in_chain
        if diags and frames:
            diags[-1].instantiation = trim_instantiation(frames, is_user, hidden)
            diags[-1].instantiation_depth = len(frames) + hidden
        frames, hidden, in_chain = [], 0, False

    for raw in log.splitlines():
        line = raw.rstrip()
        stripped = line.strip()
        if diags and stripped == "detected during:":
            in_chain = True
            continue
        if diags and (in_chain or stripped.startswith("detected during ")) and raw.startswith(" "):
            if (fr := _frame(stripped, rename)) is not None:
                frames.append(fr)
                continue
            if (nm := _NOT_SHOWN.match(stripped)) is not None:
                hidden += int(nm["n"])
                continue
        if in_chain or frames:
            close_chain()
        if not line:
            extra_lines = 99
            continue
        m = _CUDAFE.match(line)
        if m:
            sev = m["sev"]
            diags.append(Diagnostic(
                file=rename.get(m["file"], m["file"]), line=int(m["line"]),
                severity="fatal" if sev == "catastrophic error" else sev,  # type: ignore[arg-type]
                message=m["msg"].strip(), tool="nvcc",
            ))
            extra_lines = 0
            continue
        m = _PTXAS.match(line)
        if m:
            diags.append(Diagnostic(file=None, line=None, severity=m["sev"], message=m["msg"].strip(), tool="ptxas"))
            extra_lines = 99
            continue
        m = _NVLINK.match(line)
        if m:
            diags.append(Diagnostic(severity=m["sev"], message=m["msg"].strip(), tool="nvlink"))
            extra_lines = 99
            continue
        m = _NVCC.match(line)
        if m:
            diags.append(Diagnostic(severity=m["sev"], message=m["msg"].strip(), tool="nvcc"))
            extra_lines = 99
            continue
        m = _GCC.match(line)
        if m and not line.startswith("ptxas"):
            sev = "fatal" if m["sev"] == "fatal error" else m["sev"]
            diags.append(Diagnostic(
                file=rename.get(m["file"], m["file"]), line=int(m["line"]),
                column=int(m["col"]) if m["col"] else None, severity=sev,  # type: ignore[arg-type]
                message=m["msg"].strip(), tool="host",
            ))
            extra_lines = 0
            continue
        if diags and extra_lines < 4 and raw.startswith(" ") and "ptxas info" not in line:
            text = line.strip()
            if text and set(text) != {"^"}:
                diags[-1].message += "\n" + text
            extra_lines += 1
    close_chain()
    return diags


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


# --------------------------------------------------------------------------------------- checks
_INCLUDE = re.compile(r'^\s*#\s*include\s*(?P<spec>.*)$', re.MULTILINE)


def check_includes(source: str, *, base_dir: Path | None, roots: list[Path]) -> list[Path]:
    """Refuse includes that could read files outside the allowed roots; return the local headers
    found (for the cache key). ``base_dir`` is the source file's folder (None for inline sources)."""
    local: list[Path] = []
    for m in _INCLUDE.finditer(source):
        spec = m["spec"].split("//")[0].strip()
        qm = re.match(r'^"([^"]+)"|^<([^>]+)>', spec)
        if not qm:
            raise InputError(
                f"#include {spec[:60]!r}: only #include \"file\" and #include <file> forms are accepted "
                "(computed includes are refused)."
            )
        name = qm.group(1) or qm.group(2)
        parts = Path(name).parts
        if qm.group(2) is not None:  # <...>: system headers only
            if name.startswith("/") or ".." in parts:
                raise InputError(f"#include <{name}> refused: system includes may not be absolute or contain '..'.")
            continue
        if base_dir is None:
            if name.startswith("/") or ".." in parts:
                raise InputError(
                    f'#include "{name}" refused: an inline source may include only system headers and '
                    "headers by plain name; compile a file under an allowed root to use local headers."
                )
            continue
        try:
            found = resolve_user_path(str(base_dir / name), roots, must_exist=True)
        except PathRefused as e:
            if "No such file" in str(e):
                continue  # maybe a toolkit header given with quotes: nvcc will say if it is missing
            raise InputError(f'#include "{name}" refused: {e}') from None
        local.append(found)
    return local


# Source text that uses sm_90a-only instructions through CuTe/CUTLASS (wgmma, setmaxnreg).
_SM90A_HINT = re.compile(r"\b(?:GMMA|wgmma|warpgroup_(?:arrive|wait|commit_batch)|SM90_\d+x\d+x\d+_\w+|"
                         r"KernelTmaWarpSpecialized\w*|setmaxnreg|warpgroup_reg_(?:alloc|dealloc))\b")


def _cutlass_flags(flags: list[str], arch: str, *, explicit_arch: bool, source: str,
                   notes: list[str]) -> tuple[list[str], str]:
    """What compiling against CUTLASS needs: C++17 or newer, --expt-relaxed-constexpr, and the
    arch-specific sm_90a target for Hopper (CuTe compiles its wgmma/TMA paths only for sm_90a and
    turns them into a run-time trap on plain sm_90)."""
    out = list(flags)
    stds = [f.partition("=")[2] for f in out if f.partition("=")[0] in ("-std", "--std")]
    if any(v in ("c++11", "c++14") for v in stds):
        raise InputError(f"CUTLASS needs C++17 or newer; -std={stds[0]} was given: use -std=c++17 or -std=c++20.")
    if not stds:
        out.append("-std=c++17")
        notes.append("added -std=c++17 (CUTLASS 3+/CuTe need C++17; pass -std=c++20 to use that instead)")
    if "--expt-relaxed-constexpr" not in out:
        out.append("--expt-relaxed-constexpr")
        notes.append("added --expt-relaxed-constexpr (CuTe calls constexpr host functions from device code)")
    if arch == "sm_90":
        if not explicit_arch:
            if has_arch_flag(out):  # e.g. -gencode naming compute_90 only: leave the user's choice alone
                return out, arch
            notes.append("target sm_90 -> sm_90a: Hopper's wgmma, TMA multicast and setmaxnreg exist only in the "
                         "arch-specific target; sm_90a cubins run on H100/H200 only. Pass arch='sm_90' explicitly "
                         "for a portable sm_90 build without them")
            return out, "sm_90a"
        if _SM90A_HINT.search(source):
            notes.append("WARNING: compiled for sm_90 as asked, but the source uses wgmma/GMMA or setmaxnreg, which "
                         "CuTe compiles only for sm_90a: on sm_90 those paths become a trap at run time. Use "
                         "arch='sm_90a'")
    return out, arch


def _has_main(source: str) -> bool:
    return re.search(r"\bint\s+main\s*\(", source) is not None


def _default_arch() -> str:
    try:
        from kernelscope.tools.capabilities import default_arch, gpu_inventory

        return default_arch(gpu_inventory()[0])
    except Exception:
        return "sm_90"


_default_arch_cache: dict[str, str] = {}
_arch_lock = threading.Lock()


def local_default_arch() -> str:
    with _arch_lock:
        if "arch" not in _default_arch_cache:
            _default_arch_cache["arch"] = _default_arch()
        return _default_arch_cache["arch"]


# --------------------------------------------------------------------------------------- compile
def compile_cuda(req: CompileRequest, settings: Settings | None = None,
                 cancel: threading.Event | None = None) -> CompileResult:
    s = ensure_dirs(settings)
    # ---- the source
    if (req.source is None) == (req.path is None):
        raise InputError("Give exactly one of `source` (the CUDA text) or `path` (a .cu file under an allowed root).")
    base_dir: Path | None = None
    if req.path is not None:
        src_path = resolve_user_path(req.path, s.allowed_roots)
        if not src_path.is_file():
            raise InputError(f"{req.path!r} is not a regular file.")
        size = src_path.stat().st_size
        if size > s.max_source_bytes:
            raise InputError(f"{req.path!r} is {size} bytes; sources are limited to {s.max_source_bytes} bytes.")
        raw = src_path.read_bytes()
        filename = src_path.name
        base_dir = src_path.parent
    else:
        assert req.source is not None
        raw = req.source.encode("utf-8", errors="surrogatepass")
        if len(raw) > s.max_source_bytes:
            raise InputError(f"The source is {len(raw)} bytes; sources are limited to {s.max_source_bytes} bytes.")
        filename = req.filename
    if not _SAFE_NAME.match(filename):
        raise InputError(
            f"File name {filename!r} refused: use letters, digits, '_', '.', '-' and a .cu/.cuh/.cpp suffix."
        )
    if b"\x00" in raw:
        raise InputError("The source contains NUL bytes: it looks binary, not CUDA C++ text.")
    try:
        source = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputError(f"The source is not valid UTF-8 (byte {e.start}).") from None
    if not source.strip():
        raise InputError("The source is empty.")
    headers = check_includes(source, base_dir=base_dir, roots=s.allowed_roots)

    # ---- flags and arch
    flags = check_nvcc_flags(req.flags)
    named = arch_from_flags(flags)
    if req.arch is not None:
        arch = normalize_arch(req.arch)
        if named is not None and named != arch:
            raise InputError(f"arch={arch} conflicts with the flags, which target {named}: give one of them.")
    else:
        arch = named or local_default_arch()
    notes: list[str] = []
    cutlass_root = None
    if req.cutlass:
        cutlass_root = cutlass_mod.require(s)
        shown_incs = ", ".join(cutlass_mod.shorten_paths(f, cutlass_root)
                               for f in cutlass_mod.compile_flags(cutlass_root))
        notes.append(f"CUTLASS {cutlass_root.version or '(version unknown)'} from "
                     f"{'KERNELSCOPE_CUTLASS_ROOT' if cutlass_root.origin == 'env' else 'the nvidia-cutlass wheel'}: "
                     f"added {shown_incs}")
        flags, arch = _cutlass_flags(flags, arch, explicit_arch=req.arch is not None or named is not None,
                                     source=source, notes=notes)
    kind: Literal["cubin", "executable"]
    kind = ("executable" if _has_main(source) else "cubin") if req.output == "auto" else req.output
    if kind == "cubin" and any(f.startswith("-l") for f in flags):
        raise InputError("Library flags (-l...) only make sense for executables; set output='executable'.")

    try:
        nvcc = require("nvcc")
    except ToolMissing as e:
        raise NotAvailable("Compiling CUDA", "nvcc was not found", e.note) from None
    compiler_version = tool_info("nvcc").version or "unknown"

    cmd_flags = list(flags)
    if not has_arch_flag(cmd_flags):
        cmd_flags.insert(0, f"-arch={arch}")
    if req.lineinfo and "-lineinfo" not in cmd_flags and "--generate-line-info" not in cmd_flags \
            and "-G" not in cmd_flags:
        cmd_flags.append("-lineinfo")
    if "-Xptxas=-v" not in cmd_flags:
        cmd_flags.append("-Xptxas=-v")

    header_hashes = {str(h): hashlib.sha256(h.read_bytes()).hexdigest() for h in sorted(set(headers))}
    key = {
        "source": hashlib.sha256(raw).hexdigest(), "filename": filename, "headers": header_hashes,
        "flags": cmd_flags, "arch": arch, "kind": kind, "compiler": compiler_version, "nvcc": str(nvcc),
    }
    if cutlass_root is not None:
        key["cutlass"] = cutlass_mod.headers_fingerprint(cutlass_root)
    aid = content_id(key)
    store = get_store()
    cached = store.get(aid)
    if cached is not None and "result" in cached.meta.extra:
        res = CompileResult.model_validate(cached.meta.extra["result"])
        res.cache_hit = True
        return res

    out_name = "kernel.cubin" if kind == "cubin" else "program"
    with Workspace(prefix="compile-") as ws:
        (ws.path / filename).write_bytes(raw)
        argv = [str(nvcc), *cmd_flags]
        if kind == "cubin":
            argv.append("-cubin")
        if base_dir is not None:
            argv.append(f"-I{base_dir}")
        if cutlass_root is not None:
            argv += cutlass_mod.compile_flags(cutlass_root)
        argv += ["-o", out_name, filename]
        t0 = time.monotonic()
        r = run_process(argv, cwd=ws.path, cancel=cancel, env=build_env(home=ws.path),
                        limits=Limits(wall_s=s.compile_timeout_s, output_bytes=s.max_output_bytes,
                                      file_size_bytes=s.max_binary_bytes * 8))
        elapsed = time.monotonic() - t0
        log = (r.stdout + ("\n" if r.stdout and r.stderr else "") + r.stderr).replace(str(ws.path) + "/", "")
        if r.timed_out:
            log += f"\nkernelscope: the compiler was stopped after {s.compile_timeout_s:.0f} s."
        if r.cancelled:
            log += "\nkernelscope: the compile was cancelled."
        if cutlass_root is not None:
            log = cutlass_mod.shorten_paths(log, cutlass_root)
        shown_name = req.path or filename
        user_dir = f"{base_dir}/" if base_dir is not None else None

        def is_user(file: str) -> bool:  # the source and the headers next to it, not library headers
            return file == shown_name or _is_user_file(file) or (user_dir is not None and file.startswith(user_dir))

        diags = parse_diagnostics(log, rename={filename: shown_name}, is_user=is_user)
        kernels = parse_ptxas_report(log)
        names = demangle([k.mangled_name for k in kernels])
        for k in kernels:
            k.name = names.get(k.mangled_name, k.mangled_name)
        out_path = ws.path / out_name
        success = r.ok and out_path.is_file()
        if not success and not any(d.severity in ("error", "fatal") for d in diags):
            diags.append(Diagnostic(severity="error", tool="nvcc", message=f"nvcc {r.describe_failure()}"))
        shown_cmd = ["nvcc", *argv[1:]]
        if base_dir is not None:
            shown_cmd = [a if a != f"-I{base_dir}" else "-I<source dir>" for a in shown_cmd]
        if cutlass_root is not None:
            shown_cmd = [cutlass_mod.shorten_paths(a, cutlass_root) for a in shown_cmd]
        result = CompileResult(
            success=success,
            artifact_id=aid if success else None,
            kind=kind,
            arch=arch,
            command=shown_cmd,
            compiler_version=compiler_version,
            compile_time_s=round(elapsed, 3),
            diagnostics=diags,
            error_count=sum(d.severity in ("error", "fatal") for d in diags),
            warning_count=sum(d.severity == "warning" for d in diags),
            kernels=kernels,
            findings=resource_findings(kernels, arch=arch) if success else [],
            log=log[:LOG_LIMIT],
            log_truncated=len(log) > LOG_LIMIT or r.stdout_truncated or r.stderr_truncated,
            first_error=first_error_text(diags, {shown_name: source.splitlines()}, is_user),
            notes=notes,
        )
        if success:
            meta = ArtifactMeta(
                id=aid, kind=kind, arch=arch, source_name=req.path or filename, flags=cmd_flags,
                compiler_version=compiler_version,
                extra={"result": result.model_dump(mode="json"), "lineinfo": "-lineinfo" in cmd_flags},
            )
            store.put(meta, {
                "source": (filename, raw),
                kind: (out_name, out_path),
                "compile-log": ("compile.log", log.encode()),
            })
        return result
