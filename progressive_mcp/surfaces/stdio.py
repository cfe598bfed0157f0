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
from collections.abc import Callable
from typing import Any

import anyio
import anyio.to_thread
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError

from progressive_mcp import __version__
from progressive_mcp.calls.cache import LOCAL
from progressive_mcp.errors import ProgressiveMCPError, UnknownTool
from progressive_mcp.search.hints import asked as hints_asked
from progressive_mcp.settings import Settings
from progressive_mcp.surfaces.auto import AUTO_META
from progressive_mcp.surfaces.surface import CallContext, GatewaySurfaces, Surface

logger = logging.getLogger(__name__)


def build_server(surface: Surface | Callable[[], Surface], ctx: CallContext) -> Server[Any]:
    """An SDK low-level Server whose tools/list and tools/call are the surface's. `surface` may be a function
    giving the current one (a gateway's, which a sync may replace): a client that has listed tools is then told
    `notifications/tools/list_changed` with its next call's answer once they change."""
    current = surface if callable(surface) else (lambda: surface)
    listed: dict[str, Any] = {}

    async def list_tools(_ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        now = current()
        listed["tools"] = now.list_tools()  # the plain list: what a change is told against
        meta = {AUTO_META: now.auto.as_meta()} if now.auto is not None else None  # initialize is the SDK's to answer
        if params is not None and hints_asked(params.meta):  # a gateway in front of this server (`search.hints`)
            return types.ListToolsResult(tools=now.list_tools(hints=True), _meta=meta)
        return types.ListToolsResult(tools=listed["tools"], _meta=meta)

    async def call_tool(request: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        now = current()
        try:
            # Upstream calls block; a worker thread keeps the event loop answering other requests.
            result = await anyio.to_thread.run_sync(now.call_tool, params.name, params.arguments, ctx)
        except UnknownTool as exc:
            raise MCPError(types.INVALID_PARAMS, str(exc), exc.details()) from None
        if "tools" in listed and current().list_tools() is not listed["tools"]:
            listed.pop("tools")
            with contextlib.suppress(Exception):  # advisory: a client that cannot hear it lists again later
                await request.session.send_tool_list_changed()
        return result

    first = current()
    api = first.catalog.api
    return Server(
        "progressive-mcp",
        version=__version__,
        title=f"{api.title} (progressive-mcp)",
        instructions=first.instructions,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


async def serve(surface: Surface | Callable[[], Surface], ctx: CallContext) -> None:
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
            servers_path=getattr(args, "servers", None),
            index_path=getattr(args, "index", None),
            upstream_url=args.upstream,
            cache=getattr(args, "cache", None),
            deadline_s=getattr(args, "deadline", None),
        )
        if settings.servers_path is not None:
            return _run_gateway(settings)
        surface = Surface.from_settings(settings)
        ctx = surface.default_context(settings)
    except ProgressiveMCPError as exc:
        print(f"progressive-mcp: {exc}", file=sys.stderr)
        return 2
    with contextlib.suppress(KeyboardInterrupt):
        anyio.run(serve, surface, ctx)
    return 0


def _run_gateway(settings: Settings) -> int:
    """Serve the tools of the servers file's servers: from the tool store at once, synced as the gateway says."""
    from progressive_mcp.gateway.gateway import Gateway

    gateway = Gateway.from_settings(settings)
    try:
        gateway.start()
        surfaces = GatewaySurfaces(gateway, settings)
        # The spec beside the servers (if one was named) is called with its key as without a gateway.
        ctx = surfaces.current().default_context(settings) if gateway.base else CallContext(entitlement=LOCAL)
        with contextlib.suppress(KeyboardInterrupt):
            anyio.run(serve, surfaces.current, ctx)
    finally:
        gateway.close()
    return 0
