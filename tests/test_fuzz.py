"""Property-based fuzzing of the CPU tools through a real MCP client: every answer is a result or a
ToolError with a specific message; the server never crashes and writes nothing outside its home."""

from __future__ import annotations

import asyncio
from pathlib import Path

from _servers import tool_text as _text
from hypothesis import HealthCheck, Phase, given, settings
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




@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(calls, min_size=1, max_size=4))
def test_mixed_valid_and_invalid_calls(kernelscope_home: Path, batch: list[tuple[str, dict]]) -> None:
    before = {p for p in Path("/tmp").iterdir() if p.name.startswith("kernelscope")}

    async def go() -> None:
        async with Client(mcp) as c:
            for name, args in batch:
                r = await c.call_tool(name, args)
                SEEN["calls"] += 1
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


# ------------------------------------------------------------------ the CUTLASS source tools
cutlass_search_args = st.fixed_dictionaries({}, optional={
    "query": st.one_of(st.sampled_from(["make_tma_copy", "cute::Layout", "tma multicast", "", " ", "a" * 300,
                                        "x\x00y", "((", "SM90_TMA_LOAD_2D", "%_%", "' OR 1=1 --"]),
                       st.text(max_size=12)),
    "limit": st.one_of(st.integers(-3, 200), junk),
    "kind": st.one_of(st.sampled_from(["any", "definitions", "text", "symbols"]), junk),
    "scope": st.one_of(st.sampled_from(["all", "include", "examples", "tools"]), junk),
    "bogus": junk,
})
cutlass_read_args = st.fixed_dictionaries({}, optional={
    "path": st.one_of(path, st.sampled_from(["include/cute/tensor.hpp", "cute/layout.hpp", "include/../../etc/passwd",
                                             "examples", "include/cute/", "./include/cute/tensor.hpp"])),
    "start_line": st.one_of(st.integers(-5, 10**7), junk),
    "end_line": st.one_of(st.none(), st.integers(-5, 10**7), junk),
    "max_lines": st.one_of(st.integers(-5, 5000), junk),
})
cutlass_calls = st.one_of(st.tuples(st.just("search_cutlass"), cutlass_search_args),
                          st.tuples(st.just("read_cutlass_file"), cutlass_read_args))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(cutlass_calls, min_size=1, max_size=3))
def test_cutlass_tools_answer_or_refuse(kernelscope_home: Path, batch: list[tuple[str, dict]]) -> None:
    async def go() -> None:
        async with Client(mcp) as c:
            for name, args in batch:
                r = await c.call_tool(name, args)
                text = _text(r)
                if r.is_error:
                    assert "Internal error" not in text, (name, args, text)
                    assert len(text) > len(f"Error executing tool {name}: "), text
                else:
                    assert r.structured_content is not None and text

    asyncio.run(go())


def test_the_fuzz_above_made_at_least_a_thousand_calls() -> None:
    if SEEN["calls"] == 0:
        import pytest

        pytest.skip("run together with the fuzz test above")
    assert SEEN["calls"] >= 1000


# ------------------------------------------------------------------ run and capabilities; leaks; the wire
CANARY = "ks-fuzz-canary"
canary_path = st.sampled_from([f"/tmp/{CANARY}.cu", f"../../{CANARY}.py", f"{CANARY}/../../x.py", f"~/{CANARY}.py"])
py_source = st.one_of(st.sampled_from(["", "def (:", "import os\nos.system('touch /tmp/" + CANARY + "')",
                                       "class Model: pass", "x = '\udc80'", "\x00", "print(1)" * 2000]),
                      st.text(max_size=60))
run_args = st.fixed_dictionaries({}, optional={
    "mode": st.one_of(st.sampled_from(["eval", "program", "sandbox"]), junk),
    "reference": py_source, "candidate": py_source,
    "reference_path": st.one_of(path, canary_path), "candidate_path": st.one_of(path, canary_path),
    "device": st.sampled_from(["cuda", "cpu", "tpu", "auto"]),
    "trials": st.one_of(st.integers(-2, 200), junk), "timing_budget_s": st.one_of(st.floats(), junk),
    "tolerance": st.one_of(st.sampled_from(["strict", "loose"]), junk),
    "reference_modes": st.one_of(st.lists(st.sampled_from(["eager", "compile", "jit"]), max_size=3), junk),
    "artifact_id": st.one_of(st.text(max_size=30), st.sampled_from(["0" * 24, "../" * 8])),
    "args": st.one_of(st.lists(st.one_of(flag, st.text(max_size=20)), max_size=4), junk),
    "timeout_s": st.one_of(st.floats(-1, 5000), junk), "kernel_times": junk,
})
caps_args = st.fixed_dictionaries({}, optional={"refresh": st.one_of(st.just(False), junk), "bogus": junk})
every_tool = st.one_of(calls, fast_calls, cutlass_calls, st.tuples(st.just("run"), run_args),
                       st.tuples(st.just("capabilities"), caps_args))


def _job_processes(home: Path) -> list[int]:
    """Live processes whose working directory is a job workspace under ``home``."""
    import os

    marker = str(home / "workspaces") + "/"
    out = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                if os.readlink(f"/proc/{name}/cwd").startswith(marker):
                    stat = Path(f"/proc/{name}/stat").read_bytes()
                    if stat.rsplit(b")", 1)[1].split()[0] not in (b"Z", b"X"):
                        out.append(int(name))
            except (OSError, IndexError):
                continue
    return out


def _canaries() -> list[Path]:
    repo = Path(__file__).resolve().parent.parent
    places = [Path("/tmp"), repo, repo.parent, Path.home()]
    return [p for d in places if d.is_dir() for p in d.iterdir() if CANARY in p.name]


def _check_answer(name: str, args: dict, r) -> None:  # type: ignore[no-untyped-def]
    text = _text(r)
    if r.is_error:
        assert "Internal error" not in text and text.strip() not in GENERIC, (name, args, text)
        assert len(text) > len(f"Error executing tool {name}: "), (name, args, text)
    else:
        assert r.structured_content is not None and text, (name, args)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(st.tuples(st.just("run"), run_args), st.tuples(st.just("capabilities"), caps_args)),
                min_size=1, max_size=3))
def test_run_and_capabilities_answer_or_refuse(kernelscope_home: Path, batch: list[tuple[str, dict]]) -> None:
    async def go() -> None:
        async with Client(mcp) as c:
            for name, args in batch:
                _check_answer(name, args, await c.call_tool(name, args))
                SEEN["calls"] += 1

    asyncio.run(go())
    assert _job_processes(kernelscope_home) == []
    assert _canaries() == []


def _wire_safe(value):  # type: ignore[no-untyped-def]
    """Lone surrogates cannot be encoded as UTF-8 JSON by the client (the in-memory tests above send them)."""
    if isinstance(value, str):
        return value.encode("utf-8", "replace").decode("utf-8")
    if isinstance(value, list | tuple):
        return type(value)(_wire_safe(v) for v in value)
    if isinstance(value, dict):
        return {_wire_safe(k): _wire_safe(v) for k, v in value.items()}
    return value


@settings(max_examples=5, deadline=None, phases=[Phase.generate],  # shrinking would restart servers for minutes
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.lists(every_tool.map(_wire_safe), min_size=60, max_size=60))
def test_every_tool_over_the_stdio_wire(tmp_path_factory, batch: list[tuple[str, dict]]) -> None:  # type: ignore[no-untyped-def]
    """Sixty generated calls of every tool per batch (five batches: 300 calls) through a real stdio
    subprocess, then: the server still answers, no job process is left and nothing was written outside
    its home."""
    import os
    import sys

    from mcp import StdioServerParameters

    home = tmp_path_factory.mktemp("fuzzwire")
    repo = Path(__file__).resolve().parent.parent
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "PYTHONPATH")}
    env["KERNELSCOPE_HOME"] = str(home)
    params = StdioServerParameters(command=sys.executable, args=["-m", "kernelscope", "serve", "--home", str(home),
                                                                 "--root", str(repo), "--no-prewarm"],
                                   env=env, cwd=str(repo))

    async def go() -> None:
        async with Client(params) as c:
            for name, args in batch:
                _check_answer(name, args, await c.call_tool(name, args))
                SEEN["calls"] += 1
            ok = await c.call_tool("compile", {"source": SAXPY})
            assert not ok.is_error and ok.structured_content["success"]

    asyncio.run(go())
    assert _job_processes(home) == []
    assert _canaries() == []


def test_fuzz_count() -> None:
    """How many generated argument sets the tests above sent (shown with `pytest -s`)."""
    if SEEN["calls"] == 0:
        import pytest

        pytest.skip("run together with the fuzz tests above")
    print(f"\nreliability: fuzz: {SEEN['calls']} generated argument sets (not counting the CUTLASS tools' test)")
