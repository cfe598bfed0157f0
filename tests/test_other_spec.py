"""A second, non-finance catalog end to end: the Last.fm spec in tests/fixtures/lastfm/ (queries in eval/lastfm.jsonl)
through every command.

`spec check`, `tokens`, `eval`, `stdio` (the SDK client) and `serve` (the SDK client over HTTP) all work on it,
against a small fake of Last.fm's API on 127.0.0.1, and no answer carries Alpha Vantage wording (tickers,
symbols, SYMBOL_SEARCH, the catalog's title).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import parse_qsl, urlsplit

import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from progressive_mcp.surfaces.metatools import META_TOOL_NAMES

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "tests" / "fixtures" / "lastfm"
SPEC = FIXTURE / "lastfm.yaml"
QUERIES = ROOT / "eval" / "lastfm.jsonl"
KEY = "LaStFm-KEY-0042"
# Words of the bundled finance catalog that must not reach a Last.fm user.
ALIEN = re.compile(r"alpha ?vantage|SYMBOL_SEARCH|ticker|\bsymbol\b|entitlement|outputsize", re.IGNORECASE)
UNKNOWN_ARTIST = "Nobody At All"


class FakeLastfm(BaseHTTPRequestHandler):
    """Answers like ws.audioscrobbler.com/2.0/: JSON by `method`, errors as HTTP 200 {"error": N, "message": …}."""

    requests: ClassVar[list[dict[str, str]]] = []

    def do_GET(self) -> None:
        params = dict(parse_qsl(urlsplit(self.path).query))
        FakeLastfm.requests.append({k: v for k, v in params.items() if k != "api_key"})
        method = params.get("method", "")
        if params.get("api_key") != KEY:
            body: dict[str, Any] = {
                "error": 10,
                "message": "Invalid API key - You must be granted a valid key by last.fm",
            }
        elif params.get("artist") == UNKNOWN_ARTIST:
            body = {"error": 6, "message": "The artist you supplied could not be found"}
        elif method == "artist.getInfo":
            body = {"artist": {"name": params.get("artist"), "stats": {"listeners": "5123456", "playcount": "9"}}}
        elif method == "artist.getSimilar":
            body = {"similarartists": {"artist": []}}  # nothing similar: an empty answer
        else:
            body = {"result": {"method": method}}
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def upstream() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeLastfm)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/2.0/"
    finally:
        server.shutdown()
        server.server_close()


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "progressive_mcp", *args], cwd=ROOT, capture_output=True, text=True, timeout=120
    )


def text_of(result: types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


async def session(client: Client) -> list[str]:
    """An agent's session on the Last.fm catalog; returns every text it read (the tools list included)."""
    read: list[str] = []
    tools = (await client.list_tools()).tools
    assert [t.name for t in tools] == list(META_TOOL_NAMES)
    read.append(json.dumps([t.model_dump(by_alias=True, exclude_none=True) for t in tools]))

    listing = await client.call_tool("TOOL_LIST", {"category": "Artist"})
    assert not listing.is_error and listing.structured_content["categories"][0]["name"] == "artist"
    found = await client.call_tool("TOOL_SEARCH", {"query": "artists similar to radiohead"})
    assert not found.is_error
    schema = await client.call_tool("TOOL_GET", {"tool_name": "artist.getinfo"})  # case does not matter
    assert not schema.is_error and schema.structured_content["tools"][0]["name"] == "artist.getInfo"

    info = await client.call_tool("TOOL_CALL", {"tool_name": "artist.getInfo", "arguments": {"artist": "Radiohead"}})
    assert not info.is_error, text_of(info)
    assert info.structured_content["data"]["artist"]["name"] == "Radiohead"
    missing = await client.call_tool(
        "TOOL_CALL", {"tool_name": "artist.getInfo", "arguments": {"artist": UNKNOWN_ARTIST}}
    )
    assert missing.is_error and "could not be found" in text_of(missing)
    empty = await client.call_tool("TOOL_CALL", {"tool_name": "artist.getSimilar", "arguments": {"artist": "Ghost"}})
    assert empty.is_error and "returned no data for artist.getSimilar" in text_of(empty)
    typo = await client.call_tool("TOOL_CALL", {"tool_name": "artist_getInfo", "arguments": {"artist": "Radiohead"}})
    assert typo.is_error and "artist.getInfo" in text_of(typo)
    wrong = await client.call_tool("TOOL_CALL", {"tool_name": "artist.getInfo", "arguments": {"name": "Radiohead"}})
    assert wrong.is_error and "artist" in text_of(wrong)
    for result in (listing, found, schema, info, missing, empty, typo, wrong):
        read.append(text_of(result))
    return read


def assert_no_alpha_vantage(texts: list[str]) -> None:
    for text in texts:
        assert not ALIEN.search(text), ALIEN.search(text)


@pytest.mark.slow
def test_spec_check() -> None:
    checked = cli("spec", "check", str(SPEC))
    assert checked.returncode == 0, checked.stderr
    assert checked.stdout.startswith(f"{SPEC}: OK: 57 tools in 9 categories")


@pytest.mark.slow
def test_tokens() -> None:
    report = cli("tokens", "--spec", str(SPEC), "--json", "--tokenizer", "cl100k")
    assert report.returncode == 0, report.stderr
    figures = json.loads(report.stdout)
    assert figures["catalog"]["tools"] == 57
    assert figures["tools_list"]["progressive"]["tokens"]["cl100k"] <= 450
    assert "flows_skipped" in figures and "official" not in report.stdout
    assert all(check["ok"] for check in figures["budgets"])


@pytest.mark.slow
def test_eval() -> None:
    report = cli("eval", str(QUERIES), "--spec", str(SPEC), "--json")
    assert report.returncode == 0, report.stderr
    counts = json.loads(report.stdout)["runs"]["engine"]["counts"]
    assert (counts["positive"], counts["negative"]) == (200, 40)


@pytest.mark.slow
@pytest.mark.anyio
async def test_stdio(upstream: str) -> None:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "progressive_mcp", "stdio", "--spec", str(SPEC), "--upstream", upstream],
        env={"LASTFM_API_KEY": KEY},
        cwd=str(ROOT),
    )
    with tempfile.TemporaryFile("w+") as log:
        async with Client(stdio_client(params, errlog=log), mode="legacy") as client:
            assert client.server_info is not None and client.server_info.title == "Last.fm (progressive-mcp)"
            texts = [client.instructions or "", *await session(client)]
    assert_no_alpha_vantage(texts)


@asynccontextmanager
async def served(upstream: str) -> AsyncIterator[str]:
    with tempfile.TemporaryFile("w+") as log:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "progressive_mcp",
                "serve",
                "--port",
                "0",
                "--spec",
                str(SPEC),
                "--upstream",
                upstream,
            ],
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


@pytest.mark.slow
@pytest.mark.anyio
async def test_serve(upstream: str) -> None:
    async with (
        served(upstream) as url,
        httpx2.AsyncClient(headers={"X-API-Key": KEY}, timeout=30) as http,
        Client(streamable_http_client(url, http_client=http), mode="legacy") as client,
    ):
        texts = await session(client)
    assert_no_alpha_vantage(texts)
