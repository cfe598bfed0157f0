"""Security: no key leaks, no argument steers the upstream request, size limits, Origin and auth rules, the
constant-time token check, and isolation between concurrent callers (issue 6, item 4).

Everything runs through the real code paths (the Endpoint in process, the Lambda handler with events, the
`serve` LocalServer on 127.0.0.1, the stdio server) against the offline sample upstream. What reached the
upstream is read twice: from `SampleUpstream.requests_snapshot(unmasked=True)` and from the raw request line
and Host header each upstream request carried (`wire`), so a duplicated or smuggled parameter cannot hide in
a dict.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import json
import logging
import socket
import sys
import tempfile
import threading
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, quote, quote_plus, urlsplit

import httpx
import pytest

from lambda_fn import handler as handler_module
from lambda_fn.handler import make_handler
from lambda_fn.local import MAX_WIRE_BODY_BYTES, LocalContext, LocalServer
from progressive_mcp.calls.arguments import MAX_ARGUMENTS, MAX_NESTING, MAX_VALUE_CHARS, prepare_arguments
from progressive_mcp.calls.cache import MemoryCache, ResponseCache
from progressive_mcp.calls.upstream import (
    HttpxTransport,
    UpstreamClient,
    UpstreamRequest,
    UpstreamResponse,
    UpstreamTransport,
)
from progressive_mcp.catalog import Catalog, CatalogTool
from progressive_mcp.offline import sample_upstream
from progressive_mcp.offline.sample_upstream import COMPANIES, SampleUpstream
from progressive_mcp.settings import Settings
from progressive_mcp.sources import load_catalog
from progressive_mcp.sources.spec import Param
from progressive_mcp.surfaces import endpoint as endpoint_module
from progressive_mcp.surfaces.endpoint import Endpoint, HttpRequest, HttpResponse
from progressive_mcp.surfaces.surface import Surface

ROOT = Path(__file__).resolve().parent.parent

# Distinctive secrets: each has characters that URL-encode differently (+ / = & and non-ASCII), so every
# encoded form of them is distinct and searchable too.
CALLER_KEY = "CaLLeR+KeY/93f1=ZQ&x"
INVALID_CALLER_KEY = "invalid-CaLLeR-KeY-5e0b"  # the sample upstream rejects keys that start with "invalid"
SERVER_KEY = "SeRVeR+KeY/7c2e=Wp"
TOKEN = "NeW-EnDpOiNt-ToKeN-4b1d-2c9e"
OLD_TOKEN = "OlD-EnDpOiNt-ToKeN-9a7c-5f31"
WRONG_TOKEN = "WrOnG-EnDpOiNt-ToKeN-0000"
STOLEN = "StOlEn-KeY-d00d"  # what an injection attempt tries to send upstream instead of the caller's key


# --- helpers ----------------------------------------------------------------------------------------


def secret_forms(secret: str) -> set[str]:
    """Every way a secret could show up: raw, URL-encoded (both styles), JSON-escaped."""
    return {
        secret,
        quote(secret, safe=""),
        quote(secret),
        quote_plus(secret),
        json.dumps(secret)[1:-1],
        json.dumps(secret, ensure_ascii=False)[1:-1],
    }


def assert_clean(text: str, *secrets: str, where: str = "output") -> None:
    for secret in secrets:
        for form in secret_forms(secret):
            assert form not in text, f"{secret!r} (as {form!r}) leaked into the {where}"


def rpc(method: str, params: dict[str, Any] | None = None, request_id: Any = 1) -> str:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        message["params"] = params
    return json.dumps(message)


def tool_call(tool: str, arguments: Any, request_id: Any = 1) -> str:
    return rpc(
        "tools/call", {"name": "TOOL_CALL", "arguments": {"tool_name": tool, "arguments": arguments}}, request_id
    )


def response_text(response: HttpResponse) -> str:
    return f"{response.status} {json.dumps(response.headers)} {response.body.decode('utf-8', 'replace')}"


def result_of(response: HttpResponse) -> dict[str, Any]:
    assert response.status == 200, response.body
    answer = response.json()
    assert "result" in answer, answer
    result: dict[str, Any] = answer["result"]
    return result


def error_of(result: dict[str, Any]) -> dict[str, Any]:
    assert result["isError"] is True, result
    error: dict[str, Any] = result["structuredContent"]["error"]
    return error


def settings(up: SampleUpstream, **overrides: Any) -> Settings:
    return Settings.from_env({}, upstream_url=up.url, upstream_retries=0, **overrides)


@functools.cache
def shared_catalog() -> Catalog:
    return load_catalog()


def build_endpoint(
    config: Settings, *, transport: UpstreamTransport | None = None, cache: ResponseCache | None = None
) -> Endpoint:
    """`Endpoint.from_settings`, sharing one loaded catalog (immutable) between tests to keep them quick."""
    surface = Surface.from_settings(config, catalog=shared_catalog(), transport=transport, cache=cache)
    return Endpoint(surface, config)


def post(endpoint: Endpoint, body: str | bytes, headers: dict[str, str] | None = None, query: str = "") -> HttpResponse:
    all_headers = {"Content-Type": "application/json", **(headers or {})}
    return endpoint.handle(HttpRequest.build("POST", "/mcp", query=query, headers=all_headers, body=body))


def lambda_event(
    body: str, headers: dict[str, str] | None = None, query: str = "", method: str = "POST"
) -> dict[str, Any]:
    """A payload-2.0 event as API Gateway sends it."""
    return {
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": "/mcp",
        "rawQueryString": query,
        "headers": {"content-type": "application/json", **{k.lower(): v for k, v in (headers or {}).items()}},
        "requestContext": {
            "http": {"method": method, "path": "/mcp", "protocol": "HTTP/1.1", "sourceIp": "203.0.113.9"},
            "requestId": "sec-req-1",
            "stage": "$default",
        },
        "body": body,
        "isBase64Encoded": False,
    }


class CurrentStdout:
    """Writes to whatever sys.stdout is now (capsys swaps it); Powertools bound its stream at import."""

    def write(self, text: str) -> int:
        return sys.stdout.write(text)

    def flush(self) -> None:
        sys.stdout.flush()


@dataclass
class Observed:
    """Everything a secret could leak into: logs (every logger, DEBUG), stdout/stderr, raised exceptions."""

    capsys: pytest.CaptureFixture[str]
    caplog: pytest.LogCaptureFixture
    exceptions: list[str] = field(default_factory=list)

    def text(self) -> str:
        captured = self.capsys.readouterr()
        parts = [captured.out, captured.err, self.caplog.text, *self.exceptions]
        for record in self.caplog.records:
            parts.append(record.getMessage())
            parts.append(repr({k: str(v) for k, v in vars(record).items()}))
            if record.exc_info:
                parts.append("".join(traceback.format_exception(*record.exc_info)))
        return "\n".join(parts)

    def watch_upstream_errors(self, endpoint: Endpoint) -> None:
        """Record every exception the upstream client raises: message, repr, args, attributes, chained causes."""
        client = endpoint.surface.upstream
        original = client.call

        def call(*args: Any, **kwargs: Any) -> Any:
            try:
                return original(*args, **kwargs)
            except BaseException as exc:
                self.exceptions.append("".join(traceback.format_exception(exc)))
                self.exceptions.append(f"{exc!r} {exc.args!r} {vars(exc)!r}")
                raise

        client.call = call  # type: ignore[method-assign]


@pytest.fixture
def observed(
    capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> Observed:
    monkeypatch.setattr(handler_module.logger.registered_handler, "stream", CurrentStdout())
    monkeypatch.delenv("POWERTOOLS_METRICS_DISABLED", raising=False)
    caplog.set_level(logging.DEBUG)
    for name in ("httpx", "httpcore", "progressive_mcp", "lambda_fn", "urllib3", "botocore"):
        caplog.set_level(logging.DEBUG, logger=name)
    return Observed(capsys, caplog)


def loud_httpx(endpoint: Endpoint, caplog: pytest.LogCaptureFixture) -> None:
    """The transport quiets httpx and httpcore when it makes its client: make it now, then turn them up to
    DEBUG, as someone chasing a connection problem would."""
    transport = endpoint.surface.upstream.transport
    if isinstance(transport, HttpxTransport):
        transport._http()
    for name in ("httpx", "httpcore"):
        caplog.set_level(logging.DEBUG, logger=name)


@pytest.fixture(scope="module")
def shared_upstream() -> Iterator[SampleUpstream]:
    with SampleUpstream() as up:
        yield up


@pytest.fixture
def upstream(shared_upstream: SampleUpstream) -> Iterator[SampleUpstream]:
    shared_upstream.reset()
    yield shared_upstream
    shared_upstream.reset()


@dataclass(frozen=True)
class WireRequest:
    host: str
    target: str  # the raw request target: path and query exactly as sent


@pytest.fixture
def wire(monkeypatch: pytest.MonkeyPatch) -> list[WireRequest]:
    """The raw request line and Host header of every request the sample upstream receives."""
    seen: list[WireRequest] = []
    lock = threading.Lock()
    original = sample_upstream._RequestHandler.do_GET

    def do_get(self: Any) -> None:
        with lock:
            seen.append(WireRequest(self.headers.get("Host", ""), self.path))
        original(self)

    monkeypatch.setattr(sample_upstream._RequestHandler, "do_GET", do_get)
    return seen


@pytest.fixture
def catalog() -> Catalog:
    return shared_catalog()


def closed_port_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/query"


# --- 1. keys never leak ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Scenario:
    """One way a request can go: a fault at the sample upstream, or a request the endpoint refuses."""

    name: str
    body: str = tool_call("GLOBAL_QUOTE", {"symbol": "IBM"})
    faults: dict[str, Any] = field(default_factory=dict)
    key: str = CALLER_KEY
    settings: dict[str, Any] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)
    method: str = "POST"
    status: int = 200
    tool_error: str | None = None  # the isError type expected, if any
    reaches_upstream: bool = True
    closed_upstream: bool = False
    broken_transport: bool = False


SCENARIOS = [
    Scenario("success"),
    Scenario("success-csv", body=tool_call("TIME_SERIES_DAILY", {"symbol": "IBM", "datatype": "csv"})),
    Scenario("http-500", faults={"status": 500}, tool_error="UpstreamUnavailable"),
    Scenario("http-503", faults={"status": 503}, tool_error="UpstreamUnavailable"),
    Scenario("http-429", faults={"status": 429}, tool_error="RateLimited"),
    Scenario("http-401", faults={"status": 401}, tool_error="MissingApiKey"),
    Scenario("malformed", faults={"malformed": True}, tool_error="UpstreamBadResponse"),
    Scenario("rate-limit-notice-echoes-the-key", faults={"rate_limit": True}, tool_error="RateLimited"),
    Scenario("invalid-key", key=INVALID_CALLER_KEY, tool_error="MissingApiKey"),
    Scenario(
        "premium",
        body=tool_call("GLOBAL_QUOTE", {"symbol": "IBM", "entitlement": "realtime"}),
        tool_error="PremiumRequired",
    ),
    # The caller gives up after 0.25 s, the upstream answers after 2 s (its thread sleeps on, harmlessly).
    Scenario("timeout", faults={"delay_s": 2.0}, settings={"upstream_timeout_s": 0.25}, tool_error="UpstreamTimeout"),
    Scenario("connection-refused", closed_upstream=True, tool_error="UpstreamUnavailable"),
    Scenario("transport-bug-quoting-the-url", broken_transport=True, tool_error="ToolError"),
    # A key too long for any URL: refused somewhere on the way (today httpx's InvalidURL, an internal error).
    Scenario("very-long-key", key=CALLER_KEY * 4_000, reaches_upstream=False),
    Scenario(
        "invalid-arguments",
        body=tool_call("TIME_SERIES_INTRADAY", {"symbol": "IBM", "interval": "2min"}),
        tool_error="InvalidArguments",
        reaches_upstream=False,
    ),
    Scenario(
        "unknown-tool-in-tool-call",
        body=tool_call("NO_SUCH_TOOL", {}),
        tool_error="UnknownTool",
        reaches_upstream=False,
    ),
    Scenario("unknown-tool", body=rpc("tools/call", {"name": "NO_SUCH_TOOL"}), reaches_upstream=False),
    Scenario("unknown-method", body=rpc("nope/nope"), reaches_upstream=False),
    Scenario("not-json", body="{not json", status=400, reaches_upstream=False),
    Scenario(
        "batch", body="[" + tool_call("GLOBAL_QUOTE", {"symbol": "IBM"}) + "]", status=400, reaches_upstream=False
    ),
    Scenario(
        "oversized-body",
        body=tool_call("GLOBAL_QUOTE", {"symbol": "I" * 2_000}),
        settings={"max_body_bytes": 1024},
        status=413,
        reaches_upstream=False,
    ),
    Scenario("wrong-content-type", headers={"Content-Type": "text/plain"}, status=415, reaches_upstream=False),
    Scenario("get", method="GET", status=405, reaches_upstream=False),
    Scenario("foreign-origin", headers={"Origin": "https://evil.example"}, status=403, reaches_upstream=False),
]


class BrokenTransport:
    """A transport with a bug: it raises an unexpected error whose message quotes the URL, key included."""

    def send(self, request: UpstreamRequest) -> UpstreamResponse:
        raise RuntimeError(f"could not send GET {request.url}?{'&'.join(f'{k}={v}' for k, v in request.params)}")


def scenario_endpoint(scenario: Scenario, up: SampleUpstream, **extra: Any) -> Endpoint:
    overrides = {**scenario.settings, **extra}
    if scenario.closed_upstream:
        overrides["upstream_url"] = closed_port_url()
    transport = BrokenTransport() if scenario.broken_transport else None
    return build_endpoint(
        Settings.from_env({}, **{"upstream_url": up.url, "upstream_retries": 0, **overrides}), transport=transport
    )


def check_scenario_answer(scenario: Scenario, status: int, body: str, up: SampleUpstream) -> None:
    assert status == scenario.status, body
    if scenario.tool_error is not None:
        error = json.loads(body)["result"]["structuredContent"]["error"]
        assert error["type"] == scenario.tool_error, error
    if scenario.name == "very-long-key":  # a URL past the HTTP library's limit: a clear refusal, not a crash
        result = json.loads(body)["result"]
        assert result["isError"] is True
        assert result["structuredContent"]["error"]["type"] == "UpstreamRejected", result
    if scenario.name == "rate-limit-notice-echoes-the-key":
        assert "***" in body  # the notice is passed on, with the key masked
    # The key was really in play: it reached the sample upstream (unless the request was refused first, or
    # went to a closed port or a broken transport instead).
    goes_out = scenario.reaches_upstream and not (scenario.closed_upstream or scenario.broken_transport)
    # A caller that timed out has answered before the upstream's thread logged the request (on a busy machine it
    # may not have read it yet): wait for it rather than race it.
    reached = [r.get("apikey") for r in up.wait_for_requests(within_s=10 if goes_out else 0, unmasked=True)]
    assert bool(reached) is goes_out
    assert all(key == scenario.key for key in reached)


# Every scenario with the key in X-API-Key; the other two ways of passing it on the scenarios that echo it.
KEY_PASSING = [(s, "x-api-key") for s in SCENARIOS] + [
    (s, how)
    for s in SCENARIOS
    if s.name in ("success", "rate-limit-notice-echoes-the-key", "malformed", "transport-bug-quoting-the-url")
    for how in ("bearer", "query")
]


@pytest.mark.parametrize(("scenario", "how"), KEY_PASSING, ids=lambda v: v if isinstance(v, str) else v.name)
def test_caller_key_never_leaks_through_the_lambda_handler(
    upstream: SampleUpstream, observed: Observed, scenario: Scenario, how: str
) -> None:
    upstream.update_faults(scenario.faults)
    endpoint = scenario_endpoint(scenario, upstream)
    if not scenario.broken_transport:  # that transport's own error quotes the key on purpose
        observed.watch_upstream_errors(endpoint)
    loud_httpx(endpoint, observed.caplog)
    headers = dict(scenario.headers)
    query = ""
    if how == "x-api-key":
        headers["X-API-Key"] = scenario.key
    elif how == "bearer":
        headers["Authorization"] = f"Bearer {scenario.key}"
    else:
        query = "apikey=" + quote(scenario.key, safe="")
    event = lambda_event(scenario.body, headers=headers, query=query, method=scenario.method)
    result = make_handler(endpoint)(event, LocalContext(aws_request_id="sec-ctx-1"))

    check_scenario_answer(scenario, result["statusCode"], result["body"], upstream)
    assert_clean(json.dumps(result), scenario.key, where="Lambda result")
    text = observed.text()
    assert '"message": "request"' in text or '"message":"request"' in text  # the handler's log line was captured
    assert_clean(text, scenario.key, where="logs, output or exceptions")


@pytest.mark.parametrize(
    "scenario", [s for s in SCENARIOS if s.method == "POST" and s.name != "very-long-key"], ids=lambda s: s.name
)
def test_server_key_and_tokens_never_leak(upstream: SampleUpstream, observed: Observed, scenario: Scenario) -> None:
    upstream.update_faults(scenario.faults)
    server_key = INVALID_CALLER_KEY if scenario.key == INVALID_CALLER_KEY else SERVER_KEY
    endpoint = scenario_endpoint(
        scenario, upstream, auth_mode="server-key", api_key=server_key, endpoint_tokens=(TOKEN, OLD_TOKEN)
    )
    if not scenario.broken_transport:
        observed.watch_upstream_errors(endpoint)
    loud_httpx(endpoint, observed.caplog)
    # The caller also sends a key of their own: in server-key mode it must be ignored, never used or echoed.
    headers = {"Authorization": f"Bearer {TOKEN}", "X-API-Key": CALLER_KEY, **scenario.headers}
    result = make_handler(endpoint)(lambda_event(scenario.body, headers=headers), LocalContext(aws_request_id="c"))

    check_scenario_answer(
        Scenario(**{**scenario.__dict__, "key": server_key}), result["statusCode"], result["body"], upstream
    )
    secrets = (server_key, TOKEN, OLD_TOKEN, CALLER_KEY)
    assert_clean(json.dumps(result), *secrets, where="Lambda result")
    assert_clean(observed.text(), *secrets, where="logs, output or exceptions")


def test_an_internal_error_is_logged_without_the_key(
    upstream: SampleUpstream, observed: Observed, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bug of ours whose exception quotes the key: a generic 500 for the caller, a redacted trace in the log."""

    def broken(self: Surface, name: str, arguments: Any, ctx: Any) -> dict[str, Any]:
        raise RuntimeError(f"bug while calling {upstream.url}?apikey={quote_plus(ctx.api_key)} for {ctx.api_key}")

    monkeypatch.setattr(Surface, "call_tool_wire", broken)
    endpoint = build_endpoint(settings(upstream))
    result = make_handler(endpoint)(
        lambda_event(tool_call("GLOBAL_QUOTE", {"symbol": "IBM"}), {"X-API-Key": CALLER_KEY}), None
    )
    assert result["statusCode"] == 500 and json.loads(result["body"])["error"]["code"] == -32603
    text = observed.text()
    assert "RuntimeError: bug while calling" in text  # the trace is there, for whoever fixes the bug
    assert_clean(json.dumps(result), CALLER_KEY, where="500 answer")
    assert_clean(text, CALLER_KEY, where="logs")


@pytest.mark.parametrize("token", [None, WRONG_TOKEN, TOKEN[:-1], TOKEN + "x"])
def test_refused_tokens_are_neither_echoed_nor_logged(
    upstream: SampleUpstream, observed: Observed, token: str | None
) -> None:
    endpoint = build_endpoint(
        settings(upstream, auth_mode="server-key", api_key=SERVER_KEY, endpoint_tokens=(TOKEN, OLD_TOKEN))
    )
    headers = {"X-API-Key": CALLER_KEY} | ({"Authorization": f"Bearer {token}"} if token else {})
    result = make_handler(endpoint)(lambda_event(tool_call("GLOBAL_QUOTE", {"symbol": "IBM"}), headers=headers), None)
    assert result["statusCode"] == 401
    assert upstream.requests_snapshot() == []
    secrets = (SERVER_KEY, TOKEN, OLD_TOKEN, CALLER_KEY, WRONG_TOKEN)
    assert_clean(json.dumps(result), *secrets, where="401 answer")
    assert_clean(observed.text(), *secrets, where="logs")


class Switchboard:
    """A Lambda handler that a test can swap, so one LocalServer serves many tests (starting one costs ~0.3 s)."""

    def __init__(self) -> None:
        self.handler: Callable[[dict[str, Any], Any], dict[str, Any]] | None = None

    def __call__(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
        assert self.handler is not None
        return self.handler(event, context)


@pytest.fixture(scope="module")
def http_server() -> Iterator[tuple[LocalServer, Switchboard]]:
    board = Switchboard()
    with LocalServer(board, port=0) as server:
        yield server, board


HTTP_SCENARIOS = [
    s
    for s in SCENARIOS
    if s.name in ("success", "rate-limit-notice-echoes-the-key", "http-503", "malformed", "timeout", "oversized-body")
    or s.name == "foreign-origin"
]


@pytest.mark.parametrize("scenario", HTTP_SCENARIOS, ids=lambda s: s.name)
def test_caller_key_never_leaks_over_real_http(
    upstream: SampleUpstream, observed: Observed, scenario: Scenario, http_server: tuple[LocalServer, Switchboard]
) -> None:
    server, board = http_server
    upstream.update_faults(scenario.faults)
    endpoint = scenario_endpoint(scenario, upstream)
    observed.watch_upstream_errors(endpoint)
    loud_httpx(endpoint, observed.caplog)
    board.handler = make_handler(endpoint)
    headers = {"Content-Type": "application/json", "X-API-Key": scenario.key, **scenario.headers}
    response = httpx.post(server.url, content=scenario.body, headers=headers, timeout=10)
    check_scenario_answer(scenario, response.status_code, response.text, upstream)
    assert_clean(f"{response.headers!r} {response.text}", scenario.key, where="HTTP response")
    assert_clean(observed.text(), scenario.key, where="logs, output or exceptions")


def test_rate_limit_notice_is_redacted_in_every_form_of_the_key(upstream: SampleUpstream) -> None:
    """The notice quotes the key as the upstream received it; every key shape must still come back masked."""
    endpoint = build_endpoint(settings(upstream))
    upstream.update_faults({"rate_limit": True})
    for refused in ("kéy-ñ-ключ", "a b", "abc"):  # no API key looks like these: refused before any upstream call
        response = post(endpoint, tool_call("GLOBAL_QUOTE", {"symbol": "IBM"}), {"X-API-Key": refused})
        assert response.status == 401 and refused not in response_text(response)
    for key in (CALLER_KEY, "demo", "k" * 200, "%41%42", "apikey=x"):
        response = post(endpoint, tool_call("GLOBAL_QUOTE", {"symbol": "IBM"}), {"X-API-Key": key})
        error = error_of(result_of(response))
        assert error["type"] == "RateLimited"
        assert upstream.requests_snapshot(unmasked=True)[-1]["apikey"] == key
        notice_tail = "and our standard API rate limit"
        assert notice_tail in error["message"]
        assert f"as {key} {notice_tail}" not in error["message"] and key not in response_text(response)


@pytest.mark.slow
def test_stdio_server_never_shows_its_key(upstream: SampleUpstream) -> None:
    """The stdio server holds its user's key: not in any result (even the echoing notice) nor on stderr."""
    import anyio
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters, stdio_client

    async def session(log: Any) -> list[str]:
        params = StdioServerParameters(
            command=sys.executable,
            args=["-m", "stdio_server", "--upstream", upstream.url, "--log-level", "DEBUG", "--no-cache"],
            env={"ALPHAVANTAGE_API_KEY": CALLER_KEY},
            cwd=str(ROOT),
        )
        texts = []
        async with Client(stdio_client(params, errlog=log)) as client:
            for faults in ({}, {"rate_limit": True}, {"status": 503}, {"malformed": True}):
                upstream.reset()
                upstream.update_faults(faults)
                arguments = {"tool_name": "GLOBAL_QUOTE", "arguments": {"symbol": "IBM"}}
                result = await client.call_tool("TOOL_CALL", arguments)
                texts.append(result.model_dump_json())
                assert upstream.requests_snapshot(unmasked=True)[-1]["apikey"] == CALLER_KEY
        return texts

    with tempfile.TemporaryFile("w+") as log:
        texts = anyio.run(session, log)
        log.seek(0)
        stderr = log.read()
    assert '"is_error":false' in texts[0] and all('"is_error":true' in t for t in texts[1:])
    assert "***" in texts[1]
    assert_clean("\n".join(texts), CALLER_KEY, where="stdio results")
    assert_clean(stderr, CALLER_KEY, where="stdio server's stderr")


# --- 2. no argument can steer the upstream request ---------------------------------------------------

PATTERN_SAMPLES = {
    r"^\d{4}-\d{2}$": "2024-01",
    r"^\d{4}-\d{2}-\d{2}$": "2024-01-02",
    r"^[a-z_]+(,[a-z_]+)*$": "technology",
    r"^[0-9]{8}T[0-9]{4}([0-9]{2})?$": "20240101T0000",
    r"^[0-9]{4}Q[1-4]$": "2024Q1",
    r"^[A-Za-z][0-9]{6}$": "P000197",
}


def valid_value(param: Param) -> Any:
    if param.enum is not None:
        return param.enum[0]
    if param.default is not None:
        return param.default
    if param.pattern is not None:
        return PATTERN_SAMPLES[param.pattern]
    if param.type == "integer":
        return int(param.minimum) if param.minimum is not None else 10
    if param.type == "number":
        return param.minimum if param.minimum is not None else 0.5
    if param.type == "boolean":
        return True
    return "IBM"


def valid_arguments(tool: CatalogTool) -> dict[str, Any]:
    """Arguments the tool accepts: every required one, and the first of each 'at least one of' group."""
    needed = {p.name for p in tool.params if p.required} | {group[0] for group in tool.require_any}
    return {p.name: valid_value(p) for p in tool.params if p.name in needed}


def free_text_params(tool: CatalogTool) -> list[Param]:
    """The string parameters the schema does not pin down (no enum, no pattern): where injection would go."""
    return [p for p in tool.params if p.type == "string" and p.enum is None and p.pattern is None]


INJECTED_VALUES = [
    "IBM&function=OVERVIEW",
    f"IBM&apikey={STOLEN}",
    f"IBM&function=OVERVIEW&apikey={STOLEN}",
    "IBM&datatype=csv",
    f"IBM#&apikey={STOLEN}",
    "IBM?function=OVERVIEW",
    "IBM;function=OVERVIEW",
    "IBM+function=OVERVIEW",
    "IBM%26function%3DOVERVIEW",
    f"IBM%2526apikey%253D{STOLEN}",
    "IBM\uff06function\uff1dOVERVIEW",  # fullwidth & and =
    "\uff29\uff22\uff2d",  # fullwidth IBM
    "IBM\u2024\u2044evil.example",  # one-dot leader, fraction slash
    "http://169.254.169.254/latest/meta-data/",
    "//evil.example/x",
    "@evil.example",
    "IBM@evil.example:80/query",
    "\r\nHost: evil.example\r\n",
    "IBM\r\nX-Injected: 1\r\n\r\nGET /evil HTTP/1.1",
    "IBM\x00function=OVERVIEW",
    "../../../etc/passwd",
    " function=OVERVIEW ",
    "A" * MAX_VALUE_CHARS,  # the longest value sent
    "B" * (MAX_VALUE_CHARS + 1),  # rejected
]
# Argument names that try to add or replace a parameter of the upstream request: all refused.
INJECTED_NAMES = [
    "function",
    "apikey",
    "FUNCTION",
    "ApiKey",
    "api_key",
    "apikey ",
    "function&apikey",
    "symbol&function",
]


@dataclass
class Upstream:
    """One endpoint against the sample upstream, with the raw requests it made."""

    endpoint: Endpoint
    up: SampleUpstream
    wire: list[WireRequest]

    def call(self, tool: str, arguments: Any, key: str = CALLER_KEY) -> tuple[dict[str, Any], list[WireRequest]]:
        before = len(self.wire)
        result = result_of(post(self.endpoint, tool_call(tool, arguments), {"X-API-Key": key}))
        return result, self.wire[before:]

    def check_request(self, sent: WireRequest, tool: CatalogTool, key: str, expected: dict[str, str]) -> None:
        """Exactly one function (the tool) and one apikey (the caller's), at the configured host and path, with
        only the tool's declared parameters, each once, each exactly the value given."""
        parts = urlsplit(sent.target)
        assert sent.host == f"{self.up.host}:{self.up.port}"
        assert parts.path == "/query" and not parts.fragment and "#" not in sent.target
        pairs = parse_qsl(parts.query, keep_blank_values=True, strict_parsing=True)
        names = [name for name, _ in pairs]
        assert len(names) == len(set(names)), f"a parameter repeats: {names}"
        values = dict(pairs)
        assert values["function"] == tool.name and values["apikey"] == key
        assert set(names) - {"function", "apikey"} <= {p.name for p in tool.params}
        for name, value in expected.items():
            assert values[name] == value
        assert values in self.up.requests_snapshot(unmasked=True)  # the sample upstream read the same


@pytest.fixture
def open_endpoint(upstream: SampleUpstream, wire: list[WireRequest]) -> Upstream:
    return Upstream(build_endpoint(settings(upstream, cache=False)), upstream, wire)


def test_valid_arguments_fit_every_tool(catalog: Catalog) -> None:
    for tool in catalog.tools:
        prepare_arguments(catalog, tool.name, valid_arguments(tool))


# Tools whose free text parameters get every injected value; every other tool gets EVERY_TOOL_VALUES.
THOROUGH_TOOLS = {"GLOBAL_QUOTE", "SYMBOL_SEARCH", "NEWS_SENTIMENT", "FX_DAILY", "ANALYTICS_FIXED_WINDOW", "RSI"}
EVERY_TOOL_VALUES = [
    f"IBM&function=OVERVIEW&apikey={STOLEN}",
    "http://169.254.169.254/latest/meta-data/",
    "\r\nHost: evil.example\r\n",
    "IBM%26function%3DOVERVIEW",
    "B" * (MAX_VALUE_CHARS + 1),
]


def test_injected_values_are_one_encoded_query_value_for_every_tool(catalog: Catalog, open_endpoint: Upstream) -> None:
    assert {t.name for t in catalog.tools} >= THOROUGH_TOOLS
    sent = refused = 0
    for tool in catalog.tools:
        params = free_text_params(tool) or [p for p in tool.params if p.type == "string"][:1]
        for param in params:
            for value in INJECTED_VALUES if tool.name in THOROUGH_TOOLS else EVERY_TOOL_VALUES:
                arguments = {**valid_arguments(tool), param.name: value}
                result, requests = open_endpoint.call(tool.name, arguments)
                if not requests:  # refused before anything went out: and said why
                    assert error_of(result)["type"] == "InvalidArguments", (tool.name, param.name, value)
                    refused += 1
                    continue
                (request,) = requests
                open_endpoint.check_request(request, tool, CALLER_KEY, {param.name: value})
                sent += 1
    # Both outcomes happened: free text is passed on (encoded), pinned-down parameters refuse it.
    assert sent > 300 and refused > 100, (sent, refused)


def test_reserved_argument_names_are_refused_for_every_tool(catalog: Catalog, open_endpoint: Upstream) -> None:
    for tool in catalog.tools:
        for name in INJECTED_NAMES:
            for value in (STOLEN, "OVERVIEW"):
                result, requests = open_endpoint.call(tool.name, {**valid_arguments(tool), name: value})
                assert requests == [], (tool.name, name)
                error = error_of(result)
                assert error["type"] == "InvalidArguments" and "allowed arguments" in error["message"]
    assert open_endpoint.up.requests_snapshot() == []


def test_the_request_builder_drops_reserved_names_even_past_validation(
    catalog: Catalog, upstream: SampleUpstream, wire: list[WireRequest]
) -> None:
    """The second guard: arguments that somehow skipped the schema still cannot replace function or apikey."""
    client = UpstreamClient(catalog.api, base_url=upstream.url, retries=0)
    tool = catalog.get("GLOBAL_QUOTE")
    request = client.build_request(tool, {"symbol": "IBM", "function": "OVERVIEW", "apikey": STOLEN}, CALLER_KEY)
    assert [v for k, v in request.params if k == "function"] == ["GLOBAL_QUOTE"]
    assert [v for k, v in request.params if k == "apikey"] == [CALLER_KEY]
    assert request.url == upstream.url
    client.call(tool, {"symbol": "IBM", "function": "OVERVIEW", "apikey": STOLEN}, CALLER_KEY)
    (sent,) = wire
    Upstream(build_endpoint(settings(upstream)), upstream, wire).check_request(
        sent, tool, CALLER_KEY, {"symbol": "IBM"}
    )


@pytest.mark.parametrize(
    "arguments",
    [
        json.dumps({"symbol": "IBM", "function": "OVERVIEW"}),  # the JSON-string form of arguments
        {"symbol": "IBM", "datatype": "csv&function=OVERVIEW"},
        {"symbol": "IBM", "datatype": "CSV"},  # repaired to "csv", a value of the enum
        {"symbol": "IBM", "entitlement": f"delayed&apikey={STOLEN}"},
        {"symbol": ["IBM", "OVERVIEW"]},
        {"symbol": {"function": "OVERVIEW"}},
    ],
)
def test_datatype_and_structured_tricks(open_endpoint: Upstream, catalog: Catalog, arguments: Any) -> None:
    result, requests = open_endpoint.call("GLOBAL_QUOTE", arguments)
    if requests:
        (request,) = requests
        open_endpoint.check_request(request, catalog.get("GLOBAL_QUOTE"), CALLER_KEY, {"datatype": "csv"})
    else:
        assert error_of(result)["type"] == "InvalidArguments"


@pytest.mark.parametrize(
    "name",
    [
        "OVERVIEW",  # a real Alpha Vantage function, but outside the configured categories
        "overview",
        " OVERVIEW ",
        "OVERVIEW\n",
        "\uff2f\uff36\uff25\uff32\uff36\uff29\uff25\uff37",  # fullwidth OVERVIEW
        "GLOBAL_QUOTE&function=OVERVIEW",
        "GLOBAL_QUOTE\r\nfunction=OVERVIEW",
        "http://evil.example/query?function=OVERVIEW",
        "TOOL_CALL",
        "LISTING_STATUS_X",
        "",
    ],
)
def test_tool_call_cannot_name_a_function_outside_the_surface(
    upstream: SampleUpstream, wire: list[WireRequest], name: str
) -> None:
    endpoint = build_endpoint(settings(upstream, categories="stocks"))
    response = post(endpoint, tool_call(name, {"symbol": "IBM"}), {"X-API-Key": CALLER_KEY})
    assert error_of(result_of(response))["type"] in ("UnknownTool", "InvalidArguments")
    direct = build_endpoint(settings(upstream, categories="stocks", mode="direct"))
    response = post(
        direct, rpc("tools/call", {"name": name, "arguments": {"symbol": "IBM"}}), {"X-API-Key": CALLER_KEY}
    )
    assert response.status == 200 and response.json()["error"]["code"] == -32602
    assert wire == [] and upstream.requests_snapshot() == []


@pytest.mark.parametrize(
    "query", ["categories=fundamentals", "categories=stocks,fundamentals", "categories=", "categories=,", "mode=direct"]
)
def test_the_url_cannot_widen_the_configured_categories(
    upstream: SampleUpstream, wire: list[WireRequest], query: str
) -> None:
    """`?categories=` narrows PMCP_CATEGORIES for one URL; it must not reach a category the operator left out."""
    endpoint = server_key_endpoint(upstream, categories="stocks")
    headers = {"Authorization": f"Bearer {TOKEN}"}
    response = post(endpoint, tool_call("OVERVIEW", {"symbol": "IBM"}), headers, query=query)
    if response.status == 400:
        assert "this endpoint offers stocks" in response.json()["error"]["message"]
    elif "error" in response.json():  # ?mode=direct has no TOOL_CALL
        assert response.json()["error"]["code"] == -32602
    else:
        assert error_of(result_of(response))["type"] == "UnknownTool"
    direct = post(
        endpoint, rpc("tools/call", {"name": "OVERVIEW", "arguments": {"symbol": "IBM"}}), headers, "mode=direct"
    )
    assert direct.json()["error"]["code"] == -32602
    assert wire == []
    narrowed = post(endpoint, rpc("tools/list"), headers, query="mode=direct&categories=stocks")
    assert "GLOBAL_QUOTE" in {t["name"] for t in result_of(narrowed)["tools"]}


@pytest.mark.parametrize("name", ["global_quote", " GLOBAL_QUOTE ", "Global_Quote"])
def test_a_case_or_space_variant_runs_the_canonical_tool(
    upstream: SampleUpstream, wire: list[WireRequest], catalog: Catalog, name: str
) -> None:
    endpoint = build_endpoint(settings(upstream, categories="stocks"))
    result = result_of(post(endpoint, tool_call(name, {"symbol": "IBM"}), {"X-API-Key": CALLER_KEY}))
    assert result["isError"] is False
    (sent,) = wire
    Upstream(endpoint, upstream, wire).check_request(sent, catalog.get("GLOBAL_QUOTE"), CALLER_KEY, {"symbol": "IBM"})


def test_in_server_key_mode_no_caller_supplied_key_reaches_the_upstream(
    upstream: SampleUpstream, wire: list[WireRequest], catalog: Catalog
) -> None:
    endpoint = build_endpoint(
        settings(upstream, auth_mode="server-key", api_key=SERVER_KEY, endpoint_tokens=(TOKEN,), cache=False)
    )
    headers = {"Authorization": f"Bearer {TOKEN}", "X-API-Key": STOLEN}
    ok = post(endpoint, tool_call("GLOBAL_QUOTE", {"symbol": "IBM"}), headers, query=f"apikey={STOLEN}")
    assert result_of(ok)["isError"] is False
    injected = {"symbol": f"IBM&apikey={STOLEN}"}  # no such symbol: the upstream says so, with the server's key
    post(endpoint, tool_call("GLOBAL_QUOTE", injected), headers, query=f"apikey={STOLEN}")
    assert len(wire) == 2
    for sent, symbol in zip(wire, ("IBM", f"IBM&apikey={STOLEN}"), strict=True):
        Upstream(endpoint, upstream, wire).check_request(
            sent, catalog.get("GLOBAL_QUOTE"), SERVER_KEY, {"symbol": symbol}
        )


# --- 3. size limits ----------------------------------------------------------------------------------


def test_a_body_over_the_limit_is_a_413_json_rpc_error(upstream: SampleUpstream) -> None:
    endpoint = build_endpoint(settings(upstream, max_body_bytes=2048))
    padding = 2048 - len(tool_call("GLOBAL_QUOTE", {"symbol": ""}))
    at_limit = tool_call("GLOBAL_QUOTE", {"symbol": " " * padding})
    assert len(at_limit.encode()) == 2048
    assert post(endpoint, at_limit, {"X-API-Key": CALLER_KEY}).status == 200
    for body in (at_limit.replace('"symbol": "', '"symbol": " '), "x" * 100_000):
        response = post(endpoint, body, {"X-API-Key": CALLER_KEY})
        assert response.status == 413
        assert response.headers["Content-Type"] == "application/json"
        error = response.json()["error"]
        assert error["code"] == -32600 and "the limit is 2048" in error["message"]
        result = make_handler(endpoint)(lambda_event(body, {"X-API-Key": CALLER_KEY}), None)
        assert result["statusCode"] == 413 and json.loads(result["body"])["error"]["code"] == -32600
    assert len(upstream.requests_snapshot()) == 1


def test_a_large_body_over_real_http_is_a_413_not_a_5xx(
    upstream: SampleUpstream, http_server: tuple[LocalServer, Switchboard]
) -> None:
    server, board = http_server
    board.handler = make_handler(build_endpoint(settings(upstream)))  # the default limit, 1 MiB
    body = tool_call("GLOBAL_QUOTE", {"symbol": "I" * 1_100_000})
    response = httpx.post(server.url, content=body, headers={"Content-Type": "application/json"}, timeout=10)
    assert response.status_code == 413
    assert response.json()["error"]["code"] == -32600
    assert upstream.requests_snapshot() == []


def test_a_body_over_the_wire_limit_is_refused_before_it_is_sent(http_server: tuple[LocalServer, Switchboard]) -> None:
    """`serve` answers 413 from the Content-Length alone: the client sends only the headers, and gets its answer."""
    server, board = http_server
    board.handler = None  # the handler must not even be called
    head = (
        f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {MAX_WIRE_BODY_BYTES + 1}\r\n\r\n"
    )
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(head.encode())
        answer = b""
        while b"\r\n\r\n" not in answer:
            chunk = sock.recv(4096)
            assert chunk, "the server closed the connection without an answer"
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 413 ")


def nested(depth: int) -> Any:
    value: Any = "IBM"
    for _ in range(depth):
        value = [value]
    return value


def test_a_long_string_is_refused_in_a_url_or_header_but_not_in_a_body() -> None:
    # MAX_VALUE_CHARS keeps long values out of URLs and headers; a message's text in a REST body (Vtex's embedded
    # invoice, a chat message) or a file's content for a gateway's filesystem server is bounded by its request.
    from dataclasses import replace

    from factories import make_tool

    from progressive_mcp.catalog import Api, Operation
    from progressive_mcp.catalog import Param as CatalogParam
    from progressive_mcp.errors import InvalidArguments

    params = (
        CatalogParam("q", "string", False),
        CatalogParam("X-Note", "string", False, location="header"),
        CatalogParam("text", "string", False, location="body"),
    )
    rest = make_tool("post_message", params, method="POST", operation=Operation("POST", "/messages", "post_message"))
    server = replace(make_tool("write_file", (CatalogParam("content", "string", True),)), server="fs")
    catalog = Catalog.build(Api("t", "T", "https://t.example"), {"things": "Things"}, (rest, server))
    long = "x" * (MAX_VALUE_CHARS * 4)
    assert prepare_arguments(catalog, "post_message", {"text": long})["text"] == long
    assert prepare_arguments(catalog, "write_file", {"content": long})["content"] == long
    for name in ("q", "X-Note"):
        with pytest.raises(InvalidArguments, match="characters long; the limit is"):
            prepare_arguments(catalog, "post_message", {name: long})


@pytest.mark.parametrize(
    ("arguments", "says"),
    [
        ({"symbol": "I" * (MAX_VALUE_CHARS + 1)}, f"is {MAX_VALUE_CHARS + 1} characters long; the limit is"),
        ({"symbol": "IBM", **{f"extra{i}": i for i in range(MAX_ARGUMENTS + 1)}}, f"at most {MAX_ARGUMENTS}"),
        ({"symbol": nested(MAX_NESTING + 1)}, f"nested more than {MAX_NESTING} levels deep"),
        ({"symbol": nested(900)}, f"nested more than {MAX_NESTING} levels deep"),  # deeper than the validator goes
        ("[" * 50_000 + "]" * 50_000, "nested too deeply"),  # arguments as a JSON string
        ({"symbol": "IBM", "datatype": "x" * 2_000}, "is not one of the allowed values"),
        ({"symbol": "IBM", "e" * 3_000: 1}, "an argument name is 3000 characters"),
        ({"symbol": ["I" * 100] * 5_000}, 'is not of type "string"'),
    ],
    ids=["long-value", "too-many", "nested", "very-nested", "nested-json-string", "long-enum", "long-name", "wide"],
)
def test_oversized_arguments_are_refused_with_a_short_clear_message(
    upstream: SampleUpstream, arguments: Any, says: str
) -> None:
    endpoint = build_endpoint(settings(upstream))
    response = post(endpoint, tool_call("GLOBAL_QUOTE", arguments), {"X-API-Key": CALLER_KEY})
    error = error_of(result_of(response))
    assert error["type"] == "InvalidArguments", error
    assert says in error["message"]
    assert len(response.body) < 6_000  # the answer names the problem; it does not echo the input back
    assert upstream.requests_snapshot() == []


def test_a_body_nested_past_the_parsers_depth_is_a_parse_error(upstream: SampleUpstream) -> None:
    endpoint = build_endpoint(settings(upstream))
    response = post(endpoint, '{"jsonrpc":"2.0","id":1,"method":"ping","params":' + "[" * 200_000)
    assert response.status == 400 and response.json()["error"]["code"] == -32700


# --- 4. Origin and auth rules ------------------------------------------------------------------------

LOOPBACK_ORIGINS = [
    "http://localhost",
    "http://localhost:3000",
    "https://127.0.0.1:8443",
    "http://[::1]:6274",
    "HTTP://LOCALHOST:3000/",
    "http://localhost/",
]
FOREIGN_ORIGINS = [
    "null",
    "http://localhost.evil.example",
    "http://127.0.0.1.nip.io",
    "http://127.0.0.1.evil.example:3000",
    "http://localhost@evil.example",
    "http://evil.example",
    "https://evil.example#http://localhost",
    "file://localhost",
    "ftp://localhost",
    "chrome-extension://abcdef",
    "",
]


@pytest.mark.parametrize("origin", LOOPBACK_ORIGINS + FOREIGN_ORIGINS)
def test_by_default_only_loopback_origins_pass(upstream: SampleUpstream, origin: str) -> None:
    endpoint = build_endpoint(settings(upstream))
    response = post(endpoint, rpc("tools/list"), {"Origin": origin})
    if origin in LOOPBACK_ORIGINS:
        assert response.status == 200 and response.headers["Access-Control-Allow-Origin"] == origin
    else:
        assert response.status == 403, origin
        assert response.json()["error"]["code"] == -32600
        assert "Access-Control-Allow-Origin" not in response.headers
        preflight = endpoint.handle(HttpRequest.build("OPTIONS", "/mcp", headers={"Origin": origin}))
        assert preflight.status == 403


ALLOWED = "https://app.example.com"


@pytest.mark.parametrize(
    ("origin", "allowed"),
    [
        (ALLOWED, True),
        (ALLOWED + "/", True),
        ("HTTPS://APP.EXAMPLE.COM", True),
        ("https://app.example.com.evil.example", False),
        ("https://evil-app.example.com", False),
        ("https://evil.app.example.com", False),
        ("http://app.example.com", False),
        ("https://app.example.com:444", False),
        ("https://app.example.co", False),
        ("http://localhost:3000", False),  # a configured list replaces the loopback default
        ("null", False),
    ],
)
def test_allowed_origins_match_exactly(upstream: SampleUpstream, origin: str, allowed: bool) -> None:
    config = Settings.from_env({"PMCP_ALLOWED_ORIGINS": f"{ALLOWED}, https://other.example"}, upstream_url=upstream.url)
    response = post(build_endpoint(config), rpc("tools/list"), {"Origin": origin})
    assert response.status == (200 if allowed else 403)


@pytest.mark.parametrize("origin", ["null", "https://evil.example", "http://localhost.evil.example"])
def test_a_star_allows_any_origin(upstream: SampleUpstream, origin: str) -> None:
    endpoint = build_endpoint(Settings.from_env({"PMCP_ALLOWED_ORIGINS": "*"}, upstream_url=upstream.url))
    assert post(endpoint, rpc("tools/list"), {"Origin": origin}).status == 200


def test_no_origin_header_is_a_non_browser_client_and_passes(upstream: SampleUpstream) -> None:
    config = Settings.from_env({"PMCP_ALLOWED_ORIGINS": ALLOWED}, upstream_url=upstream.url)
    assert post(build_endpoint(config), rpc("tools/list")).status == 200


def server_key_endpoint(up: SampleUpstream, **overrides: Any) -> Endpoint:
    config = settings(up, auth_mode="server-key", api_key=SERVER_KEY, endpoint_tokens=(TOKEN, OLD_TOKEN), **overrides)
    return build_endpoint(config)


@pytest.mark.parametrize(
    ("headers", "query", "problem"),
    [
        ({}, "", None),
        ({"Authorization": f"Bearer {WRONG_TOKEN}"}, "", "invalid_token"),
        ({"Authorization": f"Bearer {TOKEN[:-1]}"}, "", "invalid_token"),
        ({"Authorization": f"Bearer {TOKEN}x"}, "", "invalid_token"),
        ({"Authorization": f"Bearer {TOKEN.lower()}"}, "", "invalid_token"),
        ({"Authorization": f"Bearer {TOKEN},{OLD_TOKEN}"}, "", "invalid_token"),
        ({"Authorization": f"Basic {TOKEN}"}, "", None),
        ({"Authorization": TOKEN}, "", None),
        ({"Authorization": "Bearer "}, "", None),
        ({"X-API-Key": TOKEN}, "", None),
        ({}, f"token={TOKEN}", None),
        ({}, f"access_token={TOKEN}", None),
        ({}, f"apikey={TOKEN}", None),
        ({}, f"authorization=Bearer%20{TOKEN}", None),
    ],
    ids=[
        "none",
        "wrong",
        "prefix",
        "suffix",
        "case",
        "list",
        "basic",
        "no-scheme",
        "empty",
        "x-api-key",
        "query-token",
        "query-access-token",
        "query-apikey",
        "query-authorization",
    ],
)
def test_server_key_mode_refuses_requests_without_a_valid_bearer_token(
    upstream: SampleUpstream, headers: dict[str, str], query: str, problem: str | None
) -> None:
    endpoint = server_key_endpoint(upstream)
    response = post(endpoint, tool_call("GLOBAL_QUOTE", {"symbol": "IBM"}), headers, query=query)
    assert response.status == 401
    challenge = response.headers["WWW-Authenticate"]
    assert challenge.startswith('Bearer realm="progressive-mcp"')
    assert ('error="invalid_token"' in challenge) is (problem == "invalid_token")
    assert response.json()["error"]["code"] == -32600
    assert_clean(response_text(response), TOKEN, OLD_TOKEN, WRONG_TOKEN, SERVER_KEY, where="401 answer")
    assert upstream.requests_snapshot() == []
    # Even discovery needs the token: the endpoint is closed to strangers.
    assert post(endpoint, rpc("tools/list"), headers, query=query).status == 401


@pytest.mark.parametrize("token", [TOKEN, OLD_TOKEN, f"  {TOKEN}  "])
def test_both_tokens_work_during_a_rotation(upstream: SampleUpstream, token: str) -> None:
    endpoint = server_key_endpoint(upstream)
    for scheme in ("Bearer", "bearer"):
        response = post(endpoint, tool_call("GLOBAL_QUOTE", {"symbol": "IBM"}), {"Authorization": f"{scheme} {token}"})
        assert result_of(response)["isError"] is False
        assert_clean(response_text(response), TOKEN, OLD_TOKEN, SERVER_KEY, where="answer")
    assert [r["apikey"] for r in upstream.requests_snapshot(unmasked=True)] == [SERVER_KEY]  # then the cache


def test_a_cors_401_exposes_the_challenge(upstream: SampleUpstream) -> None:
    response = post(server_key_endpoint(upstream), rpc("tools/list"), {"Origin": "http://localhost:3000"})
    assert response.status == 401 and "WWW-Authenticate" in response.headers["Access-Control-Expose-Headers"]


def test_passthrough_without_a_key_says_how_to_pass_one(upstream: SampleUpstream) -> None:
    endpoint = build_endpoint(settings(upstream))
    for method, params in (
        ("tools/list", None),
        ("tools/call", {"name": "TOOL_SEARCH", "arguments": {"query": "quote"}}),
    ):
        assert "result" in post(endpoint, rpc(method, params)).json()  # discovery needs no key
    error = error_of(result_of(post(endpoint, tool_call("GLOBAL_QUOTE", {"symbol": "IBM"}))))
    assert error["type"] == "MissingApiKey"
    for how in ("X-API-Key header", "Authorization: Bearer", "apikey query parameter"):
        assert how in error["message"]
    for blank in ({"X-API-Key": "  "}, {"Authorization": "Bearer  "}):
        assert error_of(result_of(post(endpoint, tool_call("GLOBAL_QUOTE", {"symbol": "IBM"}), blank)))["type"] == (
            "MissingApiKey"
        )
    assert upstream.requests_snapshot() == []


# --- 5. the constant-time token check ----------------------------------------------------------------


@dataclass
class DigestComparisons:
    calls: list[tuple[bytes, bytes]] = field(default_factory=list)

    def __call__(self, a: Any, b: Any) -> bool:
        self.calls.append((a, b))
        return REAL_COMPARE_DIGEST(a, b)


REAL_COMPARE_DIGEST = hmac.compare_digest
TOKENS = ("shortest-allowed-token-24", TOKEN, OLD_TOKEN, "a-much-longer-endpoint-token-" + "z" * 60)


@pytest.mark.parametrize(
    ("presented", "accepted"),
    [
        (TOKENS[0], True),  # matches the first: the others are still compared
        (TOKENS[-1], True),  # matches the last
        (TOKEN, True),
        ("X" + TOKEN[1:], False),  # the first byte differs
        (TOKEN[:-1] + "X", False),  # only the last byte differs
        (TOKEN[:5], False),  # a prefix (shorter)
        (TOKEN + TOKEN, False),  # longer
        ("", False),
    ],
)
def test_every_token_is_compared_with_compare_digest_over_equal_length_digests(
    upstream: SampleUpstream, monkeypatch: pytest.MonkeyPatch, presented: str, accepted: bool
) -> None:
    comparisons = DigestComparisons()
    monkeypatch.setattr(hmac, "compare_digest", comparisons)
    endpoint = build_endpoint(settings(upstream, auth_mode="server-key", api_key=SERVER_KEY, endpoint_tokens=TOKENS))
    response = post(endpoint, rpc("tools/list"), {"Authorization": f"Bearer {presented}"} if presented else {})
    if not presented:  # no token at all: refused before any comparison
        assert response.status == 401 and comparisons.calls == []
        return
    assert response.status == (200 if accepted else 401)
    # One comparison per configured token, whichever matched, each of two 32-byte digests: the time taken does
    # not depend on which token matched, on where the first differing byte is, or on the lengths.
    assert len(comparisons.calls) == len(TOKENS)
    presented_digest = hashlib.sha256(presented.encode()).digest()
    assert all(a == presented_digest for a, _ in comparisons.calls)
    assert sorted(b for _, b in comparisons.calls) == sorted(hashlib.sha256(t.encode()).digest() for t in TOKENS)
    assert all(isinstance(a, bytes) and isinstance(b, bytes) and len(a) == len(b) == 32 for a, b in comparisons.calls)


def test_token_matching_never_uses_plain_equality_on_the_token(monkeypatch: pytest.MonkeyPatch) -> None:
    """A str subclass that records every == or `in` against it: the presented token is only ever hashed."""

    class Watched(str):
        compared = 0

        def __eq__(self, other: object) -> bool:
            Watched.compared += 1
            return str.__eq__(self, other)

        __hash__ = str.__hash__

    comparisons = DigestComparisons()
    monkeypatch.setattr(hmac, "compare_digest", comparisons)
    assert endpoint_module._token_matches(Watched(TOKEN), [Watched(t) for t in TOKENS]) is True
    assert endpoint_module._token_matches(Watched(WRONG_TOKEN), [Watched(t) for t in TOKENS]) is False
    assert Watched.compared == 0 and len(comparisons.calls) == 2 * len(TOKENS)


# --- 6. concurrent callers never see each other's key or results ----------------------------------------

SYMBOLS = list(COMPANIES)


def key_tag(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()[:16]


class TaggingTransport:
    """The real HTTP transport, marking each JSON answer with a digest of the key that fetched it."""

    def __init__(self) -> None:
        self.inner = HttpxTransport()

    def send(self, request: UpstreamRequest) -> UpstreamResponse:
        response = self.inner.send(request)
        payload = json.loads(response.body)
        quote = payload.get("Global Quote")
        if isinstance(quote, dict):
            quote["99. fetched with"] = key_tag(dict(request.params)["apikey"])
        return UpstreamResponse(response.status, response.headers, json.dumps(payload).encode())


@dataclass(frozen=True)
class Caller:
    key: str
    symbol: str


def callers(count: int) -> list[Caller]:
    return [Caller(f"CoNcUrReNt-KeY-{i:02d}-{key_tag(str(i))}", SYMBOLS[i % len(SYMBOLS)]) for i in range(count)]


def run_concurrently(people: list[Caller], ask: Callable[[Caller, str], dict[str, Any]]) -> dict[str, list[Any]]:
    """Each caller, on its own thread (all released at once), asks for its own symbol twice and for IBM once."""
    barrier = threading.Barrier(len(people))
    answers: dict[str, list[Any]] = {}
    failures: list[BaseException] = []

    def work(person: Caller) -> None:
        try:
            barrier.wait(timeout=30)
            answers[person.key] = [ask(person, symbol) for symbol in (person.symbol, "IBM", person.symbol)]
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=work, args=(p,)) for p in people]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not failures, failures
    assert len(answers) == len(people)
    return answers


def check_isolation(people: list[Caller], answers: dict[str, list[Any]], up: SampleUpstream) -> None:
    keys = {p.key for p in people}
    for person in people:
        for symbol, answer in zip((person.symbol, "IBM", person.symbol), answers[person.key], strict=True):
            text = json.dumps(answer)
            assert answer["isError"] is False, text
            quote_data = answer["structuredContent"]["data"]["Global Quote"]
            assert quote_data["01. symbol"] == symbol
            assert quote_data["99. fetched with"] == key_tag(person.key)  # fetched with this caller's own key
            assert_clean(text, *(keys - {person.key}), where=f"{person.key}'s answer")
    # The upstream saw each key with exactly its own questions: one request per distinct question, because a
    # repeat is answered from that key's own cache partition, and IBM (asked by all) once per key, not once.
    seen: dict[str, list[str]] = {}
    for request in up.requests_snapshot(unmasked=True):
        seen.setdefault(request["apikey"], []).append(request["symbol"])
    assert set(seen) == keys
    for person in people:
        assert sorted(seen[person.key]) == sorted({person.symbol, "IBM"})


def isolation_endpoint(up: SampleUpstream, cache: ResponseCache | None = None) -> Endpoint:
    return build_endpoint(settings(up), transport=TaggingTransport(), cache=cache or MemoryCache())


def test_concurrent_callers_in_process_are_isolated(upstream: SampleUpstream) -> None:
    endpoint = isolation_endpoint(upstream)
    people = callers(24)

    def ask(person: Caller, symbol: str) -> dict[str, Any]:
        return result_of(post(endpoint, tool_call("GLOBAL_QUOTE", {"symbol": symbol}), {"X-API-Key": person.key}))

    check_isolation(people, run_concurrently(people, ask), upstream)


def test_concurrent_callers_over_real_http_are_isolated(
    upstream: SampleUpstream, http_server: tuple[LocalServer, Switchboard]
) -> None:
    server, board = http_server
    board.handler = make_handler(isolation_endpoint(upstream))
    people = callers(16)
    with httpx.Client(timeout=30, limits=httpx.Limits(max_connections=32)) as client:

        def ask(person: Caller, symbol: str) -> dict[str, Any]:
            body = tool_call("GLOBAL_QUOTE", {"symbol": symbol})
            how = (
                {"X-API-Key": person.key} if person.key[-1] in "02468ace" else {"Authorization": f"Bearer {person.key}"}
            )
            response = client.post(server.url, content=body, headers={"Content-Type": "application/json", **how})
            assert response.status_code == 200
            assert_clean(repr(response.headers), *(p.key for p in people), where="response headers")
            result: dict[str, Any] = response.json()["result"]
            return result

        check_isolation(people, run_concurrently(people, ask), upstream)


def test_concurrent_callers_sharing_a_dynamodb_cache_are_isolated(
    upstream: SampleUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    boto3 = pytest.importorskip("boto3")
    moto = pytest.importorskip("moto")
    from lambda_fn.aws import DynamoDBCache

    for name in ("AWS_PROFILE", "AWS_SECURITY_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    for name, value in (("AWS_ACCESS_KEY_ID", "testing"), ("AWS_SECRET_ACCESS_KEY", "testing")):
        monkeypatch.setenv(name, value)
    with moto.mock_aws():
        dynamodb = boto3.session.Session(region_name="us-east-1").client("dynamodb")
        dynamodb.create_table(
            TableName="cache",
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
            BillingMode="PAY_PER_REQUEST",
        )
        endpoint = isolation_endpoint(upstream, DynamoDBCache("cache", client=dynamodb))
        people = callers(8)

        def ask(person: Caller, symbol: str) -> dict[str, Any]:
            return result_of(post(endpoint, tool_call("GLOBAL_QUOTE", {"symbol": symbol}), {"X-API-Key": person.key}))

        check_isolation(people, run_concurrently(people, ask), upstream)
        items = dynamodb.scan(TableName="cache")["Items"]
        assert len(items) == sum(len({p.symbol, "IBM"}) for p in people)  # one item per key and question
        assert_clean(json.dumps(items, default=str), *(p.key for p in people), where="the cache table")
