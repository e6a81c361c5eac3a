"""The capabilities, usable from Python without MCP: compile, sass, capabilities, the artifact store.

Each tool is a plain synchronous function over pydantic models (see ``kernelscope.models``)."""
