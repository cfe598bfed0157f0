"""The stdio MCP server: the mcp SDK's low-level Server wired to the progressive-mcp core.

Run it the way desktop clients do::

    progressive-mcp stdio --mode progressive --upstream http://127.0.0.1:8765/query

(`python -m stdio_server` with the same flags does the same from a source checkout.) Logs go to
stderr only (stdout carries the protocol); it exits when stdin closes.

With policies (PMCP_POLICIES_FILE or PMCP_POLICIES), the local user is one identity: the entry `--policy NAME`
(PMCP_POLICY) names, else the policies' default. Its tools are the only ones any answer names, as over HTTP, and
its `rate` counts tools/list and tools/call in memory; past it, a request gets a JSON-RPC error saying when to retry.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import math
import os
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
from progressive_mcp.errors import ConfigError, ProgressiveMCPError, UnknownTool
from progressive_mcp.policies import MemoryRateLimiter, Policy, RateLimiter
from progressive_mcp.search.hints import asked as hints_asked
from progressive_mcp.settings import Settings
from progressive_mcp.surfaces.auto import AUTO_META
from progressive_mcp.surfaces.surface import CallContext, GatewaySurfaces, Surface

logger = logging.getLogger(__name__)

POLICY_ENV = "PMCP_POLICY"
LOCAL_CALLER = "stdio"  # whom the local user's requests are counted under


def build_server(
    surface: Surface | Callable[[], Surface],
    ctx: CallContext,
    *,
    policy: Policy | None = None,
    rate_limiter: RateLimiter | None = None,
) -> Server[Any]:
    """An SDK low-level Server whose tools/list and tools/call are the surface's. `surface` may be a function
    giving the current one (a gateway's, which a sync may replace): a client that has listed tools is then told
    `notifications/tools/list_changed` with its next call's answer once they change. `policy`: the local user's
    (see `local_policy`), which narrows every surface and whose rate `rate_limiter` counts (default: in memory)."""
    given = surface if callable(surface) else (lambda: surface)
    current = given if policy is None else _narrowing(given, policy)
    rates = rate_limiter or MemoryRateLimiter()
    listed: dict[str, Any] = {}

    def admit() -> None:
        if policy is None or policy.rate is None:
            return
        wait_s = rates.hit(LOCAL_CALLER, policy.rate)
        if wait_s is not None:  # as HTTP's 429 with Retry-After
            retry = max(1, math.ceil(wait_s))
            message = f"Too many requests: this server's policy allows {policy.rate} a minute; try again in {retry} s"
            raise MCPError(types.INVALID_REQUEST, message, {"retry_after_s": retry})

    async def list_tools(_ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        admit()
        now = current()
        listed["tools"] = now.list_tools()  # the plain list: what a change is told against
        meta = {AUTO_META: now.auto.as_meta()} if now.auto is not None else None  # initialize is the SDK's to answer
        if params is not None and hints_asked(params.meta):  # a gateway in front of this server (`search.hints`)
            return types.ListToolsResult(tools=now.list_tools(hints=True), _meta=meta)
        return types.ListToolsResult(tools=listed["tools"], _meta=meta)

    async def call_tool(request: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        admit()
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


def _narrowing(current: Callable[[], Surface], policy: Policy) -> Callable[[], Surface]:
    """`current` as `policy` sees it: each surface it gives narrowed once (`Surface.under`), again when it changes."""
    seen: dict[str, Surface] = {}

    def narrowed() -> Surface:
        base = current()
        if seen.get("base") is not base:
            seen["narrowed"], seen["base"] = base.under(policy), base
        return seen["narrowed"]

    return narrowed


def local_policy(settings: Settings, name: str | None) -> Policy | None:
    """The policy of a stdio server's one user: the entry `name` picks (--policy, PMCP_POLICY), else the policies'
    default; None without policies. ConfigError when the name is unknown or the default would deny everything."""
    policies = settings.policies
    if policies is None:
        if name:
            raise ConfigError(f"--policy ({POLICY_ENV}) picks an entry of the policies: set PMCP_POLICIES_FILE first")
        return None
    if name:
        return policies.named(name)
    if policies.default is None:
        raise ConfigError(
            "the policies' default is deny, and a stdio server has no token to match an entry with: name the local "
            f"user's entry with --policy NAME ({POLICY_ENV}), or give the policies a default"
        )
    return policies.default


async def serve(surface: Surface | Callable[[], Surface], ctx: CallContext, policy: Policy | None = None) -> None:
    server = build_server(surface, ctx, policy=policy)
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
            schema_view=getattr(args, "schema_view", None),
        )
        policy = local_policy(settings, getattr(args, "policy", None) or os.environ.get(POLICY_ENV, "").strip())
        if settings.servers_path is not None:
            return _run_gateway(settings, policy)
        surface = Surface.from_settings(settings)
        if settings.policies is not None:
            settings.policies.check_catalog(list(surface.catalog.categories))
        ctx = surface.default_context(settings)
    except ProgressiveMCPError as exc:
        print(f"progressive-mcp: {exc}", file=sys.stderr)
        return 2
    with contextlib.suppress(KeyboardInterrupt):
        anyio.run(serve, surface, ctx, policy)
    return 0


def _run_gateway(settings: Settings, policy: Policy | None = None) -> int:
    """Serve the tools of the servers file's servers: from the tool store at once, synced as the gateway says."""
    from progressive_mcp.gateway.gateway import Gateway

    gateway = Gateway.from_settings(settings)
    try:
        gateway.start()
        surfaces = GatewaySurfaces(gateway, settings)
        # The spec beside the servers (if one was named) is called with its key as without a gateway.
        ctx = surfaces.current().default_context(settings) if gateway.base else CallContext(entitlement=LOCAL)
        with contextlib.suppress(KeyboardInterrupt):
            anyio.run(serve, surfaces.current, ctx, policy)
    finally:
        gateway.close()
    return 0
