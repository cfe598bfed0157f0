"""The protocol surfaces: the meta-tools, the MCP surface of each mode, the HTTP endpoint and the stdio server."""
