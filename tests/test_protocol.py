"""The HTTP endpoint's protocol, proven against the official wire types (`mcp_types`) it no longer imports.

The endpoint checks requests with JSON Schemas generated from `mcp_types`' request models (progressive_mcp/
surfaces/_mcp_snapshot.py) and writes results as plain JSON, so a cold start never builds mcp_types' pydantic
models. These tests hold it to the official types:
- the snapshot is exactly what `protocol_build.build()` derives from the installed mcp_types;
- for every served method and protocol version, `request_problem` accepts and rejects exactly what
  `mcp_types.methods.validate_client_request` accepts and rejects, on a corpus of valid requests and their
  mutations (each member removed, each given a value of every JSON type);
- for every served method, protocol version and mode, what the endpoint writes is already what
  `mcp_types.methods.serialize_server_result` makes of it (validated, unknown members dropped, no nulls);
- importing the Lambda handler imports neither mcp_types nor pydantic's models of the protocol.

Run with: .venv/bin/python -m pytest tests/test_protocol.py -q
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp_types import methods
from pydantic import ValidationError
from test_endpoint import (
    HANDSHAKE_VERSIONS,
    MODERN,
    QUOTE_CALL,
    call_modern,
    post,
    result_of,
    rpc,
    settings_for,
)

from progressive_mcp.offline.sample_upstream import SampleUpstream
from progressive_mcp.surfaces import _mcp_snapshot as snapshot
from progressive_mcp.surfaces import protocol, protocol_build
from progressive_mcp.surfaces.endpoint import HANDSHAKE_METHODS, MODERN_METHODS, Endpoint
from progressive_mcp.surfaces.protocol import request_problem

ROOT = Path(__file__).resolve().parent.parent
MODERN_META = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {}}
WRONG_VALUES: list[Any] = [5, -1, 1.5, "s", "5", "", [], ["x"], {}, {"x": 1}, None, True, False]
CLIENT_INFO = {"name": "test-client", "version": "1.0", "title": "Test"}


# --- the snapshot ------------------------------------------------------------------------------------


def test_the_snapshot_is_what_the_installed_mcp_types_gives() -> None:
    built = protocol_build.build()
    stored = {name: getattr(snapshot, name) for name in built}
    assert stored == built, "regenerate with: .venv/bin/python -m progressive_mcp.surfaces.protocol_build"


def test_the_snapshot_covers_every_method_the_endpoint_serves_at_every_version() -> None:
    for version in HANDSHAKE_VERSIONS:
        for method in HANDSHAKE_METHODS:
            assert version in snapshot.REQUESTS[method], (method, version)
    for method in MODERN_METHODS:
        assert MODERN in snapshot.REQUESTS[method], method
    assert set(protocol.KNOWN_PROTOCOL_VERSIONS) == {*HANDSHAKE_VERSIONS, MODERN}


def test_annotations_are_stripped_but_properties_named_like_them_stay() -> None:
    schema = {
        "title": "X",
        "description": "d",
        "properties": {"title": {"type": "string", "description": "a name"}, "default": {"type": "integer"}},
        "anyOf": [{"type": "object", "default": {}}],
    }
    assert protocol_build.strip_annotations(schema) == {
        "properties": {"title": {"type": "string"}, "default": {"type": "integer"}},
        "anyOf": [{"type": "object"}],
    }


# --- requests: the same verdicts as mcp_types ------------------------------------------------------------


def valid_params(method: str, version: str) -> dict[str, Any]:
    params: dict[str, Any] = {
        "initialize": {
            "protocolVersion": version,
            "capabilities": {"roots": {"listChanged": True}, "sampling": {}},
            "clientInfo": dict(CLIENT_INFO),
        },
        "tools/call": {"name": "TOOL_SEARCH", "arguments": {"query": "apple price"}},
        "tools/list": {"cursor": "c1"},
    }.get(method, {})
    if version == MODERN:
        params = {**params, "_meta": copy.deepcopy(MODERN_META)}
    return copy.deepcopy(params)


def mutations(params: dict[str, Any]) -> Iterator[dict[str, Any] | None]:
    """The params, then each member removed or given a value of every JSON type, one and two levels down, and
    `_meta` (which every request may carry) given such values too."""
    yield params
    yield None
    for key, value in params.items():
        without = copy.deepcopy(params)
        del without[key]
        yield without
        for wrong in WRONG_VALUES:
            yield {**copy.deepcopy(params), key: wrong}
        if isinstance(value, dict):
            for inner in value:
                dropped = copy.deepcopy(params)
                del dropped[key][inner]
                yield dropped
                for wrong in WRONG_VALUES:
                    changed = copy.deepcopy(params)
                    changed[key][inner] = wrong
                    yield changed
    for wrong in WRONG_VALUES:
        yield {**copy.deepcopy(params), "unexpected": wrong}
    for wrong in WRONG_VALUES:
        yield {**copy.deepcopy(params), "_meta": wrong}
        yield {**copy.deepcopy(params), "_meta": {**params.get("_meta", {}), "progressToken": wrong}}


SERVED = sorted((method, version) for method, versions in snapshot.REQUESTS.items() for version in versions)


def official_verdict(method: str, version: str, params: dict[str, Any] | None, *, strict: bool) -> bool:
    """Whether mcp_types accepts the request: as `validate_client_request` does (lax: pydantic may coerce, e.g.
    `true` into a progress token of 1), or with the same model validated strictly (no coercion)."""
    try:
        if strict:
            body = {"jsonrpc": "2.0", "id": 0, "method": method, **({} if params is None else {"params": params})}
            methods.CLIENT_REQUESTS[(method, version)].model_validate(body, strict=True, by_name=False)
        else:
            methods.validate_client_request(method, version, params)
    except ValidationError:
        return False
    return True


@pytest.mark.parametrize(("method", "version"), SERVED)
def test_requests_get_the_verdict_mcp_types_gives(method: str, version: str) -> None:
    """The same verdict as mcp_types' model validated strictly; where its lax default differs, only because it
    coerced a value the protocol's JSON types do not allow there (which this endpoint refuses)."""
    checked = accepted = coerced = 0
    for params in mutations(valid_params(method, version)):
        strict = official_verdict(method, version, params, strict=True)
        lax = official_verdict(method, version, params, strict=False)
        problem = request_problem(method, version, params)
        assert (problem is None) == strict, (params, problem)
        assert strict == lax or (lax and not strict), params  # strict never accepts what lax refuses
        checked += 1
        accepted += strict
        coerced += lax and not strict
    assert accepted >= 2 and checked - accepted >= 5  # the corpus has both kinds for every method
    assert coerced <= checked // 10, coerced


def test_problems_say_where_and_never_quote_the_request() -> None:
    secret = "sk-live-0123456789abcdef"
    assert request_problem("tools/call", "2025-11-25", {"arguments": {}}) == "name: required"
    assert request_problem("tools/call", "2025-11-25", {"name": 5}) == "name: must be string"
    assert request_problem("tools/call", "2025-11-25", None) == "params: required"
    for params in ({"name": secret, "arguments": secret}, {"name": [secret]}, {"name": "x", "_meta": secret}):
        problem = request_problem("tools/call", "2025-11-25", params)
        assert problem is not None and secret not in problem
    info = {"protocolVersion": "2025-11-25", "capabilities": secret, "clientInfo": CLIENT_INFO}
    problem = request_problem("initialize", "2025-11-25", info)
    assert problem is not None and problem.startswith("capabilities:") and secret not in problem


def test_lone_surrogates_and_deep_nesting_get_verdicts_not_crashes() -> None:
    """Found by tests/test_fuzz.py: jsonschema-rs cannot take a lone surrogate, nor describe a wrong value nested
    hundreds of levels deep. The first is checked with the surrogate replaced (same shape, same verdict as
    mcp_types gives the original); the second is refused without saying where. (mcp_types itself refuses values
    nested more than ~250 levels even where the protocol allows any JSON, a limit of pydantic's: a client's
    capabilities that deep are accepted here.)"""
    info = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "\ud800", "version": "1"}}
    assert request_problem("initialize", "2025-06-18", info) is None
    assert official_verdict("initialize", "2025-06-18", info, strict=True)
    info["capabilities"] = "\ud800"
    assert request_problem("initialize", "2025-06-18", info) == "capabilities: must be object"
    deep: Any = "x"
    for _ in range(400):
        deep = [deep]
    problem = request_problem("tools/call", "2025-11-25", {"name": deep})
    assert problem is not None and "nested too deeply" in problem
    assert not official_verdict("tools/call", "2025-11-25", {"name": deep}, strict=False)


def test_the_endpoint_answers_a_bad_request_with_the_problem(endpoint: Endpoint) -> None:
    response = post(endpoint, rpc("tools/call", {"name": 7}), headers={"MCP-Protocol-Version": "2025-06-18"})
    body = response.json()
    assert body["error"]["code"] == protocol.INVALID_PARAMS
    assert body["error"]["message"] == "Invalid params for tools/call: name: must be string"


# --- results: already what mcp_types' serializer makes of them --------------------------------------------


@pytest.fixture(scope="module")
def endpoint(upstream: SampleUpstream) -> Endpoint:
    return Endpoint.from_settings(settings_for(upstream, conformance_fixtures=True))


CALLS: list[tuple[str, dict[str, Any], str]] = [  # (mode, tools/call params, what it shows)
    ("progressive", {"name": "TOOL_LIST", "arguments": {}}, "a discovery answer"),
    ("progressive", {"name": "TOOL_SEARCH", "arguments": {"query": "apple stock price"}}, "search hits"),
    ("progressive", {"name": "TOOL_GET", "arguments": {"tool_name": "TIME_SERIES_DAILY"}}, "a schema"),
    ("progressive", {"name": "TOOL_CALL", "arguments": QUOTE_CALL}, "an upstream answer"),
    ("progressive", {"name": "TOOL_CALL", "arguments": {"tool_name": "GLOBAL_QUOTE"}}, "a tool error"),
    ("progressive", {"name": "TOOL_GET", "arguments": {"tool_name": "NOPE"}}, "an unknown tool"),
    (
        "progressive",
        {"name": "TOOL_CALL", "arguments": {"tool_name": "TIME_SERIES_DAILY", "arguments": {"symbol": "IBM"}}},
        "a result cut to the token budget",
    ),
    ("direct", {"name": "GLOBAL_QUOTE", "arguments": {"symbol": "IBM"}}, "a direct tool"),
    ("direct", {"name": "NEWS_SENTIMENT", "arguments": {"tickers": "AAPL"}}, "structured content"),
    ("hybrid", {"name": "TOOL_CALL", "arguments": QUOTE_CALL}, "hybrid's TOOL_CALL"),
    ("code", {"name": "TOOL_GET", "arguments": {"tool_name": "GLOBAL_QUOTE"}}, "a typed stub"),
    ("code", {"name": "TOOL_EXECUTE", "arguments": {"code": "1 + 1"}}, "a script's answer"),
    ("code", {"name": "TOOL_EXECUTE", "arguments": {"code": "raise ValueError('x')"}}, "a script's error"),
    ("progressive", {"name": "test_logging_tool", "arguments": {}}, "a conformance fixture"),
]


def canonical(method: str, version: str, result: dict[str, Any]) -> dict[str, Any]:
    return methods.serialize_server_result(method, version, result)


def handshake(endpoint: Endpoint, method: str, params: dict[str, Any] | None, version: str, query: str = "") -> Any:
    headers = {} if method == "initialize" else {"MCP-Protocol-Version": version}
    return result_of(post(endpoint, rpc(method, params), headers=headers, query=query or None))


@pytest.mark.parametrize("version", HANDSHAKE_VERSIONS)
def test_handshake_results_are_already_canonical(endpoint: Endpoint, version: str) -> None:
    init = {"protocolVersion": version, "capabilities": {}, "clientInfo": CLIENT_INFO}
    for method, params in (("initialize", init), ("ping", None), ("tools/list", None)):
        result = handshake(endpoint, method, params, version)
        assert canonical(method, version, result) == result, method
    for method in ("prompts/list", "resources/list", "resources/templates/list"):
        result = handshake(endpoint, method, None, version)
        assert canonical(method, version, result) == result, method
    for mode in ("progressive", "direct", "hybrid", "code"):
        result = handshake(endpoint, "tools/list", None, version, f"mode={mode}")
        assert canonical("tools/list", version, result) == result, mode


def test_modern_results_are_already_canonical(endpoint: Endpoint) -> None:
    for method in MODERN_METHODS:
        if method == "tools/call":
            continue
        result = result_of(call_modern(endpoint, method))
        assert canonical(method, MODERN, result) == result, method
    for mode in ("progressive", "direct", "hybrid", "code"):
        result = result_of(call_modern(endpoint, "tools/list", query=f"mode={mode}"))
        assert canonical("tools/list", MODERN, result) == result, mode


@pytest.mark.parametrize(("mode", "params", "shows"), CALLS, ids=[c[2] for c in CALLS])
def test_tool_results_are_already_canonical(endpoint: Endpoint, mode: str, params: dict[str, Any], shows: str) -> None:
    for version in (*HANDSHAKE_VERSIONS, MODERN):
        query = f"mode={mode}"
        if version == MODERN:
            response = call_modern(endpoint, "tools/call", params, query=query)
        else:
            response = post(endpoint, rpc("tools/call", params), headers={"MCP-Protocol-Version": version}, query=query)
        result = result_of(response)
        assert canonical("tools/call", version, result) == result, (version, shows)


@pytest.mark.parametrize("spec", ["tests/fixtures/lastfm/lastfm.yaml", "tests/fixtures/openapi/tasks/openapi.yaml"])
def test_tools_lists_of_other_catalogs_are_canonical(upstream: SampleUpstream, spec: str) -> None:
    other = Endpoint.from_settings(settings_for(upstream, spec_path=ROOT / spec))
    for mode in ("progressive", "direct", "code"):
        for version in ("2025-11-25", MODERN):
            if version == MODERN:
                result = result_of(call_modern(other, "tools/list", query=f"mode={mode}"))
            else:
                result = handshake(other, "tools/list", None, version, f"mode={mode}")
            assert result["tools"]
            assert canonical("tools/list", version, result) == result, (spec, mode, version)


# --- the cold path ----------------------------------------------------------------------------------------


@pytest.mark.slow
def test_the_lambda_handler_does_not_import_mcp_types() -> None:
    code = (
        "import sys, json; import lambda_fn.handler; "
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in ('mcp_types', 'mcp'))))"
    )
    env = {**os.environ, "POWERTOOLS_LOG_LEVEL": "WARNING", "POWERTOOLS_METRICS_DISABLED": "true"}
    env.pop("PMCP_SPEC", None)
    completed = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=True, timeout=120
    )
    assert json.loads(completed.stdout.strip().splitlines()[-1]) == []
