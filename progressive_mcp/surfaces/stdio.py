"""The stdio MCP server: the mcp SDK's low-level Server wired to the progressive-mcp core.

Run it the way desktop clients do::

    progressive-mcp stdio --mode progressive --upstream http://127.0.0.1:8765/query

(`python -m stdio_server` with the same flags does the same from a source checkout.) Logs go to
stderr only (stdout carries the protocol); it exits when stdin closes.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import sys
from typing import Any

import anyio
import anyio.to_thread
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError

from progressive_mcp import __version__
from progressive_mcp.errors import ProgressiveMCPError, UnknownTool
from progressive_mcp.settings import Settings
from progressive_mcp.surfaces.surface import CallContext, Surface

logger = logging.getLogger(__name__)


def build_server(surface: Surface, ctx: CallContext) -> Server[Any]:
    """An SDK low-level Server whose tools/list and tools/call are the surface's."""

    async def list_tools(_ctx: Any, _params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return types.ListToolsResult(tools=surface.list_tools())

    async def call_tool(_ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        try:
            # Upstream calls block; a worker thread keeps the event loop answering other requests.
            return await anyio.to_thread.run_sync(surface.call_tool, params.name, params.arguments, ctx)
        except UnknownTool as exc:
            raise MCPError(types.INVALID_PARAMS, str(exc), exc.details()) from None

    api = surface.catalog.api
    return Server(
        "progressive-mcp",
        version=__version__,
        title=f"{api.title} (progressive-mcp)",
        instructions=surface.instructions,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


async def serve(surface: Surface, ctx: CallContext) -> None:
    server = build_server(surface, ctx)
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


def run(args: argparse.Namespace) -> int:
    """Serve over stdio as the CLI's server flags (`progressive_mcp.cli.add_server_flags`) say."""
    logging.basicConfig(stream=sys.stderr, level=args.log_level.upper(), format="%(levelname)s %(name)s: %(message)s")
    try:
        settings = Settings.from_env(
            spec_path=args.spec,
            mode=args.mode,
            categories=args.categories,
            include=getattr(args, "include", None),
            exclude=getattr(args, "exclude", None),
            vocabulary_path=getattr(args, "vocabulary", None),
            upstream_url=args.upstream,
            cache=getattr(args, "cache", None),
            deadline_s=getattr(args, "deadline", None),
        )
        surface = Surface.from_settings(settings)
        ctx = surface.default_context(settings)
    except ProgressiveMCPError as exc:
        print(f"progressive-mcp: {exc}", file=sys.stderr)
        return 2
    with contextlib.suppress(KeyboardInterrupt):
        anyio.run(serve, surface, ctx)
    return 0
