"""The Lambda handler: payload-2.0 events (API Gateway HTTP API, Function URL) in, proxy results out; logs; EMF metrics.

The events in tests/fixtures/events/ follow AWS's documented payload-2.0 shapes. Powertools writes log lines
and EMF metrics as JSON lines on stdout; `out` captures both (the Logger's stream is bound at import, so it is
pointed at capsys's stdout for the test).
"""

from __future__ import annotations

import base64
import copy
import json
import logging
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lambda_fn import handler as handler_module
from lambda_fn.handler import make_handler, request_from_event, result_from_response
from lambda_fn.local import LocalContext
from progressive_mcp.offline.sample_upstream import Faults, SampleUpstream
from progressive_mcp.settings import Settings
from progressive_mcp.surfaces.endpoint import Endpoint, HttpResponse
from progressive_mcp.surfaces.metatools import META_TOOL_NAMES

ROOT = Path(__file__).resolve().parent.parent
EVENTS = Path(__file__).resolve().parent / "fixtures" / "events"

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
INVALID_PARAMS = -32602

# Distinctive values that must never reach a log line.
CALLER_KEY = "CaLlEr-KeY-5b7d1f"
SERVER_KEY = "SeRvEr-KeY"
TOKEN = "TokEn-XYZ-4c8e1b7d3f9a2e6c"
HEADER_MARKER = "HeAdEr-MaRkEr-31"
QUERY_MARKER = "QuErY-MaRkEr-77"
BODY_MARKER = "BoDy-MaRkEr-42"


# --- helpers ---------------------------------------------------------------------------------------


def load_event(name: str) -> dict[str, Any]:
    return json.loads((EVENTS / name).read_text())


def rpc(method: str, params: dict[str, Any] | None = None, request_id: Any = 1) -> str:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        message["params"] = params
    return json.dumps(message)


def quote_call(symbol: str = "IBM", request_id: Any = 1) -> str:
    arguments = {"tool_name": "GLOBAL_QUOTE", "arguments": {"symbol": symbol}}
    return rpc("tools/call", {"name": "TOOL_CALL", "arguments": arguments}, request_id)


def api_event(
    body: str,
    *,
    headers: dict[str, str] | None = None,
    query: str = "",
    request_id: str | None = "req-0001",
    method: str = "POST",
) -> dict[str, Any]:
    """The API Gateway fixture with another body, extra headers, a query string and request id."""
    event = load_event("apigw_http_v2.json")
    event["body"] = body
    event["headers"]["content-length"] = str(len(body.encode()))
    event["headers"].update({k.lower(): v for k, v in (headers or {}).items()})
    event["rawQueryString"] = query
    event["requestContext"]["http"]["method"] = method
    if request_id is None:
        del event["requestContext"]["requestId"]
    else:
        event["requestContext"]["requestId"] = request_id
    return event


def ctx(request_id: str = "ctx-req-0001") -> LocalContext:
    return LocalContext(aws_request_id=request_id)


def body_json(result: dict[str, Any]) -> Any:
    return json.loads(result["body"])


def json_lines(text: str) -> list[dict[str, Any]]:
    lines = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("{"):
            lines.append(json.loads(line))
    return lines


def request_logs(text: str) -> list[dict[str, Any]]:
    return [line for line in json_lines(text) if line.get("message") == "request"]


def emf_lines(text: str) -> list[dict[str, Any]]:
    return [line for line in json_lines(text) if "_aws" in line]


def metric_names(emf: dict[str, Any]) -> set[str]:
    return {m["Name"] for m in emf["_aws"]["CloudWatchMetrics"][0]["Metrics"]}


def dimension_names(emf: dict[str, Any]) -> set[str]:
    return {name for group in emf["_aws"]["CloudWatchMetrics"][0]["Dimensions"] for name in group}


class CurrentStdout:
    """A stream that writes to whatever sys.stdout is at the time (capsys swaps it around each test phase)."""

    def write(self, text: str) -> int:
        return sys.stdout.write(text)

    def flush(self) -> None:
        sys.stdout.flush()


class Output:
    def __init__(self, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture) -> None:
        self.capsys = capsys
        self.caplog = caplog

    def read(self) -> str:
        captured = self.capsys.readouterr()
        return captured.out

    def everything(self) -> str:
        """stdout, stderr and every stdlib log record (any logger, DEBUG and up) so far."""
        captured = self.capsys.readouterr()
        records = "\n".join(
            f"{r.name} {r.getMessage()} {json.dumps({k: str(v) for k, v in vars(r).items()})}"
            for r in self.caplog.records
        )
        return "\n".join([captured.out, captured.err, self.caplog.text, records])


# --- fixtures --------------------------------------------------------------------------------------


@pytest.fixture
def out(
    capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> Output:
    monkeypatch.delenv("POWERTOOLS_METRICS_DISABLED", raising=False)
    monkeypatch.delenv("POWERTOOLS_DEV", raising=False)
    # Powertools bound its handler to the sys.stdout of import time; send it to capsys's stdout instead.
    monkeypatch.setattr(handler_module.logger.registered_handler, "stream", CurrentStdout())
    caplog.set_level(logging.DEBUG)
    return Output(capsys, caplog)


@pytest.fixture
def upstream() -> Iterator[SampleUpstream]:
    with SampleUpstream() as up:
        yield up


def passthrough(up: SampleUpstream, **overrides: Any) -> Endpoint:
    return Endpoint.from_settings(Settings.from_env({}, upstream_url=up.url, upstream_retries=0, **overrides))


def server_key(up: SampleUpstream) -> Endpoint:
    settings = Settings.from_env(
        {},
        auth_mode="server-key",
        endpoint_tokens=(TOKEN,),
        api_key=SERVER_KEY,
        upstream_url=up.url,
        upstream_retries=0,
    )
    return Endpoint.from_settings(settings)


# --- the fixture events ----------------------------------------------------------------------------


def test_apigw_default_stage_tools_list(upstream: SampleUpstream) -> None:
    event = load_event("apigw_http_v2.json")
    result = make_handler(passthrough(upstream))(event, ctx())
    assert result["statusCode"] == 200
    assert result["headers"]["Content-Type"] == "application/json"
    assert result["isBase64Encoded"] is False
    answer = body_json(result)
    assert answer["jsonrpc"] == "2.0" and answer["id"] == 1
    assert [t["name"] for t in answer["result"]["tools"]] == list(META_TOOL_NAMES)


def test_apigw_named_stage_prefix_is_stripped(upstream: SampleUpstream) -> None:
    event = load_event("apigw_http_v2_stage.json")
    assert event["rawPath"] == "/prod/mcp" and event["requestContext"]["stage"] == "prod"
    assert request_from_event(event).path == "/mcp"
    result = make_handler(passthrough(upstream))(event, ctx())
    assert result["statusCode"] == 200, result["body"]
    answer = body_json(result)
    assert answer["id"] == "list-7"
    # the query string came through: ?mode=direct&categories=forex lists the forex tools themselves
    names = [t["name"] for t in answer["result"]["tools"]]
    assert names and all(n.startswith("FX_") or n == "CURRENCY_EXCHANGE_RATE" for n in names)


def test_stage_prefix_only_stripped_for_the_events_own_stage(upstream: SampleUpstream) -> None:
    # The same path on the $default stage is a real path /prod/mcp: not the endpoint.
    event = load_event("apigw_http_v2_stage.json")
    event["requestContext"]["stage"] = "$default"
    result = make_handler(passthrough(upstream))(event, ctx())
    assert result["statusCode"] == 404
    # A stage name that is only a prefix of the first segment is not stripped either.
    event = load_event("apigw_http_v2_stage.json")
    event["rawPath"] = event["requestContext"]["http"]["path"] = "/production/mcp"
    assert request_from_event(event).path == "/production/mcp"


def test_function_url_base64_body_is_decoded(upstream: SampleUpstream) -> None:
    event = load_event("function_url.json")
    assert event["isBase64Encoded"] is True
    assert ".lambda-url." in event["requestContext"]["domainName"]
    with pytest.raises(ValueError):
        json.loads(event["body"])  # really encoded: the handler has to decode it
    request = request_from_event(event)
    assert json.loads(request.body)["method"] == "initialize"
    result = make_handler(passthrough(upstream))(event, ctx())
    assert result["statusCode"] == 200, result["body"]
    assert result["headers"]["Content-Type"] == "application/json"
    answer = body_json(result)
    assert answer["id"] == 0
    assert answer["result"]["protocolVersion"] == "2025-06-18"
    assert answer["result"]["serverInfo"]["name"] == "progressive-mcp"


def test_function_url_get_is_405_allow_post(upstream: SampleUpstream) -> None:
    event = load_event("function_url_get.json")
    result = make_handler(passthrough(upstream))(event, ctx())
    assert result["statusCode"] == 405
    assert result["headers"]["Allow"] == "POST"
    assert result["headers"]["Content-Type"] == "application/json"
    assert body_json(result)["error"]["code"] == INVALID_REQUEST


def test_body_that_claims_base64_but_is_not_is_a_parse_error(upstream: SampleUpstream) -> None:
    event = load_event("function_url.json")
    event["body"] = '{"jsonrpc":"2.0","id":1,"method":"tools/list"}'  # plain JSON, flagged as base64
    result = make_handler(passthrough(upstream))(event, ctx())
    assert result["statusCode"] == 400
    answer = body_json(result)
    assert answer["error"]["code"] == PARSE_ERROR
    assert answer["id"] is None


def test_result_from_response_shape() -> None:
    body = '{"jsonrpc":"2.0","id":1,"result":{"text":"café ✓"}}'
    response = HttpResponse(200, {"Content-Type": "application/json", "Vary": "Origin"}, body.encode())
    assert result_from_response(response) == {
        "statusCode": 200,
        "headers": {"Content-Type": "application/json", "Vary": "Origin"},
        "body": body,
        "isBase64Encoded": False,
    }
    empty = result_from_response(HttpResponse(202, {}, b""))
    assert empty == {"statusCode": 202, "headers": {}, "body": "", "isBase64Encoded": False}
    assert isinstance(empty["body"], str)


def test_request_from_event_fallbacks() -> None:
    event = {
        "requestContext": {"http": {"method": "post", "path": "/mcp"}},
        "rawQueryString": "apikey=a%20b&x=1&x=2",
        "headers": {"content-type": "application/json"},
        "body": "{}",
    }
    request = request_from_event(event)
    assert (request.method, request.path) == ("POST", "/mcp")  # http.path when rawPath is absent
    assert request.query == {"apikey": "a b", "x": "1"}
    assert request.body == b"{}"
    bare = request_from_event({})
    assert (bare.method, bare.path, bare.body) == ("GET", "/", b"")


# --- logs ------------------------------------------------------------------------------------------


def test_one_request_log_line_per_invocation_with_cold_start(upstream: SampleUpstream, out: Output) -> None:
    handle = make_handler(passthrough(upstream))
    event = load_event("apigw_http_v2.json")
    request_id = event["requestContext"]["requestId"]

    handle(event, ctx("aws-1"))
    first = request_logs(out.read())
    handle(event, ctx("aws-2"))
    handle(event, ctx("aws-3"))
    later = request_logs(out.read())

    assert len(first) == 1 and len(later) == 2
    line = first[0]
    assert line["correlation_id"] == request_id
    assert line["cold_start"] is True
    assert line["rpc_method"] == "tools/list"
    assert line["status"] == 200
    assert line["function_request_id"] == "aws-1"
    assert line["level"] == "INFO" and line["service"] == "progressive-mcp"
    assert [entry["cold_start"] for entry in later] == [False, False]
    assert all(entry["correlation_id"] == request_id for entry in later)

    # A new handler (a new execution environment) starts cold again.
    make_handler(passthrough(upstream))(event, ctx("aws-4"))
    assert [entry["cold_start"] for entry in request_logs(out.read())] == [True]


def test_correlation_id_falls_back_to_the_context_request_id(upstream: SampleUpstream, out: Output) -> None:
    make_handler(passthrough(upstream))(api_event(rpc("ping"), request_id=None), ctx("ctx-only-id"))
    (line,) = request_logs(out.read())
    assert line["correlation_id"] == "ctx-only-id"
    assert line["rpc_method"] == "ping"


def test_a_lone_surrogate_in_the_method_still_gets_its_log_line(upstream: SampleUpstream, out: Output) -> None:
    """A "\\ud800" escape is valid JSON but no UTF-8: logged as it came, the line failed to write and was lost."""
    make_handler(passthrough(upstream))(api_event('{"jsonrpc":"2.0","id":1,"method":"\\ud800x"}'), ctx())
    captured = out.capsys.readouterr()
    (line,) = request_logs(captured.out)
    assert line["rpc_method"] == "\\ud800x"  # the escape, as text
    assert "Logging error" not in captured.err


def test_control_and_bidi_characters_in_the_method_are_escaped_in_its_log_line(
    upstream: SampleUpstream, out: Output
) -> None:
    """Issue 27, finding 14: the JSON of a log line keeps a bidi override as it is, and a terminal obeys it."""
    body = '{"jsonrpc":"2.0","id":1,"method":"ping\\u202e\\u001b[2Kx"}'
    make_handler(passthrough(upstream))(api_event(body), ctx())
    (line,) = request_logs(out.capsys.readouterr().out)
    assert line["rpc_method"] == "ping\\u202e\\x1b[2Kx"


def test_log_keys_do_not_leak_between_invocations(upstream: SampleUpstream, out: Output) -> None:
    handle = make_handler(passthrough(upstream))
    handle(api_event(rpc("tools/list"), request_id="first-id"), ctx())
    handler_module.logger.info("between invocations")
    lines = json_lines(out.read())
    between = [line for line in lines if line.get("message") == "between invocations"]
    assert len(between) == 1
    assert "correlation_id" not in between[0] and "cold_start" not in between[0]


def test_concurrent_invocations_keep_their_own_log_keys(
    upstream: SampleUpstream, out: Output, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `serve` runs invocations on threads: each log line must carry its own request's keys.
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "true")  # print() of EMF lines may interleave across threads
    upstream.faults = Faults(delay_s=0.05)  # keep the tool calls in flight while the pings finish
    handle = make_handler(passthrough(upstream))
    handle(api_event(rpc("ping"), request_id="warm-up"), ctx())
    out.read()

    count = 8
    barrier = threading.Barrier(count)
    results: dict[int, dict[str, Any]] = {}

    def invoke(i: int) -> None:
        body = quote_call(request_id=i) if i % 2 == 0 else rpc("ping", request_id=i)
        event = api_event(body, query="apikey=key-one-1", request_id=f"conc-{i}")
        barrier.wait(timeout=5)
        results[i] = handle(event, ctx(f"aws-conc-{i}"))

    threads = [threading.Thread(target=invoke, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)
    assert sorted(results) == list(range(count))

    lines = request_logs(out.read())
    assert len(lines) == count
    by_id = {line["correlation_id"]: line for line in lines}
    assert sorted(by_id) == sorted(f"conc-{i}" for i in range(count))
    for i in range(count):
        line = by_id[f"conc-{i}"]
        assert line["function_request_id"] == f"aws-conc-{i}"
        assert line["cold_start"] is False
        if i % 2 == 0:
            assert (line["rpc_method"], line["tool"]) == ("tools/call", "GLOBAL_QUOTE")
            assert body_json(results[i])["id"] == i
        else:
            assert (line["rpc_method"], line.get("tool")) == ("ping", None)


def test_tool_call_log_names_the_catalog_tool(upstream: SampleUpstream, out: Output) -> None:
    event = api_event(quote_call(), query="apikey=key-one-1")
    result = make_handler(passthrough(upstream))(event, ctx())
    assert result["statusCode"] == 200
    assert body_json(result)["result"]["isError"] is False
    (line,) = request_logs(out.read())
    assert line["rpc_method"] == "tools/call"
    assert line["tool"] == "GLOBAL_QUOTE"
    assert line["status"] == 200
    assert line["mode"] == "progressive"
    assert isinstance(line["upstream_ms"], int | float) and line["upstream_ms"] >= 0
    assert line.get("tool_error") is None


def _secret_event(auth: str) -> dict[str, Any]:
    headers = {"user-agent": HEADER_MARKER, "x-custom-note": HEADER_MARKER}
    query = f"trace={QUERY_MARKER}"
    if auth == "x-api-key":
        headers["x-api-key"] = CALLER_KEY
    elif auth == "bearer":
        headers["authorization"] = f"Bearer {CALLER_KEY}"
    elif auth == "query":
        query = f"apikey={CALLER_KEY}&{query}"
    elif auth == "server-key":
        # the caller's own key in every place it could come from: ignored in server-key mode, never logged
        headers["authorization"] = f"Bearer {TOKEN}"
        headers["x-api-key"] = CALLER_KEY
        query = f"apikey={CALLER_KEY}&{query}"
    return api_event(quote_call(request_id=BODY_MARKER), headers=headers, query=query, request_id="secret-req")


FAULTS = {
    "ok": Faults(),
    "status-500": Faults(status=500),
    "rate-limited": Faults(rate_limit=True),  # the notice echoes the key it was sent
}


@pytest.mark.parametrize("fault", list(FAULTS))
@pytest.mark.parametrize("auth", ["x-api-key", "bearer", "query", "server-key"])
def test_logs_never_contain_keys_tokens_headers_query_or_body(
    upstream: SampleUpstream, out: Output, auth: str, fault: str
) -> None:
    upstream.faults = copy.copy(FAULTS[fault])
    endpoint = server_key(upstream) if auth == "server-key" else passthrough(upstream)
    result = make_handler(endpoint)(_secret_event(auth), ctx())

    # The call went through to the upstream, so the key was really in play.
    assert result["statusCode"] == 200, result["body"]
    assert len(upstream.requests_snapshot()) == 1
    answer = body_json(result)["result"]
    assert answer["isError"] is (fault != "ok"), answer
    if auth == "server-key":
        assert SERVER_KEY not in result["body"]  # the operator's key never reaches the caller either

    text = out.everything()
    (line,) = request_logs(text)
    assert line["tool"] == "GLOBAL_QUOTE" and line["correlation_id"] == "secret-req"
    assert (line.get("tool_error") is None) is (fault == "ok")
    for secret in (CALLER_KEY, SERVER_KEY, TOKEN, HEADER_MARKER, QUERY_MARKER, BODY_MARKER):
        assert secret not in text, f"{secret} leaked into the logs"
    assert "trace=" not in text and "apikey=" not in text.lower()


@pytest.mark.parametrize("token", [None, "WrOnG-ToKeN-88"])
def test_rejected_endpoint_token_is_not_logged(upstream: SampleUpstream, out: Output, token: str | None) -> None:
    headers = {"x-api-key": CALLER_KEY}
    if token is not None:
        headers["authorization"] = f"Bearer {token}"
    result = make_handler(server_key(upstream))(api_event(quote_call(), headers=headers), ctx())
    assert result["statusCode"] == 401
    assert "WWW-Authenticate" in result["headers"]
    assert upstream.requests_snapshot() == []
    text = out.everything()
    (line,) = request_logs(text)
    assert line["status"] == 401
    for secret in (CALLER_KEY, SERVER_KEY, TOKEN, "WrOnG-ToKeN-88"):
        assert secret not in text


# --- metrics ---------------------------------------------------------------------------------------


def test_emf_for_tools_list(upstream: SampleUpstream, out: Output) -> None:
    handle = make_handler(passthrough(upstream))
    handle(load_event("apigw_http_v2.json"), ctx())
    handle(load_event("apigw_http_v2.json"), ctx())
    first, second = emf_lines(out.read())
    directive = first["_aws"]["CloudWatchMetrics"][0]
    assert directive["Namespace"] == "ProgressiveMCP"
    assert isinstance(first["_aws"]["Timestamp"], int)
    assert first["method"] == "tools/list"
    assert "method" in dimension_names(first) and "tool" not in dimension_names(first)
    assert first["Requests"] == [1.0]
    assert metric_names(first) - {"ColdStart"} == {"Requests"}  # no error or latency metrics for a plain list
    assert metric_names(second) == {"Requests"}  # ColdStart, if counted, only on the first invocation


def test_emf_for_tool_call(upstream: SampleUpstream, out: Output) -> None:
    make_handler(passthrough(upstream))(api_event(quote_call(), query="apikey=key-one-1"), ctx())
    emf, by_service = emf_lines(out.read())  # the second line: counts by service alone, for alarms
    assert dimension_names(by_service) == {"service"}
    assert metric_names(by_service) == {"UpstreamCalls", "UpstreamErrors", "CacheMisses"}
    assert emf["_aws"]["CloudWatchMetrics"][0]["Namespace"] == "ProgressiveMCP"
    assert {"method", "tool"} <= dimension_names(emf)
    assert emf["method"] == "tools/call" and emf["tool"] == "GLOBAL_QUOTE"
    assert {"Requests", "UpstreamLatency"} <= metric_names(emf)
    assert "ProtocolErrors" not in metric_names(emf) and "ToolErrors" not in metric_names(emf)
    units = {m["Name"]: m["Unit"] for m in emf["_aws"]["CloudWatchMetrics"][0]["Metrics"]}
    assert units["UpstreamLatency"] == "Milliseconds"
    (latency,) = emf["UpstreamLatency"]
    assert latency >= 0


def test_emf_protocol_error(upstream: SampleUpstream, out: Output) -> None:
    handle = make_handler(passthrough(upstream))
    result = handle(api_event("{not json"), ctx())
    assert body_json(result)["error"]["code"] == PARSE_ERROR
    (emf,) = emf_lines(out.read())
    assert "ProtocolErrors" in metric_names(emf) and emf["ProtocolErrors"] == [1.0]
    assert emf["method"] == "none"

    result = handle(api_event(rpc("tools/call", {"name": "No-Such-Tool-QQ", "arguments": {}})), ctx())
    assert body_json(result)["error"]["code"] == INVALID_PARAMS
    (emf,) = emf_lines(out.read())
    assert "ProtocolErrors" in metric_names(emf)
    assert emf["method"] == "tools/call"
    assert emf["tool"] == "other"  # a caller cannot mint dimension values with made-up tool names
    assert "No-Such-Tool-QQ" not in json.dumps(emf)


def test_emf_tool_error(upstream: SampleUpstream, out: Output) -> None:
    # No key in passthrough mode: an isError result (MissingApiKey), not a protocol error.
    result = make_handler(passthrough(upstream))(api_event(quote_call()), ctx())
    assert result["statusCode"] == 200
    assert body_json(result)["result"]["isError"] is True
    (emf,) = emf_lines(out.read())
    assert "ToolErrors" in metric_names(emf) and emf["ToolErrors"] == [1.0]
    assert "ProtocolErrors" not in metric_names(emf)
    assert emf["tool"] == "GLOBAL_QUOTE"


def test_emf_unknown_method_is_other(upstream: SampleUpstream, out: Output) -> None:
    result = make_handler(passthrough(upstream))(api_event(rpc("evil/Method-Zz9")), ctx())
    assert body_json(result)["error"]["code"] == -32601
    (emf,) = emf_lines(out.read())
    assert emf["method"] == "other"
    assert "evil/Method-Zz9" not in json.dumps(emf)
    assert "ProtocolErrors" in metric_names(emf)


# --- the module as Lambda loads it ---------------------------------------------------------------


def test_module_level_handler_answers_tools_list() -> None:
    assert isinstance(handler_module.ENDPOINT, Endpoint)
    result = handler_module.handler(load_event("apigw_http_v2.json"), ctx())
    assert result["statusCode"] == 200
    tools = [t["name"] for t in body_json(result)["result"]["tools"]]
    assert set(META_TOOL_NAMES) <= set(tools)


@pytest.mark.spawns
def test_cold_import_in_a_fresh_interpreter() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PMCP_")}
    env["POWERTOOLS_METRICS_DISABLED"] = "true"
    code = (
        "import json, lambda_fn.handler as h; "
        "print(json.dumps([h.ENDPOINT.auth_mode, h.ENDPOINT.surface.mode, callable(h.handler)]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == ["passthrough", "progressive", True]
    assert "Traceback" not in done.stderr


def test_fixture_events_are_well_formed() -> None:
    for name in ("apigw_http_v2.json", "apigw_http_v2_stage.json", "function_url.json", "function_url_get.json"):
        event = load_event(name)
        assert event["version"] == "2.0", name
        context = event["requestContext"]
        assert context["http"]["path"] == event["rawPath"], name
        assert all(k == k.lower() for k in event["headers"]), name
        assert context["domainName"] == event["headers"]["host"], name
        body = event.get("body")
        if body is not None:
            raw = base64.b64decode(body) if event["isBase64Encoded"] else body.encode()
            assert event["headers"]["content-length"] == str(len(raw)), name


@pytest.mark.slow
def test_on_lambda_the_cores_log_lines_are_powertools_json_with_the_correlation_id() -> None:
    code = (
        "import json, logging\n"
        "from lambda_fn.handler import logger\n"
        "logger.thread_safe_append_keys(correlation_id='req-42')\n"
        "logging.getLogger('progressive_mcp.surfaces.surface').warning('response cache read failed')\n"
    )
    env = {**os.environ, "AWS_LAMBDA_FUNCTION_NAME": "progressive-mcp-test", "PMCP_UPSTREAM_URL": "http://127.0.0.1:9"}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    [line] = [json.loads(x) for x in done.stdout.splitlines() if x.startswith("{")]
    assert line["message"] == "response cache read failed" and line["level"] == "WARNING"
    assert line["correlation_id"] == "req-42" and line["service"] == "progressive-mcp"


def test_emf_counts_each_upstream_call_a_script_makes(upstream: SampleUpstream, out: Output) -> None:
    """A TOOL_EXECUTE's tool calls are upstream calls like any other: the alarms' counts must see them."""
    script = (
        'await GLOBAL_QUOTE(symbol="IBM")\ntry:\n    await GLOBAL_QUOTE(symbol="NOPE")\nexcept RuntimeError:\n    pass'
    )
    body = rpc("tools/call", {"name": "TOOL_EXECUTE", "arguments": {"code": script}})
    make_handler(passthrough(upstream))(api_event(body, query="mode=code&apikey=key-one-1"), ctx())
    emf, by_service = emf_lines(out.read())
    assert emf["tool"] == "TOOL_EXECUTE"
    assert by_service["UpstreamCalls"] == [1.0, 1.0]
    assert sorted(by_service["UpstreamErrors"]) == [0.0, 0.0]  # an unknown ticker is the caller's error
    assert by_service["CacheMisses"] == [1.0, 1.0]


def test_a_sandbox_that_cannot_start_is_a_tool_error_not_a_500(upstream: SampleUpstream, out: Output) -> None:
    from progressive_mcp.calls.sandbox import Sandbox
    from progressive_mcp.surfaces.surface import Surface

    endpoint = passthrough(upstream, mode="code")
    broken = Sandbox(binary_path="/nonexistent/monty")
    endpoint.surface = Surface(
        endpoint.surface.catalog, mode="code", upstream=endpoint.surface.upstream, sandbox=broken
    )
    endpoint._surfaces.clear()
    body = rpc("tools/call", {"name": "TOOL_EXECUTE", "arguments": {"code": "1 + 1"}})
    result = make_handler(endpoint)(api_event(body, query="apikey=key-one-1"), ctx())
    assert result["statusCode"] == 200
    answer = body_json(result)["result"]
    assert answer["isError"] is True and "sandbox is not available" in answer["content"][0]["text"]


def test_the_compact_schema_view_through_the_handler_and_its_url_variants(upstream: SampleUpstream) -> None:
    """PMCP_SCHEMA_VIEW=compact on the Lambda: TOOL_GET gives argument lines, on the default URL and on one that
    picks another mode (`?mode=hybrid`)."""
    endpoint = Endpoint.from_settings(Settings.from_env({"PMCP_SCHEMA_VIEW": "compact"}, upstream_url=upstream.url))
    handle = make_handler(endpoint)
    get = rpc("tools/call", {"name": "TOOL_GET", "arguments": {"tool_name": "GLOBAL_QUOTE"}})
    for query in ("", "mode=hybrid"):
        result = handle(api_event(get, query=query), ctx())
        assert result["statusCode"] == 200, result
        (entry,) = body_json(result)["result"]["structuredContent"]["tools"]
        assert "inputSchema" not in entry and entry["arguments"].startswith("symbol: string")
