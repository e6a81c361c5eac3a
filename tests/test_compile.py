"""compile with this machine's nvcc: success, diagnostics with lines, forced spills, cache hits, refusals."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelscope.artifacts import get_store
from kernelscope.errors import InputError
from kernelscope.models.requests import CompileRequest
from kernelscope.toolkit.diagnostics import parse_diagnostics, parse_ptxas_report
from kernelscope.tools.compile import compile_cuda

SAXPY = """
__global__ void saxpy(int n, float a, const float* __restrict__ x, float* __restrict__ y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
"""

# Many simultaneously live accumulators: with a tight register cap ptxas must spill.
PRESSURE = """
__global__ void pressure(const float* __restrict__ in, float* __restrict__ out, int n) {
    float acc[48];
    #pragma unroll
    for (int j = 0; j < 48; ++j) acc[j] = in[threadIdx.x + j * 32];
    for (int it = 0; it < n; ++it) {
        #pragma unroll
        for (int j = 0; j < 48; ++j) acc[j] = acc[j] * acc[(j + 1) % 48] + in[it];
    }
    float s = 0.f;
    #pragma unroll
    for (int j = 0; j < 48; ++j) s += acc[j];
    out[threadIdx.x] = s;
}
"""


def test_compile_kernel_reports_resources() -> None:
    r = compile_cuda(CompileRequest(source=SAXPY, arch="sm_90"))
    assert r.success and r.kind == "cubin" and r.arch == "sm_90" and r.artifact_id
    assert r.compiler_version.startswith("13.")
    (k,) = [k for k in r.kernels if k.is_entry]
    assert k.mangled_name.startswith("_Z5saxpy")
    # c++filt writes "float const*", cu++filt (preferred when present) "const float *"
    assert k.name.replace(" ", "") in ("saxpy(int,float,floatconst*,float*)", "saxpy(int,float,constfloat*,float*)")
    assert k.registers and 4 <= k.registers <= 64
    assert k.spill_stores_bytes == 0 and k.stack_bytes == 0 and k.shared_bytes == 0
    art = get_store().require(r.artifact_id)
    assert art.path("cubin").read_bytes()[:4] == b"\x7fELF"
    assert "-lineinfo" in r.command and "-Xptxas=-v" in r.command


def test_identical_request_is_cache_hit() -> None:
    a = compile_cuda(CompileRequest(source=SAXPY, arch="sm_90", flags=["-O3"]))
    b = compile_cuda(CompileRequest(source=SAXPY, arch="sm_90", flags=["-O3"]))
    c = compile_cuda(CompileRequest(source=SAXPY, arch="sm_80", flags=["-O3"]))
    assert not a.cache_hit and b.cache_hit and a.artifact_id == b.artifact_id
    assert c.artifact_id != a.artifact_id and not c.cache_hit


def test_syntax_error_is_a_normal_answer_with_the_right_line() -> None:
    src = SAXPY + "\n__global__ void broken(float* p) {\n    p[0] = undefined_name;\n}\n"
    line = src.splitlines().index("    p[0] = undefined_name;") + 1
    r = compile_cuda(CompileRequest(source=src, filename="mykernel.cu"))
    assert not r.success and r.artifact_id is None and r.error_count == 1
    (d,) = [d for d in r.diagnostics if d.severity == "error"]
    assert d.file == "mykernel.cu" and d.line == line and "undefined_name" in d.message


def test_warning_is_parsed() -> None:
    src = "__global__ void w(float* p) { int unused = 3; p[0] = 1.f; }\n"
    r = compile_cuda(CompileRequest(source=src))
    assert r.success and r.warning_count >= 1
    assert any(d.severity == "warning" and d.line == 1 and "unused" in d.message for d in r.diagnostics)


def test_forced_spills_are_reported_with_a_finding() -> None:
    r = compile_cuda(CompileRequest(source=PRESSURE, arch="sm_90", flags=["-maxrregcount=32"]))
    assert r.success
    (k,) = [k for k in r.kernels if k.is_entry]
    assert k.registers is not None and k.registers <= 32
    assert (k.spill_stores_bytes or 0) > 0 and (k.spill_loads_bytes or 0) > 0
    assert any(f.rule == "ptxas.register-spills" and f.kernel == k.name for f in r.findings)
    free = compile_cuda(CompileRequest(source=PRESSURE, arch="sm_90"))
    (k2,) = [k for k in free.kernels if k.is_entry]
    assert (k2.spill_stores_bytes or 0) == 0
    assert not any(f.rule == "ptxas.register-spills" for f in free.findings)


def test_program_with_main_builds_an_executable() -> None:
    src = SAXPY + "\nint main() { saxpy<<<1, 32>>>(0, 1.f, nullptr, nullptr); return 0; }\n"
    r = compile_cuda(CompileRequest(source=src, arch="sm_90"))
    assert r.success and r.kind == "executable"
    exe = get_store().require(r.artifact_id).path("executable")
    assert exe.read_bytes()[:4] == b"\x7fELF"


def test_compile_from_path_with_local_header(tmp_path: Path) -> None:
    (tmp_path / "scale.cuh").write_text("#define SCALE 2.0f\n")
    (tmp_path / "k.cu").write_text('#include "scale.cuh"\n__global__ void k(float* p) { p[0] *= SCALE; }\n')
    r = compile_cuda(CompileRequest(path=str(tmp_path / "k.cu")))
    assert r.success, r.log
    (tmp_path / "scale.cuh").write_text("#define SCALE 3.0f\n")
    r2 = compile_cuda(CompileRequest(path=str(tmp_path / "k.cu")))
    assert r2.success and not r2.cache_hit and r2.artifact_id != r.artifact_id  # header change misses the cache


def test_bad_arch_is_a_diagnostic_or_refusal() -> None:
    with pytest.raises(InputError, match="not a GPU architecture"):
        compile_cuda(CompileRequest(source=SAXPY, arch="hopper"))
    r = compile_cuda(CompileRequest(source=SAXPY, arch="sm_999"))
    assert not r.success and any("sm_999" in d.message for d in r.diagnostics)


@pytest.mark.parametrize("req,match", [
    (CompileRequest(path="/etc/passwd"), "outside the allowed roots"),
    (CompileRequest(path="../../../../etc/passwd"), "outside the allowed roots|No such file"),
    (CompileRequest(source=SAXPY, flags=["-o", "/tmp/x"]), "refused"),
    (CompileRequest(source=SAXPY, flags=["-Xcompiler", "-fplugin=evil.so"]), "refused"),
    (CompileRequest(source='#include "/etc/passwd"\n'), "refused"),
    (CompileRequest(source='#include "../../secret.h"\n'), "refused"),
    (CompileRequest(source="#define F </etc/passwd>\n#include F\n"), "computed includes"),
    (CompileRequest(source="x" * (1024 * 1024 + 1)), "limited to"),
    (CompileRequest(source="   \n"), "empty"),
    (CompileRequest(source="a\x00b"), "NUL"),
    (CompileRequest(source=SAXPY, path="k.cu"), "exactly one"),
    (CompileRequest(), "exactly one"),
    (CompileRequest(source=SAXPY, filename="../evil.cu"), "File name"),
    (CompileRequest(source=SAXPY, arch="sm_80", flags=["-arch=sm_90"]), "conflicts"),
])
def test_bad_input_is_refused_clearly(req: CompileRequest, match: str) -> None:
    with pytest.raises(InputError, match=match):
        compile_cuda(req)


def test_lineinfo_in_flags_builds_a_cubin() -> None:
    """-lineinfo starts with -l but is no library flag (issue 25): a cubin with it compiles."""
    r = compile_cuda(CompileRequest(source=SAXPY, arch="sm_90", output="cubin", flags=["-lineinfo", "-O3"]))
    assert r.success and r.kind == "cubin", r.first_error
    assert r.command.count("-lineinfo") == 1


def test_library_flags_still_need_an_executable() -> None:
    with pytest.raises(InputError, match="only make sense for executables"):
        compile_cuda(CompileRequest(source=SAXPY, arch="sm_90", output="cubin", flags=["-lineinfo", "-lcublas"]))


def test_parsers_on_recorded_output() -> None:
    log = (
        "kernel.cu(12): error: identifier \"y\" is undefined\n"
        "    int x = y;\n"
        "            ^\n\n"
        "kernel.cu(3): warning #177-D: variable \"z\" was declared but never referenced\n"
        "host.cpp:7:5: error: 'foo' was not declared in this scope\n"
        "ptxas fatal   : Unresolved extern function '_Z3barv'\n"
        "nvcc fatal   : Unsupported gpu architecture 'compute_999'\n"
    )
    d = parse_diagnostics(log)
    assert [(x.file, x.line, x.severity, x.tool) for x in d] == [
        ("kernel.cu", 12, "error", "nvcc"), ("kernel.cu", 3, "warning", "nvcc"), ("host.cpp", 7, "error", "host"),
        (None, None, "fatal", "ptxas"), (None, None, "fatal", "nvcc")]
    assert d[0].message.startswith('identifier "y" is undefined') and "int x = y;" in d[0].message
    rep = parse_ptxas_report(
        "ptxas info    : Compiling entry function '_Z1kPf' for 'sm_90'\n"
        "ptxas info    : Function properties for _Z1kPf\n"
        "    8 bytes stack frame, 4 bytes spill stores, 8 bytes spill loads\n"
        "ptxas info    : Used 40 registers, used 1 barriers, 4096 bytes smem, 360 bytes cmem[0]\n"
    )
    assert rep[0].model_dump(exclude={"name"}) == {
        "mangled_name": "_Z1kPf", "arch": "sm_90", "is_entry": True, "registers": 40, "barriers": 1,
        "shared_bytes": 4096, "constant_bytes": 360, "local_bytes": None, "stack_bytes": 8,
        "spill_stores_bytes": 4, "spill_loads_bytes": 8}
