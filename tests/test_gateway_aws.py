"""The gateway on AWS, under moto: the DynamoDB tool store (the same contract as the SQLite one), the scheduled
sync function writing it from real MCP servers (the toy server), and the serving Lambda handler answering from it
without contacting any server at a cold start, then following the sync's changes."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from aws_lambda_powertools.utilities import parameters
from moto import mock_aws
from test_gateway import SECRET, TOY_TOOLS, toy_entry, toy_tool, write_tools

from lambda_fn.aws import endpoint_from_environment
from lambda_fn.sync import handler as sync_handler
from lambda_fn.sync import run_sync
from lambda_fn.toolstore import DynamoToolStore
from progressive_mcp.errors import ConfigError
from progressive_mcp.gateway.config import ServerConfig
from progressive_mcp.gateway.documents import ToolDocument, tool_hash
from progressive_mcp.gateway.store import Approval, SqliteToolStore, ToolStore
from progressive_mcp.gateway.sync import sync_server
from progressive_mcp.gateway.tools import catalog_tool
from progressive_mcp.search import embedder, vectors
from progressive_mcp.surfaces.endpoint import HttpRequest

REGION = "us-east-1"
TABLE = "pmcp-test-tools"


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in ("AWS_PROFILE", "AWS_REGION", "AWS_SECURITY_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.setenv(name, "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    parameters.clear_caches()
    with mock_aws():
        boto3.client("dynamodb", region_name=REGION).create_table(
            TableName=TABLE,
            AttributeDefinitions=[
                {"AttributeName": "pk", "AttributeType": "S"},
                {"AttributeName": "sk", "AttributeType": "S"},
            ],
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
            BillingMode="PAY_PER_REQUEST",
        )
        yield
    parameters.clear_caches()


def doc(server: str, name: str, description: str) -> ToolDocument:
    definition = {"name": name, "description": description, "inputSchema": {"type": "object"}}
    return ToolDocument(server, name, f"{server}.{name}", definition, tool_hash(definition))


@pytest.fixture(params=["sqlite", "dynamodb"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> ToolStore:
    if request.param == "sqlite":
        return SqliteToolStore(tmp_path / "index.sqlite3")
    request.getfixturevalue("aws")
    return DynamoToolStore(TABLE, client=boto3.client("dynamodb", region_name=REGION))


def test_both_stores_keep_the_same_contract(store: ToolStore) -> None:
    assert store.tools() == [] and store.servers() == []
    start = store.generation()
    seq = store.apply(
        "a",
        created=[doc("a", "one", "First."), doc("a", "two", "Second.")],
        updated=[],
        deleted=[],
        synced_at=100.0,
        fingerprint="cmd a",
    )
    store.apply("b", created=[doc("b", "x", "Ex.")], updated=[], deleted=[], synced_at=101.0, fingerprint="url b")
    assert [t.document.public_name for t in store.tools()] == ["a.one", "a.two", "b.x"]
    assert [t.document.name for t in store.tools("a")] == ["one", "two"]
    assert [(s.server, s.synced_at, s.fingerprint) for s in store.servers()] == [
        ("a", 100.0, "cmd a"),
        ("b", 101.0, "url b"),
    ]
    assert store.generation() > start
    assert not any(t.approved for t in store.tools())  # nothing approved: none was said to be
    first = doc("a", "one", "First.")
    store.apply("a", created=[], updated=[], deleted=[], synced_at=100.0, fingerprint="cmd a", approved=[first])
    assert store.tools("a")[0].approved and store.approval("a", "one") == Approval(first.hash, first.definition)
    # An update restamps the document and leaves its approval; a delete removes the document, not the approval.
    changed = doc("a", "one", "First, changed.")
    generation = store.generation()
    seq2 = store.apply("a", created=[], updated=[changed], deleted=["two"], synced_at=200.0, fingerprint="cmd a")
    assert seq2 > seq and store.generation() > generation
    (one,) = store.tools("a")
    assert one.document == changed and one.indexed_seq == seq2 and not one.approved
    assert one.approved_hash == first.hash
    assert next(t for t in store.tools() if t.document.name == "x").indexed_seq < seq2  # untouched
    store.apply("a", created=[], updated=[], deleted=["one"], synced_at=201.0, fingerprint="cmd a")
    assert store.approval("a", "one") is not None  # kept by server and name, for when the tool comes back
    store.apply("a", created=[changed], updated=[], deleted=[], synced_at=202.0, fingerprint="cmd a")
    assert not store.tools("a")[0].approved
    # Approving takes the current definition, named by its hash; another hash changes nothing.
    generation = store.generation()
    assert store.approve("a.one", first.hash) is None and store.generation() == generation
    approved = store.approve("a.one", changed.hash)
    assert approved is not None and approved.approved and store.generation() > generation
    assert store.tools("a")[0].approved and store.approval("a", "one") == Approval(changed.hash, changed.definition)
    assert store.approve("a.nothing", changed.hash) is None
    # Forgetting a server drops it, its documents and its approvals.
    assert store.forget("a") == 1
    assert [t.document.public_name for t in store.tools()] == ["b.x"]
    assert [s.server for s in store.servers()] == ["b"]
    assert store.approval("a", "one") is None


def test_a_large_definition_round_trips(store: ToolStore) -> None:
    big = doc("a", "big", "Many words. " * 20_000)  # ~240 KB of text: stored compressed on DynamoDB
    store.apply("a", created=[big], updated=[], deleted=[], synced_at=1.0, fingerprint="cmd")
    assert store.tools()[0].document == big


@pytest.fixture
def servers_file(tmp_path: Path) -> tuple[Path, Path]:
    tools_file = tmp_path / "toy.json"
    write_tools(tools_file, TOY_TOOLS)
    servers = tmp_path / "servers.json"
    entry = toy_entry(tools_file, description="A toy server for tests.")
    entry["env"] = {"TOY_TOKEN": "${TOY_TOKEN}"}
    servers.write_text(json.dumps({"mcpServers": {"toy": entry}}))
    return servers, tools_file


def lambda_env(servers: Path, **extra: str) -> dict[str, str]:
    return {
        "PMCP_SERVERS": str(servers),
        "PMCP_INDEX_TABLE": TABLE,
        "AWS_REGION": REGION,
        "AWS_LAMBDA_FUNCTION_NAME": "pmcp-test",
        "PMCP_CACHE": "off",
        "TOY_TOKEN": SECRET,
        **extra,
    }


def rpc(endpoint: Any, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name, "arguments": arguments}}
    request = HttpRequest.build(
        "POST",
        "/mcp",
        headers={
            "content-type": "application/json",
            "accept": "application/json, text/event-stream",
            "mcp-protocol-version": "2025-11-25",
        },
        body=json.dumps(body).encode(),
    )
    response = endpoint.handle(request)
    assert response.status == 200, response.body
    result: dict[str, Any] = json.loads(response.body)["result"]
    return result


@pytest.mark.slow
def test_the_scheduled_sync_writes_the_store_and_the_endpoint_serves_it_without_waiting(
    aws: None, servers_file: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    servers, tools_file = servers_file
    env = lambda_env(servers, PMCP_INDEX_POLL_S="0")
    # Before any sync the endpoint starts, answers, and contacts no server: the catalog is empty.
    endpoint = endpoint_from_environment(env)
    try:
        assert len(endpoint.surface.catalog) == 0 and endpoint.gateway is not None
        assert endpoint.gateway.pool.connected() == []
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        report = sync_handler({}, None)  # what EventBridge's rule invokes
        assert report["counts"]["created"] == len(TOY_TOOLS)
        # The serving instance sees the new generation on its next request, and still started no server to list.
        listing = rpc(endpoint, "TOOL_LIST", {})
        assert [c["name"] for c in listing["structuredContent"]["categories"]] == ["toy"]
        assert endpoint.gateway.pool.connected() == []
        added = rpc(endpoint, "TOOL_CALL", {"tool_name": "toy.add", "arguments": {"a": 2, "b": 3}})
        assert added["structuredContent"] == {"tool": "toy.add", "data": {"sum": 5}}
        assert endpoint.gateway.pool.connected() == ["toy"]  # started on its first call
        has_env = rpc(endpoint, "TOOL_CALL", {"tool_name": "toy.has_env", "arguments": {"name": "TOY_TOKEN"}})
        assert has_env["isError"] is False and json.loads(has_env["content"][0]["text"]) == {"set": True}
        # Nothing due: the next scheduled run syncs no server; a run asking for one re-syncs it and the change
        # reaches the serving instance.
        assert run_sync({}, env).servers == []
        write_tools(tools_file, [*TOY_TOOLS, toy_tool("added", "A tool added between runs.")])
        asked = run_sync({"servers": ["toy"]}, env)
        assert asked.counts == {"created": 1, "updated": 0, "deleted": 0, "unchanged": len(TOY_TOOLS), "failed": 0}
        found = rpc(endpoint, "TOOL_SEARCH", {"query": "tool added between runs"})
        assert found["structuredContent"]["results"][0]["name"] == "toy.added"
    finally:
        endpoint.close()


@pytest.mark.slow
def test_the_servers_files_variables_can_come_from_a_secret(
    aws: None, servers_file: tuple[Path, Path], tmp_path: Path
) -> None:
    servers, _ = servers_file
    secrets = boto3.client("secretsmanager", region_name=REGION)
    secrets.create_secret(Name="pmcp-servers-env", SecretString=json.dumps({"TOY_TOKEN": SECRET}))
    env = lambda_env(servers, PMCP_SERVERS_SECRET="pmcp-servers-env")
    del env["TOY_TOKEN"]
    report = run_sync({"all": True}, env)
    assert report.counts["created"] == len(TOY_TOOLS) and not [s for s in report.servers if s.error]
    endpoint = endpoint_from_environment(env)
    try:
        has_env = rpc(endpoint, "TOOL_CALL", {"tool_name": "toy.has_env", "arguments": {"name": "TOY_TOKEN"}})
        assert json.loads(has_env["content"][0]["text"]) == {"set": True}  # the secret's value reached the server
    finally:
        endpoint.close()
    secrets.create_secret(Name="pmcp-servers-broken", SecretString="TOY_TOKEN=abc")
    with pytest.raises(ConfigError, match="must hold a JSON object") as caught:
        run_sync({}, {**env, "PMCP_SERVERS_SECRET": "pmcp-servers-broken"})
    assert "abc" not in str(caught.value)


def test_a_sync_event_naming_an_unknown_server_is_refused(aws: None, servers_file: tuple[Path, Path]) -> None:
    servers, _ = servers_file
    with pytest.raises(ConfigError, match="no enabled server named nope"):
        run_sync({"servers": ["nope"]}, lambda_env(servers))


@pytest.mark.slow
def test_without_a_table_the_lambda_keeps_its_store_in_tmp(
    servers_file: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import lambda_fn.aws

    assert lambda_fn.aws.LAMBDA_INDEX == "/tmp/progressive-mcp/index.sqlite3"  # the only writable place on Lambda
    # The store itself goes to this test's own folder: /tmp/progressive-mcp/ is shared by every run on the machine.
    monkeypatch.setattr(lambda_fn.aws, "LAMBDA_INDEX", str(tmp_path / "progressive-mcp" / "index.sqlite3"))
    servers, _ = servers_file
    env = lambda_env(servers)
    del env["PMCP_INDEX_TABLE"]
    endpoint = endpoint_from_environment({**env, "PMCP_INDEX": ""}, session=None)
    try:
        assert endpoint.gateway is not None
        assert getattr(endpoint.gateway.store, "path", "") == tmp_path / "progressive-mcp" / "index.sqlite3"
    finally:
        endpoint.close()


@pytest.mark.slow
def test_a_pinned_tool_is_approved_through_the_sync_function(
    aws: None, servers_file: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    servers, tools_file = servers_file
    data = json.loads(servers.read_text())
    data["mcpServers"]["toy"]["pin"] = True
    servers.write_text(json.dumps(data))
    env = lambda_env(servers, PMCP_INDEX_POLL_S="0")
    run_sync({"all": True}, env)
    changed = [dict(t, description="Add two numbers, and now also something else.") if t["name"] == "add" else t
               for t in TOY_TOOLS]  # fmt: skip
    write_tools(tools_file, changed)
    run_sync({"all": True}, env)
    endpoint = endpoint_from_environment(env)
    try:
        listing = rpc(endpoint, "TOOL_LIST", {})["structuredContent"]
        assert [w["name"] for w in listing["withheld"]] == ["toy.add"]
        pending = listing["withheld"][0]["hash"]
        with pytest.raises(ConfigError, match=r"no stored tool named toy\.nothing"):
            run_sync({"approve": [f"toy.nothing@{pending}"]}, env)
        assert run_sync({"approve": [f"toy.add@{pending}"]}, env).servers == []
        listing = rpc(endpoint, "TOOL_LIST", {})["structuredContent"]
        assert "withheld" not in listing or listing["withheld"] == []
        assert "toy.add" in endpoint.surface.catalog
    finally:
        endpoint.close()


@pytest.mark.skipif(not embedder.available(), reason="the semantic extra is not installed")
def test_a_sync_embeds_a_tool_once_and_again_when_it_changes(store: ToolStore, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PMCP_SEMANTIC", "on")
    server = ServerConfig(name="notes", transport="http", url="http://127.0.0.1:9/mcp", written="http://x/mcp")
    listing = [
        {"name": "add_note", "description": "Save a note for later.", "inputSchema": {"type": "object"}},
        {"name": "find_notes", "description": "Search the saved notes.", "inputSchema": {"type": "object"}},
    ]
    model = embedder.Embedder.shared()

    def synced(tools: list[dict[str, Any]]) -> int:
        before = model.texts_embedded
        assert sync_server(server, store, lambda name: [dict(t) for t in tools]).error is None
        return model.texts_embedded - before

    assert synced(listing) == 2
    assert synced(listing) == 0  # unchanged: the stored vectors are kept
    changed = [listing[0], {**listing[1], "description": "Search the saved notes by tag."}]
    assert synced(changed) == 1  # only the changed tool
    catalog_tools = [catalog_tool(server, item) for item in store.tools("notes")]
    keys = [vectors.key_of(tool) for tool in catalog_tools]
    rows = store.vectors(keys)
    assert sorted(rows) == sorted(keys) and all(len(row) == vectors.ROW_BYTES for row in rows.values())
    # A search of the gateway's catalog takes them from the store: nothing but the query is embedded.
    cache = vectors.VectorCache()
    cache.offer_lookup(catalog_tools, store.vectors)
    assert vectors.rows_for(catalog_tools, cache, embed=lambda texts: pytest.fail(f"embedded {texts}"))[1] == 0
