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


# ------------------------------------------------------------------ the tools that refuse fast (no GPU here)
profile_target = st.fixed_dictionaries({}, optional={
    "artifact_id": st.one_of(st.text(max_size=30), st.sampled_from(["0" * 24, "../" * 8, "A" * 24])),
    "args": st.one_of(st.lists(st.text(max_size=20), max_size=3), junk),
    "reference": st.one_of(st.text(max_size=60), st.sampled_from(["import os; os.system('id')", "class Model: pass"])),
    "candidate_path": path, "kernel_regex": st.one_of(st.text(max_size=12), st.sampled_from(["(", ".*", "a{99999}"])),
    "launch_skip": st.one_of(st.integers(-3, 10**7), junk), "launch_count": st.one_of(st.integers(-3, 10**5), junk),
    "timeout_s": st.one_of(st.floats(), junk),
})
analyze_args = st.one_of(profile_target, profile_target.map(lambda d: {**d, "thresholds": {"launch.tiny-grid": {
    "max_sm_fraction": 0.1}, "x": {"y": 1}}}), profile_target.map(lambda d: {**d, "deep_kernels": 999}))
ncu_args = st.one_of(profile_target, profile_target.map(lambda d: {**d, "sections": ["SpeedOfLight", "a;b"],
                                                                   "metrics": ["dram__bytes.sum", "$(id)"]}),
                     profile_target.map(lambda d: {**d, "section_set": "everything"}))
compare_args = st.fixed_dictionaries({"before_report": path, "after_report": path}, optional={
    "before_kernel": st.text(max_size=8), "after_kernel": st.one_of(st.text(max_size=8), junk)})
trace_args = st.one_of(profile_target, profile_target.map(lambda d: {**d, "script": "import torch"}),
                       profile_target.map(lambda d: {**d, "script_path": "../../etc/passwd", "calls": 0}),
                       profile_target.map(lambda d: {**d, "backend": "perfetto", "gap_threshold_us": -1.0}),
                       profile_target.map(lambda d: {**d, "thresholds": {"system.gpu-idle": {"nope": 1.0}}}))
fast_calls = st.one_of(st.tuples(st.just("analyze"), analyze_args), st.tuples(st.just("ncu_profile"), ncu_args),
                       st.tuples(st.just("nsys_trace"), trace_args),
                       st.tuples(st.just("compare"), compare_args), st.tuples(st.just("sass"), sass_args),
                       st.tuples(st.just("bottleneck_classify"), classify_args))
SEEN = {"calls": 0}


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(fast_calls, min_size=4, max_size=4))
def test_thousand_argument_sets_for_the_profiling_and_report_tools(kernelscope_home: Path,
                                                                    batch: list[tuple[str, dict]]) -> None:
    """250 examples x 4 calls = 1,000 generated argument sets per run, through a real MCP client."""

    async def go() -> None:
        async with Client(mcp) as c:
            for name, args in batch:
                r = await c.call_tool(name, args)
                SEEN["calls"] += 1
                if r.is_error:
                    assert "Internal error" not in _text(r), (name, args, _text(r))
                    assert len(_text(r)) > len(f"Error executing tool {name}: "), _text(r)
                else:
                    assert r.structured_content is not None

    asyncio.run(go())


def test_the_fuzz_above_made_at_least_a_thousand_calls() -> None:
    if SEEN["calls"] == 0:
        import pytest

        pytest.skip("run together with the fuzz test above")
    assert SEEN["calls"] >= 1000
