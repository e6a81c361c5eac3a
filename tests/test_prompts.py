"""MCP prompts (issue 27, item 7) through real MCP clients: in-memory (2026 era), the legacy handshake and a
stdio subprocess. Listed with their arguments, rendered into messages that name tools the server has, and
bad arguments refused with -32602 and a sentence that says what to send."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from mcp import Client, MCPError, StdioServerParameters
from mcp.types import INVALID_PARAMS

from kernelscope.server.app import mcp

pytestmark = pytest.mark.anyio
LOOP_TOOLS = {"capabilities", "bottleneck_classify", "analyze", "run", "compare"}
REFERENCE = (Path(__file__).parent / "agentcases" / "chunked_sum" / "reference.py").read_text()
SAXPY = "__global__ void saxpy(int n, float a, const float* x, float* y) {\n" \
        "  int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = a * x[i] + y[i];\n}\n"


@pytest.fixture
async def client() -> AsyncIterator[Client]:
    async with Client(mcp, raise_exceptions=True) as c:
        yield c


def text_of(result) -> str:  # type: ignore[no-untyped-def]
    assert result.messages and all(m.role == "user" for m in result.messages)
    return "\n".join(m.content.text for m in result.messages)


async def tool_names(client: Client) -> set[str]:
    return {t.name for t in (await client.list_tools()).tools}


def named(text: str, tools: set[str]) -> set[str]:
    """The tools a prompt names (`name` in backticks)."""
    return {w for w in re.findall(r"`([a-z_]+)`", text) if w in tools}


async def test_prompts_are_listed_with_their_arguments(client: Client) -> None:
    prompts = {p.name: p for p in (await client.list_prompts()).prompts}
    assert set(prompts) == {"optimize-kernel", "diagnose-kernel", "explain-finding"}
    args = {n: [(a.name, a.required) for a in p.arguments or []] for n, p in prompts.items()}
    # in the order a host that takes positional arguments (Claude Code's slash commands) fills them
    assert args["optimize-kernel"] == [("problem", True), ("target", False), ("budget", False), ("candidate", False)]
    assert args["diagnose-kernel"] == [("source", True), ("arch", False)]
    assert args["explain-finding"] == [("rule", True), ("finding", False)]
    for p in prompts.values():
        assert p.title and p.description and all(a.description for a in p.arguments or [])


async def test_optimize_kernel_walks_the_loop_with_real_tools(client: Client) -> None:
    tools = await tool_names(client)
    r = await client.get_prompt("optimize-kernel", {"problem": "problems/level1/sum.py", "target": "2x",
                                                    "budget": "5"})
    text = text_of(r)
    assert named(text, tools) >= LOOP_TOOLS | {"search_cutlass", "read_cutlass_file"}
    assert 'reference_path="problems/level1/sum.py"' in text and "at least 2x faster" in text
    assert "at most 5 candidates" in text
    for rule in ("Trust the verdict", "Never delegate the main op", "Follow the top finding",
                 "Confirm before claiming"):
        assert rule in text
    # the order of the loop: classify, analyze, write, run, compare, iterate, confirm
    steps = [text.index(s) for s in ("1. `capabilities`", "2. Classify", "3. Write a candidate", "4. `run`",
                                     "`compare`", "6. Iterate", "7. Confirm")]
    assert steps == sorted(steps)


async def test_optimize_kernel_takes_pasted_sources(client: Client) -> None:
    start = "import torch\n\nclass ModelNew(torch.nn.Module):\n    pass\n"
    text = text_of(await client.get_prompt("optimize-kernel", {"problem": REFERENCE, "candidate": start}))
    assert "`reference` (the source below)" in text and REFERENCE.strip() in text and start.strip() in text
    assert "as fast as you can" in text and "at most 8 candidates" in text  # the defaults


async def test_diagnose_and_explain(client: Client) -> None:
    tools = await tool_names(client)
    text = text_of(await client.get_prompt("diagnose-kernel", {"source": SAXPY, "arch": "sm_90a"}))
    assert named(text, tools) >= {"capabilities", "compile", "sass", "run", "analyze", "nsys_trace"}
    assert SAXPY.strip() in text and 'arch="sm_90a"' in text
    text = text_of(await client.get_prompt("diagnose-kernel", {"source": "kernels/gemm.cu"}))
    assert 'path="kernels/gemm.cu"' in text
    finding = "memory.uncoalesced-global-access (high, k at k.cu:12): 4.0 sectors per request, threshold 1.5"
    text = text_of(await client.get_prompt("explain-finding", {"rule": "memory.uncoalesced-global-access",
                                                               "finding": finding}))
    assert "Rule memory.uncoalesced-global-access (family memory" in text and finding in text
    assert "Thresholds (defaults" in text and named(text, tools) >= {"run", "analyze", "compare"}
    general = text_of(await client.get_prompt("explain-finding", {"rule": "memory.dram-saturated"}))
    assert "No finding was given" in general


@pytest.mark.parametrize(("name", "args", "needle"), [
    ("optimize-kernel", {}, "optimize-kernel needs `problem`"),
    ("optimize-kernel", {"problem": "  "}, "needs `problem`"),
    ("optimize-kernel", {"problem": "p.py", "speed": "2"}, "unknown argument(s): speed"),
    ("optimize-kernel", {"problem": "p.txt"}, "`problem` must be a path to a .py file"),
    ("optimize-kernel", {"problem": "import torch\nx = 1\n"}, "it must contain 'class Model', 'get_inputs'"),
    ("optimize-kernel", {"problem": "p.py", "target": "fast"}, "`target` is the speedup"),
    ("optimize-kernel", {"problem": "p.py", "target": "0.5"}, "a number above 1"),
    ("optimize-kernel", {"problem": "p.py", "budget": "0"}, "`budget` is the number of candidates"),
    ("optimize-kernel", {"problem": "p.py", "budget": "500"}, "from 1 to 50"),
    ("optimize-kernel", {"problem": "p.py", "candidate": "import torch\n"}, "it must contain 'ModelNew'"),
    ("optimize-kernel", {"problem": "x" * 300_000}, "paste at most 200,000"),
    ("diagnose-kernel", {"source": "int main() {}\n"}, "CUDA C++ with a __global__ kernel"),
    ("diagnose-kernel", {"source": "k.cu", "arch": "sm90"}, "`arch` is a CUDA architecture"),
    ("explain-finding", {"rule": "memory.uncoalesced"}, "Did you mean memory.uncoalesced-global-access"),
    ("explain-finding", {"rule": "nonsense"}, "is not a kernelscope rule id"),
    ("no-such-prompt", {}, "the prompts are optimize-kernel, diagnose-kernel, explain-finding"),
])
async def test_bad_arguments_are_refused_clearly(client: Client, name: str, args: dict[str, str],
                                                 needle: str) -> None:
    with pytest.raises(MCPError) as e:
        await client.get_prompt(name, args)
    assert e.value.error.code == INVALID_PARAMS and needle in e.value.error.message, e.value.error.message


async def test_legacy_handshake_and_stdio(tmp_path: Path) -> None:
    async with Client(mcp, mode="legacy") as c:
        names = {p.name for p in (await c.list_prompts()).prompts}
        assert "optimize-kernel" in names
        text = text_of(await c.get_prompt("explain-finding", {"rule": "memory.shared-bank-conflicts"}))
        assert "memory.shared-bank-conflicts" in text
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "PYTHONPATH")}
    params = StdioServerParameters(command=sys.executable, args=["-m", "kernelscope", "serve", "--home", str(tmp_path)],
                                   env=env | {"KERNELSCOPE_HOME": str(tmp_path)}, cwd=str(tmp_path))
    async with Client(params) as c:
        tools = await tool_names(c)
        text = text_of(await c.get_prompt("optimize-kernel", {"problem": "ref.py"}))
        assert named(text, tools) >= LOOP_TOOLS
        with pytest.raises(MCPError, match="`budget` is the number"):
            await c.get_prompt("optimize-kernel", {"problem": "ref.py", "budget": "lots"})


def test_a_prompt_cannot_name_a_missing_tool() -> None:
    from kernelscope.server.prompts import tool

    assert tool("run") == "`run`"
    with pytest.raises(AssertionError, match="does not have: profile_everything"):
        tool("profile_everything")
