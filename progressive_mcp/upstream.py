"""Calls to the upstream HTTP API, built from the spec, with retries and error normalisation.

The request is made from the spec alone: the dispatch parameter carries the tool name, the key
parameter carries the key from configuration, and arguments can change neither (nor the base
URL). I/O goes through an `UpstreamTransport`, so tests pass a fake or point at the offline
sample upstream. The key never appears in a message, an exception or a log line. Example::

    client = UpstreamClient(catalog.api, base_url="http://127.0.0.1:8765/query")
    result = client.call(catalog.get("GLOBAL_QUOTE"), {"symbol": "IBM"}, api_key="demo")
    result.payload["Global Quote"]["05. price"]
"""

from __future__ import annotations

import json
import logging
import math
import re
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol
from urllib.parse import quote, quote_plus

from progressive_mcp.catalog import CatalogTool
from progressive_mcp.errors import (
    MissingApiKey,
    PremiumRequired,
    RateLimited,
    UpstreamBadResponse,
    UpstreamError,
    UpstreamRejected,
    UpstreamTimeout,
    UpstreamUnavailable,
)
from progressive_mcp.spec import ApiSpec

logger = logging.getLogger(__name__)

RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
MAX_RETRY_AFTER_S = 10.0
MAX_BODY_BYTES = 64 * 1024 * 1024
_BROKEN = object()
_KEY_IN_URL = re.compile(r"(?i)(apikey|api_key|key|token)=[^&\s\"']+")


@dataclass(frozen=True, slots=True)
class UpstreamRequest:
    """What goes upstream. params and headers may carry the key, so repr() leaves them out."""

    url: str
    params: tuple[tuple[str, str], ...] = field(repr=False)
    headers: tuple[tuple[str, str], ...] = field(repr=False)
    timeout_s: float = 20.0


@dataclass(frozen=True, slots=True)
class UpstreamResponse:
    status: int
    headers: Mapping[str, str]  # lower-case names
    body: bytes


class TransportError(Exception):
    """The transport could not get an answer. Its message never holds the URL (it carries the key)."""

    def __init__(self, kind: Literal["connect", "timeout"], detail: str) -> None:
        self.kind = kind
        super().__init__(detail)


class UpstreamTransport(Protocol):
    def send(self, request: UpstreamRequest) -> UpstreamResponse: ...


class HttpxTransport:
    """Real HTTP through one pooled httpx client (kept across calls: warm Lambdas reuse connections)."""

    def __init__(self, *, max_body_bytes: int = MAX_BODY_BYTES) -> None:
        self.max_body_bytes = max_body_bytes
        self._client: Any = None
        self._lock = threading.Lock()

    def _http(self) -> Any:
        if self._client is None:
            with self._lock:
                if self._client is None:
                    import httpx  # imported on the first upstream call, not at cold start

                    # httpx logs every request URL at INFO, and ours carry the key in the query: quiet it,
                    # and mask keys in case someone turns it back up to debug a connection.
                    for name in ("httpx", "httpcore"):
                        logging.getLogger(name).setLevel(logging.WARNING)
                    httpx_logger = logging.getLogger("httpx")
                    if not any(isinstance(f, _RedactingFilter) for f in httpx_logger.filters):
                        httpx_logger.addFilter(_RedactingFilter())
                    self._client = httpx.Client(follow_redirects=False)
        return self._client

    def send(self, request: UpstreamRequest) -> UpstreamResponse:
        import httpx

        client = self._http()
        failure: TransportError | None = None
        try:
            with client.stream(
                "GET", request.url, params=request.params, headers=request.headers, timeout=request.timeout_s
            ) as response:
                chunks, size = [], 0
                for chunk in response.iter_bytes():
                    size += len(chunk)
                    if size > self.max_body_bytes:
                        raise UpstreamBadResponse(
                            f"The upstream answer is larger than {self.max_body_bytes // (1024 * 1024)} MB; "
                            "ask for less data."
                        )
                    chunks.append(chunk)
                headers = {k.lower(): v for k, v in response.headers.items()}
                return UpstreamResponse(response.status_code, headers, b"".join(chunks))
        except httpx.ConnectTimeout:
            failure = TransportError("connect", "connection timed out")
        except httpx.TimeoutException:
            failure = TransportError("timeout", "no answer in time")
        except httpx.HTTPError as exc:
            failure = TransportError("connect", type(exc).__name__)
        # Raised out here so the httpx exception, whose `request` holds the URL and key, is not kept
        # as __context__ (`from None` only hides it from tracebacks).
        raise failure

    def close(self) -> None:
        if self._client is not None:
            self._client.close()


@dataclass(frozen=True, slots=True)
class UpstreamResult:
    payload: Any  # parsed JSON, or the CSV text
    format: Literal["json", "csv"]
    status: int
    attempts: int
    elapsed_ms: float
    size: int = 0  # bytes of the upstream body (what a cache entry costs)


class UpstreamClient:
    """Builds, sends and interprets upstream requests for one API."""

    def __init__(
        self,
        api: ApiSpec,
        *,
        base_url: str | None = None,
        transport: UpstreamTransport | None = None,
        timeout_s: float = 20.0,
        retries: int = 2,
        backoff_s: float = 0.5,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.api = api
        self.base_url = base_url or api.base_url
        self.transport = transport or HttpxTransport()
        self.timeout_s = timeout_s
        self.retries = retries
        self.backoff_s = backoff_s
        self._sleep = sleep

    def build_request(self, tool: CatalogTool, arguments: Mapping[str, Any], api_key: str | None) -> UpstreamRequest:
        params: list[tuple[str, str]] = [(self.api.dispatch.name, tool.name)]
        reserved = {self.api.dispatch.name} | ({self.api.auth.name} if self.api.auth else set())
        for name, value in arguments.items():
            if name in reserved:  # the catalog never allows these; a second guard costs nothing
                continue
            params.append((name, _wire_value(value)))
        headers: list[tuple[str, str]] = []
        auth = self.api.auth
        if auth is not None:
            if not api_key:
                raise MissingApiKey(
                    f"No {self.api.title} API key is configured. Set the {auth.env} environment variable "
                    "(or pass the key the way your server's auth mode expects) and call again."
                )
            if auth.in_ == "query":
                params.append((auth.name, auth.prefix + api_key))
            else:
                headers.append((auth.name, auth.prefix + api_key))
        return UpstreamRequest(self.base_url, tuple(params), tuple(headers), self.timeout_s)

    def call(self, tool: CatalogTool, arguments: Mapping[str, Any], api_key: str | None) -> UpstreamResult:
        """Send one tool call upstream; raises an UpstreamError subclass that says what went wrong."""
        request = self.build_request(tool, arguments, api_key)
        started = time.perf_counter()
        attempt = 0
        while True:
            attempt += 1
            try:
                response = self.transport.send(request)
            except TransportError as exc:
                if exc.kind == "timeout":
                    raise UpstreamTimeout(
                        f"{self.api.title} did not answer within {self.timeout_s:g} s. Try again, or ask for "
                        "less data (e.g. outputsize=compact)."
                    ) from None
                if attempt <= self.retries:
                    self._sleep(self.backoff_s * 2 ** (attempt - 1))
                    continue
                raise UpstreamUnavailable(
                    f"Could not reach {self.api.title} after {attempt} attempts ({exc}). Try again later."
                ) from None
            if response.status in RETRY_STATUSES and attempt <= self.retries:
                retry_after_s = _retry_after(response)
                backoff_s = self.backoff_s * 2 ** (attempt - 1)
                self._sleep(min(retry_after_s, MAX_RETRY_AFTER_S) if retry_after_s is not None else backoff_s)
                continue
            break
        elapsed_ms = (time.perf_counter() - started) * 1000
        logger.info(
            "upstream call",
            extra={
                "tool": tool.name,
                "status": response.status,
                "attempts": attempt,
                "elapsed_ms": round(elapsed_ms, 1),
            },
        )
        payload, fmt = self._interpret(tool, arguments, response, attempt, api_key)
        return UpstreamResult(payload, fmt, response.status, attempt, elapsed_ms, len(response.body))

    def _interpret(
        self,
        tool: CatalogTool,
        arguments: Mapping[str, Any],
        response: UpstreamResponse,
        attempts: int,
        api_key: str | None,
    ) -> tuple[Any, Literal["json", "csv"]]:
        status = response.status
        retry_after_s = _retry_after(response)
        if status == 429:
            raise RateLimited(
                f"{self.api.title} is rate limiting requests (HTTP 429, {attempts} attempts). Wait a minute and "
                "try again.",
                status=status,
                retry_after_s=60.0 if retry_after_s is None else retry_after_s,
            )
        if status >= 500:
            raise UpstreamUnavailable(
                f"{self.api.title} is having trouble (HTTP {status}, {attempts} attempts). Try again later.",
                status=status,
            )
        if status >= 400:
            raise UpstreamRejected(f"{self.api.title} refused the request (HTTP {status}).", status=status)
        text = response.body.decode("utf-8", errors="replace")
        stripped = text.lstrip()
        if stripped.startswith(("{", "[")):
            try:
                payload = json.loads(text)
            except json.JSONDecodeError:
                payload = _BROKEN  # raised below, so the decode error (its `doc` is the body) is not kept
            if payload is _BROKEN:
                raise UpstreamBadResponse(
                    f"{self.api.title} answered with broken JSON ({len(response.body)} bytes). Try again.",
                    status=status,
                )
            self._raise_for_error_body(tool, arguments, payload, api_key)
            return payload, "json"
        content_type = response.headers.get("content-type", "")
        if arguments.get("datatype") == "csv" or "csv" in content_type:
            if len(stripped.splitlines()) < 2:  # nothing, or a header without rows (an unknown symbol)
                raise UpstreamRejected(
                    f"{self.api.title} returned no data for {tool.name}{_shown(arguments)}. Check the symbol "
                    "(SYMBOL_SEARCH finds tickers) and the other arguments.",
                    status=status,
                )
            return text, "csv"
        raise UpstreamBadResponse(
            f"{self.api.title} answered with something that is neither JSON nor CSV "
            f"({content_type or 'no content type'}, {len(response.body)} bytes).",
            status=status,
        )

    def _raise_for_error_body(
        self, tool: CatalogTool, arguments: Mapping[str, Any], payload: Any, api_key: str | None
    ) -> None:
        """Turn an HTTP-200 error body (e.g. Alpha Vantage's "Error Message") into an UpstreamError."""
        if isinstance(payload, dict):
            for field, kind in self.api.error_fields.items():
                if field in payload and isinstance(payload[field], str):
                    message = redact(payload[field], api_key)
                    raise classify_error_text(self.api.title, tool.name, kind, message)
        if _is_empty(payload):
            raise UpstreamRejected(
                f"{self.api.title} returned no data for {tool.name}{_shown(arguments)}. "
                "Check the symbol (SYMBOL_SEARCH finds tickers) and the other arguments."
            )


def classify_error_text(api_title: str, tool_name: str, kind: str, message: str) -> UpstreamError:
    """Map an upstream's error text to the error class a model can act on."""
    lowered = message.lower()
    mentions_key = "apikey" in lowered.replace(" ", "") or "api key is invalid" in lowered
    if mentions_key and "rate limit" not in lowered:
        return MissingApiKey(f"{api_title} rejected the API key: {message}")
    if any(s in lowered for s in ("rate limit", "requests per", "call frequency", "spreading out")):
        daily = "per day" in lowered or "daily" in lowered
        hint = (
            "The daily request quota is used up: try again tomorrow, or use a key with a higher quota."
            if daily
            else "Wait about a minute and try again."
        )
        return RateLimited(f"{api_title} rate limit reached. {hint} ({message})", retry_after_s=None if daily else 60.0)
    if "premium" in lowered:
        return PremiumRequired(
            f"{tool_name} (with these arguments) needs a paid {api_title} plan. Try a free alternative, e.g. "
            f"drop entitlement=realtime or use a non-premium tool. ({message})"
        )
    if kind == "invalid_request":
        return UpstreamRejected(
            f"{api_title} rejected the request: {message} Check the arguments (and the symbol, e.g. with "
            "SYMBOL_SEARCH) against the tool's inputSchema."
        )
    return UpstreamError(f"{api_title} did not return data: {message}")


def redact(text: str, secret: str | None) -> str:
    """`text` with the secret (plain or URL-encoded) and any key=value query pair masked."""
    if secret:
        for form in {secret, quote(secret, safe=""), quote_plus(secret)}:
            text = text.replace(form, "***")
    return _KEY_IN_URL.sub(lambda m: f"{m.group(1)}=***", text)


def _wire_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _retry_after(response: UpstreamResponse) -> float | None:
    """The upstream's Retry-After in seconds (the delta form), or None."""
    header = response.headers.get("retry-after")
    if header:
        try:
            seconds = float(header)
        except ValueError:
            return None
        if math.isfinite(seconds):  # "nan" would break sleep(); "inf" is no JSON number
            return max(seconds, 0.0)
    return None


def _shown(arguments: Mapping[str, Any]) -> str:
    shown = ", ".join(f"{k}={v}" for k, v in arguments.items() if k in ("symbol", "keywords", "tickers"))
    return f" ({shown})" if shown else ""


class _RedactingFilter(logging.Filter):
    """Masks key=value query pairs in a log record (httpx logs request URLs)."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        masked = redact(message, None)
        if masked != message:
            record.msg, record.args = masked, None
        return True


def _is_empty(payload: Any) -> bool:
    """`{}`, `[]`, or an object whose every member is empty (e.g. `{"Global Quote": {}}`)."""
    if payload in ({}, []):
        return True
    return isinstance(payload, dict) and all(v in ({}, [], "", None) for v in payload.values())
