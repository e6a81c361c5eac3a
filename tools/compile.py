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
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from kernelscope.config import Settings, ensure_dirs
from kernelscope.errors import InputError, NotAvailable
from kernelscope.heuristics.resources import resource_findings
from kernelscope.models import CompileResult, Diagnostic, KernelResources
from kernelscope.sandbox.flags import arch_from_flags, check_nvcc_flags, has_arch_flag, normalize_arch
from kernelscope.sandbox.paths import PathRefused, resolve_user_path
from kernelscope.sandbox.process import Limits, build_env, run_process
from kernelscope.sandbox.workspace import Workspace
from kernelscope.tools.artifacts import ArtifactMeta, content_id, get_store
from kernelscope.tools.toolchain import ToolMissing, demangle, require, tool_info

OutputKind = Literal["auto", "cubin", "executable"]
_SAFE_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-]{0,63}\.(cu|cuh|cpp|cc)$")
LOG_LIMIT = 16_000


class CompileRequest(BaseModel):
    source: str | None = Field(None, description="CUDA C++ source text.")
    path: str | None = Field(None, description="A .cu file under the server's allowed roots (instead of source).")
    arch: str | None = Field(None, description="Target, e.g. sm_90 or sm_90a. Default: the local GPU's, else sm_90.")
    flags: list[str] = Field(default_factory=list, description="Extra nvcc flags (allowlisted).")
    output: OutputKind = Field("auto", description="cubin, executable, or auto (executable if it defines main).")
    lineinfo: bool = Field(True, description="Add -lineinfo so SASS and profiles map to source lines.")
    filename: str = Field("kernel.cu", description="Name the inline source is compiled under (shown in diagnostics).")


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


def parse_diagnostics(log: str, *, rename: dict[str, str] | None = None) -> list[Diagnostic]:
    """Compiler output -> diagnostics. Continuation lines (the echoed source line, the caret,
    'detected during instantiation of ...') are appended to the previous message, a few at most."""
    rename = rename or {}
    diags: list[Diagnostic] = []
    extra_lines = 0
    for raw in log.splitlines():
        line = raw.rstrip()
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
    if req.arch is not None:
        arch = normalize_arch(req.arch)
        named = arch_from_flags(flags)
        if named is not None and named != arch:
            raise InputError(f"arch={arch} conflicts with the flags, which target {named}: give one of them.")
    else:
        arch = arch_from_flags(flags) or local_default_arch()
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
    aid = content_id({
        "source": hashlib.sha256(raw).hexdigest(), "filename": filename, "headers": header_hashes,
        "flags": cmd_flags, "arch": arch, "kind": kind, "compiler": compiler_version, "nvcc": str(nvcc),
    })
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
        diags = parse_diagnostics(log, rename={filename: req.path or filename})
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
            shown_cmd = [a if not a.startswith("-I") else "-I<source dir>" for a in shown_cmd]
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
