"""Calls to the upstream HTTP API, built from the catalog, with retries and error normalisation.

The request is made from the catalog alone: for a query-dispatched API (Alpha Vantage) the dispatch
parameter carries the tool name; for a REST API the operation's method and path template route it
(`progressive_mcp.calls.rest` encodes the arguments). The key goes where the API's auth says (a query
parameter, a header, a cookie, a bearer token or basic credentials), and arguments can change neither
the routing nor the key (nor the base URL). I/O goes through an `UpstreamTransport`, so tests pass a
fake or point at the offline sample upstream. The key never appears in a message, an exception or a
log line.

One call's whole upstream work (every attempt, the waits between them, and reading a body that
trickles in) fits in a deadline: `deadline_s` from the call's start, or earlier when the caller
says so (a Lambda invocation's remaining time). Each attempt's timeout shrinks to the time left;
a retry whose wait would not fit is not made, and the error comes back at once. Retries happen
only where they can help: a refused or dropped connection, HTTP 500/502/503/504, and 429 (after
its Retry-After, when that is short and fits). A timeout, an oversize body, garbled JSON, an
HTML page and Alpha Vantage's HTTP-200 notices (quota, premium, bad key) are never retried. A call
whose method is not idempotent (POST, PATCH) is never repeated once it may have reached the server
(after a 5xx, a 429, a timeout or a dropped connection): only a connection that was never made is
tried again.
Example::

    client = UpstreamClient(catalog.api, base_url="http://127.0.0.1:8765/query")
    result = client.call(catalog.get("GLOBAL_QUOTE"), {"symbol": "IBM"}, api_key="demo")
    result.payload["Global Quote"]["05. price"]
"""

from __future__ import annotations

import base64
import json
import logging
import math
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal, Protocol
from urllib.parse import quote, urlencode

from progressive_mcp.calls.rest import COOKIE_SAFE, FORM, bad_header_text, request_url, rest_parts
from progressive_mcp.catalog import Api, CatalogTool, less_data_options
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
from progressive_mcp.redaction import Secrets, redact
from progressive_mcp.upstream_auth import AUTH_ENV, KEY_FORMAT_ENV, secret_forms, sent_value

logger = logging.getLogger(__name__)

RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
MAX_RETRY_AFTER_S = 10.0  # a longer Retry-After is passed on to the model instead of waited out
# Alpha Vantage's largest answers (full daily history, a month of 1min bars) are a few MB; 16 MB leaves a
# 1 GB Lambda room to parse and shape one (JSON in Python takes ~10x its size in memory).
MAX_BODY_BYTES = 16 * 1024 * 1024
DEFAULT_TIMEOUT_S = 20.0
DEFAULT_DEADLINE_S = 25.0  # below the stack's 30 s Lambda timeout, with time left to answer
MIN_ATTEMPT_S = 0.5  # a retry is only worth sending with at least this much time left after its wait
# Methods whose request may be repeated: doing it twice has the effect of doing it once (RFC 9110 9.2.2).
IDEMPOTENT_METHODS = frozenset({"GET", "HEAD", "PUT", "DELETE", "OPTIONS", "TRACE"})
_BROKEN = object()

AnswerFormat = Literal["json", "csv", "text"]


@dataclass(frozen=True, slots=True)
class UpstreamRequest:
    """What goes upstream. params, headers, query and body may carry the key, so repr() leaves them out.

    `params` are (name, value) pairs the transport encodes (a query-dispatched API's); `query` is a query string
    already encoded (a REST call's: its styles' delimiters must stay as they are), sent as it is.
    """

    url: str
    params: tuple[tuple[str, str], ...] = field(repr=False)
    headers: tuple[tuple[str, str], ...] = field(repr=False)
    timeout_s: float = DEFAULT_TIMEOUT_S  # the whole attempt: connecting, waiting and reading the entire body
    method: str = "GET"
    body: bytes | None = field(default=None, repr=False)  # its content type is in `headers`
    query: str = field(default="", repr=False)


@dataclass(frozen=True, slots=True)
class UpstreamResponse:
    status: int
    headers: Mapping[str, str]  # lower-case names
    body: bytes


class TransportError(Exception):
    """The transport could not get an answer. Its message never holds the URL (it carries the key).

    `kind`: "connect" (refused, reset, dropped: worth another try), "timeout" (the attempt's time ran
    out), "too_large" (the body is over the transport's limit; it was not read to the end) or "invalid"
    (the request could not be sent at all, e.g. a URL over the HTTP library's length limit).
    """

    def __init__(
        self, kind: Literal["connect", "timeout", "too_large", "invalid"], detail: str, *, sent: bool = True
    ) -> None:
        """`sent`: whether the request may have reached the server (False only when no connection was made, so
        that even a POST may be tried again)."""
        self.kind = kind
        self.sent = sent
        super().__init__(detail)


class UpstreamTransport(Protocol):
    def send(self, request: UpstreamRequest) -> UpstreamResponse: ...


class HttpxTransport:
    """Real HTTP through one pooled httpx client (kept across calls: warm Lambdas reuse connections).

    `request.timeout_s` bounds the whole exchange. httpx's timeouts apply to each socket read, so a body
    sent a byte at a time would never trip them: the exchange runs on a worker thread that checks the
    clock between chunks, and the caller stops waiting for it when the time is up, whatever it is doing.
    """

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
        ends_at = time.monotonic() + request.timeout_s
        outcome: list[UpstreamResponse | Exception] = []
        finished, abandoned = threading.Event(), threading.Event()

        def exchange() -> None:
            try:
                outcome.append(self._exchange(request, ends_at, abandoned))
            except Exception as exc:  # handed to the caller below
                outcome.append(exc)
            finally:
                finished.set()

        threading.Thread(target=exchange, name="upstream-request", daemon=True).start()
        if not finished.wait(max(0.0, ends_at - time.monotonic())) or not outcome:
            abandoned.set()  # the worker drops the connection at its next chunk or read timeout
            raise TransportError("timeout", "no complete answer in time")
        result = outcome[0]
        if isinstance(result, Exception):
            raise result
        return result

    def _exchange(self, request: UpstreamRequest, ends_at: float, abandoned: threading.Event) -> UpstreamResponse:
        import httpx

        client = self._http()
        if abandoned.is_set():  # the caller gave up before this thread got to send: a late request helps nobody
            raise TransportError("timeout", "no time was left to send the request", sent=False)
        failure: TransportError | None = None
        url, params = request.url, request.params
        if request.query:  # already encoded: given to httpx inside the URL, which it keeps as it is
            url = f"{url}{'&' if '?' in url else '?'}{request.query}"
            if params:
                url, params = f"{url}&{urlencode(params)}", ()
        try:
            with client.stream(
                request.method,
                url,
                params=params or None,  # None, not (): an empty merge would re-encode the query in the URL
                headers=request.headers,
                content=request.body,
                timeout=request.timeout_s,
            ) as response:
                declared = response.headers.get("content-length", "")
                if declared.isdigit() and int(declared) > self.max_body_bytes:
                    raise TransportError("too_large", f"Content-Length {declared}")
                chunks, size = [], 0
                for chunk in response.iter_bytes():
                    size += len(chunk)
                    if size > self.max_body_bytes:
                        raise TransportError("too_large", f"more than {self.max_body_bytes} bytes")
                    if abandoned.is_set() or time.monotonic() > ends_at:  # a body that trickles in
                        raise TransportError("timeout", "the answer arrived too slowly")
                    chunks.append(chunk)
                headers = {k.lower(): v for k, v in response.headers.items()}
                return UpstreamResponse(response.status_code, headers, b"".join(chunks))
        except httpx.ConnectTimeout:
            failure = TransportError("connect", "connection timed out", sent=False)
        except httpx.TimeoutException:
            failure = TransportError("timeout", "no answer in time")
        except httpx.ConnectError as exc:  # no connection, so nothing was sent
            failure = TransportError("connect", type(exc).__name__, sent=False)
        except httpx.LocalProtocolError:  # written by no server's rules: its text may quote a header, so not kept
            failure = TransportError("invalid", "a header name or value that HTTP does not allow", sent=False)
        except httpx.HTTPError as exc:  # dropped or reset once connected: the request may have arrived
            failure = TransportError("connect", type(exc).__name__)
        except httpx.InvalidURL:  # not an HTTPError: e.g. a very long passthrough key makes the URL too long
            failure = TransportError("invalid", "the request URL is not valid (too long?)")
        # Raised out here so the httpx exception, whose `request` holds the URL and key, is not kept
        # as __context__ (`from None` only hides it from tracebacks).
        raise failure

    def close(self) -> None:
        if self._client is not None:
            self._client.close()


@dataclass(frozen=True, slots=True)
class UpstreamResult:
    payload: Any  # parsed JSON, or the CSV or other text (a REST answer in text/plain, XML...)
    format: AnswerFormat
    status: int
    attempts: int
    elapsed_ms: float
    size: int = 0  # bytes of the upstream body (what a cache entry costs)
    held_key: bool = False  # the answer echoed the key (now masked): it must not be cached


class UpstreamClient:
    """Builds, sends and interprets upstream requests for one API.

    `timeout_s` bounds one attempt, `deadline_s` the whole call; `clock` and `sleep` (monotonic seconds)
    are injected together so tests can run the deadline arithmetic without waiting.
    """

    def __init__(
        self,
        api: Api,
        *,
        base_url: str | None = None,
        transport: UpstreamTransport | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        retries: int = 2,
        backoff_s: float = 0.5,
        deadline_s: float = DEFAULT_DEADLINE_S,
        max_body_bytes: int = MAX_BODY_BYTES,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.api = api
        self.base_url = base_url or api.base_url
        self.transport = transport or HttpxTransport(max_body_bytes=max_body_bytes)
        self.timeout_s = timeout_s
        self.retries = retries
        self.backoff_s = backoff_s
        self.deadline_s = deadline_s
        self.max_body_bytes = max_body_bytes
        self._sleep = sleep
        self.clock = clock

    def deadline(self, cap: float | None = None) -> float:
        """The `clock` time by which a call starting now must be done: `deadline_s` from now, or `cap` if sooner."""
        ends_at = self.clock() + self.deadline_s
        return ends_at if cap is None else min(ends_at, cap)

    def build_request(self, tool: CatalogTool, arguments: Mapping[str, Any], api_key: str | None) -> UpstreamRequest:
        """The request one call makes: a REST operation's (method, path, encoded query, headers, body), or a
        query-dispatched API's (the tool's name and the arguments as query parameters, or as a form body when
        the tool is not a GET). Raises MissingApiKey without a usable key, InvalidArguments for a value that
        cannot be sent."""
        if tool.operation is not None:
            return self._rest_request(tool, arguments, api_key)
        return self._dispatch_request(tool, arguments, api_key)

    def _dispatch_request(
        self, tool: CatalogTool, arguments: Mapping[str, Any], api_key: str | None
    ) -> UpstreamRequest:
        dispatch = self.api.dispatch
        params: list[tuple[str, str]] = [(dispatch.name, tool.name)] if dispatch is not None else []
        reserved = ({dispatch.name} if dispatch else set()) | ({self.api.auth.name} if self.api.auth else set())
        taken = reserved | set(tool.fixed)  # a constant parameter is the tool's, not the caller's
        for name, value in arguments.items():
            param = tool.param(name)
            wire_name = param.upstream_name if param is not None else name
            if name in taken or wire_name in taken:  # the catalog never allows these; a second guard costs nothing
                continue
            params.append((wire_name, _wire_value(value)))
        params += [(name, value) for name, value in tool.fixed.items() if name not in reserved]
        key_params, headers, cookies = self._credentials(api_key)
        params += key_params
        if cookies:
            headers.append(("Cookie", "; ".join(cookies)))
        method = http_method(tool)
        if method == "GET":
            return UpstreamRequest(self.base_url, tuple(params), tuple(headers), self.timeout_s)
        # A write (Last.fm's track.love): the same parameters, key included, go in a form body instead.
        headers.append(("Content-Type", FORM))
        body = urlencode(params).encode("ascii")
        return UpstreamRequest(self.base_url, (), tuple(headers), self.timeout_s, method=method, body=body)

    def _rest_request(self, tool: CatalogTool, arguments: Mapping[str, Any], api_key: str | None) -> UpstreamRequest:
        parts = rest_parts(tool, arguments, self.api.auth)
        key_params, headers, key_cookies = self._credentials(api_key)
        query = [*parts.query, *(f"{quote(name, safe='')}={quote(value, safe='')}" for name, value in key_params)]
        headers = [*parts.headers, *headers]
        cookies = [*parts.cookies, *key_cookies]
        if cookies:
            headers.append(("Cookie", "; ".join(cookies)))
        if parts.content_type is not None:
            headers.append(("Content-Type", parts.content_type))
        return UpstreamRequest(
            request_url(tool, self.base_url, parts.path),  # the API's host, whatever the path says
            (),
            tuple(headers),
            self.timeout_s,
            method=http_method(tool),
            body=parts.body,
            query="&".join(query),
        )

    def _credentials(self, api_key: str | None) -> tuple[list[tuple[str, str]], list[tuple[str, str]], list[str]]:
        """Where the key goes, as the API's auth says: (query parameters, headers, cookies as `name=value`).
        Raises MissingApiKey, never quoting the key, when there is none or it cannot be sent that way."""
        auth = self.api.auth
        if auth is None:
            return [], [], []
        if not api_key:
            raise MissingApiKey(
                f"No {self.api.title} API key is configured. Set the {auth.env} environment variable "
                "(or pass the key the way your server's auth mode expects) and call again."
            )
        value = sent_value(auth, api_key)
        basic = auth.scheme == "basic" or (auth.pair_as_basic and ":" in value)
        if basic:
            if ":" not in value:
                bearer = any(o.scheme == "bearer" for o in self.api.auth_options)
                raise MissingApiKey(
                    f"{self.api.title} uses HTTP Basic auth, so its key must be given as user:password (a colon "
                    f"between them); the key configured (or passed) has no colon. Set {auth.env} to user:password"
                    + (f", or send the key as a bearer token with {AUTH_ENV}=bearer." if bearer else ", or set "
                       f"{KEY_FORMAT_ENV}='{{key}}:' when the key is the user name.")
                )  # fmt: skip
            credentials = base64.b64encode(value.encode("utf-8")).decode("ascii")
            return [], [("Authorization", f"Basic {credentials}")], []
        if auth.scheme == "bearer":
            return [], [("Authorization", f"Bearer {self._header_safe(value)}")], []
        if auth.in_ == "query":
            return [(auth.name, value)], [], []
        if auth.in_ == "cookie":
            return [], [], [f"{auth.name}={quote(value, safe=COOKIE_SAFE)}"]
        return [], [(auth.name, self._header_safe(value))], []

    def _header_safe(self, value: str) -> str:
        """The key as a header value; a key with a line break or a control character is refused, unquoted."""
        if bad_header_text(value):
            raise MissingApiKey(
                f"The {self.api.title} API key holds characters an HTTP header cannot carry (a line break, a control "
                "or a non-ASCII character). Check that the key is the one the provider issued."
            )
        return value

    def call(
        self, tool: CatalogTool, arguments: Mapping[str, Any], api_key: str | None, *, deadline: float | None = None
    ) -> UpstreamResult:
        """Send one tool call upstream; raises an UpstreamError subclass that says what went wrong.

        `deadline` (a `clock` time, see `deadline()`) ends the call sooner than `deadline_s` from now.
        """
        request = self.build_request(tool, arguments, api_key)
        repeatable = request.method in IDEMPOTENT_METHODS
        started = time.perf_counter()
        ends_at = self.deadline(deadline)
        attempt = 0
        while True:
            attempt += 1
            left_s = ends_at - self.clock()
            if left_s <= 0:
                raise UpstreamTimeout(
                    f"No time was left to call {self.api.title} within this request's time limit "
                    f"({attempt - 1} attempts made). Try again."
                )
            attempt_s = min(self.timeout_s, left_s)
            try:
                response = self.transport.send(replace(request, timeout_s=attempt_s))
            except TransportError as exc:
                if exc.kind == "timeout":  # it used the time there was: another try would not fit
                    raise UpstreamTimeout(
                        f"{self.api.title} did not answer in time (gave up after {attempt_s:.1f} s, attempt "
                        f"{attempt}). "
                        + (
                            f"Try again, or ask for less data{self._less_data_hint(tool)}."
                            if repeatable
                            else _may_have_taken_effect(request.method)
                        )
                    ) from None
                if exc.kind == "too_large":
                    raise self._too_large(tool) from None
                if exc.kind == "invalid":
                    raise UpstreamRejected(
                        f"The request to {self.api.title} could not be sent: {exc}. Shorten the arguments, and check "
                        "that the API key is the one the provider issued."
                    ) from None
                wait_s = self._backoff(attempt)
                if (repeatable or not exc.sent) and attempt <= self.retries and self._fits(wait_s, ends_at):
                    self._sleep(wait_s)
                    continue
                if not repeatable and exc.sent:
                    raise UpstreamUnavailable(
                        f"The connection to {self.api.title} broke once the request was sent ({exc}). "
                        + _may_have_taken_effect(request.method)
                    ) from None
                raise UpstreamUnavailable(
                    f"Could not reach {self.api.title} after {_attempts(attempt)} ({exc}). Try again later."
                ) from None
            if len(response.body) > self.max_body_bytes:  # a transport without a limit of its own
                raise self._too_large(tool)
            if response.status in RETRY_STATUSES and attempt <= self.retries and repeatable:
                wait = self._retry_wait(response, attempt)
                if wait is not None and self._fits(wait, ends_at):
                    self._sleep(wait)
                    continue
            break
        elapsed_ms = (time.perf_counter() - started) * 1000
        logger.info(
            "upstream call",
            extra={
                "tool": tool.name,
                "method": request.method,
                "status": response.status,
                "attempts": attempt,
                "elapsed_ms": round(elapsed_ms, 1),
            },
        )
        payload, fmt = self._interpret(tool, arguments, response, attempt, api_key)
        # An answer that echoes the key (in any shape or encoding, or each side of a user:password) is passed on
        # masked, and never kept. The whole body is checked first, so only an answer that holds the key is walked;
        # JSON's \u escapes may hide a form only the parsed answer shows.
        secrets = Secrets.of(*secret_forms(self.api.auth, api_key))
        body = response.body.decode("utf-8", errors="replace")
        held_key = secrets.found_in(body) or (
            fmt == "json" and "\\u" in body and secrets.found_in(json.dumps(payload, ensure_ascii=False))
        )
        if held_key:
            payload, _ = secrets.scrub(payload)  # held, even if only in a part of the body the payload dropped
            logger.warning("upstream answer held the API key; masked, not cached", extra={"tool": tool.name})
        return UpstreamResult(payload, fmt, response.status, attempt, elapsed_ms, len(response.body), held_key)

    def _backoff(self, attempt: int) -> float:
        return self.backoff_s * 2 ** (attempt - 1)

    def _retry_wait(self, response: UpstreamResponse, attempt: int) -> float | None:
        """How long to wait before retrying this answer, or None when waiting would not help."""
        retry_after_s = _retry_after(response)
        if retry_after_s is None:
            return self._backoff(attempt)
        return retry_after_s if retry_after_s <= MAX_RETRY_AFTER_S else None

    def _fits(self, wait_s: float, ends_at: float) -> bool:
        """Whether a retry after `wait_s` still leaves it time to work before the deadline."""
        return self.clock() + wait_s + MIN_ATTEMPT_S <= ends_at

    def _too_large(self, tool: CatalogTool) -> UpstreamBadResponse:
        return UpstreamBadResponse(
            f"The {self.api.title} answer is larger than {self.max_body_bytes / (1024 * 1024):g} MB, more than this "
            f"server accepts. Ask for less data{self._less_data_hint(tool)}."
        )

    def _interpret(
        self,
        tool: CatalogTool,
        arguments: Mapping[str, Any],
        response: UpstreamResponse,
        attempts: int,
        api_key: str | None,
    ) -> tuple[Any, AnswerFormat]:
        self._raise_for_status(tool, arguments, response, attempts, api_key)
        if tool.operation is not None:
            return self._rest_payload(tool, arguments, response, api_key)
        return self._dispatch_payload(tool, arguments, response, api_key)

    def _raise_for_status(
        self,
        tool: CatalogTool,
        arguments: Mapping[str, Any],
        response: UpstreamResponse,
        attempts: int,
        api_key: str | None,
    ) -> None:
        """Raise the error an HTTP status other than 2xx means, with what the upstream said (key masked)."""
        status = response.status
        retry_after_s = _retry_after(response)
        title = self.api.title
        if status == 429:
            raise RateLimited(
                f"{title} is rate limiting requests (HTTP 429, {_attempts(attempts)}). "
                f"{'Wait a minute' if retry_after_s is None else f'Wait {retry_after_s:g} s'} and try again.",
                status=status,
                retry_after_s=60.0 if retry_after_s is None else retry_after_s,
            )
        if status >= 500:
            method = http_method(tool)
            if method not in IDEMPOTENT_METHODS:
                advice = _may_have_taken_effect(method)
            else:
                advice = "Try again later." if retry_after_s is None else f"Try again in {retry_after_s:g} s."
            raise UpstreamUnavailable(
                f"{title} is having trouble (HTTP {status}, {_attempts(attempts)}). {advice}",
                status=status,
                retry_after_s=retry_after_s,
            )
        said = self._said(response, api_key)
        if status in (401, 403):
            raise MissingApiKey(
                f"{title} refused the API key (HTTP {status}){said}. Check that the key is valid and allowed to "
                "use this operation.",
                status=status,
            )
        if tool.operation is not None:
            self._raise_for_rest_status(tool, arguments, status, said)
        if status == 404:
            raise UpstreamError(
                f"{title} answered HTTP 404 Not Found{said}: the server's upstream URL is probably misconfigured "
                "(the spec's base_url, or --upstream / PMCP_UPSTREAM_URL). This is not a problem with the arguments.",
                status=status,
            )
        if status >= 400:
            raise UpstreamRejected(f"{title} refused the request (HTTP {status}){said}.", status=status)
        if not 200 <= status < 300:  # a redirect (never followed: it could carry the key elsewhere) or a 1xx
            raise UpstreamError(
                f"{title} answered HTTP {status} instead of data (redirects are not followed): the server's upstream "
                "URL is probably out of date.",
                status=status,
            )

    def _raise_for_rest_status(self, tool: CatalogTool, arguments: Mapping[str, Any], status: int, said: str) -> None:
        """A REST API's statuses that say more than "refused": a resource that is not there is the caller's
        identifier, not the server's address (the path was routed by the operation)."""
        title = self.api.title
        if status in (404, 410):
            gone = "404 Not Found" if status == 404 else "410 Gone: it existed once"
            raise UpstreamRejected(
                f"{title} has no such resource (HTTP {gone}){said}. Check the identifiers in the path"
                f"{_path_shown(tool, arguments)}: one of them may be wrong or not visible to this key.",
                status=status,
            )
        if status == 405:
            raise UpstreamError(
                f"{title} does not accept {http_method(tool)} at this address (HTTP 405){said}: the catalog is "
                "probably out of date with the API. This is not a problem with the arguments.",
                status=status,
            )
        if status == 409:
            raise UpstreamRejected(
                f"{title} refused the request: it conflicts with the resource's current state (HTTP 409){said}. "
                "Read the resource again, then decide whether to retry.",
                status=status,
            )

    def _dispatch_payload(
        self, tool: CatalogTool, arguments: Mapping[str, Any], response: UpstreamResponse, api_key: str | None
    ) -> tuple[Any, AnswerFormat]:
        """A query-dispatched API's answer: JSON (its HTTP-200 error bodies raised) or CSV; an empty answer is no
        data, anything else an error."""
        status, title = response.status, self.api.title
        text = response.body.decode("utf-8", errors="replace")
        stripped = text.lstrip()
        content_type = response.headers.get("content-type", "")
        if not stripped:
            raise UpstreamBadResponse(
                f"{title} answered with an empty body (HTTP {status}). Try again in a moment.", status=status
            )
        self._raise_for_html(response, content_type, stripped)
        if stripped.startswith(("{", "[")):
            payload = self._parse_json(response, text)
            self._raise_for_error_body(tool, arguments, payload, api_key)
            return payload, "json"
        if arguments.get("datatype") == "csv" or "csv" in content_type:
            if len(stripped.splitlines()) < 2:  # nothing, or a header without rows (an unknown identifier)
                raise UpstreamRejected(self._no_data(tool, arguments), status=status)
            return text, "csv"
        raise UpstreamBadResponse(
            f"{title} answered with something that is neither JSON nor CSV "
            f"({content_type or 'no content type'}, {len(response.body)} bytes).",
            status=status,
        )

    def _rest_payload(
        self, tool: CatalogTool, arguments: Mapping[str, Any], response: UpstreamResponse, api_key: str | None
    ) -> tuple[Any, AnswerFormat]:
        """A REST answer: no body is success (`{"status": 204}`), JSON is data even when empty (`[]` is a list
        with nothing in it), text (plain, CSV, XML...) comes back as text; HTML and binary content are errors."""
        status = response.status
        if not response.body.strip():
            return {"status": status}, "json"
        content_type = response.headers.get("content-type", "")
        media = content_type.split(";")[0].strip().lower()
        text = response.body.decode("utf-8", errors="replace")
        stripped = text.lstrip()
        self._raise_for_html(response, content_type, stripped)
        declared_json = media == "application/json" or media.endswith("+json")
        looks_json = (not media or media.startswith("text/")) and stripped.startswith(("{", "["))
        if declared_json or looks_json:
            payload = parse_json_answer(text)
            if declared_json or payload is not _BROKEN:  # text that only looked like JSON stays text
                payload = self._parse_json(response, text, parsed=payload)
                self._raise_for_error_body(tool, arguments, payload, api_key, empty_is_data=True)
                return payload, "json"
        if not _is_textual(media, response.body):
            raise UpstreamBadResponse(
                f"{self.api.title} answered with {media or 'binary'} content ({len(response.body)} bytes), which this "
                "server cannot pass on: it sends JSON and text only.",
                status=status,
            )
        return text, "csv" if "csv" in media else "text"

    def _raise_for_html(self, response: UpstreamResponse, content_type: str, stripped: str) -> None:
        if "html" in content_type.lower() or stripped[:15].lower().startswith(("<!doctype html", "<html")):
            raise UpstreamBadResponse(
                f"{self.api.title} answered with an HTML page instead of data (HTTP {response.status}, "
                f"{len(response.body)} bytes): the service may be down or in maintenance. Try again later.",
                status=response.status,
            )

    def _parse_json(self, response: UpstreamResponse, text: str, *, parsed: Any = None) -> Any:
        """The JSON data of an answer (`parsed`, when it was parsed already); broken or too deep JSON raises."""
        payload = parse_json_answer(text) if parsed is None else parsed
        if payload is _BROKEN:
            raise UpstreamBadResponse(
                f"{self.api.title} answered with broken JSON ({len(response.body)} bytes). Try again.",
                status=response.status,
            )
        if payload is _TOO_DEEP:
            raise UpstreamBadResponse(
                f"{self.api.title} answered with JSON nested more than {MAX_ANSWER_DEPTH} levels deep, which this "
                "server does not pass on.",
                status=response.status,
            )
        return payload

    def _said(self, response: UpstreamResponse, api_key: str | None) -> str:
        """What an HTTP error body says, briefly and with the key masked, as ": …" (or "" if nothing useful)."""
        secrets = Secrets.of(*secret_forms(self.api.auth, api_key))
        message = error_text(response.body, self.api.error_message_field, secrets=secrets)
        return f": {message}" if message else ""

    def _raise_for_error_body(
        self,
        tool: CatalogTool,
        arguments: Mapping[str, Any],
        payload: Any,
        api_key: str | None,
        *,
        empty_is_data: bool = False,
    ) -> None:
        """Turn an HTTP-200 error body (Alpha Vantage's "Error Message", Last.fm's {"error": 6, "message": …})
        into an UpstreamError. The field's presence is the error, whatever its value's type. An answer without a
        value is "no data" too, unless `empty_is_data` (a REST list with nothing in it is an answer)."""
        if isinstance(payload, dict):
            for field, kind in self.api.error_fields.items():
                if payload.get(field) is None:
                    continue
                named = self.api.error_message_field
                message_value = payload.get(named) if named and payload.get(named) is not None else payload[field]
                message = Secrets.of(*secret_forms(self.api.auth, api_key)).clean(_as_text(message_value))
                raise classify_error_text(self.api, tool, arguments, kind, message)
        if not empty_is_data and _is_empty(payload):
            raise UpstreamRejected(self._no_data(tool, arguments))

    def _no_data(self, tool: CatalogTool, arguments: Mapping[str, Any]) -> str:
        advice = self.api.hints.no_data or "Check the arguments."
        return f"{self.api.title} returned no data for {tool.name}{_shown(tool, arguments)}. {advice}"

    def _less_data_hint(self, tool: CatalogTool) -> str:
        """How to ask this tool for less data, from its own parameters ("" when it has no such knob)."""
        ways = less_data_options(tool)
        return f", e.g. {' or '.join(ways)}" if ways else ""


def classify_error_text(
    api: Api, tool: CatalogTool, arguments: Mapping[str, Any], kind: str, message: str
) -> UpstreamError:
    """Map an upstream's error text to the error class a model can act on, with advice from the spec and
    from the arguments actually sent."""
    title = api.title
    lowered = message.lower()
    mentions_key = "apikey" in lowered.replace(" ", "") or "api key is invalid" in lowered
    if mentions_key and "rate limit" not in lowered:
        return MissingApiKey(f"{title} rejected the API key: {message}")
    if any(s in lowered for s in ("rate limit", "requests per", "call frequency", "spreading out")):
        daily = "per day" in lowered or "daily" in lowered
        hint = (
            "The daily request quota is used up: try again tomorrow, or use a key with a higher quota."
            if daily
            else "Wait about a minute and try again."
        )
        return RateLimited(f"{title} rate limit reached. {hint} ({message})", retry_after_s=None if daily else 60.0)
    if "premium" in lowered:
        paid = [
            f"{p.name}={arguments[p.name]}"
            for p in tool.params
            if p.premium_values and p.name in arguments and arguments[p.name] in p.premium_values
        ]
        if paid:
            advice = f"Call again without {' and '.join(paid)} (a paid option), or use a non-premium tool."
        elif tool.premium:
            advice = "This tool needs a paid plan: use a non-premium tool instead."
        else:
            advice = "Try other arguments, or a non-premium tool."
        return PremiumRequired(f"{tool.name} (with these arguments) needs a paid {title} plan. {advice} ({message})")
    if kind == "invalid_request":
        advice = api.hints.invalid_request or "Check the arguments against the tool's inputSchema."
        return UpstreamRejected(f"{title} rejected the request: {_sentence(message)} {advice}")
    return UpstreamError(f"{title} did not return data: {message}")


# Answers nested deeper than this are refused: no API's data needs it, and serializing it later would fail.
MAX_ANSWER_DEPTH = 64
_TOO_DEEP = object()


def parse_json_answer(text: str) -> Any:
    """An upstream JSON body as data: NaN and ±Infinity (not JSON, but some APIs send them) become null; a
    body that is not JSON, or holds a number Python refuses to read (thousands of digits), is `_BROKEN`; one
    nested deeper than MAX_ANSWER_DEPTH is `_TOO_DEEP`."""
    try:
        payload = json.loads(text, parse_constant=lambda _name: None)
    except RecursionError:
        return _TOO_DEEP
    except ValueError:  # JSONDecodeError, and an integer over Python's digit limit
        return _BROKEN  # returned, not raised from here, so the decode error (its `doc` is the body) is not kept
    return payload if _depth_within(payload, MAX_ANSWER_DEPTH) else _TOO_DEEP


def _depth_within(value: Any, limit: int) -> bool:
    level, depth = [value], 0
    while level:  # breadth-first: no recursion
        depth += 1
        if depth > limit + 1:
            return False
        level = [
            child
            for item in level
            if isinstance(item, dict | list)
            for child in (item.values() if isinstance(item, dict) else item)
        ]
    return True


def error_text(
    body: bytes, message_field: str | None = None, limit: int = 300, *, secrets: Secrets | None = None
) -> str:
    """A short, readable message from an error body: the JSON message field, or the text (never HTML), with
    `secrets` masked and control characters escaped before it is cut (a cut would leave a secret's start)."""
    text = body[: 64 * 1024].decode("utf-8", errors="replace").strip()
    if not text or text[:15].lower().startswith(("<!doctype", "<html")):
        return ""
    if text.startswith("{"):
        payload = parse_json_answer(text)
        if isinstance(payload, dict):
            for name in (message_field, "message", "error_description", "detail", "error", "Error Message"):
                value = payload.get(name) if name else None
                if value not in (None, "", [], {}):
                    text = _as_text(value)
                    break
    return (secrets or Secrets()).clean(" ".join(text.split()), limit)


def _as_text(value: Any) -> str:
    """An error field's value as message text: a string as is, anything else as compact JSON."""
    return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _sentence(text: str) -> str:
    text = text.rstrip()
    return text if text.endswith((".", "!", "?")) else text + "."


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


def http_method(tool: CatalogTool) -> str:
    """The method a tool's calls are sent with: its REST operation's, else the tool's own (GET, or POST for a
    query-dispatched API's writes)."""
    return (tool.operation.method if tool.operation is not None else tool.method).upper()


def _may_have_taken_effect(method: str) -> str:
    return (
        f"It was not sent again: a {method} may have taken effect even without an answer, so check whether it did "
        "before calling again."
    )


def _attempts(count: int) -> str:
    return "1 attempt" if count == 1 else f"{count} attempts"


def _path_shown(tool: CatalogTool, arguments: Mapping[str, Any]) -> str:
    """The path arguments of a call, as " (owner=octocat, repo=x)", each value cut short."""
    shown = ", ".join(
        f"{p.name}={_clip(str(arguments[p.name]), 40)}"
        for p in tool.params
        if p.location == "path" and p.name in arguments
    )
    return f" ({shown})" if shown else ""


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _is_textual(media: str, body: bytes) -> bool:
    """Whether an answer is text a model can read: a text or structured-text media type, or, when none is
    declared, UTF-8 without NUL bytes."""
    if media:
        return media.startswith("text/") or any(
            kind in media for kind in ("json", "xml", "csv", "yaml", "javascript", "x-www-form-urlencoded")
        )
    if b"\0" in body:
        return False
    try:
        body.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _shown(tool: CatalogTool, arguments: Mapping[str, Any]) -> str:
    """The required arguments of a call, as " (a=1, b=2)", to say what found nothing."""
    shown = ", ".join(
        f"{p.name}={str(arguments[p.name])[:40]}" for p in tool.params if p.required and p.name in arguments
    )
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
    """An answer without a single value: `{}`, `[]`, `{"Global Quote": {}}`, `{"similarartists": {"artist": []}}`
    (empty strings and nulls count as no value)."""
    level = [payload]
    while level:  # breadth-first: the depth is bounded by parse_json_answer already
        if any(not isinstance(item, dict | list) and item not in ("", None) for item in level):
            return False
        level = [
            child
            for item in level
            if isinstance(item, dict | list)
            for child in (item.values() if isinstance(item, dict) else item)
        ]
    return True
