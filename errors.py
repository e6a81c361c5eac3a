"""Exceptions that carry a sentence for the client. The MCP layer turns them into ``ToolError``s."""

from __future__ import annotations


class KernelscopeError(Exception):
    """Base class: the message is written for the person or model that called the tool."""


class InputError(KernelscopeError, ValueError):
    """The request is malformed or not allowed; the message says what to change."""


class NotAvailable(KernelscopeError):
    """A capability this host lacks (no GPU, no ncu, no counter permission, ...), with the fix."""

    def __init__(self, what: str, why: str, fix: str) -> None:
        super().__init__(f"{what} is not available here, because {why}. Fix: {fix}")
        self.what, self.why, self.fix = what, why, fix


class ArtifactNotFound(InputError):
    def __init__(self, artifact_id: str) -> None:
        super().__init__(
            f"No artifact with id {artifact_id!r} in this server's store. Compile the source first "
            "(the compile tool returns the id), or check that the id was copied whole."
        )
