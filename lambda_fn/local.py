"""`progressive-mcp serve`: real HTTP on localhost, each request handed to the Lambda handler as a Lambda event.

The request becomes the same payload-2.0 event API Gateway sends and goes through the same handler
module the deployed function runs, so what works here works behind API Gateway. Example::

    progressive-mcp serve --port 8000 --sample-upstream     # then connect a client to http://127.0.0.1:8000/mcp

In code (tests)::

    with LocalServer(make_handler(endpoint), port=0) as server:
        httpx.post(server.url, json={...})

HTTP is uvicorn's, with its h11 protocol (strict HTTP/1.1 parsing: chunk sizes, Content-Length, Host,
header size). This module adds a small ASGI adapter (the checks API Gateway would make, request →
event → handler on bounded worker threads → response) and, on uvicorn's h11 protocol class, what
uvicorn lacks: deadlines for a request's headers and body and for an answer the client does not read,
a connection cap that drops idle and slow connections first, and h11's own status for a parse error
(431, 501) where uvicorn always says 400. The limits are the module constants below.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import http
import ipaddress
import logging
import os
import queue
import re
import secrets
import socket
import sys
import threading
import time
import traceback
import uuid
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from progressive_mcp.errors import ProgressiveMCPError

# API Gateway's own payload limit; larger bodies are refused (413) before the handler sees them, and a body is
# counted while it arrives, so no more than this is ever buffered for one request.
MAX_WIRE_BODY_BYTES = 10 * 1024 * 1024
# Request line plus headers. API Gateway HTTP APIs take 10 KiB, so this refuses nothing a deployment accepts,
# and it bounds what a connection can make the server hold before it even has a request (431 beyond).
MAX_HEADER_BYTES = 16 * 1024
# A request's line and headers must be complete this long after the connection opens (or after the first byte
# of a later request on a kept-alive one): real clients need milliseconds; slowloris connections are dropped.
HEADER_TIMEOUT_S = 5.0
# An idle kept-alive connection is closed after this long; clients reconnect transparently.
KEEP_ALIVE_TIMEOUT_S = 5
# A request body must have arrived this long after its headers (408 otherwise); 10 MiB then needs ~0.7 MB/s.
BODY_TIMEOUT_S = 15.0
# A connection whose client leaves our answer unread this long is aborted (answers here are kilobytes).
SEND_TIMEOUT_S = 15.0
# Open connections at once. At the cap, a new connection makes room by dropping the oldest one that is idle or
# still sending its request, so slow clients cannot lock others out; if every connection has a whole request in
# (waiting for or in the handler), the new one is closed. Far more than local clients open, far below the fd limit.
MAX_CONNECTIONS = 256
# Lambda handler invocations at once, each on a worker thread (the handler is synchronous and a tool call may wait
# on the upstream for up to PMCP_DEADLINE_S); more requests wait for a thread without blocking the event loop.
MAX_CONCURRENT_REQUESTS = 32
# Threads that take handler calls in turn while the calls are quick (threads contending for the GIL cost CPU: see
# _HandlerThreads), and how long a call runs before it counts as waiting on the upstream and another thread starts.
QUICK_HANDLER_CALLS = 1
SLOW_HANDLER_CALL_S = 0.025
# Request body bytes held at once across all requests, beyond the first SMALL_BODY_BYTES of each: a few clients
# sending 10 MiB bodies cannot exhaust memory (503 beyond), and ordinary requests never count against it.
BODY_BUDGET_BYTES = 64 * 1024 * 1024
SMALL_BODY_BYTES = 64 * 1024
# The kernel's queue of connections not yet accepted: a burst of clients connecting at once waits there instead of
# having its SYNs dropped (a 1 s retry each). The kernel caps it at net.core.somaxconn.
LISTEN_BACKLOG = 1024
# The most connections asyncio accepts in one loop iteration: well under MAX_CONNECTIONS, so in a flood a new
# connection's headers are read before enough newer ones arrive to push it out.
ACCEPT_BATCH = 64
# On stop or Ctrl-C, requests in flight get this long to finish before the server exits anyway.
SHUTDOWN_GRACE_S = 3
SERVER_HEADER = "progressive-mcp"
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")
# The upstream key `serve --sample-upstream` uses in server-key mode: the sample upstream accepts any key.
SAMPLE_UPSTREAM_KEY = "sample-upstream"

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ServeLimits:
    """The limits of one LocalServer (the module constants by default; tests shrink some)."""

    max_connections: int = MAX_CONNECTIONS
    max_concurrent_requests: int = MAX_CONCURRENT_REQUESTS
    max_header_bytes: int = MAX_HEADER_BYTES
    header_timeout_s: float = HEADER_TIMEOUT_S
    keep_alive_timeout_s: int = KEEP_ALIVE_TIMEOUT_S
    body_timeout_s: float = BODY_TIMEOUT_S
    send_timeout_s: float = SEND_TIMEOUT_S
    body_budget_bytes: int = BODY_BUDGET_BYTES


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
    """HTTP/1.1 on `host:port` (port 0 picks a free one) that calls a Lambda handler; listening once constructed."""

    def __init__(
        self, handler: Any, *, host: str = "127.0.0.1", port: int = 8000, limits: ServeLimits | None = None
    ) -> None:
        self.handler = handler
        self.host = host
        self.limits = limits or ServeLimits()
        self.loopback_only = _is_loopback(host)
        self._socket = _listen(host, port)  # here, so a busy port fails now and .port is known at once
        guard = _ConnectionGuard(self.limits)
        protocol = type("GuardedH11Protocol", (_GuardedH11Protocol,), {"guard": guard})
        self._adapter = _LambdaAdapter(handler, loopback_only=self.loopback_only, limits=self.limits)
        config = uvicorn.Config(
            self._adapter,
            http=protocol,
            ws="none",
            lifespan="off",
            loop="asyncio",
            interface="asgi3",
            log_config=None,
            log_level="error",  # uvicorn's warnings (one per malformed request) would let a client flood stderr
            access_log=False,  # the handler logs each request once; access lines would carry query strings (keys)
            proxy_headers=False,  # the event's sourceIp is the peer, never a client-supplied X-Forwarded-For
            server_header=False,
            headers=[("server", SERVER_HEADER)],
            backlog=ACCEPT_BATCH,  # asyncio accepts this many per iteration (and listens with it: see _Server)
            timeout_keep_alive=self.limits.keep_alive_timeout_s,
            timeout_graceful_shutdown=SHUTDOWN_GRACE_S + 2,  # a backstop: _Server ends requests after the grace
            h11_max_incomplete_event_size=self.limits.max_header_bytes,
        )
        self._server = _Server(config, guard, self._adapter)
        self._started = False
        self._stopped = threading.Event()

    @property
    def port(self) -> int:
        return int(self._socket.getsockname()[1])

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/mcp"

    def serve_forever(self) -> None:
        """Serve until stop() is called from elsewhere; Ctrl-C stops the server, then raises KeyboardInterrupt."""
        self.start()
        try:
            while not self._stopped.wait(0.5):
                pass
        finally:
            self.stop()

    def start(self) -> LocalServer:
        # The event loop runs on a daemon thread (as do the handler threads), so the process can always exit.
        self._started = True
        threading.Thread(target=self._run, name="progressive-mcp-serve", daemon=True).start()
        return self

    def stop(self) -> None:
        self._server.should_exit = True
        if self._started:
            # An Event, not Thread.join: a Ctrl-C interrupting join() makes Python 3.11 take the thread for ended.
            self._stopped.wait(timeout=SHUTDOWN_GRACE_S + 4)
        self._socket.close()
        self._adapter.threads.stop()

    def _run(self) -> None:
        try:
            self._server.run(sockets=[self._socket])
        finally:
            self._stopped.set()

    def __enter__(self) -> LocalServer:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()


class _Server(uvicorn.Server):
    def __init__(self, config: uvicorn.Config, guard: _ConnectionGuard, adapter: _LambdaAdapter) -> None:
        super().__init__(config)
        self.guard = guard
        self.adapter = adapter

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        for sock in sockets or []:
            sock.listen(LISTEN_BACKLOG)  # asyncio re-listened with its accept batch; the kernel queue stays long

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        # A connection accepted just before the listener closes is set up a loop iteration or two later, after
        # uvicorn has told the open ones to close: refuse it, or shutdown would wait the whole grace period for it.
        self.guard.closing = True
        # uvicorn waits for requests in flight, then cancels them with a traceback each: end them quietly first.
        loop = asyncio.get_running_loop()
        cutoff = loop.call_later(SHUTDOWN_GRACE_S, self._end_the_rest, loop)
        try:
            await super().shutdown(sockets=sockets)
        finally:
            cutoff.cancel()

    def _end_the_rest(self, loop: asyncio.AbstractEventLoop) -> None:
        """After the grace period: requests waiting on the handler get a 503, connections still sending one are
        dropped, and a moment later whatever is left (answers nobody reads) is dropped too."""
        self.adapter.threads.abandon()
        for connection in list(self.guard.droppable):
            connection.transport.abort()
        loop.call_later(1, self._drop_all)

    def _drop_all(self) -> None:
        for connection in list(self.guard.open):
            connection.transport.abort()


def _listen(host: str, port: int) -> socket.socket:
    infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    infos.sort(key=lambda info: info[0] != socket.AF_INET)  # "localhost": 127.0.0.1 as before, not ::1
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(LISTEN_BACKLOG)
    except OSError:
        sock.close()
        raise
    return sock


# --- the ASGI adapter: one request → the payload-2.0 event → the handler → the response ------------------------


class _Refuse(Exception):
    """A request answered here, before (or instead of) the handler; the connection is closed after it."""

    def __init__(self, status: int, message: str, headers: list[tuple[bytes, bytes]] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = headers or []


class _ClientGone(Exception):
    pass


class _ShuttingDown(Exception):
    pass


class _LambdaAdapter:
    def __init__(self, handler: Any, *, loopback_only: bool, limits: ServeLimits) -> None:
        self.handler = handler
        self.loopback_only = loopback_only
        self.limits = limits
        self.body_bytes_held = 0  # against BODY_BUDGET_BYTES; only touched on the event loop's thread
        self.threads = _HandlerThreads(limits.max_concurrent_requests)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":  # lifespan is off and no websocket protocol is loaded: nothing else comes
            return
        started = False

        async def send_once(message: dict[str, Any]) -> None:
            nonlocal started
            started = True
            await send(message)

        held = [0]
        try:
            try:
                await self._serve(scope, receive, send_once, held)
            except _Refuse as refusal:
                if not started:
                    await _plain(send_once, refusal.status, refusal.message, refusal.headers)
        except _ClientGone:
            pass
        except Exception as exc:
            # No exception text: it may quote a header or the query string, which can carry a key.
            frames = "".join(traceback.format_tb(exc.__traceback__))
            log.error("progressive-mcp serve: a request failed with %s\n%s", type(exc).__name__, frames.rstrip())
            if not started:
                with contextlib.suppress(Exception):
                    await _plain(send_once, 500, "Internal Server Error")
        finally:
            self.body_bytes_held -= held[0]

    async def _serve(self, scope: dict[str, Any], receive: Any, send: Any, held: list[int]) -> None:
        headers: list[tuple[bytes, bytes]] = scope["headers"]
        raw_path: bytes = scope["raw_path"]
        query: bytes = scope["query_string"]
        self._check_head(raw_path, query, headers)
        body = await self._read_body(receive, held)
        target = raw_path.decode("latin-1") + (f"?{query.decode('latin-1')}" if query else "")
        if "://" in target.split("?", 1)[0]:  # absolute-form request target (RFC 9112 3.2.2)
            parts = urlsplit(target)
            target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        client = scope.get("client")
        try:
            status, response_headers, payload = await self.threads.run(
                self._invoke,
                scope["method"],
                target,
                [(name.decode("latin-1"), value.decode("latin-1")) for name, value in headers],
                body,
                client[0] if client else "127.0.0.1",
            )
        except _ShuttingDown:
            raise _Refuse(503, "The server is shutting down") from None
        await send({"type": "http.response.start", "status": status, "headers": response_headers})
        await send({"type": "http.response.body", "body": payload})

    def _check_head(self, raw_path: bytes, query: bytes, headers: list[tuple[bytes, bytes]]) -> None:
        """What can be refused from the request line and headers alone, before any of the body is read."""
        size = len(raw_path) + len(query)
        host = length = expect = None
        chunked = False
        for name, value in headers:  # lower-case names; h11 allows one Host and merges equal Content-Lengths
            size += len(name) + len(value) + 4
            if name == b"host":
                host = value
            elif name == b"content-length":
                length = value
            elif name == b"transfer-encoding":
                chunked = True
            elif name == b"expect":
                expect = value if expect is None else expect + b"," + value
        if size > self.limits.max_header_bytes:  # h11 checks incomplete heads; this, heads that came in one piece
            raise _Refuse(431, f"Request line and headers over {self.limits.max_header_bytes} bytes")
        if length is not None:
            if chunked:
                # RFC 9112 6.1: a server may reject this (and must close the connection): two framings disagree.
                raise _Refuse(400, "Bad request: Content-Length together with Transfer-Encoding")
            if not length.isdigit():  # h11 has checked it (1 to 20 ASCII digits); never trust int() with more
                raise _Refuse(400, "Bad Content-Length")
            if int(length) > MAX_WIRE_BODY_BYTES:
                raise _Refuse(413, f"Request body over {MAX_WIRE_BODY_BYTES} bytes")
        if expect is not None and any(v.strip().lower() != b"100-continue" for v in expect.split(b",")):
            raise _Refuse(417, "Expectation failed: only Expect: 100-continue is supported")
        if self.loopback_only:
            # DNS-rebinding defence for a server bound to loopback (the deployed endpoint has a real domain).
            host_text = (host or b"").decode("latin-1")
            authority = _authority(raw_path.decode("latin-1")) if b"://" in raw_path else host_text
            if not (_loopback_host(host_text) and _loopback_host(authority)):
                raise _Refuse(403, "Host not allowed: this server answers on localhost only")
        # Expect: 100-continue is answered by uvicorn on the first read of the body, so only from here on.

    async def _read_body(self, receive: Any, held: list[int]) -> bytes:
        """The whole body, up to MAX_WIRE_BODY_BYTES and counted against the body budget (the protocol times it)."""
        parts: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":  # a hang-up, a bad chunk, or BODY_TIMEOUT_S (answered 408)
                raise _ClientGone
            chunk = message.get("body", b"")
            if chunk:
                size += len(chunk)
                if size > MAX_WIRE_BODY_BYTES:  # a chunked body: its size is only known as it comes
                    raise _Refuse(413, f"Request body over {MAX_WIRE_BODY_BYTES} bytes")
                self._hold(held, size - SMALL_BODY_BYTES)
                parts.append(chunk)
            if not message.get("more_body", False):
                return b"".join(parts)

    def _hold(self, held: list[int], wanted: int) -> None:
        extra = wanted - held[0]
        if extra <= 0:
            return
        if self.body_bytes_held + extra > self.limits.body_budget_bytes:
            raise _Refuse(503, "Too many large request bodies at once; retry shortly", [(b"retry-after", b"1")])
        self.body_bytes_held += extra
        held[0] += extra

    def _invoke(
        self, method: str, target: str, headers: list[tuple[str, str]], body: bytes, source_ip: str
    ) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
        """On a worker thread: build the event, call the handler, turn its result into status, headers and body."""
        request_id = str(uuid.uuid4())
        event = build_event(method, target, headers, body, source_ip=source_ip, request_id=request_id)
        result = self.handler(event, LocalContext(aws_request_id=request_id))
        status = int(result["statusCode"])
        if not 200 <= status <= 599:
            raise ValueError("the handler answered a status outside 200-599")
        payload = result.get("body") or ""
        raw = base64.b64decode(payload) if result.get("isBase64Encoded") else payload.encode("utf-8")
        response_headers = [
            (str(name).encode("latin-1"), str(value).encode("latin-1"))
            for name, value in (result.get("headers") or {}).items()
            if str(name).lower() not in ("content-length", "transfer-encoding")
        ]
        if status not in (204, 304):  # RFC 9110 8.6: never in a 204 (a CORS preflight's answer)
            response_headers.append((b"content-length", str(len(raw)).encode("ascii")))
        return status, response_headers, raw


class _HandlerThreads:
    """Runs the (synchronous) Lambda handler on daemon threads: few while calls are quick, more when they wait.

    With the GIL only one thread runs Python at a time, and threads that all want it slow each other down (on the
    load test, a thread per request in flight cost ~20% more CPU per request than one thread taking them in turn).
    So QUICK_HANDLER_CALLS threads take the calls in turn, and a call still running after SLOW_HANDLER_CALL_S is
    taken to be waiting (on the upstream): another thread starts for the calls queued behind it, up to `size`, and
    leaves again once no call needs it. Slow upstream calls hold neither the event loop nor the requests behind
    them. Daemon threads, so a stuck call never delays exit; a call cancelled by shutdown is abandoned (its thread
    finishes it and the result is dropped).
    """

    def __init__(self, size: int, quick_calls: int = QUICK_HANDLER_CALLS, slow_s: float = SLOW_HANDLER_CALL_S) -> None:
        self.size = size
        self.quick_calls = quick_calls
        self.slow_s = slow_s
        self.jobs: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self.lock = threading.Lock()  # guards running, slow and workers
        self.running: dict[int, float] = {}  # call → time.monotonic() when it started
        self.slow: set[int] = set()  # running calls older than slow_s
        self.workers = 0  # threads taking calls
        self.pending = 0  # calls handed over and not yet answered (the event loop's thread only)
        self.waiting: set[asyncio.Future[Any]] = set()  # futures of those calls (the event loop's thread only)
        self._watch: asyncio.TimerHandle | None = None

    async def run(self, function: Any, *args: Any) -> Any:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        self.pending += 1
        self.waiting.add(future)
        self.jobs.put((loop, future, function, args))
        self._add_workers()
        if self._watch is None:
            self._watch = loop.call_later(self.slow_s, self._watch_for_slow_calls, loop)
        try:
            return await future
        finally:
            self.waiting.discard(future)

    def abandon(self) -> None:
        """Stop waiting for the calls still running or queued (shutdown): they raise _ShuttingDown."""
        for future in list(self.waiting):
            if not future.done():
                future.set_exception(_ShuttingDown())

    def stop(self) -> None:
        with self.lock:
            workers = self.workers
        for _ in range(workers):
            self.jobs.put(None)

    def _add_workers(self) -> None:
        """Threads up to QUICK_HANDLER_CALLS plus one per slow call (at most `size`, and no more than calls)."""
        with self.lock:
            wanted = min(self.size, self.quick_calls + len(self.slow), self.pending)
            new = max(0, wanted - self.workers)
            self.workers += new
        for _ in range(new):
            threading.Thread(target=self._work, name="progressive-mcp-handler", daemon=True).start()

    def _watch_for_slow_calls(self, loop: asyncio.AbstractEventLoop) -> None:
        self._watch = None
        now = time.monotonic()
        with self.lock:
            self.slow.update(key for key, started in self.running.items() if now - started >= self.slow_s)
        self._add_workers()
        if self.pending:
            self._watch = loop.call_later(self.slow_s, self._watch_for_slow_calls, loop)

    def _work(self) -> None:
        while True:
            job = self.jobs.get()
            if job is None:
                with self.lock:
                    self.workers -= 1
                return
            loop, future, function, args = job
            key = id(job)
            with self.lock:
                self.running[key] = time.monotonic()
            try:
                outcome: tuple[Any, BaseException | None] = (function(*args), None)
            except BaseException as exc:
                outcome = (None, exc)
            with self.lock:
                del self.running[key]
                self.slow.discard(key)
                surplus = self.workers > self.quick_calls + len(self.slow)
                if surplus:
                    self.workers -= 1
            with contextlib.suppress(RuntimeError):  # the loop is gone (the server stopped): nobody is waiting
                loop.call_soon_threadsafe(self._settle, future, *outcome)
            if surplus:
                return

    def _settle(self, future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
        self.pending -= 1
        if future.done():  # cancelled meanwhile (shutdown)
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)


async def _plain(send: Any, status: int, message: str, headers: list[tuple[bytes, bytes]] | None = None) -> None:
    body = message.encode("utf-8")
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"text/plain; charset=utf-8"),
                (b"content-length", str(len(body)).encode("ascii")),
                (b"connection", b"close"),  # the body may be unread: never reuse the connection
                *(headers or []),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


# --- connections: uvicorn's h11 protocol plus deadlines and a cap -------------------------------------------------


class _ConnectionGuard:
    """The open connections of one server, and which of them may be dropped to admit a new one (the event loop's)."""

    def __init__(self, limits: ServeLimits) -> None:
        self.limits = limits
        self.open: set[_GuardedH11Protocol] = set()
        # Connections not waiting on a request of theirs (just opened, still sending a request, or idle after an
        # answer), oldest first (a dict keeps insertion order): the ones dropped when the cap is reached.
        self.droppable: dict[_GuardedH11Protocol, None] = {}
        self.closing = False  # the server is shutting down: no new connections

    def admit(self, connection: _GuardedH11Protocol) -> bool:
        if self.closing:
            return False
        while len(self.open) >= self.limits.max_connections:
            if not self.droppable:
                return False
            oldest = next(iter(self.droppable))
            self.forget(oldest)
            oldest.transport.abort()
        self.open.add(connection)
        self.droppable[connection] = None
        return True

    def busy(self, connection: _GuardedH11Protocol) -> None:
        self.droppable.pop(connection, None)

    def idle(self, connection: _GuardedH11Protocol) -> None:
        if connection in self.open:
            self.droppable.pop(connection, None)
            self.droppable[connection] = None

    def forget(self, connection: _GuardedH11Protocol) -> None:
        self.open.discard(connection)
        self.droppable.pop(connection, None)


class _RecordingConnection(h11.Connection):
    """h11's connection, keeping the last parse error so the answer can carry h11's status for it (431, 501)."""

    last_error: h11.RemoteProtocolError | None = None

    def next_event(self) -> Any:
        try:
            return super().next_event()
        except h11.RemoteProtocolError as exc:
            self.last_error = exc
            raise


class _GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with deadlines for the client's side, the connection cap, and h11's error statuses.

    uvicorn has a keep-alive timeout, but nothing limits how long a client may take to send a request: a
    connection that sends half of one (or nothing) is held forever. Here one timer runs while the server waits
    for a request: HEADER_TIMEOUT_S for its line and headers (from the connection's start, or from the first byte
    of a later request on a kept-alive one), then BODY_TIMEOUT_S for its body. A connection whose client leaves
    the answer unread for SEND_TIMEOUT_S is aborted too.
    """

    guard: _ConnectionGuard  # set on the per-server subclass
    conn: _RecordingConnection

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.conn = _RecordingConnection(h11.SERVER, self.guard.limits.max_header_bytes)
        self._request_timer: asyncio.TimerHandle | None = None  # waiting for the client's head or body
        self._send_timer: asyncio.TimerHandle | None = None  # waiting for the client to read our answer
        self._in_request = False  # from a complete head to the end of our answer
        self._reading_body = False
        self._seen_cycle: object = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if not self.guard.admit(self):
            transport.abort()  # every connection has a whole request in: no room
            return
        self._request_timer = self.loop.call_later(self.guard.limits.header_timeout_s, self._timed_out)

    def connection_lost(self, exc: Exception | None) -> None:
        for timer in (self._request_timer, self._send_timer):
            if timer is not None:
                timer.cancel()
        self._request_timer = self._send_timer = None
        self.guard.forget(self)
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if not self._in_request and self._request_timer is None and not self.transport.is_closing():
            # Part of a new request on a kept-alive connection (a whole head would have started one): uvicorn
            # has just stopped its keep-alive timer, so the header deadline starts now.
            self._request_timer = self.loop.call_later(self.guard.limits.header_timeout_s, self._timed_out)

    def handle_events(self) -> None:
        super().handle_events()
        if self.cycle is not self._seen_cycle:  # h11 produced a Request: the head is complete
            self._seen_cycle = self.cycle
            self._in_request = self._reading_body = True
            self._stop_request_timer()
        if not self._reading_body:
            return
        if self.conn.their_state in (h11.DONE, h11.MUST_CLOSE):
            # The whole request is in: from here on the connection waits for the handler, so it is not dropped to
            # make room (until then, a client trickling its body is as droppable as one trickling its headers).
            self._reading_body = False
            self._stop_request_timer()
            self.guard.busy(self)
        elif self._request_timer is None and not self.transport.is_closing():
            self._request_timer = self.loop.call_later(self.guard.limits.body_timeout_s, self._timed_out)

    def on_response_complete(self) -> None:
        self._in_request = self._reading_body = False
        if not self.transport.is_closing():
            self.guard.idle(self)
        if self.transport.get_write_buffer_size():
            self._arm_send_timer()  # the answer is still (partly) unsent: the client must read it in time
        super().on_response_complete()

    def pause_writing(self) -> None:
        super().pause_writing()
        self._arm_send_timer()

    def timeout_keep_alive_handler(self) -> None:
        if self.transport.get_write_buffer_size():
            self.transport.abort()  # close() would wait for the unread answer to leave, forever
        else:
            super().timeout_keep_alive_handler()

    def send_400_response(self, msg: str) -> None:
        error = self.conn.last_error
        status = error.error_status_hint if error is not None else 400
        if status == 431:
            text = f"Request line and headers over {self.guard.limits.max_header_bytes} bytes"
        else:  # h11's reason, without the bytes it may quote: "illegal chunk header", "bad Content-Length", ...
            reason = str(error or msg).split(": b'", 1)[0].split(': b"', 1)[0]
            text = reason[:1].upper() + reason[1:]
        self._answer_and_close(status, text)

    def shutdown(self) -> None:
        try:
            super().shutdown()
        except h11.LocalProtocolError:  # a connection h11 gave up on: nothing to say, just close it
            self.transport.close()

    def _answer_and_close(self, status: int, text: str) -> None:
        """Answer here, not in the app (a request h11 refused, or a body that did not come), and close."""
        body = text.encode("utf-8", "replace")
        headers = [
            (b"content-type", b"text/plain; charset=utf-8"),
            (b"content-length", str(len(body)).encode("ascii")),
            (b"connection", b"close"),
        ]
        with contextlib.suppress(h11.LocalProtocolError):  # an answer already under way: just close
            response = h11.Response(status_code=status, headers=headers, reason=_phrase(status))
            for event in (response, h11.Data(data=body), h11.EndOfMessage()):
                self.transport.write(self.conn.send(event))
        self.transport.close()
        if self.cycle is not None and not self.cycle.response_complete:
            # The adapter, waiting for the rest of the body, learns the request is over (as on a hang-up), even
            # if the client does not read this answer and the connection takes a while to close.
            self.cycle.disconnected = True
            self.cycle.message_event.set()
        self._arm_send_timer()

    def _timed_out(self) -> None:
        self._request_timer = None
        if self._reading_body and self.cycle is not None and not self.cycle.response_started:
            self._answer_and_close(408, f"Request body not received within {self.guard.limits.body_timeout_s:g} s")
        elif not self._in_request or self._reading_body:
            self.transport.abort()  # headers not in time: nothing to answer

    def _stop_request_timer(self) -> None:
        if self._request_timer is not None:
            self._request_timer.cancel()
            self._request_timer = None

    def _arm_send_timer(self) -> None:
        if self._send_timer is None:
            self._send_timer = self.loop.call_later(self.guard.limits.send_timeout_s, self._send_timed_out)

    def _send_timed_out(self) -> None:
        self._send_timer = None
        if self.transport.get_write_buffer_size():
            self.transport.abort()


def _phrase(status: int) -> bytes:
    with contextlib.suppress(ValueError):
        return http.HTTPStatus(status).phrase.encode("ascii")
    return b""


# --- hosts ------------------------------------------------------------------------------------------------------


# A Host header (RFC 9110 7.2) as this server accepts it: a name or IPv4 address, or an IPv6 address in brackets,
# then an optional `:port` of digits, and nothing else (no userinfo, no text after the `]`).
_HOST = re.compile(r"(?:\[(?P<ipv6>[0-9A-Fa-f:.]+)\]|(?P<name>[A-Za-z0-9._-]+))(?::[0-9]*)?")


def _is_loopback(host: str) -> bool:
    if host in LOOPBACK_NAMES:
        return True
    with contextlib.suppress(ValueError):
        address = ipaddress.ip_address(host)
        mapped = getattr(address, "ipv4_mapped", None)  # ::ffff:127.0.0.1
        return address.is_loopback or (mapped is not None and mapped.is_loopback)
    return False


def _loopback_host(host_header: str) -> bool:
    """Whether a Host header (or an absolute-form target's authority) names this machine's loopback interface.
    The whole value must parse: `[::1].evil.example` or `localhost:80@evil.example` names another host."""
    match = _HOST.fullmatch(host_header.strip())
    if match is None:
        return False
    if match["ipv6"] is not None:
        return ":" in match["ipv6"] and _is_loopback(match["ipv6"].lower())  # `[127.0.0.1]` is no IPv6 literal
    return _is_loopback(match["name"].lower())


def _authority(target: str) -> str:
    """The authority of an absolute-form request target (`http://localhost:8000/mcp` → `localhost:8000`)."""
    rest = target.split("://", 1)[1]
    return re.split(r"[/?#]", rest, maxsplit=1)[0]


# --- the CLI ----------------------------------------------------------------------------------------------------


def run(args: argparse.Namespace) -> int:
    """Set the environment from the flags, import the Lambda handler module as Lambda would, serve."""
    env = {
        "PMCP_SPEC": args.spec,
        "PMCP_MODE": args.mode,
        "PMCP_CATEGORIES": args.categories,
        "PMCP_INCLUDE": getattr(args, "include", None),
        "PMCP_VOCABULARY": getattr(args, "vocabulary", None),
        "PMCP_EXCLUDE": getattr(args, "exclude", None),
        "PMCP_SERVERS": getattr(args, "servers", None),
        "PMCP_INDEX": getattr(args, "index", None),
        "PMCP_UPSTREAM_URL": args.upstream,
        "PMCP_AUTH_MODE": args.auth_mode,
        "PMCP_DEADLINE_S": None if getattr(args, "deadline", None) is None else f"{args.deadline:g}",
        "PMCP_CONFORMANCE_FIXTURES": "1" if args.conformance_fixtures else None,
        "PMCP_CACHE": "off" if getattr(args, "cache", None) is False else None,
        "PMCP_SCHEMA_VIEW": getattr(args, "schema_view", None),
    }
    os.environ.update({k: v for k, v in env.items() if v})
    os.environ.setdefault("POWERTOOLS_LOG_LEVEL", args.log_level.upper())
    os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")  # EMF lines are for CloudWatch, noise here
    with contextlib.ExitStack() as stack:
        made_token: str | None = None
        try:
            if args.sample_upstream:
                from progressive_mcp.offline.sample_upstream import SampleUpstream

                sample = stack.enter_context(SampleUpstream(port=0))
                os.environ["PMCP_UPSTREAM_URL"] = sample.url
                if _set("PMCP_AUTH_MODE") == "server-key":
                    made_token = _server_key_for_the_sample()
                elif _set("PMCP_AUTH_MODE") == "oauth":
                    _server_key_for_the_sample(make_token=False)
            from lambda_fn.handler import ENDPOINT, handler
        except ProgressiveMCPError as exc:
            print(f"progressive-mcp: {exc}", file=sys.stderr)
            return 2
        try:
            server = LocalServer(handler, host=args.host, port=args.port)
        except OSError as exc:
            print(f"progressive-mcp: cannot listen on {args.host}:{args.port}: {exc.strerror}", file=sys.stderr)
            return 2
        hint = _how_to_call(ENDPOINT.auth_mode, sample_upstream=args.sample_upstream, made_token=made_token)
        print(f"progressive-mcp: MCP endpoint at {server.url}{hint and '  ·  ' + hint}", flush=True)
        stack.callback(ENDPOINT.close)  # a gateway's stdio servers stop with it
        with contextlib.suppress(KeyboardInterrupt):
            server.serve_forever()
    return 0


def _server_key_for_the_sample(*, make_token: bool = True) -> str | None:
    """Server-key (or oauth) mode against the sample upstream: a dummy upstream key (the sample takes any), and
    in server-key mode a bearer token made for this run unless tokens are configured. Returns the token made."""
    from progressive_mcp.sources import default_spec_path
    from progressive_mcp.sources.spec import load_spec

    auth = load_spec(os.environ.get("PMCP_SPEC") or default_spec_path()).api.auth
    if auth is not None:
        os.environ[auth.env] = SAMPLE_UPSTREAM_KEY  # never a real key: it would only go to the fake upstream
    os.environ.pop("PMCP_UPSTREAM_KEY_SECRET", None)
    if not make_token or _set("PMCP_ENDPOINT_TOKENS") or _set("PMCP_ENDPOINT_TOKENS_SECRET"):
        return None
    token = secrets.token_urlsafe(24)
    os.environ["PMCP_ENDPOINT_TOKENS"] = token
    return token


def _how_to_call(auth_mode: str, *, sample_upstream: bool, made_token: str | None) -> str:
    """The banner's hint: how a client calls tools in this auth mode."""
    if auth_mode == "oauth":
        where = "; the sample upstream gets a dummy key" if sample_upstream else ""
        return (
            f"oauth mode: clients sign in at {_set('PMCP_OAUTH_ISSUER')} (the 401's WWW-Authenticate names this "
            f"endpoint's metadata){where}"
        )
    if auth_mode != "server-key":
        return "call tools with ?apikey=demo (any key works with the sample upstream)" if sample_upstream else ""
    if made_token is not None:
        return (
            f"server-key mode: send 'Authorization: Bearer {made_token}' (a token made for this run; "
            "set PMCP_ENDPOINT_TOKENS to choose your own); the sample upstream gets a dummy key"
        )
    source = "PMCP_ENDPOINT_TOKENS_SECRET" if _set("PMCP_ENDPOINT_TOKENS_SECRET") else "PMCP_ENDPOINT_TOKENS"
    where = "; the sample upstream gets a dummy key" if sample_upstream else ""
    return f"server-key mode: send 'Authorization: Bearer <token>' with one of the tokens in {source}{where}"


def _set(name: str) -> str:
    return (os.environ.get(name) or "").strip()
