"""`progressive-mcp serve`: real HTTP on localhost, each request handed to the Lambda handler as a Lambda event.

The request becomes the same payload-2.0 event API Gateway sends and goes through the same handler
module the deployed function runs, so what works here works behind API Gateway. Example::

    progressive-mcp serve --port 8000 --sample-upstream     # then connect a client to http://127.0.0.1:8000/mcp

In code (tests)::

    with LocalServer(make_handler(endpoint), port=0) as server:
        httpx.post(server.url, json={...})
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import http.server
import ipaddress
import os
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from progressive_mcp.errors import ProgressiveMCPError

# API Gateway's own payload limit; larger bodies are refused before the handler sees them.
MAX_WIRE_BODY_BYTES = 10 * 1024 * 1024
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")


@dataclass
class LocalContext:
    """The parts of a Lambda context object that Powertools reads."""

    aws_request_id: str
    function_name: str = "progressive-mcp-local"
    function_version: str = "$LATEST"
    memory_limit_in_mb: int = 512
    invoked_function_arn: str = "arn:aws:lambda:local:000000000000:function:progressive-mcp-local"
    deadline: float = field(default_factory=lambda: time.monotonic() + 30)

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self.deadline - time.monotonic()) * 1000))


def build_event(
    method: str, target: str, headers: list[tuple[str, str]], body: bytes, *, source_ip: str, request_id: str
) -> dict[str, Any]:
    """The API Gateway HTTP API (payload 2.0) event for one HTTP request."""
    path, _, query = target.partition("?")
    folded: dict[str, str] = {}
    for name, value in headers:
        key = name.lower()
        folded[key] = f"{folded[key]},{value}" if key in folded else value
    try:
        text, encoded = body.decode("utf-8"), False
    except UnicodeDecodeError:
        text, encoded = base64.b64encode(body).decode("ascii"), True
    now = time.time()
    return {
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": path or "/",
        "rawQueryString": query,
        "headers": folded,
        "requestContext": {
            "accountId": "000000000000",
            "apiId": "local",
            "domainName": folded.get("host", "localhost"),
            "http": {
                "method": method,
                "path": path or "/",
                "protocol": "HTTP/1.1",
                "sourceIp": source_ip,
                "userAgent": folded.get("user-agent", ""),
            },
            "requestId": request_id,
            "routeKey": "$default",
            "stage": "$default",
            "time": time.strftime("%d/%b/%Y:%H:%M:%S +0000", time.gmtime(now)),
            "timeEpoch": int(now * 1000),
        },
        "body": text,
        "isBase64Encoded": encoded,
    }


class LocalServer:
    """A threaded HTTP/1.1 server on `host:port` (port 0 picks a free one) that calls a Lambda handler."""

    def __init__(self, handler: Any, *, host: str = "127.0.0.1", port: int = 8000) -> None:
        self.handler = handler
        outer = self

        class RequestHandler(_RequestHandler):
            server_ref = outer

        self.httpd = _ThreadingServer((host, port), RequestHandler)
        self.httpd.daemon_threads = True
        self.host = host
        self.loopback_only = _is_loopback(host)
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self.httpd.server_address[1])

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/mcp"

    def serve_forever(self) -> None:
        self.httpd.serve_forever(poll_interval=0.2)

    def start(self) -> LocalServer:
        self._thread = threading.Thread(target=self.serve_forever, name="progressive-mcp-serve", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> LocalServer:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()


class _ThreadingServer(http.server.ThreadingHTTPServer):
    # socketserver's listen backlog is 5: a burst of clients connecting at once overflows it and gets resets.
    request_queue_size = 128


class _RequestHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # TCP_NODELAY: headers and body leave in separate writes; with Nagle on, a kept-alive client's
    # delayed ACK holds the body back ~40 ms on every request after the first.
    disable_nagle_algorithm = True
    server_version = "progressive-mcp"
    sys_version = ""
    server_ref: LocalServer

    def do_POST(self) -> None:
        self._handle()

    do_GET = do_DELETE = do_PUT = do_PATCH = do_OPTIONS = do_HEAD = do_POST

    def _handle(self) -> None:
        body = self._read_body()  # first, so that an early answer leaves no unread bytes on a kept-alive connection
        if body is None:
            return
        if self.server_ref.loopback_only and not _loopback_host(self.headers.get("Host", "")):
            # DNS-rebinding defence for a server bound to loopback (the deployed endpoint has a real domain).
            self._send(403, {"Content-Type": "text/plain"}, b"Host not allowed: this server answers on localhost only")
            return
        request_id = str(uuid.uuid4())
        target = self.path
        if "://" in target.split("?", 1)[0]:  # absolute-form request target (RFC 9112 3.2.2)
            parts = urlsplit(target)
            target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        event = build_event(
            self.command,
            target,
            list(self.headers.items()),
            body,
            source_ip=self.client_address[0],
            request_id=request_id,
        )
        result = self.server_ref.handler(event, LocalContext(aws_request_id=request_id))
        payload = result.get("body") or ""
        raw = base64.b64decode(payload) if result.get("isBase64Encoded") else payload.encode("utf-8")
        self._send(int(result["statusCode"]), dict(result.get("headers") or {}), raw)

    def _read_body(self) -> bytes | None:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            chunks: list[bytes] = []
            size = 0
            while True:
                line = self.rfile.readline(1024)
                try:
                    length = int(line.split(b";", 1)[0].strip(), 16)
                except ValueError:
                    self._send(400, {"Content-Type": "text/plain"}, b"Bad chunk size", close=True)
                    return None
                if length == 0:
                    while self.rfile.readline(1024) not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(chunks)
                size += length
                if size > MAX_WIRE_BODY_BYTES:
                    self._too_large()
                    return None
                chunks.append(self.rfile.read(length))
                self.rfile.readline(1024)
        declared = (self.headers.get("Content-Length") or "0").strip()
        if not declared.isdigit():  # digits only: no sign, no underscores (int() would take "+5" and "5_0")
            self._send(400, {"Content-Type": "text/plain"}, b"Bad Content-Length", close=True)
            return None
        length = int(declared)
        if length > MAX_WIRE_BODY_BYTES:
            self._too_large()
            return None
        return self.rfile.read(length) if length > 0 else b""

    def _too_large(self) -> None:
        message = f"Request body over {MAX_WIRE_BODY_BYTES} bytes".encode()
        self._send(413, {"Content-Type": "text/plain"}, message, close=True)

    def _send(self, status: int, headers: dict[str, str], body: bytes, *, close: bool = False) -> None:
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        if close:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # the handler logs each request (without its query string, which may carry a key)


def _is_loopback(host: str) -> bool:
    if host in LOOPBACK_NAMES:
        return True
    with contextlib.suppress(ValueError):
        return ipaddress.ip_address(host).is_loopback
    return False


def _loopback_host(host_header: str) -> bool:
    host = host_header.strip().lower()
    host = host[1 : host.find("]")] if host.startswith("[") else host.rsplit(":", 1)[0] if ":" in host else host
    return _is_loopback(host)


def run(args: argparse.Namespace) -> int:
    """Set the environment from the flags, import the Lambda handler module as Lambda would, serve."""
    env = {
        "PMCP_SPEC": args.spec,
        "PMCP_MODE": args.mode,
        "PMCP_CATEGORIES": args.categories,
        "PMCP_UPSTREAM_URL": args.upstream,
        "PMCP_AUTH_MODE": args.auth_mode,
        "PMCP_DEADLINE_S": None if getattr(args, "deadline", None) is None else f"{args.deadline:g}",
        "PMCP_CONFORMANCE_FIXTURES": "1" if args.conformance_fixtures else None,
        "PMCP_CACHE": "off" if getattr(args, "cache", None) is False else None,
    }
    os.environ.update({k: v for k, v in env.items() if v})
    os.environ.setdefault("POWERTOOLS_LOG_LEVEL", args.log_level.upper())
    os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")  # EMF lines are for CloudWatch, noise here
    with contextlib.ExitStack() as stack:
        if args.sample_upstream:
            from progressive_mcp.sample_upstream import SampleUpstream

            sample = stack.enter_context(SampleUpstream(port=0))
            os.environ["PMCP_UPSTREAM_URL"] = sample.url
        try:
            from lambda_fn.handler import handler
        except ProgressiveMCPError as exc:
            print(f"progressive-mcp: {exc}", file=sys.stderr)
            return 2
        try:
            server = LocalServer(handler, host=args.host, port=args.port)
        except OSError as exc:
            print(f"progressive-mcp: cannot listen on {args.host}:{args.port}: {exc.strerror}", file=sys.stderr)
            return 2
        hint = "?apikey=demo (any key works with the sample upstream)" if args.sample_upstream else ""
        print(f"progressive-mcp: MCP endpoint at {server.url}{hint and '  ·  call tools with ' + hint}", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            server.serve_forever()
        server.httpd.server_close()
    return 0
