"""The MCP surface both transports serve: `tools/list` and `tools/call` for one mode.

Modes: `progressive` (the four meta-tools), `direct` (every catalog tool as its own MCP tool) and
`hybrid` (both). This is the one place where our errors become MCP results: a ToolError becomes
an `isError` result; a call to a tool outside the surface raises UnknownTool, which transports
answer with a JSON-RPC invalid-params error. Every result passes one last masking step for the
call's secrets (the caller's key, the gateway's servers' secrets), as do the logs it makes. Example::

    surface = Surface.from_settings(Settings.from_env())
    [t.name for t in surface.list_tools()]      # ['TOOL_LIST', 'TOOL_SEARCH', 'TOOL_GET', 'TOOL_CALL']
    surface.call_tool("TOOL_SEARCH", {"query": "apple price"}, CallContext())
"""

from __future__ import annotations

import datetime as dt
import hashlib
import logging
import os
import threading
import time
import traceback
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from progressive_mcp.calls.arguments import prepare_arguments
from progressive_mcp.calls.cache import (
    CACHEABLE_METHODS,
    LOCAL,
    PUBLIC,
    SERVER,
    CachedAnswer,
    MemoryCache,
    ResponseCache,
    ResultStore,
    cache_key,
    caller_entitlement,
)
from progressive_mcp.calls.codemode import TOOL_EXECUTE, CodeMode
from progressive_mcp.calls.sandbox import Sandbox, ScriptError, ScriptLimits
from progressive_mcp.calls.shaping import shape_result
from progressive_mcp.calls.stubs import forced_json, python_name
from progressive_mcp.calls.upstream import UpstreamClient, UpstreamTransport, http_method
from progressive_mcp.catalog import Catalog, CatalogTool
from progressive_mcp.errors import ConfigError, MissingApiKey, ToolError, ToolWithheld, UnknownTool
from progressive_mcp.gateway.results import script_value, server_result
from progressive_mcp.redaction import Secrets, key_problem, protect_logs, redact
from progressive_mcp.settings import Mode, Settings
from progressive_mcp.sources import load_catalog
from progressive_mcp.surfaces.auto import AUTO, DEFAULT_AUTO_DIRECT_TOKENS, AutoChoice, AutoFallback, choose_mode
from progressive_mcp.surfaces.metatools import META_TOOL_NAMES, TOOL_CALL, TOOL_GET, TOOL_LIST, MetaTools
from progressive_mcp.tokens import dumps
from progressive_mcp.upstream_auth import KEY_FORMAT_ENV, choose_auth, secret_forms

if TYPE_CHECKING:
    import mcp_types as types

    from progressive_mcp.gateway.gateway import Gateway, ServerDown
    from progressive_mcp.policies import Policy

logger = logging.getLogger(__name__)


@dataclass
class CallRecord:
    """What one call did, for logs and metrics (never arguments, keys or answers)."""

    tool: str | None = None  # the catalog tool that ran (TOOL_CALL's target too)
    error: str | None = None  # the error type of an isError result
    upstream_ms: float | None = None  # time spent waiting for the upstream, retries included
    cache: str | None = None  # "hit", "miss", "bypass" (not cacheable) or "error" (the cache failed)
    script_calls: list[CallRecord] = field(default_factory=list)  # TOOL_EXECUTE: what each of its tool calls did


@dataclass(frozen=True)
class CallContext:
    """Per-request values: they travel with the call, never in globals. repr() hides the key.

    `missing_key_help` replaces the default "set the environment variable" advice when a call
    needs the upstream and no key came with it (over HTTP: how to pass one with the request).
    `entitlement` says whose plan the key stands for (see `progressive_mcp.calls.cache`): PUBLIC for a
    caller's own key on a shared server, SERVER for the server's key, LOCAL for a one-user process.
    """

    api_key: str | None = field(default=None, repr=False)
    missing_key_help: str | None = None
    record: CallRecord | None = None
    entitlement: str = PUBLIC
    # time.monotonic() by which a tool call must be done (Lambda: the invocation's end, less a margin);
    # the call's own deadline (PMCP_DEADLINE_S) applies too, whichever comes first.
    deadline: float | None = None
    # Who is calling, for code mode's fair share of sandbox workers (progressive_mcp.calls.fairness): a digest of
    # the caller's key or bearer token, or "address:..." for a caller without one. None: the process's only
    # caller (stdio), whose scripts may use the whole pool.
    caller: str | None = None
    # The client's network address where the transport knows it (HTTP): all its callers together have a share.
    address: str | None = None


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
        cache: ResponseCache | None = None,
        results: ResultStore | None = None,
        clock: Callable[[], float] = time.time,
        direct_definitions: dict[str, dict[str, Any]] | None = None,
        shaped: MemoryCache | None = None,
        sandbox: Sandbox | None = None,
        script_limits: ScriptLimits | None = None,
        semantic: bool | None = None,
        schema_view: str | None = None,
        gateway: Gateway | None = None,
        auto_direct_tokens: int = DEFAULT_AUTO_DIRECT_TOKENS,
        auto_fallback: AutoFallback = "progressive",
        policy: Policy | None = None,
    ) -> None:
        """`gateway`: the MCP servers whose tools the catalog holds (calls to them go there); `cache` keeps upstream
        answers (None: no cache); `results` takes full answers too large to show; `policy`: the caller's, which
        narrowed `catalog` (None: none), and which the gateway's withheld tools and down servers pass too;
        `schema_view`: TOOL_GET's view of a tool, `json` or `compact` (None: PMCP_SCHEMA_VIEW);
        `direct_definitions` is the shared store of catalog tools' wire definitions (see `variant`); mode `auto`
        becomes direct or `auto_fallback` here, by `auto_direct_tokens` (see surfaces/auto.py)."""
        unknown = sorted((categories or frozenset()) - set(catalog.categories))
        if unknown:
            raise ConfigError(
                f"unknown categories {', '.join(unknown)}; the spec defines {', '.join(catalog.categories)}"
            )
        self.catalog = catalog
        self.gateway = gateway
        self.policy = policy
        # The secrets of every server behind the gateway: no answer, error or log line shows one.
        self._server_secrets = Secrets.of(*gateway.config.secrets, basic_parts=False) if gateway else Secrets.of()
        protect_logs(self._server_secrets, self)
        # Each catalog tool's wire definition, made once and shared by every variant of this surface. The SDK's
        # models of them (for the stdio server) are made on the first `list_tools()`: mcp_types is not imported
        # on the HTTP path, where a cold start would pay ~250 ms for it.
        self._direct_definitions = direct_definitions if direct_definitions is not None else {}
        # `auto`: decided once, here, on the tools this surface may show (`auto` stays its requested mode).
        self.requested_mode: Mode = mode
        self.auto_direct_tokens, self.auto_fallback = auto_direct_tokens, auto_fallback
        self.auto: AutoChoice | None = None
        if mode == AUTO:
            self.auto = self._choose_auto(catalog.in_categories(categories), categories)
            mode = self.auto.mode
        self.mode = mode
        self.categories = categories
        self.semantic = semantic
        self.upstream = upstream or UpstreamClient(catalog.api)
        self.max_result_tokens = max_result_tokens
        self.cache = cache
        self.results = results
        self._clock = clock
        # What was sent for an answer, by cache key: a repeat is answered without shaping it again (a big answer
        # takes long to cut to size). Small (a shaped answer fits the token budget), and shared by variants.
        self._shaped = shaped if shaped is not None else MemoryCache(1024, max_bytes=32 * 1024 * 1024, clock=clock)
        # Surfaces that differ only in mode share one MetaTools; a narrower one shares its search index (which
        # takes ~20 ms to build), filtered at query time: a new ?mode=/?categories= pair builds no index.
        shared = meta is not None and meta.categories == categories and schema_view in (None, meta.view)
        self.meta = (
            meta
            if meta is not None and shared
            else MetaTools(
                catalog,
                categories=categories,
                base=meta,
                semantic=semantic,
                view=schema_view or (meta.view if meta is not None else None),
            )
        )
        self._discovery = self.meta.discovery_handlers(code=mode == "code")
        self._direct = {t.name: t for t in catalog.in_categories(categories)} if mode in ("direct", "hybrid") else {}
        # Code mode's scripts run in one sandbox pool per process (started with the first script).
        self.sandbox = sandbox if sandbox is not None else shared_sandbox()
        self.script_limits = script_limits or ScriptLimits()
        self._code = (
            CodeMode(self.meta.tools, self.sandbox, self.script_limits, max_result_tokens, names=self.meta.python_names)
            if mode == "code"
            else None
        )
        meta_definitions = self.meta.code_definitions if mode == "code" else self.meta.definitions
        definitions = [_wire_definition(d) for d in meta_definitions] if mode != "direct" else []
        definitions += self._definitions_of(self._direct.values())
        self._definitions = tuple(definitions)
        self._models: list[types.Tool] | None = None
        # With search hints, for a gateway that asks (`tool_definitions`, `list_tools`).
        self._hinted: tuple[dict[str, Any], ...] | None = None
        self._hinted_models: list[types.Tool] | None = None
        self._models_lock = threading.Lock()

    def _definitions_of(self, tools: Iterable[CatalogTool]) -> list[dict[str, Any]]:
        """These tools' wire definitions, each made once and shared by the surface's variants."""
        definitions = []
        for tool in tools:
            definition = self._direct_definitions.get(tool.name)
            if definition is None:
                definition = self._direct_definitions.setdefault(tool.name, _wire_definition(tool.definition()))
            definitions.append(definition)
        return definitions

    def _choose_auto(self, tools: Sequence[CatalogTool], categories: frozenset[str] | None) -> AutoChoice:
        """`auto`'s choice for the tools this surface may show (a policy narrowing them narrows this input)."""
        definitions = self._definitions_of(tools)
        choice = choose_mode(definitions, threshold=self.auto_direct_tokens, fallback=self.auto_fallback)
        logger.info(
            "auto mode picked %s: %d tools cost %d tokens as a direct tools/list (threshold %d)",
            choice.mode,
            choice.tools,
            choice.direct_tokens,
            choice.threshold,
            extra={"auto": choice.as_meta(), "categories": sorted(categories) if categories else None},
        )
        return choice

    @classmethod
    def from_settings(
        cls,
        settings: Settings,
        *,
        catalog: Catalog | None = None,
        transport: UpstreamTransport | None = None,
        cache: ResponseCache | None = None,
        results: ResultStore | None = None,
        gateway: Gateway | None = None,
    ) -> Surface:
        """A surface as configured; `cache` replaces the in-memory cache that `settings.cache` asks for; `gateway`
        serves the tools of `catalog` that come from MCP servers."""
        if catalog is None:  # not `or`: an empty catalog (a gateway before its first sync) is falsy
            catalog = load_catalog(
                settings.spec_path,
                include=settings.include,
                exclude=settings.exclude,
                vocabulary=settings.vocabulary_path,
            )
        if settings.upstream_auth is not None or settings.key_format is not None:  # the user's word over the catalog's
            api = choose_auth(catalog.api, settings.upstream_auth, settings.key_format)
            catalog = Catalog.build(api, catalog.categories, catalog.tools, catalog.vocabulary)
        upstream = UpstreamClient(
            catalog.api,
            base_url=settings.upstream_url,
            transport=transport,
            timeout_s=settings.upstream_timeout_s,
            retries=settings.upstream_retries,
            deadline_s=settings.deadline_s,
            max_body_bytes=settings.max_upstream_bytes,
        )
        return cls(
            catalog,
            mode=settings.mode,
            categories=settings.categories,
            upstream=upstream,
            max_result_tokens=settings.max_result_tokens,
            cache=(cache or MemoryCache()) if settings.cache else None,
            results=results,
            script_limits=settings.script_limits,
            semantic=settings.semantic,
            schema_view=settings.schema_view,
            gateway=gateway,
            auto_direct_tokens=settings.auto_direct_tokens,
            auto_fallback=settings.auto_fallback,
        )

    def default_context(self, settings: Settings, environ: Mapping[str, str] | None = None) -> CallContext:
        """The context of a single-user server (stdio): the key from settings or the spec's env var."""
        env = os.environ if environ is None else environ
        auth = self.catalog.api.auth
        api_key = settings.with_api_key_from(env, auth.env if auth else None).api_key
        problem = key_problem(api_key) if api_key else None
        if problem:
            source = auth.env if auth and env.get(auth.env) else "the configured API key"
            shaped = " " in (api_key or "").strip()  # `Token token=abc`: the key alone, its shape in the key format
            hint = f"; to send it inside a longer value, set the key alone and {KEY_FORMAT_ENV} ('Token token={{key}}')"
            raise ConfigError(
                f"{source} {problem}; set it to your real {self.catalog.api.title} key" + (hint if shaped else "")
            )
        # The process's own key (and the value made of it, see PMCP_UPSTREAM_KEY_FORMAT): out of every log line.
        protect_logs(Secrets.of(*secret_forms(auth, api_key)), self)
        return CallContext(api_key=api_key, entitlement=LOCAL)

    def variant(
        self,
        mode: Mode,
        categories: frozenset[str] | None,
        *,
        auto_fallback: AutoFallback | None = None,
        schema_view: str | None = None,
    ) -> Surface:
        """The same catalog and upstream with another mode or category filter (for per-URL choices); `auto_fallback`
        replaces this surface's for mode `auto`, `schema_view` its TOOL_GET view (its search index is shared)."""
        return Surface(
            self.catalog,
            mode=mode,
            categories=categories,
            meta=self.meta,
            schema_view=schema_view,
            direct_definitions=self._direct_definitions,
            auto_fallback=auto_fallback or self.auto_fallback,
            policy=self.policy,
            **self._shared(),
        )

    def narrowed(self, catalog: Catalog, categories: frozenset[str] | None, *, policy: Policy | None = None) -> Surface:
        """This surface over a narrower catalog (`policy`'s, see `progressive_mcp.policies.narrow_catalog`): its own
        search index and definitions, the same upstream, caches and sandbox; `auto` decides again on its tools."""
        return Surface(
            catalog,
            mode=self.requested_mode,
            categories=categories,
            semantic=self.semantic,
            schema_view=self.meta.view,
            auto_fallback=self.auto_fallback,
            policy=policy,
            **self._shared(),
        )

    def _shared(self) -> dict[str, Any]:
        """What `variant` and `narrowed` keep of this surface whatever else they change: the upstream, caches,
        clock, sandbox and limits, and the gateway."""
        return {
            "upstream": self.upstream,
            "max_result_tokens": self.max_result_tokens,
            "cache": self.cache,
            "results": self.results,
            "clock": self._clock,
            "shaped": self._shaped,
            "sandbox": self.sandbox,
            "script_limits": self.script_limits,
            "gateway": self.gateway,
            "auto_direct_tokens": self.auto_direct_tokens,
        }

    def under(self, policy: Policy) -> Surface:
        """This surface as `policy` sees it (a one-user process's, stdio): over the catalog narrowed to the tools the
        policy allows within this surface's categories; this surface itself for a policy that hides nothing."""
        from progressive_mcp.policies import narrow_catalog

        if policy.unrestricted:
            return self
        if self.categories is not None:  # PMCP_CATEGORIES still applies: the policy only narrows it
            within = self.categories if policy.categories is None else self.categories & policy.categories
            policy = replace(policy, categories=within)
        return self.narrowed(narrow_catalog(self.catalog, policy), None, policy=policy)

    @property
    def instructions(self) -> str:
        """The server's `instructions`: one line on how to use this surface."""
        api = self.catalog.api
        if self.mode == "direct":
            return f"Each tool is one {api.title} function; call it directly."
        if self.mode == "code":
            return (
                f"{len(self.meta.tools)} {api.title} tools are Python async functions: find them with TOOL_SEARCH "
                "(or TOOL_LIST), read their typed stubs with TOOL_GET, then send one script to TOOL_EXECUTE that "
                "calls them and returns only the answer."
            )
        return (
            f"{len(self.meta.tools)} {api.title} tools are behind 4 meta-tools: TOOL_SEARCH (or TOOL_LIST) to "
            "find a tool, TOOL_GET for its schema, TOOL_CALL to run it."
        )

    def tool_definitions(self, *, hints: bool = False) -> tuple[dict[str, Any], ...]:
        """The tool definitions of this surface as wire JSON objects (what `tools/list` sends; callers must not
        change them); `hints`: with each catalog tool's search hints in its `_meta` (`search.hints`: a gateway
        asked)."""
        if hints and self._direct:
            return self._hinted_definitions()
        return self._definitions

    def list_tools(self, *, hints: bool = False) -> list[types.Tool]:
        """The tool definitions of this surface as the SDK's models (built on first use, then the same list);
        `hints` as in `tool_definitions`."""
        if hints and self._direct:
            import mcp_types

            with self._models_lock:
                if self._hinted_models is None:
                    hinted = self._hinted_definitions()
                    self._hinted_models = [mcp_types.Tool.model_validate(d) for d in hinted]
                return self._hinted_models
        if self._models is None:
            import mcp_types

            with self._models_lock:
                if self._models is None:
                    self._models = [mcp_types.Tool.model_validate(d) for d in self._definitions]
        return self._models

    def _hinted_definitions(self) -> tuple[dict[str, Any], ...]:
        if self._hinted is None:  # a race builds equal tuples twice at worst
            from progressive_mcp.search.hints import with_hints

            direct = self._direct
            self._hinted = tuple(
                with_hints(d, direct[d["name"]]) if d["name"] in direct else d for d in self._definitions
            )
        return self._hinted

    def call_tool(self, name: str, arguments: Mapping[str, Any] | None, ctx: CallContext) -> types.CallToolResult:
        """Run a tool of this surface. Raises UnknownTool for a name this surface does not offer."""
        import mcp_types

        return mcp_types.CallToolResult.model_validate(self.call_tool_wire(name, arguments, ctx))

    def call_tool_wire(self, name: str, arguments: Mapping[str, Any] | None, ctx: CallContext) -> dict[str, Any]:
        """`call_tool`'s result as its wire JSON object (what the HTTP endpoint sends, without a model round trip).
        Whatever it says passes a last masking step: the call's secrets (see `call_secrets`) are masked where text
        was made too, before any cut; this pass is there for what a path missed. Catalog answers (TOOL_LIST,
        TOOL_SEARCH, TOOL_GET) hold no caller key: only the servers' secrets are looked for in them."""
        if self.mode != "direct" and name in self._discovery:  # the catalog's own answers: no key went into them
            result = self._call_tool_wire(name, arguments, ctx)
            return self._server_secrets.scrub(result)[0] if self._server_secrets else result
        secrets = self.call_secrets(ctx)
        with secrets.in_logs():
            result = self._call_tool_wire(name, arguments, ctx)
        masked, _ = secrets.scrub(result)
        return masked

    def call_secrets(self, ctx: CallContext) -> Secrets:
        """What a call must not show: the caller's key (and each side of a user:password key) and the secrets of
        every server behind the gateway."""
        return Secrets.of(*secret_forms(self.catalog.api.auth, ctx.api_key)) + self._server_secrets

    def _call_tool_wire(self, name: str, arguments: Mapping[str, Any] | None, ctx: CallContext) -> dict[str, Any]:
        args = dict(arguments or {})
        handler = self._discovery.get(name) if self.mode != "direct" else None
        try:
            if handler is not None:
                withheld = self.withheld_entries()
                if name == TOOL_GET and withheld:
                    payload = self._tool_get_beside_withheld(handler, args)
                else:
                    payload = handler(args)
                if name == TOOL_LIST and withheld:
                    payload = {**payload, "withheld": withheld}
                if name == TOOL_LIST and (down := self.unavailable_servers()):
                    payload = {**payload, "unavailable": [d.as_json() for d in down]}
                return _result(payload)
            if name == TOOL_CALL and self.mode in ("progressive", "hybrid"):
                tool, raw = self.meta.resolve_call(args)
                return self._run(tool, raw, ctx, via_call=True)
            if name == TOOL_EXECUTE and self._code is not None:
                return self._execute(args, ctx)
        except ToolError as exc:
            return _error_result(self._unavailable_category(name, args) or self._withheld(exc), ctx)
        direct = self._direct.get(name) if name not in META_TOOL_NAMES else None
        if direct is None:
            raise self._unknown(name)
        return self._run(direct, args, ctx)

    def _run(
        self, tool: CatalogTool, raw_arguments: Any, ctx: CallContext, *, via_call: bool = False
    ) -> dict[str, Any]:
        record = ctx.record if ctx.record is not None else CallRecord()
        record.tool = tool.name
        if tool.server is not None:
            return self._forward(tool, raw_arguments, ctx, record, via_call=via_call)
        deadline = self.upstream.deadline(ctx.deadline)  # set before the cache read, so that counts too
        try:
            arguments = prepare_arguments(self.catalog, tool.name, raw_arguments)
            if not ctx.api_key and ctx.missing_key_help and self.catalog.api.auth is not None:
                raise MissingApiKey(ctx.missing_key_help)
            key = self._cache_key(tool, arguments, ctx)
            shaped = self._shaped.get(key) if key is not None else None
            if shaped is not None:  # this very answer was shaped before: send it again as it was
                record.cache = "hit"
                return _result({**shaped.payload, "cached_at": _iso(shaped.cached_at)})
            answer, keep, cached_at = self._answer(tool, arguments, ctx, record, deadline, key)
            link_expiry: list[float] = []
            envelope = shape_result(
                tool,
                arguments,
                answer.payload,
                answer.format,
                budget_tokens=self.max_result_tokens,
                when_cut=(lambda: self._offload(tool, answer, link_expiry)) if self.results is not None else None,
                out_of_time=lambda: self.upstream.clock() > deadline,
            )
            if key is not None and keep:
                # Until the answer or its download link expires (a link re-made a minute early).
                expires_at = min([answer.expires_at, *(at - 60 for at in link_expiry)])
                self._shaped.put(key, replace(answer, payload=envelope, expires_at=expires_at))
            if cached_at is not None:
                envelope = {**envelope, "cached_at": _iso(cached_at)}
        except ToolError as exc:
            logger.info("tool call failed", extra={"tool": tool.name, "error": type(exc).__name__})
            record.error = type(exc).__name__
            return _error_result(exc, ctx)
        except Exception as exc:  # a bug of ours: say so without details that could carry secrets
            # The traceback goes through redact (an exception text may quote the upstream URL, key and all).
            trace = redact("".join(traceback.format_exception(exc)), ctx.api_key)
            logger.error("unexpected error in a tool call: %s", trace, extra={"tool": tool.name})
            return _error_result(ToolError(f"Internal error while running {tool.name}; please report it."), ctx)
        return _result(envelope)

    def _forward(
        self, tool: CatalogTool, raw_arguments: Any, ctx: CallContext, record: CallRecord, *, via_call: bool
    ) -> dict[str, Any]:
        """A call to a tool of an MCP server behind the gateway: arguments checked against the server's schema,
        then the server's result passed back whole (text, images, resources, structuredContent, isError) when it
        fits the token budget, else a text preview (with a link to the whole result where a result store is set).
        Through TOOL_CALL the structured part is wrapped as `{"tool", "data"}`, TOOL_CALL's own output shape."""
        assert self.gateway is not None
        deadline = self.upstream.deadline(ctx.deadline)
        try:
            arguments = prepare_arguments(self.catalog, tool.name, raw_arguments)
            result = self._call_server(tool, arguments, deadline, record)
        except ToolError as exc:
            record.error = type(exc).__name__
            return _error_result(exc, ctx)
        return server_result(
            tool,
            arguments,
            result,
            self.call_secrets(ctx),
            budget_tokens=self.max_result_tokens,
            via_call=via_call,
            offload=(lambda body: self._offload_body(tool, body)) if self.results is not None else None,
        )

    def _call_server(
        self, tool: CatalogTool, arguments: dict[str, Any], deadline: float, record: CallRecord
    ) -> dict[str, Any]:
        """The gateway's call of a server's tool within what is left of the deadline, its time recorded."""
        assert self.gateway is not None
        started = time.perf_counter()
        try:
            return self.gateway.call(tool, arguments, max(0.1, deadline - self.upstream.clock()))
        finally:
            record.upstream_ms = (time.perf_counter() - started) * 1000

    def _offload_body(self, tool: CatalogTool, body: dict[str, Any]) -> dict[str, Any]:
        answer = CachedAnswer(body, "json", self._clock(), self._clock(), 0)
        return self._offload(tool, answer, [])

    def _answer(
        self,
        tool: CatalogTool,
        arguments: dict[str, Any],
        ctx: CallContext,
        record: CallRecord,
        deadline: float,
        key: str | None,
    ) -> tuple[CachedAnswer, bool, float | None]:
        """The upstream's answer to a validated call, from the response cache or the upstream: the answer,
        whether it may be kept, and when it was cached (None if it was just fetched)."""
        answer = self._cached(key, record) if key is not None else None
        if answer is not None:
            return answer, True, answer.cached_at
        answer, keep = self._fetch(tool, arguments, ctx, record, deadline)
        if key is not None and keep:
            keep = self._keep(key, answer, record)  # a cache that fails to keep it: no shortcut either
        return answer, keep, None

    def _execute(self, args: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
        """TOOL_EXECUTE: run the script; each of its tool calls takes TOOL_CALL's path with this caller's key."""
        assert self._code is not None
        record = ctx.record if ctx.record is not None else CallRecord()
        record.tool = TOOL_EXECUTE
        deadline = self.upstream.deadline(ctx.deadline)

        def call_tool(tool: CatalogTool, raw_arguments: dict[str, Any], script_deadline: float) -> tuple[Any, bool]:
            call_record = CallRecord(tool=tool.name)
            record.script_calls.append(call_record)  # for the metrics: upstream calls, errors, cache use
            try:
                if forced_json(tool):  # the stubs describe JSON answers: a script never gets CSV
                    raw_arguments = {**raw_arguments, "datatype": "json"}
                arguments = prepare_arguments(self.catalog, tool.name, raw_arguments)
                if not ctx.api_key and ctx.missing_key_help and self.catalog.api.auth is not None:
                    raise MissingApiKey(ctx.missing_key_help)
                key = self._cache_key(tool, arguments, ctx)
                call_deadline = min(self.upstream.deadline(ctx.deadline), script_deadline)
                answer, _keep, cached_at = self._answer(tool, arguments, ctx, call_record, call_deadline, key)
            except ToolError as exc:
                call_record.error = type(exc).__name__
                raise
            return answer.payload, cached_at is not None

        try:
            withheld = {python_name(name): error for name, error in self._withheld_errors().items()}
            answer = self._code.execute(
                args,
                call_tool,
                deadline,
                caller=ctx.caller,
                address=ctx.address,
                secrets=self.call_secrets(ctx),
                withheld=withheld,
            )
            return _result(answer)
        except ToolError as exc:
            record.error = type(exc).__name__
            return _error_result(exc, ctx)
        except (
            Exception
        ) as exc:  # the sandbox itself failed (e.g. its worker binary is missing): ours, not the script's
            trace = redact("".join(traceback.format_exception(exc)), ctx.api_key)
            logger.error("code mode could not run a script: %s", trace)
            record.error = "SandboxUnavailable"
            failure = ToolError("Code mode could not run the script: the sandbox is not available on this server.")
            return _error_result(failure, ctx)

    def _fetch(
        self, tool: CatalogTool, arguments: dict[str, Any], ctx: CallContext, record: CallRecord, deadline: float
    ) -> tuple[CachedAnswer, bool]:
        """Ask the upstream; the answer, and whether it may be kept (not when it echoed the key). Errors, rate
        limits and premium notices raise, so they are never kept."""
        if tool.server is not None:  # a script's call to a tool of an MCP server behind the gateway
            payload = script_value(tool, self._call_server(tool, arguments, deadline, record), self.call_secrets(ctx))
            now = self._clock()
            return CachedAnswer(payload, "json", now, now, 0), False
        started = time.perf_counter()
        try:
            result = self.upstream.call(tool, arguments, ctx.api_key, deadline=deadline)
        finally:
            if ctx.api_key or self.catalog.api.auth is None:  # without a key, no request went out
                record.upstream_ms = (time.perf_counter() - started) * 1000
        now = self._clock()
        answer = CachedAnswer(result.payload, result.format, now, now + tool.cache_ttl_s, result.size)
        return answer, not result.held_key

    def _cache_key(self, tool: CatalogTool, arguments: dict[str, Any], ctx: CallContext) -> str | None:
        """The cache key of this call, or None when it must not be cached (no cache, no TTL, a paid answer, a call
        that is not a read: a POST's answer is an effect, and a repeat must reach the upstream again)."""
        if self.cache is None or tool.cache_ttl_s <= 0 or http_method(tool) not in CACHEABLE_METHODS:
            return None
        if ctx.entitlement not in (SERVER, LOCAL):
            # A caller's own key on a shared endpoint: that key's answers are kept for that key alone, so
            # no caller is served data fetched with someone else's key (or plan). No key, no upstream call.
            return cache_key(tool.name, arguments, caller_entitlement(ctx.api_key)) if ctx.api_key else None
        entitlement = PUBLIC
        if tool.premium or any(arguments.get(p.name) in p.premium_values for p in tool.params if p.premium_values):
            entitlement = ctx.entitlement  # a paid answer: the server's or the local user's plan
        return cache_key(tool.name, arguments, entitlement)

    def _cached(self, key: str, record: CallRecord) -> CachedAnswer | None:
        assert self.cache is not None
        try:
            answer = self.cache.get(key)
        except Exception as exc:  # a cache outage degrades to a direct call, never to an error
            logger.warning("response cache read failed", extra={"error": type(exc).__name__})
            record.cache = "error"
            return None
        record.cache = "hit" if answer is not None else "miss"
        return answer

    def _keep(self, key: str, answer: CachedAnswer, record: CallRecord) -> bool:
        """Put an answer in the response cache; False when the cache failed."""
        assert self.cache is not None
        try:
            self.cache.put(key, answer)
        except Exception as exc:
            logger.warning("response cache write failed", extra={"error": type(exc).__name__})
            record.cache = "error"
            return False
        return True

    def _offload(self, tool: CatalogTool, answer: CachedAnswer, link_expiry: list[float]) -> dict[str, Any]:
        """Put the full answer in the result store; the fields that tell the model where it is ({} on failure).
        The link's expiry (epoch seconds) is added to `link_expiry`."""
        assert self.results is not None
        if answer.format == "csv" and isinstance(answer.payload, str):
            body, content_type, suffix = answer.payload.encode("utf-8"), "text/csv; charset=utf-8", "csv"
        elif answer.format == "text" and isinstance(answer.payload, str):
            body, content_type, suffix = answer.payload.encode("utf-8"), "text/plain; charset=utf-8", "txt"
        else:
            body, content_type, suffix = dumps(answer.payload).encode("utf-8"), "application/json", "json"
        # Content-addressed: the same answer is stored once however often it is asked for.
        name = f"{tool.name}/{hashlib.sha256(body).hexdigest()[:40]}.{suffix}"
        try:
            stored = self.results.put(name, body, content_type)
        except Exception as exc:  # no store: the preview alone, as on stdio
            logger.warning("large result upload failed", extra={"tool": tool.name, "error": type(exc).__name__})
            return {}
        link_expiry.append(stored.expires_at)
        return {
            "full_result": {
                "url": stored.url,
                "expires_at": _iso(stored.expires_at),
                "bytes": len(body),
                "format": suffix,
            }
        }

    def _unknown(self, name: str) -> UnknownTool:
        """The error for a name this surface does not offer; it names only tools the surface has."""
        withheld = self._withheld(UnknownTool(name, []))
        if isinstance(withheld, ToolWithheld):
            return withheld
        suggestions = self.catalog.suggest(name, among=[d["name"] for d in self._definitions])
        if self.mode != "direct":
            return UnknownTool(name, suggestions)
        how = "Every tool this server offers is in tools/list."
        if name in META_TOOL_NAMES:
            how = f"{name} is not offered here: this server runs in direct mode, where {how[0].lower()}{how[1:]}"
        return UnknownTool(name, suggestions, how_to_find=how)

    def _unavailable_category(self, name: str, args: Mapping[str, Any]) -> ToolError | None:
        """TOOL_LIST of a category that is a server behind the gateway that could not be synced: it has no tools
        because it is down, not because no such category exists; the error says why and when it is retried."""
        category = args.get("category") if name == TOOL_LIST else None
        if self.gateway is None or not isinstance(category, str):
            return None
        down = next((d for d in self.unavailable_servers() if d.server == category.strip()), None)
        if down is None:
            return None
        return ToolError(
            f"The MCP server {down.server!r} is unavailable: {down.reason}. It is retried at "
            f"{down.as_json()['retry_at']} (when TOOL_LIST is next asked after that); the other servers' tools work."
        )

    def _withheld_errors(self) -> dict[str, ToolWithheld]:
        """The gateway's withheld tools by name, each as the error that says why and how it gets approved."""
        return {w["name"]: ToolWithheld(w["name"], w["reason"], w["hash"]) for w in self.withheld_entries()}

    def _tool_get_beside_withheld(
        self, handler: Callable[[dict[str, Any]], dict[str, Any]], args: dict[str, Any]
    ) -> dict[str, Any]:
        """TOOL_GET when some tools are withheld: a withheld name asked for is answered as withheld (why, and the
        approve command), not as unknown with suggestions; the other names as usual."""
        held = self._withheld_errors()
        requested = args.get("tool_name")
        names = [requested] if isinstance(requested, str) else requested
        if not isinstance(names, list) or not any(isinstance(n, str) and n in held for n in names):
            return handler(args)
        asked = [held[n] for n in dict.fromkeys(names) if isinstance(n, str) and n in held]
        rest = [n for n in names if not (isinstance(n, str) and n in held)]
        if not rest:
            if len(asked) == 1:
                raise asked[0]
            raise ToolError(" ".join(str(e) for e in asked))
        try:
            payload = handler({**args, "tool_name": rest})
        except ToolError as exc:  # none of the others is known either
            raise ToolError(" ".join([str(self._withheld(exc)), *(str(e) for e in asked)])) from None
        not_found = [{"name": e.name, "suggestions": [], "withheld": str(e)} for e in asked]
        return {**payload, "not_found": [*payload.get("not_found", []), *not_found]}

    def _withheld(self, exc: ToolError) -> ToolError:
        """An unknown tool that is a gateway's withheld one says so, and how it gets approved; any other error
        stays as it is."""
        if not isinstance(exc, UnknownTool) or self.gateway is None:
            return exc
        entry = next((w for w in self.withheld_entries() if w["name"] == exc.name), None)
        return exc if entry is None else ToolWithheld(exc.name, entry["reason"], entry["hash"])

    def withheld_entries(self) -> list[dict[str, str]]:
        """The gateway's withheld tools this surface may name: under a policy, only those it would show once approved
        (`policies.shows_withheld`); a hidden one is unknown here, as a tool that does not exist."""
        if self.gateway is None:
            return []
        withheld = self.gateway.withheld
        if self.policy is None or not withheld:
            return withheld
        from progressive_mcp.policies import shows_withheld

        return [w for w in withheld if shows_withheld(self.policy, w["name"], self._server_categories(w["server"]))]

    def unavailable_servers(self) -> list[ServerDown]:
        """The gateway's servers that are down, as this surface may name them: under a policy, a server one of whose
        known tools it shows (`policies.shows_unknown_server` for one with none known)."""
        if self.gateway is None:
            return []
        down = self.gateway.unavailable()
        if self.policy is None or not down:
            return down
        from progressive_mcp.policies import shows_unknown_server

        known = {t.server for t in self.gateway.catalog.tools}
        visible = {t.server for t in self.catalog.tools}
        return [
            d
            for d in down
            if d.server in visible
            or (d.server not in known and shows_unknown_server(self.policy, self._server_categories(d.server)))
        ]

    def _server_categories(self, server: str) -> list[str]:
        """The categories a server's tools may fall in: the server's own, and its servers-file categories."""
        assert self.gateway is not None
        config = next((s for s in self.gateway.config.servers if s.name == server), None)
        return [server, *(f"{server}/{name}" for name in (config.categories if config else {}))]


class GatewaySurfaces:
    """The surface of a gateway's current catalog: rebuilt (and its version moved) when a sync changes the
    catalog, so every request is answered from the tools as last synced. `transport`, `cache` and `results` are
    as for `Surface.from_settings` (they serve a spec's tools beside the servers', and offloaded results)."""

    def __init__(
        self,
        gateway: Gateway,
        settings: Settings,
        *,
        transport: UpstreamTransport | None = None,
        cache: ResponseCache | None = None,
        results: ResultStore | None = None,
    ) -> None:
        self.gateway = gateway
        self.settings = settings
        self._pieces: dict[str, Any] = {"transport": transport, "cache": cache, "results": results}
        self._surface: Surface | None = None
        self._lock = threading.Lock()

    def current(self) -> Surface:
        catalog = self.gateway.catalog
        surface = self._surface
        if surface is not None and surface.catalog is catalog:
            return surface
        with self._lock:
            if self._surface is None or self._surface.catalog is not catalog:
                # Categories are servers here: one that lists no tool now is left out rather than refused.
                categories = frozenset(c for c in self.settings.categories or () if c in catalog.categories) or None
                settings = replace(self.settings, categories=categories)
                built = Surface.from_settings(settings, catalog=catalog, gateway=self.gateway, **self._pieces)
                # The cache and the upstream's connections outlive one catalog.
                self._pieces.update(transport=built.upstream.transport, cache=built.cache)
                self._surface = built
            return self._surface


_SANDBOX: Sandbox | None = None


def shared_sandbox() -> Sandbox:
    """The process's one sandbox pool (its workers start with the first script, not here)."""
    global _SANDBOX
    if _SANDBOX is None:
        _SANDBOX = Sandbox()
    return _SANDBOX


def _iso(epoch_s: float) -> str:
    return dt.datetime.fromtimestamp(epoch_s, dt.UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def _wire_definition(definition: Mapping[str, Any]) -> dict[str, Any]:
    """A tool definition as `tools/list` sends it: members without a value (a tool with no title) are left out,
    as the SDK's serializer leaves them out (`exclude_none`)."""
    return {key: value for key, value in definition.items() if value is not None}


def _result(payload: dict[str, Any]) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": dumps(payload)}], "structuredContent": payload, "isError": False}


def _error_result(exc: ToolError, ctx: CallContext) -> dict[str, Any]:
    # A script's error quotes its code (`max(d, key=d.get)`): only the key itself is masked there. The servers'
    # secrets are masked by the last pass (`Surface.call_tool_wire`); the text the errors quote was masked and
    # escaped where it was read (an upstream's body, a server's message or stderr), before it was cut.
    script = isinstance(exc, ScriptError)
    secrets = Secrets.of(ctx.api_key)
    error: dict[str, Any] = {"type": type(exc).__name__, "message": secrets.clean(str(exc), pairs=not script)}
    error.update(exc.details())
    if script and "printed" in error:
        error["printed"] = secrets.mask(error["printed"], pairs=False)
    payload = {"error": error}
    return {"content": [{"type": "text", "text": dumps(payload)}], "structuredContent": payload, "isError": True}
