"""Kernels' instructions by offset: the SASS that the CUPTI collector's per-instruction records (PC offsets in
the function) are read against, so the default path derives per source line what Nsight Compute's reader
derives from the SASS (spin-waits, chained and indexed loads, an atomic's own sectors, deferred barrier waits).

Two sources: a compiled artifact's own listing (a program), and the cubins the collector wrote beside its
output, each the module a deep launch ran from as the driver loaded it (any target: a ``load_inline``
extension, an NVRTC or CuPy kernel, a Triton kernel, a library's). The profiled program could write into that
folder too, so a cubin is read only by its own name, never through a link, within a size limit, and copied
into a private workspace before it is disassembled; a map whose offsets do not cover a kernel's records is
not used (:func:`covering`).
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterable, Mapping
from pathlib import Path

from kernelscope.artifacts import get_store
from kernelscope.measure.collector import Collected
from kernelscope.sandbox.workspace import Workspace
from kernelscope.toolkit.elf import restore_elf_size
from kernelscope.tools.sass import (
    _INSTRUCTION,
    _LABEL,
    EM_CUDA,
    _header,
    _listing_for,
    disassemble,
    elf_machine,
)

CUBIN_NAME = re.compile(r"cubin-[0-9a-f]{16}\.cubin")  # the collector's names (native/cupti_metrics.cpp)
CUBIN_MAX_BYTES = 64 << 20  # the collector writes none larger
MAX_CUBINS = 16  # one per deep launch at most (the collector's KERNELSCOPE_DEEP_MAX)

_LABEL_REF = re.compile(r"`\((?P<label>[^)]+)\)")
SassMaps = dict[str, dict[int, str]]


def instructions_by_offset(listing: str) -> SassMaps:
    """Every kernel's instructions by their offset in the function: mangled name -> offset -> SASS text
    (predicate, opcode and operands, as Nsight Compute prints an instruction), with nvdisasm's branch labels
    (`` `(.L_x_3)``) replaced by the offset they name, so measure.sourcemap can follow the branches. The first
    listing of a name wins where a fatbin holds several architectures."""
    out: SassMaps = {}
    cur: dict[int, str] | None = None
    labels: dict[str, int] = {}
    pending: list[str] = []

    def close() -> None:
        if cur is not None:
            for addr, text in cur.items():
                cur[addr] = _LABEL_REF.sub(lambda m: hex(labels[m.group("label")]) if m.group("label") in labels
                                           else m.group(0), text)

    for line in listing.splitlines():
        if (name := _header(line)) is not None:
            close()
            cur = None
            if name and name not in out:  # a kernel's code, listed for the first architecture
                cur = out[name] = {}
            labels, pending = {}, []
            continue
        if cur is None:
            continue
        if (m := _INSTRUCTION.match(line)) is not None:
            addr = int(m.group("addr"), 16)
            cur[addr] = " ".join(m.group("body").split())
            labels.update(dict.fromkeys(pending, addr))
            pending = []
        elif (m := _LABEL.match(line)) is not None:
            pending.append(m.group("label"))
    close()
    return out


def instruction_maps(artifact_id: str) -> SassMaps:
    """``instructions_by_offset`` of a stored artifact's listing (cached in it)."""
    _, listing = _listing_for(get_store().require(artifact_id), interleave_source=False)
    return instructions_by_offset(listing)


def _read_own_file(folder: Path, name: str, max_bytes: int) -> bytes | None:
    """The bytes of the regular file ``name`` directly in ``folder``, opened without following a link; None
    where the name is not the collector's, or the file is missing, a link, not regular, or too large."""
    if not CUBIN_NAME.fullmatch(name):
        return None
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(folder / name, flags)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > max_bytes:
            return None
        with os.fdopen(fd, "rb", closefd=False) as f:
            data = f.read(max_bytes + 1)
        return data if len(data) <= max_bytes else None
    except OSError:
        return None
    finally:
        os.close(fd)


def ran_instructions(folder: Path, cubins: Mapping[str, str]) -> SassMaps:
    """The instructions of the kernels in ``cubins`` (mangled name -> the collector's cubin file in
    ``folder``), each from the module it ran from. A cubin that cannot be read or disassembled gives nothing."""
    files: dict[str, list[str]] = {}
    for kernel, name in cubins.items():
        if name:
            files.setdefault(name, []).append(kernel)
    out: SassMaps = {}
    for name, kernels in list(files.items())[:MAX_CUBINS]:
        data = _read_own_file(folder, name, CUBIN_MAX_BYTES)
        if data is None or elf_machine(data[:64]) != EM_CUDA:
            continue
        try:
            with Workspace(prefix="ran-sass-") as ws:  # a private copy: the program's folder is not read again
                path = ws.path / "kernel.cubin"
                path.write_bytes(restore_elf_size(data))
                maps = instructions_by_offset(disassemble(path))
        except Exception:  # extra evidence: the counters still stand without it
            continue
        out.update({k: maps[k] for k in kernels if k in maps})
    return out


def covering(maps: Mapping[str, Mapping[int, str]], records: Mapping[str, Iterable[int]]) -> SassMaps:
    """The maps whose instructions include every PC offset the collector recorded for that kernel
    (``records``: mangled name -> offsets): another build of the same name would name other instructions."""
    out: SassMaps = {}
    for kernel, offsets in records.items():
        m = maps.get(kernel)
        if m and all(pc in m for pc in offsets):
            out[kernel] = dict(m)
    return out


def run_instructions(folder: Path, got: Collected, static: Mapping[str, Mapping[int, str]]) -> SassMaps:
    """Each deep kernel of a collector run's instructions by offset: from the module it ran from (the
    collector's copy in ``folder``), else from ``static`` (a compiled artifact's listing); only where they
    include every offset the run recorded for that kernel."""
    maps = ran_instructions(folder, {src.name: src.cubin for src in got.sources if src.cubin})
    for kernel, m in static.items():
        maps.setdefault(kernel, dict(m))
    records: dict[str, set[int]] = {}
    for src in got.sources:
        records.setdefault(src.name, set()).update(pc.pc for pc in src.pcs)
    return covering(maps, records)
