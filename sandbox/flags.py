"""Compiler flag allowlist. Anything not listed is refused with the reason, so a client (or an LLM)
cannot add output paths, include directories, host-compiler pass-through, response files or plugins.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from kernelscope.errors import InputError

_ARCH = r"(?:sm|compute|lto)_\d{2,3}[af]?"
_MACRO = r"[A-Za-z_][A-Za-z0-9_]{0,63}"
_MACRO_VALUE = r"[A-Za-z0-9_.+\-*/()<>]{0,64}"

# Flags that stand alone.
_SINGLE = {
    "-O0", "-O1", "-O2", "-O3", "-lineinfo", "--generate-line-info", "-G", "--device-debug",
    "-use_fast_math", "--use_fast_math", "--extra-device-vectorization", "-extra-device-vectorization",
    "--expt-relaxed-constexpr", "--expt-extended-lambda", "--extended-lambda", "-restrict", "--restrict",
    "-Xptxas=-v", "--resource-usage", "-res-usage", "-w", "--disable-warnings", "-src-in-ptx",
    "-rdc=false", "--relocatable-device-code=false", "--keep-device-functions",
}
# Flags of the form -name=value, with a pattern for the value.
_VALUED: dict[str, re.Pattern[str]] = {
    "-arch": re.compile(rf"^{_ARCH}$|^native$|^all$|^all-major$"),
    "--gpu-architecture": re.compile(rf"^{_ARCH}$"),
    "-code": re.compile(rf"^{_ARCH}(,{_ARCH})*$"),
    "--gpu-code": re.compile(rf"^{_ARCH}(,{_ARCH})*$"),
    "-gencode": re.compile(rf"^arch={_ARCH},code=\[?{_ARCH}(,{_ARCH})*\]?$"),
    "--generate-code": re.compile(rf"^arch={_ARCH},code=\[?{_ARCH}(,{_ARCH})*\]?$"),
    "-maxrregcount": re.compile(r"^\d{1,3}$"),
    "--maxrregcount": re.compile(r"^\d{1,3}$"),
    "-std": re.compile(r"^c\+\+(11|14|17|20)$"),
    "--std": re.compile(r"^c\+\+(11|14|17|20)$"),
    "--ftz": re.compile(r"^(true|false)$"),
    "-ftz": re.compile(r"^(true|false)$"),
    "--prec-div": re.compile(r"^(true|false)$"),
    "-prec-div": re.compile(r"^(true|false)$"),
    "--prec-sqrt": re.compile(r"^(true|false)$"),
    "-prec-sqrt": re.compile(r"^(true|false)$"),
    "--fmad": re.compile(r"^(true|false)$"),
    "-fmad": re.compile(r"^(true|false)$"),
    "--default-stream": re.compile(r"^(legacy|per-thread|null)$"),
    "-default-stream": re.compile(r"^(legacy|per-thread|null)$"),
    "--split-compile": re.compile(r"^\d{1,2}$"),
    "-split-compile": re.compile(r"^\d{1,2}$"),
    "--threads": re.compile(r"^\d{1,2}$"),
    "-t": re.compile(r"^\d{1,2}$"),
}
# Options for ptxas passed through -Xptxas.
_PTXAS_OPTS = re.compile(r"^(-v|--verbose|-O[0-3]|--warn-on-spills|--warn-on-local-memory-usage|"
                         r"--warn-on-double-precision-use|-dlcm=(ca|cg)|-dscm=(wb|cg|cs|wt)|"
                         r"--allow-expensive-optimizations=(true|false))$")
# Libraries an executable may link: the only library flags (-l<name>) accepted. Other nvcc options
# spelled with -l (-lineinfo, -lto, -ltoir, -lib, -link, -ldir) are not libraries: -lineinfo is in
# _SINGLE, the others are refused like any flag off the allowlist.
LIBRARY_FLAGS = frozenset({"-lcublas", "-lcublasLt", "-lcurand", "-lcufft", "-lcusparse", "-lcusolver", "-lcuda",
                           "-lnvrtc", "-lnvToolsExt", "-lcudart", "-lm"})
_DEFINE = re.compile(rf"^-D{_MACRO}(={_MACRO_VALUE})?$")
_UNDEFINE = re.compile(rf"^-U{_MACRO}$")


def _refuse(flag: str, why: str) -> InputError:
    shown = flag if len(flag) <= 80 else flag[:77] + "..."
    return InputError(f"Compiler flag {shown!r} refused: {why}. Allowed: -O0..-O3, -arch=sm_XX, -gencode "
                      "arch=compute_XX,code=sm_XX, -lineinfo, -use_fast_math, -maxrregcount=N, -DNAME[=VALUE], "
                      "-std=c++17|20, --extra-device-vectorization, -Xptxas -v|-O3|-dlcm=..., --ftz/--prec-div/"
                      "--prec-sqrt/--fmad=true|false, -l<cuda lib>.")


def check_nvcc_flags(flags: Sequence[str], *, max_flags: int = 64) -> list[str]:
    """Validate ``flags`` against the allowlist and return them normalised to ``-name=value`` form
    (``-Xptxas`` values as ``-Xptxas=-v``). Raises ``InputError`` naming the first bad flag."""
    if len(flags) > max_flags:
        raise InputError(f"{len(flags)} compiler flags given; at most {max_flags} are accepted.")
    out: list[str] = []
    i = 0
    items = list(flags)
    while i < len(items):
        flag = items[i]
        if not isinstance(flag, str):
            raise InputError(f"Compiler flags must be strings, got {type(flag).__name__}.")
        flag = flag.strip()
        i += 1
        if not flag:
            continue
        if any(c.isspace() for c in flag) and not flag.startswith(("-gencode ", "--generate-code ")):
            raise _refuse(flag, "flags must not contain whitespace (give each flag as its own list item)")
        if "\x00" in flag or not flag.isprintable():
            raise _refuse(flag, "it contains control characters")
        if flag in _SINGLE:
            out.append(flag)
            continue
        if flag in LIBRARY_FLAGS:
            out.append(flag)
            continue
        if _DEFINE.match(flag) or _UNDEFINE.match(flag):
            out.append(flag)
            continue
        if flag in ("-Xptxas", "--ptxas-options"):
            if i >= len(items):
                raise _refuse(flag, "it needs a value, e.g. -Xptxas -v")
            values, i = items[i].strip(), i + 1
            out.extend(_ptxas(flag, values))
            continue
        if flag.startswith(("-Xptxas=", "--ptxas-options=")):
            out.extend(_ptxas(flag, flag.split("=", 1)[1]))
            continue
        name, eq, value = flag.partition("=")
        if not eq and " " in flag:  # "-gencode arch=...,code=..." given as one item
            name, _, value = flag.partition(" ")
            eq = "="
        if not eq and name in _VALUED:
            if i >= len(items):
                raise _refuse(flag, "it needs a value")
            value, i = items[i].strip(), i + 1
            eq = "="
        if eq and name in _VALUED:
            if not _VALUED[name].match(value):
                shown = flag if value in flag else f"{name} {value}"
                raise _refuse(shown, f"{value!r} is not a valid value for {name}")
            if name in ("-maxrregcount", "--maxrregcount") and not 16 <= int(value) <= 255:
                raise _refuse(f"{name}={value}", "the register limit must be between 16 and 255")
            out.append(f"{name}={value}")
            continue
        raise _refuse(flag, _refusal_reason(flag, name))
    return out


# Options that name paths, options files or pass-through to the host compiler and linker.
_PATH_OPTIONS = frozenset({
    "-o", "--output-file", "-odir", "--output-directory", "-I", "--include-path", "-isystem", "-include",
    "--pre-include", "-L", "--library-path", "-ldir", "--libdevice-directory", "-ccbin", "--compiler-bindir",
    "-Xcompiler", "--compiler-options", "-Xlinker", "--linker-options", "-optf", "--options-file", "-Xnvlink",
    "--keep-dir", "-keep", "--keep",
})


def _refusal_reason(flag: str, name: str) -> str:
    if name in _PATH_OPTIONS or flag.startswith(("-I", "-L", "-o", "@")):
        return ("output paths, include/library paths, options files and host-compiler pass-through are "
                "controlled by kernelscope")
    return "it is not on the allowlist"


def is_library_flag(flag: str) -> bool:
    """Whether a normalised flag links a library (``-lcublas``), which only an executable can use.
    ``-lineinfo`` and nvcc's other ``-l...`` options (``-lto``, ``-lib``, ...) are not libraries."""
    return flag in LIBRARY_FLAGS


def _ptxas(flag: str, values: str) -> list[str]:
    out = []
    for v in values.split(","):
        v = v.strip()
        if not _PTXAS_OPTS.match(v):
            raise _refuse(f"{flag} {v}", "that ptxas option is not on the allowlist")
        out.append(f"-Xptxas={v}")
    return out


def arch_from_flags(flags: Sequence[str]) -> str | None:
    """The real (sm_) architecture named by normalised flags, if any."""
    for f in flags:
        name, _, value = f.partition("=")
        if name in ("-arch", "--gpu-architecture") and value.startswith("sm_"):
            return value
        if name in ("-gencode", "--generate-code"):
            m = re.search(r"code=\[?(sm_\d{2,3}[af]?)", value)
            if m:
                return m.group(1)
        if name in ("-code", "--gpu-code"):
            m = re.search(r"(sm_\d{2,3}[af]?)", value)
            if m:
                return m.group(1)
    return None


def has_arch_flag(flags: Sequence[str]) -> bool:
    return any(f.partition("=")[0] in ("-arch", "--gpu-architecture", "-gencode", "--generate-code", "-code",
                                       "--gpu-code") for f in flags)


def normalize_arch(arch: str) -> str:
    """'sm_90', '90', '9.0', 'sm90', 'compute_90', 'sm_90a' -> 'sm_90' / 'sm_90a'."""
    a = arch.strip().lower().replace("sm", "").replace("compute", "").lstrip("_")
    m = re.fullmatch(r"(\d)\.(\d)([af]?)", a)
    if m:
        a = m.group(1) + m.group(2) + m.group(3)
    if not re.fullmatch(r"\d{2,3}[af]?", a):
        raise InputError(
            f"{arch!r} is not a GPU architecture: use the form sm_90 (H100), sm_90a (H100 with wgmma/TMA), "
            "sm_80 (A100), sm_89 (L40S/RTX 4090), sm_100 ..."
        )
    return f"sm_{a}"


__all__ = [
    "LIBRARY_FLAGS", "arch_from_flags", "check_nvcc_flags", "has_arch_flag", "is_library_flag", "normalize_arch",
]
