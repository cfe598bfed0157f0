"""`progressive-mcp serve`: the Lambda handler behind real HTTP on 127.0.0.1 (LocalServer, build_event, the CLI)."""

from __future__ import annotations

import base64
import json
import os
import queue
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from lambda_fn.handler import make_handler, request_from_event
from lambda_fn.local import MAX_WIRE_BODY_BYTES, LocalServer, build_event
from progressive_mcp.endpoint import Endpoint
from progressive_mcp.metatools import META_TOOL_NAMES
from progressive_mcp.sample_upstream import ANCHOR, SampleUpstream
from progressive_mcp.settings import Settings

ROOT = Path(__file__).resolve().parent.parent
TOOLS_LIST = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
URL_LINE = re.compile(r"progressive-mcp: MCP endpoint at (http://127\.0\.0\.1:(\d+)/mcp)")


def quote_call(symbol: str = "IBM") -> dict[str, Any]:
    arguments = {"tool_name": "GLOBAL_QUOTE", "arguments": {"symbol": symbol}}
    return {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "TOOL_CALL", "arguments": arguments}}


class Recorder:
    """The Lambda handler, noting the thread (one per connection in ThreadingHTTPServer) and event of each call."""

    def __init__(self, handler: Any) -> None:
        self.handler = handler
        self.threads: list[str] = []
        self.events: list[dict[str, Any]] = []

    def __call__(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
        self.threads.append(threading.current_thread().name)
        self.events.append(event)
        return self.handler(event, context)


@pytest.fixture(scope="module")
def upstream() -> Iterator[SampleUpstream]:
    with SampleUpstream() as up:
        yield up


@pytest.fixture
def recorder(upstream: SampleUpstream) -> Recorder:
    endpoint = Endpoint.from_settings(Settings.from_env({}, upstream_url=upstream.url))
    return Recorder(make_handler(endpoint))


@pytest.fixture
def server(recorder: Recorder) -> Iterator[LocalServer]:
    with LocalServer(recorder, port=0) as srv:
        yield srv


# --- LocalServer ------------------------------------------------------------------------------------


def test_post_tools_list(server: LocalServer) -> None:
    assert server.url == f"http://127.0.0.1:{server.port}/mcp" and server.port > 0
    response = httpx.post(server.url, json=TOOLS_LIST, timeout=10)
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    assert int(response.headers["content-length"]) == len(response.content)
    answer = response.json()
    assert answer["id"] == 1
    assert [t["name"] for t in answer["result"]["tools"]] == list(META_TOOL_NAMES)


def test_tool_call_with_query_key_reaches_the_upstream(server: LocalServer, upstream: SampleUpstream) -> None:
    before = len(upstream.requests_snapshot())
    response = httpx.post(server.url, params={"apikey": "any-key"}, json=quote_call("AAPL"), timeout=10)
    assert response.status_code == 200
    result = response.json()["result"]
    assert result["isError"] is False
    assert result["structuredContent"]["data"]["Global Quote"]["01. symbol"] == "AAPL"
    log = upstream.requests_snapshot()[before:]
    assert [(r["function"], r["symbol"], r["apikey"]) for r in log] == [("GLOBAL_QUOTE", "AAPL", "***")]


def test_get_is_405_allow_post(server: LocalServer) -> None:
    response = httpx.get(server.url, headers={"Accept": "text/event-stream"}, timeout=10)
    assert response.status_code == 405
    assert response.headers["allow"] == "POST"
    assert response.json()["error"]["code"] == -32600


def test_cors_preflight_from_a_localhost_origin(server: LocalServer) -> None:
    origin = "http://localhost:5173"
    response = httpx.options(
        server.url,
        headers={
            "Origin": origin,
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "content-type, mcp-protocol-version, authorization",
        },
        timeout=10,
    )
    assert response.status_code == 204
    assert response.content == b""
    assert response.headers["access-control-allow-origin"] == origin
    assert "POST" in response.headers["access-control-allow-methods"]
    allowed = {h.strip().lower() for h in response.headers["access-control-allow-headers"].split(",")}
    assert {"content-type", "mcp-protocol-version", "authorization"} <= allowed
    assert "origin" in response.headers["vary"].lower()

    # The POST that follows carries the origin and gets it echoed back.
    post = httpx.post(server.url, json=TOOLS_LIST, headers={"Origin": origin}, timeout=10)
    assert post.status_code == 200
    assert post.headers["access-control-allow-origin"] == origin


def test_cors_foreign_origin_is_refused(server: LocalServer) -> None:
    response = httpx.post(server.url, json=TOOLS_LIST, headers={"Origin": "https://evil.example.com"}, timeout=10)
    assert response.status_code == 403
    assert "access-control-allow-origin" not in response.headers


def test_chunked_request_body(server: LocalServer, recorder: Recorder) -> None:
    raw = json.dumps(TOOLS_LIST).encode()

    def chunks() -> Iterator[bytes]:
        for i in range(0, len(raw), 7):
            yield raw[i : i + 7]

    response = httpx.post(server.url, content=chunks(), headers={"Content-Type": "application/json"}, timeout=10)
    assert response.status_code == 200, response.text
    assert response.json()["id"] == 1
    event = recorder.events[-1]
    assert event["headers"]["transfer-encoding"] == "chunked"
    assert event["body"] == raw.decode()


def test_host_header_must_be_loopback(server: LocalServer, recorder: Recorder) -> None:
    evil = httpx.post(server.url, json=TOOLS_LIST, headers={"Host": "evil.example.com"}, timeout=10)
    assert evil.status_code == 403
    evil_port = httpx.post(server.url, json=TOOLS_LIST, headers={"Host": f"evil.example.com:{server.port}"}, timeout=10)
    assert evil_port.status_code == 403
    assert recorder.events == []  # refused before the handler ran

    for host in (f"localhost:{server.port}", "localhost", f"127.0.0.1:{server.port}", f"[::1]:{server.port}"):
        ok = httpx.post(server.url, json=TOOLS_LIST, headers={"Host": host}, timeout=10)
        assert ok.status_code == 200, host
    assert recorder.events[0]["requestContext"]["domainName"] == f"localhost:{server.port}"


def _raw_exchange(port: int, request: bytes, *, timeout: float = 5.0) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(request)
        data = b""
        while True:
            try:
                chunk = sock.recv(65536)
            except ConnectionResetError:
                return data
            if not chunk:
                return data
            data += chunk


def test_content_length_over_10_mib_is_413_without_reading_the_body(server: LocalServer, recorder: Recorder) -> None:
    too_big = MAX_WIRE_BODY_BYTES + 1
    assert MAX_WIRE_BODY_BYTES == 10 * 1024 * 1024
    head = (
        f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {too_big}\r\n\r\n"
    ).encode()
    started = time.monotonic()
    # No body is sent at all: a server that tried to read it would wait until the socket timeout.
    reply = _raw_exchange(server.port, head)
    assert time.monotonic() - started < 4
    status_line, _, rest = reply.partition(b"\r\n")
    assert status_line.split()[1] == b"413", reply[:200]
    assert b"connection: close" in rest.lower()
    assert recorder.events == []


def test_body_under_the_wire_limit_reaches_the_endpoint(server: LocalServer) -> None:
    # Just under the wire limit, but over the endpoint's own body limit (1 MiB): the endpoint answers 413.
    body = b" " * (2 * 1024 * 1024)
    response = httpx.post(server.url, content=body, headers={"Content-Type": "application/json"}, timeout=20)
    assert response.status_code == 413
    assert response.json()["error"]["code"] == -32600


def test_malformed_chunk_size_is_a_400(server: LocalServer, recorder: Recorder) -> None:
    request = (
        f"POST /mcp HTTP/1.1\r\nHost: localhost:{server.port}\r\nContent-Type: application/json\r\n"
        "Transfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n"
    ).encode()
    reply = _raw_exchange(server.port, request)
    assert reply.startswith(b"HTTP/1.1 400 "), reply[:200]
    assert recorder.events == []


def test_negative_content_length_is_a_400(server: LocalServer, recorder: Recorder) -> None:
    body = json.dumps(TOOLS_LIST).encode()
    request = (
        f"POST /mcp HTTP/1.1\r\nHost: localhost:{server.port}\r\nContent-Type: application/json\r\n"
        "Content-Length: -5\r\nConnection: close\r\n\r\n"
    ).encode() + body
    reply = _raw_exchange(server.port, request)
    assert reply.startswith(b"HTTP/1.1 400 "), reply[:200]
    assert b"Bad Content-Length" in reply
    assert recorder.events == []


@pytest.mark.parametrize("declared", ["+5", "5_0", "0x10"])
def test_content_length_with_a_sign_or_separators_is_a_400(
    server: LocalServer, recorder: Recorder, declared: str
) -> None:
    request = f"POST /mcp HTTP/1.1\r\nHost: localhost:{server.port}\r\nContent-Length: {declared}\r\n\r\n".encode()
    reply = _raw_exchange(server.port, request)
    assert reply.startswith(b"HTTP/1.1 400 "), reply[:200]
    assert recorder.events == []


def test_an_absolute_form_request_target_reaches_the_endpoint(server: LocalServer, recorder: Recorder) -> None:
    body = json.dumps(TOOLS_LIST).encode()
    request = (
        f"POST http://localhost:{server.port}/mcp?mode=direct HTTP/1.1\r\nHost: localhost:{server.port}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    ).encode() + body
    reply = _raw_exchange(server.port, request)
    assert reply.startswith(b"HTTP/1.1 200 "), reply[:200]
    assert b"GLOBAL_QUOTE" in reply  # ?mode=direct survived: the flat catalog came back


def test_non_numeric_content_length_is_a_400(server: LocalServer, recorder: Recorder) -> None:
    request = f"POST /mcp HTTP/1.1\r\nHost: localhost:{server.port}\r\nContent-Length: ten\r\n\r\n".encode()
    reply = _raw_exchange(server.port, request)
    assert reply.startswith(b"HTTP/1.1 400 "), reply[:200]
    assert b"Bad Content-Length" in reply
    assert recorder.events == []


def test_keep_alive_several_requests_on_one_connection(server: LocalServer, recorder: Recorder) -> None:
    with httpx.Client(timeout=10) as client:
        for i in range(4):
            response = client.post(server.url, json={**TOOLS_LIST, "id": i})
            assert response.status_code == 200
            assert response.json()["id"] == i
            assert response.headers.get("connection", "").lower() != "close"
        client.get(server.url)  # an error answer keeps the connection too
        response = client.post(server.url, json=TOOLS_LIST)
        assert response.status_code == 200
    # ThreadingHTTPServer runs each connection on its own (uniquely named) thread: one thread, one connection.
    assert len(recorder.threads) == 6
    assert len(set(recorder.threads)) == 1, recorder.threads


def test_keep_alive_on_a_raw_socket(server: LocalServer) -> None:
    body = json.dumps(TOOLS_LIST).encode()
    one = (
        f"POST /mcp HTTP/1.1\r\nHost: localhost:{server.port}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode() + body
    last = one.replace(b"Content-Type:", b"Connection: close\r\nContent-Type:")
    reply = _raw_exchange(server.port, one + one + last)
    assert reply.count(b"HTTP/1.1 200") == 3


# --- build_event ↔ request_from_event -------------------------------------------------------------


def test_build_event_round_trip_text_body() -> None:
    body = '{"jsonrpc":"2.0","id":1,"method":"ping","params":{"note":"café ✓"}}'.encode()
    headers = [
        ("Host", "localhost:8000"),
        ("Content-Type", "application/json"),
        ("X-API-Key", "k-123"),
        ("X-Multi", "a"),
        ("x-multi", "b"),
        ("User-Agent", "test-agent/1"),
    ]
    event = build_event(
        "POST", "/mcp?apikey=a%20b&mode=direct&x=1&x=2", headers, body, source_ip="127.0.0.1", request_id="rid-1"
    )
    assert event["version"] == "2.0" and event["routeKey"] == "$default"
    assert event["rawPath"] == "/mcp" and event["rawQueryString"] == "apikey=a%20b&mode=direct&x=1&x=2"
    assert event["isBase64Encoded"] is False and event["body"] == body.decode()
    context = event["requestContext"]
    assert context["requestId"] == "rid-1" and context["stage"] == "$default"
    assert context["http"] == {
        "method": "POST",
        "path": "/mcp",
        "protocol": "HTTP/1.1",
        "sourceIp": "127.0.0.1",
        "userAgent": "test-agent/1",
    }
    assert all(name == name.lower() for name in event["headers"])
    json.dumps(event)  # a Lambda event is JSON

    request = request_from_event(event)
    assert request.method == "POST"
    assert request.path == "/mcp"
    assert request.query == {"apikey": "a b", "mode": "direct", "x": "1"}
    assert request.headers == {
        "host": "localhost:8000",
        "content-type": "application/json",
        "x-api-key": "k-123",
        "x-multi": "a,b",  # repeated headers joined with commas, as API Gateway does
        "user-agent": "test-agent/1",
    }
    assert request.body == body


@pytest.mark.parametrize("body", [b"\xff\xfe\x00binary\x80", b"\xc3(", bytes(range(256))])
def test_build_event_round_trip_non_utf8_body_is_base64(body: bytes) -> None:
    event = build_event("PUT", "/other/path", [], body, source_ip="::1", request_id="rid-2")
    assert event["isBase64Encoded"] is True
    assert base64.b64decode(event["body"]) == body
    json.dumps(event)
    request = request_from_event(event)
    assert (request.method, request.path, request.query, request.headers) == ("PUT", "/other/path", {}, {})
    assert request.body == body


def test_build_event_empty_target_and_body() -> None:
    event = build_event("GET", "", [], b"", source_ip="127.0.0.1", request_id="rid-3")
    assert event["rawPath"] == "/" and event["rawQueryString"] == "" and event["body"] == ""
    request = request_from_event(event)
    assert (request.method, request.path, request.body) == ("GET", "/", b"")


# --- the CLI ----------------------------------------------------------------------------------------


def _clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PMCP_", "POWERTOOLS_"))}
    env.pop("ALPHAVANTAGE_API_KEY", None)
    env["PYTHONUNBUFFERED"] = "1"
    return env


def test_cli_serve_with_sample_upstream() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "progressive_mcp.cli", "serve", "--sample-upstream", "--port", "0"],
        cwd=ROOT,
        env=_clean_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: queue.Queue[str] = queue.Queue()

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.put(line)

    threading.Thread(target=pump, daemon=True).start()
    try:
        deadline = time.monotonic() + 20
        url = None
        seen: list[str] = []
        while url is None and time.monotonic() < deadline:
            try:
                line = lines.get(timeout=0.2)
            except queue.Empty:
                if proc.poll() is not None:
                    pytest.fail(f"serve exited early ({proc.returncode}): {proc.stderr.read() if proc.stderr else ''}")
                continue
            seen.append(line)
            match = URL_LINE.search(line)
            if match:
                url = match.group(1)
                assert int(match.group(2)) > 0  # --port 0 announces the port it really got
                assert "?apikey=demo" in line
        assert url is not None, f"no URL line within 20 s: {seen}"

        response = httpx.post(url, params={"apikey": "demo"}, json=quote_call("IBM"), timeout=10)
        assert response.status_code == 200, response.text
        result = response.json()["result"]
        assert result["isError"] is False, result
        quote = result["structuredContent"]["data"]["Global Quote"]
        assert quote["01. symbol"] == "IBM"
        assert quote["07. latest trading day"] == ANCHOR.isoformat()  # the synthetic universe's fixed day

        # The handler's request log line reaches stdout, as it would reach CloudWatch.
        deadline = time.monotonic() + 5
        logged: list[dict[str, Any]] = []
        while not logged and time.monotonic() < deadline:
            try:
                line = lines.get(timeout=0.2)
            except queue.Empty:
                continue
            if line.startswith("{"):
                entry = json.loads(line)
                if entry.get("message") == "request":
                    logged.append(entry)
        assert logged and logged[0]["tool"] == "GLOBAL_QUOTE" and logged[0]["status"] == 200
        assert "demo" not in json.dumps(logged[0])
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()


def _serve_cli(*flags: str) -> subprocess.CompletedProcess[str]:
    """`progressive-mcp serve FLAGS` to completion (for runs that are expected to exit on their own)."""
    command = [sys.executable, "-m", "progressive_mcp.cli", "serve", *flags]
    return subprocess.run(command, cwd=ROOT, env=_clean_env(), capture_output=True, text=True, timeout=30, check=False)


def test_cli_serve_with_a_missing_spec_exits_2() -> None:
    done = _serve_cli("--spec", "/nonexistent.yaml", "--port", "0")
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert done.stderr.startswith("progressive-mcp: ")
    assert "/nonexistent.yaml" in done.stderr
    assert "MCP endpoint at" not in done.stdout


def test_cli_serve_on_a_busy_port_exits_2() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        done = _serve_cli("--port", str(port))
    assert done.returncode == 2
    assert f"cannot listen on 127.0.0.1:{port}" in done.stderr
    assert "Traceback" not in done.stderr


def test_cli_serve_server_key_without_endpoint_tokens_exits_2() -> None:
    done = _serve_cli("--auth-mode", "server-key", "--port", "0")
    assert done.returncode == 2
    assert done.stderr.startswith("progressive-mcp: ")
    assert "PMCP_ENDPOINT_TOKENS" in done.stderr
    assert "Traceback" not in done.stderr
