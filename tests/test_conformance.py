"""Conformance with MCP clients nobody here wrote.

* The official MCP Inspector CLI against the stdio server, in both protocol eras (legacy = 2025-11-25,
  modern = 2026-07-28): initialize, tools/list (with its schema-portability lint), a call of every tool
  that works on a CPU machine (and the GPU tools' refusals where there is no GPU), a refused input, and
  resources/read of the capabilities and of an artifact.
* The official conformance suite against `kernelscope serve --transport http`, for the 2025-11-25 and
  2026-07-28 requirement sets. The scenarios that do not apply to an application server (they call the
  suite's own fixture tools, prompts and resources, or features this server does not offer) are listed
  in tests/fixtures/conformance/expected-failures-*.yml with the reason, as the suite's own baseline
  mechanism: such a scenario must fail, every other one must pass, and a listed one that starts passing
  fails the run (a stale baseline).

`.ci/conformance` installs Node 22, the Inspector and the suite from the npm registry and runs this file
with KERNELSCOPE_MCP_TOOLS pointing at them; elsewhere it is skipped with that reason.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from _servers import http_server as serve_http

REPO = Path(__file__).resolve().parent.parent
TOOLS_DIR = os.environ.get("KERNELSCOPE_MCP_TOOLS")
pytestmark = pytest.mark.skipif(not TOOLS_DIR, reason="needs Node >= 22 with the MCP Inspector and the conformance "
                                                      "suite: run .ci/conformance, which installs them")
BASELINES = Path(__file__).parent / "fixtures" / "conformance"
REPORT = "tests/fixtures/ncu/three-kernels.ncu-rep"
ERAS = {"legacy": "2025-11-25", "modern": "2026-07-28"}
ALL_TOOLS = {"capabilities", "compile", "sass", "run", "analyze", "ncu_profile", "nsys_trace", "bottleneck_classify",
             "compare", "search_cutlass", "read_cutlass_file"}


def _node_env(home: Path) -> dict[str, str]:
    """PATH with Node 22 first; HOME (where the Inspector keeps its catalog) in the test's own directory."""
    assert TOOLS_DIR is not None
    modules = Path(TOOLS_DIR) / "node_modules"
    node_bins = [str(p / "bin") for p in modules.glob("node-linux-*") if (p / "bin" / "node").exists()]
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "PYTHONPATH", "CUDA_HOME", "LD_LIBRARY_PATH")}
    env["PATH"] = os.pathsep.join([*node_bins, str(modules / ".bin"), env.get("PATH", "")])
    env["HOME"] = str(home)
    return env


class Inspector:
    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.home = tmp / "kshome"  # one artifact store for every call: an id from one call works in the next
        (tmp / "inspector-home").mkdir(exist_ok=True)
        self.env = _node_env(tmp / "inspector-home")
        assert TOOLS_DIR is not None
        self.bin = str(Path(TOOLS_DIR) / "node_modules" / ".bin" / "mcp-inspector")

    def __call__(self, era: str, *args: str) -> tuple[int, dict | None, str]:
        # the Inspector starts the server with an environment of its own: pass PYTHONPATH on, so the server is
        # the tree under test even where kernelscope is installed from another checkout
        pythonpath = ["-e", f"PYTHONPATH={os.environ['PYTHONPATH']}"] if os.environ.get("PYTHONPATH") else []
        argv = [self.bin, "--cli", sys.executable, "-m", "kernelscope", "serve", "--home", str(self.home),
                "--root", str(REPO), "--no-prewarm", "--", *pythonpath, "--protocol-era", era, "--format", "json", "-q",
                *args]
        p = subprocess.run(argv, capture_output=True, text=True, timeout=300, cwd=REPO, env=self.env)
        try:
            result = json.loads(p.stdout)["result"] if p.stdout.strip() else None
        except (ValueError, KeyError, TypeError):
            result = None
        return p.returncode, result, p.stderr + p.stdout[:2000]

    def call(self, era: str, tool: str, args: dict) -> tuple[int, dict | None, str]:
        return self(era, "--method", "tools/call", "--tool-name", tool, "--tool-args-json", json.dumps(args))


@pytest.fixture(scope="module")
def inspector(tmp_path_factory: pytest.TempPathFactory) -> Inspector:
    return Inspector(tmp_path_factory.mktemp("inspector"))


def _text(result: dict) -> str:
    return "\n".join(b.get("text", "") for b in result.get("content", []))


def _gpu_here() -> bool:
    from kernelscope.sandbox.gpu import GpuPool

    return len(GpuPool.from_environment()) > 0


@pytest.mark.parametrize("era", ERAS)
def test_inspector_initialize_and_list_tools(inspector: Inspector, era: str) -> None:
    code, result, err = inspector(era, "--method", "initialize")
    assert code == 0 and result, err
    assert result["protocolVersion"] == ERAS[era] and result["serverInfo"]["name"] == "kernelscope", result
    code, result, err = inspector(era, "--method", "tools/list", "--strict")  # exit 6 on a schema portability error
    assert code == 0 and result, err
    tools = {t["name"]: t for t in result["tools"]}
    assert set(tools) == ALL_TOOLS
    assert all(t.get("outputSchema") and t["inputSchema"]["type"] == "object" for t in tools.values())


@pytest.mark.parametrize("era", ERAS)
def test_inspector_calls_every_cpu_tool(inspector: Inspector, era: str) -> None:
    code, r, err = inspector.call(era, "compile", {"path": "examples/kernels/copy_float4.cu"})
    assert code == 0 and r and r["structuredContent"]["success"], err
    aid = r["structuredContent"]["artifact_id"]
    assert aid in _text(r)

    code, r, err = inspector.call(era, "sass", {"artifact_id": aid})
    assert code == 0 and r, err
    k = r["structuredContent"]["kernels"][0]
    assert k["name"].startswith("copy_float4") and "global loads by width" in _text(r)

    code, r, err = inspector.call(era, "capabilities", {})
    assert code == 0 and r and r["structuredContent"]["can"]["compile"] is True, err

    code, r, err = inspector.call(era, "bottleneck_classify", {"report_path": REPORT})
    assert code == 0 and r, err
    classes = {k["name"].split("(")[0]: k["bottleneck"]["cls"] for k in r["structuredContent"]["kernels"]}
    assert classes == {"copy_coalesced": "memory-bound", "copy_strided": "memory-bound", "fma_heavy": "compute-bound"}

    code, r, err = inspector.call(era, "compare", {"before_report": REPORT, "after_report": REPORT,
                                                   "before_kernel": "strided", "after_kernel": "coalesced"})
    assert code == 0 and r and r["structuredContent"]["speedup"] > 10, err

    code, r, err = inspector.call(era, "search_cutlass", {"query": "make_tma_copy", "limit": 3})
    if code == 0:  # CUTLASS installed (CI installs the cutlass extra)
        assert r and r["structuredContent"]["hits"], err
        hit = r["structuredContent"]["hits"][0]["path"]
        code, r, err = inspector.call(era, "read_cutlass_file", {"path": hit, "max_lines": 5})
        assert code == 0 and r and _text(r), err
    else:  # exit 5: a tool error, which must say what is missing
        assert code == 5 and "CUTLASS" in err, err

    try:
        import torch  # noqa: F401
    except ImportError:
        pass
    else:
        ref = (REPO / "tests" / "evalcases" / "ref_softmax.py").read_text()
        cand = (REPO / "tests" / "evalcases" / "ok_softmax.py").read_text()
        code, r, err = inspector.call(era, "run", {"reference": ref, "candidate": cand, "device": "cpu", "trials": 2,
                                                   "timing_budget_s": 0.1})
        assert code == 0 and r and r["structuredContent"]["eval"]["correctness"]["correct"], err

    code, r, err = inspector.call(era, "compile", {"path": "/etc/passwd"})  # a refusal is a tool error: exit 5
    assert code == 5 and "outside the allowed roots" in err, err

    if not _gpu_here():  # the GPU tools answer with what is missing and the fix, as tool errors
        for tool, args in (("run", {"mode": "program", "artifact_id": aid}), ("analyze", {"artifact_id": aid}),
                           ("ncu_profile", {"artifact_id": aid}), ("nsys_trace", {"artifact_id": aid})):
            code, r, err = inspector.call(era, tool, args)
            assert code == 5 and re.search(r"not an executable|GPU|ncu|Nsight", err), (tool, err)

    code, r, err = inspector(era, "--method", "resources/read", "--uri", "kernelscope://capabilities")
    assert code == 0 and r and '"default_arch"' in r["contents"][0]["text"], err
    code, r, err = inspector(era, "--method", "resources/read", "--uri", f"kernelscope://artifacts/{aid}/source")
    assert code == 0 and r and "copy_float4" in r["contents"][0]["text"], err


@pytest.mark.parametrize("era", ERAS)
def test_inspector_lists_and_gets_prompts(inspector: Inspector, era: str) -> None:
    """The prompts through the Inspector: listed with their arguments, rendered, a bad argument refused."""
    code, result, err = inspector(era, "--method", "prompts/list")
    assert code == 0 and result, err
    prompts = {p["name"]: p for p in result["prompts"]}
    assert set(prompts) == {"optimize-kernel", "diagnose-kernel", "explain-finding"}
    assert [a["name"] for a in prompts["optimize-kernel"]["arguments"]] == ["problem", "target", "budget", "candidate"]
    code, result, err = inspector(era, "--method", "prompts/get", "--prompt-name", "optimize-kernel", "--prompt-args",
                                  "problem=tests/evalcases/ref_softmax.py", "target=2x")
    assert code == 0 and result, err
    text = result["messages"][0]["content"]["text"]
    assert 'reference_path="tests/evalcases/ref_softmax.py"' in text and "`run`" in text and "`analyze`" in text
    code, result, err = inspector(era, "--method", "prompts/get", "--prompt-name", "optimize-kernel", "--prompt-args",
                                  "problem=tests/evalcases/ref_softmax.py", "budget=lots")
    assert code != 0 and "`budget` is the number of candidates" in err, err


# ----------------------------------------------------------------------------------- the conformance suite
@pytest.fixture(scope="module")
def http_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    tmp = tmp_path_factory.mktemp("conformance-server")
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "PYTHONPATH")}
    with (tmp / "server.log").open("wb") as log, serve_http(tmp / "home", REPO, env, "--no-prewarm", stderr=log) as url:
        yield url


def _baseline(revision: str) -> list[str]:
    return [ln.split("#")[0].strip()[2:].strip() for ln in (BASELINES / f"expected-failures-{revision}.yml")
            .read_text().splitlines() if ln.strip().startswith("- ")]


@pytest.mark.parametrize("revision", ["2025-11-25", "2026-07-28"])
def test_conformance_suite(http_url: str, revision: str, tmp_path: Path) -> None:
    assert TOOLS_DIR is not None
    out = tmp_path / "results"
    argv = [str(Path(TOOLS_DIR) / "node_modules" / ".bin" / "conformance"), "server", "--url", http_url,
            "--requirements", revision, "--expected-failures", str(BASELINES / f"expected-failures-{revision}.yml"),
            "-o", str(out)]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=600, cwd=tmp_path, env=_node_env(tmp_path))
    summary = p.stdout[p.stdout.rfind("=== SUMMARY ==="):]
    assert p.returncode == 0, summary + p.stderr[-3000:]
    passed = set(re.findall(r"^✓ ([\w-]+):", summary, re.M))
    failed = set(re.findall(r"^✗ ([\w-]+):", summary, re.M))
    listed = _baseline(revision)
    whole = {e for e in listed if ":" not in e}
    # every failure is a listed (not applicable) scenario, or a scenario with only listed checks failing
    partly = {e.split(":")[0] for e in listed if ":" in e}
    assert failed <= whole | partly | _not_scored(summary), failed - whole - partly
    total = re.search(r"^Total: .*$", summary, re.M)
    print(f"\nconformance {revision}: {len(passed)} scenarios passed, {len(failed)} failed as listed (not "
          f"applicable); checks: {total.group(0) if total else '?'}")


def _not_scored(summary: str) -> set[str]:
    """Scenarios the requirement set runs without scoring (extensions, pending): they cannot fail a run."""
    block = summary[summary.find("Not scored"):] if "Not scored" in summary else ""
    return set(re.findall(r"^\s+✗ ([\w-]+) \(", block, re.M))


def test_inspector_load_over_http(http_url: str, tmp_path: Path) -> None:
    """The Inspector's own load mode against the HTTP transport: 200 compile calls, 8 in flight at once."""
    assert TOOLS_DIR is not None
    argv = [str(Path(TOOLS_DIR) / "node_modules" / ".bin" / "mcp-inspector"), "--cli", "--transport", "http",
            "--server-url", http_url, "--method", "tools/call", "--tool-name", "compile", "--tool-args-json",
            json.dumps({"path": "examples/kernels/copy_float4.cu"}), "--load", "--load-concurrency", "8",
            "--load-requests", "200"]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=600, cwd=REPO, env=_node_env(tmp_path))
    assert p.returncode == 0, p.stderr[-3000:]
    stats = json.loads(p.stdout[p.stdout.find("{"):])
    assert stats["requests"] == stats["ok"] == 200 and stats["errors"] == 0 and stats["toolErrors"] == 0, stats
    print(f"\ninspector load: {stats['ok']} of {stats['requests']} ok at concurrency 8, {stats['throughput']:.0f}/s, "
          f"p50 {stats['latencyMs']['p50']:.0f} ms, p99 {stats['latencyMs']['p99']:.0f} ms")
