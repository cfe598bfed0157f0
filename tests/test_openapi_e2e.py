"""OpenAPI catalogs end to end: the mcp SDK's real client over stdio and over HTTP, TOOL_SEARCH, TOOL_GET and
TOOL_CALL, against the offline REST upstream (`progressive_mcp.offline.rest_upstream`) over real HTTP on
127.0.0.1, which records what arrives. Then a sample of operations of each real document in ../shared/openapi/:
the request that reaches the upstream carries the document's method and path template (values percent-encoded
into their segments), the query, headers and body given, and the credentials where the security scheme says."""

from __future__ import annotations

import base64
import json
import sys
import tempfile
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, quote

import httpx2
import mcp_types as types
import pytest
import yaml
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from real_documents import REAL as REAL_DOCUMENTS
from real_documents import SHARED

from lambda_fn.handler import make_handler
from lambda_fn.local import LocalServer
from progressive_mcp.catalog import CatalogTool, _thaw
from progressive_mcp.offline.rest_upstream import RestUpstream
from progressive_mcp.offline.schema_samples import sample_value
from progressive_mcp.settings import Settings
from progressive_mcp.sources import load_catalog
from progressive_mcp.surfaces.endpoint import Endpoint
from progressive_mcp.surfaces.metatools import META_TOOL_NAMES
from progressive_mcp.surfaces.surface import CallContext, Surface

pytestmark = pytest.mark.slow  # end-to-end over the real OpenAPI documents

ROOT = Path(__file__).resolve().parent.parent
TASKS = ROOT / "tests" / "fixtures" / "openapi" / "tasks" / "openapi.yaml"
KEY = "tasks-token-0451"
REAL = {name: REAL_DOCUMENTS[name] for name in ("spotify", "slack", "openai", "digitalocean")}


@pytest.fixture(scope="module")
def upstream() -> Iterator[RestUpstream]:
    with RestUpstream(load_catalog(TASKS), api_key=KEY) as server:
        yield server


def text_of(result: types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


@asynccontextmanager
async def stdio(upstream: RestUpstream, protocol: str, *flags: str) -> AsyncIterator[Client]:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "stdio_server", "--spec", str(TASKS), "--upstream", upstream.url, "--no-cache", *flags],
        env={"PMCP_UPSTREAM_KEY": KEY},
        cwd=str(ROOT),
    )
    with tempfile.TemporaryFile("w+") as log:
        async with Client(stdio_client(params, errlog=log), mode=protocol) as client:
            yield client


@asynccontextmanager
async def http(upstream: RestUpstream, protocol: str, key: str) -> AsyncIterator[Client]:
    """The serve stack (LocalServer → Lambda handler → Endpoint) in passthrough mode: the caller brings the key."""
    settings = Settings.from_env({}, spec_path=TASKS, upstream_url=upstream.url, cache=False)
    with LocalServer(make_handler(Endpoint.from_settings(settings)), port=0) as server:
        async with (
            httpx2.AsyncClient(headers={"X-API-Key": key}, timeout=30) as client,
            Client(streamable_http_client(server.url, http_client=client), mode=protocol) as session,
        ):
            yield session


async def walk_through(client: Client, upstream: RestUpstream) -> None:
    """TOOL_SEARCH, TOOL_GET and TOOL_CALL on the Task Tracker catalog, and what reached the upstream."""
    assert [t.name for t in (await client.list_tools()).tools] == list(META_TOOL_NAMES)
    found = await client.call_tool("TOOL_SEARCH", {"query": "add a comment to a task"})
    assert not found.is_error, text_of(found)
    assert "comments_add_v2_new" in [r["name"] for r in found.structured_content["results"]]

    got = await client.call_tool("TOOL_GET", {"tool_name": "projects.get"})
    assert not got.is_error, text_of(got)
    definition = got.structured_content["tools"][0]
    assert definition["description"].startswith("GET /projects/{project_id}.")
    assert definition["inputSchema"]["required"] == ["project_id", "X_Trace"]

    upstream.clear_requests()
    project = await client.call_tool(
        "TOOL_CALL", {"tool_name": "projects.get", "arguments": {"project_id": "p1", "X_Trace": "t-1"}}
    )
    assert not project.is_error, text_of(project)
    assert project.structured_content["data"] == {"id": "p1", "name": "Garden", "owner": {"id": "u1", "name": "Ada"}}
    tasks = await client.call_tool(
        "TOOL_CALL",
        {
            "tool_name": "get_projects_project_id_tasks",
            "arguments": {"project_id": "p7", "status": ["open", "done"], "filter": {"assignee": "ada"}, "limit": 5},
        },
    )
    assert not tasks.is_error, text_of(tasks)
    comment = await client.call_tool(
        "TOOL_CALL",
        {"tool_name": "comments_add_v2_new", "arguments": {"task_id": 7, "text": "a b&c", "notify": True}},
    )
    assert not comment.is_error, text_of(comment)
    first, second, third = upstream.requests
    assert (first.method, first.raw_path, first.status) == ("GET", "/api/v1/projects/p1", 200)
    assert first.header("x-trace") == "t-1" and first.header("authorization") == "Bearer ***"
    assert (second.method, second.raw_path) == (
        "GET",
        "/api/v1/projects/p7/tasks?status=open,done&filter[assignee]=ada&limit=5",
    )
    assert second.query == (("status", "open,done"), ("filter[assignee]", "ada"), ("limit", "5"))
    assert (third.method, third.raw_path, third.status) == ("POST", "/api/v1/tasks/7/comments", 200)
    assert third.header("content-type") == "application/x-www-form-urlencoded"
    assert parse_qsl(third.body.decode()) == [("text", "a b&c"), ("notify", "true")]


@pytest.mark.anyio
@pytest.mark.parametrize("protocol", ["legacy", "2026-07-28"])
async def test_the_sdk_client_over_stdio(upstream: RestUpstream, protocol: str) -> None:
    async with stdio(upstream, protocol) as client:
        await walk_through(client, upstream)


@pytest.mark.anyio
@pytest.mark.parametrize("protocol", ["legacy", "2026-07-28"])
async def test_the_sdk_client_over_http_with_the_callers_key(upstream: RestUpstream, protocol: str) -> None:
    async with http(upstream, protocol, KEY) as client:
        await walk_through(client, upstream)


@pytest.mark.anyio
async def test_a_wrong_key_is_the_upstreams_401_without_the_key(upstream: RestUpstream) -> None:
    async with http(upstream, "2026-07-28", "not-the-token") as client:
        refused = await client.call_tool(
            "TOOL_CALL", {"tool_name": "projects.get", "arguments": {"project_id": "p1", "X_Trace": "t"}}
        )
    assert refused.is_error
    assert "HTTP 401" in text_of(refused) and "not-the-token" not in text_of(refused)


@pytest.mark.anyio
async def test_code_mode_calls_rest_operations_from_a_script(upstream: RestUpstream) -> None:
    script = (
        "project = await projects_get(project_id='p1', X_Trace='code')\n"
        "tasks = await get_projects_project_id_tasks(project_id='p1', status=['open'])\n"
        "{'owner': project['owner']['name'], 'tasks': len(tasks)}"
    )
    async with stdio(upstream, "2026-07-28", "--mode", "code") as client:
        stub = await client.call_tool("TOOL_GET", {"tool_name": "get_projects_project_id_tasks"})
        assert "status: list[Literal['open', 'done', 'off']] | None = None" in text_of(stub)
        result = await client.call_tool("TOOL_EXECUTE", {"code": script})
    assert not result.is_error, text_of(result)
    assert result.structured_content["result"]["owner"] == "Ada"


# --- real documents: a sample of operations each ---------------------------------------------------------------


needs_shared = pytest.mark.skipif(not SHARED.is_dir(), reason=f"the real OpenAPI documents are not at {SHARED}")


def raw_routes(path: Path) -> set[tuple[str, str]]:
    """(METHOD, path template) of every operation, read straight from the document's `paths`."""
    text = path.read_text()
    document = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    return {
        (method.upper(), template.split("?", 1)[0])  # OpenAI's `/responses/{id}?beta=true`: a fixed query
        for template, item in document["paths"].items()
        for method in item
        if method in ("get", "put", "post", "delete", "patch", "head", "options")
    }


def sample_tools(catalog: Any) -> list[CatalogTool]:
    """Up to ten operations: of different shapes (path, query and header parameters, JSON and form bodies as
    members and whole, each write method) and two more from the middle and the end."""
    wanted = [
        lambda t: t.method == "GET" and any(p.location == "path" for p in t.params),
        lambda t: t.method == "GET" and any(p.location == "query" for p in t.params),
        lambda t: any(p.location == "header" for p in t.params),
        lambda t: t.operation.body == "members" and t.operation.body_type == "application/json",
        lambda t: t.operation.body == "members" and t.operation.body_type != "application/json",
        lambda t: t.operation.body == "whole",
        lambda t: t.method == "DELETE",
        lambda t: t.method in ("PUT", "PATCH"),
    ]
    tools = catalog.tools

    def callable_(tool: CatalogTool) -> bool:  # the generated arguments are valid (a sample of a oneOf may not be)
        return bool(catalog.validator(tool.name).is_valid(arguments_for(tool)))

    chosen: list[CatalogTool] = []
    for test in wanted:
        tool = next((t for t in tools if t.operation and test(t) and t not in chosen and callable_(t)), None)
        if tool is not None:
            chosen.append(tool)
    for tool in (tools[len(tools) // 3], tools[-1]):  # and two more, wherever they are
        if tool.operation and tool not in chosen and callable_(tool):
            chosen.append(tool)
    return chosen


def arguments_for(tool: CatalogTool) -> dict[str, Any]:
    """Required arguments (and one optional query parameter) with values made from their schemas; path strings
    get a `/` to show it stays inside its segment."""
    args: dict[str, Any] = {}
    optional_query = next((p for p in tool.params if not p.required and p.location == "query"), None)
    for param in tool.params:
        if not param.required and param is not optional_query:
            continue
        value = sample_value(_thaw(param.schema or {"type": param.type}), f"{tool.name}.{param.name}")
        if param.schema is not None and param.schema.get("contentEncoding") == "base64":  # a file's content
            value = base64.b64encode(f"file of {tool.name}".encode()).decode()
        if (
            param.location == "path"
            and param.type == "string"
            and param.enum is None
            and "format" not in (param.schema or {})
        ):
            value = "a/b c"
        args[param.name] = value
    return args


@needs_shared
@pytest.mark.parametrize("name", list(REAL))
def test_sampled_operations_of_each_real_document_reach_the_upstream_as_documented(name: str) -> None:
    catalog = load_catalog(REAL[name])
    routes = raw_routes(REAL[name])
    sample = sample_tools(catalog)
    assert len(sample) >= 4, [t.name for t in sample]  # Slack: GET with query, form POST, and the two more
    with RestUpstream(catalog, api_key=KEY) as upstream:
        surface = Surface.from_settings(
            Settings.from_env({}, spec_path=REAL[name], upstream_url=upstream.url, cache=False), catalog=catalog
        )
        ctx = CallContext(api_key=KEY)
        for tool in sample:
            args = arguments_for(tool)
            upstream.clear_requests()
            answer = surface.call_tool_wire("TOOL_CALL", {"tool_name": tool.name, "arguments": args}, ctx)
            assert not answer.get("isError"), (tool.name, args, answer["content"][0]["text"][:500])
            (request,) = upstream.requests
            operation = tool.operation
            assert operation is not None
            assert (request.method, operation.path) in routes  # the document's own method and template
            assert request.method == operation.method and request.status in (200, 204)
            expected_path = operation.path
            for param in tool.params:
                if param.location == "path":
                    expected_path = expected_path.replace(
                        "{" + param.upstream_name + "}", quote(str(args[param.name]), safe="")
                    )
            base = upstream.url.split("://", 1)[1].split("/", 1)
            prefix = "/" + base[1] if len(base) > 1 else ""
            assert request.raw_path.split("?", 1)[0] == prefix + expected_path, tool.name
            query = dict(request.query)
            assert {k: query.get(k) for k in tool.fixed} == dict(tool.fixed)
            for param in tool.params:
                value = args.get(param.name)
                if param.name not in args or value is None:
                    continue
                if param.location == "query" and isinstance(value, str | int | float) and not isinstance(value, bool):
                    assert query[param.upstream_name] == str(value), (tool.name, param.name)
                if param.location == "header" and isinstance(value, str):
                    assert request.header(param.upstream_name) == value
            body_args = {p.upstream_name: args[p.name] for p in tool.params if p.location == "body" and p.name in args}
            if operation.body == "whole" and "body" in args:
                assert json.loads(request.body) == args["body"]
            elif operation.body == "members" and operation.body_type == "application/json" and body_args:
                assert json.loads(request.body) == body_args
            elif operation.body == "members" and operation.body_type == "multipart/form-data" and body_args:
                for param in tool.params:  # each member a part; a file's part holds its decoded bytes
                    if param.location == "body" and param.name in args:
                        assert f'name="{param.upstream_name}"'.encode() in request.body
                        if param.schema is not None and param.schema.get("contentEncoding") == "base64":
                            assert base64.b64decode(args[param.name]) in request.body
            elif operation.body == "members" and body_args:
                sent = dict(parse_qsl(request.body.decode()))
                for key, value in body_args.items():
                    if isinstance(value, str):
                        assert sent[key] == value
            assert request.header("authorization") == "Bearer ***"  # every one of these documents uses bearer auth


def test_tool_get_shows_the_annotations_of_writes_only() -> None:
    surface = Surface.from_settings(Settings.from_env({}, spec_path=TASKS, cache=False))
    ctx = CallContext(api_key=KEY)
    got = surface.call_tool_wire("TOOL_GET", {"tool_name": ["projects_delete", "projects_list"]}, ctx)
    delete, listing = got["structuredContent"]["tools"]
    assert delete["annotations"]["destructiveHint"] is True
    assert "annotations" not in listing  # read-only, like every tool of the bundled catalog


@needs_shared
@pytest.mark.anyio
async def test_the_readme_walk_through_on_a_downloaded_document(tmp_path: Path) -> None:
    """README's three commands, on Spotify's document as a user would have downloaded it: `spec check`, then the
    stdio server with `--include method:GET` and PMCP_UPSTREAM_KEY (here against the offline REST upstream)."""
    import shutil
    import subprocess

    document = tmp_path / "openapi.yaml"
    shutil.copyfile(REAL["spotify"], document)
    check = subprocess.run(
        [sys.executable, "-m", "progressive_mcp.cli", "spec", "check", str(document)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=False,
    )
    assert check.returncode == 0, check.stderr
    assert "97 operations → 97 tools in 15 categories" in check.stdout
    with RestUpstream(load_catalog(document), api_key=KEY) as upstream:
        params = StdioServerParameters(
            command=sys.executable,
            args=["-m", "progressive_mcp.cli", "stdio", "--spec", str(document), "--include", "method:GET"],
            env={"PMCP_UPSTREAM_KEY": KEY, "PMCP_UPSTREAM_URL": upstream.url},
            cwd=str(tmp_path),
        )
        with tempfile.TemporaryFile("w+") as log:
            async with Client(stdio_client(params, errlog=log), mode="2026-07-28") as client:
                listing = await client.call_tool("TOOL_LIST", {})
                assert listing.structured_content["tool_count"] == len(
                    [t for t in load_catalog(document).tools if t.method == "GET"]
                )
                found = await client.call_tool("TOOL_SEARCH", {"query": "get an artist's top tracks"})
                names = [r["name"] for r in found.structured_content["results"]]
                assert "get-an-artists-top-tracks" in names, names
                called = await client.call_tool(
                    "TOOL_CALL",
                    {"tool_name": "get-an-artists-top-tracks", "arguments": {"id": "0TnOYISbd1XYRBk9myaseg"}},
                )
                assert not called.is_error, text_of(called)
        (request,) = upstream.requests
        assert request.raw_path.split("?")[0] == "/v1/artists/0TnOYISbd1XYRBk9myaseg/top-tracks"
        assert request.header("authorization") == "Bearer ***" and request.status == 200


@needs_shared
@pytest.mark.anyio
async def test_digitalocean_over_http_with_the_sdk_client() -> None:
    """The largest document (659 operations over ~2,900 files) behind the serve stack, driven by the SDK client."""
    document = REAL["digitalocean"]
    catalog = load_catalog(document)
    with RestUpstream(catalog, api_key=KEY) as upstream:
        settings = Settings.from_env({}, spec_path=document, upstream_url=upstream.url, cache=False)
        with LocalServer(make_handler(Endpoint.from_settings(settings)), port=0) as server:
            async with (
                httpx2.AsyncClient(headers={"Authorization": f"Bearer {KEY}"}, timeout=30) as client,
                Client(streamable_http_client(server.url, http_client=client), mode="2026-07-28") as session,
            ):
                assert [t.name for t in (await session.list_tools()).tools] == list(META_TOOL_NAMES)
                found = await session.call_tool("TOOL_SEARCH", {"query": "list all droplets"})
                assert "droplets_list" in [r["name"] for r in found.structured_content["results"]]
                got = await session.call_tool("TOOL_GET", {"tool_name": "droplets_get"})
                assert got.structured_content["tools"][0]["inputSchema"]["required"] == ["droplet_id"]
                called = await session.call_tool(
                    "TOOL_CALL", {"tool_name": "droplets_get", "arguments": {"droplet_id": 3164444}}
                )
                assert not called.is_error, text_of(called)
                assert "droplet" in called.structured_content["data"]
        (request,) = upstream.requests
        assert (request.method, request.raw_path) == ("GET", "/v2/droplets/3164444")
        assert request.header("authorization") == "Bearer ***" and request.status == 200


def test_file_uploads_go_as_multipart_forms_and_raw_bodies(upstream: RestUpstream) -> None:
    """A file argument is base64 in the call and bytes on the wire: a multipart part, or the whole raw body."""
    surface = Surface.from_settings(
        Settings.from_env({}, spec_path=TASKS, upstream_url=upstream.url, cache=False), catalog=upstream.catalog
    )
    ctx = CallContext(api_key=KEY)
    content = bytes(range(256))
    upstream.clear_requests()
    answer = surface.call_tool_wire(
        "TOOL_CALL",
        {"tool_name": "attachments_upload", "arguments": {"task_id": 3, "file": base64.b64encode(content).decode()}},
        ctx,
    )
    assert not answer.get("isError"), answer
    (request,) = upstream.requests
    assert request.raw_path == "/api/v1/tasks/3/attachments"
    assert request.header("content-type").startswith("multipart/form-data; boundary=")
    assert b'Content-Disposition: form-data; name="file"; filename="file"' in request.body
    assert content in request.body
    refused = surface.call_tool_wire(
        "TOOL_CALL", {"tool_name": "attachments_upload", "arguments": {"task_id": 3, "file": "not base64!"}}, ctx
    )
    assert refused["isError"] and "not valid base64" in refused["content"][0]["text"]


@needs_shared
def test_a_raw_image_body_is_sent_as_its_bytes() -> None:
    catalog = load_catalog(REAL["spotify"])
    tool = catalog.get("upload-custom-playlist-cover")
    assert tool.operation.body == "whole" and tool.operation.body_type == "image/jpeg"
    image = b"\xff\xd8\xff\xe0fake-jpeg"
    with RestUpstream(catalog, api_key=KEY) as server:
        surface = Surface.from_settings(
            Settings.from_env({}, spec_path=REAL["spotify"], upstream_url=server.url, cache=False), catalog=catalog
        )
        arguments = {"playlist_id": "3cEYpjA9oz9GiPac4AsH4n", "body": base64.b64encode(image).decode()}
        answer = surface.call_tool_wire(
            "TOOL_CALL", {"tool_name": tool.name, "arguments": arguments}, CallContext(api_key=KEY)
        )
        assert not answer.get("isError"), answer
        (request,) = server.requests
    assert (request.method, request.raw_path) == ("PUT", "/v1/playlists/3cEYpjA9oz9GiPac4AsH4n/images")
    assert request.header("content-type") == "image/jpeg" and request.body == image


@needs_shared
@pytest.mark.parametrize("document", sorted(REAL))
def test_a_catalog_with_many_categories_keeps_the_meta_tools_small(document: str) -> None:
    """Categories are enumerated in TOOL_LIST's schema only while that keeps the four definitions within the
    450-token budget (they are always in context); otherwise described, and named by TOOL_LIST's answer."""
    from progressive_mcp.surfaces.metatools import meta_tool_definitions
    from progressive_mcp.tokens import count_tokens

    catalog = load_catalog(REAL[document])
    definitions = meta_tool_definitions(catalog)
    category = definitions[0]["inputSchema"]["properties"]["category"]
    assert count_tokens(json.dumps(definitions, separators=(",", ":"))) <= 450
    assert "enum" not in category and str(len(catalog.categories)) in category["description"]


def test_the_bundled_catalogs_categories_stay_an_enum() -> None:
    from progressive_mcp.surfaces.metatools import meta_tool_definitions
    from progressive_mcp.tokens import count_tokens

    definitions = meta_tool_definitions(load_catalog())
    assert len(definitions[0]["inputSchema"]["properties"]["category"]["enum"]) == 11
    assert count_tokens(json.dumps(definitions, separators=(",", ":"))) <= 450
