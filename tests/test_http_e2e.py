"""End to end over HTTP: the mcp SDK's real streamable-HTTP client against the serve stack.

The serve stack is `LocalServer` (real HTTP on 127.0.0.1) feeding each request to the Lambda handler, as
`progressive-mcp serve` does; once, the real CLI runs as a subprocess. The upstream is the offline
`SampleUpstream`, so every answer is deterministic and stdio and HTTP can be compared byte for byte.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import IO, Any

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from lambda_fn.handler import make_handler
from lambda_fn.local import LocalServer
from progressive_mcp.offline.sample_upstream import SampleUpstream
from progressive_mcp.settings import Settings
from progressive_mcp.surfaces.endpoint import Endpoint
from progressive_mcp.surfaces.metatools import META_TOOL_NAMES

KEY = "HtTp-SeCrEt-KEY-42"
ROOT = Path(__file__).resolve().parent.parent
EXPECTED_VERSION = {"legacy": "2025-11-25", "auto": "2026-07-28", "2026-07-28": "2026-07-28"}
GLOBAL_QUOTE_IBM = {"tool_name": "GLOBAL_QUOTE", "arguments": {"symbol": "IBM"}}

pytestmark = [pytest.mark.anyio, pytest.mark.slow]  # end-to-end: the SDK client over real HTTP


@pytest.fixture(scope="module")
def http_url(upstream: SampleUpstream) -> Iterator[str]:
    """The serve stack (LocalServer → Lambda handler → Endpoint) with the default (progressive) surface."""
    # No response cache: these tests count the requests (and keys) that reach the upstream.
    endpoint = Endpoint.from_settings(Settings.from_env({}, upstream_url=upstream.url, cache=False))
    with LocalServer(make_handler(endpoint), port=0) as server:
        yield server.url


def text_of(result: types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


def comparable(result: types.CallToolResult) -> dict[str, Any]:
    data = result.model_dump(by_alias=True, exclude_none=True)
    return {k: data.get(k) for k in ("content", "structuredContent", "isError")}


def tool_dumps(result: types.ListToolsResult) -> list[dict[str, Any]]:
    return [t.model_dump(by_alias=True, exclude_none=True) for t in result.tools]


@asynccontextmanager
async def http_client(url: str, protocol: str, headers: dict[str, str] | None = None) -> AsyncIterator[Client]:
    """An SDK client over streamable HTTP; with `headers`, through an httpx2 client that sends them."""
    if headers is None:
        async with Client(url, mode=protocol) as client:
            yield client
        return
    async with (
        httpx2.AsyncClient(headers=headers, timeout=30) as http,
        Client(streamable_http_client(url, http_client=http), mode=protocol) as client,
    ):
        yield client


@asynccontextmanager
async def stdio(upstream: SampleUpstream, protocol: str, mode: str) -> AsyncIterator[Client]:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "stdio_server", "--upstream", upstream.url, "--mode", mode, "--no-cache"],
        env={"ALPHAVANTAGE_API_KEY": KEY},
        cwd=str(ROOT),
    )
    with tempfile.TemporaryFile("w+") as log:
        async with Client(stdio_client(params, errlog=log), mode=protocol) as client:
            yield client


# --------------------------------------------------------------------------------------------------
# 1. The SDK client over HTTP against the serve stack
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("protocol", ["legacy", "auto", "2026-07-28"])
async def test_progressive_session_over_http(upstream: SampleUpstream, http_url: str, protocol: str) -> None:
    before = len(upstream.requests_snapshot(unmasked=True))
    async with http_client(f"{http_url}?apikey={KEY}", protocol) as client:
        assert client.protocol_version == EXPECTED_VERSION[protocol]
        assert [t.name for t in (await client.list_tools()).tools] == list(META_TOOL_NAMES)

        found = await client.call_tool("TOOL_SEARCH", {"query": "apple stock price"})
        assert not found.is_error
        assert found.structured_content["results"][0]["name"] == "GLOBAL_QUOTE"

        schema = await client.call_tool("TOOL_GET", {"tool_name": "GLOBAL_QUOTE"})
        assert not schema.is_error
        assert schema.structured_content["tools"][0]["name"] == "GLOBAL_QUOTE"
        assert schema.structured_content["tools"][0]["inputSchema"]["required"] == ["symbol"]

        answer = await client.call_tool("TOOL_CALL", GLOBAL_QUOTE_IBM)
        assert answer.is_error is False, text_of(answer)
        quote = answer.structured_content["data"]["Global Quote"]
        assert quote["01. symbol"] == "IBM"
        assert KEY not in text_of(answer)
    calls = upstream.requests_snapshot(unmasked=True)[before:]
    assert [(r["function"], r["symbol"], r["apikey"]) for r in calls] == [("GLOBAL_QUOTE", "IBM", KEY)]


@pytest.mark.parametrize("protocol", ["legacy", "auto", "2026-07-28"])
async def test_key_in_an_x_api_key_header(upstream: SampleUpstream, http_url: str, protocol: str) -> None:
    header_key = f"header-key-{protocol}"
    before = len(upstream.requests_snapshot(unmasked=True))
    async with http_client(http_url, protocol, headers={"X-API-Key": header_key}) as client:
        assert client.protocol_version == EXPECTED_VERSION[protocol]
        answer = await client.call_tool("TOOL_CALL", GLOBAL_QUOTE_IBM)
        assert answer.is_error is False, text_of(answer)
        assert answer.structured_content["data"]["Global Quote"]["01. symbol"] == "IBM"
    calls = upstream.requests_snapshot(unmasked=True)[before:]
    assert [r["apikey"] for r in calls] == [header_key]


@pytest.mark.parametrize("protocol", ["legacy", "auto", "2026-07-28"])
async def test_unknown_tool_is_invalid_params(http_url: str, protocol: str) -> None:
    async with http_client(f"{http_url}?apikey={KEY}", protocol) as client:
        with pytest.raises(MCPError) as caught:
            await client.call_tool("TOOL_SERACH", {"query": "x"})
    assert caught.value.code == types.INVALID_PARAMS == -32602
    assert "TOOL_SEARCH" in caught.value.message


@pytest.mark.parametrize("protocol", ["legacy", "auto", "2026-07-28"])
async def test_tool_call_without_a_key_says_how_to_pass_one(
    upstream: SampleUpstream, http_url: str, protocol: str
) -> None:
    before = len(upstream.requests_snapshot(unmasked=True))
    async with http_client(http_url, protocol) as client:
        result = await client.call_tool("TOOL_CALL", GLOBAL_QUOTE_IBM)
        assert result.is_error is True
        assert "X-API-Key" in text_of(result)
        # the key-free meta-tools still work
        listing = await client.call_tool("TOOL_LIST", {})
        assert listing.is_error is False
    assert upstream.requests_snapshot(unmasked=True)[before:] == []


# --------------------------------------------------------------------------------------------------
# 2. The real CLI: `python -m progressive_mcp.cli serve`
# --------------------------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_until_listening(process: subprocess.Popen[bytes], port: int, log: IO[str], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            log.seek(0)
            pytest.fail(f"progressive-mcp serve exited early with {process.returncode}:\n{log.read()}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    pytest.fail("progressive-mcp serve did not start listening in time")


async def test_real_cli_serve(upstream: SampleUpstream) -> None:
    port = free_port()
    with tempfile.TemporaryFile("w+") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "progressive_mcp.cli", "serve", "--port", str(port), "--upstream", upstream.url],
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            wait_until_listening(process, port, log)
            before = len(upstream.requests_snapshot(unmasked=True))
            async with http_client(f"http://127.0.0.1:{port}/mcp?apikey={KEY}", "auto") as client:
                assert client.protocol_version == "2026-07-28"
                assert [t.name for t in (await client.list_tools()).tools] == list(META_TOOL_NAMES)
                msft = {"tool_name": "GLOBAL_QUOTE", "arguments": {"symbol": "MSFT"}}
                answer = await client.call_tool("TOOL_CALL", msft)
                assert answer.is_error is False, text_of(answer)
                assert answer.structured_content["data"]["Global Quote"]["01. symbol"] == "MSFT"
            calls = upstream.requests_snapshot(unmasked=True)[before:]
            assert [(r["symbol"], r["apikey"]) for r in calls] == [("MSFT", KEY)]
        finally:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=5)
        log.seek(0)
        output = log.read()
    assert f"MCP endpoint at http://127.0.0.1:{port}/mcp" in output
    assert '"tool":"GLOBAL_QUOTE"' in output.replace(" ", ""), "serve logs one JSON line per request"
    assert KEY not in output, "the key must never reach the server's logs"


# --------------------------------------------------------------------------------------------------
# 3. Parity: the same answers over stdio and over HTTP, for every surface
# --------------------------------------------------------------------------------------------------

PARITY_CALLS: list[tuple[str, dict[str, Any]]] = [
    ("TOOL_LIST", {}),
    ("TOOL_SEARCH", {"query": "rsi"}),
    ("TOOL_GET", {"tool_name": ["RSI", "GLOBAL_QUOTE"]}),
    ("TOOL_CALL", GLOBAL_QUOTE_IBM),
    ("TOOL_CALL", {"tool_name": "GLOBAL_QUOTE", "arguments": {"symbol": "IBM", "interval": "5min"}}),
]
DIRECT_CALLS: list[tuple[str, dict[str, Any]]] = [
    ("GLOBAL_QUOTE", {"symbol": "IBM"}),
    ("TIME_SERIES_DAILY", {"symbol": "AAPL"}),
    ("GLOBAL_QUOTE", {"symbol": "IBM", "interval": "5min"}),
]


async def outcome(client: Client, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """A call's result (content, structuredContent, isError) or, when it is a protocol error, that error."""
    try:
        return {"result": comparable(await client.call_tool(name, arguments))}
    except MCPError as exc:
        return {"error": exc.error.model_dump(by_alias=True, exclude_none=True)}


@pytest.mark.parametrize("protocol", ["legacy", "2026-07-28"])
@pytest.mark.parametrize("mode", ["progressive", "direct", "hybrid"])
async def test_stdio_and_http_answer_identically(
    upstream: SampleUpstream, http_url: str, mode: str, protocol: str
) -> None:
    calls = [*PARITY_CALLS, *(DIRECT_CALLS if mode != "progressive" else [])]
    async with (
        stdio(upstream, protocol, mode) as over_stdio,
        http_client(f"{http_url}?mode={mode}&apikey={KEY}", protocol) as over_http,
    ):
        assert over_stdio.protocol_version == over_http.protocol_version == EXPECTED_VERSION[protocol]
        stdio_tools = tool_dumps(await over_stdio.list_tools())
        http_tools = tool_dumps(await over_http.list_tools())
        assert len(http_tools) == {"progressive": 4, "direct": 128, "hybrid": 132}[mode]
        assert http_tools == stdio_tools
        for name, arguments in calls:
            via_stdio = await outcome(over_stdio, name, arguments)
            via_http = await outcome(over_http, name, arguments)
            assert via_http == via_stdio, (name, arguments)
            if mode == "direct" and name in META_TOOL_NAMES:
                assert via_http["error"]["code"] == types.INVALID_PARAMS, (name, via_http)
                continue
            assert "result" in via_http, (name, via_http)
            invalid = "interval" in arguments.get("arguments", arguments)
            assert via_http["result"]["isError"] is invalid, (name, via_http)
            assert via_http["result"]["structuredContent"], (name, arguments)


# --------------------------------------------------------------------------------------------------
# 4. Concurrency: eight real clients at once, each with its own key, surface and symbol
# --------------------------------------------------------------------------------------------------

STOCKS = ["IBM", "AAPL", "MSFT", "NVDA", "TSLA", "SPY"]
CURRENCY_PAIRS = [("EUR", "USD"), ("GBP", "JPY"), ("BTC", "ETH")]


def plan(index: int) -> dict[str, Any]:
    """Client `index`'s key, surface query, protocol, the call it makes and the value that identifies it."""
    key = f"key-{index}"
    protocol = ["legacy", "2026-07-28"][index % 2]
    kind = ["progressive", "direct", "hybrid"][index % 3]
    if kind == "direct":
        base, quote = CURRENCY_PAIRS[index // 3]
        return {
            "key": key,
            "protocol": protocol,
            "kind": kind,
            "query": f"mode=direct&categories=forex,crypto&apikey={key}",
            "call": ("CURRENCY_EXCHANGE_RATE", {"from_currency": base, "to_currency": quote}),
            "tag": ("from_currency", base),
        }
    symbol = STOCKS[index - (index + 1) // 3]  # one stock per non-direct client, in order
    if kind == "progressive":
        call = ("TOOL_CALL", {"tool_name": "GLOBAL_QUOTE", "arguments": {"symbol": symbol}})
        query = f"apikey={key}&mode=progressive"
    else:
        call = ("GLOBAL_QUOTE", {"symbol": symbol})
        query = f"mode=hybrid&categories=stocks&apikey={key}"
    return {"key": key, "protocol": protocol, "kind": kind, "query": query, "call": call, "tag": ("symbol", symbol)}


async def test_eight_concurrent_clients_keep_their_keys_and_surfaces(upstream: SampleUpstream, http_url: str) -> None:
    plans = [plan(i) for i in range(8)]
    assert len({p["tag"] for p in plans}) == 8, "each client needs its own symbol"
    seen: dict[int, tuple[list[str], types.CallToolResult]] = {}

    async def run(index: int) -> None:
        p = plans[index]
        async with http_client(f"{http_url}?{p['query']}", p["protocol"]) as client:
            names = [t.name for t in (await client.list_tools()).tools]
            name, arguments = p["call"]
            seen[index] = (names, await client.call_tool(name, arguments))

    before = len(upstream.requests_snapshot(unmasked=True))
    with anyio.fail_after(30):
        async with anyio.create_task_group() as group:
            for index in range(8):
                group.start_soon(run, index)

    for index, p in enumerate(plans):
        names, result = seen[index]
        assert result.is_error is False, (index, text_of(result))
        data = result.structured_content["data"]
        if p["kind"] == "progressive":
            assert names == list(META_TOOL_NAMES)
            assert data["Global Quote"]["01. symbol"] == p["tag"][1]
        elif p["kind"] == "direct":
            assert not set(names) & set(META_TOOL_NAMES)
            assert {"FX_DAILY", "CURRENCY_EXCHANGE_RATE"} <= set(names)
            assert "GLOBAL_QUOTE" not in names and "RSI" not in names
            assert data["Realtime Currency Exchange Rate"]["1. From_Currency Code"] == p["tag"][1]
        else:
            assert names[:4] == list(META_TOOL_NAMES)
            assert "GLOBAL_QUOTE" in names and "FX_DAILY" not in names and "RSI" not in names
            assert data["Global Quote"]["01. symbol"] == p["tag"][1]

    key_of = {p["tag"]: p["key"] for p in plans}
    requests = upstream.requests_snapshot(unmasked=True)[before:]
    assert len(requests) == 8
    for request in requests:
        tag = next((field, request[field]) for field in ("symbol", "from_currency") if field in request)
        assert request["apikey"] == key_of[tag], request
    assert {r["apikey"] for r in requests} == {p["key"] for p in plans}
