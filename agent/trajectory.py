"""The run's trajectory: every model exchange and every MCP tool call of `kernelscope optimize`, as JSONL in
the OpenAI chat-completions form with ``tool_calls`` and ``role: tool`` messages (docs/trajectories.md).

``trajectory.jsonl`` in the run directory gets one line per event, appended (and flushed) the moment the
event ends, so an interrupted run keeps everything up to it:

- ``type: "model"``: one completion of the LLM proposer: the system prompt, the user prompt, each server
  tool the model called while it wrote (an assistant message with one ``tool_calls`` entry, then the
  ``tool`` message with the answer) and the final assistant reply; ``tools`` are the functions it was
  offered. A failed attempt (rate limit, timeout, ...) is a line too, without the final reply.
- ``type: "tool"``: one MCP tool call the agent made itself (`capabilities`, `run`, `analyze`, the
  confirmation's `run`), written as the assistant calling that tool (the candidate the model wrote is what
  `run` evaluates) followed by the ``tool`` message with the server's text answer.

Every line carries ``meta``: when it started, how long it took, the outcome (a `run`'s status, speedup and
verdict; an `analyze`'s class and rules), and ``candidate``, the id of the source it wrote or measured
(``source_id``), which joins a model's reply to the evaluations of its code (``episodes``).

Resume-safe: a resumed run asks the model nothing it already answered and evaluates nothing twice, so
only fresh events are written; a tool call whose name and arguments are already in the file (the
`capabilities` probe of each invocation, a `run` interrupted before its result was kept) is not written
again, and a line cut short by a crash is dropped when the file is opened. Bounded: ``MAX_TEXT`` per
message or argument string, ``MAX_ANSWER`` per tool answer, ``MAX_LINE`` per line. Secrets never reach
the file: the values of the environment's key, token, secret and password variables and anything shaped
like an API key, a bearer token or URL credentials are replaced with ``[redacted]``.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kernelscope.agent.answers import findings_of, outcome_from_run, tool_text, trim_analysis
from kernelscope.agent.proposers.clients import LLMClient, ToolCaller, ToolSpec
from kernelscope.agent.proposers.prompts import extract_code

FILE = "trajectory.jsonl"
MAX_TEXT = 24_000  # characters of one message content or one argument string
MAX_ANSWER = 8_000  # characters of one tool answer (the server's text summary)
MAX_ERROR = 2_000  # characters of an error message
MAX_LINE = 200_000  # bytes of one line; longer records are cut harder until they fit
MODEL_TOOLS = ("search_cutlass", "read_cutlass_file")  # called inside a model exchange: recorded there
REDACTED = "[redacted]"
_SECRET_VAR = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH", re.I)
_SECRET_SHAPES = (
    (re.compile(r"\b(sk|rk|pk)-[A-Za-z0-9_\-]{16,}"), REDACTED),
    (re.compile(r"\b(ghp|gho|ghs|ghu|github_pat|hf|xox[abpr])_[A-Za-z0-9_]{16,}"), REDACTED),
    (re.compile(r"\b(Bearer|Basic)\s+[A-Za-z0-9._~+/=\-]{8,}", re.I), r"\1 " + REDACTED),
    (re.compile(r"\b(x-api-key|api[_-]?key|authorization|access[_-]?token)(['\"]?\s*[:=]\s*['\"]?)"
                r"[^\s'\",}]{8,}", re.I), r"\1\2" + REDACTED),
    (re.compile(r"\b([A-Za-z][A-Za-z0-9+.-]{0,15}://)[^/\s:@]{1,256}:[^/\s@]{1,256}@"), r"\1" + REDACTED + "@"),
)


def source_id(source: str) -> str:
    """The id of a candidate's source in the trajectory (sha256 of its text, 24 hex digits)."""
    return hashlib.sha256(source.encode()).hexdigest()[:24]


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n... [{len(text) - limit} more characters cut]"


class Redactor:
    """Replaces secrets in text: the environment's secret values (and any given), then known shapes."""

    def __init__(self, extra: Sequence[str] = ()) -> None:
        values = {v for k, v in os.environ.items() if _SECRET_VAR.search(k) and len(v) >= 8}
        self.values = sorted(values | {v for v in extra if v and len(v) >= 8}, key=len, reverse=True)

    def __call__(self, text: str) -> str:
        for v in self.values:
            text = text.replace(v, REDACTED)
        for pattern, repl in _SECRET_SHAPES:
            text = pattern.sub(repl, text)
        return text


def _walk(obj: Any, fn: Callable[[str], str]) -> Any:
    if isinstance(obj, str):
        return fn(obj)
    if isinstance(obj, dict):
        return {k: _walk(v, fn) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_walk(v, fn) for v in obj]
    return obj


class Trajectory:
    """Appends records to one run's ``trajectory.jsonl`` (thread-safe: model exchanges end on the search's
    threads, tool calls on the event loop)."""

    def __init__(self, path: Path, redact: Redactor | None = None) -> None:
        self.path = path
        self.redact = redact or Redactor()
        self._lock = threading.Lock()
        self.seq = 0
        self.keys: set[str] = set()  # tool calls already in the file (name and arguments)
        self.invocation = 1
        self._load()

    def _load(self) -> None:
        """Continue an existing file: drop a line cut short by a crash, count lines, collect tool keys."""
        if not self.path.is_file():
            return
        data = self.path.read_bytes()
        if data and not data.endswith(b"\n"):
            data = data[: data.rfind(b"\n") + 1]
            self.path.write_bytes(data)
        for line in data.splitlines():
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            meta = rec.get("meta") or {}
            self.seq = max(self.seq, int(rec.get("seq", 0)) + 1)
            self.invocation = max(self.invocation, int(meta.get("invocation", 0)) + 1)
            if meta.get("key"):
                self.keys.add(meta["key"])

    def write(self, kind: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]],
              meta: dict[str, Any]) -> int | None:
        """Append one record; its sequence number, or None when it is a tool call already in the file."""
        with self._lock:
            key = meta.get("key")
            if key is not None and key in self.keys:
                return None
            rec = {"seq": self.seq, "type": kind, "messages": messages, "tools": tools,
                   "meta": {**meta, "invocation": self.invocation}}
            line = self._line(rec)
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a", encoding="utf-8") as f:
                f.write(line + "\n")
                f.flush()
            if key is not None:
                self.keys.add(key)
            self.seq += 1
            return int(rec["seq"])

    def _line(self, rec: dict[str, Any]) -> str:
        rec = _walk(rec, self.redact)
        limit = MAX_TEXT
        while True:
            line = json.dumps(rec, ensure_ascii=False, default=str)
            if len(line.encode()) <= MAX_LINE or limit < 200:
                return line
            limit //= 2
            rec = _walk(rec, lambda s, n=limit: _cut(s, n))


# ------------------------------------------------------------------------------------------- records
def _function(name: str, description: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "description": description, "parameters": schema}}


def _call_id() -> str:
    return "call_" + uuid.uuid4().hex[:20]


def _call(call_id: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
    """An assistant's tool call in the OpenAI form (arguments as a JSON string, strings bounded)."""
    bounded = _walk(args, lambda s: _cut(s, MAX_TEXT))
    return {"id": call_id, "type": "function",
            "function": {"name": name, "arguments": json.dumps(bounded, ensure_ascii=False, default=str)}}


def _answer(call_id: str, text: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": _cut(text, MAX_ANSWER)}


class RecordingLLM:
    """An ``LLMClient`` that writes each completion (and each failed attempt) to the trajectory."""

    def __init__(self, inner: LLMClient, trajectory: Trajectory) -> None:
        self.inner, self.trajectory = inner, trajectory
        self.model = getattr(inner, "model", None)

    def complete(self, system: str, user: str, tools: Sequence[ToolSpec] = (),
                 call_tool: ToolCaller | None = None) -> tuple[str, dict[str, int]]:
        calls: list[dict[str, Any]] = []

        def recorded(name: str, args: dict[str, Any]) -> str:
            assert call_tool is not None
            t0 = time.monotonic()
            answer = call_tool(name, args)
            calls.append({"name": name, "args": args, "answer": answer,
                          "duration_s": round(time.monotonic() - t0, 4)})
            return answer

        started, t0 = _now(), time.monotonic()
        try:
            text, usage = self.inner.complete(system, user, tools, recorded if call_tool is not None else None)
        except Exception as e:
            self._record(system, user, tools, calls, None, {}, started, t0, e)
            raise
        self._record(system, user, tools, calls, text, usage, started, t0, None)
        return text, usage

    def _record(self, system: str, user: str, tools: Sequence[ToolSpec], calls: list[dict[str, Any]],
                text: str | None, usage: dict[str, int], started: str, t0: float, error: BaseException | None) -> None:
        messages: list[dict[str, Any]] = [{"role": "system", "content": _cut(system, MAX_TEXT)},
                                          {"role": "user", "content": _cut(user, MAX_TEXT)}]
        timings = []
        for c in calls:
            call_id = _call_id()
            messages += [{"role": "assistant", "content": None, "tool_calls": [_call(call_id, c["name"], c["args"])]},
                         _answer(call_id, c["answer"])]
            timings.append({"id": call_id, "name": c["name"], "duration_s": c["duration_s"]})
        code = extract_code(text) if text is not None else None
        if text is not None:
            messages.append({"role": "assistant", "content": _cut(text, MAX_TEXT)})
        meta: dict[str, Any] = {"started": started, "duration_s": round(time.monotonic() - t0, 4),
                                "model": self.model, "outcome": "ok" if error is None else "error",
                                "usage": usage, "tool_calls": timings,
                                "candidate": source_id(code) if code is not None else None}
        if error is not None:
            meta["error"] = _cut(f"{type(error).__name__}: {error}", MAX_ERROR)
        self.trajectory.write("model", messages, [_function(t.name, t.description, t.input_schema) for t in tools],
                              meta)


class RecordingMCP:
    """The agent's MCP client, writing each of its own tool calls to the trajectory (the model's CUTLASS
    lookups are written inside the model exchange that made them). Everything else passes through."""

    def __init__(self, inner: Any, trajectory: Trajectory) -> None:
        self.inner, self.trajectory = inner, trajectory
        self._schemas: dict[str, dict[str, Any]] | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def _schema(self, name: str) -> list[dict[str, Any]]:
        if self._schemas is None:
            try:
                listed = await self.inner.list_tools()
                self._schemas = {t.name: _function(t.name, t.description or "", t.input_schema) for t in listed.tools}
            except Exception:  # the definitions are a courtesy; the record is written without them
                self._schemas = {}
        return [self._schemas[name]] if name in self._schemas else []

    async def call_tool(self, name: str, arguments: dict[str, Any] | None = None, *args: Any, **kw: Any) -> Any:
        if name in MODEL_TOOLS:
            return await self.inner.call_tool(name, arguments, *args, **kw)
        started, t0 = _now(), time.monotonic()
        try:
            r = await self.inner.call_tool(name, arguments, *args, **kw)
        except Exception as e:
            await self._record(name, arguments or {}, None, started, t0, e)
            raise
        await self._record(name, arguments or {}, r, started, t0, None)
        return r

    async def _record(self, name: str, args: dict[str, Any], r: Any, started: str, t0: float,
                      error: BaseException | None) -> None:
        key = "tool:" + hashlib.sha256((name + json.dumps(args, sort_keys=True, default=str)).encode()).hexdigest()
        if key in self.trajectory.keys:
            return
        duration = round(time.monotonic() - t0, 4)
        call_id = _call_id()
        text = tool_text(r) if r is not None else f"Error: {type(error).__name__}: {error}"
        meta: dict[str, Any] = {"started": started, "duration_s": duration, "tool": name, "key": key,
                                "outcome": "exception" if error is not None else "error" if r.is_error else "ok",
                                "candidate": source_id(args["candidate"]) if isinstance(args.get("candidate"), str)
                                else None, "result": _result_of(name, r)}
        messages = [{"role": "assistant", "content": None, "tool_calls": [_call(call_id, name, args)]},
                    _answer(call_id, text)]
        self.trajectory.write("tool", messages, await self._schema(name), meta)


def _result_of(name: str, r: Any) -> dict[str, Any] | None:
    """What a tool answer came to, in a few fields: a `run`'s outcome, an `analyze`'s class and rules."""
    if r is None:
        return None
    sc = None if r.is_error else r.structured_content
    if name == "run" and (sc is None or sc.get("mode") == "eval"):
        o = outcome_from_run(sc, tool_text(r) if r.is_error else None)
        return {"status": o.status, "speedup": o.speedup, "ci": [o.ci_low, o.ci_high] if o.ok else None,
                "verdict": o.verdict}
    if name == "analyze" and sc:
        cls, rules, severe, _ = findings_of(trim_analysis(sc))
        return {"status": sc.get("status"), "bottleneck": cls, "rules": rules[:8], "severe": severe}
    return None


def record_run(out: Path, expander: Any, peer: Any) -> Trajectory:
    """Record the run at ``out``: the LLM proposer's completions and the peer's MCP tool calls."""
    trajectory = Trajectory(out / FILE)
    client = getattr(expander, "client", None)
    if client is not None and hasattr(client, "complete") and not isinstance(client, RecordingLLM):
        trajectory.redact = Redactor([getattr(client, "api_key", None) or ""])
        expander.client = RecordingLLM(client, trajectory)
    mcp = getattr(peer, "client", None)
    if mcp is not None and hasattr(mcp, "call_tool") and not isinstance(mcp, RecordingMCP):
        peer.client = RecordingMCP(mcp, trajectory)
    return trajectory


# ------------------------------------------------------------------------------------------- reading
def read(path: Path) -> list[dict[str, Any]]:
    """The records of a trajectory file, in order."""
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def episodes(path: Path) -> Iterator[dict[str, Any]]:
    """Training conversations from a trajectory: each model exchange that wrote a candidate, its final
    assistant turn carrying the agent's later `run` and `analyze` calls of that candidate as its own tool
    calls, followed by their answers (``{"messages": [...], "tools": [...]}``, the OpenAI fine-tuning form)."""
    records = read(path)
    for i, rec in enumerate(records):
        meta = rec["meta"]
        if rec["type"] != "model" or meta.get("outcome") != "ok" or not meta.get("candidate"):
            continue
        messages = [dict(m) for m in rec["messages"]]
        tools = list(rec["tools"])
        later = [r for r in records[i + 1:] if r["type"] == "tool" and r["meta"].get("candidate") == meta["candidate"]]
        if later:
            messages[-1]["tool_calls"] = [r["messages"][0]["tool_calls"][0] for r in later]
            messages += [r["messages"][1] for r in later]
            names = {t["function"]["name"] for t in tools}
            for t in (t for r in later for t in r["tools"]):
                if t["function"]["name"] not in names:
                    names.add(t["function"]["name"])
                    tools.append(t)
        yield {"messages": messages, "tools": tools}
