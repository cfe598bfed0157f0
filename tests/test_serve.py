"""`progressive-mcp serve`: the Lambda handler behind real HTTP on 127.0.0.1 (LocalServer, build_event, the CLI)."""

from __future__ import annotations

import base64
import contextlib
import json
import logging
import os
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from lambda_fn.handler import make_handler, request_from_event
from lambda_fn.local import MAX_WIRE_BODY_BYTES, LocalServer, ServeLimits, build_event
from progressive_mcp.offline.sample_upstream import ANCHOR, SampleUpstream
from progressive_mcp.settings import Settings
from progressive_mcp.surfaces.endpoint import Endpoint
from progressive_mcp.surfaces.metatools import META_TOOL_NAMES

ROOT = Path(__file__).resolve().parent.parent
TOOLS_LIST = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
URL_LINE = re.compile(r"progressive-mcp: MCP endpoint at (http://127\.0\.0\.1:(\d+)/mcp)")


def quote_call(symbol: str = "IBM") -> dict[str, Any]:
    arguments = {"tool_name": "GLOBAL_QUOTE", "arguments": {"symbol": symbol}}
    return {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "TOOL_CALL", "arguments": arguments}}


class Recorder:
    """The Lambda handler, noting the worker thread and the event of each call."""

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


@pytest.mark.parametrize(
    "host",
    [
        "[::1].evil.example",
        "[::1].evil.example:{port}",
        "[::1]evil.example",
        "[::1]:{port}.evil.example",
        "[::1]@evil.example",
        "[::1]:{port}:80",
        "[::1",
        "[127.0.0.1]",
        "[localhost]",
        "localhost.evil.example",
        "127.0.0.1.evil.example:{port}",
        "localhost:{port}@evil.example",
        "localhost:http",
        "",
    ],
)
def test_a_host_that_only_starts_like_loopback_is_refused(server: LocalServer, recorder: Recorder, host: str) -> None:
    host = host.replace("{port}", str(server.port))
    body = json.dumps(TOOLS_LIST).encode()
    request = (
        f"POST /mcp HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    ).encode() + body
    assert _status(_raw_exchange(server.port, request)) in (400, 403), host  # h11 refuses some itself (400)
    absolute = (
        f"POST http://{host}/mcp HTTP/1.1\r\nHost: localhost:{server.port}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    ).encode() + body
    assert _status(_raw_exchange(server.port, absolute)) in (400, 403), host
    assert recorder.events == []


def test_every_loopback_host_form_is_still_served(server: LocalServer, recorder: Recorder) -> None:
    port = server.port
    hosts = ["localhost", "LOCALHOST", f"localhost:{port}", "127.0.0.1", f"127.0.0.1:{port}", "127.8.9.10"]
    hosts += ["[::1]", f"[::1]:{port}", f"[0:0:0:0:0:0:0:1]:{port}", "[::ffff:127.0.0.1]"]
    for host in hosts:
        ok = httpx.post(server.url, json=TOOLS_LIST, headers={"Host": host}, timeout=10)
        assert ok.status_code == 200, host
    assert len(recorder.events) == len(hosts)


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
    # No body is sent at all: a server that tried to read it would not answer before the exchange's own timeout
    # (which raises TimeoutError here).
    reply = _raw_exchange(server.port, head)
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
    local_ends: list[Any] = []
    with httpx.Client(timeout=10) as client:
        for i in range(4):
            response = client.post(server.url, json={**TOOLS_LIST, "id": i})
            assert response.status_code == 200
            assert response.json()["id"] == i
            assert response.headers.get("connection", "").lower() != "close"
            local_ends.append(response.extensions["network_stream"].get_extra_info("client_addr"))
        error = client.get(server.url)  # an error answer keeps the connection too
        local_ends.append(error.extensions["network_stream"].get_extra_info("client_addr"))
        response = client.post(server.url, json=TOOLS_LIST)
        assert response.status_code == 200
        local_ends.append(response.extensions["network_stream"].get_extra_info("client_addr"))
    assert len(recorder.events) == 6
    assert len(set(local_ends)) == 1, local_ends  # one (client address, port): one connection for all six


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


class ServeProcess:
    """`progressive-mcp serve FLAGS` as a subprocess, its stdout read line by line; ready once it prints its URL."""

    def __init__(self, *flags: str, env: dict[str, str] | None = None) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "progressive_mcp.cli", "serve", *flags, "--port", "0"],
            cwd=ROOT,
            env={**_clean_env(), **(env or {})},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            # Ctrl-C as in a terminal, even when the test run itself ignores SIGINT (started in the background).
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.stderr = ""
        threading.Thread(target=self._pump, daemon=True).start()
        deadline = time.monotonic() + 20
        seen: list[str] = []
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=0.2)
            except queue.Empty:
                if self.proc.poll() is not None:
                    pytest.fail(f"serve exited early ({self.proc.returncode}): {self.finish()}")
                continue
            seen.append(line)
            match = URL_LINE.search(line)
            if match:
                self.banner, self.url, self.port = line.strip(), match.group(1), int(match.group(2))
                return
        self.finish()
        pytest.fail(f"no URL line within 20 s: {seen}")

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)

    def log_entries(self, within_s: float, *, until: int) -> list[dict[str, Any]]:
        """The handler's "request" log lines printed within `within_s` (stopping early once there are `until`)."""
        entries: list[dict[str, Any]] = []
        deadline = time.monotonic() + within_s
        while len(entries) < until and time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=0.2)
            except queue.Empty:
                continue
            assert line.startswith("{"), f"a line that is not the handler's JSON log: {line!r}"
            entry = json.loads(line)
            if entry.get("message") == "request":
                entries.append(entry)
        return entries

    def finish(self) -> str:
        """Stop the server (if still running); its stderr."""
        if self.proc.stderr is None or self.proc.stderr.closed:
            return self.stderr
        if self.proc.poll() is None:
            self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=5)
        self.stderr = self.proc.stderr.read()
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()
        return self.stderr

    def __enter__(self) -> ServeProcess:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.finish()


@pytest.mark.slow
def test_cli_serve_with_sample_upstream() -> None:
    with ServeProcess("--sample-upstream") as serve:
        assert serve.port > 0  # --port 0 announces the port it really got
        assert "?apikey=demo" in serve.banner

        response = httpx.post(serve.url, params={"apikey": "demo"}, json=quote_call("IBM"), timeout=10)
        assert response.status_code == 200, response.text
        result = response.json()["result"]
        assert result["isError"] is False, result
        quote = result["structuredContent"]["data"]["Global Quote"]
        assert quote["01. symbol"] == "IBM"
        assert quote["07. latest trading day"] == ANCHOR.isoformat()  # the synthetic universe's fixed day
        assert httpx.get(f"{serve.url}?apikey=demo", timeout=10).status_code == 405
        bad = b"POST /mcp?apikey=demo HTTP/1.1\r\nHost: localhost\r\nContent-Length: -1\r\n\r\n"
        assert _status(_raw_exchange(serve.port, bad)) == 400  # refused by the server: no handler, no log line

        # The handler's request log lines reach stdout, as they would reach CloudWatch: one per request it
        # answered, and nothing else (no access log, which would carry the query string and its key).
        logged = serve.log_entries(5, until=3)
        assert [(e.get("tool"), e["status"]) for e in logged] == [("GLOBAL_QUOTE", 200), (None, 405)]
        assert "demo" not in json.dumps(logged)
        stderr = serve.finish()
    assert "demo" not in stderr and "Traceback" not in stderr


def _bearer_from(banner: str) -> str:
    match = re.search(r"'Authorization: Bearer ([^'<>]+)'", banner)
    assert match, banner
    return match.group(1)


@pytest.mark.slow
def test_cli_serve_server_key_with_the_sample_upstream_makes_a_token() -> None:
    with ServeProcess("--sample-upstream", "--auth-mode", "server-key") as serve:
        assert "?apikey" not in serve.banner
        assert "PMCP_ENDPOINT_TOKENS" in serve.banner
        token = _bearer_from(serve.banner)
        refused = httpx.post(serve.url, params={"apikey": "demo"}, json=quote_call("IBM"), timeout=10)
        assert refused.status_code == 401
        response = httpx.post(
            serve.url, headers={"Authorization": f"Bearer {token}"}, json=quote_call("IBM"), timeout=10
        )
        assert response.status_code == 200, response.text
        result = response.json()["result"]
        assert result["isError"] is False, result  # the sample upstream got a (dummy) key from the server
        assert result["structuredContent"]["data"]["Global Quote"]["01. symbol"] == "IBM"
    with ServeProcess("--sample-upstream", "--auth-mode", "server-key") as again:
        assert _bearer_from(again.banner) != token  # made for each run


@pytest.mark.slow
def test_cli_serve_server_key_names_the_configured_tokens() -> None:
    env = {"PMCP_ENDPOINT_TOKENS": f"{TOKEN_ONE},{TOKEN_TWO}", "ALPHAVANTAGE_API_KEY": "a-real-key"}
    with ServeProcess("--sample-upstream", "--auth-mode", "server-key", env=env) as serve:
        assert "?apikey" not in serve.banner and TOKEN_ONE not in serve.banner
        assert "'Authorization: Bearer <token>'" in serve.banner and "PMCP_ENDPOINT_TOKENS" in serve.banner
        response = httpx.post(
            serve.url, headers={"Authorization": f"Bearer {TOKEN_TWO}"}, json=quote_call("MSFT"), timeout=10
        )
        assert response.status_code == 200, response.text
        assert response.json()["result"]["isError"] is False


@pytest.mark.slow
def test_cli_serve_exits_cleanly_on_ctrl_c() -> None:
    with ServeProcess("--sample-upstream") as serve:
        assert httpx.post(serve.url, json=TOOLS_LIST, timeout=10).status_code == 200
        idle = socket.create_connection(("127.0.0.1", serve.port))  # a connection still open at shutdown
        serve.proc.send_signal(signal.SIGINT)
        assert serve.proc.wait(timeout=10) == 0
        idle.close()
        assert "Traceback" not in serve.finish()


def _serve_cli(*flags: str) -> subprocess.CompletedProcess[str]:
    """`progressive-mcp serve FLAGS` to completion (for runs that are expected to exit on their own)."""
    command = [sys.executable, "-m", "progressive_mcp.cli", "serve", *flags]
    return subprocess.run(command, cwd=ROOT, env=_clean_env(), capture_output=True, text=True, timeout=30, check=False)


@pytest.mark.slow
def test_cli_serve_with_a_missing_spec_exits_2() -> None:
    done = _serve_cli("--spec", "/nonexistent.yaml", "--port", "0")
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert done.stderr.startswith("progressive-mcp: ")
    assert "/nonexistent.yaml" in done.stderr
    assert "MCP endpoint at" not in done.stdout


@pytest.mark.slow
def test_cli_serve_on_a_busy_port_exits_2() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        done = _serve_cli("--port", str(port))
    assert done.returncode == 2
    assert f"cannot listen on 127.0.0.1:{port}" in done.stderr
    assert "Traceback" not in done.stderr


TOKEN_ONE = "tok-one-5Yq8Lr2Wm0Zx7Nc4Vb1Td9"
TOKEN_TWO = "tok-two-3Hs6Jf0Ke8Pu2Ga5Xi7Ow1"


@pytest.mark.slow
def test_cli_serve_with_a_too_short_endpoint_token_exits_2_without_showing_it() -> None:
    command = [sys.executable, "-m", "progressive_mcp.cli", "serve", "--auth-mode", "server-key", "--port", "0"]
    env = {**_clean_env(), "PMCP_ENDPOINT_TOKENS": f"{TOKEN_ONE},letmein"}
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=30, check=False)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "PMCP_ENDPOINT_TOKENS: token 2 of 2 has 7 characters" in done.stderr
    assert "letmein" not in done.stderr + done.stdout and TOKEN_ONE not in done.stderr + done.stdout
    assert "MCP endpoint at" not in done.stdout


@pytest.mark.slow
def test_cli_serve_server_key_without_endpoint_tokens_exits_2() -> None:
    done = _serve_cli("--auth-mode", "server-key", "--port", "0")
    assert done.returncode == 2
    assert done.stderr.startswith("progressive-mcp: ")
    assert "PMCP_ENDPOINT_TOKENS" in done.stderr
    assert "Traceback" not in done.stderr


# --- hardening: what a red-team run found in the hand-written HTTP parser (each failed before uvicorn) -----------


def _head(port: int, extra: str = "", *, method: str = "POST", host: str | None = None) -> bytes:
    """A request line and headers (ending the head), with `extra` header lines ("Name: value\\r\\n" each)."""
    host_line = f"Host: {host if host is not None else f'localhost:{port}'}\r\n"
    return f"{method} /mcp HTTP/1.1\r\n{host_line}Content-Type: application/json\r\n{extra}\r\n".encode("latin-1")


def _status(reply: bytes) -> int:
    assert reply.startswith(b"HTTP/1.1 "), reply[:200]
    return int(reply.split(b" ", 2)[1])


def _read_response(sock: socket.socket) -> bytes:
    """One whole response (head and Content-Length body) from a blocking socket."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, data
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = re.search(rb"(?im)^content-length: *(\d+)", head)
    assert length, head
    while len(body) < int(length.group(1)):
        chunk = sock.recv(65536)
        assert chunk, data
        body += chunk
    return head + b"\r\n\r\n" + body


def _rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def _closed_by_server(sock: socket.socket) -> bool:
    """True once the server has closed `sock` (EOF or reset); False while it is still open and silent."""
    try:
        return sock.recv(65536) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True


def _wait_closed(socks: list[socket.socket], within_s: float) -> int:
    """How many of `socks` the server closed before `within_s` ran out (returns early once all are closed)."""
    closed: set[int] = set()
    deadline = time.monotonic() + within_s
    while len(closed) < len(socks) and time.monotonic() < deadline:
        for i, sock in enumerate(socks):
            if i not in closed and _closed_by_server(sock):
                closed.add(i)
        time.sleep(0.1)
    return len(closed)


def _open_partial(port: int, count: int, partial: bytes) -> list[socket.socket]:
    socks = []
    for _ in range(count):
        sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        if partial:
            sock.sendall(partial)
        sock.setblocking(False)
        socks.append(sock)
    return socks


def _normal_request_works(server: LocalServer) -> bool:
    response = httpx.post(server.url, json=TOOLS_LIST, timeout=10)
    return response.status_code == 200 and response.json()["id"] == 1


# 1. Chunked bodies: a negative size once became rfile.read(-1), reading (and keeping) all the client sent.


def test_a_negative_chunk_size_is_a_400_and_nothing_is_buffered(server: LocalServer, recorder: Recorder) -> None:
    before = _rss_mib()
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
        sock.sendall(_head(server.port, "Transfer-Encoding: chunked\r\n") + b"-1\r\n")
        junk = b"x" * 65536
        with contextlib.suppress(OSError):  # the server answers and closes: the sending stops with EPIPE/reset
            for _ in range(24 * 16):  # 24 MiB
                sock.sendall(junk)
        reply = b""
        with contextlib.suppress(OSError):
            while chunk := sock.recv(65536):
                reply += chunk
    assert _status(reply) == 400
    assert b"chunk" in reply.lower()
    assert _rss_mib() - before < 12  # the old parser held all 24 MiB
    assert recorder.events == []


def _chunked_request(port: int, size_line: str, body: bytes) -> bytes:
    head = _head(port, "Transfer-Encoding: chunked\r\nConnection: close\r\n")
    return head + size_line.encode() + b"\r\n" + body + b"\r\n0\r\n\r\n"


@pytest.mark.parametrize("spelling", ["-{n:x}", "0x{n:x}", "{hi:x}_{lo:x}", "+{n:x}", " {n:x}"])
def test_a_chunk_size_that_is_not_plain_hex_is_a_400(server: LocalServer, recorder: Recorder, spelling: str) -> None:
    body = json.dumps(TOOLS_LIST).encode()
    n = len(body)
    size_line = spelling.format(n=n, hi=n >> 4, lo=n & 15)  # int(..., 16) reads each of these as n (or -n)
    reply = _raw_exchange(server.port, _chunked_request(server.port, size_line, body))
    assert _status(reply) == 400, reply[:200]
    assert recorder.events == []
    # The same body with a plain size goes through.
    assert _status(_raw_exchange(server.port, _chunked_request(server.port, f"{n:x}", body))) == 200


@pytest.mark.parametrize("coding", ["xchunked", "gzip, chunked", "chunked, gzip"])
def test_a_transfer_coding_other_than_chunked_is_refused(server: LocalServer, recorder: Recorder, coding: str) -> None:
    body = json.dumps(TOOLS_LIST).encode()
    request = _head(server.port, f"Transfer-Encoding: {coding}\r\nConnection: close\r\n")
    reply = _raw_exchange(server.port, request + f"{len(body):x}\r\n".encode() + body + b"\r\n0\r\n\r\n")
    assert _status(reply) == 501  # RFC 9112 6.1: a transfer coding the server does not understand
    assert recorder.events == []


# 2. Connections: no timeouts and no cap once let 2,000 half-sent requests hold 2,000 threads indefinitely.


def test_slow_and_silent_connections_are_dropped_after_the_header_timeout(server: LocalServer) -> None:
    from lambda_fn.local import HEADER_TIMEOUT_S, KEEP_ALIVE_TIMEOUT_S

    partial = f"POST /mcp HTTP/1.1\r\nHost: localhost:{server.port}\r\n".encode()  # and never the rest
    slow = _open_partial(server.port, 200, partial)
    silent = _open_partial(server.port, 20, b"")
    # A kept-alive connection: one full request, then the first line of a second one.
    body = json.dumps(TOOLS_LIST).encode()
    kept = socket.create_connection(("127.0.0.1", server.port), timeout=5)
    kept.sendall(_head(server.port, f"Content-Length: {len(body)}\r\n") + body)
    assert _status(_read_response(kept)) == 200
    kept.sendall(b"POST /mcp HTTP/1.1\r\n")
    kept.setblocking(False)
    # An idle kept-alive connection.
    idle = socket.create_connection(("127.0.0.1", server.port), timeout=5)
    idle.sendall(_head(server.port, f"Content-Length: {len(body)}\r\n") + body)
    assert _status(_read_response(idle)) == 200
    idle.setblocking(False)
    try:
        assert _normal_request_works(server)  # while 220 connections hang
        everything = [*slow, *silent, kept, idle]
        assert _wait_closed(everything, HEADER_TIMEOUT_S + KEEP_ALIVE_TIMEOUT_S + 5) == len(everything)
        assert _normal_request_works(server)
    finally:
        for sock in [*slow, *silent, kept, idle]:
            sock.close()


def test_at_the_connection_cap_the_oldest_slow_connections_make_room(server: LocalServer) -> None:
    from lambda_fn.local import MAX_CONNECTIONS

    partial = f"POST /mcp HTTP/1.1\r\nHost: localhost:{server.port}\r\n".encode()
    extra = 60
    socks = _open_partial(server.port, MAX_CONNECTIONS + extra, partial)
    try:
        # Long before the header timeout: the cap alone closed at least `extra` of them, the oldest first.
        assert _wait_closed(socks[:extra], 3) == extra
        assert sum(_closed_by_server(sock) for sock in socks[-MAX_CONNECTIONS // 2 :]) == 0
        for _ in range(3):  # and every new client still gets in, each pushing out a slow connection
            assert _normal_request_works(server)
    finally:
        for sock in socks:
            sock.close()
    assert _normal_request_works(server)


def test_the_handler_runs_on_a_bounded_pool_off_the_event_loop(upstream: SampleUpstream) -> None:
    endpoint = Endpoint.from_settings(Settings.from_env({}, upstream_url=upstream.url))
    inner = make_handler(endpoint)
    running = 0
    most = 0
    lock = threading.Lock()
    release = threading.Event()

    def slow_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
        try:
            release.wait(10)  # a slow upstream call
            return inner(event, context)
        finally:
            with lock:
                running -= 1

    limits = ServeLimits(max_concurrent_requests=2)
    with LocalServer(slow_handler, port=0, limits=limits) as srv, ThreadPoolExecutor(5) as pool:
        answers = [pool.submit(httpx.post, srv.url, json=TOOLS_LIST, timeout=20) for _ in range(5)]
        deadline = time.monotonic() + 5
        while running < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        try:
            # Both threads are stuck on "the upstream": the event loop still answers what needs no handler.
            bad = _raw_exchange(srv.port, _chunked_request(srv.port, "-1", b""))
            assert _status(bad) == 400
            assert not any(answer.done() for answer in answers)
        finally:
            release.set()
        assert [answer.result().status_code for answer in answers] == [200] * 5
    assert most == 2


def test_a_body_that_does_not_arrive_in_time_is_a_408(recorder: Recorder) -> None:
    with (
        LocalServer(recorder, port=0, limits=ServeLimits(body_timeout_s=1)) as srv,
        socket.create_connection(("127.0.0.1", srv.port), timeout=10) as sock,
    ):
        sock.sendall(_head(srv.port, "Content-Length: 100\r\n") + b'{"jsonrpc":')  # and no more
        reply = sock.recv(65536)
    assert _status(reply) == 408
    assert recorder.events == []


def test_large_bodies_at_once_are_bounded_and_small_requests_still_pass(recorder: Recorder) -> None:
    limits = ServeLimits(body_budget_bytes=1024 * 1024)
    with LocalServer(recorder, port=0, limits=limits) as srv:
        holder = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
        try:
            holder.sendall(_head(srv.port, f"Content-Length: {2 * 1024 * 1024}\r\n") + b" " * (900 * 1024))
            time.sleep(0.3)  # the server has read (and holds) ~900 KiB of it
            second = _head(srv.port, f"Content-Length: {1024 * 1024}\r\nConnection: close\r\n")
            reply = _raw_exchange(srv.port, second + b" " * (1024 * 1024))
            assert _status(reply) == 503
            assert b"retry-after: 1" in reply.lower()
            assert _normal_request_works(srv)  # a small body never counts against the budget
        finally:
            holder.close()
        time.sleep(0.3)
        body = json.dumps(TOOLS_LIST).encode() + b" " * (700 * 1024)  # the budget is free again
        response = httpx.post(srv.url, content=body, headers={"Content-Type": "application/json"}, timeout=10)
        assert response.status_code == 200


def test_a_client_that_never_reads_its_answer_is_dropped() -> None:
    big = "x" * (24 * 1024 * 1024)  # more than the kernel's socket buffers hold

    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        return {"statusCode": 200, "headers": {"Content-Type": "text/plain"}, "body": big}

    with LocalServer(handler, port=0, limits=ServeLimits(send_timeout_s=1)) as srv:
        sock = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
        sock.sendall(_head(srv.port, "Content-Length: 2\r\n") + b"{}")
        time.sleep(3)  # not reading: the answer piles up in the server until the send timeout
        received = 0
        with contextlib.suppress(OSError):
            while chunk := sock.recv(1024 * 1024):
                received += len(chunk)
        sock.close()
        assert 0 < received < len(big)  # cut off: the server aborted the connection
        assert _normal_request_works_on(srv)


def _normal_request_works_on(srv: LocalServer) -> bool:
    response = httpx.post(srv.url, content=b"{}", headers={"Content-Type": "application/json"}, timeout=10)
    return response.status_code == 200


# 3. Framing and headers: ambiguous or malformed requests are refused, and never with a traceback.


def test_content_length_with_transfer_encoding_is_a_400(server: LocalServer, recorder: Recorder) -> None:
    body = json.dumps(TOOLS_LIST).encode()
    request = _head(server.port, f"Content-Length: {len(body) + 7}\r\nTransfer-Encoding: chunked\r\n")
    reply = _raw_exchange(server.port, request + f"{len(body):x}\r\n".encode() + body + b"\r\n0\r\n\r\n")
    assert _status(reply) == 400
    assert b"connection: close" in reply.lower()  # RFC 9112 6.1: and the connection is closed
    assert recorder.events == []


def test_a_second_host_header_is_a_400(server: LocalServer, recorder: Recorder) -> None:
    body = json.dumps(TOOLS_LIST).encode()
    extra = f"Host: evil.example.com\r\nContent-Length: {len(body)}\r\nConnection: close\r\n"
    reply = _raw_exchange(server.port, _head(server.port, extra) + body)
    assert _status(reply) == 400
    assert recorder.events == []


def test_conflicting_content_lengths_are_a_400(server: LocalServer, recorder: Recorder) -> None:
    body = json.dumps(TOOLS_LIST).encode()
    for extra in (
        f"Content-Length: {len(body)}\r\nContent-Length: 5\r\n",
        f"Content-Length: {len(body)}, 5\r\n",
    ):
        reply = _raw_exchange(server.port, _head(server.port, extra + "Connection: close\r\n") + body)
        assert _status(reply) == 400, extra
    assert recorder.events == []


def test_repeated_equal_content_lengths_are_one_length(server: LocalServer, recorder: Recorder) -> None:
    # RFC 9110 8.6 lets a recipient merge identical values; h11 does, so there is exactly one framing.
    body = json.dumps(TOOLS_LIST).encode()
    extra = f"Content-Length: {len(body)}\r\nContent-Length: {len(body)}\r\nConnection: close\r\n"
    reply = _raw_exchange(server.port, _head(server.port, extra) + body)
    assert _status(reply) == 200
    assert recorder.events[-1]["body"] == body.decode()


@pytest.mark.parametrize("declared", ["\u00b2", "9" * 5000, "1" * 21, "5 5", ""])
def test_an_unreadable_content_length_is_a_400_without_a_traceback(
    server: LocalServer, recorder: Recorder, capfd: pytest.CaptureFixture[str], declared: str
) -> None:
    reply = _raw_exchange(server.port, _head(server.port, f"Content-Length: {declared}\r\n"))
    assert _status(reply) == 400
    assert recorder.events == []
    assert _normal_request_works(server)
    assert "Traceback" not in capfd.readouterr().err


def test_headers_over_the_limit_are_a_431(server: LocalServer, recorder: Recorder) -> None:
    from lambda_fn.local import MAX_HEADER_BYTES

    many = "".join(f"X-Filler-{i}: {'a' * 1000}\r\n" for i in range(MAX_HEADER_BYTES // 1000 + 2))
    for request in (_head(server.port, many), _head(server.port, many)[:-2]):  # complete, and never completed
        reply = _raw_exchange(server.port, request)
        assert _status(reply) == 431
    under = "".join(f"X-Filler-{i}: {'a' * 1000}\r\n" for i in range(8))
    body = json.dumps(TOOLS_LIST).encode()
    reply = _raw_exchange(
        server.port, _head(server.port, under + f"Content-Length: {len(body)}\r\nConnection: close\r\n") + body
    )
    assert _status(reply) == 200


def test_expect_100_continue(server: LocalServer, recorder: Recorder) -> None:
    body = json.dumps(TOOLS_LIST).encode()
    # Too large from its Content-Length: the final answer comes at once, without inviting the body.
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
        sock.sendall(_head(server.port, f"Content-Length: {MAX_WIRE_BODY_BYTES + 1}\r\nExpect: 100-continue\r\n"))
        assert _status(sock.recv(65536)) == 413
    # Acceptable: "100 Continue", then the body, then the answer.
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
        sock.sendall(_head(server.port, f"Content-Length: {len(body)}\r\nExpect: 100-continue\r\n"))
        assert sock.recv(65536).startswith(b"HTTP/1.1 100 ")
        sock.sendall(body)
        reply = _read_response(sock)
        assert _status(reply) == 200 and b'"tools"' in reply
    # An expectation the server cannot meet.
    reply = _raw_exchange(server.port, _head(server.port, "Content-Length: 2\r\nExpect: teapot\r\n") + b"{}")
    assert _status(reply) == 417
    assert len(recorder.events) == 1


def test_head_gets_headers_only_and_the_connection_stays_usable(server: LocalServer) -> None:
    body = json.dumps(TOOLS_LIST).encode()
    post = _head(server.port, f"Content-Length: {len(body)}\r\nConnection: close\r\n") + body
    reply = _raw_exchange(server.port, _head(server.port, method="HEAD") + post)
    head_answer, _, rest = reply.partition(b"\r\n\r\n")
    assert _status(head_answer) == 405
    declared = int(re.search(rb"(?im)^content-length: *(\d+)", head_answer).group(1))  # type: ignore[union-attr]
    assert declared > 0  # what a GET would carry, but no body follows
    assert _status(rest) == 200 and b'"tools"' in rest


def test_an_absolute_form_target_must_name_a_loopback_host(server: LocalServer, recorder: Recorder) -> None:
    body = json.dumps(TOOLS_LIST).encode()
    request = (
        f"POST http://evil.example.com/mcp HTTP/1.1\r\nHost: localhost:{server.port}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode() + body
    assert _status(_raw_exchange(server.port, request)) == 403
    assert recorder.events == []


def test_a_bad_chunk_mid_body_ends_the_request_quietly(
    recorder: Recorder, caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> None:
    with LocalServer(recorder, port=0, limits=ServeLimits(body_timeout_s=1)) as srv:
        sock = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
        sock.sendall(_head(srv.port, "Transfer-Encoding: chunked\r\n") + b"2\r\n{}\r\nzz\r\n")
        time.sleep(2)  # past the body timeout: the adapter, which was reading the body, must not answer again
        assert _status(sock.recv(65536)) == 400
        sock.close()
        assert _normal_request_works(srv)
    assert len(recorder.events) == 1  # only the normal request reached the handler
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []
    assert "Traceback" not in capfd.readouterr().err


def test_stopping_with_a_call_stuck_on_the_upstream_answers_503_quietly(caplog: pytest.LogCaptureFixture) -> None:
    release = threading.Event()

    def stuck(event: dict[str, Any], context: Any) -> dict[str, Any]:
        release.wait(30)
        return {"statusCode": 200, "headers": {}, "body": "late"}

    server = LocalServer(stuck, port=0).start()
    try:
        with ThreadPoolExecutor(1) as pool:
            answer = pool.submit(httpx.post, server.url, content=b"{}", timeout=30)
            time.sleep(0.3)
            server.stop()  # what Ctrl-C does; a stop that waited for the stuck call would get its 200 "late"
            assert answer.result().status_code == 503
    finally:
        release.set()
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []
