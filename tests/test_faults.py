"""Upstream faults end to end, over both transports: every fault is a clear `isError` result within the deadline.

Two real servers per module, each driven by the mcp SDK's real client: `python -m stdio_server` over stdio,
and `progressive-mcp serve` (the Lambda handler behind real HTTP) over streamable HTTP. Both send upstream
calls to one offline `SampleUpstream`, whose faults are switched per case through `POST /_sample/faults`
(a refused connection: by closing its listening socket). The servers run with a 2.5 s deadline and their
response cache on, so a fault that was cached would show: after each fault is cleared the same call must
reach the upstream again. The API key must appear in no result, error text or server log.

Run with: .venv/bin/python -m pytest tests/test_faults.py -q
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import queue
import re
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import anyio
import anyio.to_thread
import httpx
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

from lambda_fn.handler import make_handler
from lambda_fn.local import build_event
from progressive_mcp.offline.sample_upstream import SampleUpstream
from progressive_mcp.settings import Settings
from progressive_mcp.surfaces.endpoint import Endpoint

KEY = "FaUlT-SeCrEt-KEY-6093"
ROOT = Path(__file__).resolve().parent.parent
DEADLINE_S = 2.5
# Small timeouts, so the whole module stays well under a minute; the deadline is what the cases exercise.
SERVER_ENV = {  # the stdio server gets its deadline by flag, `serve` by environment variable
    "PMCP_UPSTREAM_TIMEOUT_S": "2",
    "PMCP_UPSTREAM_RETRIES": "2",
    "PYTHONUNBUFFERED": "1",
}
URL_LINE = re.compile(r"MCP endpoint at (http://127\.0\.0\.1:\d+/mcp)")
CURRENCIES = ("USD", "EUR", "GBP", "JPY", "BTC", "ETH")


@dataclass(frozen=True)
class Case:
    """One fault: what to switch on, what the model must be told, and how many requests reach the upstream."""

    faults: dict[str, Any]
    kind: str
    says: str  # a phrase the error message must contain
    attempts: tuple[int, ...]  # how many requests the upstream may see (none when it is not listening)
    retry_after_s: float | None = None
    tool: str = "CURRENCY_EXCHANGE_RATE"
    refuse: bool = False  # close the upstream's listening socket instead of setting faults
    fixed: bool = True  # once the fault is cleared, the same call succeeds (premium answers stay premium)


# Retried faults: three attempts fit in 2.5 s (waits of 0.5 s and 1 s, then 0.5 s to spare); a slow machine may
# only fit two, so both are accepted. Faults that retrying cannot help must be sent exactly once.
RETRIED = (2, 3)
ONCE = (1,)
CASES: dict[str, Case] = {
    "connection refused": Case({}, "unavailable", "Could not reach Alpha Vantage after", (), refuse=True),
    "connection dropped": Case({"disconnect": True}, "unavailable", "Could not reach Alpha Vantage after", RETRIED),
    "timeout": Case({"delay_s": 5.0}, "timeout", "did not answer in time", ONCE),
    "trickling body": Case({"trickle_s": 0.05}, "timeout", "did not answer in time", ONCE),
    "http 500": Case({"status": 500}, "unavailable", "HTTP 500", RETRIED),
    "http 502": Case({"status": 502}, "unavailable", "HTTP 502", RETRIED),
    "http 503": Case({"status": 503}, "unavailable", "HTTP 503", RETRIED),
    "http 503 retry-after 30": Case({"status": 503, "retry_after": 30}, "unavailable", "HTTP 503", ONCE, 30.0),
    # A 1 s Retry-After fits once in the 2.5 s deadline (1 s wait + a 0.5 s attempt), not twice.
    "http 429 retry-after 1": Case({"status": 429, "retry_after": 1}, "rate_limited", "HTTP 429", (2,), 1.0),
    "http 429 retry-after 30": Case({"status": 429, "retry_after": 30}, "rate_limited", "HTTP 429", ONCE, 30.0),
    "rate-limit notice": Case({"rate_limit": True}, "rate_limited", "25 requests per day", ONCE),
    "premium notice": Case(
        {}, "premium_required", "needs a paid", ONCE, tool="TIME_SERIES_DAILY_ADJUSTED", fixed=False
    ),
    "invalid key": Case({"invalid_key": True}, "auth", "rejected the API key", ONCE),
    "malformed json": Case({"malformed": True}, "bad_response", "broken JSON", ONCE),
    "empty body": Case({"empty": True}, "bad_response", "empty body", ONCE),
    "html error page": Case({"html": True}, "bad_response", "HTML page", ONCE),
    "50 MB body": Case({"body_mb": 50}, "bad_response", "larger than 16 MB", ONCE),
}


# --- a client session on its own thread, so one server can serve the whole module ---------------------


class Session:
    """An SDK client kept open on a thread of its own; `call` is synchronous."""

    def __init__(self, opener: Callable[[], AbstractAsyncContextManager[Client]]) -> None:
        self._opener = opener
        self._inbox: queue.Queue[tuple[str, dict[str, Any], concurrent.futures.Future[Any]] | None] = queue.Queue()
        self._ready: concurrent.futures.Future[None] = concurrent.futures.Future()
        self._thread = threading.Thread(target=anyio.run, args=(self._main,), name="mcp-client", daemon=True)
        self._thread.start()
        self._ready.result(timeout=60)

    async def _main(self) -> None:
        try:
            async with self._opener() as client:
                self._ready.set_result(None)
                while (item := await anyio.to_thread.run_sync(self._inbox.get)) is not None:
                    name, arguments, future = item
                    try:
                        future.set_result(await client.call_tool(name, arguments))
                    except Exception as exc:
                        future.set_exception(exc)
        except Exception as exc:
            if not self._ready.done():
                self._ready.set_exception(exc)
            raise

    def call(self, name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        future: concurrent.futures.Future[types.CallToolResult] = concurrent.futures.Future()
        self._inbox.put((name, arguments, future))
        return future.result(timeout=60)

    def close(self) -> None:
        self._inbox.put(None)
        self._thread.join(timeout=30)


@dataclass
class Server:
    session: Session
    logs: list[IO[str]]
    warm: bool = False

    def log_text(self) -> str:
        texts = []
        for log in self.logs:
            log.flush()
            log.seek(0)
            texts.append(log.read())
        return "\n".join(texts)


def clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PMCP_", "POWERTOOLS_", "ALPHAVANTAGE_"))}
    return {**env, **SERVER_ENV}


@pytest.fixture(scope="module")
def stdio_server(upstream: SampleUpstream) -> Iterator[Server]:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "stdio_server", "--upstream", upstream.url, "--deadline", str(DEADLINE_S), "--log-level", "DEBUG"],
        env={**clean_env(), "ALPHAVANTAGE_API_KEY": KEY},
        cwd=str(ROOT),
    )
    with tempfile.TemporaryFile("w+") as errlog:
        session = Session(lambda: Client(stdio_client(params, errlog=errlog), mode="legacy"))
        try:
            yield Server(session, [errlog])
        finally:
            session.close()


@pytest.fixture(scope="module")
def http_server(upstream: SampleUpstream) -> Iterator[Server]:
    command = [sys.executable, "-m", "progressive_mcp.cli", "serve", "--port", "0", "--upstream", upstream.url]
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        env = {**clean_env(), "PMCP_DEADLINE_S": str(DEADLINE_S)}
        proc = subprocess.Popen([*command, "--log-level", "DEBUG"], cwd=ROOT, env=env, stdout=out, stderr=err)
        try:
            url = None
            give_up = time.monotonic() + 30
            while url is None and time.monotonic() < give_up and proc.poll() is None:
                time.sleep(0.05)
                out.seek(0)
                err.seek(0)
                match = URL_LINE.search(out.read() + err.read())
                url = match.group(1) if match else None
            assert url is not None, "progressive-mcp serve announced no URL"
            # Passthrough auth: the caller's key rides on the endpoint URL.
            session = Session(lambda: Client(f"{url}?apikey={KEY}", mode="legacy"))
            try:
                yield Server(session, [out, err])
            finally:
                session.close()
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)


@pytest.fixture(params=["stdio", "http"])
def server(request: pytest.FixtureRequest, upstream: SampleUpstream) -> Server:
    server: Server = request.getfixturevalue(f"{request.param}_server")
    if not server.warm:  # one good call first: the matrix should not time httpx's import
        warm_up = {"tool_name": "GLOBAL_QUOTE", "arguments": {"symbol": "IBM"}}
        assert server.session.call("TOOL_CALL", warm_up).is_error is False
        server.warm = True
    return server


# --- the matrix ------------------------------------------------------------------------------------------


def arguments_for(case_name: str) -> dict[str, Any]:
    """Different arguments for every case (each server has a cache of its own), so no cache entry can answer."""
    pairs = [(a, b) for a in CURRENCIES for b in CURRENCIES if a != b]
    from_currency, to_currency = pairs[list(CASES).index(case_name)]
    return {"from_currency": from_currency, "to_currency": to_currency}


def set_faults(upstream: SampleUpstream, faults: dict[str, Any]) -> None:
    answer = httpx.post(upstream.url.replace("/query", "/_sample/faults"), json=faults, timeout=10)
    assert answer.status_code == 200, answer.text


def tool_call(server: Server, case: Case, arguments: dict[str, Any]) -> types.CallToolResult:
    if case.tool != "CURRENCY_EXCHANGE_RATE":
        arguments = {"symbol": "IBM"}
    return server.session.call("TOOL_CALL", {"tool_name": case.tool, "arguments": arguments})


def request_count(upstream: SampleUpstream) -> int:
    return len(upstream.requests_snapshot())


def assert_no_key(result: types.CallToolResult) -> None:
    wire = json.dumps(result.model_dump(by_alias=True, exclude_none=True))
    assert KEY not in wire


@pytest.mark.parametrize("case_name", CASES)
def test_fault_is_a_clear_error_within_the_deadline_and_never_cached(
    server: Server, upstream: SampleUpstream, case_name: str
) -> None:
    case = CASES[case_name]
    arguments = arguments_for(case_name)
    upstream.reset()
    if case.refuse:
        upstream.refuse_connections()
    else:
        set_faults(upstream, case.faults)
    try:
        result = tool_call(server, case, arguments)
    finally:
        if case.refuse:
            upstream.accept_connections()
    attempts = request_count(upstream)
    upstream.reset()  # clears the faults and the request log

    assert result.is_error is True
    error = result.structured_content["error"]
    assert error["kind"] == case.kind, error
    assert case.says in error["message"], error["message"]
    assert json.loads(result.content[0].text) == result.structured_content  # type: ignore[union-attr]
    assert error.get("retry_after_s") == case.retry_after_s
    assert f"{upstream.host}:{upstream.port}" not in error["message"]  # never the request's URL
    assert_no_key(result)
    assert attempts in (case.attempts or (0,))
    if len(case.attempts) > 1:
        assert f"{attempts} attempts" in error["message"]

    # The fault is cleared: the same call reaches the upstream again, so the error was not cached...
    again = tool_call(server, case, arguments)
    assert request_count(upstream) == 1
    assert again.is_error is (not case.fixed)
    assert_no_key(again)
    if case.fixed:
        # ...and the cache is on: the answer that worked is now served without the upstream.
        assert tool_call(server, case, arguments).is_error is False
        assert request_count(upstream) == 1


def test_the_servers_never_logged_the_key(stdio_server: Server, http_server: Server, upstream: SampleUpstream) -> None:
    """Runs after the matrix (same module servers): the upstream saw the key, no log line did."""
    upstream.reset()
    set_faults(upstream, {"rate_limit": True})  # the notice echoes the key; make sure there was one to leak
    for server in (stdio_server, http_server):
        result = server.session.call(
            "TOOL_CALL", {"tool_name": "GLOBAL_QUOTE", "arguments": {"symbol": "SPY", "datatype": "csv"}}
        )
        assert result.is_error and result.structured_content["error"]["kind"] == "rate_limited"
    keys_sent = {r.get("apikey") for r in upstream.requests_snapshot(unmasked=True)}
    upstream.reset()
    assert keys_sent == {KEY}
    for server in (stdio_server, http_server):
        text = server.log_text()
        assert text.strip(), "the server logged nothing: the check below would prove nothing"
        assert KEY not in text


# --- the Lambda invocation's remaining time caps the deadline --------------------------------------------


class ShortContext:
    """A Lambda context with little time left (the handler keeps a 2 s margin of it)."""

    aws_request_id = "req-1"
    function_name = "progressive-mcp-test"

    def __init__(self, remaining_ms: int) -> None:
        self.remaining_ms = remaining_ms

    def get_remaining_time_in_millis(self) -> int:
        return self.remaining_ms


@pytest.mark.slow
def test_the_invocations_remaining_time_caps_the_deadline(upstream: SampleUpstream) -> None:
    upstream.reset()
    upstream.faults.delay_s = 3.0
    # The configured deadline (25 s) would wait out the delay; 3.2 s left in the invocation, less the margin, not.
    endpoint = Endpoint.from_settings(Settings.from_env({}, upstream_url=upstream.url, cache=False))
    handler = make_handler(endpoint)
    call = {"tool_name": "GLOBAL_QUOTE", "arguments": {"symbol": "IBM"}}
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "TOOL_CALL", "arguments": call}}
    event = build_event(
        "POST",
        f"/mcp?apikey={KEY}",
        [("content-type", "application/json"), ("accept", "application/json, text/event-stream")],
        json.dumps(body).encode(),
        source_ip="127.0.0.1",
        request_id="req-1",
    )
    try:
        answer = json.loads(handler(event, ShortContext(3200))["body"])
    finally:
        upstream.reset()
    result = answer["result"]
    assert result["isError"] is True
    assert result["structuredContent"]["error"]["kind"] == "timeout"
    assert re.search(r"gave up after 1\.[0-2] s", result["structuredContent"]["error"]["message"])
