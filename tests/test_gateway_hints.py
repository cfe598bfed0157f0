"""A progressive-mcp server's search hints travel to a gateway in front of it (progressive_mcp/search/hints.py): its
`tools/list` adds each tool's keywords and examples to `_meta` when asked, the gateway's sync asks, keeps them
within bounds, hashes them, and indexes them; "stock price of apple" then ranks GLOBAL_QUOTE first behind the
gateway as it does without one."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from progressive_mcp.gateway.config import parse_servers
from progressive_mcp.gateway.documents import ToolDocument, documents, tool_hash
from progressive_mcp.gateway.store import StoredTool
from progressive_mcp.gateway.tools import gateway_catalog
from progressive_mcp.search.hints import HINTS_KEY, MAX_EXAMPLES, MAX_KEYWORD_CHARS
from progressive_mcp.search.index import SearchIndex
from progressive_mcp.settings import Settings
from progressive_mcp.surfaces.surface import Surface

ROOT = Path(__file__).resolve().parent.parent
MEMORY_PACKAGE = "@modelcontextprotocol/server-memory@2025.11.25"


@pytest.fixture(scope="module")
def direct() -> Surface:
    return Surface.from_settings(Settings(mode="direct"))


def listed(surface: Surface, *, hints: bool) -> list[dict[str, Any]]:
    """What `tools/list` sends, as a gateway reads it (the SDK's models dumped by alias)."""
    return [t.model_dump(by_alias=True, exclude_none=True, mode="json") for t in surface.list_tools(hints=hints)]


def test_hints_are_sent_only_when_asked(direct: Surface) -> None:
    plain = {d["name"]: d for d in listed(direct, hints=False)}
    hinted = {d["name"]: d for d in listed(direct, hints=True)}
    assert all("_meta" not in d for d in plain.values())  # a client that does not ask pays nothing
    quote = direct.catalog.get("GLOBAL_QUOTE")
    assert hinted["GLOBAL_QUOTE"]["_meta"][HINTS_KEY] == {
        "keywords": list(quote.keywords),
        "examples": list(quote.examples),
    }
    assert {k: v for k, v in hinted["GLOBAL_QUOTE"].items() if k != "_meta"} == plain["GLOBAL_QUOTE"]


def test_a_gateway_keeps_hints_within_bounds_and_hashes_them() -> None:
    base = {"name": "lookup", "description": "Look a thing up.", "inputSchema": {"type": "object"}}
    noisy = {
        **base,
        "_meta": {
            HINTS_KEY: {
                "keywords": ["quote", 42, "  stock   price ", "quote", "x" * 500],
                "examples": [f"question {i}" for i in range(50)],
                "other": "ignored",
            },
            "com.example/other": {"big": "y" * 10_000},
        },
    }
    doc = ToolDocument.of("srv", noisy)
    kept = doc.definition["_meta"]
    assert list(kept) == [HINTS_KEY]  # another vendor's _meta is not kept
    assert kept[HINTS_KEY]["keywords"] == ["quote", "stock price", "x" * MAX_KEYWORD_CHARS]
    assert kept[HINTS_KEY]["examples"] == [f"question {i}" for i in range(MAX_EXAMPLES)]
    # A definition without hints hashes as it always did; hints, and a change of them, move the hash.
    assert tool_hash(base) == tool_hash({**base, "_meta": {"com.example/other": 1}})
    assert tool_hash(noisy) != tool_hash(base)
    changed = {**base, "_meta": {HINTS_KEY: {"keywords": ["quote", "price"]}}}
    assert tool_hash(changed) != tool_hash({**base, "_meta": {HINTS_KEY: {"keywords": ["quote"]}}})
    config = parse_servers({"mcpServers": {"srv": {"command": "x"}}}, "servers.json", {})
    catalog, _ = gateway_catalog(config, [StoredTool(doc, 1)])
    tool = catalog.get("srv.lookup")
    assert tool.keywords == ("quote", "stock price", "x" * MAX_KEYWORD_CHARS) and len(tool.examples) == MAX_EXAMPLES
    assert "_meta" not in tool.definition()  # what an agent is shown (TOOL_GET, direct mode) carries none


@pytest.mark.parametrize("semantic", [False, pytest.param(True, marks=pytest.mark.slow)], ids=["lexical", "semantic"])
def test_a_nested_servers_tools_rank_with_their_hints(direct: Surface, semantic: bool) -> None:
    config = parse_servers({"mcpServers": {"alphavantage": {"command": "x"}}}, "servers.json", {})

    def first(hints: bool, query: str) -> str:
        stored = [StoredTool(doc, 1) for doc in documents("alphavantage", listed(direct, hints=hints))]
        catalog, _ = gateway_catalog(config, stored)
        index = SearchIndex(catalog.tools, catalog.vocabulary, categories=catalog.categories, semantic=semantic)
        return index.search(query, limit=1)[0].name

    assert first(True, "stock price of apple") == "alphavantage.GLOBAL_QUOTE"
    assert first(False, "stock price of apple") != "alphavantage.GLOBAL_QUOTE"  # what the hints are for


def test_the_http_endpoint_sends_hints_when_asked_in_both_eras() -> None:
    import json

    from progressive_mcp.surfaces.endpoint import Endpoint, HttpRequest

    endpoint = Endpoint.from_settings(Settings(mode="direct"))
    modern = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}

    def tools(meta: dict[str, Any] | None, *, era: str) -> dict[str, Any]:
        params: dict[str, Any] = {} if meta is None else {"_meta": meta}
        headers = {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/list"} if era == "modern" else {}
        if era == "modern":
            params["_meta"] = {**modern, **params.get("_meta", {})}
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": params})
        answer = endpoint.handle(HttpRequest.build("POST", "/mcp", headers=headers, body=body)).json()
        return {t["name"]: t for t in answer["result"]["tools"]}

    for era in ("legacy", "modern"):
        hinted = tools({HINTS_KEY: True}, era=era)
        assert hinted["GLOBAL_QUOTE"]["_meta"][HINTS_KEY]["keywords"], era
        plain = tools(None, era=era)  # asked after: the cached hinted list is not served to a plain client
        assert "_meta" not in plain["GLOBAL_QUOTE"], era


# --- end to end: the SDK client, the gateway over stdio, our own server and the npm memory server ---------------


@pytest.mark.slow  # starts processes (tests/conftest.py)
@pytest.mark.skipif(shutil.which("npx") is None, reason="npx (Node) is not installed")
def test_behind_the_gateway_alpha_vantage_keeps_its_ranking(tmp_path: Path) -> None:
    import json

    servers = tmp_path / "servers.json"
    servers.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "memory": {
                        "command": "npx",
                        "args": ["-y", MEMORY_PACKAGE],
                        "env": {"MEMORY_FILE_PATH": str(tmp_path / "memory.jsonl")},
                        "description": "A knowledge graph that remembers entities and facts about them.",
                        "timeout_s": 120,
                    },
                    "alphavantage": {
                        "command": sys.executable,
                        "args": ["-m", "progressive_mcp", "stdio", "--mode", "direct"],
                        "description": "Alpha Vantage market data.",
                    },
                }
            }
        )
    )
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "progressive_mcp", "stdio", "--servers", str(servers), "--index", str(tmp_path / "e2e.sqlite3")],
        cwd=str(ROOT),
    )

    async def session() -> dict[str, Any]:
        seen: dict[str, Any] = {}
        async with Client(params, read_timeout_seconds=180) as client:
            for query in ("stock price of apple", "remember that Alice works at Acme"):
                found = await client.call_tool("TOOL_SEARCH", {"query": query})
                seen[query] = found.structured_content
        return seen

    seen = anyio.run(session)
    quote = seen["stock price of apple"]
    assert quote["results"][0]["name"] == "alphavantage.GLOBAL_QUOTE", quote
    memory = seen["remember that Alice works at Acme"]
    shown = [hit["name"] for hit in memory["results"]] + [
        line.split(":")[0] for line in memory.get("more", "").splitlines()
    ]
    assert any(name.startswith("memory.") for name in shown[:3]), memory
