"""What the two offline upstreams (`sample_upstream`, `rest_upstream`) share: an HTTP server on a loopback port,
served from a daemon thread, that keeps track of its kept-alive connections so that `stop()` can drop them (a
client must never keep talking to a stopped server), and says nothing on a terminal.

A subclass passes its request handler (a `TrackedHandler`) and thread name to `ServedUpstream.__init__`; the
handler reaches the upstream as `self.server.upstream`.
"""

from __future__ import annotations

import contextlib
import socket
import sys
import threading
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

# How many requests an upstream's record keeps: the newest, so a long-running `serve --sample-upstream` or
# `sample-upstream` stays bounded (the record is for tests and people reading `/_sample/requests`, `/__requests`).
RECORD_LIMIT = 10_000
POLL_INTERVAL_S = 0.02  # a short poll keeps stop() fast: shutdown() waits for the serving loop's next poll


class LoopbackServer(ThreadingHTTPServer):
    daemon_threads = True
    upstream: Any  # the ServedUpstream subclass that serves

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that gave up (a timeout test, a cancelled call) closes the socket mid-reply: not our error.
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


class TrackedHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, like real services; every reply sets Content-Length (or has no body)
    # TCP_NODELAY: headers and body are separate writes; with Nagle on, the client's delayed ACK adds ~40 ms.
    disable_nagle_algorithm = True

    def setup(self) -> None:
        super().setup()
        self.server.upstream.track(self.connection, alive=True)  # type: ignore[attr-defined]

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.upstream.track(self.connection, alive=False)  # type: ignore[attr-defined]

    def log_message(self, format: str, *args: Any) -> None:
        pass  # stay quiet (tests and the demo share a terminal) and never log a request line that may carry a key


def record() -> deque[Any]:
    """An empty request record that keeps the newest `RECORD_LIMIT` (read at each call, so a test may lower it)."""
    return deque(maxlen=RECORD_LIMIT)


class ServedUpstream:
    """An upstream served on `host:port` (0: any free port) by `handler`; `start()` serves from a daemon thread."""

    def __init__(self, host: str, port: int, handler: type[TrackedHandler], thread_name: str) -> None:
        self._lock = threading.Lock()
        self._connections: set[socket.socket] = set()
        self._thread: threading.Thread | None = None
        self._handler = handler
        self._thread_name = thread_name
        self.host = host
        self._httpd = self._listen(port)
        self.port: int = self._httpd.server_address[1]

    def _listen(self, port: int) -> LoopbackServer:
        httpd = LoopbackServer((self.host, port), self._handler)
        httpd.upstream = self
        return httpd

    def start(self) -> Self:
        """Serve in a daemon thread and return self."""
        if self._thread is None:
            options = {"poll_interval": POLL_INTERVAL_S}
            self._thread = threading.Thread(
                target=self._httpd.serve_forever, kwargs=options, name=self._thread_name, daemon=True
            )
            self._thread.start()
        return self

    def serve_forever(self) -> None:
        """Serve on the calling thread until interrupted (the CLI's loop)."""
        try:
            self._httpd.serve_forever()
        finally:
            self._httpd.server_close()

    def stop(self) -> None:
        """Stop serving and drop kept-alive connections, so no client talks to a stopped server."""
        if self._thread is not None:
            self._httpd.shutdown()
            self._thread.join(timeout=5)
            self._thread = None
        self._httpd.server_close()
        with self._lock:
            connections = list(self._connections)
        for connection in connections:
            with contextlib.suppress(OSError):  # already closed by the client
                connection.shutdown(socket.SHUT_RDWR)

    def restart(self) -> None:
        """Listen again on the same port after `stop()`, and serve."""
        if self._thread is None:
            self._httpd = self._listen(self.port)
            self.start()

    def track(self, connection: socket.socket, *, alive: bool) -> None:
        with self._lock:
            if alive:
                self._connections.add(connection)
            else:
                self._connections.discard(connection)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
