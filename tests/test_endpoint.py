"""Tests for the transport-neutral MCP Streamable HTTP endpoint (`progressive_mcp.surfaces.endpoint`).

Every request goes through `Endpoint.handle`, in process; tool calls reach the offline sample upstream
over real HTTP on 127.0.0.1. Results are re-checked with `mcp_types.methods.parse_server_result`, an
independent validator of the wire shape for each protocol version.

Run with: .venv/bin/python -m pytest tests/test_endpoint.py -q
"""

from __future__ import annotations

import base64
import json
import logging
import sys
import threading
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from mcp.shared.inbound import encode_header_value
from mcp_types import methods
from mcp_types.jsonrpc import (
    HEADER_MISMATCH,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    UNSUPPORTED_PROTOCOL_VERSION,
)

from progressive_mcp.errors import ConfigError
from progressive_mcp.offline.sample_upstream import COMPANIES, SampleUpstream
from progressive_mcp.settings import Settings
from progressive_mcp.surfaces.endpoint import Endpoint, HttpRequest, HttpResponse
from progressive_mcp.surfaces.metatools import META_TOOL_NAMES

MODERN = "2026-07-28"
HANDSHAKE_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
ALL_VERSIONS = {*HANDSHAKE_VERSIONS, MODERN}
LATEST_HANDSHAKE = "2025-11-25"
VERSION_META = "io.modelcontextprotocol/protocolVersion"
CAPS_META = "io.modelcontextprotocol/clientCapabilities"
SERVER_INFO_META = "io.modelcontextprotocol/serverInfo"
CATALOG_VERSION_META = "progressive-mcp/catalogVersion"
QUOTE_CALL = {"tool_name": "GLOBAL_QUOTE", "arguments": {"symbol": "IBM"}}


# --- fixtures and helpers ---------------------------------------------------------------------------


@pytest.fixture
def upstream(shared_upstream: SampleUpstream) -> SampleUpstream:
    """One server for the module; each test starts with no faults and an empty request log."""
    shared_upstream.reset()
    return shared_upstream


# Endpoint tokens: at least 24 characters (progressive_mcp.settings.MIN_ENDPOINT_TOKEN_CHARS).
TOKEN_A = "tok-A-5F0C2B7E9D1A4C6E8B3F"
TOKEN_B = "tok-B-1E7A9C3D5B2F8A4C6E0D"
TOKEN_C = "tok-C-9B2D4F6A8C1E3A5C7E9B"


def settings_for(upstream: SampleUpstream, **overrides: Any) -> Settings:
    """Settings for a test endpoint; no response cache unless asked for, so every call reaches the upstream."""
    return Settings.from_env({}, **{"upstream_url": upstream.url, "upstream_retries": 0, "cache": False, **overrides})


@pytest.fixture(scope="module")
def endpoint(shared_upstream: SampleUpstream) -> Endpoint:
    """The default endpoint: passthrough auth, progressive mode, no allowed origins."""
    return Endpoint.from_settings(settings_for(shared_upstream))


def rpc(method: str, params: dict[str, Any] | None = None, request_id: Any = 1) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        message["params"] = params
    return message


def with_meta(params: dict[str, Any] | None = None, version: str = MODERN) -> dict[str, Any]:
    return {**(params or {}), "_meta": {VERSION_META: version, CAPS_META: {}}}


def modern_headers(method: str, name: str | None = None, version: str = MODERN) -> dict[str, str]:
    headers = {"MCP-Protocol-Version": version, "Mcp-Method": method}
    if name is not None:
        headers["Mcp-Name"] = name
    return headers


def send(endpoint: Endpoint, request: HttpRequest) -> HttpResponse:
    """`endpoint.handle`, plus the invariants every response keeps (stateless: never a session id)."""
    response = endpoint.handle(request)
    assert not any(h.lower() == "mcp-session-id" for h in response.headers), response.headers
    if response.body:
        assert response.headers.get("Content-Type") == "application/json"
        assert response.json()["jsonrpc"] == "2.0"
    return response


def post(
    endpoint: Endpoint,
    body: Any,
    *,
    query: str | Mapping[str, str] | None = None,
    headers: Mapping[str, str] | None = None,
    path: str = "/mcp",
    method: str = "POST",
) -> HttpResponse:
    """POST a message (a dict/list is JSON-encoded; str and bytes go as they are)."""
    raw = body if isinstance(body, str | bytes) else json.dumps(body)
    return send(endpoint, HttpRequest.build(method, path, query=query, headers=headers, body=raw))


def call_modern(
    endpoint: Endpoint,
    method: str,
    params: dict[str, Any] | None = None,
    *,
    query: str | None = None,
    headers: Mapping[str, str] | None = None,
    request_id: Any = 1,
) -> HttpResponse:
    """A well-formed 2026-07-28 request: _meta envelope plus the routing headers that match it."""
    name = params.get("name") if params and method == "tools/call" else None
    all_headers = {**modern_headers(method, name), **(headers or {})}
    return post(endpoint, rpc(method, with_meta(params), request_id), query=query, headers=all_headers)


def tool_call(name: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"name": name, "arguments": arguments or {}}


def result_of(response: HttpResponse, *, status: int = 200) -> dict[str, Any]:
    assert response.status == status, response.body
    body = response.json()
    assert "error" not in body, body
    return body["result"]


def error_of(response: HttpResponse, status: int, code: int) -> dict[str, Any]:
    """Check the HTTP status and JSON-RPC error code; return the error object."""
    assert response.status == status, response.body
    body = response.json()
    assert "result" not in body, body
    assert body["error"]["code"] == code, body
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]
    assert response.exchange.error_code == code
    return body["error"]


def tool_names(result: dict[str, Any]) -> list[str]:
    return [t["name"] for t in result["tools"]]


def check_wire(method: str, version: str, result: dict[str, Any]) -> None:
    """Independent check: the result is valid for this method and protocol version."""
    methods.parse_server_result(method, version, result)


# --- the 2026-07-28 era -----------------------------------------------------------------------------


def test_modern_server_discover(endpoint: Endpoint) -> None:
    response = call_modern(endpoint, "server/discover", request_id="d-1")
    result = result_of(response)
    assert response.json()["id"] == "d-1"
    assert set(result["supportedVersions"]) == ALL_VERSIONS
    assert len(result["supportedVersions"]) == len(ALL_VERSIONS)
    assert "tools" in result["capabilities"]
    assert result["resultType"] == "complete"
    assert result["ttlMs"] == 3_600_000
    assert isinstance(result["cacheScope"], str) and result["cacheScope"]
    assert result["_meta"][SERVER_INFO_META]["name"] == "progressive-mcp"
    assert response.exchange.protocol_version == MODERN
    assert response.exchange.rpc_method == "server/discover"
    check_wire("server/discover", MODERN, result)


@pytest.mark.parametrize(
    "params",
    [
        pytest.param(None, id="no-params"),
        pytest.param({}, id="no-meta"),
        pytest.param({"_meta": "not an object"}, id="meta-not-object"),
        pytest.param({"_meta": {CAPS_META: {}}}, id="meta-without-version"),
        pytest.param({"_meta": {VERSION_META: MODERN}}, id="meta-without-capabilities"),
        pytest.param({"_meta": {}}, id="meta-empty"),
    ],
)
def test_modern_request_without_a_complete_meta_envelope_is_invalid_params(
    endpoint: Endpoint, params: dict[str, Any] | None
) -> None:
    response = post(endpoint, rpc("tools/list", params, 7), headers=modern_headers("tools/list"))
    error_of(response, 400, INVALID_PARAMS)
    assert response.json()["id"] == 7


@pytest.mark.parametrize(
    ("method", "params", "headers"),
    [
        pytest.param(
            "tools/list",
            with_meta(version="2025-11-25"),
            modern_headers("tools/list"),
            id="header-version-differs-from-meta",
        ),
        pytest.param(
            "tools/list",
            with_meta(version=MODERN),
            modern_headers("tools/list", version="2099-01-01"),
            id="unsupported-header-version-differs-from-meta",
        ),
        pytest.param("tools/list", with_meta(), {"MCP-Protocol-Version": MODERN}, id="mcp-method-missing"),
        pytest.param("tools/list", with_meta(), modern_headers("tools/call"), id="mcp-method-differs"),
        pytest.param("tools/list", with_meta(), modern_headers("TOOLS/LIST"), id="mcp-method-case-differs"),
        pytest.param(
            "tools/call",
            with_meta(tool_call("TOOL_SEARCH", {"query": "x"})),
            modern_headers("tools/call"),
            id="mcp-name-missing",
        ),
        pytest.param(
            "tools/call",
            with_meta(tool_call("TOOL_SEARCH", {"query": "x"})),
            modern_headers("tools/call", name="TOOL_LIST"),
            id="mcp-name-differs",
        ),
    ],
)
def test_modern_headers_must_agree_with_the_body(
    endpoint: Endpoint, upstream: SampleUpstream, method: str, params: dict[str, Any], headers: dict[str, str]
) -> None:
    response = post(endpoint, rpc(method, params, "h"), headers=headers)
    error_of(response, 400, HEADER_MISMATCH)
    assert response.json()["id"] == "h"
    assert upstream.requests_snapshot(unmasked=True) == []


def test_modern_mcp_name_in_base64_sentinel_form_is_decoded(endpoint: Endpoint) -> None:
    name = "ÜBER_QUOTE"  # not a tool here; what matters is that the header is judged to match the body
    headers = modern_headers("tools/call", name=encode_header_value(name))
    assert headers["Mcp-Name"].startswith("=?base64?")
    response = post(endpoint, rpc("tools/call", with_meta(tool_call(name))), headers=headers)
    error_of(response, 400, INVALID_PARAMS)  # unknown tool, not a header mismatch


@pytest.mark.parametrize(
    "header",
    [
        pytest.param("=?base64?not base64!?=", id="malformed-payload"),
        pytest.param("=?base64?" + base64.b64encode(b"\xff\xfe").decode() + "?=", id="not-utf8"),
        pytest.param("=?base64?" + base64.b64encode(b"TOOL_LIST").decode() + "?=", id="another-name"),
    ],
)
def test_modern_mcp_name_bad_or_different_sentinel_is_header_mismatch(endpoint: Endpoint, header: str) -> None:
    params = with_meta(tool_call("TOOL_SEARCH", {"query": "x"}))
    response = post(endpoint, rpc("tools/call", params), headers=modern_headers("tools/call", name=header))
    error_of(response, 400, HEADER_MISMATCH)


def test_modern_mcp_name_sentinel_of_the_right_name_matches(endpoint: Endpoint) -> None:
    header = "=?base64?" + base64.b64encode(b"TOOL_SEARCH").decode() + "?="
    params = with_meta(tool_call("TOOL_SEARCH", {"query": "gold"}))
    response = post(endpoint, rpc("tools/call", params), headers=modern_headers("tools/call", name=header))
    assert result_of(response)["isError"] is False


def test_modern_unsupported_version(endpoint: Endpoint) -> None:
    version = "2099-01-01"
    response = post(
        endpoint,
        rpc("tools/list", with_meta(version=version), 3),
        headers=modern_headers("tools/list", version=version),
    )
    error = error_of(response, 400, UNSUPPORTED_PROTOCOL_VERSION)
    assert error["data"]["requested"] == version
    assert set(error["data"]["supported"]) == ALL_VERSIONS
    assert response.json()["id"] == 3


def test_notification_with_unsupported_version_header_is_rejected(endpoint: Endpoint) -> None:
    message = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    response = post(endpoint, message, headers={"MCP-Protocol-Version": "2099-01-01"})
    error = error_of(response, 400, UNSUPPORTED_PROTOCOL_VERSION)
    assert error["data"]["requested"] == "2099-01-01"
    assert response.json()["id"] is None


def test_modern_tools_list(endpoint: Endpoint) -> None:
    response = call_modern(endpoint, "tools/list")
    result = result_of(response)
    assert tool_names(result) == list(META_TOOL_NAMES)
    assert result["resultType"] == "complete"
    assert result["ttlMs"] == 3_600_000 == endpoint.settings.list_ttl_s * 1000
    assert result["cacheScope"] == "public"
    assert result["_meta"][SERVER_INFO_META]["name"] == "progressive-mcp"
    assert result["_meta"][CATALOG_VERSION_META] == endpoint.surface.catalog.version
    check_wire("tools/list", MODERN, result)


def test_modern_ttl_follows_settings(upstream: SampleUpstream) -> None:
    endpoint = Endpoint.from_settings(settings_for(upstream, list_ttl_s=60))
    assert result_of(call_modern(endpoint, "tools/list"))["ttlMs"] == 60_000
    assert result_of(call_modern(endpoint, "server/discover"))["ttlMs"] == 60_000


def test_modern_tool_search_call(endpoint: Endpoint) -> None:
    response = call_modern(endpoint, "tools/call", tool_call("TOOL_SEARCH", {"query": "apple stock price"}))
    result = result_of(response)
    assert result["resultType"] == "complete"
    assert result["isError"] is False
    assert isinstance(result["structuredContent"], dict) and result["structuredContent"]
    assert json.loads(result["content"][0]["text"]) == result["structuredContent"]
    assert response.exchange.tool == "TOOL_SEARCH"
    check_wire("tools/call", MODERN, result)


def test_modern_tool_call_reaches_upstream(endpoint: Endpoint, upstream: SampleUpstream) -> None:
    response = call_modern(endpoint, "tools/call", tool_call("TOOL_CALL", QUOTE_CALL), headers={"X-API-Key": "mk-1"})
    result = result_of(response)
    assert result["isError"] is False
    assert result["resultType"] == "complete"
    assert result["structuredContent"]["data"]["Global Quote"]["01. symbol"] == "IBM"
    assert upstream.requests_snapshot(unmasked=True)[-1]["apikey"] == "mk-1"
    assert response.exchange.tool == "GLOBAL_QUOTE"
    check_wire("tools/call", MODERN, result)


@pytest.mark.parametrize(
    "method",
    ["initialize", "ping", "prompts/get", "resources/read", "logging/setLevel", "completion/complete", "foo/bar"],
)
def test_modern_removed_or_unknown_methods_are_404(endpoint: Endpoint, method: str) -> None:
    params = {"protocolVersion": MODERN, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
    response = call_modern(endpoint, method, params if method == "initialize" else None, request_id=11)
    error_of(response, 404, METHOD_NOT_FOUND)
    assert response.json()["id"] == 11


@pytest.mark.parametrize(
    ("method", "field"),
    [("prompts/list", "prompts"), ("resources/list", "resources"), ("resources/templates/list", "resourceTemplates")],
)
def test_prompt_and_resource_lists_are_answered_empty(endpoint: Endpoint, method: str, field: str) -> None:
    """Tools only: these lists are answered (empty) so clients that ask for them anyway do not fail."""
    modern = result_of(call_modern(endpoint, method))
    assert modern[field] == []
    assert modern["resultType"] == "complete"
    check_wire(method, MODERN, modern)
    handshake = result_of(post(endpoint, rpc(method), headers={"MCP-Protocol-Version": "2025-06-18"}))
    assert handshake == {field: []}
    check_wire(method, "2025-06-18", handshake)


def test_modern_unknown_tool_is_400_invalid_params_with_suggestions(endpoint: Endpoint) -> None:
    response = call_modern(endpoint, "tools/call", tool_call("TOOL_SERACH"))
    error = error_of(response, 400, INVALID_PARAMS)
    assert error["data"]["tool_name"] == "TOOL_SERACH"
    assert error["data"]["suggestions"] == ["TOOL_SEARCH"]


def test_modern_tools_call_without_name_is_invalid_params(endpoint: Endpoint) -> None:
    response = call_modern(endpoint, "tools/call", {"arguments": {}})
    error_of(response, 400, INVALID_PARAMS)


# --- the handshake era ------------------------------------------------------------------------------


def initialize_params(version: str) -> dict[str, Any]:
    return {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "test-client", "version": "1.0"}}


@pytest.mark.parametrize(
    ("requested", "answered"),
    [
        ("2025-06-18", "2025-06-18"),
        ("2024-11-05", "2024-11-05"),
        ("2025-03-26", "2025-03-26"),
        ("2025-11-25", "2025-11-25"),
        ("1999-01-01", LATEST_HANDSHAKE),
        (MODERN, LATEST_HANDSHAKE),
    ],
)
def test_initialize_negotiates_a_handshake_version(endpoint: Endpoint, requested: str, answered: str) -> None:
    response = post(endpoint, rpc("initialize", initialize_params(requested)))
    result = result_of(response)
    assert result["protocolVersion"] == answered
    assert result["serverInfo"]["name"] == "progressive-mcp"
    assert "tools" in result["capabilities"]
    assert isinstance(result["instructions"], str) and result["instructions"]
    assert "resultType" not in result
    assert response.exchange.protocol_version == answered
    check_wire("initialize", answered, result)


def test_handshake_era_needs_no_initialize(upstream: SampleUpstream) -> None:
    fresh = Endpoint.from_settings(settings_for(upstream))
    ping = result_of(post(fresh, rpc("ping", request_id=1)))
    assert ping == {}
    check_wire("ping", "2025-03-26", ping)

    listed = result_of(post(fresh, rpc("tools/list", request_id=2)))
    assert tool_names(listed) == list(META_TOOL_NAMES)
    assert "ttlMs" not in listed and "resultType" not in listed and "_meta" not in listed
    check_wire("tools/list", "2025-03-26", listed)

    called = result_of(post(fresh, rpc("tools/call", tool_call("TOOL_SEARCH", {"query": "exchange rate"}), 3)))
    assert called["isError"] is False
    assert called["structuredContent"]
    assert "resultType" not in called
    check_wire("tools/call", "2025-03-26", called)


@pytest.mark.parametrize("version", HANDSHAKE_VERSIONS)
def test_handshake_version_header_is_honoured(endpoint: Endpoint, version: str) -> None:
    response = post(endpoint, rpc("tools/list"), headers={"MCP-Protocol-Version": version})
    result = result_of(response)
    assert tool_names(result) == list(META_TOOL_NAMES)
    assert response.exchange.protocol_version == version
    check_wire("tools/list", version, result)


@pytest.mark.parametrize("method", ["ping", "tools/list"])
def test_invalid_protocol_version_header_is_400(endpoint: Endpoint, method: str) -> None:
    response = post(endpoint, rpc(method), headers={"MCP-Protocol-Version": "garbage"})
    error = error_of(response, 400, UNSUPPORTED_PROTOCOL_VERSION)
    assert error["data"]["requested"] == "garbage"


def test_modern_meta_without_version_header_is_header_mismatch(endpoint: Endpoint) -> None:
    response = post(endpoint, rpc("tools/list", with_meta(), 5), headers={"Mcp-Method": "tools/list"})
    error_of(response, 400, HEADER_MISMATCH)
    assert response.json()["id"] == 5


@pytest.mark.parametrize(
    "method", ["foo/bar", "server/discover", "prompts/get", "resources/read", "logging/setLevel", "completion/complete"]
)
def test_handshake_unknown_method_is_jsonrpc_error_with_http_200(endpoint: Endpoint, method: str) -> None:
    response = post(endpoint, rpc(method, request_id="u"))
    error_of(response, 200, METHOD_NOT_FOUND)
    assert response.json()["id"] == "u"


def test_handshake_unknown_tool_is_invalid_params_with_suggestions(endpoint: Endpoint) -> None:
    response = post(endpoint, rpc("tools/call", tool_call("tool_get")))  # the case does matter for a tool's name
    error = error_of(response, 200, INVALID_PARAMS)
    assert error["data"]["tool_name"] == "tool_get"
    suggestions = error["data"]["suggestions"]
    assert suggestions == ["TOOL_GET"]
    assert set(suggestions) <= set(META_TOOL_NAMES)  # only names this surface offers
    assert response.exchange.tool == "tool_get"
    assert response.exchange.rpc_method == "tools/call"


def test_handshake_tools_call_without_name_is_invalid_params(endpoint: Endpoint) -> None:
    error_of(post(endpoint, rpc("tools/call", {"arguments": {}})), 200, INVALID_PARAMS)


@pytest.mark.parametrize(
    ("name", "arguments"),
    [
        ("TOOL_SEARCH", {}),
        ("TOOL_SEARCH", {"query": 42}),
        ("TOOL_GET", {}),
        ("TOOL_CALL", {"tool_name": "GLOBAL_QUOTE"}),
        ("TOOL_CALL", {"tool_name": "GLOBAL_QUOTE", "arguments": {"symbol": "IBM", "bogus": 1}}),
        ("TOOL_CALL", {"tool_name": "NO_SUCH_TOOL", "arguments": {}}),
    ],
)
def test_invalid_meta_tool_arguments_are_error_results(
    endpoint: Endpoint, upstream: SampleUpstream, name: str, arguments: dict[str, Any]
) -> None:
    response = post(endpoint, rpc("tools/call", tool_call(name, arguments)), headers={"X-API-Key": "test-key-1"})
    result = result_of(response)
    assert result["isError"] is True
    assert result["structuredContent"]["error"]["message"]
    assert response.exchange.error_code is None
    assert upstream.requests_snapshot(unmasked=True) == []
    check_wire("tools/call", "2025-03-26", result)


# --- HTTP rules -------------------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["GET", "DELETE", "PUT", "PATCH"])
def test_other_http_methods_are_405(endpoint: Endpoint, method: str) -> None:
    response = post(endpoint, b"", method=method)
    assert response.status == 405
    assert response.headers["Allow"] == "POST"
    assert response.json()["error"]["code"] == INVALID_REQUEST


@pytest.mark.parametrize(
    "message",
    [
        pytest.param({"jsonrpc": "2.0", "method": "notifications/initialized"}, id="initialized"),
        pytest.param({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}, id="cancel"),
        pytest.param({"jsonrpc": "2.0", "result": {}}, id="result-without-id"),
    ],
)
def test_notifications_and_responses_are_accepted_with_202(endpoint: Endpoint, message: dict[str, Any]) -> None:
    response = post(endpoint, message)
    assert response.status == 202
    assert response.body == b""


@pytest.mark.parametrize(
    "message",
    [
        pytest.param({"jsonrpc": "2.0", "id": 9, "result": {}}, id="result"),
        pytest.param({"jsonrpc": "2.0", "id": "s-1", "error": {"code": -32601, "message": "no"}}, id="error"),
    ],
)
def test_client_responses_with_an_id_are_accepted_with_202(endpoint: Endpoint, message: dict[str, Any]) -> None:
    response = post(endpoint, message)
    assert response.status == 202
    assert response.body == b""


def test_modern_notification_is_202(endpoint: Endpoint) -> None:
    message = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    response = post(endpoint, message, headers=modern_headers("notifications/initialized"))
    assert (response.status, response.body) == (202, b"")


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(b"{not json", id="garbage"),
        pytest.param(b"", id="empty"),
        pytest.param(b'{"jsonrpc":"2.0","id":1,"method":"ping"', id="truncated"),
        pytest.param(b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":NaN}}', id="nan"),
        pytest.param(b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":Infinity}}', id="infinity"),
        pytest.param(b'{"jsonrpc":"2.0","id":1,"method":"p\xff\xfeng"}', id="invalid-utf8"),
    ],
)
def test_unparsable_bodies_are_parse_errors(endpoint: Endpoint, body: bytes) -> None:
    response = post(endpoint, body)
    error_of(response, 400, PARSE_ERROR)
    assert "id" in response.json() and response.json()["id"] is None


def test_invalid_utf8_is_named_in_the_message(endpoint: Endpoint) -> None:
    error = error_of(post(endpoint, b'{"jsonrpc":"2.0","id":1,"method":"\xc3\x28"}'), 400, PARSE_ERROR)
    assert "UTF-8" in error["message"]


@pytest.mark.parametrize(
    ("body", "status"),
    [
        pytest.param(b'{"jsonrpc":"2.0","id":1,"method":"\\ud800x"}', 200, id="in-an-error-message"),
        pytest.param(b'{"jsonrpc":"2.0","id":"\\udfff","method":"nope"}', 200, id="in-the-id-of-an-error"),
        pytest.param(
            b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"\\ud800","arguments":{}}}',
            200,
            id="in-an-unknown-tool-name",
        ),
        pytest.param(
            b'{"jsonrpc":"2.0","id":1,"method":"tools/call",'
            b'"params":{"name":"TOOL_SEARCH","arguments":{"query":"apple \\ud800 price"}}}',
            200,
            id="echoed-in-a-result",
        ),
    ],
)
def test_lone_surrogates_are_answered_as_valid_utf8(endpoint: Endpoint, body: bytes, status: int) -> None:
    """A "\\ud800" escape is valid JSON but has no UTF-8 form: echoing it must not break the answer (was a crash
    or a 500)."""
    response = post(endpoint, body)
    assert response.status == status
    text = response.body.decode("utf-8")  # strict: the body is UTF-8
    assert "\\ud" in text or "\\uD" in text  # the surrogate is kept, escaped
    assert json.loads(text)["jsonrpc"] == "2.0"


def test_batches_are_rejected(endpoint: Endpoint) -> None:
    response = post(endpoint, [rpc("ping", request_id=1), rpc("ping", request_id=2)])
    error = error_of(response, 400, INVALID_REQUEST)
    assert "batch" in error["message"].lower()
    assert response.json()["id"] is None


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(42, id="number"),
        pytest.param("ping", id="string"),
        pytest.param(None, id="null"),
        pytest.param({"jsonrpc": "1.0", "id": 1, "method": "ping"}, id="jsonrpc-1.0"),
        pytest.param({"id": 1, "method": "ping"}, id="no-jsonrpc"),
        pytest.param({"jsonrpc": "2.0", "id": 1}, id="no-method"),
        pytest.param({"jsonrpc": "2.0", "id": 1, "method": 5}, id="method-not-string"),
        pytest.param({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": [1]}, id="params-array"),
    ],
)
def test_malformed_messages_are_invalid_request(endpoint: Endpoint, body: Any) -> None:
    error_of(post(endpoint, json.dumps(body)), 400, INVALID_REQUEST)


@pytest.mark.parametrize(
    "content_type", ["application/json", "application/json; charset=utf-8", "Application/JSON;charset=UTF-8"]
)
def test_json_content_types_are_accepted(endpoint: Endpoint, content_type: str) -> None:
    assert result_of(post(endpoint, rpc("ping"), headers={"Content-Type": content_type})) == {}


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", "text/json"])
def test_other_content_types_are_415(endpoint: Endpoint, content_type: str) -> None:
    response = post(endpoint, rpc("ping"), headers={"Content-Type": content_type})
    assert response.status == 415
    assert response.json()["error"]["code"] == INVALID_REQUEST


@pytest.mark.parametrize(
    "origin", ["http://localhost:3000", "http://127.0.0.1:8000", "http://[::1]:8000", "https://localhost"]
)
def test_default_settings_accept_loopback_origins(endpoint: Endpoint, origin: str) -> None:
    response = post(endpoint, rpc("ping"), headers={"Origin": origin})
    assert result_of(response) == {}
    assert response.headers["Access-Control-Allow-Origin"] == origin
    assert response.headers["Vary"] == "Origin"


@pytest.mark.parametrize(
    "origin",
    [
        "http://evil.example.com",
        "http://localhost.evil.example.com",
        "http://127.0.0.1.evil.example.com:8000",
        "http://localhost@evil.example.com",
        "null",
        "file://localhost",
        "http://\r\n\tlocalhost",  # urlsplit drops the control characters
        "http://local\x00host",
        "http://[::1].evil.example",
        "http://evil.example@localhost",
        "http://localhost:abc",
    ],
)
def test_default_settings_reject_other_origins(endpoint: Endpoint, upstream: SampleUpstream, origin: str) -> None:
    body = rpc("tools/call", tool_call("TOOL_CALL", QUOTE_CALL))
    response = post(endpoint, body, headers={"Origin": origin, "X-API-Key": "test-key-1"})
    assert response.status == 403
    assert response.json()["error"]["code"] == INVALID_REQUEST
    assert "Access-Control-Allow-Origin" not in response.headers
    assert upstream.requests_snapshot(unmasked=True) == []


def test_configured_origins_replace_the_loopback_default(upstream: SampleUpstream) -> None:
    endpoint = Endpoint.from_settings(settings_for(upstream, allowed_origins=("https://app.example.com",)))
    ok = post(endpoint, rpc("ping"), headers={"Origin": "https://app.example.com"})
    assert result_of(ok) == {}
    assert ok.headers["Access-Control-Allow-Origin"] == "https://app.example.com"
    assert ok.headers["Vary"] == "Origin"
    for origin in ("http://localhost:3000", "https://evil.example.com", "https://app.example.com.evil.example"):
        response = post(endpoint, rpc("ping"), headers={"Origin": origin})
        assert response.status == 403, origin
        assert "Access-Control-Allow-Origin" not in response.headers
    # a request without Origin (not from a browser) is not subject to the check
    assert result_of(post(endpoint, rpc("ping"))) == {}


def test_wildcard_origin_accepts_anything(upstream: SampleUpstream) -> None:
    endpoint = Endpoint.from_settings(settings_for(upstream, allowed_origins=("*",)))
    for origin in ("http://evil.example.com", "https://anything.test", "http://localhost:1"):
        response = post(endpoint, rpc("ping"), headers={"Origin": origin})
        assert result_of(response) == {}
        assert response.headers["Access-Control-Allow-Origin"] == origin


def test_session_ids_are_ignored_and_never_issued(upstream: SampleUpstream) -> None:
    fresh = Endpoint.from_settings(settings_for(upstream))
    session = {"Mcp-Session-Id": "session-that-never-existed"}
    requests = [
        rpc("initialize", initialize_params("2025-06-18")),
        rpc("ping"),
        rpc("tools/list"),
        rpc("tools/call", tool_call("TOOL_SEARCH", {"query": "gold price"})),
        rpc("tools/call", tool_call("NOPE")),
        rpc("foo/bar"),
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
    ]
    responses = [post(fresh, r, headers=session) for r in requests]
    responses += [
        post(fresh, b"nope", headers=session),
        post(fresh, b"", method="GET", headers=session),
        post(fresh, b"", method="DELETE", headers=session),
        post(fresh, rpc("ping"), path="/elsewhere", headers=session),
        call_modern(fresh, "tools/list", headers=session),
        call_modern(fresh, "server/discover", headers=session),
        call_modern(fresh, "ping", headers=session),
        send(fresh, HttpRequest.build("OPTIONS", "/mcp", headers={"Origin": "http://localhost"})),
    ]
    for response in responses:
        assert not any(h.lower() == "mcp-session-id" for h in response.headers)
    # the unknown session id changed nothing: the same answers come without it
    assert [r.status for r in responses[:4]] == [200, 200, 200, 200]
    assert post(fresh, rpc("tools/list")).body == responses[2].body
    assert result_of(responses[0])["protocolVersion"] == "2025-06-18"


def test_body_size_limit(upstream: SampleUpstream) -> None:
    endpoint = Endpoint.from_settings(settings_for(upstream, max_body_bytes=2048))
    base = json.dumps(rpc("ping", {"_meta": {"pad": ""}}))
    at_limit = base.replace('"pad": ""', '"pad": "' + "x" * (2048 - len(base)) + '"')
    assert len(at_limit.encode()) == 2048
    assert result_of(post(endpoint, at_limit)) == {}
    over = at_limit.replace('"pad": "', '"pad": "x')
    assert len(over.encode()) == 2049
    response = post(endpoint, over)
    assert response.status == 413
    assert response.json()["error"]["code"] == INVALID_REQUEST


@pytest.mark.parametrize("path", ["/other", "/", "/mcpx", "/mcp/extra", "/api/mcp"])
def test_wrong_path_is_404(endpoint: Endpoint, path: str) -> None:
    response = post(endpoint, rpc("ping"), path=path)
    assert response.status == 404
    assert response.json()["error"]["code"] == INVALID_REQUEST


def test_trailing_slash_path_is_the_endpoint(endpoint: Endpoint) -> None:
    assert result_of(post(endpoint, rpc("ping"), path="/mcp/")) == {}


@pytest.mark.parametrize("request_id", ["abc", "", 0, 7, -3, 2**53])
def test_valid_request_ids_are_echoed(endpoint: Endpoint, request_id: Any) -> None:
    response = post(endpoint, rpc("ping", request_id=request_id))
    assert response.status == 200
    body = response.json()
    assert body["id"] == request_id and type(body["id"]) is type(request_id)
    assert body["result"] == {}


@pytest.mark.parametrize("request_id", [None, True, False, 1.5, [1], {"a": 1}])
def test_invalid_request_ids_are_rejected(endpoint: Endpoint, request_id: Any) -> None:
    response = post(endpoint, rpc("ping", request_id=request_id))
    error_of(response, 400, INVALID_REQUEST)
    assert response.json()["id"] is None


# --- auth: passthrough ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("headers", "query", "expected"),
    [
        pytest.param({"X-API-Key": "key-one-1"}, None, "key-one-1", id="x-api-key"),
        pytest.param({"Authorization": "Bearer key-two-2"}, None, "key-two-2", id="bearer"),
        pytest.param({"authorization": "bearer key-2b-lower"}, None, "key-2b-lower", id="bearer-lowercase"),
        pytest.param({}, "apikey=key-three-3", "key-three-3", id="query"),
        pytest.param(
            {"X-API-Key": "key-one-1", "Authorization": "Bearer key-two-2"},
            "apikey=key-three-3",
            "key-one-1",
            id="x-api-key-first",
        ),
        pytest.param(
            {"Authorization": "Bearer key-two-2"}, "apikey=key-three-3", "key-two-2", id="bearer-before-query"
        ),
    ],
)
def test_passthrough_key_reaches_the_upstream(
    endpoint: Endpoint, upstream: SampleUpstream, headers: dict[str, str], query: str | None, expected: str
) -> None:
    response = post(endpoint, rpc("tools/call", tool_call("TOOL_CALL", QUOTE_CALL)), headers=headers, query=query)
    result = result_of(response)
    assert result["isError"] is False, result
    raw = upstream.requests_snapshot(unmasked=True)
    assert len(raw) == 1
    assert raw[-1]["apikey"] == expected
    assert raw[-1]["function"] == "GLOBAL_QUOTE"
    assert upstream.requests_snapshot()[-1]["apikey"] == "***"  # the sample's own log masks it


@pytest.mark.parametrize(
    "request_body",
    [
        pytest.param(rpc("tools/list"), id="tools/list"),
        pytest.param(rpc("tools/call", tool_call("TOOL_LIST")), id="TOOL_LIST"),
        pytest.param(rpc("tools/call", tool_call("TOOL_LIST", {"category": "forex"})), id="TOOL_LIST-category"),
        pytest.param(rpc("tools/call", tool_call("TOOL_SEARCH", {"query": "apple stock price"})), id="TOOL_SEARCH"),
        pytest.param(rpc("tools/call", tool_call("TOOL_GET", {"tool_name": "GLOBAL_QUOTE"})), id="TOOL_GET"),
    ],
)
def test_discovery_works_without_a_key(
    endpoint: Endpoint, upstream: SampleUpstream, request_body: dict[str, Any]
) -> None:
    result = result_of(post(endpoint, request_body))
    assert result.get("isError", False) is False
    assert upstream.requests_snapshot(unmasked=True) == []


@pytest.mark.parametrize(
    ("query", "name", "arguments"),
    [
        pytest.param(None, "TOOL_CALL", QUOTE_CALL, id="TOOL_CALL"),
        pytest.param("mode=direct", "GLOBAL_QUOTE", {"symbol": "IBM"}, id="direct"),
    ],
)
def test_tool_call_without_a_key_explains_how_to_send_one(
    endpoint: Endpoint, upstream: SampleUpstream, query: str | None, name: str, arguments: dict[str, Any]
) -> None:
    response = post(endpoint, rpc("tools/call", tool_call(name, arguments)), query=query)
    result = result_of(response)
    assert result["isError"] is True
    error = result["structuredContent"]["error"]
    assert error["type"] == "MissingApiKey"
    for hint in ("X-API-Key", "Authorization", "apikey"):
        assert hint in error["message"]
    assert upstream.requests_snapshot(unmasked=True) == []
    assert upstream.requests_snapshot() == []


# --- auth: server-key -------------------------------------------------------------------------------


@pytest.fixture
def server_key_endpoint(upstream: SampleUpstream) -> Endpoint:
    return Endpoint.from_settings(
        settings_for(
            upstream,
            auth_mode="server-key",
            endpoint_tokens=(TOKEN_A, TOKEN_B),
            api_key="server-secret-key",
            allowed_origins=("https://app.example.com",),
        )
    )


@pytest.mark.parametrize(
    "headers",
    [
        pytest.param({}, id="none"),
        pytest.param({"Authorization": "Basic dG9rLUE6"}, id="basic"),
        pytest.param({"Authorization": "Bearer "}, id="empty-bearer"),
        pytest.param({"X-API-Key": TOKEN_A}, id="token-in-x-api-key"),
    ],
)
def test_server_key_without_bearer_is_401(
    server_key_endpoint: Endpoint, upstream: SampleUpstream, headers: dict[str, str]
) -> None:
    for message in (rpc("tools/list"), rpc("tools/call", tool_call("TOOL_CALL", QUOTE_CALL))):
        response = post(server_key_endpoint, message, headers=headers)
        assert response.status == 401
        assert response.headers["WWW-Authenticate"].startswith("Bearer")
        assert "invalid_token" not in response.headers["WWW-Authenticate"]
        assert response.json()["error"]["code"] == INVALID_REQUEST
    assert upstream.requests_snapshot(unmasked=True) == []


@pytest.mark.parametrize("token", [TOKEN_C, TOKEN_A.lower(), TOKEN_A + "-", TOKEN_A + "B", "tok", "server-secret-key"])
def test_server_key_wrong_token_is_401_invalid_token(
    server_key_endpoint: Endpoint, upstream: SampleUpstream, token: str
) -> None:
    body = rpc("tools/call", tool_call("TOOL_CALL", QUOTE_CALL))
    response = post(server_key_endpoint, body, headers={"Authorization": f"Bearer {token}"})
    assert response.status == 401
    assert response.headers["WWW-Authenticate"].startswith("Bearer")
    assert 'error="invalid_token"' in response.headers["WWW-Authenticate"]
    assert upstream.requests_snapshot(unmasked=True) == []


@pytest.mark.parametrize("token", [TOKEN_A, TOKEN_B])
def test_server_key_tokens_work_and_the_server_key_goes_upstream(
    server_key_endpoint: Endpoint, upstream: SampleUpstream, token: str
) -> None:
    auth = {"Authorization": f"Bearer {token}"}
    assert tool_names(result_of(post(server_key_endpoint, rpc("tools/list"), headers=auth))) == list(META_TOOL_NAMES)
    body = rpc("tools/call", tool_call("TOOL_CALL", QUOTE_CALL))
    attempts = [
        post(server_key_endpoint, body, headers=auth),
        post(server_key_endpoint, body, headers=auth, query="apikey=other"),
        post(server_key_endpoint, body, headers={**auth, "X-API-Key": "caller-key"}),
        post(server_key_endpoint, body, headers={**auth, "X-API-Key": "caller-key"}, query="apikey=other"),
    ]
    for response in attempts:
        assert result_of(response)["isError"] is False
    raw = upstream.requests_snapshot(unmasked=True)
    assert [r["apikey"] for r in raw] == ["server-secret-key"] * 4


def test_server_key_without_tokens_is_a_config_error(upstream: SampleUpstream) -> None:
    settings = settings_for(upstream, auth_mode="server-key", api_key="server-secret-key")
    with pytest.raises(ConfigError, match="token"):
        Endpoint.from_settings(settings)


def test_server_key_without_a_server_key_says_the_operator_must_configure_one(
    upstream: SampleUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ALPHAVANTAGE_API_KEY", raising=False)
    endpoint = Endpoint.from_settings(settings_for(upstream, auth_mode="server-key", endpoint_tokens=(TOKEN_A,)))
    body = rpc("tools/call", tool_call("TOOL_CALL", QUOTE_CALL))
    result = result_of(post(endpoint, body, headers={"Authorization": f"Bearer {TOKEN_A}", "X-API-Key": "caller-key"}))
    assert result["isError"] is True
    assert result["structuredContent"]["error"]["type"] == "MissingApiKey"
    assert "operator" in result["structuredContent"]["error"]["message"]
    assert upstream.requests_snapshot(unmasked=True) == []  # the caller's key is not used in server-key mode


# --- CORS -------------------------------------------------------------------------------------------


def header_items(value: str) -> set[str]:
    return {item.strip().lower() for item in value.split(",")}


@pytest.mark.parametrize("mode", ["passthrough", "server-key"])
def test_preflight_with_an_allowed_origin(upstream: SampleUpstream, mode: str) -> None:
    endpoint = Endpoint.from_settings(
        settings_for(
            upstream,
            auth_mode=mode,
            endpoint_tokens=(TOKEN_A,) if mode == "server-key" else None,
            api_key="server-secret-key" if mode == "server-key" else None,
            allowed_origins=("https://app.example.com",),
        )
    )
    headers = {
        "Origin": "https://app.example.com",
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "content-type, authorization, mcp-protocol-version",
    }
    response = send(endpoint, HttpRequest.build("OPTIONS", "/mcp", headers=headers))
    assert response.status == 204
    assert response.body == b""
    assert response.headers["Access-Control-Allow-Origin"] == "https://app.example.com"
    assert "post" in header_items(response.headers["Access-Control-Allow-Methods"])
    allowed = header_items(response.headers["Access-Control-Allow-Headers"])
    for name in ("Content-Type", "Authorization", "MCP-Protocol-Version", "Mcp-Method", "Mcp-Name", "X-API-Key"):
        assert name.lower() in allowed, name
    assert "www-authenticate" in header_items(response.headers["Access-Control-Expose-Headers"])


def test_preflight_from_a_disallowed_origin_is_403(server_key_endpoint: Endpoint) -> None:
    response = send(server_key_endpoint, HttpRequest.build("OPTIONS", "/mcp", headers={"Origin": "http://evil.test"}))
    assert response.status == 403
    assert "Access-Control-Allow-Origin" not in response.headers
    assert "Access-Control-Allow-Methods" not in response.headers


def test_options_without_origin_lists_allowed_methods(endpoint: Endpoint) -> None:
    response = send(endpoint, HttpRequest.build("OPTIONS", "/mcp"))
    assert response.status == 204
    assert "POST" in response.headers["Allow"]


def test_401_with_an_allowed_origin_exposes_www_authenticate(server_key_endpoint: Endpoint) -> None:
    response = post(server_key_endpoint, rpc("tools/list"), headers={"Origin": "https://app.example.com"})
    assert response.status == 401
    assert response.headers["Access-Control-Allow-Origin"] == "https://app.example.com"
    assert response.headers["WWW-Authenticate"].startswith("Bearer")
    assert "www-authenticate" in header_items(response.headers["Access-Control-Expose-Headers"])


# --- the surface per URL ----------------------------------------------------------------------------


def list_via(endpoint: Endpoint, query: str | None) -> list[str]:
    return tool_names(result_of(post(endpoint, rpc("tools/list"), query=query)))


def test_mode_direct_lists_catalog_tools(endpoint: Endpoint) -> None:
    names = list_via(endpoint, "mode=direct")
    catalog_names = [t.name for t in endpoint.surface.catalog.in_categories(None)]
    assert names == catalog_names
    assert "GLOBAL_QUOTE" in names
    assert not set(META_TOOL_NAMES) & set(names)


def test_mode_hybrid_lists_both(endpoint: Endpoint) -> None:
    names = list_via(endpoint, "mode=hybrid")
    catalog_names = [t.name for t in endpoint.surface.catalog.in_categories(None)]
    assert names == [*META_TOOL_NAMES, *catalog_names]


def test_default_mode_lists_exactly_the_meta_tools(endpoint: Endpoint) -> None:
    assert list_via(endpoint, None) == list(META_TOOL_NAMES)
    assert list_via(endpoint, "mode=progressive") == list(META_TOOL_NAMES)


@pytest.mark.parametrize(
    "query", ["categories=forex&mode=direct", "mode=direct&categories=FOREX", "mode=direct&categories=forex,"]
)
def test_categories_filter_the_direct_surface(endpoint: Endpoint, query: str) -> None:
    expected = [t.name for t in endpoint.surface.catalog.in_categories(frozenset({"forex"}))]
    assert "FX_DAILY" in expected
    assert list_via(endpoint, query) == expected


def test_categories_filter_reaches_the_meta_tools(endpoint: Endpoint) -> None:
    response = post(endpoint, rpc("tools/call", tool_call("TOOL_LIST")), query="categories=forex")
    text = json.dumps(result_of(response)["structuredContent"])
    assert "FX_DAILY" in text
    assert "GLOBAL_QUOTE" not in text


def test_schema_view_per_url_and_a_wrong_one_is_refused(endpoint: Endpoint) -> None:
    """`?schema_view=compact`: TOOL_GET's argument lines for this URL only, with any mode, on the same search
    index; the default URL keeps JSON Schema; an unknown view is HTTP 400 naming the two."""
    get = rpc("tools/call", tool_call("TOOL_GET", {"tool_name": "GLOBAL_QUOTE"}))
    for query in ("schema_view=compact", "mode=hybrid&schema_view=COMPACT"):
        (entry,) = result_of(post(endpoint, get, query=query))["structuredContent"]["tools"]
        assert entry["arguments"].startswith("symbol: string") and "inputSchema" not in entry
    (plain,) = result_of(post(endpoint, get))["structuredContent"]["tools"]
    assert plain["inputSchema"]["required"] == ["symbol"]
    (again,) = result_of(post(endpoint, get, query="schema_view=json"))["structuredContent"]["tools"]
    assert again == plain
    compact = endpoint._surface_for({"schema_view": "compact"}, 1)
    assert compact.meta is not endpoint.surface.meta and compact.meta.index is endpoint.surface.meta.index
    error = error_of(post(endpoint, get, query="schema_view=yaml"), 400, INVALID_REQUEST)
    assert error["message"] == "Unknown ?schema_view='yaml'; use one of json, compact"


def test_modern_tools_list_honours_the_url_surface(endpoint: Endpoint) -> None:
    result = result_of(call_modern(endpoint, "tools/list", query="mode=direct&categories=forex"))
    expected = [t.name for t in endpoint.surface.catalog.in_categories(frozenset({"forex"}))]
    assert tool_names(result) == expected
    check_wire("tools/list", MODERN, result)


def test_direct_mode_tool_call_and_no_meta_tools(endpoint: Endpoint, upstream: SampleUpstream) -> None:
    key = {"X-API-Key": "direct-key"}
    called = post(
        endpoint, rpc("tools/call", tool_call("GLOBAL_QUOTE", {"symbol": "MSFT"})), query="mode=direct", headers=key
    )
    assert result_of(called)["structuredContent"]["data"]["Global Quote"]["01. symbol"] == "MSFT"
    assert called.exchange.mode == "direct"
    assert upstream.requests_snapshot(unmasked=True)[-1]["apikey"] == "direct-key"
    meta = post(endpoint, rpc("tools/call", tool_call("TOOL_LIST")), query="mode=direct")
    error_of(meta, 200, INVALID_PARAMS)


@pytest.mark.parametrize(
    ("query", "words"),
    [
        ("mode=bogus", ("mode", "bogus", "progressive", "direct", "hybrid")),
        ("categories=nope", ("categories", "nope", "forex")),
        ("mode=direct&categories=forex,nope", ("categories", "nope")),
    ],
)
def test_bad_surface_query_is_400_with_a_clear_message(endpoint: Endpoint, query: str, words: tuple[str, ...]) -> None:
    for response in (post(endpoint, rpc("tools/list"), query=query), call_modern(endpoint, "tools/list", query=query)):
        error = error_of(response, 400, INVALID_REQUEST)
        for word in words:
            assert word in error["message"], (word, error["message"])


def test_url_override_does_not_change_the_default(upstream: SampleUpstream) -> None:
    fresh = Endpoint.from_settings(settings_for(upstream))
    assert "GLOBAL_QUOTE" in list_via(fresh, "mode=direct")
    assert list_via(fresh, "mode=hybrid&categories=forex")[:4] == list(META_TOOL_NAMES)
    assert list_via(fresh, None) == list(META_TOOL_NAMES)
    assert fresh.surface.mode == "progressive" and fresh.surface.categories is None
    # a direct tool is not callable on the default surface afterwards
    response = post(
        fresh, rpc("tools/call", tool_call("GLOBAL_QUOTE", {"symbol": "IBM"})), headers={"X-API-Key": "test-key-1"}
    )
    error_of(response, 200, INVALID_PARAMS)
    assert upstream.requests_snapshot(unmasked=True) == []
    # and the default's TOOL_LIST still covers every category
    listed = json.dumps(
        result_of(post(fresh, rpc("tools/call", tool_call("TOOL_LIST", {"category": "stocks"}))))["structuredContent"]
    )
    assert "GLOBAL_QUOTE" in listed


def test_settings_mode_is_the_default_surface(upstream: SampleUpstream) -> None:
    direct = Endpoint.from_settings(settings_for(upstream, mode="direct", categories="forex"))
    expected = [t.name for t in direct.surface.catalog.in_categories(frozenset({"forex"}))]
    assert list_via(direct, None) == expected
    assert list_via(direct, "mode=hybrid") == [*META_TOOL_NAMES, *expected]  # categories kept from settings


# --- secrets ----------------------------------------------------------------------------------------


def assert_secret_absent(
    secrets: tuple[str, ...], responses: list[HttpResponse], caplog: pytest.LogCaptureFixture
) -> None:
    for response in responses:
        shown = response.body.decode("utf-8", "replace") + json.dumps(response.headers) + repr(response)
        shown += repr(response.exchange)
        for secret in secrets:
            assert secret not in shown, (secret, shown[:500])
            assert secret.lower() not in shown.lower()
    assert caplog.records, "expected some log records (the check would be vacuous otherwise)"
    for secret in secrets:
        assert secret not in caplog.text
        for record in caplog.records:
            assert secret not in repr(vars(record)), record


def test_passthrough_key_never_appears_in_responses_or_logs(
    upstream: SampleUpstream, caplog: pytest.LogCaptureFixture
) -> None:
    key = "SeCrEt-KEY-123"
    endpoint = Endpoint.from_settings(settings_for(upstream))
    body = rpc("tools/call", tool_call("TOOL_CALL", QUOTE_CALL))
    post(endpoint, body, headers={"X-API-Key": key})  # warm up httpx, which quiets its own loggers on first use
    caplog.set_level(logging.DEBUG)
    for name in ("httpx", "httpcore", "progressive_mcp"):
        caplog.set_level(logging.DEBUG, logger=name)
    responses: list[HttpResponse] = []
    for headers, query in (
        ({"X-API-Key": key}, None),
        ({"Authorization": f"Bearer {key}"}, None),
        ({}, f"apikey={key}"),
    ):
        responses.append(post(endpoint, body, headers=headers, query=query))
        responses.append(
            call_modern(endpoint, "tools/call", tool_call("TOOL_CALL", QUOTE_CALL), headers=headers, query=query)
        )
    assert all(result_of(r)["isError"] is False for r in responses)
    failures = [
        {"rate_limit": True},  # the sample's rate-limit notice echoes the caller's key, as the real service does
        {"rate_limit": False, "status": 500},
        {"status": 429},
        {"status": None, "malformed": True},
    ]
    for fault in failures:
        upstream.update_faults(fault)
        response = post(endpoint, body, headers={"X-API-Key": key})
        assert result_of(response)["isError"] is True, fault
        responses.append(response)
    upstream.reset()
    # the upstream rejecting the key, and tool/protocol errors that come with a key
    responses.append(post(endpoint, body, headers={"X-API-Key": f"invalid-{key}"}))
    assert result_of(responses[-1])["structuredContent"]["error"]["type"] == "MissingApiKey"
    bad_args = {"tool_name": "GLOBAL_QUOTE", "arguments": {"symbol": "IBM", "apikey": key}}
    responses.append(post(endpoint, rpc("tools/call", tool_call("TOOL_CALL", bad_args)), headers={"X-API-Key": key}))
    responses.append(post(endpoint, rpc("tools/call", tool_call("NOPE")), query=f"apikey={key}"))
    responses.append(post(endpoint, b"{bad json", headers={"X-API-Key": key}))
    assert len(upstream.requests_snapshot(unmasked=True)) >= 1
    assert_secret_absent((key, f"invalid-{key}"), responses, caplog)


def test_server_key_secrets_never_appear_in_responses_or_logs(
    upstream: SampleUpstream, caplog: pytest.LogCaptureFixture
) -> None:
    token, server_key, wrong = "ToKeN-SeCrEt-987-9c4e2a7b5d1f", "SeRvEr-KeY-555", "WrOnG-ToKeN-321"
    endpoint = Endpoint.from_settings(
        settings_for(upstream, auth_mode="server-key", endpoint_tokens=(token,), api_key=server_key)
    )
    auth = {"Authorization": f"Bearer {token}"}
    body = rpc("tools/call", tool_call("TOOL_CALL", QUOTE_CALL))
    post(endpoint, body, headers=auth)
    caplog.set_level(logging.DEBUG)
    for name in ("httpx", "httpcore", "progressive_mcp"):
        caplog.set_level(logging.DEBUG, logger=name)
    responses = [
        post(endpoint, body, headers=auth),
        call_modern(endpoint, "tools/call", tool_call("TOOL_CALL", QUOTE_CALL), headers=auth),
        post(endpoint, body, headers={"Authorization": f"Bearer {wrong}"}),
        post(endpoint, body, headers={"Authorization": f"Bearer {token}x"}),
        post(endpoint, body, headers={"X-API-Key": token}),
    ]
    upstream.update_faults({"rate_limit": True})
    responses.append(post(endpoint, body, headers=auth))
    assert result_of(responses[-1])["isError"] is True
    upstream.reset()
    assert [r.status for r in responses] == [200, 200, 401, 401, 401, 200]
    assert_secret_absent((token, server_key, wrong), responses, caplog)


# --- concurrency ------------------------------------------------------------------------------------


def test_concurrent_requests_keep_their_own_key_and_surface(upstream: SampleUpstream) -> None:
    endpoint = Endpoint.from_settings(settings_for(upstream))
    catalog = endpoint.surface.catalog
    variants: list[tuple[str, str | None]] = [
        ("progressive", None),
        ("direct", None),
        ("hybrid", None),
        ("direct", "stocks"),
        ("hybrid", "stocks,forex"),
        ("progressive", "stocks"),
        ("direct", "stocks,crypto"),
        ("hybrid", "stocks"),
    ]
    symbols = [*COMPANIES, *(f"ZZ{i:02d}" for i in range(16 - len(COMPANIES)))]
    rounds = 6
    barrier = threading.Barrier(16)

    def expected_names(mode: str, categories: str | None) -> list[str]:
        cats = frozenset(categories.split(",")) if categories else None
        direct = [t.name for t in catalog.in_categories(cats)]
        return {"progressive": list(META_TOOL_NAMES), "direct": direct, "hybrid": [*META_TOOL_NAMES, *direct]}[mode]

    def worker(index: int) -> list[str]:
        mode, categories = variants[index % len(variants)]
        key, symbol = f"thread-key-{index:02d}", symbols[index]
        query = {"mode": mode} | ({"categories": categories} if categories else {})
        expected = expected_names(mode, categories)
        problems: list[str] = []
        barrier.wait(timeout=10)
        for round_ in range(rounds):
            modern = round_ % 2 == 1
            listed = (
                call_modern(endpoint, "tools/list", query=query)
                if modern
                else post(endpoint, rpc("tools/list"), query=query)
            )
            if tool_names(result_of(listed)) != expected:
                problems.append(f"thread {index}: wrong tool list for {query}")
            if mode == "direct":
                params = tool_call("GLOBAL_QUOTE", {"symbol": symbol})
            else:
                params = tool_call("TOOL_CALL", {"tool_name": "GLOBAL_QUOTE", "arguments": {"symbol": symbol}})
            headers = {"X-API-Key": key} if index % 3 else {"Authorization": f"Bearer {key}"}
            if modern:
                called = call_modern(endpoint, "tools/call", params, query=query, headers=headers)
            else:
                called = post(endpoint, rpc("tools/call", params, f"{index}-{round_}"), query=query, headers=headers)
            result = result_of(called)
            if called.exchange.mode != mode or called.exchange.tool != "GLOBAL_QUOTE":
                problems.append(f"thread {index}: exchange {called.exchange}")
            if symbol in COMPANIES:
                if result["isError"] or result["structuredContent"]["data"]["Global Quote"]["01. symbol"] != symbol:
                    problems.append(f"thread {index}: answer for another call: {result}")
            elif not result["isError"] or f"symbol={symbol}" not in result["structuredContent"]["error"]["message"]:
                problems.append(f"thread {index}: unexpected answer for unknown {symbol}: {result}")
        return problems

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads often, so shared per-request state would show
    try:
        with ThreadPoolExecutor(max_workers=16) as pool:
            problems = [p for found in pool.map(worker, range(16)) for p in found]
    finally:
        sys.setswitchinterval(interval)
    assert problems == []

    key_for = {symbols[i]: f"thread-key-{i:02d}" for i in range(16)}
    raw = upstream.requests_snapshot(unmasked=True)
    assert len(raw) == 16 * rounds
    for request in raw:
        assert request["function"] == "GLOBAL_QUOTE"
        assert request["apikey"] == key_for[request["symbol"]], request
    counts = {s: sum(1 for r in raw if r["symbol"] == s) for s in symbols}
    assert counts == dict.fromkeys(symbols, rounds)


# --- keys that cannot be secrets ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "key", ["k", "ab", "has space", "kéy-ключ", "\ud800abcdef"], ids=["1", "2", "space", "utf8", "lone"]
)
def test_a_passthrough_key_that_cannot_be_a_secret_is_refused_clearly(
    endpoint: Endpoint, upstream: SampleUpstream, key: str
) -> None:
    response = post(endpoint, rpc("tools/call", tool_call("TOOL_CALL", QUOTE_CALL)), headers={"X-API-Key": key})
    error = error_of(response, 401, INVALID_REQUEST)
    assert "The API key sent with this request" in error["message"]
    assert upstream.requests_snapshot(unmasked=True) == []


def test_a_lone_surrogate_key_through_a_lambda_event_is_answered_not_raised(shared_upstream: SampleUpstream) -> None:
    """Endpoint.handle never raises: a lone surrogate in x-api-key or a bearer token used to crash redact()."""
    from lambda_fn.handler import request_from_event

    for headers in ({"x-api-key": "\ud800secret"}, {"authorization": "Bearer \udfffsecret"}):
        event = {
            "version": "2.0",
            "rawPath": "/mcp",
            "headers": {"content-type": "application/json", **headers},
            "requestContext": {"http": {"method": "POST", "path": "/mcp"}},
            "body": json.dumps(rpc("tools/call", tool_call("TOOL_CALL", QUOTE_CALL))),
        }
        response = Endpoint.from_settings(settings_for(shared_upstream)).handle(request_from_event(event))
        assert response.status == 401


def test_a_server_key_that_cannot_be_a_secret_fails_calls_with_503(upstream: SampleUpstream) -> None:
    endpoint = Endpoint.from_settings(
        settings_for(upstream, auth_mode="server-key", endpoint_tokens=(TOKEN_A,), api_key="k")
    )
    response = post(endpoint, rpc("tools/list"), headers={"Authorization": f"Bearer {TOKEN_A}"})
    error = error_of(response, 503, INTERNAL_ERROR)
    assert "operator" in error["message"] and "k" not in error["message"].split()


def test_echoed_input_is_capped(endpoint: Endpoint) -> None:
    """A megabyte of tool name or protocol version must not come back (several times) in the answer."""
    huge = "N" * 960_000
    for message in (
        rpc("tools/call", tool_call(huge)),
        rpc("tools/call", tool_call("TOOL_GET", {"tool_name": [huge[:400_000], "ALSO_" + huge[:400_000]]})),
        rpc("tools/call", tool_call("TOOL_CALL", {"tool_name": huge, "arguments": {}})),
    ):
        response = post(endpoint, message)
        assert response.status == 200 and len(response.body) < 4_000, len(response.body)
    versioned = post(endpoint, rpc("ping"), headers={"MCP-Protocol-Version": "9" * 100_000})
    assert versioned.status == 400 and len(versioned.body) < 2_000


def test_fresh_mode_and_category_pairs_build_no_search_index(shared_upstream: SampleUpstream) -> None:
    """A flood of new ?mode=/?categories= pairs: each variant shares the one search index (filtered at query
    time) and the catalog tools' definitions, so it costs no index build and little memory."""
    import itertools
    import tracemalloc

    fresh = Endpoint.from_settings(settings_for(shared_upstream))
    categories = list(fresh.surface.catalog.categories)
    pairs = [
        (mode, ",".join(combo))
        for combo in itertools.combinations(categories, 2)
        for mode in ("progressive", "direct", "hybrid")
    ][:150]
    post(fresh, rpc("tools/list"))
    tracemalloc.start()
    try:
        for mode, chosen in pairs:
            response = post(fresh, rpc("tools/list"), query={"mode": mode, "categories": chosen})
            assert response.status == 200
            found = post(
                fresh, rpc("tools/call", tool_call("TOOL_SEARCH", {"query": "price"})), query={"categories": chosen}
            )
            names = [hit["category"] for hit in result_of(found)["structuredContent"]["results"]]
            assert set(names) <= set(chosen.split(","))  # the shared index, filtered to the URL's categories
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    variants = list(fresh._surfaces.values())
    assert len(variants) > 1
    assert all(v.meta.index is fresh.surface.meta.index for v in variants)
    assert peak < 40 * 1024 * 1024, peak
