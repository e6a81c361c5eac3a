"""The MCP resources: the capability report and the files of stored artifacts (listings, logs, reports,
traces) that answers point to under ``kernelscope://artifacts/{artifact_id}/...``."""

from __future__ import annotations

import json

from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ResourceNotFoundError

from kernelscope.artifacts import Artifact, get_store
from kernelscope.errors import KernelscopeError
from kernelscope.server.registry import run_in_thread
from kernelscope.tools import capabilities as caps

_TEXT_ROLES = {"source", "compile-log", "sass", "sass-lineinfo", "trace"}


async def capabilities_resource() -> str:
    report = await run_in_thread(caps.capability_report, probe=False)
    return report.model_dump_json(indent=2)


def artifact_resource(artifact_id: str) -> str:
    art = _artifact(artifact_id)
    return json.dumps(art.meta.model_dump(mode="json"), indent=2)


def artifact_file_resource(artifact_id: str, role: str) -> str | bytes:
    art = _artifact(artifact_id)
    p = art.path(role)
    if p is None or not p.is_file():
        have = ", ".join(sorted(art.meta.files)) or "none"
        raise ResourceNotFoundError(f"Artifact {art.id} has no {role!r} file (it has: {have}). The SASS listing "
                                    "appears after a sass call.")
    data = p.read_bytes()
    return data.decode("utf-8", errors="replace") if role in _TEXT_ROLES else data


def _artifact(artifact_id: str) -> Artifact:
    try:
        art = get_store().get(artifact_id)
    except KernelscopeError as e:
        raise ResourceNotFoundError(str(e)) from None
    if art is None:
        raise ResourceNotFoundError(f"No artifact {artifact_id!r} in this server's store.")
    return art


def add_resources(server: MCPServer) -> None:
    server.resource("kernelscope://capabilities", name="capabilities", mime_type="application/json",
                    description="The capability report of this host (JSON).")(capabilities_resource)
    server.resource("kernelscope://artifacts/{artifact_id}", name="artifact", mime_type="application/json",
                    description="Metadata of a stored artifact: kind, arch, flags, files, compile result."
                    )(artifact_resource)
    server.resource("kernelscope://artifacts/{artifact_id}/{role}", name="artifact-file",
                    description="A file of an artifact: source, compile-log, sass, sass-lineinfo (text) or cubin, "
                                "executable, report (an Nsight Compute .ncu-rep from analyze/ncu_profile; binary), "
                                "trace (Chrome/Perfetto JSON from nsys_trace).")(artifact_file_resource)
