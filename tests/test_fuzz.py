"""Property-based fuzzing of the CPU tools through a real MCP client: every answer is a result or a
ToolError with a specific message; the server never crashes and writes nothing outside its home."""

from __future__ import annotations

import asyncio
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp import Client

from kernelscope.server.app import mcp

GENERIC = {"Error executing tool compile", "Error executing tool sass", "Error executing tool bottleneck_classify"}
SAXPY = "__global__ void k(float* p, int n) { int i = threadIdx.x; if (i < n) p[i] *= 2.f; }\n"

junk = st.one_of(st.none(), st.integers(), st.floats(allow_nan=True), st.booleans(), st.text(max_size=40),
                 st.lists(st.text(max_size=20), max_size=4), st.dictionaries(st.text(max_size=5), st.integers(),
                                                                            max_size=2))
flag = st.one_of(st.sampled_from(["-O3", "-o", "/etc/passwd", "-I/", "-Xcompiler", "-DX=1", "-maxrregcount=9999",
                                  "-arch=sm_90", "--keep", "@f", "-lineinfo", "-std=c++17", ";rm -rf /", "$(id)"]),
                 st.text(max_size=30))
path = st.one_of(st.sampled_from(["../../etc/passwd", "/etc/shadow", "tests", "README.md", "nope.cu", "",
                                  "examples/kernels/copy_float4.cu", "a\x00b", "~/x", "/proc/self/environ"]),
                 st.text(max_size=40))
compile_args = st.fixed_dictionaries({}, optional={
    "source": st.one_of(st.sampled_from([SAXPY, "", " ", "int main(", "#include </etc/passwd>"]),
                        st.text(max_size=120)),
    "path": path, "arch": st.one_of(st.sampled_from(["sm_90", "sm_80", "90", "hopper", "sm_999"]),
                                    st.text(max_size=10)),
    "flags": st.lists(flag, max_size=4), "output": st.sampled_from(["auto", "cubin", "executable", "dll"]),
    "filename": st.one_of(st.sampled_from(["k.cu", "../x.cu", "a b.cu"]), st.text(max_size=20)),
    "bogus": junk,
})
sass_args = st.fixed_dictionaries({}, optional={
    "artifact_id": st.one_of(st.text(max_size=30), st.sampled_from(["0" * 24, "g" * 24])),
    "cubin_base64": st.one_of(st.text(max_size=60), st.sampled_from(["f0VMRg==", "AAAA"])),
    "kernel": st.one_of(st.text(max_size=10), st.sampled_from(["(", ".*"])),
    "max_listing_lines": st.one_of(st.integers(-5, 10_000), junk),
})
classify_args = st.fixed_dictionaries({}, optional={
    "report_path": path, "kernel": st.text(max_size=8), "flops": st.one_of(st.floats(), junk),
    "dram_bytes": st.one_of(st.floats(), junk), "time_us": st.floats(), "gpu": st.text(max_size=12),
})
calls = st.one_of(st.tuples(st.just("compile"), compile_args), st.tuples(st.just("sass"), sass_args),
                  st.tuples(st.just("bottleneck_classify"), classify_args))


def _text(r) -> str:  # type: ignore[no-untyped-def]
    return "\n".join(getattr(b, "text", "") for b in r.content)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(calls, min_size=1, max_size=4))
def test_mixed_valid_and_invalid_calls(kernelscope_home: Path, batch: list[tuple[str, dict]]) -> None:
    before = {p for p in Path("/tmp").iterdir() if p.name.startswith("kernelscope")}

    async def go() -> None:
        async with Client(mcp) as c:
            for name, args in batch:
                r = await c.call_tool(name, args)
                text = _text(r)
                if r.is_error:
                    assert text.strip() not in GENERIC and len(text) > len(f"Error executing tool {name}: "), text
                else:
                    assert r.structured_content is not None
            # the server still answers
            ok = await c.call_tool("compile", {"source": SAXPY})
            assert not ok.is_error

    asyncio.run(go())
    after = {p for p in Path("/tmp").iterdir() if p.name.startswith("kernelscope")}
    assert after == before
