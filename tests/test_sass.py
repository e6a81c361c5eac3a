"""sass: real kernels from examples/kernels/ compiled with this machine's nvcc, disassembled with
nvdisasm/cuobjdump, parsed, and checked against what the source makes certain."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from _settings import override_settings
from hypothesis import given, settings
from hypothesis import strategies as st

from kernelscope.artifacts import get_store
from kernelscope.config import Settings, settings_from_env
from kernelscope.errors import InputError
from kernelscope.models import KernelSassStats, SassResult
from kernelscope.models.requests import CompileRequest
from kernelscope.toolkit.toolchain import locate
from kernelscope.tools.compile import compile_cuda
from kernelscope.tools.sass import (
    access_width_bits,
    instruction_class,
    parse_sass,
    sass_findings,
    sass_for_artifact,
    sass_for_cubin_bytes,
)

REPO = Path(__file__).resolve().parent.parent
KERNELS = REPO / "examples" / "kernels"

pytestmark = pytest.mark.skipif(
    any(locate(t)[0] is None for t in ("nvcc", "nvdisasm", "cuobjdump")),
    reason="needs nvcc, nvdisasm and cuobjdump (CUDA toolkit or NVIDIA's wheels)",
)


@pytest.fixture(scope="module", autouse=True)
def isolated_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Settings]:
    with override_settings(settings_from_env(home=tmp_path_factory.mktemp("ks-sass"), roots=[str(REPO)])) as s:
        yield s


@pytest.fixture(scope="module")
def build(isolated_store: Settings) -> Callable[..., str]:
    """Compile an example kernel to a cubin artifact once per module; returns the artifact id."""
    done: dict[tuple[str, tuple[str, ...], str], str] = {}

    def _build(name: str, *flags: str, arch: str = "sm_90") -> str:
        key = (name, flags, arch)
        if key not in done:
            r = compile_cuda(CompileRequest(path=str(KERNELS / f"{name}.cu"), arch=arch, flags=list(flags)))
            assert r.success and r.artifact_id, r.log
            done[key] = r.artifact_id
        return done[key]

    return _build


def only_kernel(res: SassResult) -> KernelSassStats:
    assert len(res.kernels) == 1, [k.name for k in res.kernels]
    return res.kernels[0]


def rules(res: SassResult) -> set[str]:
    return {f.rule for f in res.findings}


# ------------------------------------------------------------------------------ parser units
def test_garbage_parses_to_nothing() -> None:
    assert parse_sass("random garbage") == []
    assert parse_sass("") == []
    assert parse_sass("\x00\x7fELF /*0000*/ ;;; Function : \n//---- .text. ----\n") == []
    assert sass_findings([]) == []


@settings(max_examples=100, deadline=None)
@given(st.lists(st.sampled_from([
    "//--------------------- .text._Z1kv --------------------------", "\t\tFunction : _Z1kv", ".L_x_0:",
    "        /*0000*/                   LDG.E.128 R4, desc[UR4][R2.64] ;", "        /*0010*/  @!P0 BRA `(.L_x_0);",
    "        /*0020*/                   BRA 0x20;", "        /*0030*/ NOP;", '\t//## File "k.cu", line 3',
    "\t.target\tsm_90", "Resource usage:", " Function _Z1kv:", "  REG:7 STACK:0 SHARED:16", "", "@@ /*zz*/ ;",
]) | st.text(max_size=80), max_size=40))
def test_parser_never_raises(lines: list[str]) -> None:
    stats = parse_sass("\n".join(lines))
    for k in stats:
        assert k.instructions == sum(c.count for c in k.classes) == sum(k.opcodes.values())
        assert "NOP" not in k.opcodes and 0.0 <= k.predicated_pct <= 100.0
    sass_findings(stats)


def test_width_and_class_helpers() -> None:
    assert access_width_bits(["E", "128", "CONSTANT"]) == 128
    assert access_width_bits(["E", "U8"]) == 8
    assert access_width_bits(["E", "S16"]) == 16
    assert access_width_bits(["E", "LTC128B"]) == 32  # an L2 hint, not a width
    assert access_width_bits([]) == 32
    assert instruction_class("LDG.E.128.CONSTANT") == "global_load"
    assert instruction_class("HGMMA.64x128x16.F32") == "tensor"
    assert instruction_class("UIADD3") == "uniform"
    assert instruction_class("UTMALDG.2D") == "async"
    assert instruction_class("IMAD.MOV.U32", "R2, RZ, RZ, RZ") == "move"
    assert instruction_class("HFMA2", "R3, -RZ, RZ, 0, 2.38e-07") == "move"
    assert instruction_class("HFMA2", "R3, R4, R5, R6") == "fp16_bf16"


# ------------------------------------------------------------------------------ real kernels
def test_float4_copy_is_128_bit(build: Callable[..., str]) -> None:
    res = sass_for_artifact(build("copy_float4"))
    k = only_kernel(res)
    assert k.mangled_name.startswith("_Z11copy_float4")
    if locate("cu++filt")[0] or locate("c++filt")[0]:
        # c++filt writes "float4 const*", cu++filt "const float4 *"
        assert k.name.replace(" ", "") in (
            "copy_float4(float4const*,float4*,int)", "copy_float4(constfloat4*,float4*,int)")
    assert k.arch == res.arch == "sm_90"
    assert k.memory.loads_by_width.get("128", 0) > 0 and set(k.memory.loads_by_width) == {"128"}
    assert k.memory.stores_by_width.get("128", 0) > 0
    assert k.memory.vectorized_load_pct == 100.0 and k.memory.vectorized_store_pct == 100.0
    assert k.opcodes["LDG"] == k.memory.loads_by_width["128"]
    assert "NOP" not in k.opcodes
    assert k.registers is not None and k.registers > 0 and k.shared_bytes == 0
    assert sum(c.count for c in k.classes) == k.instructions
    assert abs(sum(c.pct for c in k.classes) - 100.0) < 1.0
    assert not k.uses_tensor_cores and k.local_loads == k.local_stores == 0
    assert res.findings == []


def test_scalar_copy_is_32_bit_only(build: Callable[..., str]) -> None:
    k = only_kernel(sass_for_artifact(build("copy_scalar")))
    assert set(k.memory.loads_by_width) == {"32"} and set(k.memory.stores_by_width) == {"32"}
    assert k.memory.vectorized_load_pct == 0.0 and k.memory.vectorized_store_pct == 0.0
    assert k.fp64_instructions == 0


def test_rowsum_scalar_loads_are_flagged(build: Callable[..., str]) -> None:
    res = sass_for_artifact(build("rowsum_scalar"))
    k = only_kernel(res)
    assert k.memory.loads_by_width == {"32": 16}
    (f,) = [f for f in res.findings if f.rule == "sass.scalar-global-loads"]
    assert f.severity == "info" and "16" in f.diagnosis and f.fixes
    assert f.evidence[0].value == 16 and f.evidence[0].source == "sass" and f.evidence[0].kernel == k.name


def test_wmma_uses_tensor_cores(build: Callable[..., str]) -> None:
    res = sass_for_artifact(build("wmma_gemm"))
    k = only_kernel(res)
    assert k.uses_tensor_cores and k.tensor_core_instructions.get("HMMA", 0) > 0
    assert any(c.cls == "tensor" and c.count >= k.tensor_core_instructions["HMMA"] for c in k.classes)
    assert "sass.no-tensor-cores-on-mma-like" not in rules(res)


def test_naive_sgemm_is_flagged_for_tensor_cores(build: Callable[..., str]) -> None:
    res = sass_for_artifact(build("naive_sgemm"))
    k = only_kernel(res)
    assert not k.uses_tensor_cores and k.opcodes["FFMA"] > 64
    assert k.barriers >= 2 and k.shared_bytes is not None and k.shared_bytes >= 2 * 32 * 32 * 4
    (f,) = [f for f in res.findings if f.rule == "sass.no-tensor-cores-on-mma-like"]
    assert f.family == "tensor" and str(k.opcodes["FFMA"]) in f.diagnosis
    assert [e.metric for e in f.evidence][:2] == ["ffma_instructions", "ffma_pct"]


def test_spill_shows_local_memory(build: Callable[..., str]) -> None:
    res = sass_for_artifact(build("spill", "-maxrregcount=32"))
    k = only_kernel(res)
    assert k.local_stores > 0 and k.local_loads > 0
    assert k.opcodes["STL"] == k.local_stores and k.registers is not None and k.registers <= 32
    (f,) = [f for f in res.findings if f.rule == "sass.local-memory"]
    assert f.severity in ("warning", "high") and str(k.local_stores) in f.diagnosis
    assert res.findings[0].rule == "sass.local-memory"  # most severe first
    # Without the register cap the same source needs no local memory.
    assert only_kernel(sass_for_artifact(build("spill"))).local_stores == 0


def test_fp64_promotion_is_flagged(build: Callable[..., str]) -> None:
    res = sass_for_artifact(build("fp64_mix"))
    k = only_kernel(res)
    assert k.fp64_instructions > 0 and k.opcodes.get("F2F", 0) > 0
    (f,) = [f for f in res.findings if f.rule == "sass.fp64-in-kernel"]
    assert str(k.fp64_instructions) in f.diagnosis and "0.5f" in f.fixes[0].action
    assert "sass.fp64-in-kernel" not in rules(sass_for_artifact(build("copy_scalar")))
    # On a 1/64-rate GPU the same code is a high-severity problem.
    res86 = sass_for_artifact(build("fp64_mix", arch="sm_86"))
    assert [f.severity for f in res86.findings if f.rule == "sass.fp64-in-kernel"] == ["high"]


def test_mufu_heavy(build: Callable[..., str]) -> None:
    res = sass_for_artifact(build("mufu_heavy"))
    k = only_kernel(res)
    assert k.special_function_instructions == k.opcodes["MUFU"] >= 16
    assert [f.severity for f in res.findings if f.rule == "sass.mufu-heavy"] == ["info"]
    assert "sass.mufu-heavy" not in rules(sass_for_artifact(build("copy_float4")))


# ------------------------------------------------------------------------------ caching, listing
def test_listing_is_cached_in_the_artifact(build: Callable[..., str]) -> None:
    aid = build("copy_scalar")
    first = sass_for_artifact(aid, max_listing_lines=5)
    art = get_store().require(aid)
    cached = art.path("sass")
    assert cached is not None and cached.is_file()
    stamp = cached.stat().st_mtime_ns
    second = sass_for_artifact(aid, max_listing_lines=5)
    assert cached.stat().st_mtime_ns == stamp
    assert second.kernels == first.kernels and second.listing_lines == first.listing_lines
    assert first.listing_uri == f"kernelscope://artifacts/{aid}/sass"
    assert len(first.listing_excerpt.split("\n")) == 5 and first.listing_lines > 5
    assert first.listing_excerpt.startswith("//--------------------- .text._Z11copy_scalar")
    full = sass_for_artifact(aid, max_listing_lines=1000).listing_excerpt
    assert "EXIT" in full and "NOP" not in full  # the padding is left out of the excerpt
    assert first.kernels[0].source_lines is None and not first.interleaved_source


def test_interleaved_source_lines(build: Callable[..., str], isolated_store: Settings) -> None:
    aid = build("wmma_gemm")
    res = sass_for_artifact(aid, interleave_source=True, max_listing_lines=400)
    k = only_kernel(res)
    assert res.interleaved_source and res.listing_uri == f"kernelscope://artifacts/{aid}/sass-lineinfo"
    assert k.source_lines is not None and k.source_lines > 0
    assert '//## File "wmma_gemm.cu", line' in res.listing_excerpt
    listing = get_store().require(aid).read_text("sass-lineinfo")
    assert listing is not None and str(isolated_store.workspaces_dir) not in listing
    assert k.instructions == only_kernel(sass_for_artifact(aid)).instructions


def test_kernel_filter(build: Callable[..., str]) -> None:
    aid = build("copy_float4")
    res = sass_for_artifact(aid, kernel=r"copy_float\d", max_listing_lines=20)
    assert len(res.kernels) == 1 and ".text._Z11copy_float4" in res.listing_excerpt.splitlines()[0]
    assert len(sass_for_artifact(aid, kernel="_Z11copy").kernels) == 1  # mangled names match too
    with pytest.raises(InputError, match="not a valid regular expression"):
        sass_for_artifact(aid, kernel="copy_(")
    with pytest.raises(InputError, match=r"No kernel matches .*copy_float4"):
        sass_for_artifact(aid, kernel="^does_not_exist$")


def test_executable_artifact(tmp_path: Path) -> None:
    source = (KERNELS / "copy_float4.cu").read_text() + (
        "\nint main() {\n    copy_float4<<<1, 32>>>(nullptr, nullptr, 0);\n    return 0;\n}\n"
    )
    r = compile_cuda(CompileRequest(source=source, arch="sm_90", filename="copy_main.cu"))
    assert r.success and r.kind == "executable" and r.artifact_id, r.log
    k = only_kernel(sass_for_artifact(r.artifact_id))
    assert k.mangled_name.startswith("_Z11copy_float4") and k.memory.loads_by_width.get("128", 0) > 0
    assert k.registers is not None


# ------------------------------------------------------------------------------ uploads
def test_uploaded_cubin(build: Callable[..., str]) -> None:
    art = get_store().require(build("copy_float4"))
    data = art.path("cubin").read_bytes()  # type: ignore[union-attr]
    res = sass_for_cubin_bytes(data, interleave_source=True)
    up = get_store().require(res.artifact_id)
    assert up.meta.kind == "uploaded-cubin" and up.meta.arch == "sm_90" and res.arch == "sm_90"
    assert res.artifact_id != art.id
    assert only_kernel(res).memory.loads_by_width.get("128", 0) > 0
    again = sass_for_cubin_bytes(data)
    assert again.artifact_id == res.artifact_id and again.kernels[0].instructions == res.kernels[0].instructions


def test_uploaded_garbage_is_refused(build: Callable[..., str], isolated_store: Settings) -> None:
    with pytest.raises(InputError, match="not a CUDA ELF cubin"):
        sass_for_cubin_bytes(b"definitely not a cubin" * 10)
    with pytest.raises(InputError, match="not a CUDA ELF cubin"):
        sass_for_cubin_bytes(b"")
    real = get_store().require(build("copy_scalar")).path("cubin").read_bytes()  # type: ignore[union-attr]
    with pytest.raises(InputError, match="nvdisasm"):
        sass_for_cubin_bytes(real[:200])  # a CUDA ELF header with the rest cut off
    with (override_settings(isolated_store, max_binary_bytes=100),
          pytest.raises(InputError, match="limited to 100 bytes")):
        sass_for_cubin_bytes(real)
