"""The one way a tool is registered: a request model (its inputs, declared once) and a plain function.

``ToolRegistry.tool`` turns ``body(req, job) -> result`` into an MCP tool:
- the flat argument list is built from the request model's fields (``inspect.Signature`` on the async
  wrapper, which is what ``MCPServer`` derives the input schema from), so callers keep sending
  ``{"source": ..., "arch": ...}``;
- the arguments are validated into the model; a refusal becomes a ``ToolError`` that says what to change;
- the body runs in a worker thread with progress notifications (a start, a heartbeat at least once a
  second, GPU queue waits, the end) and cancellation (``job.cancel`` is set; the await ends at once);
- ``KernelscopeError`` becomes a ``ToolError`` with its sentence, a bug a ``ToolError`` that says so;
- the result is wrapped as structured content plus its bounded text summary.
The published schemas drop pydantic's generated titles (and, for outputs, defaults): the same
validation, a smaller ``tools/list``.
"""

from __future__ import annotations

import inspect
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, Generic, TypeVar

import anyio
import anyio.from_thread
import anyio.to_thread
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools import Tool
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel, Field, ValidationError
from pydantic.fields import FieldInfo

from kernelscope.errors import KernelscopeError
from kernelscope.models.requests import is_argument
from kernelscope.sandbox.gpu import WaitCallback

log = logging.getLogger("kernelscope.server")
T = TypeVar("T")
Req = TypeVar("Req", bound=BaseModel)
Res = TypeVar("Res", bound=BaseModel)

HEARTBEAT_S = 1.0  # a call that takes longer sends a progress notification at least this often


class Progress:
    """The progress notifications of one tool call: a start, a heartbeat while the work runs (at least one
    notification a second, which also keeps clients that reset their timeouts on progress waiting), the
    GPU queue position while queued, and the end. Values strictly increase as the spec requires; the end
    carries ``total`` equal to its ``progress``. A no-op when the client asked for no progress."""

    def __init__(self, ctx: Context | None, label: str) -> None:
        self.ctx = ctx
        self.label = label
        self.n = -1
        self.t0 = time.monotonic()

    async def _send(self, message: str, *, final: bool = False) -> None:
        if self.ctx is None:
            return
        self.n += 1
        try:
            await self.ctx.report_progress(self.n, self.n if final else None, message)
        except Exception:  # the client went away; the work itself goes on
            log.debug("progress notification failed", exc_info=True)

    async def start(self) -> None:
        await self._send(self.label)

    async def step(self, message: str) -> None:
        await self._send(message)

    async def beat(self) -> None:
        await self._send(f"{self.label}: {time.monotonic() - self.t0:.0f} s")

    async def done(self, message: str) -> None:
        await self._send(message, final=True)

    def on_wait(self) -> WaitCallback:
        """A callback for worker threads queued for a GPU lease."""

        def on_wait(ahead: int, waited_s: float) -> None:
            msg = f"waiting for the GPU: {ahead} job(s) ahead, {waited_s:.0f} s so far"
            try:
                anyio.from_thread.run(self.step, msg)
            except Exception:  # the call was cancelled meanwhile
                log.debug("progress notification failed", exc_info=True)

        return on_wait


@dataclass(frozen=True)
class Job:
    """What a tool body gets besides its request: ``cancel`` is set when the client cancels (pass it to
    the tool, which kills its process group and so frees its GPU lease), ``on_wait`` reports GPU queue
    waits as progress."""

    cancel: threading.Event
    on_wait: WaitCallback


def explain(e: ValidationError) -> str:
    """A validation error as sentences: the model validators' own text, else field: problem."""
    parts = []
    for err in e.errors(include_url=False):
        msg = str(err["msg"]).removeprefix("Value error, ")
        loc = ".".join(str(x) for x in err["loc"])
        parts.append(f"{loc}: {msg}." if loc else msg)
    return " ".join(parts)


async def run_in_thread(fn: Callable[..., T], *args: Any, cancel: threading.Event | None = None,
                        progress: Progress | None = None, **kwargs: Any) -> T:
    """Run a blocking function in a worker thread, sending ``progress`` heartbeats while it runs. On
    cancellation ``cancel`` is set and the await ends at once. Errors are mapped for the client:
    ``KernelscopeError`` -> its sentence, an invalid model -> what to change, anything else -> a bug."""
    box: dict[str, Any] = {}
    finished = anyio.Event()

    def work() -> None:
        try:
            box["value"] = fn(*args, **kwargs)
        except BaseException as e:  # re-raised below, outside the task group
            box["error"] = e

    async def in_thread() -> None:
        try:
            await anyio.to_thread.run_sync(work, abandon_on_cancel=True)
        finally:
            finished.set()

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(in_thread)
            while progress is not None and not finished.is_set():
                with anyio.move_on_after(HEARTBEAT_S):
                    await finished.wait()
                if not finished.is_set():
                    await progress.beat()
    except anyio.get_cancelled_exc_class():
        if cancel is not None:
            cancel.set()
        raise
    if "error" not in box:
        return box["value"]  # type: ignore[no-any-return]
    raise _for_client(box.pop("error"), fn) from None


def _for_client(e: BaseException, fn: Callable[..., Any]) -> BaseException:
    if isinstance(e, KernelscopeError):
        return ToolError(str(e))
    if isinstance(e, ValidationError):
        return ToolError(f"Invalid request: {explain(e)}")
    if isinstance(e, ToolError) or not isinstance(e, Exception):
        return e
    # a bug: say so plainly instead of a bare "Error executing tool"
    log.error("internal error in %s", getattr(fn, "__name__", fn), exc_info=e)
    return ToolError(f"Internal error in kernelscope ({type(e).__name__}: {e}). This is a bug; the server "
                     "is still running.")


# ------------------------------------------------------------------------------------- schemas
_SUBSCHEMA_MAPS = ("properties", "$defs", "patternProperties", "dependentSchemas")
_SUBSCHEMA = ("items", "additionalProperties", "not", "contains", "propertyNames", "if", "then", "else")
_SUBSCHEMA_LISTS = ("anyOf", "allOf", "oneOf", "prefixItems")


def lean_schema(schema: Any, drop: tuple[str, ...] = ("title",)) -> Any:
    """``schema`` without the annotation keywords in ``drop`` (pydantic's generated titles, say), walking
    only schema positions, so a property named ``title`` stays."""
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key in drop:
            continue
        if key in _SUBSCHEMA_MAPS and isinstance(value, dict):
            out[key] = {name: lean_schema(sub, drop) for name, sub in value.items()}
        elif key in _SUBSCHEMA and isinstance(value, dict):
            out[key] = lean_schema(value, drop)
        elif key in _SUBSCHEMA_LISTS and isinstance(value, list):
            out[key] = [lean_schema(sub, drop) for sub in value]
        else:
            out[key] = value
    return out


def _parameter(name: str, field: FieldInfo) -> inspect.Parameter:
    """A model field as a keyword argument of the tool: same type, constraints, description and default.
    A list or dict field (a default factory) is optional on the wire: null or absent means its default."""
    described = Field(description=field.description)
    kind = inspect.Parameter.KEYWORD_ONLY
    if field.default_factory is not None:
        annotation: Any = Annotated[Annotated[(field.annotation, *field.metadata)] | None, described] \
            if field.metadata else Annotated[field.annotation | None, described]
        return inspect.Parameter(name, kind, default=None, annotation=annotation)
    annotation = Annotated[(field.annotation, *field.metadata, described)]
    if field.is_required():
        return inspect.Parameter(name, kind, annotation=annotation)
    return inspect.Parameter(name, kind, default=field.default, annotation=annotation)


def _to_request(model: type[Req], arguments: dict[str, Any], tool: str) -> Req:
    by_name = {(f.alias or n): f for n, f in model.model_fields.items()}
    given = {k: v for k, v in arguments.items() if not (v is None and by_name[k].default_factory is not None)}
    try:
        return model.model_validate(given)
    except ValidationError as e:
        raise ToolError(f"Invalid {tool} request: {explain(e)}") from None


@dataclass(frozen=True)
class ToolSpec(Generic[Req, Res]):
    """How one tool is shown and answered, besides its request model and body."""

    name: str
    title: str
    annotations: ToolAnnotations
    request: type[Req]
    result: type[Res]
    summary: Callable[[Res], str]
    label: str | Callable[[Req], str]
    done: str | Callable[[Res], str] = "done"


class ToolRegistry:
    """The server's tools, registered with ``@registry.tool(...)`` on ``body(req, job) -> result``; the
    body's docstring is the tool's description."""

    def __init__(self) -> None:
        self.tools: list[Tool] = []
        self.specs: dict[str, ToolSpec[Any, Any]] = {}

    def tool(self, name: str, *, title: str, annotations: ToolAnnotations, request: type[Req], result: type[Res],
             summary: Callable[[Res], str], label: str | Callable[[Req], str],
             done: str | Callable[[Res], str] = "done") -> Callable[[Callable[[Req, Job], Res]],
                                                                    Callable[[Req, Job], Res]]:
        spec = ToolSpec(name, title, annotations, request, result, summary, label, done)

        def register(body: Callable[[Req, Job], Res]) -> Callable[[Req, Job], Res]:
            self.tools.append(build_tool(spec, body))
            self.specs[name] = spec
            return body

        return register


def build_tool(spec: ToolSpec[Req, Res], body: Callable[[Req, Job], Res]) -> Tool:
    """The MCP ``Tool`` of ``body``: a flat signature from ``spec.request``, lean published schemas."""

    async def call(ctx: Context | None = None, **arguments: Any) -> CallToolResult:
        req = _to_request(spec.request, arguments, spec.name)
        progress = Progress(ctx, spec.label(req) if callable(spec.label) else spec.label)
        await progress.start()
        job = Job(cancel=threading.Event(), on_wait=progress.on_wait())
        result = await run_in_thread(body, req, job, cancel=job.cancel, progress=progress)
        await progress.done(spec.done(result) if callable(spec.done) else spec.done)
        return CallToolResult(content=[TextContent(type="text", text=spec.summary(result))],
                              structured_content=result.model_dump(mode="json"))

    params = [_parameter(f.alias or n, f) for n, f in spec.request.model_fields.items() if is_argument(f)]
    params.append(inspect.Parameter("ctx", inspect.Parameter.KEYWORD_ONLY, default=None, annotation=Context | None))
    returns = Annotated[CallToolResult, spec.result]
    call.__signature__ = inspect.Signature(params, return_annotation=returns)  # type: ignore[attr-defined]
    call.__annotations__ = {p.name: p.annotation for p in params} | {"return": returns}
    call.__name__ = call.__qualname__ = spec.name
    tool = Tool.from_function(call, name=spec.name, title=spec.title, annotations=spec.annotations,
                              description=inspect.cleandoc(body.__doc__ or ""))
    tool.parameters = lean_schema(tool.parameters)
    tool.fn_metadata.output_schema = lean_schema(tool.fn_metadata.output_schema, ("title", "default"))
    return tool
