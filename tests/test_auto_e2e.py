"""End to end: the `auto` surface through the official mcp SDK client, over real HTTP (the serve stack on
127.0.0.1) and over stdio (the real `stdio_server`): direct for `?categories=forex`, progressive for the whole
catalog, code past the threshold with `fallback=code`, the choice in tools/list's `_meta`."""

from __future__ import annotations

import sys
import tempfile
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import mcp_types as types
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

from lambda_fn.handler import make_handler
from lambda_fn.local import LocalServer
from progressive_mcp.offline.sample_upstream import SampleUpstream
from progressive_mcp.settings import Settings
from progressive_mcp.sources import load_catalog
from progressive_mcp.surfaces.auto import AUTO_META
from progressive_mcp.surfaces.endpoint import Endpoint
from progressive_mcp.surfaces.metatools import META_TOOL_NAMES

KEY = "AuTo-SeCrEt-KEY-42"
ROOT = Path(__file__).resolve().parent.parent
FOREX = sorted(t.name for t in load_catalog().in_categories(frozenset({"forex"})))
PROTOCOLS = ["legacy", "2026-07-28"]

pytestmark = [pytest.mark.anyio, pytest.mark.slow]  # end-to-end: the SDK client over real HTTP and stdio


@pytest.fixture(scope="module")
def auto_url(upstream: SampleUpstream) -> Iterator[str]:
    """The serve stack (LocalServer → Lambda handler → Endpoint) with `auto` as its default surface."""
    endpoint = Endpoint.from_settings(Settings.from_env({}, mode="auto", upstream_url=upstream.url, cache=False))
    with LocalServer(make_handler(endpoint), port=0) as server:
        yield server.url


def auto_meta(listed: types.ListToolsResult) -> dict[str, object]:
    assert listed.meta is not None, "tools/list carries no _meta"
    meta = listed.meta[AUTO_META]
    assert isinstance(meta, dict)
    return meta


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_auto_over_http_is_direct_for_forex_and_progressive_for_the_catalog(
    upstream: SampleUpstream, auto_url: str, protocol: str
) -> None:
    async with Client(f"{auto_url}?categories=forex&apikey={KEY}", mode=protocol) as client:
        listed = await client.list_tools()
        assert sorted(t.name for t in listed.tools) == FOREX
        assert auto_meta(listed)["mode"] == "direct"
        if protocol == "legacy":  # from initialize (a 2026-07-28 client need not ask server/discover)
            assert "call it directly" in (client.instructions or "")
        answer = await client.call_tool("CURRENCY_EXCHANGE_RATE", {"from_currency": "EUR", "to_currency": "USD"})
        assert answer.is_error is False
        assert KEY not in str(answer.model_dump())

    async with Client(f"{auto_url}?apikey={KEY}", mode=protocol) as client:
        listed = await client.list_tools()
        assert [t.name for t in listed.tools] == list(META_TOOL_NAMES)
        meta = auto_meta(listed)
        assert meta["mode"] == "progressive" and meta["tools"] == 128
        found = await client.call_tool("TOOL_SEARCH", {"query": "EUR to USD exchange rate"})
        assert found.structured_content is not None
        assert found.structured_content["results"][0]["name"] == "CURRENCY_EXCHANGE_RATE"

    async with Client(f"{auto_url}?mode=auto&fallback=code&apikey={KEY}", mode=protocol) as client:
        listed = await client.list_tools()
        assert "TOOL_EXECUTE" in [t.name for t in listed.tools]
        assert auto_meta(listed)["mode"] == "code"


@asynccontextmanager
async def stdio(upstream: SampleUpstream, protocol: str, *flags: str) -> AsyncIterator[Client]:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "stdio_server", "--upstream", upstream.url, "--mode", "auto", "--no-cache", *flags],
        env={"ALPHAVANTAGE_API_KEY": KEY},
        cwd=str(ROOT),
    )
    with tempfile.TemporaryFile("w+") as log:
        async with Client(stdio_client(params, errlog=log), mode=protocol) as client:
            yield client


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_auto_over_stdio_is_direct_for_forex_and_progressive_for_the_catalog(
    upstream: SampleUpstream, protocol: str
) -> None:
    async with stdio(upstream, protocol, "--categories", "forex") as client:
        listed = await client.list_tools()
        assert sorted(t.name for t in listed.tools) == FOREX
        assert auto_meta(listed)["mode"] == "direct"
        answer = await client.call_tool("CURRENCY_EXCHANGE_RATE", {"from_currency": "EUR", "to_currency": "USD"})
        assert answer.is_error is False

    async with stdio(upstream, protocol) as client:
        listed = await client.list_tools()
        assert [t.name for t in listed.tools] == list(META_TOOL_NAMES)
        assert auto_meta(listed)["mode"] == "progressive"


async def test_a_bad_threshold_stops_stdio_with_one_clear_line(upstream: SampleUpstream) -> None:
    import subprocess

    done = subprocess.run(
        [sys.executable, "-m", "stdio_server", "--mode", "auto"],
        env={"PMCP_AUTO_DIRECT_TOKENS": "lots", "PATH": "/usr/bin:/bin"},
        cwd=str(ROOT),
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 2
    assert done.stderr.strip() == "progressive-mcp: PMCP_AUTO_DIRECT_TOKENS must be a whole number, not 'lots'"
