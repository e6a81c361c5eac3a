"""The reference MCP client (``kernelscope optimize``): talks to the server over MCP only."""
