"""The MCP surface only: tool names, input/output models, annotations, progress and resources."""
