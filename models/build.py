"""Compile and SASS results: diagnostics, ptxas' resources, instruction statistics."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from kernelscope.models.findings import Finding


# --------------------------------------------------------------------------- compile
class Diagnostic(BaseModel):
    """One compiler message, parsed from nvcc/cudafe/gcc/ptxas output."""

    file: str | None = None
    line: int | None = None
    column: int | None = None
    severity: Literal["error", "warning", "remark", "note", "fatal"]
    message: str
    tool: Literal["nvcc", "host", "ptxas", "nvlink"] = "nvcc"
    instantiation: list[str] = Field(
        default_factory=list,
        description="Template instantiation chain of the error (innermost first), trimmed to the frames in your "
                    "source plus the innermost library frame, type names shortened.",
    )
    instantiation_depth: int = Field(0, description="Frames in the compiler's full chain (the raw log has them all).")


class KernelResources(BaseModel):
    """ptxas' resource report for one function (``-Xptxas -v`` / ``--resource-usage``)."""

    name: str = Field(description="Demangled name when demangling succeeds, else the mangled one.")
    mangled_name: str
    arch: str | None = None
    is_entry: bool = Field(True, description="A __global__ kernel (entry) rather than a device function.")
    registers: int | None = None
    barriers: int | None = None
    shared_bytes: int | None = Field(None, description="Static shared memory per block.")
    constant_bytes: int | None = Field(None, description="cmem[0] (kernel parameters and constants).")
    local_bytes: int | None = Field(None, description="lmem: per-thread local memory (arrays, spills).")
    stack_bytes: int | None = None
    spill_stores_bytes: int | None = None
    spill_loads_bytes: int | None = None


class CompileResult(BaseModel):
    success: bool
    artifact_id: str | None = Field(
        None, description="Content hash of (source, flags, arch, compiler); use it with sass/run/profile."
    )
    cache_hit: bool = False
    kind: Literal["cubin", "executable"]
    arch: str
    command: list[str] = Field(description="The nvcc command line, with the workspace paths shortened.")
    compiler_version: str
    compile_time_s: float = Field(description="Wall time of the compiler run (0 for a cache hit's reuse).")
    diagnostics: list[Diagnostic] = Field(default_factory=list)
    error_count: int = 0
    warning_count: int = 0
    kernels: list[KernelResources] = Field(default_factory=list)
    findings: list[Finding] = Field(default_factory=list)
    log: str = Field("", description="Compiler output (bounded); the full log is a resource.")
    log_truncated: bool = False
    first_error: str | None = Field(
        None, description="The first error, readable: where, what, the source line and the trimmed instantiation "
                          "chain (template errors repeat one cause many times; fix this one first).")
    notes: list[str] = Field(default_factory=list, description="What kernelscope added or changed, and why "
                                                               "(CUTLASS include paths, arch sm_90 -> sm_90a, ...).")


# --------------------------------------------------------------------------- sass
class InstructionClassCount(BaseModel):
    cls: str = Field(description="Instruction class, e.g. 'fp32', 'global_load', 'tensor', 'control'.")
    count: int
    pct: float


class MemoryWidthStats(BaseModel):
    """Global load/store instructions by access width in bits (32 = scalar float, 128 = float4)."""

    loads_by_width: dict[str, int] = Field(default_factory=dict)
    stores_by_width: dict[str, int] = Field(default_factory=dict)
    vectorized_load_pct: float | None = Field(None, description="Share of global loads of 64 bits or wider.")
    vectorized_store_pct: float | None = None


class KernelSassStats(BaseModel):
    name: str
    mangled_name: str
    arch: str | None = None
    instructions: int = Field(description="Static instruction count (excluding NOP padding).")
    registers: int | None = None
    shared_bytes: int | None = None
    classes: list[InstructionClassCount] = Field(default_factory=list)
    opcodes: dict[str, int] = Field(default_factory=dict, description="Base opcode -> static count.")
    memory: MemoryWidthStats = Field(default_factory=MemoryWidthStats)
    tensor_core_instructions: dict[str, int] = Field(
        default_factory=dict, description="HMMA/HGMMA/IMMA/... opcodes found, with counts."
    )
    uses_tensor_cores: bool = False
    local_loads: int = Field(0, description="LDL instructions (local memory: spills or stack arrays).")
    local_stores: int = Field(0, description="STL instructions.")
    predicated_pct: float = Field(0.0, description="Share of instructions guarded by a predicate.")
    fp64_instructions: int = 0
    special_function_instructions: int = Field(0, description="MUFU (sin, cos, rsqrt, ex2, ...).")
    atomics: int = 0
    barriers: int = 0
    source_lines: int | None = Field(None, description="Distinct source lines mapped (needs -lineinfo).")


class SassResult(BaseModel):
    artifact_id: str
    arch: str | None = None
    kernels: list[KernelSassStats] = Field(default_factory=list)
    findings: list[Finding] = Field(default_factory=list)
    listing_excerpt: str = Field("", description="The first lines of the listing (bounded).")
    listing_lines: int = 0
    listing_uri: str | None = Field(None, description="Resource URI of the full listing.")
    interleaved_source: bool = False
