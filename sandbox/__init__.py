"""Isolation of untrusted work: workspaces, process groups, limits, environment and path containment.

Nothing else in kernelscope spawns processes: every compiler, disassembler, profiler and candidate
program runs through :func:`run_process`.
"""

from kernelscope.sandbox.paths import PathRefused, contained_path, resolve_user_path
from kernelscope.sandbox.process import Limits, ProcessResult, network_isolation_status, run_process
from kernelscope.sandbox.workspace import Workspace

__all__ = [
    "Limits",
    "PathRefused",
    "ProcessResult",
    "Workspace",
    "contained_path",
    "network_isolation_status",
    "resolve_user_path",
    "run_process",
]
