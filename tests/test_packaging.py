"""Packaging and host configs: the single namespace, the console script, and the example configs."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from kernelscope.cli import build_parser

REPO = Path(__file__).resolve().parent.parent
HOSTS = REPO / "examples" / "mcp-hosts"


@pytest.mark.parametrize("name,key", [("claude_desktop_config.json", "mcpServers"), ("cursor-mcp.json", "mcpServers"),
                                      ("vscode-mcp.json", "servers"), ("claude-code-project.mcp.json", "mcpServers")])
def test_host_configs_are_valid_and_start_the_server(name: str, key: str) -> None:
    cfg = json.loads((HOSTS / name).read_text())
    entry = cfg[key]["kernelscope"]
    assert entry["command"].endswith("kernelscope")
    args = build_parser().parse_args(entry["args"])
    assert args.command == "serve" and args.transport == "stdio"


def test_readme_commands_exist() -> None:
    readme = (REPO / "README.md").read_text()
    assert "python -m pytest -q" in readme
    assert "claude mcp add" in readme
    ci = (REPO / ".ci" / "run").read_text()
    assert "python -m pytest -q" in ci


@pytest.mark.slow
def test_wheel_installs_only_the_kernelscope_namespace(tmp_path: Path) -> None:
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp_path), str(REPO)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    (whl,) = tmp_path.glob("kernelscope-*.whl")
    tops = {n.split("/")[0] for n in zipfile.ZipFile(whl).namelist()}
    assert tops == {"kernelscope", whl.name.split("-")[0] + "-" + whl.name.split("-")[1] + ".dist-info"}
    names = zipfile.ZipFile(whl).namelist()
    for mod in ("server/app.py", "tools/compile.py", "sandbox/process.py", "heuristics/registry.py", "cli.py"):
        assert f"kernelscope/{mod}" in names
    assert not any(n.startswith("kernelscope/tests/") for n in names)
    entry = zipfile.ZipFile(whl).read(next(n for n in names if n.endswith("entry_points.txt"))).decode()
    assert "kernelscope = kernelscope.cli:main" in entry
    assert shlex.split("kernelscope serve")  # the console script name the README uses
