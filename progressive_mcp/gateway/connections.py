"""Connections to the servers behind the gateway, made on demand with the mcp SDK's client.

A stdio server is started on its first request (a call or a sync), kept while it is used, and stopped after
`idle_s` without one; an HTTP server gets a fresh connection per request (stateless). The pool runs its own event
loop in a background thread, so the synchronous core can call it from any thread. A server that cannot start,
crashes or does not answer in `timeout_s` raises ServerUnavailable naming it and the reason; its next request
waits out a backoff (1 s, doubling, at most 60 s) and then tries again. A server's stderr goes to a temporary
file whose last line, secrets masked (see `ServerConfig.secrets`) and control characters escaped, is logged when it
fails. Example::

    pool = ServerPool(load_servers("servers.json"))
    tools = pool.list_tools("memory")                    # every page of tools/list, as wire JSON
    result = pool.call_tool("memory", "read_graph", {})  # the CallToolResult, as wire JSON
"""

from __future__ import annotations

import contextlib
import logging
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import IO, Any, TypeVar

import anyio
import anyio.from_thread
import mcp_types as types
from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED, HEADER_MISMATCH
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from progressive_mcp.errors import ToolError
from progressive_mcp.gateway.config import GatewayConfig, ServerConfig
from progressive_mcp.gateway.limits import MAX_TOOLS_PER_SERVER
from progressive_mcp.redaction import Secrets, protect_logs
from progressive_mcp.search.hints import HINTS_KEY

logger = logging.getLogger(__name__)

MAX_PAGES = 100  # of one server's tools/list
BACKOFF_FIRST_S = 1.0
BACKOFF_MAX_S = 60.0
STDERR_TAIL_CHARS = 16_000  # read from the end of a server's stderr to find its last line
STDERR_LINE_CHARS = 200  # of that line shown, once masked
_T = TypeVar("_T")


class ServerUnavailable(ToolError):
    """A server behind the gateway could not answer: it did not start, crashed, timed out or is backing off."""

    def __init__(self, server: str, reason: str, *, retry_after_s: float | None = None) -> None:
        self.server = server
        self.reason = reason
        self.retry_after_s = retry_after_s
        when = "on the next call" if not retry_after_s else f"on a call made after {max(retry_after_s, 0.1):.1f} s"
        super().__init__(
            f"MCP server {server!r} is unavailable: {reason}. Tools of other servers still work; this one's will be "
            f"tried again {when}."
        )

    def details(self) -> dict[str, Any]:
        fields: dict[str, Any] = {"kind": "server_unavailable", "server": self.server}
        if self.retry_after_s is not None:
            fields["retry_after_s"] = round(self.retry_after_s, 1)
        return fields


class ServerRefused(ToolError):
    """A server answered a request with a protocol error (an unknown tool, arguments it refused) or a malformed
    result; it is up, and stays so."""

    def __init__(self, server: str, message: str) -> None:
        self.server = server
        super().__init__(f"MCP server {server!r} refused the call: {message}")

    def details(self) -> dict[str, Any]:
        return {"kind": "server_error", "server": self.server}


@dataclass
class _Backoff:
    failures: int = 0
    until: float = 0.0
    reason: str = ""


@dataclass
class _Connection:
    """A running stdio server: its SDK client, and what stops it."""

    client: Any
    stop: anyio.Event
    done: anyio.Event
    stderr: IO[str]
    last_used: float = field(default_factory=time.monotonic)
    busy: int = 0


class ServerPool:
    """Clients of the configured servers; thread-safe. `on_tools_changed(server)` is called (from the pool's
    thread) when a connected server says its tools changed."""

    def __init__(
        self,
        config: GatewayConfig,
        *,
        on_tools_changed: Callable[[str], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.config = config
        self.on_tools_changed = on_tools_changed
        self._clock = clock
        self._portal_cm: Any = None
        self._portal: anyio.from_thread.BlockingPortal | None = None
        self._host: Any = None  # the future of `_hold`
        self._group: Any = None  # the task group `_hold` keeps open
        self._portal_lock = threading.Lock()
        self._connections: dict[str, _Connection] = {}
        self._starting: dict[str, anyio.Lock] = {}
        self._backoff: dict[str, _Backoff] = {}
        # Every server's secrets are masked in whatever the pool says of any server (and in the process's logs).
        self._secrets = Secrets.of(*config.secrets, basic_parts=False)
        protect_logs(self._secrets, self)

    # The synchronous API: each runs on the pool's event loop and waits for it.

    def list_tools(self, server: str) -> list[dict[str, Any]]:
        """Every tool the server lists (all pages), as wire JSON."""
        return self._run(self._list_tools, self.config.server(server))

    def call_tool(
        self, server: str, name: str, arguments: dict[str, Any], timeout_s: float | None = None
    ) -> dict[str, Any]:
        """The server's CallToolResult for a call, as wire JSON (an `isError` result is a result, not an error)."""
        return self._run(self._call_tool, self.config.server(server), name, arguments, timeout_s)

    def connected(self) -> list[str]:
        """The stdio servers running now."""
        return sorted(self._connections)

    def close(self) -> None:
        """Stop every server and the pool's thread."""
        with self._portal_lock:
            portal, self._portal = self._portal, None
            if portal is None:
                return
            with contextlib.suppress(Exception):
                portal.call(self._stop_all)
            self._host.cancel()
            self._portal_cm.__exit__(None, None, None)

    def _run(self, func: Callable[..., Awaitable[_T]], *args: Any) -> _T:
        with self._portal_lock:
            if self._portal is None:
                self._portal_cm = anyio.from_thread.start_blocking_portal()
                self._portal = self._portal_cm.__enter__()
                self._host, _ = self._portal.start_task(self._hold)
            portal = self._portal
        return portal.call(func, *args)

    # On the pool's event loop.

    async def _list_tools(self, server: ServerConfig) -> list[dict[str, Any]]:
        async def pages(client: Any) -> list[dict[str, Any]]:
            tools: list[dict[str, Any]] = []
            cursor: str | None = None
            for _ in range(MAX_PAGES):
                # A progressive-mcp server then adds its tools' search hints; any other ignores the key.
                page = await client.list_tools(cursor=cursor, meta={HINTS_KEY: True}, cache_mode="refresh")
                wanted = page.tools[: MAX_TOOLS_PER_SERVER + 1 - len(tools)]  # one more says the server has more
                tools += [t.model_dump(by_alias=True, exclude_none=True, mode="json") for t in wanted]
                cursor = page.next_cursor
                if not cursor or len(tools) > MAX_TOOLS_PER_SERVER:  # more would be left out at sync anyway
                    break
            return tools

        return await self._with_client(server, pages, server.timeout_s * 4)

    async def _call_tool(
        self, server: ServerConfig, name: str, arguments: dict[str, Any], timeout_s: float | None
    ) -> dict[str, Any]:
        async def call(client: Any) -> dict[str, Any]:
            # The session's own send, not Client.call_tool: that one refuses a result whose structuredContent breaks
            # the tool's output schema, and a gateway passes the server's answer on as it is.
            request = types.CallToolRequest(params=types.CallToolRequestParams(name=name, arguments=arguments))
            try:
                result = await client.session.send_request(request, types.CallToolResult)
            except MCPError as exc:
                if exc.code != HEADER_MISMATCH:
                    raise
                await client.list_tools(cache_mode="refresh")  # 2026-07-28: the server wants the tool listed first
                result = await client.session.send_request(request, types.CallToolResult)
            return dict(result.model_dump(by_alias=True, exclude_none=True, mode="json"))

        return await self._with_client(server, call, min(timeout_s or server.timeout_s, server.timeout_s))

    async def _with_client(self, server: ServerConfig, use: Callable[[Any], Awaitable[_T]], timeout_s: float) -> _T:
        backoff = self._backoff.get(server.name)
        now = self._clock()
        if backoff is not None and now < backoff.until:
            raise ServerUnavailable(server.name, backoff.reason, retry_after_s=backoff.until - now)
        try:
            with anyio.fail_after(timeout_s):
                if server.transport == "http":
                    async with self._http_client(server) as client:
                        result = await use(client)
                else:
                    connection = await self._connection(server)
                    connection.busy += 1
                    try:
                        result = await use(connection.client)
                    finally:
                        connection.busy -= 1
                        connection.last_used = self._clock()
        except (ServerUnavailable, ServerRefused):
            raise
        except MCPError as exc:
            if exc.code != CONNECTION_CLOSED:  # the server answered, with an error: it stays up
                raise ServerRefused(server.name, self._secrets.clean(" ".join(str(exc.message).split()), 300)) from None
            reason = "it closed the connection (the process exited or crashed)"
            raise await self._failed(server, reason) from None
        except ValidationError:
            raise ServerRefused(server.name, "its answer is not a valid MCP result") from None
        except TimeoutError:
            raise await self._failed(server, f"no answer within {timeout_s:g} s") from None
        except _StartFailed as exc:
            raise await self._failed(server, str(exc)) from None
        except Exception as exc:
            raise await self._failed(server, self._describe(server, exc)) from None
        self._backoff.pop(server.name, None)
        return result

    def _http_client(self, server: ServerConfig) -> Any:
        from mcp import Client
        from mcp.client.streamable_http import streamable_http_client
        from mcp.shared._httpx_utils import create_mcp_http_client

        assert server.url is not None
        http = create_mcp_http_client(headers=dict(server.headers))
        transport = streamable_http_client(server.url, http_client=http)
        return Client(transport, cache=None)  # timed by _with_client

    async def _connection(self, server: ServerConfig) -> _Connection:
        connection = self._connections.get(server.name)
        if connection is not None and not connection.done.is_set():
            return connection
        lock = self._starting.setdefault(server.name, anyio.Lock())
        async with lock:
            connection = self._connections.get(server.name)
            if connection is None or connection.done.is_set():
                connection = await self._start(server)
                self._connections[server.name] = connection
        return connection

    async def _start(self, server: ServerConfig) -> _Connection:
        from mcp import Client
        from mcp.client.stdio import StdioServerParameters, stdio_client

        assert server.command is not None
        params = StdioServerParameters(
            command=server.command, args=list(server.args), env=dict(server.env), cwd=server.cwd
        )
        stderr = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")  # noqa: SIM115 (closed with it)
        changed = self._notifier(server.name)

        async def on_message(message: Any) -> None:
            if isinstance(message, types.ToolListChangedNotification):
                changed()

        transport = stdio_client(params, errlog=stderr)
        client = Client(transport, message_handler=on_message, cache=None)  # timed by _with_client
        stop, done = anyio.Event(), anyio.Event()
        started = anyio.Event()
        failure: list[BaseException] = []

        async def run() -> None:
            try:
                async with client:
                    started.set()
                    async with anyio.create_task_group() as group:
                        if client.protocol_version in MODERN_PROTOCOL_VERSIONS:  # changes come on a listen stream
                            group.start_soon(self._listen, client, changed)
                        await stop.wait()
                        group.cancel_scope.cancel()
            except Exception as exc:  # reported to whoever waits for the start
                failure.append(exc)
            finally:
                done.set()
                started.set()
                if self._connections.get(server.name) is not None and self._connections[server.name].done is done:
                    del self._connections[server.name]
                    logger.info("MCP server %s stopped", server.name, extra={"server": server.name})

        self._group.start_soon(run)
        await started.wait()
        if failure or done.is_set():
            tail = self._stderr_line(stderr)
            stderr.close()
            reason = self._describe(server, failure[0]) if failure else "it exited during start-up"
            raise _StartFailed(_with_stderr(reason, tail))
        logger.info("MCP server %s started", server.name, extra={"server": server.name})
        return _Connection(client=client, stop=stop, done=done, stderr=stderr)

    async def _hold(self, *, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
        """The pool's task group, where every connection runs, and the idle reaper."""
        async with anyio.create_task_group() as group:
            self._group = group
            group.start_soon(self._reaper)
            task_status.started()
            await anyio.sleep_forever()

    async def _listen(self, client: Any, changed: Callable[[], None]) -> None:
        with contextlib.suppress(Exception):
            async with client.listen(tools_list_changed=True) as subscription:
                async for _event in subscription:
                    changed()

    def _notifier(self, server: str) -> Callable[[], None]:
        def changed() -> None:
            logger.info("MCP server %s says its tools changed", server, extra={"server": server})
            if self.on_tools_changed is not None:
                try:
                    self.on_tools_changed(server)
                except Exception as exc:  # a failed re-sync is logged where it runs
                    logger.warning(
                        "tools-changed handler failed", extra={"server": server, "error": type(exc).__name__}
                    )

        return changed

    async def _failed(self, server: ServerConfig, reason: str) -> ServerUnavailable:
        """After a failure: stop the server (a hung or dead one is started afresh), back off, and say why it
        failed (with the last line of its stderr, when it wrote one) and when it will be tried again."""
        connection = self._connections.pop(server.name, None)
        if connection is not None:
            connection.stop.set()
            with anyio.move_on_after(5):
                await connection.done.wait()
            reason = _with_stderr(reason, self._stderr_line(connection.stderr))
            connection.stderr.close()
        previous = self._backoff.get(server.name, _Backoff())
        failures = previous.failures + 1
        wait = min(BACKOFF_FIRST_S * 2 ** (failures - 1), BACKOFF_MAX_S)
        self._backoff[server.name] = _Backoff(failures, self._clock() + wait, reason)
        logger.warning("MCP server %s unavailable: %s", server.name, reason, extra={"server": server.name})
        return ServerUnavailable(server.name, reason, retry_after_s=wait)

    def _describe(self, server: ServerConfig, exc: BaseException) -> str:
        """Why a request failed, in words, with the server's secrets masked."""
        if isinstance(exc, FileNotFoundError | PermissionError):
            reason = f"its command {server.command!r} could not be started ({type(exc).__name__})"
        elif isinstance(exc, ExceptionGroup):
            inner = exc.exceptions[0] if exc.exceptions else exc
            return self._describe(server, inner)
        else:
            text = self._secrets.clean(" ".join(str(exc).split()), 200)
            reason = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
        return self._secrets.clean(reason)

    def _stderr_line(self, stream: IO[str]) -> str:
        """The last line a server wrote to its stderr, masked, escaped and then cut ("" if none)."""
        return self._secrets.clean(_last_line(stream), STDERR_LINE_CHARS)

    async def _reaper(self) -> None:
        """Stop stdio servers idle for longer than their `idle_s`."""
        while True:
            await anyio.sleep(1.0)
            now = self._clock()
            for name, connection in list(self._connections.items()):
                idle_s = self.config.server(name).idle_s
                if connection.busy == 0 and now - connection.last_used > idle_s:
                    self._connections.pop(name, None)
                    connection.stop.set()

    async def _stop_all(self) -> None:
        connections = list(self._connections.values())
        self._connections.clear()
        for connection in connections:
            connection.stop.set()
        for connection in connections:
            with anyio.move_on_after(5):
                await connection.done.wait()


class _StartFailed(Exception):
    """A stdio server did not come up; the message says why."""


def _last_line(stream: IO[str]) -> str:
    """The last whole line a server wrote to its stderr ("" if none), uncut: it is masked before it is cut (a line
    begun before the part read is left out, as its start could be a secret's end)."""
    try:
        stream.seek(0, 2)
        size = stream.tell()
        start = max(0, size - STDERR_TAIL_CHARS)
        stream.seek(start)
        text = stream.read()
    except (OSError, ValueError):
        return ""
    if start > 0:
        text = text.partition("\n")[2]
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines and start > 0:
        return f"(a line longer than {STDERR_TAIL_CHARS:,} characters)"
    return lines[-1] if lines else ""


def _with_stderr(reason: str, tail: str) -> str:
    return f"{reason} (its stderr ends: {tail})" if tail else reason
