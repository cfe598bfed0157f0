"""progressive-mcp: one spec file, served to MCP clients through progressive tool discovery."""

__version__ = "0.1.0"
