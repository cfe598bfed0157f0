"""The stdio MCP server: the mcp SDK's low-level Server wired to the progressive-mcp core.

Run it the way desktop clients do::

    python -m stdio_server --mode progressive --upstream http://127.0.0.1:8765/query

Logs go to stderr only (stdout carries the protocol); it exits when stdin closes.
"""

from stdio_server.server import build_server, main, serve

__all__ = ["build_server", "main", "serve"]
