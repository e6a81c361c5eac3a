"""compile: CUDA C++ source -> cubin or executable, with parsed diagnostics and ptxas' resource report.

One request goes through these steps: resolve the source (inline or a file under an allowed root,
its includes checked), choose the target (allowlisted flags, arch, output kind, CUTLASS), look the
build up in the store, run nvcc in a workspace, parse its output (:mod:`kernelscope.toolkit.diagnostics`),
add the resource findings and store the artifact.

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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from kernelscope.artifacts import ArtifactMeta, content_id, get_store
from kernelscope.config import Settings, ensure_dirs
from kernelscope.errors import InputError, NotAvailable
from kernelscope.heuristics.resources import resource_findings
from kernelscope.models import CompileResult, Diagnostic, KernelResources
from kernelscope.models.requests import CompileRequest
from kernelscope.sandbox.flags import (
    arch_from_flags,
    check_nvcc_flags,
    has_arch_flag,
    is_library_flag,
    normalize_arch,
)
from kernelscope.sandbox.paths import PathRefused, resolve_user_path
from kernelscope.sandbox.process import Limits, ProcessResult, build_env, run_process
from kernelscope.sandbox.workspace import Workspace
from kernelscope.toolkit.cutlass_headers import CutlassRoot, compile_flags, headers_fingerprint, shorten_paths
from kernelscope.toolkit.diagnostics import first_error_text, is_user_file, parse_diagnostics, parse_ptxas_report
from kernelscope.toolkit.probes import local_default_arch
from kernelscope.toolkit.toolchain import ToolMissing, demangle, require, tool_info
from kernelscope.tools import cutlass as cutlass_tool

__all__ = ["CompileRequest", "check_includes", "compile_cuda", "local_default_arch"]

_SAFE_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-]{0,63}\.(cu|cuh|cpp|cc)$")
LOG_LIMIT = 16_000




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



# --------------------------------------------------------------------------------------- the steps
@dataclass
class _Source:
    """The source to compile: its bytes and text, the name nvcc sees, the name shown to the client,
    its folder (files given by path) and the local headers it includes (for the cache key)."""

    raw: bytes
    text: str
    filename: str
    shown_name: str
    base_dir: Path | None
    headers: list[Path]

    def is_user(self, file: str) -> bool:
        """The source and the headers next to it, not library headers."""
        user_dir = f"{self.base_dir}/" if self.base_dir is not None else None
        return file == self.shown_name or is_user_file(file) or (user_dir is not None and file.startswith(user_dir))


def _read_path(path: str, s: Settings) -> tuple[bytes, str, Path]:
    src_path = resolve_user_path(path, s.allowed_roots)
    if not src_path.is_file():
        raise InputError(f"{path!r} is not a regular file.")
    size = src_path.stat().st_size
    if size > s.max_source_bytes:
        raise InputError(f"{path!r} is {size} bytes; sources are limited to {s.max_source_bytes} bytes.")
    return src_path.read_bytes(), src_path.name, src_path.parent


def _resolve_source(req: CompileRequest, s: Settings) -> _Source:
    """The inline source or the file, checked: size, name, text (UTF-8, no NUL) and includes."""
    if (req.source is None) == (req.path is None):
        raise InputError("Give exactly one of `source` (the CUDA text) or `path` (a .cu file under an allowed root).")
    base_dir: Path | None = None
    if req.path is not None:
        raw, filename, base_dir = _read_path(req.path, s)
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
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputError(f"The source is not valid UTF-8 (byte {e.start}).") from None
    if not text.strip():
        raise InputError("The source is empty.")
    headers = check_includes(text, base_dir=base_dir, roots=s.allowed_roots)
    return _Source(raw=raw, text=text, filename=filename, shown_name=req.path or filename, base_dir=base_dir,
                   headers=headers)


@dataclass
class _Target:
    """What to build: the nvcc flags (checked, with the arch, -lineinfo and -Xptxas=-v added), the
    arch, the output kind, the CUTLASS root when compiling against it, and notes for the client."""

    flags: list[str]
    arch: str
    kind: Literal["cubin", "executable"]
    cutlass_root: CutlassRoot | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def out_name(self) -> str:
        return "kernel.cubin" if self.kind == "cubin" else "program"


def _cutlass_note(root: CutlassRoot) -> str:
    shown_incs = ", ".join(shorten_paths(f, root) for f in compile_flags(root))
    where = "KERNELSCOPE_CUTLASS_ROOT" if root.origin == "env" else "the nvidia-cutlass wheel"
    return f"CUTLASS {root.version or '(version unknown)'} from {where}: added {shown_incs}"


def _choose_target(req: CompileRequest, source: str, s: Settings) -> _Target:
    """Flags, arch and output kind from the request (and CUTLASS's needs when it asks for them)."""
    flags = check_nvcc_flags(req.flags)
    named = arch_from_flags(flags)
    if req.arch is not None:
        arch = normalize_arch(req.arch)
        if named is not None and named != arch:
            raise InputError(f"arch={arch} conflicts with the flags, which target {named}: give one of them.")
    else:
        arch = named or local_default_arch()
    notes: list[str] = []
    root = None
    if req.cutlass:
        root = cutlass_tool.require(s)
        notes.append(_cutlass_note(root))
        flags, arch = _cutlass_flags(flags, arch, explicit_arch=req.arch is not None or named is not None,
                                     source=source, notes=notes)
    kind: Literal["cubin", "executable"]
    kind = ("executable" if _has_main(source) else "cubin") if req.output == "auto" else req.output
    if kind == "cubin" and any(is_library_flag(f) for f in flags):
        raise InputError("Library flags (-l...) only make sense for executables; set output='executable'.")
    return _Target(flags=_command_flags(flags, arch, lineinfo=req.lineinfo), arch=arch, kind=kind,
                   cutlass_root=root, notes=notes)


def _command_flags(flags: list[str], arch: str, *, lineinfo: bool) -> list[str]:
    out = list(flags)
    if not has_arch_flag(out):
        out.insert(0, f"-arch={arch}")
    if lineinfo and "-lineinfo" not in out and "--generate-line-info" not in out and "-G" not in out:
        out.append("-lineinfo")
    if "-Xptxas=-v" not in out:
        out.append("-Xptxas=-v")
    return out


def _cache_key(src: _Source, target: _Target, compiler_version: str, nvcc: Path) -> str:
    """The content address: source, local headers, flags, arch, kind, compiler (and CUTLASS headers)."""
    header_hashes = {str(h): hashlib.sha256(h.read_bytes()).hexdigest() for h in sorted(set(src.headers))}
    key = {
        "source": hashlib.sha256(src.raw).hexdigest(), "filename": src.filename, "headers": header_hashes,
        "flags": target.flags, "arch": target.arch, "kind": target.kind, "compiler": compiler_version,
        "nvcc": str(nvcc),
    }
    if target.cutlass_root is not None:
        key["cutlass"] = headers_fingerprint(target.cutlass_root)
    return content_id(key)


def _argv(nvcc: Path, src: _Source, target: _Target) -> list[str]:
    argv = [str(nvcc), *target.flags]
    if target.kind == "cubin":
        argv.append("-cubin")
    if src.base_dir is not None:
        argv.append(f"-I{src.base_dir}")
    if target.cutlass_root is not None:
        argv += compile_flags(target.cutlass_root)
    return [*argv, "-o", target.out_name, src.filename]


def _shown_command(argv: list[str], src: _Source, target: _Target) -> list[str]:
    """The command as the client sees it: no machine paths."""
    shown = ["nvcc", *argv[1:]]
    if src.base_dir is not None:
        shown = [a if a != f"-I{src.base_dir}" else "-I<source dir>" for a in shown]
    if target.cutlass_root is not None:
        shown = [shorten_paths(a, target.cutlass_root) for a in shown]
    return shown


@dataclass
class _Build:
    """One nvcc run: its result, the combined log (workspace paths removed) and its duration."""

    proc: ProcessResult
    log: str
    elapsed_s: float


def _run_nvcc(argv: list[str], ws: Workspace, target: _Target, s: Settings,
              cancel: threading.Event | None) -> _Build:
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
    if target.cutlass_root is not None:
        log = shorten_paths(log, target.cutlass_root)
    return _Build(proc=r, log=log, elapsed_s=elapsed)


def _parse_build(build: _Build, src: _Source, success: bool) -> tuple[list[Diagnostic], list[KernelResources]]:
    """Diagnostics (a failure without any gets one) and ptxas' per-function resources, demangled."""
    diags = parse_diagnostics(build.log, rename={src.filename: src.shown_name}, is_user=src.is_user)
    kernels = parse_ptxas_report(build.log)
    names = demangle([k.mangled_name for k in kernels])
    for k in kernels:
        k.name = names.get(k.mangled_name, k.mangled_name)
    if not success and not any(d.severity in ("error", "fatal") for d in diags):
        diags.append(Diagnostic(severity="error", tool="nvcc", message=f"nvcc {build.proc.describe_failure()}"))
    return diags, kernels


def _result(build: _Build, src: _Source, target: _Target, *, aid: str, success: bool, command: list[str],
            compiler_version: str) -> CompileResult:
    diags, kernels = _parse_build(build, src, success)
    r = build.proc
    return CompileResult(
        success=success,
        artifact_id=aid if success else None,
        kind=target.kind,
        arch=target.arch,
        command=command,
        compiler_version=compiler_version,
        compile_time_s=round(build.elapsed_s, 3),
        diagnostics=diags,
        error_count=sum(d.severity in ("error", "fatal") for d in diags),
        warning_count=sum(d.severity == "warning" for d in diags),
        kernels=kernels,
        findings=resource_findings(kernels, arch=target.arch) if success else [],
        log=build.log[:LOG_LIMIT],
        log_truncated=len(build.log) > LOG_LIMIT or r.stdout_truncated or r.stderr_truncated,
        first_error=first_error_text(diags, {src.shown_name: src.text.splitlines()}, src.is_user),
        notes=target.notes,
    )


def _store(result: CompileResult, src: _Source, target: _Target, build: _Build, out_path: Path) -> None:
    assert result.artifact_id is not None
    meta = ArtifactMeta(
        id=result.artifact_id, kind=target.kind, arch=target.arch, source_name=src.shown_name, flags=target.flags,
        compiler_version=result.compiler_version,
        extra={"result": result.model_dump(mode="json"), "lineinfo": "-lineinfo" in target.flags},
    )
    get_store().put(meta, {
        "source": (src.filename, src.raw),
        target.kind: (target.out_name, out_path),
        "compile-log": ("compile.log", build.log.encode()),
    })


def _find_nvcc() -> tuple[Path, str]:
    try:
        nvcc = require("nvcc")
    except ToolMissing as e:
        raise NotAvailable("Compiling CUDA", "nvcc was not found", e.note) from None
    return nvcc, tool_info("nvcc").version or "unknown"


# --------------------------------------------------------------------------------------- compile
def compile_cuda(req: CompileRequest, settings: Settings | None = None,
                 cancel: threading.Event | None = None) -> CompileResult:
    """Resolve the source, choose flags and arch, answer from the store when the same build was
    done before, else run nvcc in a workspace, parse what it printed and store the artifact."""
    s = ensure_dirs(settings)
    src = _resolve_source(req, s)
    target = _choose_target(req, src.text, s)
    nvcc, compiler_version = _find_nvcc()
    aid = _cache_key(src, target, compiler_version, nvcc)
    cached = get_store().get(aid)
    if cached is not None and "result" in cached.meta.extra:
        res = CompileResult.model_validate(cached.meta.extra["result"])
        res.cache_hit = True
        return res
    with Workspace(prefix="compile-") as ws:
        (ws.path / src.filename).write_bytes(src.raw)
        argv = _argv(nvcc, src, target)
        build = _run_nvcc(argv, ws, target, s, cancel)
        out_path = ws.path / target.out_name
        success = build.proc.ok and out_path.is_file()
        result = _result(build, src, target, aid=aid, success=success, command=_shown_command(argv, src, target),
                         compiler_version=compiler_version)
        if success:
            _store(result, src, target, build, out_path)
        return result
