"""A loopback HTTP endpoint for scripted model providers (OpenAI-compatible or Anthropic): each JSON POST is
answered by a function of the request, so a test scripts the model and the real SDK talks to it."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Request:
    path: str
    headers: dict[str, str]  # names in lower case
    body: dict[str, Any]


@dataclass
class Response:
    body: dict[str, Any]
    status: int = 200
    headers: dict[str, str] | None = None


def completion(request: Request, message: dict[str, Any], prompt_tokens: int = 100,
               completion_tokens: int = 50) -> Response:
    """An OpenAI chat.completion answer carrying ``message`` (an assistant message, with or without tool calls)."""
    return Response({"id": "c1", "object": "chat.completion", "created": 0, "model": request.body["model"],
                     "choices": [{"index": 0, "message": message,
                                  "finish_reason": "tool_calls" if message.get("tool_calls") else "stop"}],
                     "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                               "total_tokens": prompt_tokens + completion_tokens}})


def text_completion(request: Request, text: str, prompt_tokens: int = 100, completion_tokens: int = 50) -> Response:
    return completion(request, {"role": "assistant", "content": text}, prompt_tokens, completion_tokens)


@contextmanager
def serve(answer: Callable[[Request], Response]) -> Iterator[str]:
    """``http://127.0.0.1:PORT`` while the block runs; every POST gets ``answer(request)``."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *a: object) -> None:
            pass

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["content-length"])))
            out = answer(Request(self.path, {k.lower(): v for k, v in self.headers.items()}, body))
            data = json.dumps(out.body).encode()
            self.send_response(out.status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            for k, v in (out.headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)

    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}"
    finally:
        srv.shutdown()
