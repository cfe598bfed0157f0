"""Builds and runs the stdio server; `main` parses the flags documented in the README.

Example::

    python -m stdio_server --spec spec/alphavantage.yaml --mode hybrid --categories stocks,forex
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
from progressive_mcp.cli import add_server_flags
from progressive_mcp.errors import ProgressiveMCPError, UnknownTool
from progressive_mcp.settings import Settings
from progressive_mcp.surface import CallContext, Surface

logger = logging.getLogger("stdio_server")


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


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m stdio_server", description="progressive-mcp over stdio")
    add_server_flags(parser)
    return parser.parse_args(argv)


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(stream=sys.stderr, level=args.log_level.upper(), format="%(levelname)s %(name)s: %(message)s")
    try:
        settings = Settings.from_env(
            spec_path=args.spec,
            mode=args.mode,
            categories=args.categories,
            upstream_url=args.upstream,
            cache=getattr(args, "cache", None),
            deadline_s=getattr(args, "deadline", None),
        )
        surface = Surface.from_settings(settings)
    except ProgressiveMCPError as exc:
        print(f"progressive-mcp: {exc}", file=sys.stderr)
        return 2
    with contextlib.suppress(KeyboardInterrupt):
        anyio.run(serve, surface, surface.default_context(settings))
    return 0


def main(argv: list[str] | None = None) -> int:
    return run(parse_args(argv))
