"""`python -m stdio_server`: the stdio MCP server from a source checkout (installed: `progressive-mcp stdio`).

Run it the way desktop clients do::

    python -m stdio_server --mode progressive --upstream http://127.0.0.1:8765/query

The server itself is `progressive_mcp.surfaces.stdio`; this package only keeps the documented entry point.
"""

from stdio_server.server import build_server, main, serve

__all__ = ["build_server", "main", "serve"]
