"""Helpers for the tests that talk to a real server: starting `kernelscope serve --transport http` as a
subprocess (server, load, cancellation, conformance), and reading a tool result's text."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any


def tool_text(r: Any) -> str:
    """The text blocks of an MCP tool result, joined."""
    return "\n".join(getattr(b, "text", "") for b in r.content)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_http(home: Path, root: Path, env: dict[str, str], *extra: str, stderr: int | IO[Any] = subprocess.PIPE,
               timeout_s: float = 60.0) -> tuple[subprocess.Popen[bytes], int]:
    """The server on a free loopback port, returned once it accepts connections (its stderr in the
    assertion if it exits first)."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "kernelscope", "serve", "--transport", "http", "--port", str(port),
                             "--home", str(home), "--root", str(root), *extra],
                            env=env, stdout=subprocess.DEVNULL, stderr=stderr)
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return proc, port
        except OSError:
            if proc.poll() is not None:
                err = proc.stderr.read().decode(errors="replace") if stderr == subprocess.PIPE and proc.stderr else ""
                raise AssertionError(f"the HTTP server exited with {proc.returncode}: {err[-2000:]}") from None
            if time.monotonic() > deadline:
                proc.kill()
                raise AssertionError(f"the HTTP server did not accept connections within {timeout_s:.0f} s") from None
            time.sleep(0.1)


@contextlib.contextmanager
def http_server(home: Path, root: Path, env: dict[str, str], *extra: str, stderr: int | IO[Any] = subprocess.DEVNULL
                ) -> Iterator[str]:
    """The server's MCP URL for the duration of the block; terminated (and waited for) afterwards."""
    proc, port = start_http(home, root, env, *extra, stderr=stderr)
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(timeout=30)
