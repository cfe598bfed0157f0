"""`make demo`: a real MCP session over stdio that shows progressive discovery end to end, offline.

It starts the offline sample upstream (synthetic data), launches `progressive-mcp stdio` through
the mcp SDK's client, and walks the discovery path step by step with token counts. Example::

    python -m progressive_mcp.demo
"""

from __future__ import annotations

import asyncio
import json
import sys
import textwrap
from typing import Any

import mcp_types as types
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from progressive_mcp.offline.sample_upstream import SampleUpstream
from progressive_mcp.tokens import TOKENIZER_LABEL, count_tokens, dumps

DEMO_KEY = "demo-key-for-the-sample-upstream"


def _tools_tokens(tools: list[Any]) -> int:
    return count_tokens(dumps([t.model_dump(by_alias=True, exclude_none=True, mode="json") for t in tools]))


def _show(value: Any, limit: int = 1400) -> str:
    text = json.dumps(value, indent=2, ensure_ascii=False)
    if len(text) > limit:
        text = text[:limit] + "\n  ... (cut for the screen; the model gets all of it)"
    return textwrap.indent(text, "    ")


def _step(number: int, title: str) -> None:
    print(f"\n[{number}] {title}")


async def _session(upstream_url: str, mode: str) -> tuple[list[Any], Any]:
    server = StdioServerParameters(
        command=sys.executable,
        args=["-m", "progressive_mcp", "stdio", "--mode", mode, "--upstream", upstream_url],
        env={"ALPHAVANTAGE_API_KEY": DEMO_KEY},
    )
    async with Client(server, mode="auto") as client:
        return (await client.list_tools()).tools, client.protocol_version


async def run_demo(upstream_url: str, upstream_requests: Any = None) -> int:
    """The demo session; `upstream_requests()` (optional) counts the requests the upstream has seen."""
    server = StdioServerParameters(
        command=sys.executable,
        args=["-m", "progressive_mcp", "stdio", "--upstream", upstream_url],
        env={"ALPHAVANTAGE_API_KEY": DEMO_KEY},
    )
    spent = 0
    async with Client(server, mode="auto") as client:
        print(f"Connected over stdio; protocol version {client.protocol_version}.")

        _step(1, "tools/list on the progressive surface: all the model sees up front")
        tools = (await client.list_tools()).tools
        cost = _tools_tokens(tools)
        spent += cost
        for tool in tools:
            print(f"    {tool.name:<12} {tool.description}")
        print(f"    -> {len(tools)} tools, {cost} tokens")

        async def call(number: int, title: str, name: str, arguments: dict[str, Any]) -> Any:
            nonlocal spent
            _step(number, f"{title}\n    {name} {json.dumps(arguments)}")
            result = await client.call_tool(name, arguments)
            text = "".join(block.text for block in result.content if isinstance(block, types.TextContent))
            cost = count_tokens(text)
            spent += cost
            if result.is_error:
                print(f"    error: {text}")
            return result.structured_content, cost, result.is_error

        found, cost, failed = await call(
            2, "TOOL_SEARCH: find a tool for the user's words", "TOOL_SEARCH", {"query": "give me aapl price"}
        )
        for rank, hit in enumerate(found.get("results", []), 1):
            print(f"    {rank}. {hit['name']:<22} score {hit['score']:<6} {hit['summary']}")
        print(f"    -> {cost} tokens")

        schema, cost, failed = await call(
            3, "TOOL_GET: load the one schema the task needs", "TOOL_GET", {"tool_name": "GLOBAL_QUOTE"}
        )
        print(_show(schema["tools"][0]))
        print(f"    -> {cost} tokens (catalog version {schema['catalog_version']})")

        answer, cost, failed = await call(
            4,
            "TOOL_CALL: run it (offline sample upstream, synthetic prices)",
            "TOOL_CALL",
            {"tool_name": "GLOBAL_QUOTE", "arguments": {"symbol": "AAPL"}},
        )
        if failed:
            return 1
        print(_show(answer["data"]))
        print(f"    -> {cost} tokens")

        _step(5, "The same call again: answered from the response cache (GLOBAL_QUOTE stays fresh for 60 s)")
        again = await client.call_tool("TOOL_CALL", {"tool_name": "GLOBAL_QUOTE", "arguments": {"symbol": "AAPL"}})
        cached_at = (again.structured_content or {}).get("cached_at")
        print(f"    cached_at: {cached_at}")
        if upstream_requests is not None:
            print(f"    upstream requests so far: {upstream_requests()} (the free plan allows 25 a day)")

        _step(6, f"A data-heavy question the progressive way: {FIVE_TICKER_QUESTION}")
        heavy = _tools_tokens(tools)
        steps: list[tuple[str, dict[str, Any]]] = [
            ("TOOL_SEARCH", {"query": "daily closing prices of a stock"}),
            ("TOOL_GET", {"tool_name": "TIME_SERIES_DAILY"}),
            *[("TOOL_CALL", {"tool_name": "TIME_SERIES_DAILY", "arguments": {"symbol": s}}) for s in FIVE_TICKERS],
        ]
        for name, arguments in steps:
            result = await client.call_tool(name, arguments)
            text = "".join(block.text for block in result.content if isinstance(block, types.TextContent))
            heavy += count_tokens(json.dumps(arguments)) + count_tokens(text)
        print(f"    tools/list, TOOL_SEARCH, TOOL_GET, then 5 x TOOL_CALL of TIME_SERIES_DAILY -> {heavy:,} tokens")
        print("    (every daily series passes through the model, only to be compared)")

    code_cost = await _code_mode(upstream_url)
    print(f"    -> code mode read {code_cost:,} tokens: {code_cost / heavy:.1%} of the progressive flow's {heavy:,}")

    _step(8, "For comparison: the direct surface (every tool's schema up front)")
    direct_tools, _ = await _session(upstream_url, "direct")
    direct_cost = _tools_tokens(direct_tools)
    print(f"    tools/list -> {len(direct_tools)} tools, {direct_cost} tokens")

    print(
        f"\nProgressive discovery used {spent} tokens in all for the AAPL price (steps 1-5); listing every tool "
        f"up front costs {direct_cost} tokens before any work starts ({direct_cost / max(spent, 1):.1f}x)."
        f"\nTokens counted with {TOKENIZER_LABEL}, on the JSON text the client received."
    )
    return 0


FIVE_TICKERS = ("AAPL", "MSFT", "NVDA", "AMZN", "GOOGL")
FIVE_TICKER_QUESTION = "which of AAPL, MSFT, NVDA, AMZN and GOOGL gained most over the last 100 trading days?"
FIVE_TICKER_SCRIPT = """\
import asyncio
symbols = ["AAPL", "MSFT", "NVDA", "AMZN", "GOOGL"]
series = await asyncio.gather(*[TIME_SERIES_DAILY(symbol=s) for s in symbols])
gains = {}
for symbol, data in zip(symbols, series):
    bars = data["Time Series (Daily)"]
    days = sorted(bars)
    gains[symbol] = float(bars[days[-1]]["4. close"]) / float(bars[days[0]]["4. close"]) - 1
best = max(gains, key=lambda s: gains[s])
{"best": best, "gain_pct": round(gains[best] * 100, 2)}
"""


async def _code_mode(upstream_url: str) -> int:
    """Step 7: the same question in code mode, one script; returns the tokens the model read."""
    server = StdioServerParameters(
        command=sys.executable,
        args=["-m", "progressive_mcp", "stdio", "--mode", "code", "--upstream", upstream_url],
        env={"ALPHAVANTAGE_API_KEY": DEMO_KEY},
    )
    async with Client(server, mode="auto") as client:
        _step(7, "The same question in code mode (--mode code): one script, only its answer comes back")
        tools = (await client.list_tools()).tools
        spent = _tools_tokens(tools)
        print(f"    tools/list: {', '.join(t.name for t in tools)}")
        answers: dict[str, Any] = {}
        for name, arguments in [
            ("TOOL_SEARCH", {"query": "daily closing prices of a stock"}),
            ("TOOL_GET", {"tool_name": "TIME_SERIES_DAILY"}),
            ("TOOL_EXECUTE", {"code": FIVE_TICKER_SCRIPT}),
        ]:
            result = await client.call_tool(name, arguments)
            text = "".join(block.text for block in result.content if isinstance(block, types.TextContent))
            spent += count_tokens(json.dumps(arguments)) + count_tokens(text)
            answers[name] = result.structured_content
            if result.is_error:
                print(f"    error: {text}")
        stub = answers["TOOL_GET"]["stubs"]
        print("    TOOL_GET (format python) gives the typed stub:")
        print(textwrap.indent(stub.split("async def", 1)[0].strip()[:600], "      "))
        print(textwrap.indent("async def" + stub.split("async def", 1)[1][:300] + " ...", "      "))
        print("    TOOL_EXECUTE runs this script in the sandbox (five calls at once):")
        print(textwrap.indent(FIVE_TICKER_SCRIPT.rstrip(), "      "))
        print(f"    result: {json.dumps(answers['TOOL_EXECUTE']['result'])}")
        calls = answers["TOOL_EXECUTE"]["calls"]
        print(f"    calls: {len(calls)} x {calls[0]['tool']}, " + ", ".join(f"{c['ms']:.0f} ms" for c in calls))
        return spent


def main() -> int:
    print("progressive-mcp demo: a real MCP session (mcp SDK client <-> progressive-mcp stdio), offline.")
    with SampleUpstream() as upstream:
        print(f"Upstream: the offline sample server at {upstream.url} (synthetic data, not real market prices).")
        return asyncio.run(run_demo(upstream.url, lambda: len(upstream.requests_snapshot())))


if __name__ == "__main__":
    raise SystemExit(main())
