"""The gateway under attack or misbehaving servers (issue 27): a server whose tools/list fails, pinning that a
server cannot get around, a store that keeps no secret and is private to its user, unique code-mode names, and
bounded tool metadata. Against real stdio MCP servers (the toy server), through the real CLI, stdio and serve."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from test_gateway import TOY_TOOLS, toy_entry, toy_tool, write_tools

from progressive_mcp.gateway.gateway import Gateway

ROOT = Path(__file__).resolve().parent.parent


def cli(*args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    """`progressive-mcp ARGS` in a child process, as a person runs it."""
    return subprocess.run(
        [sys.executable, "-m", "progressive_mcp", *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout
    )


# Finding 5: one server whose tools/list fails must not take the others down.


@pytest.fixture
def failing_servers(tmp_path: Path) -> Path:
    """A servers file: `good` (the toy server), `broken` (tools/list answers with an error) and `garbled` (it
    answers with a result that is not valid MCP)."""
    good = tmp_path / "good.json"
    write_tools(good, TOY_TOOLS)
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps({"tools": [], "list": "error"}))
    garbled = tmp_path / "garbled.json"
    garbled.write_text(json.dumps({"tools": [], "list": "invalid"}))
    servers = tmp_path / "servers.json"
    entries = {"broken": toy_entry(broken), "good": toy_entry(good), "garbled": toy_entry(garbled)}
    servers.write_text(json.dumps({"mcpServers": entries}))
    return servers


def test_sync_stores_the_healthy_servers_and_exits_non_zero_naming_the_failing_ones(
    failing_servers: Path, tmp_path: Path
) -> None:
    index = tmp_path / "index.sqlite3"
    ran = cli("sync", "--servers", str(failing_servers), "--index", str(index))
    assert ran.returncode == 1, ran.stderr
    assert "Traceback" not in ran.stderr
    assert re.search(r"^broken: not synced: .*refused", ran.stdout, re.M), ran.stdout
    assert re.search(r"^garbled: not synced: .*not a valid MCP result", ran.stdout, re.M), ran.stdout
    assert re.search(r"^good: 9 created", ran.stdout, re.M), ran.stdout
    gateway = Gateway.open(failing_servers, index)
    try:
        assert "good.add" in gateway.catalog and len(gateway.catalog) == len(TOY_TOOLS)
    finally:
        gateway.close()


def test_stdio_starts_with_a_failing_server_and_serves_the_others(failing_servers: Path, tmp_path: Path) -> None:
    index = tmp_path / "stdio.sqlite3"
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "progressive_mcp", "stdio", "--servers", str(failing_servers), "--index", str(index)],
        cwd=str(ROOT),
    )

    async def session() -> tuple[list[str], Any]:
        async with Client(params, read_timeout_seconds=120) as client:
            toc = await client.call_tool("TOOL_LIST", {})
            added = await client.call_tool("TOOL_CALL", {"tool_name": "good.add", "arguments": {"a": 2, "b": 3}})
            return [g["name"] for g in toc.structured_content["categories"]], added.structured_content

    groups, added = anyio.run(session)
    assert groups == ["good"]
    assert added == {"tool": "good.add", "data": {"sum": 5}}


def test_serve_starts_with_a_failing_server_and_serves_the_others(failing_servers: Path, tmp_path: Path) -> None:
    command = [
        sys.executable, "-m", "progressive_mcp", "serve", "--port", "0",
        "--servers", str(failing_servers), "--index", str(tmp_path / "http.sqlite3"),
    ]  # fmt: skip
    log_path = tmp_path / "serve.log"
    with log_path.open("w+") as log:
        process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=log, text=True)

        async def session(url: str) -> Any:
            async with (
                httpx2.AsyncClient(timeout=120) as http,
                Client(streamable_http_client(url, http_client=http)) as client,
            ):
                added = await client.call_tool("TOOL_CALL", {"tool_name": "good.add", "arguments": {"a": 1, "b": 2}})
                return added.structured_content

        try:
            assert process.stdout is not None
            banner = process.stdout.readline()
            match = re.search(r"http://127\.0\.0\.1:\d+/mcp", banner)
            assert match, banner + log_path.read_text()
            assert anyio.run(session, match.group(0)) == {"tool": "good.add", "data": {"sum": 3}}
        finally:
            process.terminate()
            process.wait(timeout=30)
    assert "broken" in log_path.read_text()  # the operator is told which server failed


def test_a_list_tools_that_raises_anything_costs_only_its_own_server(tmp_path: Path) -> None:
    """Whatever goes wrong with one server's listing (here a bug-like exception from the reader) is that server's
    error in the report; the others are synced."""
    from progressive_mcp.gateway.config import parse_servers
    from progressive_mcp.gateway.store import SqliteToolStore
    from progressive_mcp.gateway.sync import sync_servers

    config = parse_servers({"mcpServers": {"a": {"command": "x"}, "b": {"command": "y"}}}, "servers.json", {})

    def list_tools(server: str) -> list[dict[str, Any]]:
        if server == "a":
            raise KeyError("name")
        return [toy_tool("ping", "Ping.")]

    store = SqliteToolStore(tmp_path / "s.sqlite3")
    report = sync_servers(config, store, list_tools)
    errors = {s.server: s.error for s in report.servers}
    assert errors["b"] is None and errors["a"] is not None and "KeyError" in errors["a"]
    assert [t.document.public_name for t in store.tools()] == ["b.ping"]
