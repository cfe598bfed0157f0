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
from test_gateway_aws import aws  # noqa: F401 (a fixture)

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


# Finding 10, the store's half: no secret in the stored fingerprint; the store private to its user.

ARG_SECRET = "arg-secret-value-7731"


def secret_arg_servers(tmp_path: Path) -> Path:
    tools = tmp_path / "toy.json"
    write_tools(tools, TOY_TOOLS[:2])
    entry = toy_entry(tools)
    entry["args"] = [*entry["args"], "--token=${ARG_SECRET}"]  # the toy server ignores arguments after its file
    servers = tmp_path / "servers.json"
    servers.write_text(json.dumps({"mcpServers": {"toy": entry}}))
    return servers


def store_bytes(index: Path) -> bytes:
    """Every byte of the SQLite store and its -wal and -shm files."""
    return b"".join(p.read_bytes() for p in index.parent.glob(index.name + "*"))


def test_a_secret_in_args_is_not_stored(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ARG_SECRET", ARG_SECRET)
    servers = secret_arg_servers(tmp_path)
    index = tmp_path / "index.sqlite3"
    gateway = Gateway.open(servers, index)
    try:
        gateway.sync()
        assert "toy.add" in gateway.catalog
        (state,) = gateway.store.servers()
        assert ARG_SECRET not in state.fingerprint and "${ARG_SECRET}" in state.fingerprint
        assert ARG_SECRET.encode() not in store_bytes(index)
    finally:
        gateway.close()


def test_a_changed_command_is_another_server_and_a_rotated_secret_is_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ARG_SECRET", ARG_SECRET)
    servers = secret_arg_servers(tmp_path)
    index = tmp_path / "index.sqlite3"
    gateway = Gateway.open(servers, index)
    gateway.sync()
    gateway.close()
    monkeypatch.setenv("ARG_SECRET", "rotated-secret-0001")
    rotated = Gateway.open(servers, index)
    try:
        assert rotated.sync().counts["unchanged"] == 2  # the same server: nothing forgotten, nothing re-created
    finally:
        rotated.close()
    data = json.loads(servers.read_text())
    data["mcpServers"]["toy"]["args"].append("--another-flag")
    servers.write_text(json.dumps(data))
    moved = Gateway.open(servers, index)
    try:
        assert moved.sync().counts["created"] == 2  # another command line: another server, synced afresh
    finally:
        moved.close()


def mode(path: Path) -> int:
    return path.stat().st_mode & 0o777


def test_the_store_and_its_folder_are_private_to_their_user(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("ARG_SECRET", ARG_SECRET)
    servers = secret_arg_servers(tmp_path)
    gateway = Gateway.open(servers)  # the default store, under the cache folder
    try:
        gateway.sync()
        index = Path(gateway.store.path)  # type: ignore[attr-defined]
        files = sorted(index.parent.glob(index.name + "*"))
        assert {p.name for p in files} >= {index.name, f"{index.name}-wal", f"{index.name}-shm"}
        assert {p.name: mode(p) for p in files} == {p.name: 0o600 for p in files}
        assert mode(index.parent) == 0o700
    finally:
        gateway.close()


def test_an_older_world_readable_store_is_made_private(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import sqlite3

    from progressive_mcp.gateway.store import SqliteToolStore, default_index_path

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    index = default_index_path(tmp_path / "servers.json")
    index.parent.mkdir(parents=True, mode=0o755)
    index.parent.chmod(0o755)
    sqlite3.connect(str(index)).close()
    index.chmod(0o644)
    store = SqliteToolStore(index)
    try:
        assert mode(index) == 0o600 and mode(index.parent) == 0o700
    finally:
        store.close()


@pytest.mark.usefixtures("aws")
def test_a_secret_in_args_is_not_stored_in_dynamodb(tmp_path: Path) -> None:
    import boto3
    from test_gateway_aws import REGION, TABLE, lambda_env

    from lambda_fn.sync import run_sync

    servers = secret_arg_servers(tmp_path)
    report = run_sync({"all": True}, {**lambda_env(servers), "ARG_SECRET": ARG_SECRET})
    assert report.counts["created"] == 2
    items = boto3.client("dynamodb", region_name=REGION).scan(TableName=TABLE)["Items"]
    assert any(i["pk"]["S"] == "server" for i in items)
    assert ARG_SECRET not in json.dumps(items, default=repr)
