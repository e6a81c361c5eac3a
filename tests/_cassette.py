"""A loopback OpenAI-compatible chat-completions endpoint that replays recorded model replies ("cassettes").

Each cassette (``tests/fixtures/kernelbench/cassettes/<key>.json``) holds one problem's replies in the order
a model sends them; a request belongs to the problem whose reference source its prompt carries (every
prompt of the LLM proposer does), and gets that problem's next reply. When a problem's replies are spent,
the endpoint answers without code (the proposer then has nothing more to try there). The official
``openai`` SDK talks to it through the LLM proposer, as it would to vLLM or OpenAI.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import _endpoint as endpoint
from _endpoint import Request, Response, text_completion

SPENT = "I have no further ideas for this problem."


@dataclass
class Cassettes:
    """Replies per problem key, matched to requests by the reference source in the prompt."""

    references: dict[str, str]  # problem key -> its reference source
    replies: dict[str, list[dict[str, str]]]
    served: list[tuple[str, str]] = field(default_factory=list)  # (problem key, reply kind) per request
    unmatched: int = 0
    _next: dict[str, int] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def load(cls, problems: Path, cassettes: Path) -> Cassettes:
        refs, replies = {}, {}
        for c in sorted(cassettes.rglob("*.json")):
            rec = json.loads(c.read_text())
            refs[rec["problem"]] = (problems / (rec["problem"] + ".py")).read_text().strip()
            replies[rec["problem"]] = rec["replies"]
        return cls(refs, replies)

    def reply(self, prompt: str) -> str:
        key = next((k for k, ref in self.references.items() if ref in prompt), None)
        with self._lock:
            if key is None:
                self.unmatched += 1
                return SPENT
            n = self._next.get(key, 0)
            self._next[key] = n + 1
            rec = self.replies[key][n] if n < len(self.replies[key]) else {"kind": "spent", "text": SPENT}
            self.served.append((key, rec["kind"]))
            return rec["text"]

    def kinds(self, key: str) -> list[str]:
        return [k for p, k in self.served if p == key]


@contextmanager
def serve(cassettes: Cassettes) -> Iterator[str]:
    """The endpoint's base URL (``.../v1``) while the block runs."""

    def answer(req: Request) -> Response:
        prompt = next(m["content"] for m in reversed(req.body["messages"]) if m["role"] == "user")
        text = cassettes.reply(prompt if isinstance(prompt, str) else json.dumps(prompt))
        return text_completion(req, text, 1000, 200)

    with endpoint.serve(answer) as url:
        yield url + "/v1"
