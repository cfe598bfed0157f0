"""The MCP endpoint over HTTP, transport-neutral: (method, path, query, headers, body) → (status, headers, body).

One URL serves both protocol eras of MCP Streamable HTTP, statelessly (any request may be the first
this process sees):

- **2026-07-28**, chosen by an `MCP-Protocol-Version: 2026-07-28` header: every request carries its
  own `_meta` envelope, the `MCP-Protocol-Version`, `Mcp-Method` and `Mcp-Name` headers must agree with
  the body, `server/discover` replaces `initialize`, results carry `resultType`, `tools/list` carries
  `ttlMs`/`cacheScope`, and protocol errors map to HTTP statuses (unknown method → 404).
- **The handshake era** (2024-11-05 … 2025-11-25), otherwise: `initialize` negotiates a version;
  `ping`, `tools/list` and `tools/call` work without a prior `initialize`.

Every result is built as the wire JSON of the negotiated version; `tests/test_protocol.py` proves each equals what
`mcp_types.methods.serialize_server_result` makes of it (see protocol.py: nothing here imports mcp_types).
Tool failures are `isError` results (HTTP 200); protocol errors are JSON-RPC errors. The caller's
upstream key (passthrough auth) or the server's key (server-key auth) travels in a per-request
CallContext, never in shared state. Example::

    endpoint = Endpoint.from_settings(Settings.from_env())
    response = endpoint.handle(HttpRequest.build("POST", "/mcp", body=b'{"jsonrpc":"2.0","id":1,"method":"ping"}'))
    response.status, response.body      # 200, b'{"jsonrpc":"2.0","id":1,"result":{}}'
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import logging
import math
import os
import re
import threading
import traceback
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import parse_qsl, urlsplit

from progressive_mcp import __version__
from progressive_mcp.calls.cache import PUBLIC, SERVER, ResponseCache, ResultStore
from progressive_mcp.calls.fairness import caller_id
from progressive_mcp.calls.upstream import UpstreamTransport
from progressive_mcp.errors import ConfigError, UnknownTool
from progressive_mcp.policies import Caller, MemoryRateLimiter, Policy, PolicySet, RateLimiter, narrow_catalog
from progressive_mcp.redaction import key_problem, redact
from progressive_mcp.schema_compact import SCHEMA_VIEWS
from progressive_mcp.search.hints import asked as hints_asked
from progressive_mcp.settings import MODES, Settings, split_list
from progressive_mcp.surfaces.auto import AUTO, AUTO_FALLBACKS, AUTO_META, AutoFallback
from progressive_mcp.surfaces.protocol import (
    HANDSHAKE_PROTOCOL_VERSIONS,
    HEADER_MISMATCH,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    LATEST_HANDSHAKE_VERSION,
    METHOD_NOT_FOUND,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    MODERN_PROTOCOL_VERSIONS,
    PARSE_ERROR,
    UNSUPPORTED_PROTOCOL_VERSION,
    request_problem,
)
from progressive_mcp.surfaces.surface import CallContext, CallRecord, GatewaySurfaces, Surface

if TYPE_CHECKING:
    from progressive_mcp.gateway.gateway import Gateway
    from progressive_mcp.gateway.store import ToolStore
    from progressive_mcp.oauth import Identity, TokenValidator

_T = TypeVar("_T")

logger = logging.getLogger(__name__)

SERVER_NAME = "progressive-mcp"
SUPPORTED_VERSIONS: tuple[str, ...] = (*HANDSHAKE_PROTOCOL_VERSIONS, *MODERN_PROTOCOL_VERSIONS)
# The 2025-03-26 transport spec: without an MCP-Protocol-Version header, assume 2025-03-26.
VERSION_WITHOUT_HEADER = "2025-03-26"
PROTOCOL_VERSION_META = "io.modelcontextprotocol/protocolVersion"
CLIENT_CAPABILITIES_META = "io.modelcontextprotocol/clientCapabilities"
SERVER_INFO_META = "io.modelcontextprotocol/serverInfo"
CATALOG_VERSION_META = "progressive-mcp/catalogVersion"
# Methods whose target is mirrored in the Mcp-Name header (2026-07-28), and the params key it mirrors.
NAME_BEARING = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}
# This server offers tools only. The prompt and resource lists are answered (empty, and the capabilities
# declared) because some clients ask for them whatever the capabilities say, and an error breaks their start-up.
EMPTY_LISTS = {
    "prompts/list": "prompts",
    "resources/list": "resources",
    "resources/templates/list": "resourceTemplates",
}
MODERN_METHODS = ("server/discover", "tools/list", "tools/call", *EMPTY_LISTS)
HANDSHAKE_METHODS = ("initialize", "ping", "tools/list", "tools/call", *EMPTY_LISTS)
# The diagnostic tools the official conformance suite's `server-stateless` scenario asks a server under test
# to implement (off unless PMCP_CONFORMANCE_FIXTURES=1): name → (client capability it needs, answer text).
CONFORMANCE_FIXTURES: dict[str, tuple[str | None, str]] = {
    "test_missing_capability": ("sampling", "The client declared sampling; this server never uses it."),
    "test_streaming_elicitation": (
        "elicitation",
        "The client declared elicitation; this server never sends requests on a response stream.",
    ),
    "test_logging_tool": (None, "This server sends no notifications/message, with or without a log level."),
}
CORS_ALLOW_HEADERS = "Content-Type, Authorization, MCP-Protocol-Version, Mcp-Method, Mcp-Name, X-API-Key"
CORS_EXPOSE_HEADERS = "WWW-Authenticate, MCP-Protocol-Version"
# scheme://host[:port] and nothing else: no user info ("evil@localhost"), no suffix ("[::1].evil.example").
LOOPBACK_ORIGIN = re.compile(r"https?://(?:localhost|127\.0\.0\.1|\[::1\])(?::\d{1,5})?")
# oauth mode: the Protected Resource Metadata (RFC 9728) of the endpoint, at the root and path-suffixed (/mcp).
RESOURCE_METADATA_PATH = "/.well-known/oauth-protected-resource"
# A Host header that can go into a URL and a quoted header parameter: a name or address and an optional port.
HOST_HEADER = re.compile(r"(?:[A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\])(?::\d{1,5})?")
MAX_SURFACE_VARIANTS = 64
MAX_CACHED_RESULTS = 1024
# HTTP status of a JSON-RPC error in the 2026-07-28 era (the transport spec's table).
MODERN_STATUS = {
    PARSE_ERROR: 400,
    INVALID_REQUEST: 400,
    INVALID_PARAMS: 400,
    HEADER_MISMATCH: 400,
    MISSING_REQUIRED_CLIENT_CAPABILITY: 400,
    UNSUPPORTED_PROTOCOL_VERSION: 400,
    METHOD_NOT_FOUND: 404,
    INTERNAL_ERROR: 500,
}


@dataclass(frozen=True)
class HttpRequest:
    """One HTTP request. Header names are lower-case; `query` keeps the first value of each name."""

    method: str
    path: str
    query: Mapping[str, str] = field(default_factory=dict)
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)
    body: bytes = field(default=b"", repr=False)
    deadline: float | None = None  # time.monotonic() by which tool calls must be done (Lambda: remaining time)
    source_ip: str | None = None  # the client's address, where the transport knows it (the event's sourceIp)

    @classmethod
    def build(
        cls,
        method: str,
        path: str,
        *,
        query: str | Mapping[str, str] | None = None,
        headers: Mapping[str, str] | Sequence[tuple[str, str]] | None = None,
        body: bytes | str = b"",
        source_ip: str | None = None,
    ) -> HttpRequest:
        """Normalise a request: header names lower-cased (repeats joined by ", "), a raw query string parsed."""
        pairs = list(headers.items()) if isinstance(headers, Mapping) else list(headers or ())
        folded: dict[str, str] = {}
        for name, raw in pairs:
            key, value = name.lower(), raw.strip(" \t")  # RFC 9110 5.5: optional whitespace is not part of a value
            folded[key] = f"{folded[key]}, {value}" if key in folded else value
        if isinstance(query, str):
            parsed: dict[str, str] = {}
            for name, value in parse_qsl(query, keep_blank_values=True):
                parsed.setdefault(name, value)
            query = parsed
        return cls(
            method=method.upper(),
            path=path or "/",
            query=dict(query or {}),
            headers=folded,
            body=body.encode() if isinstance(body, str) else body,
            source_ip=source_ip or None,
        )


@dataclass
class Exchange:
    """What one request did, for logs and metrics. Holds no key, token, header, query or body."""

    rpc_method: str | None = None
    protocol_version: str | None = None
    mode: str | None = None
    error_code: int | None = None  # the JSON-RPC error code, when the answer was a protocol error
    identity: str | None = None  # oauth mode: a digest of the token's issuer and subject, never the token
    call: CallRecord = field(default_factory=CallRecord)

    @property
    def tool(self) -> str | None:
        return self.call.tool


@dataclass
class HttpResponse:
    status: int
    headers: dict[str, str]
    body: bytes = b""
    exchange: Exchange = field(default_factory=Exchange, repr=False)

    def json(self) -> Any:
        return json.loads(self.body) if self.body else None


@dataclass(frozen=True)
class _Rpc:
    """One JSON-RPC request being answered, with what answering it needs."""

    request: HttpRequest
    method: str
    params: dict[str, Any] | None
    id: Any
    surface: Surface
    ctx: CallContext
    exchange: Exchange


class _Reject(Exception):
    """A request answered with a JSON-RPC error (and an HTTP status) instead of a result."""

    def __init__(
        self,
        status: int,
        code: int,
        message: str,
        *,
        data: Any = None,
        request_id: Any = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.data = status, code, message, data
        self.request_id = request_id
        self.headers = dict(headers or {})


class Endpoint:
    """The HTTP semantics of the MCP endpoint around one default surface (thread-safe, reusable)."""

    def __init__(
        self,
        surface: Surface,
        settings: Settings,
        *,
        path: str = "/mcp",
        server_key: Callable[[], str | None] | None = None,
        endpoint_tokens: Callable[[], Sequence[str]] | None = None,
        current: Callable[[], Surface] | None = None,
        gateway: Gateway | None = None,
        token_validator: TokenValidator | None = None,
        policies: Callable[[], PolicySet | None] | None = None,
        rate_limiter: RateLimiter | None = None,
    ) -> None:
        """`server_key` and `endpoint_tokens` supply secrets in server-key mode (default: from settings).
        `current` returns the surface to answer from when it can change (a gateway's, after a sync); `gateway`
        is closed with the endpoint. `token_validator` checks access tokens in oauth mode (default: one for
        PMCP_OAUTH_ISSUER, reading its keys over HTTP). `policies` supplies the per-identity policies (default:
        settings.policies; on AWS, the tokens secret's), `rate_limiter` counts their rates (default: in memory)."""
        self._default = surface
        self._current = current
        self.gateway = gateway
        self.settings = settings
        self.path = "/" + path.strip("/")
        self.auth_mode = settings.auth_mode
        self._server_key = server_key or (lambda: settings.api_key)
        self._endpoint_tokens = endpoint_tokens or (lambda: settings.endpoint_tokens)
        if self.auth_mode == "server-key" and endpoint_tokens is None and not settings.endpoint_tokens:
            raise ConfigError(
                "server-key auth needs at least one endpoint token for callers to present: set PMCP_ENDPOINT_TOKENS "
                "(comma-separated, so a new token can be added before the old one is removed)"
            )
        self._oauth: TokenValidator | None = None
        if self.auth_mode == "oauth":
            from progressive_mcp.oauth import TokenValidator

            if not settings.oauth_issuer:
                raise ConfigError(
                    "oauth auth mode needs the issuer of the access tokens: set PMCP_OAUTH_ISSUER to its URL (an "
                    "https URL whose /.well-known/oauth-authorization-server or openid-configuration names its keys)"
                )
            self._oauth = token_validator or TokenValidator(
                settings.oauth_issuer, required_scopes=settings.oauth_scopes
            )
        self._policies = policies or (lambda: settings.policies)
        self._rates: RateLimiter = rate_limiter or MemoryRateLimiter()
        if settings.policies is not None:
            self._check_policies(settings.policies, surface, static_tokens=endpoint_tokens is None)
        self._origins = frozenset(o.rstrip("/").lower() for o in settings.allowed_origins)
        # Surfaces by (policy key, mode asked for, categories, auto's fallback), None the unrestricted policy (see
        # `_variant_key`), and each policy's own base surface by ("policy", its key, catalog version).
        self._surfaces: OrderedDict[tuple[Any, ...], Surface] = OrderedDict({_variant_key(surface): surface})
        # (mode, categories, auto's choice, method, version, catalog version) → result JSON, for results that depend
        # on nothing else.
        self._results: dict[tuple[Any, ...], str] = {}
        self._lock = threading.Lock()
        api = surface.catalog.api
        self.server_info = {"name": SERVER_NAME, "version": __version__, "title": f"{api.title} (progressive-mcp)"}
        self._key_help = (
            f"No {api.title} API key came with this request. Pass yours in an X-API-Key header, an "
            "'Authorization: Bearer' header, or an apikey query parameter on the endpoint URL, then call again. "
            "TOOL_LIST, TOOL_SEARCH and TOOL_GET work without a key."
            if self.auth_mode == "passthrough"
            else f"This server holds no {api.title} API key; its operator must configure one "
            f"({api.auth.env if api.auth else 'the key'} or the deployment's secret)."
        )

    @property
    def surface(self) -> Surface:
        """The default surface: a gateway's changes when a sync changes its catalog, and then the variants and
        serialized results of the old one are dropped."""
        if self._current is None:
            return self._default
        surface = self._current()
        if surface is not self._default:
            with self._lock:
                if surface is not self._default:
                    self._adopt(surface)
        return surface

    @surface.setter
    def surface(self, surface: Surface) -> None:
        with self._lock:
            self._adopt(surface)

    def _adopt(self, surface: Surface) -> None:
        """Make `surface` the default, dropping the old one's variants and serialized results (under `_lock`)."""
        self._default = surface
        self._surfaces = OrderedDict({_variant_key(surface): surface})
        self._results.clear()

    def _check_policies(self, policies: PolicySet, surface: Surface, *, static_tokens: bool) -> None:
        """Policies configured at start are checked at start: for an auth mode that names identities, against the
        endpoint tokens and the catalog's categories (a gateway's servers may not be synced yet)."""
        if self.auth_mode == "passthrough":
            raise ConfigError(
                "policies (PMCP_POLICIES_FILE, PMCP_POLICIES) name identities: they need --auth-mode server-key or "
                "oauth, where the server knows who is calling"
            )
        if self.auth_mode == "server-key" and static_tokens:
            policies.check_tokens(self.settings.endpoint_tokens)
        if self.gateway is None and self._current is None:
            policies.check_catalog(list(surface.catalog.categories))
        if self._oauth is not None:
            self._oauth.groups_claim = policies.groups_claim

    def close(self) -> None:
        """Stop what the endpoint started (a gateway's server connections)."""
        if self.gateway is not None:
            self.gateway.close()

    @classmethod
    def from_settings(
        cls,
        settings: Settings,
        *,
        transport: UpstreamTransport | None = None,
        path: str = "/mcp",
        cache: ResponseCache | None = None,
        results: ResultStore | None = None,
        server_key: Callable[[], str | None] | None = None,
        endpoint_tokens: Callable[[], Sequence[str]] | None = None,
        tool_store: ToolStore | None = None,
        sync: bool = True,
        poll_s: float | None = None,
        servers_environ: Mapping[str, str] | None = None,
        policies: Callable[[], PolicySet | None] | None = None,
        rate_limiter: RateLimiter | None = None,
    ) -> Endpoint:
        """An endpoint as configured; the keyword arguments plug in AWS-backed pieces (see lambda_fn.aws).

        With `settings.servers_path`, the catalog is a gateway's: its tools come from `tool_store` (default: the
        SQLite file of `settings.index_path`); `sync` starts the gateway's syncs (servers never synced, and those
        past their TTL), else the store is only read, and re-read when `poll_s` says (a scheduled sync writes it).
        `servers_environ` gives the servers file's `${VAR}` values (default: os.environ).
        """
        pieces: dict[str, Any] = {"transport": transport, "cache": cache, "results": results}
        if settings.servers_path is None:
            surface = Surface.from_settings(settings, **pieces)
            current, gateway = None, None
        else:
            from progressive_mcp.gateway.gateway import Gateway

            gateway = Gateway.from_settings(settings, store=tool_store, poll_s=poll_s, environ=servers_environ)
            if sync:
                gateway.start()
            current = GatewaySurfaces(gateway, settings, **pieces).current
            surface = current()
        if settings.auth_mode in ("server-key", "oauth") and server_key is None:
            auth = surface.catalog.api.auth
            settings = settings.with_api_key_from(os.environ, auth.env if auth else None)
        return cls(
            surface,
            settings,
            path=path,
            server_key=server_key,
            endpoint_tokens=endpoint_tokens,
            current=current,
            gateway=gateway,
            policies=policies,
            rate_limiter=rate_limiter,
        )

    # --- HTTP layer -----------------------------------------------------------------------------

    def handle(self, request: HttpRequest) -> HttpResponse:
        """Answer one HTTP request. Never raises; a bug of ours becomes a 500 with a JSON-RPC error."""
        exchange = Exchange()
        cors: dict[str, str] = {}
        key: str | None = None
        try:
            if self._oauth is not None and self._is_metadata_path(request.path):
                return self._resource_metadata(request, exchange)
            origin = request.headers.get("origin")
            if origin is not None:
                if not self.origin_allowed(origin):
                    message = f"Origin {origin[:100]!r} is not allowed (PMCP_ALLOWED_ORIGINS)"
                    raise _Reject(403, INVALID_REQUEST, message)
                cors = {"Access-Control-Allow-Origin": origin, "Vary": "Origin"}
            if request.path.rstrip("/") != self.path:
                raise _Reject(404, INVALID_REQUEST, f"Not found: the MCP endpoint is {self.path}")
            if request.method == "OPTIONS":
                return HttpResponse(204, {**cors, **self._preflight(origin)}, b"", exchange)
            if request.method != "POST":
                raise _Reject(
                    405,
                    INVALID_REQUEST,
                    f"Method {request.method[:20]} is not allowed: this stateless endpoint takes one JSON-RPC "
                    "message per POST and opens no stream",
                    headers={"Allow": "POST"},
                )
            key, caller = self._authorize(request, exchange)
            policy = self._admit(caller)
            body = self._read_body(request)
            return self._message(request, body, key, exchange, cors, policy)
        except _Reject as rej:
            exchange.error_code = rej.code
            return self._error_response(rej, exchange, cors)
        except Exception as exc:  # a bug of ours: log it without secrets, answer with a generic error
            exchange.error_code = INTERNAL_ERROR
            text = "".join(traceback.format_exception(exc))
            logger.error("internal error answering a request: %s", redact(text, key))
            internal = _Reject(500, INTERNAL_ERROR, "Internal error; please report it.")
            return self._error_response(internal, exchange, cors)

    def origin_allowed(self, origin: str) -> bool:
        """`PMCP_ALLOWED_ORIGINS` entries match exactly (`*` allows any); with none, only loopback origins pass.
        An Origin with control characters never passes (nor is it reflected)."""
        if any(ord(c) < 0x20 or ord(c) == 0x7F for c in origin):
            return False
        normal = origin.strip().rstrip("/").lower()
        if "*" in self._origins or normal in self._origins:
            return True
        if self._origins:
            return False
        return LOOPBACK_ORIGIN.fullmatch(normal) is not None

    def _preflight(self, origin: str | None) -> dict[str, str]:
        if origin is None:
            return {"Allow": "POST, OPTIONS"}
        return {
            "Access-Control-Allow-Methods": "POST, OPTIONS",
            "Access-Control-Allow-Headers": CORS_ALLOW_HEADERS,
            "Access-Control-Expose-Headers": CORS_EXPOSE_HEADERS,
            "Access-Control-Max-Age": "86400",
        }

    def _authorize(self, request: HttpRequest, exchange: Exchange | None = None) -> tuple[str | None, Caller | None]:
        """The upstream key this request may use, and who it speaks for (policies match it; None in passthrough
        mode); in server-key mode, first check the endpoint token, in oauth mode the access token (its identity's
        digest goes to `exchange`)."""
        headers = request.headers
        bearer = _bearer(headers.get("authorization"))
        if self._oauth is not None:
            identity = self._check_access_token(request, bearer)
            if exchange is not None:
                exchange.identity = identity.caller
            caller = Caller(
                id=identity.caller, subject=identity.subject, groups=identity.groups, scopes=identity.scopes
            )
            return self._usable_server_key(), caller
        if self.auth_mode == "passthrough":
            key = headers.get("x-api-key", "").strip() or bearer or request.query.get("apikey", "").strip() or None
            problem = key_problem(key) if key else None
            if problem:
                raise _Reject(
                    401,
                    INVALID_REQUEST,
                    f"The API key sent with this request {problem}; send your real key",
                    headers={"WWW-Authenticate": f'Bearer realm="{SERVER_NAME}", error="invalid_token"'},
                )
            return key, None
        challenge = f'Bearer realm="{SERVER_NAME}"'
        if bearer is None:
            raise _Reject(
                401,
                INVALID_REQUEST,
                "This endpoint needs a bearer token: send 'Authorization: Bearer <token>'",
                headers={"WWW-Authenticate": challenge},
            )
        if not _token_matches(bearer, self._secret(self._endpoint_tokens)):
            raise _Reject(
                401,
                INVALID_REQUEST,
                "The bearer token is not valid for this endpoint",
                headers={"WWW-Authenticate": f'{challenge}, error="invalid_token"'},
            )
        caller = Caller(id=caller_id("token", bearer), token_digest=hashlib.sha256(bearer.encode()).hexdigest())
        return self._usable_server_key(), caller

    def _admit(self, caller: Caller | None) -> Policy | None:
        """The policy of this caller (None: no policies, all tools), after its request rate is counted: 403 for an
        identity no policy admits, 429 with Retry-After past its rate."""
        policies = self._secret(self._policies) if caller is not None else None
        if policies is None or caller is None:
            return None
        policy = policies.match(caller)
        if policy is None:
            raise _Reject(
                403, INVALID_REQUEST, "No policy of this server admits this identity; ask its operator for access"
            )
        if policy.rate is not None:
            try:
                wait_s = self._rates.hit(caller.id, policy.rate)
            except Exception as exc:  # a counter outage must not stop the endpoint: the rate is a fairness limit
                logger.warning("the request rate could not be counted: %s", type(exc).__name__)
                wait_s = None
            if wait_s is not None:
                retry = max(1, math.ceil(wait_s))
                raise _Reject(
                    429,
                    INVALID_REQUEST,
                    f"Too many requests: this identity may send {policy.rate} a minute; try again in {retry} s",
                    headers={"Retry-After": str(retry)},
                )
        return policy

    def _usable_server_key(self) -> str | None:
        server_key = self._secret(self._server_key)
        problem = key_problem(server_key) if server_key else None
        if problem:
            logger.error("the server's upstream key is not usable: it %s", problem)
            raise _Reject(
                503, INTERNAL_ERROR, "The server's upstream API key is misconfigured; its operator must replace it"
            )
        return server_key

    # --- oauth mode: the endpoint as an OAuth 2.1 protected resource --------------------------------------------

    def resource_url(self, request: HttpRequest) -> str:
        """The endpoint's canonical URL, the resource its tokens must name: PMCP_OAUTH_AUDIENCE, else the URL this
        request came to (scheme from X-Forwarded-Proto, else http on loopback and https elsewhere), no query."""
        if self.settings.oauth_audience:
            return self.settings.oauth_audience
        from progressive_mcp.oauth import is_loopback_host

        host = request.headers.get("host", "").strip().lower() or "localhost"
        if HOST_HEADER.fullmatch(host) is None:
            raise _Reject(400, INVALID_REQUEST, "The Host header is not a host name or address")
        proto = request.headers.get("x-forwarded-proto", "").split(",")[0].strip().lower()
        if proto not in ("http", "https"):
            proto = "http" if is_loopback_host(urlsplit(f"//{host}").hostname or "") else "https"
        return f"{proto}://{host}{self.path}"

    def resource_metadata_url(self, request: HttpRequest) -> str:
        """Where the resource's metadata is: the well-known path inserted before the resource's path (RFC 9728)."""
        resource = urlsplit(self.resource_url(request))
        return f"{resource.scheme}://{resource.netloc}{RESOURCE_METADATA_PATH}{resource.path.rstrip('/')}"

    def _is_metadata_path(self, path: str) -> bool:
        path = path.rstrip("/")
        suffixes = {"", self.path}
        if self.settings.oauth_audience:
            suffixes.add(urlsplit(self.settings.oauth_audience).path.rstrip("/"))
        return path.startswith(RESOURCE_METADATA_PATH) and path[len(RESOURCE_METADATA_PATH) :] in suffixes

    def _resource_metadata(self, request: HttpRequest, exchange: Exchange) -> HttpResponse:
        """The Protected Resource Metadata document; public, so any origin may read it."""
        cors = {"Access-Control-Allow-Origin": "*"}
        if request.method == "OPTIONS":
            preflight = {
                "Access-Control-Allow-Methods": "GET, OPTIONS",
                "Access-Control-Allow-Headers": "MCP-Protocol-Version",
                "Access-Control-Max-Age": "86400",
            }
            return HttpResponse(204, {**cors, **preflight}, b"", exchange)
        if request.method not in ("GET", "HEAD"):
            raise _Reject(405, INVALID_REQUEST, "The resource metadata is read with GET", headers={"Allow": "GET"})
        document: dict[str, Any] = {
            "resource": self.resource_url(request),
            "authorization_servers": [self.settings.oauth_issuer],
            "bearer_methods_supported": ["header"],
            "resource_name": self.server_info["title"],
        }
        if self.settings.oauth_scopes:
            document["scopes_supported"] = list(self.settings.oauth_scopes)
        body = b"" if request.method == "HEAD" else _dumps(document).encode()
        headers = {"Content-Type": "application/json", "Cache-Control": "public, max-age=300", **cors}
        return HttpResponse(200, headers, body, exchange)

    def _check_access_token(self, request: HttpRequest, bearer: str | None) -> Identity:
        """The identity (its digest, subject, groups and scopes) of a valid access token; else 401 or 403 with the
        challenge RFC 6750 and RFC 9728 describe, which tells the client where to learn how to get one."""
        from progressive_mcp.oauth import InsufficientScope, IssuerUnavailable, TokenRejected

        assert self._oauth is not None
        metadata = f'resource_metadata="{self.resource_metadata_url(request)}"'
        scope = f', scope="{" ".join(self.settings.oauth_scopes)}"' if self.settings.oauth_scopes else ""
        if bearer is None:
            raise _Reject(
                401,
                INVALID_REQUEST,
                "This endpoint needs an OAuth access token: send 'Authorization: Bearer <token>' (the "
                "WWW-Authenticate header says where to get one)",
                headers={"WWW-Authenticate": f"Bearer {metadata}{scope}"},
            )
        try:
            return self._oauth.validate(bearer, audience=self.resource_url(request))
        except InsufficientScope as exc:
            challenge = f'Bearer error="insufficient_scope", error_description="{exc.description}", {metadata}'
            raise _Reject(
                403,
                INVALID_REQUEST,
                f"Forbidden: {exc.description}; authorize again with the scopes in the WWW-Authenticate header",
                headers={"WWW-Authenticate": f"{challenge}{scope}"},
            ) from None
        except TokenRejected as exc:
            challenge = f'Bearer error="invalid_token", error_description="{exc.description}", {metadata}'
            raise _Reject(
                401,
                INVALID_REQUEST,
                f"The access token is not valid for this endpoint: {exc.description}",
                headers={"WWW-Authenticate": f"{challenge}{scope}"},
            ) from None
        except IssuerUnavailable:
            raise _Reject(
                503,
                INTERNAL_ERROR,
                "The server could not read its authorization server's keys just now; try again in a few seconds",
                headers={"Retry-After": "5"},
            ) from None

    def _caller(self, request: HttpRequest, key: str | None, identity: str | None = None) -> str:
        """Who is calling, for code mode's share of sandbox workers: a digest of the bearer token (server-key
        mode), of the token's subject (oauth), or of the caller's own key (passthrough), else the client's
        address. Never the secret itself."""
        if identity is not None:
            return identity
        if self.auth_mode == "server-key":
            token = _bearer(request.headers.get("authorization"))  # _authorize has checked it
            if token:
                return caller_id("token", token)
        elif key:
            return caller_id("key", key)
        return f"address:{request.source_ip}" if request.source_ip else "anonymous"

    def _secret(self, provider: Callable[[], _T]) -> _T:
        """A secret from its provider (Secrets Manager on Lambda); its failure is a 503, not a crash."""
        try:
            return provider()
        except Exception as exc:
            logger.error("could not read a secret: %s", type(exc).__name__)
            raise _Reject(
                503,
                INTERNAL_ERROR,
                "The server could not read its credentials just now; try again in a few seconds",
                headers={"Retry-After": "5"},
            ) from None

    def _read_body(self, request: HttpRequest) -> Any:
        limit = self.settings.max_body_bytes
        if len(request.body) > limit:
            raise _Reject(413, INVALID_REQUEST, f"The request body is {len(request.body)} bytes; the limit is {limit}")
        content_type = request.headers.get("content-type")
        if content_type is not None and content_type.split(";", 1)[0].strip().lower() != "application/json":
            raise _Reject(
                415, INVALID_REQUEST, f"Content-Type must be application/json, not {content_type.split(';')[0][:60]!r}"
            )
        try:
            return json.loads(request.body.decode("utf-8-sig"), parse_constant=_reject_constant)
        except (ValueError, RecursionError) as exc:  # bad UTF-8 and bad JSON are both ValueErrors
            reason = "the body is not valid UTF-8" if isinstance(exc, UnicodeDecodeError) else "the body is not JSON"
            raise _Reject(400, PARSE_ERROR, f"Parse error: {reason}") from None

    # --- JSON-RPC layer -------------------------------------------------------------------------

    def _message(
        self,
        request: HttpRequest,
        message: Any,
        key: str | None,
        exchange: Exchange,
        cors: dict[str, str],
        policy: Policy | None = None,
    ) -> HttpResponse:
        if isinstance(message, list):
            raise _Reject(
                400, INVALID_REQUEST, "Batches are not supported: send one JSON-RPC message per POST (MCP 2025-06-18+)"
            )
        if not isinstance(message, dict):
            raise _Reject(400, INVALID_REQUEST, "The body must be one JSON-RPC request or notification object")
        if message.get("jsonrpc") != "2.0":
            raise _Reject(400, INVALID_REQUEST, 'Not JSON-RPC 2.0: "jsonrpc" must be "2.0"', request_id=_id(message))
        header_version = request.headers.get("mcp-protocol-version")
        method = message.get("method")
        if "method" not in message and ("result" in message or "error" in message):
            return HttpResponse(202, cors, b"", exchange)  # a response from the client: this server asks nothing
        if "id" not in message:
            if not isinstance(method, str):
                raise _Reject(400, INVALID_REQUEST, 'A notification needs a "method" string')
            exchange.rpc_method = method[:100]
            if header_version is not None and header_version not in SUPPORTED_VERSIONS:
                raise self._unsupported(header_version, None)
            return HttpResponse(202, cors, b"", exchange)  # notifications need no answer here
        request_id = message["id"]
        if isinstance(request_id, bool) or not isinstance(request_id, int | str):
            raise _Reject(400, INVALID_REQUEST, "The request id must be a string or a number")
        if not isinstance(method, str):
            raise _Reject(400, INVALID_REQUEST, 'The request has no "method" string', request_id=request_id)
        params = message.get("params")
        if params is not None and not isinstance(params, dict):
            raise _Reject(400, INVALID_REQUEST, '"params" must be an object', request_id=request_id)
        exchange.rpc_method = method[:100]
        surface = self._surface_for(request.query, request_id, policy)
        exchange.mode = surface.mode
        ctx = CallContext(
            api_key=key,
            missing_key_help=self._key_help,
            record=exchange.call,
            entitlement=PUBLIC if self.auth_mode == "passthrough" else SERVER,
            deadline=request.deadline,
            caller=self._caller(request, key, exchange.identity),
            address=request.source_ip,
        )
        if header_version is not None and header_version not in SUPPORTED_VERSIONS:
            meta = params.get("_meta") if params else None
            if isinstance(meta, dict) and meta.get(PROTOCOL_VERSION_META, header_version) != header_version:
                raise _Reject(
                    400,
                    HEADER_MISMATCH,
                    "The MCP-Protocol-Version header does not match params._meta's protocol version",
                    request_id=request_id,
                )
            raise self._unsupported(header_version, request_id)
        rpc = _Rpc(request, method, params, request_id, surface, ctx, exchange)
        if header_version in MODERN_PROTOCOL_VERSIONS:
            result_json = self._modern(rpc, header_version)
        else:
            result_json = self._handshake(rpc, header_version)
        body = f'{{"jsonrpc":"2.0","id":{json.dumps(request_id)},"result":{result_json}}}'.encode()
        return HttpResponse(200, {"Content-Type": "application/json", **cors}, body, exchange)

    def _modern(self, rpc: _Rpc, header_version: str) -> str:
        request, method, params, request_id, surface = rpc.request, rpc.method, rpc.params, rpc.id, rpc.surface
        meta = params.get("_meta") if params else None
        if not isinstance(meta, dict):
            raise _Reject(
                400,
                INVALID_PARAMS,
                f"params._meta must be an object carrying {PROTOCOL_VERSION_META!r} and {CLIENT_CAPABILITIES_META!r} "
                f"(protocol {header_version} sends them with every request)",
                request_id=request_id,
            )
        missing = [k for k in (PROTOCOL_VERSION_META, CLIENT_CAPABILITIES_META) if k not in meta]
        if missing:
            raise _Reject(400, INVALID_PARAMS, f"params._meta lacks {', '.join(missing)}", request_id=request_id)
        version = meta[PROTOCOL_VERSION_META]
        if version != header_version:
            raise _Reject(
                400,
                HEADER_MISMATCH,
                "The MCP-Protocol-Version header does not match params._meta's protocol version",
                request_id=request_id,
            )
        if request.headers.get("mcp-method") != method:
            problem = "is missing" if "mcp-method" not in request.headers else "does not match the body's method"
            raise _Reject(400, HEADER_MISMATCH, f"The Mcp-Method header {problem}", request_id=request_id)
        name_key = NAME_BEARING.get(method)
        body_name = params.get(name_key) if name_key is not None and params is not None else None
        if body_name is not None and _header_text(request.headers.get("mcp-name")) != body_name:
            problem = "is missing" if "mcp-name" not in request.headers else f"does not match params.{name_key}"
            raise _Reject(400, HEADER_MISMATCH, f"The Mcp-Name header {problem}", request_id=request_id)
        rpc.exchange.protocol_version = version
        if method not in MODERN_METHODS:
            raise _Reject(
                404,
                METHOD_NOT_FOUND,
                f"Method not found: {method[:100]} (protocol {version} here serves {', '.join(MODERN_METHODS)})",
                request_id=request_id,
            )
        self._validate(method, version, params, request_id, modern=True)
        extra = {"resultType": "complete", "_meta": {SERVER_INFO_META: self.server_info}}
        if method in EMPTY_LISTS:
            hints = {"ttlMs": self.settings.list_ttl_s * 1000, "cacheScope": "public"}
            return self._cached(surface, method, version, lambda: {EMPTY_LISTS[method]: [], **extra, **hints})
        if method == "server/discover":
            return self._cached(surface, method, version, lambda: self._discover_result(surface, extra))
        if method == "tools/list":
            hinted = hints_asked((params or {}).get("_meta"))  # a gateway in front of this server (`search.hints`)
            return self._cached(
                surface,
                method + (" hints" if hinted else ""),
                version,
                lambda: self._list_result(surface, extra, modern=True, hints=hinted),
            )
        fixture = self._fixture(params or {}, meta[CLIENT_CAPABILITIES_META], request_id, modern=True)
        if fixture is not None:
            return _dumps({**fixture, **extra})
        return self._call(rpc, extra, modern=True)

    def _handshake(self, rpc: _Rpc, header_version: str | None) -> str:
        method, params, request_id, surface = rpc.method, rpc.params, rpc.id, rpc.surface
        meta = params.get("_meta") if params else None
        if header_version is None and isinstance(meta, dict) and PROTOCOL_VERSION_META in meta:
            raise _Reject(
                400,
                HEADER_MISMATCH,
                f"params._meta names protocol {str(meta[PROTOCOL_VERSION_META])[:30]!r} but the MCP-Protocol-Version "
                "header is missing; send it (and Mcp-Method) with every request",
                request_id=request_id,
            )
        version = header_version or VERSION_WITHOUT_HEADER
        if method == "initialize":
            requested = params.get("protocolVersion") if params else None
            version = requested if requested in HANDSHAKE_PROTOCOL_VERSIONS else LATEST_HANDSHAKE_VERSION
        rpc.exchange.protocol_version = version
        if method not in HANDSHAKE_METHODS:
            raise _Reject(
                200,
                METHOD_NOT_FOUND,
                f"Method not found: {method[:100]} (this server offers tools only)",
                request_id=request_id,
            )
        self._validate(method, version, params, request_id, modern=False)
        if method in EMPTY_LISTS:
            return self._cached(surface, method, version, lambda: {EMPTY_LISTS[method]: []})
        if method == "initialize":
            return self._cached(surface, method, version, lambda: self._initialize_result(surface, version))
        if method == "ping":
            return self._cached(surface, method, version, dict)
        if method == "tools/list":
            hinted = hints_asked((params or {}).get("_meta"))
            return self._cached(
                surface,
                method + (" hints" if hinted else ""),
                version,
                lambda: self._list_result(surface, {}, modern=False, hints=hinted),
            )
        fixture = self._fixture(params or {}, {}, request_id, modern=False)  # capabilities: never known here
        if fixture is not None:
            return _dumps(fixture)
        return self._call(rpc, {}, modern=False)

    def _validate(
        self, method: str, version: str, params: dict[str, Any] | None, request_id: Any, *, modern: bool
    ) -> None:
        problem = request_problem(method, version, params)
        if problem is not None:
            raise _Reject(
                400 if modern else 200, INVALID_PARAMS, f"Invalid params for {method}: {problem}", request_id=request_id
            )

    def _call(self, rpc: _Rpc, extra: dict[str, Any], *, modern: bool) -> str:
        params, request_id, ctx = rpc.params or {}, rpc.id, rpc.ctx
        name = params["name"]
        if ctx.record is not None:
            ctx.record.tool = name  # for TOOL_CALL, the surface replaces it with the tool that ran
        try:
            data = rpc.surface.call_tool_wire(name, params.get("arguments"), ctx)
        except UnknownTool as exc:
            raise _Reject(
                400 if modern else 200, INVALID_PARAMS, str(exc), data=exc.details(), request_id=request_id
            ) from None
        data.update(extra)
        return _dumps(data)

    def _fixture(
        self, params: dict[str, Any], capabilities: Any, request_id: Any, *, modern: bool
    ) -> dict[str, Any] | None:
        """Answer a conformance diagnostic tool (only when enabled), checking the capability it needs."""
        name = params.get("name")
        if not self.settings.conformance_fixtures or name not in CONFORMANCE_FIXTURES:
            return None
        needs, text = CONFORMANCE_FIXTURES[name]
        if needs is not None and not (isinstance(capabilities, dict) and needs in capabilities):
            raise _Reject(
                400 if modern else 200,
                MISSING_REQUIRED_CLIENT_CAPABILITY,
                f"{name} needs the client capability {needs!r}, which this request's clientCapabilities lack",
                data={"requiredCapabilities": {needs: {}}},
                request_id=request_id,
            )
        return {"content": [{"type": "text", "text": text}], "isError": False}

    # --- results --------------------------------------------------------------------------------

    def _cached(self, surface: Surface, method: str, version: str, build: Callable[[], dict[str, Any]]) -> str:
        """Results that depend only on the surface and version are serialized once, then reused."""
        key = (surface.mode, surface.categories, surface.auto, method, version, surface.catalog.version)
        text = self._results.get(key)
        if text is None:
            text = _dumps(build())
            if len(self._results) >= MAX_CACHED_RESULTS:
                self._results.clear()
            self._results[key] = text
        return text

    def _capabilities(self) -> dict[str, Any]:
        # Prompts and resources are declared because their (empty) lists are answered; see EMPTY_LISTS.
        return {"tools": {"listChanged": False}, "prompts": {"listChanged": False}, "resources": {"listChanged": False}}

    def _initialize_result(self, surface: Surface, version: str) -> dict[str, Any]:
        result = {
            "protocolVersion": version,
            "capabilities": self._capabilities(),
            "serverInfo": self.server_info,
            "instructions": surface.instructions,
        }
        if surface.auto is not None:
            result["_meta"] = {AUTO_META: surface.auto.as_meta()}
        return result

    def _discover_result(self, surface: Surface, extra: dict[str, Any]) -> dict[str, Any]:
        result = {
            "supportedVersions": list(SUPPORTED_VERSIONS),
            "capabilities": self._capabilities(),
            "instructions": surface.instructions,
            "ttlMs": self.settings.list_ttl_s * 1000,
            "cacheScope": "public",
            **extra,
        }
        if surface.auto is not None:
            result["_meta"] = {**extra["_meta"], AUTO_META: surface.auto.as_meta()}
        return result

    def _list_result(
        self, surface: Surface, extra: dict[str, Any], *, modern: bool, hints: bool = False
    ) -> dict[str, Any]:
        data: dict[str, Any] = {"tools": list(surface.tool_definitions(hints=hints))}
        if self.settings.conformance_fixtures:
            data["tools"] += [
                {
                    "name": name,
                    "description": f"Conformance diagnostic: {text}",
                    "inputSchema": {"type": "object", "properties": {}},
                }
                for name, (_needs, text) in CONFORMANCE_FIXTURES.items()
            ]
        if modern:
            # The list changes only when the catalog does (a new deployment), so clients may keep it for the
            # TTL; the catalog version in _meta tells them whether a fresh list is really different.
            data.update(extra, ttlMs=self.settings.list_ttl_s * 1000, cacheScope="public")
            data["_meta"] = {**extra["_meta"], CATALOG_VERSION_META: surface.catalog.version}
        if surface.auto is not None:  # what auto picked, and on which figures
            data["_meta"] = {**data.get("_meta", {}), AUTO_META: surface.auto.as_meta()}
        return data

    # --- helpers --------------------------------------------------------------------------------

    def _surface_for(self, query: Mapping[str, str], request_id: Any, policy: Policy | None = None) -> Surface:
        """The surface of this request, whose tools are the tools it may see: the caller's policy narrows the
        catalog (see `_policy_surface`), then `?mode=`, `?categories=`, `?fallback=` and `?schema_view=` choose a
        variant of it (each built once, then cached per policy and variant). `?categories=` can only narrow."""
        base = self._policy_surface(policy)
        # The policy's own key beside its tools: two policies with the same tools may still name different withheld
        # tools or unavailable servers of a gateway (`Surface.withheld_entries`).
        policy_key = None if base is self.surface else (base.catalog.version, base.policy.key if base.policy else None)
        mode_arg = query.get("mode")
        categories_arg = query.get("categories")
        fallback_arg = query.get("fallback")
        view_arg = query.get("schema_view")
        if mode_arg is None and categories_arg is None and fallback_arg is None and view_arg is None:
            return base
        view = _choice("schema_view", view_arg, base.meta.view, SCHEMA_VIEWS, request_id)
        mode = _choice("mode", mode_arg, base.requested_mode, MODES, request_id)
        fallback = self._auto_fallback(mode, fallback_arg, request_id)
        if categories_arg is None:
            categories = base.categories
        else:
            # The URL may narrow the configured categories (PMCP_CATEGORIES) and the policy's, never widen them.
            configured = base.categories
            offered = [c for c in base.catalog.categories if configured is None or c in configured]
            categories = frozenset(c.lower() for c in split_list(categories_arg)) or base.categories
            unknown = sorted((categories or frozenset()) - set(offered))
            if unknown:
                raise _Reject(
                    400,
                    INVALID_REQUEST,
                    f"Unknown ?categories= value(s) {', '.join(u[:30] for u in unknown[:5])}; this endpoint offers "
                    f"{', '.join(offered)}",
                    request_id=request_id,
                )
        variant_key = (policy_key, mode, categories, fallback, view)
        with self._lock:
            found = self._surfaces.get(variant_key)
            if found is not None:
                self._surfaces.move_to_end(variant_key)
                return found
        built = base.variant(mode, categories, auto_fallback=fallback, schema_view=view)  # type: ignore[arg-type]
        return self._keep_surface(variant_key, built)

    def _policy_surface(self, policy: Policy | None) -> Surface:
        """The default surface as `policy` sees it: over the catalog narrowed to the tools it allows (within the
        configured categories), so no discovery answer, stub or call of it can reach another tool. Built once per
        distinct set of tools, then cached; the default surface itself for no policy or one that hides nothing."""
        default = self.surface
        if policy is None or policy.unrestricted:
            return default
        configured = default.categories
        if configured is not None:  # PMCP_CATEGORIES still applies: the policy only narrows it
            within = configured if policy.categories is None else configured & policy.categories
            policy = replace(policy, categories=within)
        key = ("policy", policy.key, default.catalog.version)
        with self._lock:
            found = self._surfaces.get(key)
            if found is not None:
                self._surfaces.move_to_end(key)
                return found
        narrowed = narrow_catalog(default.catalog, policy)
        return self._keep_surface(key, default.narrowed(narrowed, None, policy=policy))

    def _keep_surface(self, variant_key: tuple[Any, ...], built: Surface) -> Surface:
        """Cache a built surface (the first one built wins a race), evicting the oldest past MAX_SURFACE_VARIANTS."""
        with self._lock:
            found = self._surfaces.setdefault(variant_key, built)
            while len(self._surfaces) > MAX_SURFACE_VARIANTS:
                old_key, old = next(iter(self._surfaces.items()))
                if old is self.surface:
                    self._surfaces.move_to_end(old_key)
                    continue
                del self._surfaces[old_key]
        return found

    def _auto_fallback(self, mode: str, fallback_arg: str | None, request_id: Any) -> AutoFallback | None:
        """`?fallback=`: the surface `auto` picks past its threshold (progressive or code); only with mode auto."""
        if mode != AUTO:
            if fallback_arg is not None:
                raise _Reject(
                    400,
                    INVALID_REQUEST,
                    "?fallback= goes with ?mode=auto (the surface auto picks for a large tool set)",
                    request_id=request_id,
                )
            return None
        return _choice("fallback", fallback_arg, self.surface.auto_fallback, AUTO_FALLBACKS, request_id)  # type: ignore[return-value]

    def _unsupported(self, requested: str, request_id: Any) -> _Reject:
        return _Reject(
            400,
            UNSUPPORTED_PROTOCOL_VERSION,
            f"Unsupported protocol version {requested[:40]!r}; this server speaks {', '.join(SUPPORTED_VERSIONS)}",
            data={"requested": requested[:40], "supported": list(SUPPORTED_VERSIONS)},
            request_id=request_id,
        )

    def _error_response(self, rej: _Reject, exchange: Exchange, cors: dict[str, str]) -> HttpResponse:
        error: dict[str, Any] = {"code": rej.code, "message": rej.message}
        if rej.data is not None:
            error["data"] = rej.data
        body = _dumps({"jsonrpc": "2.0", "id": rej.request_id, "error": error}).encode()
        headers = {"Content-Type": "application/json", **cors, **rej.headers}
        if cors and "WWW-Authenticate" in rej.headers:
            headers["Access-Control-Expose-Headers"] = CORS_EXPOSE_HEADERS
        return HttpResponse(rej.status, headers, body, exchange)


def _choice(name: str, given: str | None, default: str, choices: Sequence[str], request_id: Any) -> str:
    """A URL parameter that names one of `choices` (`?mode=`, `?fallback=`, `?schema_view=`), case-insensitively;
    `default` when it is not given; HTTP 400 naming the choices for any other value."""
    chosen = (given or default).strip().lower()
    if chosen not in choices:
        raise _Reject(
            400,
            INVALID_REQUEST,
            f"Unknown ?{name}={(given or '')[:30]!r}; use one of {', '.join(choices)}",
            request_id=request_id,
        )
    return chosen


def _variant_key(surface: Surface, policy_key: tuple[Any, ...] | None = None) -> tuple[Any, ...]:
    """A surface's key among the endpoint's variants: the policy's key (None: unrestricted) and what the URL asked
    for (`auto`, not what it picked)."""
    fallback = surface.auto_fallback if surface.requested_mode == AUTO else None
    return (policy_key, surface.requested_mode, surface.categories, fallback, surface.meta.view)


def _header_text(value: str | None) -> str | None:
    """A header value, decoding the `=?base64?...?=` form clients use for values that are not plain ASCII."""
    if value is None or not (value.startswith("=?base64?") and value.endswith("?=")):
        return value
    try:
        return base64.b64decode(value[9:-2], validate=True).decode("utf-8")
    except (ValueError, UnicodeDecodeError):
        return None


def _bearer(value: str | None) -> str | None:
    if not value:
        return None
    scheme, _, token = value.strip().partition(" ")
    return token.strip() or None if scheme.lower() == "bearer" else None


def _token_matches(presented: str, tokens: Sequence[str]) -> bool:
    """Compare against every configured token in constant time (digests make the lengths equal)."""
    digest = hashlib.sha256(presented.encode()).digest()
    matched = False
    for token in tokens:
        matched |= hmac.compare_digest(digest, hashlib.sha256(token.encode()).digest())
    return matched


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _id(message: dict[str, Any]) -> Any:
    value = message.get("id")
    return value if isinstance(value, int | str) and not isinstance(value, bool) else None


def _dumps(value: Any) -> str:
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate (a "\ud800" escape in the request) has no UTF-8 form
            return json.dumps(value, separators=(",", ":"))
    return text
