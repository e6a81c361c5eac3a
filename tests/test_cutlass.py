"""CUTLASS/CuTe on the CPU: locating the headers, the search index (ranking, bounds, caching), reading
files confined to the root, compile(cutlass=true) with nvcc, readable template errors, the Hopper
GEMM example's SASS (HGMMA), the fast path's pieces that need no GPU, and the MCP tools.

Tests that need the real headers (NVIDIA's nvidia-cutlass wheel, `pip install -e ".[cutlass]"`, or
KERNELSCOPE_CUTLASS_ROOT) skip with that reason when they are absent; the index, ranking and path
tests run on a small CUTLASS-shaped tree written here."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from _servers import tool_text as _text
from _settings import override_settings
from mcp import Client

from kernelscope.config import Settings, get_settings, settings_from_env
from kernelscope.errors import InputError, NotAvailable
from kernelscope.models.requests import CompileRequest
from kernelscope.server.app import mcp
from kernelscope.server.summaries import compile_summary, cutlass_file_summary, cutlass_search_summary
from kernelscope.toolkit.diagnostics import first_error_text, parse_diagnostics
from kernelscope.toolkit.toolchain import locate
from kernelscope.tools import cutlass
from kernelscope.tools.compile import compile_cuda

REPO = Path(__file__).resolve().parent.parent
GEMM_CU = REPO / "examples" / "cutlass" / "hopper_gemm.cu"

REAL_ROOT, REAL_NOTE = cutlass.locate(settings_from_env())
needs_headers = pytest.mark.skipif(REAL_ROOT is None, reason=f"CUTLASS/CuTe headers absent: {REAL_NOTE}")
needs_nvcc = pytest.mark.skipif(locate("nvcc")[0] is None, reason="needs nvcc (CUDA toolkit or NVIDIA's wheel)")
needs_sass_tools = pytest.mark.skipif(any(locate(t)[0] is None for t in ("nvcc", "nvdisasm", "cuobjdump")),
                                      reason="needs nvcc, nvdisasm and cuobjdump")




# ------------------------------------------------------------------------------ a small CUTLASS tree
TENSOR_HPP = """\
#pragma once
namespace cute {

template <class Engine, class Layout>
struct Tensor
{
  int size() const { return 0; }
};

template <class Iterator, class... Args>
CUTE_HOST_DEVICE constexpr
auto
make_tensor(Iterator const& iter,   // the data (a pointer)
            Args const&... args)
{
  return Tensor<Iterator, int>{};
}

using TensorAlias = Tensor<int, int>;
struct Tensorish;
template <
  class Tensorlike
>
void use(Tensorlike t);
// make_tensor is documented here
}
"""
DEMO_CU = """\
#include <cute/tensor.hpp>
// build a tensor with make_tensor
void demo() { auto t = cute::make_tensor(0); }
struct make_tensor_helper { };
"""


def _fake_root(base: Path) -> Path:
    root = base / "cutlass-checkout"
    (root / "include" / "cute").mkdir(parents=True)
    (root / "include" / "cutlass").mkdir(parents=True)
    (root / "examples" / "demo").mkdir(parents=True)
    (root / "include" / "cute" / "tensor.hpp").write_text(TENSOR_HPP)
    (root / "include" / "cutlass" / "cutlass.h").write_text("#define CUTLASS_HOST_DEVICE __host__ __device__\n")
    (root / "include" / "cutlass" / "version.h").write_text(
        "#define CUTLASS_MAJOR 9\n#define CUTLASS_MINOR 8\n#define CUTLASS_PATCH 7\n")
    (root / "examples" / "demo" / "demo.cu").write_text(DEMO_CU)
    (root / "examples" / "demo" / "blob.cu").write_bytes(b"\x00\x01binary")
    (root / "include" / "cute" / "long.hpp").write_text("".join(f"// line {i}\n" for i in range(1, 1501)))
    return root


@pytest.fixture
def fake(tmp_path: Path) -> Iterator[Settings]:
    root = _fake_root(tmp_path)
    s = Settings(home=tmp_path / "home", allowed_roots=[tmp_path], cutlass_root=root)
    cutlass.reset_cache()
    yield s
    cutlass.reset_cache()


def test_a_checkout_is_found_through_the_setting_and_reported(fake: Settings) -> None:
    root, note = cutlass.locate(fake)
    assert root is not None and note is None
    assert root.origin == "env" and root.version == "9.8.7" and root.areas == ("include", "examples")
    info = cutlass.info(fake)
    assert info.found and info.version == "9.8.7" and info.has_examples
    assert info.searched_dirs == ["include", "examples"]
    # the include folder itself is accepted as the root
    s2 = fake.model_copy(update={"cutlass_root": Path(info.root or "") / "include"})
    assert cutlass.locate(s2)[0].root == root.root  # type: ignore[union-attr]


def test_a_wrong_root_is_a_clear_not_available(tmp_path: Path) -> None:
    s = Settings(home=tmp_path / "h", allowed_roots=[tmp_path], cutlass_root=tmp_path / "nothing-here")
    cutlass.reset_cache()
    with pytest.raises(NotAvailable) as e:
        cutlass.require(s)
    assert "KERNELSCOPE_CUTLASS_ROOT" in str(e.value) and "include/cute/tensor.hpp" in str(e.value)
    assert not cutlass.info(s).found
    with pytest.raises(NotAvailable):
        cutlass.search("make_tensor", settings=s)
    cutlass.reset_cache()


def test_definitions_rank_above_text_and_headers_above_examples(fake: Settings) -> None:
    r = cutlass.search("make_tensor", settings=fake)
    kinds = [(h.path, h.line, h.kind, h.symbol) for h in r.hits]
    assert kinds[0] == ("include/cute/tensor.hpp", 13, "function", "make_tensor")  # exact name, a header
    assert kinds[1] == ("examples/demo/demo.cu", 4, "struct", "make_tensor_helper")  # a prefix match
    assert [k[2] for k in kinds[2:]] == ["text"] * 3
    assert kinds[2][0] == "include/cute/tensor.hpp" and kinds[2][1] == 25  # the header's text first
    assert {k[0] for k in kinds[3:]} == {"examples/demo/demo.cu"}
    assert r.definitions == 2 and r.text_matches == 5 and not r.truncated and r.version == "9.8.7"
    assert r.index_built and r.index_build_s is not None


def test_what_counts_as_a_definition(fake: Settings) -> None:
    r = cutlass.search("Tensor", kind="definitions", settings=fake)
    found = {(h.symbol, h.kind) for h in r.hits}
    # the struct, its alias, and make_tensor (substring); not the forward declaration `struct Tensorish;`,
    # not the template parameter `class Tensorlike`, not the declaration `void use(...);`
    assert ("Tensor", "struct") in found and ("TensorAlias", "alias") in found
    assert not any(s in ("Tensorish", "Tensorlike", "use") for s, _ in found)
    assert r.hits[0].symbol == "Tensor" and all(h.kind != "text" for h in r.hits)


def test_kind_scope_words_and_bounds(fake: Settings) -> None:
    text = cutlass.search("make_tensor", kind="text", settings=fake)
    assert text.definitions == 0 and len(text.hits) == 5 and {h.kind for h in text.hits} == {"text"}
    ex = cutlass.search("make_tensor", scope="examples", settings=fake)
    assert ex.hits and all(h.path.startswith("examples/") for h in ex.hits)
    words = cutlass.search("documented MAKE_TENSOR", settings=fake)  # all words on the line, any case
    assert [(h.path, h.line) for h in words.hits] == [("include/cute/tensor.hpp", 25)]
    one = cutlass.search("make_tensor", limit=1, settings=fake)
    assert len(one.hits) == 1 and one.truncated and "narrow the query" in cutlass_search_summary(one)
    none = cutlass.search("no_such_symbol_anywhere", settings=fake)
    assert none.hits == [] and "No match" in cutlass_search_summary(none)
    for bad in ("", "   ", "x" * 201, "a\x00b"):
        with pytest.raises(InputError):
            cutlass.search(bad, settings=fake)
    for lim in (0, 101):
        with pytest.raises(InputError):
            cutlass.search("make_tensor", limit=lim, settings=fake)


def test_the_index_is_built_once_and_rebuilt_when_the_sources_change(fake: Settings) -> None:
    assert cutlass.search("make_tensor", settings=fake).index_built
    assert not cutlass.search("make_tensor", settings=fake).index_built  # this process' copy
    cutlass.reset_cache()
    assert not cutlass.search("make_tensor", settings=fake).index_built  # the cached file on disk
    demo = Path(fake.cutlass_root or "") / "examples" / "demo" / "demo.cu"
    demo.write_text(DEMO_CU + "struct make_tensor_builder { };\n")
    os.utime(demo, ns=(time.time_ns(), time.time_ns() + 10**9))
    cutlass.reset_cache()
    r = cutlass.search("make_tensor", kind="definitions", settings=fake)
    assert r.index_built and "make_tensor_builder" in {h.symbol for h in r.hits}
    assert len(list((fake.home / "cache" / "cutlass").iterdir())) == 2


def test_read_file_ranges_and_truncation(fake: Settings) -> None:
    r = cutlass.read_file("include/cute/tensor.hpp", start_line=4, end_line=6, settings=fake)
    assert (r.start_line, r.end_line, r.total_lines) == (4, 6, 26)
    assert r.text.splitlines() == TENSOR_HPP.splitlines()[3:6] and not r.truncated
    short = cutlass.read_file("cute/tensor.hpp", settings=fake)  # include/ is implied
    assert short.path == "include/cute/tensor.hpp" and short.end_line == 26
    long = cutlass.read_file("include/cute/long.hpp", start_line=10, settings=fake)
    assert (long.end_line, long.truncated, long.next_start_line) == (309, True, 310)
    assert long.text.splitlines()[0] == "// line 10"
    summary = cutlass_file_summary(long)
    assert " 10| // line 10" in summary and "start_line=310" in summary
    tail = cutlass.read_file("include/cute/long.hpp", start_line=1400, end_line=5000, settings=fake)
    assert (tail.end_line, tail.truncated) == (1500, False)


@pytest.mark.parametrize("path,needle", [
    ("../outside.txt", "'..' is not allowed"),
    ("include/../../outside.txt", "'..' is not allowed"),
    ("/etc/passwd", "is absolute"),
    ("~/x", "is absolute"),
    ("include/cute/escape.hpp", "outside the CUTLASS root"),
    ("include/cute/missing.hpp", "No file"),
    ("include/cute", "No file"),
    ("examples/demo/blob.cu", "binary"),
    ("", "Give `path`"),
])
def test_read_file_stays_inside_the_root(fake: Settings, path: str, needle: str) -> None:
    root = Path(fake.cutlass_root or "")
    outside = root.parent / "outside.txt"
    outside.write_text("secret\n")
    (root / "include" / "cute" / "escape.hpp").symlink_to(outside)
    with pytest.raises(InputError, match=needle.replace("(", r"\(")):
        cutlass.read_file(path, settings=fake)


def test_read_file_bad_ranges(fake: Settings) -> None:
    with pytest.raises(InputError, match="past the end"):
        cutlass.read_file("include/cute/tensor.hpp", start_line=99, settings=fake)
    with pytest.raises(InputError, match="before start_line"):
        cutlass.read_file("include/cute/tensor.hpp", start_line=5, end_line=4, settings=fake)
    with pytest.raises(InputError, match="max_lines"):
        cutlass.read_file("include/cute/tensor.hpp", max_lines=5000, settings=fake)


# ------------------------------------------------------------------------------ template errors (no nvcc)
RECORDED_LOG = """\
<cutlass>/include/cute/container/tuple.hpp(229): error: static assertion failed with "Index out of range"
    static_assert(I < sizeof...(T), "Index out of range");
    ^
          detected during:
            instantiation of "decltype(auto) cute::get<I,T...>(const cute::tuple<T...> &) noexcept [with I=2UL, \
T=<cute::_8, cute::_4>]" at line 494 of <cutlass>/include/cute/algorithm/tuple_algorithms.hpp
            instantiation of "auto cute::select<I...,T>(const T &) [with I=<0, 1, 2>, T=cute::tuple<cute::_8, \
cute::_4>]" at line 523 of <cutlass>/include/cute/layout.hpp
            instantiation of "auto cute::select<Is...,Shape,Stride>(const cute::Layout<Shape, Stride> &) [with \
Is=<0, 1, 2>, Shape=cute::tuple<cute::_8, cute::_4>, Stride=cute::tuple<cute::_1, cute::_8>]" at line 8 of kernel.cu
            instantiation of "void scale(T *, int) [with T=float]" at line 12 of kernel.cu

/usr/include/c++/12/tuple(1359): error: class "std::_Nth_type<2UL, cute::_8, cute::_4>" has no member "type"
        using type = typename _Nth_type<__i, _Types...>::type;
                                                         ^
          detected during instantiation of "void scale(T *, int) [with T=float]" at line 12 of kernel.cu

2 errors detected in the compilation of "kernel.cu".
"""


def test_instantiation_chains_are_parsed_and_trimmed() -> None:
    d = parse_diagnostics(RECORDED_LOG, rename={"kernel.cu": "mine.cu"})
    assert [(x.file, x.line, x.severity) for x in d] == [
        ("<cutlass>/include/cute/container/tuple.hpp", 229, "error"), ("/usr/include/c++/12/tuple", 1359, "error")]
    first = d[0]
    assert first.message.splitlines() == ['static assertion failed with "Index out of range"',
                                          'static_assert(I < sizeof...(T), "Index out of range");']
    assert first.instantiation_depth == 4
    assert first.instantiation[0].startswith("<cutlass>/include/cute/algorithm/tuple_algorithms.hpp:494 instantiates "
                                             "decltype(auto) get<I,T...>")
    assert first.instantiation[1] == "... 1 frame(s) in library headers ..."
    assert first.instantiation[2].startswith("mine.cu:8 instantiates auto select<Is...,Shape,Stride>")
    assert "cute::" not in "".join(first.instantiation)  # shortened
    assert d[1].instantiation == ["mine.cu:12 instantiates void scale(T *, int) [with T=float]"]
    text = first_error_text(d, {"mine.cu": [""] * 7 + ["  auto s = select<0, 1, 2>(t.layout());"]})
    assert text is not None
    assert text.splitlines()[0] == ('error at <cutlass>/include/cute/container/tuple.hpp:229: static assertion '
                                    'failed with "Index out of range"')
    assert "from your code at mine.cu:8" in text and "auto s = select<0, 1, 2>(t.layout());" in text
    assert "(+1 more error(s)" in text


# ------------------------------------------------------------------------------ the real headers
@pytest.fixture(scope="module")
def real_settings() -> Settings:
    return get_settings()


@needs_headers
def test_search_the_real_headers_and_examples(real_settings: Settings) -> None:
    t0 = time.perf_counter()
    r = cutlass.search("make_tma_copy", settings=real_settings)
    first_s = time.perf_counter() - t0
    top = r.hits[0]
    assert (top.path, top.kind, top.symbol) == ("include/cute/atom/copy_traits_sm90_tma.hpp", "function",
                                                "make_tma_copy")
    assert r.definitions >= 3 and r.text_matches > r.definitions
    d = cutlass.search("SM90_TMA_LOAD_2D", kind="definitions", settings=real_settings)
    assert (d.hits[0].path, d.hits[0].kind) == ("include/cute/arch/copy_sm90_tma.hpp", "struct")
    t0 = time.perf_counter()
    b = cutlass.search("ClusterTransactionBarrier", settings=real_settings)
    query_s = time.perf_counter() - t0
    assert (b.hits[0].path, b.hits[0].kind) == ("include/cutlass/arch/barrier.h", "struct")
    assert b.hits[1].kind == "text" and not b.index_built
    print(f"\nCUTLASS {r.version}: first search {first_s:.2f} s (index built: {r.index_built}, "
          f"{r.index_build_s} s); a later query {query_s * 1000:.0f} ms")
    assert query_s < 2.0
    if REAL_ROOT is not None and REAL_ROOT.has_examples:
        ex = cutlass.search("warpgroup_wait", scope="examples", settings=real_settings)
        assert ex.hits and all(h.path.startswith("examples/") for h in ex.hits)
    # a hit's path reads back
    f = cutlass.read_file(top.path, start_line=top.line, end_line=top.line + 2, settings=real_settings)
    assert "make_tma_copy" in f.text.splitlines()[0]


@needs_headers
@needs_nvcc
def test_compile_with_cutlass_adds_what_cute_needs() -> None:
    src = """
#include <cute/tensor.hpp>
using namespace cute;
__global__ void fill(float* p) {
  Tensor t = make_tensor(make_gmem_ptr(p), make_layout(make_shape(Int<8>{}, Int<4>{})));
  t(threadIdx.x % 8, threadIdx.x / 8) = float(size(t));
}
"""
    r = compile_cuda(CompileRequest(source=src, cutlass=True))
    assert r.success, r.first_error or r.log[-2000:]
    assert r.arch == "sm_90a" and "-arch=sm_90a" in r.command
    assert {"-std=c++17", "--expt-relaxed-constexpr", "-I<cutlass>/include"} <= set(r.command)
    assert not any("/" in a and "<" not in a and a.startswith("-I") for a in r.command)  # no host paths shown
    assert any("sm_90 -> sm_90a" in n for n in r.notes) and any("-std=c++17" in n for n in r.notes)
    assert "note: target sm_90 -> sm_90a" in compile_summary(r)
    # the user's own choices stand: C++20 kept, an explicit sm_90 kept (and warned about for wgmma code)
    r20 = compile_cuda(CompileRequest(source=src, cutlass=True, arch="sm_80", flags=["-std=c++20"]))
    assert r20.success and r20.arch == "sm_80" and "-std=c++20" in r20.command and "-std=c++17" not in r20.command
    gmma = src + "\n// uses SM90_64x256x16_F32F16F16_SS via GMMA\n"
    r90 = compile_cuda(CompileRequest(source=gmma, cutlass=True, arch="sm_90"))
    assert r90.success and r90.arch == "sm_90" and any(n.startswith("WARNING") for n in r90.notes)
    with pytest.raises(InputError, match="C\\+\\+17 or newer"):
        compile_cuda(CompileRequest(source=src, cutlass=True, flags=["-std=c++14"]))
    # the same source without cutlass=true cannot find the headers
    plain = compile_cuda(CompileRequest(source=src))
    assert not plain.success and "cute/tensor.hpp" in plain.log


BROKEN = """\
#include <cute/tensor.hpp>
using namespace cute;

template <class T>
__global__ void scale(T* p, int n) {
  Tensor t = make_tensor(make_gmem_ptr(p), make_layout(make_shape(Int<8>{}, Int<4>{})));
  // wrong: mode 2 of a rank-2 layout
  auto s = select<0, 1, 2>(t.layout());
  t(0, 0) = T(size(s));
}

template __global__ void scale<float>(float*, int);
"""


@needs_headers
@needs_nvcc
def test_a_cute_template_error_reads_as_one_first_error() -> None:
    r = compile_cuda(CompileRequest(source=BROKEN, cutlass=True, filename="scale.cu"))
    assert not r.success and r.error_count >= 2
    first = r.diagnostics[0]
    assert first.file == "<cutlass>/include/cute/container/tuple.hpp" and "Index out of range" in first.message
    assert first.instantiation_depth >= 3 and len(first.instantiation) < first.instantiation_depth + 1
    assert any(f.startswith("scale.cu:8 instantiates") for f in first.instantiation)
    assert r.first_error is not None
    assert "from your code at scale.cu:8" in r.first_error and "select<0, 1, 2>(t.layout())" in r.first_error
    summary = compile_summary(r)
    assert summary.startswith("Compile FAILED") and "First error:" in summary and "frame(s)" in summary
    assert "detected during" in r.log  # the raw log keeps the whole chain
    assert "<cutlass>/include/cute" in r.log and str(REAL_ROOT.root if REAL_ROOT else "") not in r.log


@needs_headers
@needs_sass_tools
def test_the_hopper_gemm_example_builds_for_sm90a_with_pipelined_hgmma() -> None:
    from kernelscope.tools.sass import sass_for_artifact

    r = compile_cuda(CompileRequest(path=str(GEMM_CU), cutlass=True))
    assert r.success, r.first_error or r.log[-3000:]
    assert r.arch == "sm_90a"
    # ptxas serializes the wgmma pipeline when accumulators are touched mid-flight: warning C7514
    assert "C7514" not in r.log, r.log
    entries = {k.name: k for k in r.kernels if k.is_entry}
    assert set(entries) == {"hopper_gemm_f16", "hopper_gemm_bf16"}
    for k in entries.values():
        assert k.spill_stores_bytes == 0 and k.stack_bytes == 0 and k.registers and k.registers <= 255
    s = sass_for_artifact(r.artifact_id or "")
    for k in s.kernels:
        assert k.uses_tensor_cores and k.tensor_core_instructions.get("HGMMA", 0) >= 4, k.tensor_core_instructions
        assert k.local_loads == 0 and k.memory.stores_by_width.get("128", 0) >= 1  # 16-byte epilogue stores
    assert "HGMMA" in s.listing_excerpt or any("HGMMA" in k.opcodes for k in s.kernels)


# ------------------------------------------------------------------------------ the fast path, off the GPU
def test_fast_path_passes_structs_by_value_and_reads_grid_constant_signatures() -> None:
    np = pytest.importorskip("numpy")
    pytest.importorskip("torch")
    from kernelscope.fast import CudaKernel, parse_signature

    src = GEMM_CU.read_text()
    assert parse_signature(src, "hopper_gemm_bf16") == ["cute::TmaDescriptor", "cute::TmaDescriptor", "*", "int",
                                                       "int", "int"]
    k = CudaKernel(src, "hopper_gemm_f16", arch="sm_90a", cutlass=True)
    assert k.arch == "sm_90a" and k.cutlass
    desc = np.zeros(1, dtype=np.dtype((np.void, 128)))
    out = k._convert([desc, desc, np.uint64(0), 4, 5, 6])
    assert out[0] is desc and [int(x) for x in out[3:]] == [4, 5, 6] and out[3].dtype == np.int32
    with pytest.raises(ValueError, match="size one"):
        k._convert([np.zeros(3, dtype=np.uint8)])
    with pytest.raises(ValueError, match="sm_90a"):
        CudaKernel(src, "hopper_gemm_f16", arch="hopper")


def test_tensor_map_refuses_what_tma_cannot_describe() -> None:
    torch = pytest.importorskip("torch")
    from kernelscope.fast import tensor_map_2d

    with pytest.raises(ValueError, match="2-D CUDA tensor"):
        tensor_map_2d(torch.zeros(64, 64, dtype=torch.float16), 64, 64)
    with pytest.raises(ValueError, match="no TMA data type"):
        tensor_map_2d(torch.zeros(4, 4, dtype=torch.complex64), 4, 4)


@needs_nvcc
def test_a_cubin_cut_short_by_one_byte_is_restored() -> None:
    from kernelscope.artifacts import get_store
    from kernelscope.toolkit.elf import restore_elf_size

    r = compile_cuda(CompileRequest(source="__global__ void k(float* p) { p[threadIdx.x] = 1.f; }\n", arch="sm_90"))
    art = get_store().require(r.artifact_id or "")
    cubin = (art.path("cubin") or Path()).read_bytes()
    assert restore_elf_size(cubin[:-1]) == cubin  # what CuPy's getCUBIN returns, made whole
    assert restore_elf_size(cubin) == cubin and restore_elf_size(b"PTX text") == b"PTX text"


# ------------------------------------------------------------------------------ capabilities and MCP
@needs_headers
def test_capabilities_report_cutlass() -> None:
    from kernelscope.tools import capabilities as caps

    report = caps.capability_report(probe=False)
    assert report.can["cutlass"] is True and report.cutlass is not None and report.cutlass.found
    assert report.cutlass.version and report.cutlass.include_dirs
    assert "CUTLASS/CuTe:" in caps.render_report(report)


def test_capabilities_explain_a_missing_cutlass(tmp_path: Path) -> None:
    from kernelscope.tools import capabilities as caps

    try:
        with override_settings(cutlass_root=tmp_path / "no-cutlass"):
            caps.reset_caches()
            report = caps.capability_report(probe=False)
            assert report.can["cutlass"] is False and report.cutlass is not None and not report.cutlass.found
            why, _, fix = report.reasons["cutlass"].partition(". Fix: ")
            assert "KERNELSCOPE_CUTLASS_ROOT" in why and fix
    finally:
        caps.reset_caches()


@needs_headers
def test_the_mcp_tools() -> None:
    async def go() -> None:
        async with Client(mcp) as c:
            tools = {t.name: t for t in (await c.list_tools()).tools}
            for name in ("search_cutlass", "read_cutlass_file"):
                t = tools[name]
                assert t.description and t.output_schema and t.annotations is not None
                assert t.annotations.read_only_hint is True and t.annotations.open_world_hint is False
            assert "cutlass" in tools["compile"].input_schema["properties"]
            r = await c.call_tool("search_cutlass", {"query": "make_tma_copy", "limit": 3})
            assert not r.is_error, _text(r)
            hit = r.structured_content["hits"][0]
            assert hit["symbol"] == "make_tma_copy" and f"{hit['path']}:{hit['line']}" in _text(r)
            f = await c.call_tool("read_cutlass_file", {"path": hit["path"], "start_line": hit["line"],
                                                        "max_lines": 5})
            assert not f.is_error and f.structured_content["end_line"] == hit["line"] + 4
            assert f"{hit['line']}| " in _text(f)
            for args, needle in (({"path": "../../etc/passwd"}, "'..' is not allowed"),
                                 ({"path": "/etc/passwd"}, "is absolute"),
                                 ({"path": "include/cute/tensor.hpp", "max_lines": 0}, "validation error")):
                bad = await c.call_tool("read_cutlass_file", args)
                assert bad.is_error and needle in _text(bad), _text(bad)
            bad = await c.call_tool("search_cutlass", {"query": " "})
            assert bad.is_error and "query is empty" in _text(bad)

    asyncio.run(go())
