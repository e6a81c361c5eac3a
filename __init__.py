"""kernelscope: GPU performance tools for LLM agents, served over MCP.

The top-level folders of the source tree are mapped into this one namespace by the packaging:
``kernelscope.server`` (the MCP surface), ``kernelscope.tools`` (the capabilities),
``kernelscope.heuristics`` (expert rules), ``kernelscope.sandbox`` (isolation of untrusted work)
and ``kernelscope.agent`` (the reference MCP client).
"""

from kernelscope._version import __version__

__all__ = ["__version__"]
