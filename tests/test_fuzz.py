"""Fuzzing with hypothesis: random and mutated requests through the endpoint and the Lambda handler, and
random arguments against every tool's schema.

Tool calls reach an in-process fake upstream transport (FakeUpstream) that answers at once, so a run is fast.
Invariants: nothing raises; no 5xx (the fake upstream never fails, so a 5xx would be ours); every body is
one JSON-RPC response whose id echoes the request's (or is null); notifications get 202 and no body; an
unchanged valid request succeeds; bad tool arguments are `isError` results that never reach the upstream;
good ones reach it with `function` = the tool and the caller's key, which no argument can change.

Runs are deterministic (`derandomize=True`) and write no example database. Each test counts the cases it
ran and checks that it ran all of them; the counts are printed when the module ends (~19,000 cases, about a
minute on two cores). PMCP_FUZZ_SCALE=10 runs ten times as many (add --timeout=0: a test then takes minutes).

Run with: .venv/bin/python -m pytest tests/test_fuzz.py -q
"""

from __future__ import annotations

import base64
import copy
import functools
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema_rs
import mcp_types as types
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.configuration import set_hypothesis_home_dir
from mcp_types.jsonrpc import INTERNAL_ERROR

from lambda_fn import handler as handler_module
from lambda_fn.handler import make_handler
from lambda_fn.local import LocalContext
from progressive_mcp.calls.arguments import MAX_VALUE_CHARS
from progressive_mcp.calls.upstream import UpstreamClient, UpstreamRequest, UpstreamResponse
from progressive_mcp.catalog import Catalog, CatalogTool
from progressive_mcp.errors import UnknownTool
from progressive_mcp.settings import Settings
from progressive_mcp.sources.spec import Param
from progressive_mcp.surfaces.endpoint import Endpoint, HttpRequest
from progressive_mcp.surfaces.metatools import META_TOOL_NAMES
from progressive_mcp.surfaces.surface import CallContext, Surface

pytestmark = pytest.mark.slow  # hypothesis fuzzing (PMCP_FUZZ_SCALE scales it)

EVENTS = Path(__file__).resolve().parent / "fixtures" / "events"
# Hypothesis keeps a cache of constants it finds in the code; under .cache (git-ignored), not in the repo's root.
set_hypothesis_home_dir(str(Path(__file__).resolve().parent.parent / ".cache" / "hypothesis"))
SCALE = float(os.environ.get("PMCP_FUZZ_SCALE", "1"))
MODERN = "2026-07-28"
HANDSHAKE_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
VERSION_META = "io.modelcontextprotocol/protocolVersion"
CAPS_META = "io.modelcontextprotocol/clientCapabilities"
CALLER_KEY = "fuzz-caller-key"
SERVER_KEY = "fuzz-server-key"
TOKEN = "fuzz-endpoint-token-8d3f2a1c"
MAX_BODY_BYTES = 64 * 1024
# Statuses the endpoint may answer with when the upstream is healthy: anything else (a 5xx) is a bug of ours.
STATUSES = frozenset({200, 202, 204, 400, 401, 403, 404, 405, 413, 415})


def fuzz_settings(max_examples: int) -> settings:
    """Deterministic (CI reruns the same cases), no example database, no deadline (timing is not asserted).

    too_slow and data_too_large are suppressed because some strategies build deliberately large inputs
    (bodies over the size limit, deep nesting, long strings); that is the point, not a strategy mistake.
    """
    return settings(
        max_examples=max(1, int(max_examples * SCALE)),
        derandomize=True,
        database=None,
        deadline=None,
        print_blob=False,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )


# --- the case counter --------------------------------------------------------------------------------

CASES: dict[str, int] = {}


@pytest.fixture(scope="module", autouse=True)
def case_report(request: pytest.FixtureRequest) -> Iterator[None]:
    """Print how many cases each test ran, once the module is done (visible with -q too)."""
    yield
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    if reporter is None or capture is None or not CASES:
        return
    with capture.global_and_fixture_disabled():  # else the lines land in the captured output of the last test
        reporter.write_line("")
        for name, count in CASES.items():
            reporter.write_line(f"fuzz cases {name}: {count}")
        reporter.write_line(f"fuzz cases total: {sum(CASES.values())}")


class Tally:
    """Counts one test's cases; `done()` checks that all of them ran (hypothesis may stop early otherwise)."""

    def __init__(self, name: str, max_examples: int) -> None:
        self.name = name
        self.settings = fuzz_settings(max_examples)
        CASES[name] = 0

    def __call__(self) -> None:
        CASES[self.name] += 1

    def done(self) -> None:
        assert CASES[self.name] >= self.settings.max_examples, (self.name, CASES[self.name])


# --- a fake upstream ---------------------------------------------------------------------------------


class FakeUpstream:
    """An UpstreamTransport that answers at once with a small JSON body and keeps what it was sent."""

    ANSWER = UpstreamResponse(200, {"content-type": "application/json"}, b'{"Fuzz": {"value": "1.0"}}')

    def __init__(self) -> None:
        self.sent: list[UpstreamRequest] = []

    def send(self, request: UpstreamRequest) -> UpstreamResponse:
        for name, value in request.params:  # what a real HTTP client does with them: strict UTF-8
            name.encode("utf-8"), value.encode("utf-8")
        self.sent.append(request)
        return self.ANSWER


@pytest.fixture(scope="module")
def fake() -> FakeUpstream:
    return FakeUpstream()


def endpoint_settings(**overrides: Any) -> Settings:
    values: dict[str, Any] = {"upstream_retries": 0, "cache": False, "max_body_bytes": MAX_BODY_BYTES}
    return Settings.from_env({}, **{**values, **overrides})


@pytest.fixture(scope="module")
def endpoint(fake: FakeUpstream) -> Endpoint:
    """Passthrough auth, progressive mode, loopback origins only."""
    return Endpoint.from_settings(endpoint_settings(), transport=fake)


@pytest.fixture(scope="module")
def key_endpoint(fake: FakeUpstream) -> Endpoint:
    """Server-key auth: callers must present TOKEN."""
    settings = endpoint_settings(auth_mode="server-key", endpoint_tokens=(TOKEN,), api_key=SERVER_KEY)
    return Endpoint.from_settings(settings, transport=fake)


@pytest.fixture(scope="module")
def catalog(endpoint: Endpoint) -> Catalog:
    return endpoint.surface.catalog


@pytest.fixture(scope="module")
def surface(catalog: Catalog, fake: FakeUpstream) -> Surface:
    """Hybrid mode: the meta-tools and every catalog tool as a flat tool, on the fake upstream."""
    return Surface(catalog, mode="hybrid", upstream=UpstreamClient(catalog.api, transport=fake, retries=0))


# --- JSON values -------------------------------------------------------------------------------------

PROTOCOL_WORDS = (
    "jsonrpc", "id", "method", "params", "result", "error", "name", "arguments", "_meta", "tool_name",
    "query", "limit", "category", "detail", "schemas", "symbol", "protocolVersion", "capabilities",
    "clientInfo", "cursor", "tools/call", "tools/list", "initialize", "ping", "2.0", "TOOL_CALL", "TOOL_GET",
    "TOOL_LIST", "TOOL_SEARCH", "GLOBAL_QUOTE", VERSION_META, CAPS_META, "function", "apikey",
)  # fmt: skip
ODD_STRINGS = ("\ud800", "a\udfffb", "\x00", "\u202e", "\ufeff", "💥", "Ω" * 50, "'; DROP TABLE", "&apikey=x")

scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20)
    | st.sampled_from(PROTOCOL_WORDS + ODD_STRINGS)
)
json_keys = st.text(max_size=10) | st.sampled_from(PROTOCOL_WORDS + ODD_STRINGS)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(json_keys, inner, max_size=4),
    max_leaves=12,
)
weird_ids = (
    st.sampled_from([None, True, False, 0, -1, 1.0, 1.5, -0.0, 2**53 + 1, 2**63, -(2**63) - 1, 10**30, "", "\ud800"])
    | st.integers()
    | st.floats(allow_nan=False)
    | st.text(max_size=30)
    | st.lists(scalars, max_size=2)
    | st.dictionaries(json_keys, scalars, max_size=2)
)
# Raw JSON text put where a value goes (what json.dumps cannot write: out-of-range numbers, deep nesting).
RAW_VALUES = (
    "1e999", "-1e999", "1E400", "9" * 5000, "-0", "1.0", "1e2", '"\\ud800"', '"\\u0000"', '"\\udfff\\ud800"',
    "[" * 100 + "]" * 100, "[" * 990 + "]" * 990, "[" * 5000 + "]" * 5000, '{"a":' * 900 + "1" + "}" * 900,
    '{"a":' * 3000 + "1" + "}" * 3000, "[" * 200_000,
)  # fmt: skip
RAW_MARK = "\x00raw\x00"


def dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


def sent_id(body: bytes) -> Any:
    """The id a response may echo: the body's id when it is a string or a number (never a bool)."""
    try:
        message = json.loads(body.decode("utf-8-sig"), parse_constant=_no_constant)
    except (ValueError, RecursionError):
        return None
    if not isinstance(message, dict):
        return None
    value = message.get("id")
    return value if isinstance(value, int | str) and not isinstance(value, bool) else None


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


# --- valid requests, then mutations -----------------------------------------------------------------


@dataclass(frozen=True)
class Template:
    """A valid request: its JSON-RPC method and params, whether it is a notification, and its query string."""

    method: str
    params: dict[str, Any] | None = None
    notification: bool = False
    query: str = ""
    eras: tuple[str, ...] = ("handshake", "modern")


QUOTE = {"tool_name": "GLOBAL_QUOTE", "arguments": {"symbol": "IBM"}}
TEMPLATES = (
    Template(
        "initialize",
        {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "fuzz", "version": "1"}},
        eras=("handshake",),
    ),
    Template("ping", eras=("handshake",)),
    Template("server/discover", eras=("modern",)),
    Template("tools/list"),
    Template("prompts/list"),
    Template("resources/list"),
    Template("resources/templates/list"),
    Template("tools/call", {"name": "TOOL_LIST", "arguments": {}}),
    Template("tools/call", {"name": "TOOL_LIST", "arguments": {"category": "forex", "detail": "summary"}}),
    Template("tools/call", {"name": "TOOL_SEARCH", "arguments": {"query": "apple stock price", "schemas": True}}),
    Template("tools/call", {"name": "TOOL_GET", "arguments": {"tool_name": ["GLOBAL_QUOTE", "RSI"]}}),
    Template("tools/call", {"name": "TOOL_CALL", "arguments": QUOTE}),
    Template("tools/call", {"name": "TOOL_CALL", "arguments": {**QUOTE, "arguments": dumps(QUOTE["arguments"])}}),
    Template("tools/call", {"name": "GLOBAL_QUOTE", "arguments": {"symbol": "IBM"}}, query="mode=direct"),
    Template(
        "tools/call",
        {"name": "FX_DAILY", "arguments": {"from_symbol": "EUR", "to_symbol": "USD"}},
        query="mode=hybrid&categories=forex",
    ),
    Template("notifications/initialized", notification=True),
    Template("notifications/cancelled", {"requestId": 1}, notification=True),
)


@dataclass
class Case:
    """One HTTP request to send, and whether it is still the valid request it started as."""

    method: str
    path: str
    query: str
    headers: dict[str, str]
    body: bytes
    template: Template
    changed: bool


@st.composite
def valid_cases(draw: st.DrawFn, *, auth: str = "passthrough") -> Case:
    template = draw(st.sampled_from(TEMPLATES))
    era = draw(st.sampled_from(template.eras))
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": template.method}
    if not template.notification:
        message["id"] = draw(st.integers(-(2**53), 2**53) | st.text(max_size=20))
    params = copy.deepcopy(template.params)
    headers = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
    if auth == "passthrough":
        headers.update(draw(st.sampled_from([{"x-api-key": CALLER_KEY}, {"authorization": f"Bearer {CALLER_KEY}"}])))
    else:
        headers["authorization"] = f"Bearer {TOKEN}"
    if era == "modern":
        params = {**(params or {}), "_meta": {VERSION_META: MODERN, CAPS_META: {}}}
        headers.update({"mcp-protocol-version": MODERN, "mcp-method": template.method})
        if template.method == "tools/call":
            assert params is not None
            headers["mcp-name"] = params["name"]
    elif draw(st.booleans()):
        headers["mcp-protocol-version"] = draw(st.sampled_from(HANDSHAKE_VERSIONS))
    if params is not None:
        message["params"] = params
    body = dumps(message).encode()
    return Case("POST", "/mcp", template.query, headers, body, template, changed=False)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every place inside a JSON value (not the value itself), parents first."""
    children = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, child in children:
        yield (*prefix, key)
        yield from _paths(child, (*prefix, key))


def _parent(root: Any, path: tuple[Any, ...]) -> Any:
    for key in path[:-1]:
        root = root[key]
    return root


def _retype(value: Any) -> list[Any]:
    return [dumps(value), [value], {"value": value}, None, 0, True, str(value)[:50], 1.5]


@st.composite
def mutated_messages(draw: st.DrawFn, message: Any) -> str:
    """JSON text of `message` after 1-4 structural mutations (RAW_MARK strings become a RAW_VALUES text)."""
    message = copy.deepcopy(message)
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["field", "delete", "replace", "retype", "add", "field", "raw", "oversize", "batch"]))
        paths = list(_paths(message))
        if op in ("delete", "replace", "retype", "raw", "oversize") and paths:
            path = draw(st.sampled_from(paths))
            parent = _parent(message, path)
            if op == "delete":
                del parent[path[-1]]
            elif op == "replace":
                parent[path[-1]] = draw(json_values)
            elif op == "retype":
                parent[path[-1]] = draw(st.sampled_from(_retype(parent[path[-1]])))
            elif op == "raw":
                parent[path[-1]] = RAW_MARK
            else:
                parent[path[-1]] = "x" * draw(st.sampled_from([1000, MAX_BODY_BYTES - 200, MAX_BODY_BYTES + 1]))
        elif op == "add":
            dicts = [message] if isinstance(message, dict) else []
            dicts += [_parent(message, p)[p[-1]] for p in paths if isinstance(_parent(message, p)[p[-1]], dict)]
            if dicts:
                draw(st.sampled_from(dicts))[draw(json_keys)] = draw(json_values)
        elif op == "field" and isinstance(message, dict):
            name = draw(st.sampled_from(["method", "id", "jsonrpc", "params", "result", "error"]))
            choices = {
                "jsonrpc": st.sampled_from(["1.0", "2", 2.0, 2, None, "2.0 ", ""]) | json_values,
                "id": weird_ids,
                "method": st.sampled_from(["ping\udfff", "tools/Call", "tools/list ", "rpc.discover", "", "a" * 5000])
                | st.text(max_size=30)
                | json_values,
                "params": json_values,
                "result": json_values,
                "error": json_values,
            }
            message[name] = draw(choices[name])
        elif op == "batch":
            message = [message] * draw(st.integers(0, 3))
    text = dumps(message)
    return text.replace(dumps(RAW_MARK), draw(st.sampled_from(RAW_VALUES)))


INVALID_BYTES = (b"\xff", b"\xc3\x28", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\x00", b"\\ud800", b"NaN", b"-Infinity")


@st.composite
def mutated_bytes(draw: st.DrawFn, body: bytes) -> bytes:
    """`body` truncated, with bytes inserted or replaced, or with a BOM or whitespace around it."""
    op = draw(st.sampled_from(["truncate", "insert", "replace", "bom", "pad"]))
    at = draw(st.integers(0, len(body)))
    if op == "truncate":
        return body[:at]
    if op == "insert":
        return body[:at] + draw(st.sampled_from(INVALID_BYTES) | st.binary(min_size=1, max_size=4)) + body[at:]
    if op == "replace":
        return body[:at] + draw(st.binary(min_size=1, max_size=2)) + body[at + 1 :]
    if op == "bom":
        return b"\xef\xbb\xbf" + body
    return draw(st.sampled_from([b" ", b"\n", b"\t\r\n"])) + body + draw(st.sampled_from([b"", b" ", b"\n"]))


def _b64(text: str) -> str:
    return "=?base64?" + base64.b64encode(text.encode("utf-8", "surrogatepass")).decode() + "?="


HEADER_VALUES: dict[str, st.SearchStrategy[str]] = {
    "content-type": st.sampled_from(
        ["application/json; charset=utf-8", "APPLICATION/JSON", "text/plain", "", "application/json-rpc", ";"]
    ),
    "accept": st.sampled_from(["*/*", "text/event-stream", "application/json", "", "text/html"]),
    "mcp-protocol-version": st.sampled_from([*HANDSHAKE_VERSIONS, MODERN, "2099-01-01", "", "2025-06-18 ", "latest"]),
    "mcp-method": st.sampled_from(["tools/call", "tools/list", "server/discover", "initialize", "", "TOOLS/CALL"]),
    "mcp-name": st.sampled_from(["TOOL_CALL", "GLOBAL_QUOTE", _b64("TOOL_CALL"), _b64("\ud800"), "=?base64?!!?=", ""]),
    "mcp-session-id": st.sampled_from(["abc", "", "0" * 300]),
    "origin": st.sampled_from(
        ["http://localhost:3000", "http://127.0.0.1", "http://[::1]:8080", "https://evil.example", "null", ""]
    ),
    "authorization": st.sampled_from(
        [f"Bearer {TOKEN}", f"bearer  {CALLER_KEY} ", "Bearer", "Bearer ", "Basic Zm9vOmJhcg==", "", "Bearer a b"]
    ),
    "x-api-key": st.sampled_from([CALLER_KEY, "", " ", "k" * 5000]),
    "last-event-id": st.sampled_from(["1", ""]),
}


@st.composite
def mutated_headers(draw: st.DrawFn, headers: dict[str, str]) -> dict[str, str]:
    headers = dict(headers)
    for _ in range(draw(st.integers(1, 3))):
        op = draw(st.sampled_from(["delete", "set", "random", "add"]))
        if op == "delete" and headers:
            del headers[draw(st.sampled_from(sorted(headers)))]
        elif op == "set":
            name = draw(st.sampled_from(sorted(HEADER_VALUES)))
            headers[name] = draw(HEADER_VALUES[name])
        elif op == "random":
            headers[draw(st.sampled_from(sorted(HEADER_VALUES)))] = draw(st.text(max_size=40))
        else:
            headers[draw(st.text(min_size=1, max_size=20))] = draw(st.text(max_size=20))
    return headers


http_methods = st.sampled_from(["GET", "DELETE", "PUT", "PATCH", "OPTIONS", "HEAD", "post", "", "TRACE"]) | st.text(
    max_size=10
)
paths = st.sampled_from(
    ["/mcp/", "/", "", "/MCP", "/mcp/x", "//mcp", "/prod/mcp", "/mcp?x=1", "/mcp/../mcp"]
) | st.text(max_size=20)
queries = st.sampled_from(
    ["mode=direct", "mode=hybrid", "mode=bogus", "mode=", "categories=forex", "categories=nope", "categories=",
     "mode=direct&categories=stocks,forex", f"apikey={CALLER_KEY}", "mode=DIRECT&mode=progressive", "%ff=%fe"]
) | st.text(max_size=30)  # fmt: skip


@st.composite
def fuzzed_cases(draw: st.DrawFn, *, auth: str = "passthrough") -> Case:
    """A valid request, changed in 0-3 ways: its JSON, its bytes, its headers, its HTTP method, path or query."""
    case = draw(valid_cases(auth=auth))
    # Weighted towards what reaches the JSON-RPC layer: a changed path or HTTP method stops at the HTTP layer.
    weighted = ["message"] * 5 + ["headers"] * 4 + ["bytes"] * 2 + ["query"] * 2 + ["method", "path"]
    kinds = draw(st.sets(st.sampled_from(weighted), max_size=3))
    if "message" in kinds:
        case.body = draw(mutated_messages(json.loads(case.body))).encode()
    if "bytes" in kinds:
        case.body = draw(mutated_bytes(case.body))
    if "headers" in kinds:
        case.headers = draw(mutated_headers(case.headers))
    if "method" in kinds:
        case.method = draw(http_methods)
    if "path" in kinds:
        case.path = draw(paths)
    if "query" in kinds:
        case.query = draw(queries)
    case.changed = bool(kinds)
    return case


# --- what every response must be ---------------------------------------------------------------------


def check_response(status: int, headers: dict[str, str], body: bytes, request_body: bytes) -> dict[str, Any] | None:
    """The invariants of every answer; returns the JSON-RPC message, or None for an empty body."""
    assert status in STATUSES, (status, body[:300])
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in headers.items()), headers
    assert not any(name.lower() == "mcp-session-id" for name in headers), headers
    if status in (202, 204):
        assert body == b"", body[:300]
        return None
    assert headers.get("Content-Type") == "application/json", headers
    message = json.loads(body.decode("utf-8"), parse_constant=_no_constant)  # strict: UTF-8, no NaN or Infinity
    assert isinstance(message, dict)
    assert message.get("jsonrpc") == "2.0"
    assert set(message) in ({"jsonrpc", "id", "result"}, {"jsonrpc", "id", "error"}), message.keys()
    echoed = sent_id(request_body)
    assert message["id"] is None or (message["id"] == echoed and type(message["id"]) is type(echoed)), (
        message["id"],
        echoed,
    )
    if "result" in message:
        assert status == 200
        assert message["id"] is not None and message["id"] == echoed
        result = message["result"]
        assert isinstance(result, dict)
        if "isError" in result:
            check_tool_result(result)
        return message
    error = message["error"]
    assert isinstance(error, dict) and set(error) <= {"code", "message", "data"}, error
    assert isinstance(error["code"], int) and not isinstance(error["code"], bool)
    assert isinstance(error["message"], str) and error["message"]
    assert error["code"] != INTERNAL_ERROR, error
    if status in (401, 403, 405, 413, 415):  # refused at the HTTP layer, before the body is read
        assert message["id"] is None
    if status == 405:
        assert headers.get("Allow") == "POST"
    if status == 401:
        assert "WWW-Authenticate" in headers
    return message


def check_tool_result(result: dict[str, Any]) -> None:
    """A tools/call result: valid for the MCP types, text and structured content agreeing, no internal error."""
    types.CallToolResult.model_validate(result)
    assert isinstance(result["isError"], bool)
    structured = result["structuredContent"]
    assert json.loads(result["content"][0]["text"]) == structured
    if result["isError"]:
        error = structured["error"]
        assert isinstance(error["message"], str) and error["message"]
        assert not error["message"].startswith("Internal error"), error


def check_success(case: Case, status: int, message: dict[str, Any] | None) -> None:
    """An unchanged valid request: a result (a tool result without isError), or 202 and nothing for a notification."""
    if case.template.notification:
        assert status == 202 and message is None, (status, message)
        return
    assert status == 200
    assert message is not None and "result" in message, message
    if case.template.method == "tools/call":
        assert message["result"]["isError"] is False, message


# --- the endpoint, in process --------------------------------------------------------------------------


def send(endpoint: Endpoint, case: Case) -> tuple[int, dict[str, Any] | None]:
    """The status and the JSON-RPC message (None for an empty body) of a checked answer."""
    request = HttpRequest.build(case.method, case.path, query=case.query, headers=case.headers, body=case.body)
    response = endpoint.handle(request)
    return response.status, check_response(response.status, response.headers, response.body, case.body)


def test_random_bodies(endpoint: Endpoint) -> None:
    """Any JSON value, any bytes: an error or a result, never a crash or a 5xx."""
    bodies = (
        json_values.map(lambda v: dumps(v).encode())
        | st.binary(max_size=200)
        | st.dictionaries(st.sampled_from(["jsonrpc", "id", "method", "params"]), json_values).map(
            lambda v: dumps({"jsonrpc": "2.0", **v}).encode()
        )
    )

    tally = Tally("test_random_bodies", 2000)

    @tally.settings
    @given(body=bodies, headers=st.sampled_from([{}, {"mcp-protocol-version": MODERN}, {"x-api-key": CALLER_KEY}]))
    def check(body: bytes, headers: dict[str, str]) -> None:
        tally()
        response = endpoint.handle(HttpRequest.build("POST", "/mcp", headers=headers, body=body))
        check_response(response.status, response.headers, response.body, body)

    check()
    tally.done()


def test_mutated_requests(endpoint: Endpoint) -> None:
    """Valid requests of both eras, changed in their JSON, bytes, headers, method, path and query."""

    tally = Tally("test_mutated_requests", 4500)

    @tally.settings
    @given(case=fuzzed_cases())
    def check(case: Case) -> None:
        tally()
        status, message = send(endpoint, case)
        if not case.changed:
            check_success(case, status, message)

    check()
    tally.done()


def test_valid_requests_succeed(endpoint: Endpoint) -> None:
    """The unchanged templates, with any id and either way of passing the key: always a result."""

    tally = Tally("test_valid_requests_succeed", 300)

    @tally.settings
    @given(case=valid_cases())
    def check(case: Case) -> None:
        tally()
        check_success(case, *send(endpoint, case))

    check()
    tally.done()


def test_mutated_requests_with_server_key_auth(key_endpoint: Endpoint) -> None:
    """The same in server-key mode: only a request bearing the endpoint token gets a result."""
    tally = Tally("test_mutated_requests_with_server_key_auth", 1200)

    @tally.settings
    @given(case=fuzzed_cases(auth="server-key"))
    def check(case: Case) -> None:
        tally()
        status, message = send(key_endpoint, case)
        if not case.changed:
            check_success(case, status, message)
        if message is not None and "result" in message:
            scheme, _, token = case.headers.get("authorization", "").strip().partition(" ")
            assert scheme.lower() == "bearer" and token.strip() == TOKEN

    check()
    tally.done()


# --- the Lambda handler ------------------------------------------------------------------------------

EVENT_FILES = ("apigw_http_v2.json", "apigw_http_v2_stage.json", "function_url.json", "function_url_get.json")
TEMPLATE_EVENTS = {name: json.loads((EVENTS / name).read_text()) for name in EVENT_FILES}
EVENT_FIELDS = (
    ("rawPath",), ("rawQueryString",), ("headers",), ("body",), ("isBase64Encoded",), ("requestContext",),
    ("requestContext", "http"), ("requestContext", "http", "method"), ("requestContext", "http", "path"),
    ("requestContext", "stage"), ("requestContext", "requestId"), ("queryStringParameters",), ("cookies",),
)  # fmt: skip


@st.composite
def lambda_events(draw: st.DrawFn, *, auth: str) -> tuple[dict[str, Any], Case]:
    """A payload-2.0 event (API Gateway or Function URL) carrying a fuzzed request, with fields changed or missing."""
    case = draw(fuzzed_cases(auth=auth) | valid_cases(auth=auth))
    event = copy.deepcopy(TEMPLATE_EVENTS[draw(st.sampled_from(EVENT_FILES))])
    stage = event["requestContext"].get("stage", "$default")
    event["rawPath"] = case.path if stage == "$default" else f"/{stage}{case.path}"
    event["requestContext"]["http"]["path"] = event["rawPath"]
    event["requestContext"]["http"]["method"] = case.method
    event["rawQueryString"] = case.query
    event["headers"] = {k.lower(): v for k, v in case.headers.items()}
    try:
        text = case.body.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is None or draw(st.booleans()):  # AWS sends bodies that are not UTF-8 text in base64
        event["body"], event["isBase64Encoded"] = base64.b64encode(case.body).decode(), True
    else:
        event["body"], event["isBase64Encoded"] = text, False
    changed = False
    for _ in range(draw(st.integers(0, 3))):
        changed = True
        op = draw(st.sampled_from(["drop", "stage", "path", "body", "base64"]))
        if op == "drop":
            where = draw(st.sampled_from(EVENT_FIELDS))
            parent = event
            for key in where[:-1]:
                parent = parent.get(key) or {}
            parent.pop(where[-1], None)
        elif op == "stage" and isinstance(event.get("requestContext"), dict):
            event["requestContext"]["stage"] = draw(st.sampled_from(["$default", "prod", "", "mcp", "/"]) | st.text())
        elif op == "path":
            event["rawPath"] = draw(st.sampled_from(["/prod/mcp", "/prod/prod/mcp", "/mcp/", "/", ""]) | st.text())
        elif op == "body":
            event["body"] = draw(st.text(max_size=50) | st.sampled_from(["", "=", "e30=", "bm90IGpzb24", "\ud800"]))
        else:
            event["isBase64Encoded"] = not event.get("isBase64Encoded", False)
    if changed:
        case.changed = True
    return event, case


class StrictLog:
    """A log stream that, like Lambda's stdout, takes UTF-8 text only; counts the request log lines written."""

    def __init__(self) -> None:
        self.request_lines = 0

    def write(self, text: str) -> int:
        text.encode("utf-8")  # raises inside logging, which then drops the line (pytest's own capture would not)
        self.request_lines += text.count('"message":"request"')
        return len(text)

    def flush(self) -> None:
        pass


@pytest.mark.parametrize("auth", ["passthrough", "server-key"])
def test_lambda_events(auth: str, endpoint: Endpoint, key_endpoint: Endpoint, monkeypatch: pytest.MonkeyPatch) -> None:
    """Events from both front doors: a proxy result with a valid JSON-RPC body (or none), never a crash or 5xx,
    and one request log line per invocation."""
    handler = make_handler(endpoint if auth == "passthrough" else key_endpoint)
    log = StrictLog()
    monkeypatch.setattr(handler_module.logger.registered_handler, "stream", log)

    tally = Tally(f"test_lambda_events[{auth}]", 1500)

    @tally.settings
    @given(drawn=lambda_events(auth=auth))
    def check(drawn: tuple[dict[str, Any], Case]) -> None:
        tally()
        event, case = drawn
        logged = log.request_lines
        result = handler(copy.deepcopy(event), LocalContext(aws_request_id="fuzz"))  # 30 s left, as each invocation
        assert log.request_lines == logged + 1
        assert set(result) == {"statusCode", "headers", "body", "isBase64Encoded"}
        assert result["isBase64Encoded"] is False and isinstance(result["body"], str)
        body = result["body"].encode("utf-8")
        request_body = _event_body(event)
        message = check_response(result["statusCode"], result["headers"], body, request_body)
        if not case.changed:
            check_success(case, result["statusCode"], message)

    check()
    tally.done()


def _event_body(event: dict[str, Any]) -> bytes:
    """The body bytes an event carries (what a response id may echo)."""
    body = event.get("body") or ""
    if event.get("isBase64Encoded"):
        try:
            return base64.b64decode(body, validate=True)
        except ValueError:
            return b""
    return body.encode("utf-8", "surrogatepass")


# --- tool arguments against every tool's schema ------------------------------------------------------

ASCII = st.characters(codec="ascii")


@functools.cache  # strategies are built once: a filter's lambda is parsed (ast) each time one is made
def valid_value(param: Param) -> st.SearchStrategy[Any]:
    """Values the schema accepts, and the string forms of them the arguments layer repairs ("14", "TRUE")."""
    if param.enum is not None:
        values = st.sampled_from(param.enum)
        folded = [v for v in param.enum if isinstance(v, str)]
        unique = [v for v in folded if sum(w.lower() == v.lower() for w in folded) == 1]
        if unique:
            values |= st.sampled_from(unique).map(str.upper)
        if param.type == "integer":
            values |= st.sampled_from(param.enum).map(lambda v: f" {v} ")
        return values
    if param.type == "integer":
        numbers = st.integers(min_value=param.minimum, max_value=param.maximum)  # type: ignore[arg-type]
        return numbers | numbers.map(str)
    if param.type == "number":
        bounds = {"min_value": param.minimum, "max_value": param.maximum}
        return st.floats(allow_nan=False, allow_infinity=False, **bounds) | st.integers(**bounds)  # type: ignore[arg-type]
    if param.type == "boolean":
        return st.booleans() | st.sampled_from(["true", "FALSE", "True"])
    if param.pattern is not None:
        return st.from_regex(param.pattern, fullmatch=True, alphabet=ASCII)
    return st.text(max_size=30) | st.sampled_from(
        ["x" * MAX_VALUE_CHARS, "IBM&apikey=stolen", "IBM&function=OTHER", "a=b#c"]
    )


@functools.cache
def invalid_values(param: Param) -> st.SearchStrategy[Any]:
    """Values the schema rejects and the arguments layer cannot repair."""
    containers = st.lists(scalars, max_size=3) | st.dictionaries(json_keys, scalars, max_size=2)
    if param.type in ("integer", "number"):
        wrong = containers | st.none() | st.booleans() | st.text(max_size=10).filter(lambda s: not _numeric(s))
        if param.type == "integer":
            wrong |= st.floats(allow_nan=False, allow_infinity=False).filter(lambda f: not f.is_integer())
        if param.enum is not None:
            wrong |= st.integers().filter(lambda i: i not in param.enum)  # type: ignore[operator]
        if param.minimum is not None:
            wrong |= st.integers(max_value=int(param.minimum) - 1)
        if param.maximum is not None:
            wrong |= st.integers(min_value=int(param.maximum) + 1)
        return wrong
    if param.type == "boolean":
        return (
            containers
            | st.none()
            | st.integers()
            | st.text(max_size=10).filter(lambda s: s.strip().lower() not in ("true", "false"))
        )
    wrong = containers | st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False)
    wrong |= st.sampled_from(["z" * (MAX_VALUE_CHARS + 1), "IBM\ud800", "\udfff"])  # too long; not text
    if param.enum is not None:
        allowed = {str(v).lower() for v in param.enum}
        wrong |= st.text(max_size=20).filter(lambda s: s.strip().lower() not in allowed) | st.just("y" * 20_000)
    if param.pattern is not None:  # no pattern in the spec allows a space or a '!'
        wrong |= st.text(max_size=20).map(lambda s: s + " !") | st.just("")
    return wrong


def _has_lone_surrogate(value: Any) -> bool:
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _numeric(text: str) -> bool:
    try:
        float(text.strip())
    except ValueError:
        return False
    return True


def valid_arguments(tool: CatalogTool) -> st.SearchStrategy[dict[str, Any]]:
    return _valid_arguments(tool.params, tool.require_any)


@functools.cache
def _valid_arguments(
    params: tuple[Param, ...], require_any: tuple[tuple[str, ...], ...]
) -> st.SearchStrategy[dict[str, Any]]:
    required = {p.name: valid_value(p) for p in params if p.required}
    optional = {p.name: valid_value(p) for p in params if not p.required}
    arguments = st.fixed_dictionaries(required, optional=optional)
    return arguments.filter(lambda a: all(any(name in a for name in group) for group in require_any))


@st.composite
def invalid_arguments(draw: st.DrawFn, tool: CatalogTool) -> tuple[Any, str | None]:
    """Arguments that must be refused, and a word the refusal must mention (None: any message will do)."""
    arguments = draw(valid_arguments(tool))
    ops = ["unknown", "not_object", "reserved"]
    if tool.params:
        ops += ["wrong_value"]
    if any(p.required for p in tool.params):
        ops += ["missing"]
    if tool.require_any:
        ops += ["none_of_group"]
    op = draw(st.sampled_from(ops))
    if op == "wrong_value":
        param = draw(st.sampled_from(tool.params))
        arguments[param.name] = draw(invalid_values(param))
        return arguments, param.name
    if op == "missing":
        name = draw(st.sampled_from([p.name for p in tool.params if p.required]))
        arguments.pop(name, None)
        return arguments, name
    if op == "none_of_group":
        for name in draw(st.sampled_from(tool.require_any)):
            arguments.pop(name, None)
        return arguments, "at least one of"
    if op == "reserved":  # the dispatch and key parameters are never arguments
        arguments[draw(st.sampled_from(["function", "apikey"]))] = draw(st.sampled_from(["OTHER", "stolen", 1]))
        return arguments, "allowed arguments"
    if op == "unknown":
        name = draw(json_keys)
        if tool.param(name) is None:
            arguments[name] = draw(json_values)
            return arguments, "allowed arguments"
        arguments[name] = draw(invalid_values(tool.param(name)))  # a real name after all: give it a wrong value
        return arguments, name
    return draw(NOT_AN_OBJECT), None


# Arguments that are no JSON object, as such or as a JSON string ("" and None mean "no arguments": not here).
NOT_AN_OBJECT = st.sampled_from(["[]", "[1]", "3", "null", '"IBM"', "{", "symbol=IBM", " {} x"]) | st.one_of(
    st.lists(scalars, min_size=1, max_size=3), st.integers(), st.booleans(), st.floats(allow_nan=False)
)


@pytest.fixture(scope="module")
def all_tools(catalog: Catalog) -> tuple[CatalogTool, ...]:
    return catalog.in_categories(None)


def call(surface: Surface, via: str, tool: CatalogTool, arguments: Any) -> dict[str, Any]:
    """Call a catalog tool through TOOL_CALL (arguments as an object or a JSON string) or as a flat tool."""
    ctx = CallContext(api_key=CALLER_KEY, missing_key_help="send a key")
    if via == "flat" and isinstance(arguments, dict):  # the protocol layer only lets objects through to a flat tool
        wire = surface.call_tool_wire(tool.name, arguments, ctx)
    else:
        raw = dumps(arguments) if via == "TOOL_CALL (string)" and isinstance(arguments, dict) else arguments
        wire = surface.call_tool_wire("TOOL_CALL", {"tool_name": tool.name, "arguments": raw}, ctx)
    json.dumps(wire, allow_nan=False).encode("utf-8")  # the result is strict JSON and UTF-8
    check_tool_result(wire)
    return wire


VIA = st.sampled_from(["TOOL_CALL", "TOOL_CALL (string)", "flat"])


def test_valid_arguments_reach_the_upstream(
    surface: Surface, fake: FakeUpstream, all_tools: tuple[CatalogTool, ...]
) -> None:
    """Arguments the schema accepts: one upstream request, `function` = the tool, the caller's key, nothing else."""
    seen: set[str] = set()

    tally = Tally("test_valid_arguments_reach_the_upstream", 3000)

    @tally.settings
    @given(data=st.data(), tool=st.sampled_from(all_tools), via=VIA)
    def check(data: st.DataObject, tool: CatalogTool, via: str) -> None:
        arguments = data.draw(valid_arguments(tool), label="arguments")
        tally()
        fake.sent.clear()
        result = call(surface, via, tool, arguments)
        assert result["isError"] is False, result["structuredContent"]
        [request] = fake.sent
        assert request.url == surface.upstream.base_url
        assert request.params[0] == ("function", tool.name)
        assert [v for k, v in request.params if k == "function"] == [tool.name]
        assert [v for k, v in request.params if k == "apikey"] == [CALLER_KEY]
        assert request.params[-1] == ("apikey", CALLER_KEY)
        assert {k for k, _ in request.params[1:-1]} >= set(arguments)
        seen.add(tool.name)

    check()
    tally.done()
    if tally.settings.max_examples >= 10 * len(all_tools):
        assert seen == {t.name for t in all_tools}  # every tool was called at least once


def test_invalid_arguments_are_tool_errors(
    surface: Surface, fake: FakeUpstream, all_tools: tuple[CatalogTool, ...]
) -> None:
    """Arguments the schema rejects: an isError result naming the problem, and no upstream request."""

    tally = Tally("test_invalid_arguments_are_tool_errors", 3000)

    @tally.settings
    @given(data=st.data(), tool=st.sampled_from(all_tools), via=VIA)
    def check(data: st.DataObject, tool: CatalogTool, via: str) -> None:
        arguments, mentioned = data.draw(invalid_arguments(tool), label="arguments")
        tally()
        fake.sent.clear()
        result = call(surface, via, tool, arguments)
        assert result["isError"] is True, (arguments, result["structuredContent"])
        error = result["structuredContent"]["error"]
        assert error["type"] == "InvalidArguments", error
        assert error["tool_name"] == tool.name
        # The error quotes the part of the schema that failed (an excerpt, never more than the tool's own schema).
        whole = tool.definition()["inputSchema"]
        assert set(error["inputSchema"].get("properties", {})) <= set(whole.get("properties", {}))
        if mentioned is not None and _has_lone_surrogate(arguments):  # an object: refused before the schema check
            mentioned = "lone surrogate"
        if mentioned is not None:
            assert mentioned in error["message"], (mentioned, error["message"][:500])
        assert fake.sent == []

    check()
    tally.done()


# Likely values first, then any JSON value (a list where a string goes, an object for a number, ...).
META_ARGUMENTS = {
    "TOOL_LIST": {
        "category": st.sampled_from(["forex", "stocks", "FOREX", "nope", ["forex"]]) | json_values,
        "detail": st.sampled_from(["names", "summary", "full"]) | json_values,
    },
    "TOOL_SEARCH": {
        "query": st.sampled_from(["apple stock price", "", " ", "rsi", "x" * 100_000, "ab " * 30_000])
        | st.text(max_size=40)
        | json_values,
        "limit": st.integers(-5, 50) | st.sampled_from([1e308, 2.5, "3", " 7 ", 10**30]) | json_values,
        "category": st.sampled_from(["forex", "nope", "", {"name": "forex"}]) | json_values,
        "schemas": st.booleans() | st.sampled_from(["true", 1]) | json_values,
    },
    "TOOL_GET": {
        "tool_name": st.sampled_from(["GLOBAL_QUOTE", "global_quote", "NOPE", "", "TOOL_GET"])
        | st.lists(st.sampled_from(["RSI", "GLOBAL_QUOTE", "NOPE"]) | st.text(max_size=10), max_size=12)
        | st.text(max_size=20)
        | json_values,
    },
    "TOOL_CALL": {
        "tool_name": st.sampled_from(["GLOBAL_QUOTE", "global_quote", " RSI ", "NOPE", "TOOL_CALL", "TOOL_LIST", ""])
        | st.text(max_size=20)
        | json_values,
        "arguments": st.sampled_from([{"symbol": "IBM"}, '{"symbol": "IBM"}', None, "", {}]) | json_values,
    },
}


def test_meta_tool_arguments(surface: Surface, fake: FakeUpstream) -> None:
    """Any arguments to the meta-tools: a result matching the output schema, or a helpful isError result."""
    output_schemas = {
        d["name"]: jsonschema_rs.Draft202012Validator(d["outputSchema"]) for d in surface.meta.definitions
    }

    tally = Tally("test_meta_tool_arguments", 2000)

    extra = st.dictionaries(json_keys, json_values, max_size=2)
    known = {name: st.fixed_dictionaries({}, optional=META_ARGUMENTS[name]) for name in META_TOOL_NAMES}
    with_extra = {name: known[name] | st.builds(lambda a, b: {**a, **b}, known[name], extra) for name in known}

    @tally.settings
    @given(data=st.data(), name=st.sampled_from(META_TOOL_NAMES))
    def check(data: st.DataObject, name: str) -> None:
        arguments = data.draw(with_extra[name], label="arguments")
        tally()
        ctx = CallContext(api_key=CALLER_KEY, missing_key_help="send a key")
        result = surface.call_tool_wire(name, arguments, ctx)
        json.dumps(result, allow_nan=False).encode("utf-8")
        check_tool_result(result)
        if not result["isError"]:
            assert output_schemas[name].is_valid(result["structuredContent"])

    check()
    tally.done()


def test_unknown_tool_names(surface: Surface) -> None:
    """A name the surface does not offer raises UnknownTool (the transports' invalid-params error), nothing else."""
    offered = {t.name for t in surface.list_tools()}

    tally = Tally("test_unknown_tool_names", 300)

    @tally.settings
    @given(name=st.text(max_size=30) | st.sampled_from(["global_quote", "TOOL_call", "", "GLOBAL_QUOTE "]))
    def check(name: str) -> None:
        tally()
        ctx = CallContext(api_key=CALLER_KEY)
        if name in offered:
            return
        with pytest.raises(UnknownTool) as raised:
            surface.call_tool_wire(name, {}, ctx)
        assert all(s in offered for s in raised.value.suggestions)

    check()
    tally.done()


# --- per-identity policies: no request learns a hidden tool ------------------------------------------------------

POLICY_TOKEN = "fuzz-policy-token-forex-only-5e1b"


@pytest.fixture(scope="module")
def policy_endpoint(fake: FakeUpstream) -> Endpoint:
    """Server-key auth; TOKEN may see every tool, POLICY_TOKEN only the forex ones that are not premium."""
    from progressive_mcp.policies import token_digest

    policies = {
        "identities": [
            {"token": f"sha256:{token_digest(POLICY_TOKEN)[:16]}", "categories": ["forex"], "premium": False},
            {"token": f"sha256:{token_digest(TOKEN)[:20]}"},
        ]
    }
    settings = Settings.from_env(
        {"PMCP_POLICIES": json.dumps(policies)},
        upstream_retries=0,
        cache=False,
        max_body_bytes=MAX_BODY_BYTES,
        auth_mode="server-key",
        endpoint_tokens=(TOKEN, POLICY_TOKEN),
        api_key=SERVER_KEY,
    )
    return Endpoint.from_settings(settings, transport=fake)


@st.composite
def hidden_probes(draw: st.DrawFn, hidden: list[CatalogTool]) -> Case:
    """A request of POLICY_TOKEN's that asks after a hidden tool: by name, title, summary, category or a script."""
    from progressive_mcp.calls.stubs import python_name

    tool = draw(st.sampled_from(hidden))
    name = draw(st.sampled_from([tool.name, tool.name.lower(), tool.name.replace("_", " ")]))
    probes: list[tuple[dict[str, Any], str]] = [
        ({"name": "TOOL_GET", "arguments": {"tool_name": name}}, ""),
        ({"name": "TOOL_GET", "arguments": {"tool_name": [name, "FX_DAILY"]}}, "mode=code"),
        ({"name": "TOOL_CALL", "arguments": {"tool_name": name, "arguments": {"symbol": "IBM"}}}, ""),
        ({"name": name, "arguments": {"symbol": "IBM"}}, "mode=direct"),
        ({"name": "TOOL_SEARCH", "arguments": {"query": draw(st.sampled_from([name, tool.title, tool.summary]))}}, ""),
        ({"name": "TOOL_SEARCH", "arguments": {"query": tool.summary, "limit": 20, "schemas": True}}, "mode=code"),
        ({"name": "TOOL_LIST", "arguments": {"category": tool.category, "detail": "summary"}}, ""),
        ({"name": "TOOL_LIST", "arguments": {"detail": "summary"}}, f"categories={tool.category}"),
        ({"name": "TOOL_EXECUTE", "arguments": {"code": f"return await {python_name(tool.name)}()"}}, "mode=code"),
    ]  # fmt: skip
    params, query = draw(st.sampled_from(probes))
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}
    body = dumps(message) if draw(st.integers(0, 3)) else draw(mutated_messages(message))
    headers = {"content-type": "application/json", "authorization": f"Bearer {POLICY_TOKEN}"}
    template = Template("tools/call", params, query=query)
    return Case("POST", "/mcp", query, headers, body.encode(), template, changed=True)


def test_no_request_learns_a_hidden_tool(policy_endpoint: Endpoint, fake: FakeUpstream) -> None:
    """POLICY_TOKEN's requests, probing hidden tools or fuzzed like any other: no answer names a tool outside its
    policy (unless the request itself did), and no call of one reaches the upstream."""
    import re

    from progressive_mcp.policies import IDENTIFIER_SHAPED

    catalog = policy_endpoint.surface.catalog
    hidden = [t for t in catalog.tools if t.category != "forex" or t.premium]
    names = [t.name for t in hidden if IDENTIFIER_SHAPED.fullmatch(t.name)]
    pattern = re.compile(
        r"(?<![\w-])(" + "|".join(map(re.escape, sorted(names, key=len, reverse=True))) + r")(?![\w-])"
    )
    tally = Tally("test_no_request_learns_a_hidden_tool", 600)

    @tally.settings
    @given(case=hidden_probes(hidden) | fuzzed_cases(auth="server-key").map(_as_policy_caller))
    def check(case: Case) -> None:
        tally()
        before = len(fake.sent)
        request = HttpRequest.build(case.method, case.path, query=case.query, headers=case.headers, body=case.body)
        response = policy_endpoint.handle(request)
        check_response(response.status, response.headers, response.body, case.body)
        asked = set(pattern.findall(case.body.decode("utf-8", "replace")))
        told = set(pattern.findall(response.body.decode("utf-8", "replace"))) - asked
        assert not told, (told, case.body[:200], response.body[:300])
        reached = {dict(r.params).get("function") for r in fake.sent[before:]}
        assert not reached & {t.name for t in hidden}, reached

    check()
    tally.done()


def _as_policy_caller(case: Case) -> Case:
    if case.headers.get("authorization") == f"Bearer {TOKEN}":
        case.headers = {**case.headers, "authorization": f"Bearer {POLICY_TOKEN}"}
    return case
