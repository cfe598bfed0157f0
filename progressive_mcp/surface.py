"""The MCP surface both transports serve: `tools/list` and `tools/call` for one mode.

Modes: `progressive` (the four meta-tools), `direct` (every catalog tool as its own MCP tool) and
`hybrid` (both). This is the one place where our errors become MCP results: a ToolError becomes
an `isError` result; a call to a tool outside the surface raises UnknownTool, which transports
answer with a JSON-RPC invalid-params error. Example::

    surface = Surface.from_settings(Settings.from_env())
    [t.name for t in surface.list_tools()]      # ['TOOL_LIST', 'TOOL_SEARCH', 'TOOL_GET', 'TOOL_CALL']
    surface.call_tool("TOOL_SEARCH", {"query": "apple price"}, CallContext())
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import mcp_types as types

from progressive_mcp.arguments import prepare_arguments
from progressive_mcp.catalog import Catalog, CatalogTool
from progressive_mcp.errors import ConfigError, MissingApiKey, ToolError, UnknownTool
from progressive_mcp.metatools import META_TOOL_NAMES, TOOL_CALL, MetaTools
from progressive_mcp.settings import Mode, Settings
from progressive_mcp.shaping import shape_result
from progressive_mcp.tokens import dumps
from progressive_mcp.upstream import UpstreamClient, UpstreamTransport, redact

logger = logging.getLogger(__name__)


@dataclass
class CallRecord:
    """What one call did, for logs and metrics (never arguments, keys or answers)."""

    tool: str | None = None  # the catalog tool that ran (TOOL_CALL's target too)
    error: str | None = None  # the error type of an isError result
    upstream_ms: float | None = None  # time spent waiting for the upstream, retries included


@dataclass(frozen=True)
class CallContext:
    """Per-request values: they travel with the call, never in globals. repr() hides the key.

    `missing_key_help` replaces the default "set the environment variable" advice when a call
    needs the upstream and no key came with it (over HTTP: how to pass one with the request).
    """

    api_key: str | None = field(default=None, repr=False)
    missing_key_help: str | None = None
    record: CallRecord | None = None


class Surface:
    """The tools one client sees, and how calls to them are answered."""

    def __init__(
        self,
        catalog: Catalog,
        *,
        mode: Mode = "progressive",
        categories: frozenset[str] | None = None,
        upstream: UpstreamClient | None = None,
        max_result_tokens: int = 8000,
        meta: MetaTools | None = None,
    ) -> None:
        unknown = sorted((categories or frozenset()) - set(catalog.categories))
        if unknown:
            raise ConfigError(
                f"unknown categories {', '.join(unknown)}; the spec defines {', '.join(catalog.categories)}"
            )
        self.catalog = catalog
        self.mode = mode
        self.categories = categories
        self.upstream = upstream or UpstreamClient(catalog.api)
        self.max_result_tokens = max_result_tokens
        # Surfaces that differ only in mode can share one MetaTools (its search index takes ~20 ms to build).
        shared = meta is not None and meta.categories == categories
        self.meta = meta if meta is not None and shared else MetaTools(catalog, categories=categories)
        self._discovery = self.meta.discovery_handlers()
        self._direct = {t.name: t for t in catalog.in_categories(categories)} if mode != "progressive" else {}
        definitions: list[dict[str, Any]] = []
        if mode != "direct":
            definitions += self.meta.definitions
        if mode != "progressive":
            definitions += [t.definition() for t in self._direct.values()]
        self._tools = [types.Tool.model_validate(d) for d in definitions]

    @classmethod
    def from_settings(
        cls, settings: Settings, *, catalog: Catalog | None = None, transport: UpstreamTransport | None = None
    ) -> Surface:
        catalog = catalog or Catalog.load(settings.spec_path)
        upstream = UpstreamClient(
            catalog.api,
            base_url=settings.upstream_url,
            transport=transport,
            timeout_s=settings.upstream_timeout_s,
            retries=settings.upstream_retries,
        )
        return cls(
            catalog,
            mode=settings.mode,
            categories=settings.categories,
            upstream=upstream,
            max_result_tokens=settings.max_result_tokens,
        )

    def default_context(self, settings: Settings, environ: Mapping[str, str] | None = None) -> CallContext:
        """The context of a single-user server (stdio): the key from settings or the spec's env var."""
        env = os.environ if environ is None else environ
        auth = self.catalog.api.auth
        return CallContext(api_key=settings.with_api_key_from(env, auth.env if auth else None).api_key)

    def variant(self, mode: Mode, categories: frozenset[str] | None) -> Surface:
        """The same catalog and upstream with another mode or category filter (for per-URL choices)."""
        return Surface(
            self.catalog,
            mode=mode,
            categories=categories,
            upstream=self.upstream,
            max_result_tokens=self.max_result_tokens,
            meta=self.meta,
        )

    @property
    def instructions(self) -> str:
        """The server's `instructions`: one line on how to use this surface."""
        api = self.catalog.api
        if self.mode == "direct":
            return f"Each tool is one {api.title} function; call it directly."
        return (
            f"{len(self.meta.tools)} {api.title} tools are behind 4 meta-tools: TOOL_SEARCH (or TOOL_LIST) to "
            "find a tool, TOOL_GET for its schema, TOOL_CALL to run it."
        )

    def list_tools(self) -> list[types.Tool]:
        """The tool definitions of this surface (built once; callers must not change them)."""
        return self._tools

    def call_tool(self, name: str, arguments: Mapping[str, Any] | None, ctx: CallContext) -> types.CallToolResult:
        """Run a tool of this surface. Raises UnknownTool for a name this surface does not offer."""
        return types.CallToolResult.model_validate(self.call_tool_wire(name, arguments, ctx))

    def call_tool_wire(self, name: str, arguments: Mapping[str, Any] | None, ctx: CallContext) -> dict[str, Any]:
        """`call_tool`'s result as its wire JSON object (what the HTTP endpoint sends, without a model round trip)."""
        args = dict(arguments or {})
        handler = self._discovery.get(name) if self.mode != "direct" else None
        try:
            if handler is not None:
                return _result(handler(args))
            if name == TOOL_CALL and self.mode != "direct":
                tool, raw = self.meta.resolve_call(args)
                return self._run(tool, raw, ctx)
        except ToolError as exc:
            return _error_result(exc, ctx)
        direct = self._direct.get(name) if name not in META_TOOL_NAMES else None
        if direct is None:
            raise UnknownTool(name, self._suggest(name))
        return self._run(direct, args, ctx)

    def _run(self, tool: CatalogTool, raw_arguments: Any, ctx: CallContext) -> dict[str, Any]:
        if ctx.record is not None:
            ctx.record.tool = tool.name
        try:
            arguments = prepare_arguments(self.catalog, tool.name, raw_arguments)
            if not ctx.api_key and ctx.missing_key_help and self.catalog.api.auth is not None:
                raise MissingApiKey(ctx.missing_key_help)
            started = time.perf_counter()
            try:
                answer = self.upstream.call(tool, arguments, ctx.api_key)
            finally:
                if ctx.record is not None:
                    ctx.record.upstream_ms = (time.perf_counter() - started) * 1000
            envelope = shape_result(
                tool, arguments, answer.payload, answer.format, budget_tokens=self.max_result_tokens
            )
        except ToolError as exc:
            logger.info("tool call failed", extra={"tool": tool.name, "error": type(exc).__name__})
            if ctx.record is not None:
                ctx.record.error = type(exc).__name__
            return _error_result(exc, ctx)
        except Exception:  # a bug of ours: say so without details that could carry secrets
            logger.exception("unexpected error in a tool call", extra={"tool": tool.name})
            return _error_result(ToolError(f"Internal error while running {tool.name}; please report it."), ctx)
        return _result(envelope)

    def _suggest(self, name: str) -> list[str]:
        offered = {t.name for t in self._tools}
        return [s for s in self.catalog.suggest(name) if s in offered] or (
            list(META_TOOL_NAMES) if self.mode != "direct" else []
        )


def _result(payload: dict[str, Any]) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": dumps(payload)}], "structuredContent": payload, "isError": False}


def _error_result(exc: ToolError, ctx: CallContext) -> dict[str, Any]:
    error: dict[str, Any] = {"type": type(exc).__name__, "message": redact(str(exc), ctx.api_key)}
    error.update(exc.details())
    payload = {"error": error}
    return {"content": [{"type": "text", "text": dumps(payload)}], "structuredContent": payload, "isError": True}
