"""Code mode end to end: the real mcp SDK client, over stdio and over HTTP (`serve`, `?mode=code`), answers the
five-ticker question with one TOOL_EXECUTE against the offline sample upstream."""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from progressive_mcp.offline.sample_upstream import SampleUpstream

pytestmark = pytest.mark.slow  # end-to-end: the SDK client against server processes

ROOT = Path(__file__).resolve().parent.parent
KEY = "CoDe-E2E-KEY-0042"
FIVE_TICKERS = """\
import asyncio
symbols = ["AAPL", "MSFT", "NVDA", "AMZN", "GOOGL"]
series = await asyncio.gather(*[TIME_SERIES_DAILY(symbol=s) for s in symbols])
gains = {}
for symbol, data in zip(symbols, series):
    bars = data["Time Series (Daily)"]
    days = sorted(bars)
    gains[symbol] = float(bars[days[-1]]["4. close"]) / float(bars[days[0]]["4. close"]) - 1
best = max(gains, key=lambda s: gains[s])
{"best": best, "gain": round(gains[best] * 100, 2)}
"""


def expected(upstream: SampleUpstream) -> dict[str, object]:
    gains = {}
    for symbol in ("AAPL", "MSFT", "NVDA", "AMZN", "GOOGL"):
        params = {"function": "TIME_SERIES_DAILY", "symbol": symbol, "apikey": KEY}
        bars = httpx2.get(upstream.url, params=params).json()["Time Series (Daily)"]
        days = sorted(bars)
        gains[symbol] = float(bars[days[-1]]["4. close"]) / float(bars[days[0]]["4. close"]) - 1
    best = max(gains, key=lambda s: gains[s])
    return {"best": best, "gain": round(gains[best] * 100, 2)}


async def five_tickers(client: Client, upstream: SampleUpstream) -> None:
    assert [t.name for t in (await client.list_tools()).tools] == [
        "TOOL_LIST",
        "TOOL_SEARCH",
        "TOOL_GET",
        "TOOL_EXECUTE",
    ]
    stubs = await client.call_tool("TOOL_GET", {"tool_name": "TIME_SERIES_DAILY"})
    assert not stubs.is_error and "async def TIME_SERIES_DAILY(" in stubs.structured_content["stubs"]
    before = len(upstream.requests_snapshot())
    answer = await client.call_tool("TOOL_EXECUTE", {"code": FIVE_TICKERS})
    block = answer.content[0]
    assert isinstance(block, types.TextContent)
    assert not answer.is_error, block.text
    assert KEY not in block.text
    calls = upstream.requests_snapshot()[before:]
    assert sorted(c["symbol"] for c in calls) == ["AAPL", "AMZN", "GOOGL", "MSFT", "NVDA"]
    assert answer.structured_content["result"] == expected(upstream)


@pytest.mark.anyio
async def test_over_stdio(upstream: SampleUpstream) -> None:
    upstream.reset()
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "progressive_mcp", "stdio", "--mode", "code", "--upstream", upstream.url, "--no-cache"],
        env={"ALPHAVANTAGE_API_KEY": KEY},
        cwd=str(ROOT),
    )
    with tempfile.TemporaryFile("w+") as log:
        async with Client(stdio_client(params, errlog=log), mode="legacy") as client:
            await five_tickers(client, upstream)


@asynccontextmanager
async def served(upstream: SampleUpstream) -> AsyncIterator[str]:
    with tempfile.TemporaryFile("w+") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "progressive_mcp", "serve", "--port", "0", "--upstream", upstream.url, "--no-cache"],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
        )
        try:
            assert process.stdout is not None
            banner = process.stdout.readline()
            match = re.search(r"http://127\.0\.0\.1:\d+/mcp", banner)
            assert match, banner
            yield match.group(0)
        finally:
            process.terminate()
            process.wait(timeout=10)
        log.seek(0)
        assert KEY not in log.read()


@pytest.mark.anyio
@pytest.mark.parametrize("protocol", ["legacy", "2026-07-28"])
async def test_over_http(upstream: SampleUpstream, protocol: str) -> None:
    upstream.reset()
    async with (
        served(upstream) as url,
        httpx2.AsyncClient(headers={"X-API-Key": KEY}, timeout=60) as http,
        Client(streamable_http_client(f"{url}?mode=code", http_client=http), mode=protocol) as client,
    ):
        await five_tickers(client, upstream)
