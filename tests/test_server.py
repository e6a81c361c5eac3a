"""The MCP surface through real clients: in-memory (2026 era), legacy handshake, stdio subprocess and
streamable HTTP on loopback."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from _servers import start_http
from mcp import Client, StdioServerParameters

from kernelscope.server.app import mcp

pytestmark = pytest.mark.anyio

SAXPY = """
__global__ void saxpy(int n, float a, const float* __restrict__ x, float* __restrict__ y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
"""
TOOLS = {"capabilities", "compile", "sass", "run", "analyze", "ncu_profile", "bottleneck_classify", "compare",
         "nsys_trace"}


@pytest.fixture
async def client() -> AsyncIterator[Client]:
    async with Client(mcp, raise_exceptions=True) as c:
        yield c


def _text(result) -> str:  # type: ignore[no-untyped-def]
    return "\n".join(getattr(b, "text", "") for b in result.content)


async def test_tools_are_listed_with_schemas_and_annotations(client: Client) -> None:
    tools = {t.name: t for t in (await client.list_tools()).tools}
    assert set(tools) >= TOOLS
    for name in TOOLS:
        t = tools[name]
        assert t.description and t.output_schema and t.input_schema["type"] == "object"
        assert t.annotations is not None and t.annotations.open_world_hint is False
    assert tools["sass"].annotations.read_only_hint is True
    assert tools["compile"].annotations.idempotent_hint is True
    assert set(tools["compile"].input_schema["properties"]) >= {"source", "path", "arch", "flags", "output"}


# What a host loads into its model's context: name, title, description and input schema of every tool.
TOOLS_LIST_BUDGET_TOKENS = 8000
OUTPUT_SCHEMAS_BUDGET_CHARS = 80_000  # 95 KB before titles and defaults were dropped; about 72 KB now


async def test_tools_list_stays_within_its_token_budget(client: Client) -> None:
    tools = (await client.list_tools()).tools
    lean = [{"name": t.name, "title": t.title, "description": t.description, "inputSchema": t.input_schema}
            for t in tools]
    tokens = len(json.dumps(lean)) // 4
    assert tokens <= TOOLS_LIST_BUDGET_TOKENS, f"tools/list: about {tokens} tokens"
    outputs = len(json.dumps([t.output_schema for t in tools]))
    assert outputs <= OUTPUT_SCHEMAS_BUDGET_CHARS, f"output schemas: {outputs} characters"
    for t in tools:  # pydantic's generated titles are not published (a property named `title` stays)
        assert '"title": "' not in json.dumps(t.input_schema), t.name


async def test_every_argument_is_declared_once_in_its_request_model(client: Client) -> None:
    """The wire stays flat (no `req` wrapper); each tool's arguments are its request model's argument fields,
    and a parameter shared by several tools has one description everywhere."""
    from kernelscope.models.requests import is_argument
    from kernelscope.server.tools import registry

    listed = {t.name: t for t in (await client.list_tools()).tools}
    assert {t.name for t in registry.tools} == set(listed)
    seen: dict[str, set[str]] = {}
    for name, spec in registry.specs.items():
        props = listed[name].input_schema["properties"]
        assert set(props) == {f.alias or n for n, f in spec.request.model_fields.items() if is_argument(f)}, name
        for arg, schema in props.items():
            seen.setdefault(arg, set()).add(schema.get("description", ""))
    for shared in ("reference", "reference_path", "candidate", "candidate_path", "args", "timeout_s", "thresholds"):
        assert len(seen[shared]) == 1, (shared, seen[shared])
    from kernelscope.models.requests import AnalyzeRequest

    assert {n for n, f in AnalyzeRequest.model_fields.items() if not is_argument(f)} >= {"seed", "gpu", "sass"}
    assert "seed" not in listed["analyze"].input_schema["properties"]


async def test_null_list_arguments_mean_their_default(client: Client) -> None:
    r = await client.call_tool("compile", {"source": SAXPY, "flags": None})
    assert not r.is_error and r.structured_content["success"], _text(r)


def test_lean_schema_keeps_properties_named_title() -> None:
    from kernelscope.server.registry import lean_schema

    schema = {"title": "Finding", "type": "object", "properties": {"title": {"title": "Title", "type": "string"}},
              "$defs": {"X": {"title": "X", "anyOf": [{"title": "Y", "type": "null"}]}}}
    assert lean_schema(schema) == {"type": "object", "properties": {"title": {"type": "string"}},
                                   "$defs": {"X": {"anyOf": [{"type": "null"}]}}}


async def test_compile_then_sass_then_resources(client: Client) -> None:
    r = await client.call_tool("compile", {"source": SAXPY, "arch": "sm_90"})
    assert not r.is_error, _text(r)
    sc = r.structured_content
    assert sc["success"] and sc["kernels"][0]["registers"] > 0
    assert "Compiled OK" in _text(r) and sc["artifact_id"] in _text(r)
    aid = sc["artifact_id"]

    s = await client.call_tool("sass", {"artifact_id": aid})
    assert not s.is_error, _text(s)
    assert s.structured_content["kernels"][0]["instructions"] > 0
    assert "global loads by width" in _text(s)

    src = await client.read_resource(f"kernelscope://artifacts/{aid}/source")
    assert "saxpy" in src.contents[0].text
    listing = await client.read_resource(f"kernelscope://artifacts/{aid}/sass")
    assert "LDG" in listing.contents[0].text
    meta = await client.read_resource(f"kernelscope://artifacts/{aid}")
    assert aid in meta.contents[0].text


async def test_compile_error_is_a_result_not_a_tool_error(client: Client) -> None:
    r = await client.call_tool("compile", {"source": "__global__ void k() { int x = y; }\n"})
    assert not r.is_error
    assert r.structured_content["success"] is False
    assert r.structured_content["diagnostics"][0]["line"] == 1
    assert "Compile FAILED" in _text(r) and "kernel.cu:1" in _text(r)


@pytest.mark.parametrize("args,needle", [
    ({"source": SAXPY, "flags": ["-o", "/tmp/evil"]}, "refused"),
    ({"path": "/etc/passwd"}, "outside the allowed roots"),
    ({"source": SAXPY, "arch": "hopper"}, "not a GPU architecture"),
    ({}, "exactly one"),
    ({"source": SAXPY, "output": "dll"}, "validation error"),
    ({"source": 42}, "validation error"),
])
async def test_bad_compile_input_gives_specific_tool_errors(client: Client, args: dict, needle: str) -> None:
    r = await client.call_tool("compile", args)
    assert r.is_error and needle in _text(r), _text(r)


@pytest.mark.parametrize("args,needle", [
    ({"artifact_id": "nothex"}, "is not an artifact id"),
    ({"artifact_id": "0" * 24}, "No artifact"),
    ({"cubin_base64": "!!!"}, "not valid base64"),
    ({"cubin_base64": "aGVsbG8gd29ybGQ="}, "not a CUDA ELF cubin"),
    ({}, "exactly one"),
])
async def test_bad_sass_input(client: Client, args: dict, needle: str) -> None:
    r = await client.call_tool("sass", args)
    assert r.is_error and needle in _text(r), _text(r)


async def test_missing_resource(client: Client) -> None:
    from mcp import MCPError

    with pytest.raises(MCPError):
        await client.read_resource("kernelscope://artifacts/" + "0" * 24 + "/sass")


async def test_capabilities_tool_and_resource(client: Client) -> None:
    r = await client.call_tool("capabilities", {})
    assert not r.is_error, _text(r)
    sc = r.structured_content
    assert sc["can"]["compile"] is True and any(t["name"] == "nvcc" and t["usable"] for t in sc["tools"])
    assert "nvcc" in _text(r)
    res = await client.read_resource("kernelscope://capabilities")
    assert '"default_arch"' in res.contents[0].text


async def test_legacy_handshake_session() -> None:
    async with Client(mcp, mode="legacy") as c:
        assert c.protocol_version != "2026-07-28"
        r = await c.call_tool("compile", {"source": SAXPY})
        assert not r.is_error and r.structured_content["success"]


async def test_progress_is_reported(client: Client) -> None:
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    await client.call_tool("compile", {"source": SAXPY + "\n// progress\n"}, progress_callback=on_progress)
    # a heartbeat may come in between on a loaded machine (the compile then takes over a second)
    assert seen and seen[0] == (0, None, "compiling with nvcc") and seen[-1][1:] == (seen[-1][0], "compiled")
    assert [m for _, _, m in seen[1:-1] if not m or not m.startswith("compiling with nvcc: ")] == []


HOLD = ("#include <unistd.h>\n#include <cstdlib>\n"
        "int main(int argc, char** argv) { usleep(atoi(argv[1]) * 1000); return 0; }\n")


@pytest.fixture
def one_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """A pool with one GPU id, so program mode and its lease run on a CPU machine (host-only programs)."""
    from kernelscope.sandbox import gpu as gpu_mod

    monkeypatch.setattr(gpu_mod, "_pool", gpu_mod.GpuPool(["0"]))


async def test_every_tool_reports_progress(client: Client, one_gpu: None) -> None:
    """Every tool sends progress when asked: a start at once, strictly increasing values, and an end whose
    total equals its progress. A new tool must be added to the table below."""
    rep = "tests/fixtures/ncu/three-kernels.ncu-rep"
    cubin = await client.call_tool("compile", {"source": SAXPY})
    exe = await client.call_tool("compile", {"source": HOLD, "output": "executable"})
    assert not cubin.is_error and not exe.is_error
    exe_id = exe.structured_content["artifact_id"]
    calls = {
        "capabilities": {},
        "compile": {"source": SAXPY + "// progress of every tool\n"},
        "sass": {"artifact_id": cubin.structured_content["artifact_id"]},
        "run": {"mode": "program", "artifact_id": exe_id, "args": ["10"]},
        "analyze": {"artifact_id": exe_id},
        "ncu_profile": {"artifact_id": exe_id},
        "nsys_trace": {"artifact_id": exe_id},
        "bottleneck_classify": {"report_path": rep},
        "compare": {"before_report": rep, "after_report": rep, "before_kernel": "strided", "after_kernel": "coalesced"},
        "search_cutlass": {"query": "make_tma_copy", "limit": 2},
        "read_cutlass_file": {"path": "include/cute/tensor.hpp", "max_lines": 5},
    }
    tools = {t.name for t in (await client.list_tools()).tools}
    assert set(calls) == tools, "add the new tool to this table"
    for name, args in calls.items():
        seen: list[tuple[float, float | None, str | None]] = []

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            seen.append((progress, total, message))  # noqa: B023 (consumed before the next iteration)

        r = await client.call_tool(name, args, progress_callback=on_progress)
        assert seen and seen[0][0] == 0 and seen[0][2], (name, seen)
        values = [v for v, _, _ in seen]
        assert all(a < b for a, b in itertools.pairwise(values)), (name, seen)
        if not r.is_error:  # a refusal (no GPU, no ncu, no CUTLASS here) ends without the final notification
            assert seen[-1][1] == seen[-1][0] and len(seen) >= 2, (name, seen)


async def test_long_calls_send_a_heartbeat(client: Client, one_gpu: None) -> None:
    """A call that runs for seconds sends progress at least once a second while it runs."""
    exe = await client.call_tool("compile", {"source": HOLD, "output": "executable"})
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    r = await client.call_tool("run", {"mode": "program", "artifact_id": exe.structured_content["artifact_id"],
                                       "args": ["3200"]}, progress_callback=on_progress)
    assert not r.is_error and r.structured_content["program"]["exit_status"] == 0
    beats = [m for _, _, m in seen if m and m.startswith("running the program job: ")]
    assert len(beats) >= 2, seen
    assert seen[-1][1] == seen[-1][0] == len(seen) - 1


def _serve_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "PYTHONPATH")}
    env["KERNELSCOPE_HOME"] = str(home)
    return env


async def test_stdio_subprocess_session(tmp_path: Path) -> None:
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "kernelscope", "serve", "--home", str(tmp_path), "--root", str(tmp_path)],
        env=_serve_env(tmp_path), cwd=str(tmp_path),
    )
    (tmp_path / "k.cu").write_text(SAXPY)
    async with Client(params) as c:
        names = {t.name for t in (await c.list_tools()).tools}
        assert names >= TOOLS
        r = await c.call_tool("compile", {"path": "k.cu"})
        assert not r.is_error and r.structured_content["success"], _text(r)
        bad = await c.call_tool("compile", {"path": "/etc/passwd"})
        assert bad.is_error  # and the server is still there:
        again = await c.call_tool("compile", {"path": "k.cu"})
        assert again.structured_content["cache_hit"] is True


def _start_http(tmp_path: Path, *extra: str) -> tuple[subprocess.Popen, int]:
    """`kernelscope serve --transport http` on a free loopback port, once it accepts connections."""
    return start_http(tmp_path, tmp_path, _serve_env(tmp_path), *extra)


async def test_streamable_http_session(tmp_path: Path) -> None:
    proc, port = _start_http(tmp_path)
    try:
        async with Client(f"http://127.0.0.1:{port}/mcp") as c:
            r = await c.call_tool("compile", {"source": SAXPY})
            assert not r.is_error and r.structured_content["success"]
            caps = await c.call_tool("capabilities", {})
            assert not caps.is_error
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_http_refuses_non_loopback_bind(capsys: pytest.CaptureFixture[str]) -> None:
    from kernelscope.cli import main

    assert main(["serve", "--transport", "http", "--host", "0.0.0.0", "--port", "1", "--no-prewarm"]) == 2
    assert "without a bearer token" in capsys.readouterr().err


def test_http_token_must_be_long_enough(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    from kernelscope.cli import main

    (tmp_path / "tok").write_text("short\n")
    assert main(["serve", "--transport", "http", "--host", "0.0.0.0", "--port", "1", "--no-prewarm",
                 "--token-file", str(tmp_path / "tok")]) == 2
    assert "at least 16 characters" in capsys.readouterr().err


INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}
JSON_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def _post(url: str, body: dict, headers: dict) -> tuple[int, dict, str]:
    """One HTTP POST (urllib sends the given Host header instead of the URL's)."""
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers=headers, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=20) as r:
            return r.status, dict(r.headers), r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read().decode()


def test_http_bearer_token_and_origin_are_enforced(tmp_path: Path) -> None:
    """A server started with a token: no token or a wrong one -> 401; the right one -> MCP answers; a
    foreign browser Origin -> refused even with the token (DNS-rebinding protection)."""
    token = "t0ken-" + "x" * 26
    (tmp_path / "tok").write_text(token + "\n")
    proc, port = _start_http(tmp_path, "--no-prewarm", "--token-file", str(tmp_path / "tok"))
    url = f"http://127.0.0.1:{port}/mcp"
    init, base, post = INIT, JSON_HEADERS, _post
    try:
        assert post(url, init, base)[0] == 401
        code, headers, _ = post(url, init, {**base, "Authorization": "Bearer wrong-token-wrong-token"})
        assert code == 401 and headers.get("www-authenticate") == "Bearer"
        code, _, text = post(url, init, {**base, "Authorization": f"Bearer {token}"})
        assert code == 200 and "serverInfo" in text, text
        code, _, _ = post(url, init, {**base, "Authorization": f"Bearer {token}", "Origin": "http://evil.example"})
        assert code in (400, 403), code
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_http_on_all_interfaces_with_a_token_answers_any_host(tmp_path: Path) -> None:
    """The README's remote command (`--host 0.0.0.0 --token-file ...`) answers clients that reach it by a
    name of the machine (it used to answer 421 Invalid Host header); the token and browser Origins are
    still checked, and the server says where it listens, on stderr."""
    token = "t0ken-" + "y" * 26
    (tmp_path / "tok").write_text(token + "\n")
    proc, port = _start_http(tmp_path, "--no-prewarm", "--host", "0.0.0.0", "--token-file", str(tmp_path / "tok"))
    url = f"http://127.0.0.1:{port}/mcp"
    auth = {**JSON_HEADERS, "Authorization": f"Bearer {token}"}
    try:
        for host in (f"gpu-box.example.org:{port}", f"10.1.2.3:{port}", "gpu-box"):
            code, _, text = _post(url, INIT, {**auth, "Host": host})
            assert code == 200 and "serverInfo" in text, (host, code, text)
        assert _post(url, INIT, {**JSON_HEADERS, "Host": f"gpu-box:{port}"})[0] == 401
        assert _post(url, INIT, {**auth, "Origin": "http://evil.example"})[0] == 403
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    err = proc.stderr.read().decode() if proc.stderr else ""
    assert f"serving MCP over HTTP at http://0.0.0.0:{port}/mcp (all interfaces" in err, err
    assert "Authorization: Bearer <token>" in err


def test_http_on_loopback_keeps_dns_rebinding_protection(tmp_path: Path) -> None:
    proc, port = _start_http(tmp_path, "--no-prewarm")
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        assert _post(url, INIT, {**JSON_HEADERS, "Host": f"rebound.example:{port}"})[0] == 421
        assert _post(url, INIT, JSON_HEADERS)[0] == 200
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    err = proc.stderr.read().decode() if proc.stderr else ""
    assert f"serving MCP over HTTP at http://127.0.0.1:{port}/mcp" in err, err


def test_stdio_serve_says_so_on_stderr_only(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, "-m", "kernelscope", "serve", "--no-prewarm", "--home", str(tmp_path),
                          "--root", str(tmp_path)], input=b"", capture_output=True, env=_serve_env(tmp_path),
                         cwd=str(tmp_path), timeout=120)
    assert out.stdout == b""
    assert b"serving MCP over stdio" in out.stderr, out.stderr[-2000:]


def test_cli_version() -> None:
    out = subprocess.run([sys.executable, "-m", "kernelscope", "--version"], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.startswith("kernelscope ")


REF = (Path(__file__).parent / "evalcases" / "ref_softmax.py").read_text()
CAND = (Path(__file__).parent / "evalcases" / "ok_softmax.py").read_text()


async def test_run_eval_through_mcp(client: Client) -> None:
    pytest.importorskip("torch", reason="the eval harness needs torch")
    seen: list[str | None] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append(message)

    r = await client.call_tool("run", {"mode": "eval", "reference": REF, "candidate": CAND, "device": "cpu",
                                       "trials": 2, "timing_budget_s": 0.2}, progress_callback=on_progress)
    assert not r.is_error, _text(r)
    assert r.structured_content["mode"] == "eval" and r.structured_content["program"] is None
    sc = r.structured_content["eval"]
    assert sc["correctness"]["correct"] and sc["verdict"] in ("faster", "slower", "inconclusive")
    assert sc["speedups"][0]["baseline"] == "eager" and sc["timings"]["candidate"]["runs"] >= 3
    text = _text(r)
    assert text.startswith("Verdict: ") and "Correctness: 2/2 trials passed" in text and "Speedup vs eager" in text
    assert seen and seen[-1] == sc["verdict"]


async def test_run_reports_cheats_and_bad_input(client: Client) -> None:
    pytest.importorskip("torch", reason="the eval harness needs torch")
    cheat = ("import torch\nclass ModelNew(torch.nn.Module):\n"
             "    def forward(self, x):\n        return torch.softmax(x, 1)\n")
    r = await client.call_tool("run", {"reference": REF, "candidate": cheat, "device": "cpu", "trials": 1,
                                       "timing_budget_s": 0.1})
    assert not r.is_error and r.structured_content["eval"]["verdict"] == "invalid"
    assert "[INVALID] reference-ops" in _text(r)
    bad = await client.call_tool("run", {"reference": REF, "device": "cpu"})
    assert bad.is_error and "exactly one" in _text(bad)
    syntax = await client.call_tool("run", {"reference": REF, "candidate": "def (:", "device": "cpu"})
    assert syntax.is_error and "syntax error" in _text(syntax)
    prog = await client.call_tool("run", {"mode": "program"})
    assert prog.is_error and "artifact_id" in _text(prog)


async def test_bottleneck_classify_on_a_recorded_report(client: Client) -> None:
    r = await client.call_tool("bottleneck_classify", {"report_path": "tests/fixtures/ncu/three-kernels.ncu-rep"})
    assert not r.is_error, _text(r)
    classes = {k["name"].split("(")[0]: k["bottleneck"]["cls"] for k in r.structured_content["kernels"]}
    assert classes == {"copy_coalesced": "memory-bound", "copy_strided": "memory-bound",
                       "fma_heavy": "compute-bound"}
    text = _text(r)
    assert "Uncoalesced global memory access" in text and "k.cu:3" in text and "COMPUTE-BOUND" in text
    one = await client.call_tool("bottleneck_classify", {"report_path": "tests/fixtures/ncu/three-kernels.ncu-rep",
                                                         "kernel": "fma"})
    assert len(one.structured_content["kernels"]) == 1


async def test_bottleneck_classify_analytic_ceiling(client: Client) -> None:
    # softmax over 4096x4096 fp32: read and write 64 MiB each
    r = await client.call_tool("bottleneck_classify", {"flops": 5 * 4096 * 4096, "dram_bytes": 2 * 4 * 4096 * 4096,
                                                       "time_us": 100.0})
    assert not r.is_error, _text(r)
    a = r.structured_content["analytic"]
    assert abs(a["roofline_time_ns"] - 2 * 4 * 4096 * 4096 / 3350) < 1 and 0.3 < a["fraction_of_roofline"] < 0.5
    assert "Roofline ceiling" in _text(r)


@pytest.mark.parametrize("args,needle", [
    ({}, "Give `flops`"),
    ({"report_path": "/etc/passwd"}, "outside the allowed roots"),
    ({"report_path": "README.md"}, "not an .ncu-rep"),
    ({"report_path": "tests/fixtures/ncu/three-kernels.ncu-rep", "kernel": "("}, "not a valid regular"),
    ({"report_path": "tests/fixtures/ncu/three-kernels.ncu-rep", "kernel": "nomatch"}, "No kernel"),
    ({"flops": 1.0, "gpu": "Voodoo 3"}, "No peak table"),
])
async def test_bottleneck_classify_bad_input(client: Client, args: dict, needle: str) -> None:
    r = await client.call_tool("bottleneck_classify", args)
    assert r.is_error and needle in _text(r), _text(r)


async def test_compare_strided_then_coalesced(client: Client) -> None:
    rep = "tests/fixtures/ncu/three-kernels.ncu-rep"
    r = await client.call_tool("compare", {"before_report": rep, "after_report": rep,
                                           "before_kernel": "strided", "after_kernel": "coalesced"})
    assert not r.is_error, _text(r)
    sc = r.structured_content
    assert sc["speedup"] > 10
    assert "memory.uncoalesced-global-access" in {f["rule"] for f in sc["resolved"]}
    d = {x["metric"]: x for x in sc["deltas"]}
    assert d["global_load_sectors_per_request"]["before"] == 32 and d["global_load_sectors_per_request"]["after"] == 4
    assert d["global_load_sectors_per_request"]["better"] is True and d["duration_ns"]["better"] is True
    assert "Resolved: Uncoalesced global memory access" in _text(r)
    bad = await client.call_tool("compare", {"before_report": rep, "after_report": rep})
    assert bad.is_error and "exactly one kernel" in _text(bad)


@pytest.mark.parametrize(("tool", "args", "needle"), [
    ("analyze", {}, "Give a target"),
    ("ncu_profile", {}, "Give a target"),
    ("analyze", {"artifact_id": "0" * 24, "thresholds": {"launch.nope": {"x": 1}}}, "No rule 'launch.nope'"),
    ("ncu_profile", {"artifact_id": "0" * 24, "sections": ["Speed Of Light"]}, "section identifiers"),
    ("ncu_profile", {"artifact_id": "0" * 24, "kernel_regex": "("}, "not a valid regular expression"),
])
async def test_profiling_tools_refuse_bad_input(client: Client, tool: str, args: dict, needle: str) -> None:
    r = await client.call_tool(tool, args)
    assert r.is_error and needle in _text(r), _text(r)


async def test_analyze_without_ncu_or_gpu_is_explained(client: Client) -> None:
    from kernelscope.measure.capture import ncu_binary as _ncu_binary

    try:
        _ncu_binary()
    except Exception:
        pass
    else:
        pytest.skip("ncu is installed here; this covers hosts without it")
    # Nsight Compute asked for (or needed: eval mode, no CUPTI) and missing: said before anything runs
    r = await client.call_tool("analyze", {"artifact_id": "0" * 24, "light": "ncu"})
    assert r.is_error and "ncu" in _text(r) and "Nsight Compute" in _text(r), _text(r)
    # by default a program needs no ncu (CUPTI measures it): the unknown artifact is what is wrong here
    r = await client.call_tool("analyze", {"artifact_id": "0" * 24})
    assert r.is_error and "No artifact with id" in _text(r), _text(r)
