"""End to end over stdio: the mcp SDK's real client launches `python -m stdio_server` as a subprocess."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError

from progressive_mcp.offline.sample_upstream import SampleUpstream
from progressive_mcp.surfaces.metatools import META_TOOL_NAMES

pytestmark = pytest.mark.slow  # end-to-end: the SDK client against a server process over stdio

KEY = "StDiO-SeCrEt-KEY-77"
MODES = ["legacy", "2026-07-28"]
ROOT = Path(__file__).resolve().parent.parent


@asynccontextmanager
async def connect(
    upstream: SampleUpstream, protocol: str, *flags: str, key: str | None = KEY, errlog: Any = None
) -> AsyncIterator[Client]:
    env = {"ALPHAVANTAGE_API_KEY": key} if key else {"ALPHAVANTAGE_API_KEY": ""}
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "stdio_server", "--upstream", upstream.url, "--log-level", "DEBUG", *flags],
        env=env,
        cwd=str(ROOT),
    )
    if errlog is not None:
        async with Client(stdio_client(params, errlog=errlog), mode=protocol) as client:
            yield client
        return
    with tempfile.TemporaryFile("w+") as log:
        async with Client(stdio_client(params, errlog=log), mode=protocol) as client:
            yield client


def text_of(result: types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


@pytest.mark.anyio
@pytest.mark.parametrize("protocol", MODES)
async def test_progressive_session_all_four_meta_tools(upstream: SampleUpstream, protocol: str) -> None:
    async with connect(upstream, protocol) as client:
        assert client.protocol_version == ("2025-11-25" if protocol == "legacy" else "2026-07-28")
        tools = (await client.list_tools()).tools
        assert [t.name for t in tools] == list(META_TOOL_NAMES)

        listing = await client.call_tool("TOOL_LIST", {})
        assert not listing.is_error
        assert listing.structured_content["tool_count"] == 128
        assert json.loads(text_of(listing)) == listing.structured_content

        found = await client.call_tool("TOOL_SEARCH", {"query": "give me aapl price"})
        assert found.structured_content["results"][0]["name"] == "GLOBAL_QUOTE"

        schema = await client.call_tool("TOOL_GET", {"tool_name": "GLOBAL_QUOTE"})
        assert schema.structured_content["tools"][0]["inputSchema"]["required"] == ["symbol"]

        answer = await client.call_tool("TOOL_CALL", {"tool_name": "GLOBAL_QUOTE", "arguments": {"symbol": "AAPL"}})
        assert not answer.is_error
        assert answer.structured_content["data"]["Global Quote"]["01. symbol"] == "AAPL"


@pytest.mark.anyio
@pytest.mark.parametrize("protocol", MODES)
async def test_direct_and_hybrid_surfaces(upstream: SampleUpstream, protocol: str) -> None:
    async with connect(upstream, protocol, "--mode", "direct") as client:
        tools = (await client.list_tools()).tools
        assert len(tools) == 128 and tools[0].name == "TIME_SERIES_INTRADAY"
        answer = await client.call_tool("CURRENCY_EXCHANGE_RATE", {"from_currency": "EUR", "to_currency": "USD"})
        assert not answer.is_error, text_of(answer)
        assert "Realtime Currency Exchange Rate" in answer.structured_content["data"]
    async with connect(upstream, protocol, "--mode", "hybrid", "--categories", "stocks") as client:
        names = [t.name for t in (await client.list_tools()).tools]
        assert names[:4] == list(META_TOOL_NAMES) and "GLOBAL_QUOTE" in names and "RSI" not in names
        direct = await client.call_tool("GLOBAL_QUOTE", {"symbol": "IBM"})
        via_meta = await client.call_tool("TOOL_CALL", {"tool_name": "GLOBAL_QUOTE", "arguments": {"symbol": "IBM"}})
        # The second, identical call is answered from the in-memory cache and says so.
        assert "cached_at" not in direct.structured_content
        cached_at = via_meta.structured_content.pop("cached_at")
        assert direct.structured_content == via_meta.structured_content
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", cached_at)


@pytest.mark.anyio
@pytest.mark.parametrize("protocol", MODES)
async def test_unknown_tool_is_a_protocol_error_naming_close_tools(upstream: SampleUpstream, protocol: str) -> None:
    async with connect(upstream, protocol) as client:
        with pytest.raises(MCPError) as caught:
            await client.call_tool("TOOL_SERACH", {"query": "x"})
        assert caught.value.code == types.INVALID_PARAMS
        assert "TOOL_SEARCH" in caught.value.message


@pytest.mark.anyio
@pytest.mark.parametrize("protocol", MODES)
async def test_upstream_errors_are_is_error_results_and_the_key_never_leaks(
    upstream: SampleUpstream, protocol: str
) -> None:
    with tempfile.TemporaryFile("w+") as errlog:
        async with connect(upstream, protocol, errlog=errlog) as client:
            texts = []
            for arguments in (
                {"tool_name": "TIME_SERIES_DAILY", "arguments": {"symbol": "NOSUCH"}},
                {"tool_name": "TIME_SERIES_DAILY_ADJUSTED", "arguments": {"symbol": "IBM"}},
                {"tool_name": "GLOBAL_QUOTE", "arguments": {"symbol": "IBM", "interval": "5min"}},
            ):
                result = await client.call_tool("TOOL_CALL", arguments)
                assert result.is_error
                texts.append(text_of(result))
            upstream.faults.rate_limit = True
            try:
                limited = await client.call_tool(
                    "TOOL_CALL", {"tool_name": "GLOBAL_QUOTE", "arguments": {"symbol": "IBM"}}
                )
            finally:
                upstream.faults.rate_limit = False
            assert limited.is_error and limited.structured_content["error"]["kind"] == "rate_limited"
            texts.append(text_of(limited))
        errlog.seek(0)
        server_log = errlog.read()
    assert "rejected the request" in texts[0]
    assert "paid" in texts[1]
    assert "interval" in texts[2]
    assert "upstream call" in server_log, "the server should log at DEBUG to stderr"
    for text in [*texts, server_log]:
        assert KEY not in text


@pytest.mark.anyio
async def test_missing_key_says_how_to_pass_one(upstream: SampleUpstream) -> None:
    async with connect(upstream, "legacy", key=None) as client:
        result = await client.call_tool("TOOL_CALL", {"tool_name": "GLOBAL_QUOTE", "arguments": {"symbol": "IBM"}})
    assert result.is_error and "ALPHAVANTAGE_API_KEY" in text_of(result)


def test_server_exits_promptly_when_stdin_closes(upstream: SampleUpstream) -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "stdio_server", "--upstream", upstream.url],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=ROOT,
    )
    time.sleep(0.5)
    assert process.stdin is not None
    process.stdin.close()
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        process.kill()
        pytest.fail("the stdio server kept running after stdin closed")
    assert process.returncode == 0
    assert process.stdout is not None and process.stdout.read() == b""


def test_bad_configuration_is_one_clear_line_not_a_traceback(tmp_path: Path) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text("api: [not, a, mapping\n")
    for flags, expected in (
        (["--spec", str(broken)], "invalid YAML"),
        (["--categories", "weather"], "unknown categories weather"),
        (["--upstream", "ftp://example"], "must start with http"),
    ):
        done = subprocess.run(
            [sys.executable, "-m", "stdio_server", *flags], capture_output=True, text=True, cwd=ROOT, timeout=30
        )
        assert done.returncode == 2
        assert expected in done.stderr and "Traceback" not in done.stderr


@pytest.mark.anyio
async def test_the_compact_schema_view_over_stdio(upstream: SampleUpstream) -> None:
    """`--schema-view compact`: TOOL_GET and TOOL_SEARCH's `schemas` give argument lines, and a call built from
    them passes TOOL_CALL's validation."""
    async with connect(upstream, "2026-07-28", "--schema-view", "compact") as client:
        got = await client.call_tool("TOOL_GET", {"tool_name": ["GLOBAL_QUOTE", "TIME_SERIES_DAILY"]})
        assert not got.is_error
        quote, daily = got.structured_content["tools"]
        assert "inputSchema" not in quote
        assert quote["arguments"].splitlines()[0] == "symbol: string — Ticker, e.g. IBM or TSCO.LON"
        assert any(line.startswith('outputsize?: "compact"|"full"') for line in daily["arguments"].splitlines())
        found = await client.call_tool("TOOL_SEARCH", {"query": "give me aapl price", "schemas": True})
        assert found.structured_content["results"][0]["arguments"] == quote["arguments"]
        answer = await client.call_tool("TOOL_CALL", {"tool_name": "GLOBAL_QUOTE", "arguments": {"symbol": "AAPL"}})
        assert not answer.is_error
        assert answer.structured_content["data"]["Global Quote"]["01. symbol"] == "AAPL"
