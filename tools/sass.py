"""sass: disassemble a cubin or executable and turn its SASS into per-kernel statistics and findings.

A cubin is disassembled with ``nvdisasm`` (labels instead of addresses, and source lines with
``-gi`` when it was built with ``-lineinfo``); an executable has its embedded cubins extracted with
``cuobjdump -xelf`` first. ``cuobjdump -res-usage`` is appended to the listing so the parser can fill
registers and shared memory per kernel. The full listing is cached in the artifact as a derived file.

The statistics are static (each instruction counted once, whatever the trip count of its loop), so
the findings below speak of the code's make-up, not of where time goes; profiles answer that.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from kernelscope.artifacts import Artifact, ArtifactMeta, content_id, get_store
from kernelscope.config import get_settings
from kernelscope.errors import InputError, KernelscopeError, NotAvailable
from kernelscope.heuristics.instructions import sass_findings
from kernelscope.models import (
    InstructionClassCount,
    KernelSassStats,
    MemoryWidthStats,
    SassResult,
)
from kernelscope.sandbox.process import Limits, ProcessResult, build_env, run_process
from kernelscope.sandbox.workspace import Workspace
from kernelscope.toolkit.toolchain import ToolMissing, demangle, require

EM_CUDA = 190  # ELF e_machine of CUDA cubins
LISTING_MAX_BYTES = 64 << 20  # stdout kept from one disassembler run
MAX_EXCERPT_LINES = 5000
MAX_KERNEL_REGEX_CHARS = 500
MAX_NAMES_IN_ERROR = 30

# --------------------------------------------------------------------------------------- opcodes
_CLASS_MEMBERS: dict[str, tuple[str, ...]] = {
    "fp32": ("FADD", "FADD32I", "FADD2", "FCHK", "FCMP", "FFMA", "FFMA32I", "FFMA2", "FMNMX", "FMNMX3",
             "FMUL", "FMUL32I", "FMUL2", "FSEL", "FSET", "FSETP", "FSWZADD"),
    "fp16_bf16": ("HADD2", "HADD2_32I", "HFMA2", "HFMA2_32I", "HMUL2", "HMUL2_32I", "HMNMX2", "HSET2",
                  "HSETP2"),
    "fp64": ("DADD", "DFMA", "DMUL", "DMNMX", "DSET", "DSETP"),
    "integer": ("BFE", "BFI", "BMSK", "BREV", "FLO", "IABS", "IADD", "IADD3", "IADD32I", "IDP", "IMAD",
                "IMAD32I", "IMNMX", "IMUL", "IMUL32I", "ISCADD", "ISCADD32I", "ISET", "ISETP", "LEA", "LOP",
                "LOP3", "LOP32I", "P2R", "PLOP3", "POPC", "PRMT", "PSETP", "R2P", "SGXT", "SHF", "SHL", "SHR",
                "VABSDIFF", "VABSDIFF4", "VIADD", "VIADDMNMX", "VIMNMX", "VIMNMX3"),
    "conversion": ("F2F", "F2FP", "F2I", "F2IP", "FRND", "I2F", "I2FP", "I2I", "I2IP"),
    "special_function": ("MUFU",),
    "tensor": ("BMMA", "DMMA", "HMMA", "IMMA", "QMMA", "OMMA", "BGMMA", "HGMMA", "IGMMA", "QGMMA", "OGMMA",
               "LDTM", "STTM"),
    "global_load": ("LDG", "LD"),
    "global_store": ("STG", "ST"),
    "shared": ("LDS", "STS", "LDSM", "STSM", "ATOMS"),
    "local": ("LDL", "STL"),
    "constant": ("LDC", "ULDC"),
    "atomic": ("ATOM", "ATOMG", "RED", "REDG", "REDAS"),
    "sync": ("BAR", "BSYNC", "WARPSYNC", "MEMBAR", "DEPBAR", "ERRBAR", "FENCE", "WARPGROUP", "CCTL",
             "UCGABAR_ARV", "UCGABAR_WAIT"),
    "control": ("BRA", "BRX", "BRXU", "JMP", "JMX", "JMXU", "CALL", "RET", "EXIT", "BSSY", "BREAK", "BPT",
                "KILL", "NANOSLEEP", "YIELD", "BMOV", "RPCMOV"),
    "async": ("LDGSTS", "LDGDEPBAR", "ARRIVES", "SYNCS", "UTMALDG", "UTMASTG", "UTMAPF", "UTMACCTL",
              "UTMACMDFLUSH", "UTMAREDG", "UBLKCP", "UBLKRED", "UBLKPF"),
    "move": ("MOV", "MOV32I", "MOVM", "SEL", "S2R", "CS2R"),
    "warp": ("SHFL", "VOTE", "VOTEU", "MATCH", "REDUX", "ELECT"),
    "texture": ("TEX", "TEXS", "TLD", "TLDS", "TLD4", "TLD4S", "TMML", "TXD", "TXQ", "SULD", "SUST",
                "SUATOM", "SURED", "SUQUERY"),
    "uniform": ("S2UR", "R2UR"),
}
OPCODE_CLASS: dict[str, str] = {op: cls for cls, ops in _CLASS_MEMBERS.items() for op in ops}
_MMA_OPS = frozenset(op for op in _CLASS_MEMBERS["tensor"] if op.endswith("MMA"))
_ATOMIC_OPS = frozenset(("ATOM", "ATOMG", "ATOMS", "RED", "REDG", "REDAS"))
_WIDTH_MOD = re.compile(r"^[US]?(8|16|32|64|128|256)$")


def opcode_class(base: str) -> str:
    """The instruction class of a base opcode ('FFMA' -> 'fp32'); 'other' when unknown."""
    cls = OPCODE_CLASS.get(base)
    if cls is not None:
        return cls
    if base.startswith("UTC"):  # tcgen05 (sm_100): UTCHMMA, UTCQMMA, UTCBAR, UTCCP, ...
        return "tensor"
    if base.startswith("U"):
        return "uniform"
    return "other"


_MOVE_IDIOM = re.compile(r"^\S+, -RZ, RZ, ")  # HFMA2.MMA Rd, -RZ, RZ, imm, imm materializes a constant


def instruction_class(opcode: str, operands: str = "") -> str:
    """Like ``opcode_class`` for a full opcode, counting the compiler's move idioms (IMAD.MOV,
    HFMA2.MMA of constants) as moves."""
    base = opcode.split(".", 1)[0]
    if (base == "IMAD" and opcode.startswith("IMAD.MOV")) or (base == "HFMA2" and _MOVE_IDIOM.match(operands)):
        return "move"
    return opcode_class(base)


def is_mma(base: str) -> bool:
    return base in _MMA_OPS or (base.startswith("UTC") and "MMA" in base)


def access_width_bits(modifiers: Sequence[str]) -> int:
    """Access width of a load/store from its modifiers ('.128', '.U8', '.S16'); 32 when none."""
    for mod in modifiers:
        m = _WIDTH_MOD.match(mod)
        if m:
            return int(m.group(1))
    return 32


# --------------------------------------------------------------------------------------- tools
def _tool(name: str) -> Path:
    try:
        return require(name)
    except ToolMissing as e:
        raise NotAvailable("SASS disassembly", f"{name} was not found", e.note) from None


def _run(argv: list[str], cwd: Path) -> ProcessResult:
    limits = Limits(wall_s=get_settings().tool_timeout_s, output_bytes=LISTING_MAX_BYTES)
    return run_process(argv, cwd=cwd, limits=limits, env=build_env(home=cwd))


def _tool_message(r: ProcessResult, hide: Path | None = None) -> str:
    """The tool's own complaint, without the server's private folder ``hide`` in it."""
    text = (r.stderr.strip() or r.stdout.strip())[:500]
    if hide is not None:
        text = text.replace(f"{hide}/", "")
    return text or r.describe_failure()


def _check_ran(r: ProcessResult, tool: str) -> None:
    """Timeouts and crashes are the host's problem, not the input's."""
    if r.timed_out or r.cancelled or r.returncode is None or r.returncode < 0:
        raise KernelscopeError(f"{tool} did not finish: {r.describe_failure()}. {_tool_message(r)}")


def elf_machine(data: bytes) -> int | None:
    """ELF e_machine (190 for a CUDA cubin), or None when ``data`` does not start like an ELF file."""
    if len(data) < 20 or not data.startswith(b"\x7fELF"):
        return None
    order = "big" if data[5] == 2 else "little"
    return int.from_bytes(data[18:20], order)


def _nvdisasm(cubin: Path, cwd: Path, *, interleave_source: bool) -> str:
    argv = [str(_tool("nvdisasm")), "-c", *(["-gi"] if interleave_source else []), str(cubin)]
    r = _run(argv, cwd)
    _check_ran(r, "nvdisasm")
    if r.returncode != 0:
        raise InputError(f"nvdisasm rejected {cubin.name}: {_tool_message(r, cubin.parent)}")
    return r.stdout.rstrip() + "\n"


def _resource_usage(binary: Path, cwd: Path) -> str:
    """``cuobjdump -res-usage`` (registers, shared, stack per function); empty if it has nothing."""
    r = _run([str(_tool("cuobjdump")), "-res-usage", str(binary)], cwd)
    if not r.ok or "Function " not in r.stdout:
        return ""
    return "\n// ---- resource usage (cuobjdump -res-usage) ----\n" + r.stdout.strip() + "\n"


_ENCODING = re.compile(r"\s*/\* 0x[0-9a-f]+ \*/\s*$")


def _strip_encodings(text: str) -> str:
    """Drop the hex encodings ``cuobjdump -sass`` prints beside and below each instruction."""
    out: list[str] = []
    for line in text.splitlines():
        stripped = _ENCODING.sub("", line)
        if stripped.strip() or not line.strip():
            out.append(stripped)
    return "\n".join(out) + "\n"


def _function_names(listing: str) -> set[str]:
    return {b.mangled for b in _parse_blocks(listing.splitlines())[0]}


def disassemble(binary: Path, *, interleave_source: bool = False) -> str:
    """The SASS listing of a cubin or an executable, with the resource usage appended.

    ``interleave_source`` adds ``//## File "...", line N`` comments (needs a ``-lineinfo`` build)."""
    binary = Path(binary).resolve()
    try:
        with binary.open("rb") as f:
            head = f.read(64)
    except OSError as e:
        raise InputError(f"Cannot read {binary.name}: {e.strerror or e}") from None
    machine = elf_machine(head)
    if machine is None:
        raise InputError(f"{binary.name} is not an ELF file: expected a CUDA cubin or an executable.")
    with Workspace(prefix="sass-") as ws:
        if machine == EM_CUDA:
            return _nvdisasm(binary, ws.path, interleave_source=interleave_source) + _resource_usage(
                binary, ws.path
            )
        # A host program: disassemble the cubins embedded in its fatbin.
        r = _run([str(_tool("cuobjdump")), "-xelf", "all", str(binary)], ws.path)
        _check_ran(r, "cuobjdump")
        cubins = sorted(p for p in ws.path.glob("*.cubin") if p.is_file())
        usage = _resource_usage(binary, ws.path)
        if not cubins:
            raise InputError(
                f"{binary.name} contains no SASS (no embedded cubin; maybe only PTX, which the driver "
                "compiles at load time): build it with a real architecture, e.g. -arch=sm_90."
            )
        parts = [
            f"// ---- {p.name} ----\n" + _nvdisasm(p, ws.path, interleave_source=interleave_source)
            for p in cubins
        ]
        listing = "\n".join(parts) + usage
        # Embedded cubins can share a file name, so -xelf may have overwritten one with another;
        # if functions listed in the resource usage are missing, fall back to cuobjdump -sass.
        wanted = set(_RES_FUNCTION.findall(usage))
        if wanted - _function_names(listing):
            r = _run([str(_tool("cuobjdump")), "-sass", str(binary)], ws.path)
            _check_ran(r, "cuobjdump")
            if r.returncode != 0:
                raise InputError(
                    f"cuobjdump could not disassemble {binary.name}: {_tool_message(r, binary.parent)}"
                )
            listing = _strip_encodings(r.stdout) + usage
        return listing


# --------------------------------------------------------------------------------------- parsing
_SECTION = re.compile(r"^//-+\s+(?P<name>\S+)\s+-+\s*$")
_CUOBJ_FUNCTION = re.compile(r"^\s*Function : (?P<name>\S+)\s*$")
_TARGET = re.compile(r"^\s*(?:\.target\s+|code for |arch = )(?P<arch>sm_\w+)")
_RES_HEADER = re.compile(r"^\s*Resource usage:")
_RES_FUNCTION = re.compile(r"^\s*Function (\S+):\s*$", re.MULTILINE)
_RES_VALUES = re.compile(r"^\s*REG:(?P<reg>\d+)\b.*?\bSHARED:(?P<shared>\d+)")
_LABEL = re.compile(r"^\s*(?P<label>[A-Za-z_.$][\w.$]*):\s*$")
_LINE_INFO = re.compile(r'^\s*//## File "(?P<file>[^"]*)", line (?P<line>\d+)')
_INSTRUCTION = re.compile(r"^\s*/\*(?P<addr>[0-9a-fA-F]{4,})\*/\s+\{?\s*(?P<body>[^;{}]*?)\s*\}?\s*;")
_BODY = re.compile(r"^(?:(?P<pred>@!?U?P(?:T|\d+))\s+)?(?P<op>[A-Z][A-Z0-9_]*(?:\.[A-Za-z0-9_]+)*)\s*(?P<args>.*)$")
_BRA_LABEL = re.compile(r"^`\((?P<label>[^)]+)\)$")
_BRA_ADDR = re.compile(r"^(?P<addr>0x[0-9a-fA-F]+)$")


@dataclass
class _Instruction:
    predicated: bool
    opcode: str  # with modifiers, e.g. LDG.E.128.CONSTANT
    base: str
    operands: str


@dataclass
class _Block:
    mangled: str
    arch: str | None
    start: int  # line index of the header
    end: int = 0  # one past the last line
    instructions: list[_Instruction] = field(default_factory=list)
    source_lines: set[tuple[str, int]] = field(default_factory=set)


def _is_self_loop(ins: _Instruction, addr: int, labels: list[str]) -> bool:
    if ins.base != "BRA":
        return False
    target = ins.operands.strip()
    m = _BRA_LABEL.match(target)
    if m:
        return m.group("label") in labels
    m = _BRA_ADDR.match(target)
    return bool(m) and int(m.group("addr"), 16) == addr


def _header(line: str) -> str | None:
    """The mangled name of the kernel whose code a listing line opens (nvdisasm's ``.text.<name>`` section,
    cuobjdump's ``Function : <name>``), '' where it opens another section, None where it opens nothing."""
    if (m := _SECTION.match(line)) is not None:
        name = m.group("name")
        return name[6:] if name.startswith(".text.") and len(name) > 6 else ""
    if (m := _CUOBJ_FUNCTION.match(line)) is not None:
        return m.group("name")
    return None


def _parse_blocks(lines: list[str]) -> tuple[list[_Block], dict[tuple[str | None, str], tuple[int, int]]]:
    """Kernel blocks (nvdisasm ``.text.<name>`` sections or cuobjdump ``Function :`` blocks) and the
    resource usage entries, keyed by (arch, mangled name) -> (registers, shared bytes)."""
    blocks: list[_Block] = []
    resources: dict[tuple[str | None, str], tuple[int, int]] = {}
    arch: str | None = None
    cur: _Block | None = None
    labels: list[str] = []
    res_name: str | None = None
    # nvdisasm prints a line-info comment only when the location changes, so a function whose first
    # instruction continues the previous function's line has none: carry the last location over.
    last_loc: tuple[str, int] | None = None

    def close(i: int) -> None:
        nonlocal cur
        if cur is not None:
            cur.end = i
            blocks.append(cur)
            cur = None

    for i, line in enumerate(lines):
        if (name := _header(line)) is not None:
            close(i)
            if name:
                cur, labels = _Block(mangled=name, arch=arch, start=i), []
            continue
        if (m := _TARGET.match(line)) is not None:
            close(i)
            arch, last_loc = m.group("arch"), None
            continue
        if _RES_HEADER.match(line):
            close(i)
            continue
        if (m := _RES_FUNCTION.match(line)) is not None:
            close(i)
            res_name = m.group(1)
            continue
        if res_name is not None and (m := _RES_VALUES.match(line)) is not None:
            resources[(arch, res_name)] = (int(m.group("reg")), int(m.group("shared")))
            res_name = None
            continue
        if cur is None:
            continue
        if (m := _INSTRUCTION.match(line)) is not None:
            b = _BODY.match(m.group("body"))
            if b is None:
                continue
            pred, opcode = b.group("pred"), b.group("op")
            ins = _Instruction(
                predicated=pred is not None and pred.lstrip("@!").lstrip("U") != "PT",
                opcode=opcode,
                base=opcode.split(".", 1)[0],
                operands=b.group("args"),
            )
            if ins.base != "NOP" and not _is_self_loop(ins, int(m.group("addr"), 16), labels):
                cur.instructions.append(ins)
                if last_loc is not None:
                    cur.source_lines.add(last_loc)
            labels = []
            continue
        if (m := _LINE_INFO.match(line)) is not None:
            last_loc = (m.group("file"), int(m.group("line")))
            continue
        if (m := _LABEL.match(line)) is not None:
            labels.append(m.group("label"))
    close(len(lines))
    return blocks, resources


def _pct(part: int, whole: int) -> float:
    return round(100.0 * part / whole, 1) if whole else 0.0


def _stats(block: _Block, resources: dict[tuple[str | None, str], tuple[int, int]]) -> KernelSassStats:
    total = len(block.instructions)
    opcodes: Counter[str] = Counter(ins.base for ins in block.instructions)
    classes: Counter[str] = Counter(instruction_class(ins.opcode, ins.operands) for ins in block.instructions)
    loads: Counter[str] = Counter()
    stores: Counter[str] = Counter()
    for ins in block.instructions:
        if ins.base in ("LDG", "LD"):
            loads[str(access_width_bits(ins.opcode.split(".")[1:]))] += 1
        elif ins.base in ("STG", "ST"):
            stores[str(access_width_bits(ins.opcode.split(".")[1:]))] += 1

    def vector_pct(c: Counter[str]) -> float | None:
        n = sum(c.values())
        return _pct(sum(v for w, v in c.items() if int(w) >= 64), n) if n else None

    res = resources.get((block.arch, block.mangled)) or next(
        (v for (_, name), v in resources.items() if name == block.mangled), None
    )
    tensor = {op: n for op, n in opcodes.most_common() if is_mma(op)}
    return KernelSassStats(
        name=block.mangled,
        mangled_name=block.mangled,
        arch=block.arch,
        instructions=total,
        registers=res[0] if res else None,
        shared_bytes=res[1] if res else None,
        classes=[InstructionClassCount(cls=c, count=n, pct=_pct(n, total)) for c, n in classes.most_common()],
        opcodes=dict(opcodes.most_common()),
        memory=MemoryWidthStats(
            loads_by_width=dict(sorted(loads.items(), key=lambda kv: int(kv[0]))),
            stores_by_width=dict(sorted(stores.items(), key=lambda kv: int(kv[0]))),
            vectorized_load_pct=vector_pct(loads),
            vectorized_store_pct=vector_pct(stores),
        ),
        tensor_core_instructions=tensor,
        uses_tensor_cores=bool(tensor),
        local_loads=opcodes["LDL"],
        local_stores=opcodes["STL"],
        predicated_pct=_pct(sum(ins.predicated for ins in block.instructions), total),
        fp64_instructions=classes["fp64"],
        special_function_instructions=opcodes["MUFU"],
        atomics=sum(n for op, n in opcodes.items() if op in _ATOMIC_OPS),
        barriers=opcodes["BAR"],
        source_lines=len(block.source_lines) if block.source_lines else None,
    )


def _analyze(listing: str) -> list[tuple[KernelSassStats, _Block]]:
    blocks, resources = _parse_blocks(listing.splitlines())
    stats = [_stats(b, resources) for b in blocks]
    names = demangle([s.mangled_name for s in stats])
    for s in stats:
        s.name = names.get(s.mangled_name, s.mangled_name)
    return list(zip(stats, blocks, strict=True))


def parse_sass(listing: str) -> list[KernelSassStats]:
    """Per-kernel static statistics of an nvdisasm or ``cuobjdump -sass`` listing ([] for other text)."""
    return [s for s, _ in _analyze(listing)]


# --------------------------------------------------------------------------------------- entry points
def _shorten_paths(listing: str) -> str:
    """Line info names the compile job's private folder: keep the file name only."""
    root = re.escape(str(get_settings().workspaces_dir))
    return re.sub(rf'(//## File "|inlined at "){root}/[^/"]+/', r"\1", listing)


def _listing_for(art: Artifact, interleave_source: bool) -> tuple[str, str]:
    """(role, listing), from the artifact's cached copy when there is one."""
    role = "sass-lineinfo" if interleave_source else "sass"
    cached = art.read_text(role)
    if cached is not None:
        return role, cached
    binary = art.binary_path
    if binary is None or not binary.is_file():
        raise InputError(f"Artifact {art.id} holds no cubin or executable to disassemble.")
    listing = _shorten_paths(disassemble(binary, interleave_source=interleave_source))
    get_store().add_file(art, role, f"{role}.txt", listing.encode())
    return role, listing


def _select(analyzed: list[tuple[KernelSassStats, _Block]], kernel: str | None) -> list[tuple[KernelSassStats, _Block]]:
    if kernel is None:
        return analyzed
    if len(kernel) > MAX_KERNEL_REGEX_CHARS:
        raise InputError(f"The kernel pattern is {len(kernel)} characters; at most {MAX_KERNEL_REGEX_CHARS}.")
    try:
        pattern = re.compile(kernel)
    except re.error as e:
        raise InputError(f"kernel={kernel!r} is not a valid regular expression: {e}.") from None
    chosen = [(s, b) for s, b in analyzed if pattern.search(s.name) or pattern.search(s.mangled_name)]
    if not chosen:
        names = sorted({s.name for s, _ in analyzed})
        shown = ", ".join(names[:MAX_NAMES_IN_ERROR]) + (" ..." if len(names) > MAX_NAMES_IN_ERROR else "")
        raise InputError(
            f"No kernel matches {kernel!r}. Kernels in this binary: {shown or '(none)'}. The pattern is a "
            "regular expression searched in the demangled and the mangled names."
        )
    return chosen


_NOP_LINE = re.compile(r"^\s*/\*[0-9a-fA-F]+\*/\s+NOP\s*;\s*$")


def _excerpt(lines: list[str], blocks: list[_Block], max_lines: int) -> str:
    """The kernels' sections (header noise and NOP padding left out), at most ``max_lines`` lines;
    the whole text when it has no kernel sections."""
    if not blocks:
        return "\n".join(lines[:max_lines])
    picked: list[str] = []
    for b in blocks:
        picked += [line for line in lines[b.start:b.end] if not _NOP_LINE.match(line)]
        if len(picked) >= max_lines:
            break
    return "\n".join(picked[:max_lines])


def sass_for_artifact(artifact_id: str, *, kernel: str | None = None, interleave_source: bool = False,
                      max_listing_lines: int = 200) -> SassResult:
    """SASS statistics, findings and a listing excerpt for a stored artifact (listing cached in it)."""
    store = get_store()
    art = store.require(artifact_id)
    role, listing = _listing_for(art, interleave_source)
    analyzed = _analyze(listing)
    chosen = _select(analyzed, kernel)
    stats = [s for s, _ in chosen]
    lines = listing.splitlines()
    max_lines = max(0, min(int(max_listing_lines), MAX_EXCERPT_LINES))
    return SassResult(
        artifact_id=art.id,
        arch=art.meta.arch or next((s.arch for s in stats if s.arch), None),
        kernels=stats,
        findings=sass_findings(stats),
        listing_excerpt=_excerpt(lines, [b for _, b in chosen], max_lines),
        listing_lines=len(lines),
        listing_uri=f"kernelscope://artifacts/{art.id}/{role}",
        interleaved_source=interleave_source,
    )


def sass_for_cubin_bytes(data: bytes, *, kernel: str | None = None, interleave_source: bool = False,
                         max_listing_lines: int = 200) -> SassResult:
    """Like ``sass_for_artifact`` for an uploaded cubin, stored first as an 'uploaded-cubin' artifact."""
    limit = get_settings().max_binary_bytes
    if len(data) > limit:
        raise InputError(f"The cubin is {len(data)} bytes; uploads are limited to {limit} bytes.")
    machine = elf_machine(data)
    if machine != EM_CUDA:
        what = "not an ELF file" if machine is None else f"an ELF file for machine {machine}, not a GPU"
        raise InputError(
            f"The upload is not a CUDA ELF cubin ({what}). Send the bytes of a .cubin (nvcc -cubin, or "
            "cuobjdump -xelf all on an executable), base64-encoded."
        )
    sha = hashlib.sha256(data).hexdigest()
    aid = content_id({"cubin_sha256": sha})
    store = get_store()
    if store.get(aid) is None:
        role = "sass-lineinfo" if interleave_source else "sass"
        with Workspace(prefix="upload-") as ws:
            path = ws.path / "upload.cubin"
            path.write_bytes(data)
            listing = _shorten_paths(disassemble(path, interleave_source=interleave_source))
        arch = next((m.group("arch") for line in listing.splitlines()[:50] if (m := _TARGET.match(line))), None)
        art = store.put(
            ArtifactMeta(id=aid, kind="uploaded-cubin", arch=arch, source_name="upload.cubin",
                         extra={"cubin_sha256": sha}),
            {"cubin": ("upload.cubin", data)},
        )
        if art.read_text(role) is None:
            store.add_file(art, role, f"{role}.txt", listing.encode())
    return sass_for_artifact(aid, kernel=kernel, interleave_source=interleave_source,
                             max_listing_lines=max_listing_lines)
