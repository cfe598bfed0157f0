"""OpenAPI documents as an attacker writes them (issue 27, findings 7, 8 and 9): the full validator reads nothing the
loader refuses (no network, no file outside the document's folder), YAML aliases cannot expand a small file into
gigabytes in any command that reads one, and no path can move a call to another host than the API's.

Run with: .venv/bin/python -m pytest tests/test_openapi_security.py -q
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2
import mcp_types as types
import pytest
from factories import make_tool
from loopback import Recorded, recording_server
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from lambda_fn.handler import make_handler
from lambda_fn.local import LocalServer
from progressive_mcp.calls.upstream import HttpxTransport, UpstreamClient
from progressive_mcp.catalog import Api, Auth, Catalog, Operation, Param
from progressive_mcp.errors import SpecError, ToolError
from progressive_mcp.settings import Settings
from progressive_mcp.sources import load_catalog
from progressive_mcp.sources.bounded_yaml import MAX_ALIAS_VALUES
from progressive_mcp.sources.compiled import dumps, loads
from progressive_mcp.surfaces.endpoint import Endpoint
from progressive_mcp.surfaces.surface import Surface

ROOT = Path(__file__).resolve().parent.parent
MARKER = "MARKER-7f3a91c2"  # in a file outside the document's folder: must never be printed
REMOTE_MARKER = "REMOTE-5d20be17"  # in what the loopback server would serve


def cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "progressive_mcp.cli", *args]
    return subprocess.run(command, capture_output=True, text=True, check=False, timeout=timeout, cwd=ROOT)


# --- finding 7: the validator reads only what the loader would ---------------------------------------------------


def _document_with(ref: str) -> str:
    """One usable operation, and one whose parameter and answer schema are `ref` (the loader skips it)."""
    return f"""\
openapi: 3.0.3
info: {{title: Refs, version: "1"}}
paths:
  /ok:
    get:
      operationId: ok
      responses: {{"200": {{description: ok}}}}
  /x:
    get:
      operationId: x
      parameters:
        - $ref: "{ref}#/param"
      responses:
        "200":
          description: ok
          content:
            application/json:
              schema: {{$ref: "{ref}#/schema"}}
components:
  schemas:
    Elsewhere: {{$ref: "{ref}#/schema"}}
"""


def _referenced(marker: str) -> str:
    """What the reference points at: values of the wrong type, which the validator would quote back."""
    return (
        f"param: {{name: q, in: query, schema: {{type: integer, default: {marker}}}}}\n"
        f"schema: {{type: object, properties: {{a: {{type: integer, default: {marker}}}}}}}\n"
    )


@pytest.mark.parametrize("flag", ["--validate", "--strict"])
@pytest.mark.parametrize("kind", ["http", "outside (relative)", "outside (file URI)"])
@pytest.mark.slow  # starts a process (tests/conftest.py)
def test_the_validator_reads_no_network_and_no_file_outside_the_folder(tmp_path: Path, flag: str, kind: str) -> None:
    secret = tmp_path / "secret.yaml"
    secret.write_text(_referenced(MARKER))
    folder = tmp_path / "api"
    folder.mkdir()
    with recording_server(_referenced(REMOTE_MARKER).encode(), "application/yaml") as remote:
        ref = {
            "http": f"{remote.url}/evil.yaml",
            "outside (relative)": "../secret.yaml",
            "outside (file URI)": secret.as_uri(),
        }[kind]
        document = folder / "openapi.yaml"
        document.write_text(_document_with(ref))
        done = cli("spec", "check", flag, str(document))
    output = done.stdout + done.stderr
    assert remote.requests == [], "the validator fetched a remote $ref"
    assert MARKER not in output and REMOTE_MARKER not in output
    assert "1 skipped" in done.stdout, output  # the loader's own refusal, as before
    refusal = "not a local file" if kind == "http" else "outside the document's folder"
    said = [line for line in done.stdout.splitlines() if "(openapi-spec-validator)" in line]
    assert any(refusal in line for line in said), output  # the validator says what it did not read
    assert done.returncode == (1 if flag == "--strict" else 0), output


@pytest.mark.slow  # starts a process (tests/conftest.py)
def test_the_validator_still_follows_refs_inside_the_folder(tmp_path: Path) -> None:
    (tmp_path / "parts.yaml").write_text(_referenced("not-a-number"))
    document = tmp_path / "openapi.yaml"
    document.write_text(_document_with("parts.yaml").replace("/x:", "/y:"))
    done = cli("spec", "check", "--validate", str(document))
    assert done.returncode == 0, done.stderr
    assert "warning (openapi-spec-validator): 'not-a-number' is not of type 'integer'" in done.stdout


# --- finding 8: YAML alias bombs -------------------------------------------------------------------------------


def laughs(indent: str) -> str:
    """Nine levels of ten aliases each: 10**9 values from a few hundred bytes."""
    lines = [f"{indent}l0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    lines += [f"{indent}l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 10)}]" for i in range(1, 9)]
    return "\n".join(lines) + "\n"


BOMBS = {
    # in a response example (the 804-byte file: `spec check` ran 83 s and died of MemoryError at 4 GB)
    "example": (
        'openapi: 3.0.3\ninfo: {title: Laughs, version: "1"}\nx-laughs:\n' + laughs("  ") + "paths:\n  /x:\n"
        "    get:\n      operationId: x\n      responses:\n        '200':\n          description: ok\n"
        "          content:\n            application/json:\n              schema: {type: array}\n"
        "              example: *l8\n"
    ),
    # in a parameter's enum (the 649-byte file: 12 s, 650 MB)
    "enum": (
        'openapi: 3.0.3\ninfo: {title: Laughs, version: "1"}\nx-laughs:\n' + laughs("  ") + "paths:\n  /x:\n"
        "    get:\n      operationId: x\n      parameters:\n"
        "        - {name: q, in: query, schema: {type: string, enum: *l8}}\n"
        "      responses: {'200': {description: ok}}\n"
    ),
}
ALIAS_ERROR = f"YAML aliases expand to more than {MAX_ALIAS_VALUES:,} values"


@pytest.mark.timeout(120)
@pytest.mark.parametrize("where", sorted(BOMBS))
def test_an_alias_bomb_document_is_refused_by_load_catalog(tmp_path: Path, where: str) -> None:
    path = tmp_path / "bomb.yaml"
    path.write_text(BOMBS[where])
    with pytest.raises(SpecError) as caught:
        load_catalog(path)
    assert "bomb.yaml" in str(caught.value) and ALIAS_ERROR in str(caught.value)


@pytest.mark.timeout(240)
@pytest.mark.parametrize("where", sorted(BOMBS))
@pytest.mark.parametrize(
    "command",
    [
        ("spec", "check"),
        ("spec", "check", "--validate"),
        ("spec", "compile"),
        ("stdio", "--spec"),
        ("serve", "--port", "0", "--spec"),
    ],
    ids=["spec check", "spec check --validate", "spec compile", "stdio", "serve"],
)
@pytest.mark.slow  # starts a process (tests/conftest.py)
def test_an_alias_bomb_document_fails_every_command_at_once(
    tmp_path: Path, where: str, command: tuple[str, ...]
) -> None:
    path = tmp_path / "bomb.yaml"
    path.write_text(BOMBS[where])
    done = cli(*command, str(path), timeout=200)
    assert done.returncode in (1, 2), done.stdout + done.stderr
    assert str(path) in done.stderr and ALIAS_ERROR in done.stderr, done.stderr


# --- finding 9: no path can choose the upstream host -----------------------------------------------------------


def _one_path(path: str) -> dict[str, Any]:
    return {
        "openapi": "3.0.0",
        "info": {"title": "Plain", "version": "1"},
        "servers": [{"url": "http://127.0.0.1:1810"}],
        "paths": {path: {"get": {"operationId": "plain", "responses": {"200": {"description": "ok"}}}}},
    }


@pytest.mark.parametrize("path", ["{shard}/v1/plain", "m.evil.net", "@127.0.0.1:18102/stolen", "v1/plain"])
@pytest.mark.slow  # starts a process (tests/conftest.py)
def test_a_document_with_a_path_not_starting_with_a_slash_is_refused(tmp_path: Path, path: str) -> None:
    document = tmp_path / "api.json"
    document.write_text(json.dumps(_one_path(path)))
    with pytest.raises(SpecError) as caught:
        load_catalog(document)
    escaped = path.replace("~", "~0").replace("/", "~1")
    assert f"#/paths/{escaped}: the path {path!r} does not start with /" in str(caught.value)
    done = cli("spec", "check", str(document))
    assert done.returncode == 1 and f"the path {path!r} does not start with /" in done.stderr


def test_a_swagger_path_not_starting_with_a_slash_is_refused(tmp_path: Path) -> None:
    swagger = {"swagger": "2.0", "info": {"title": "S", "version": "1"}, "host": "127.0.0.1:1810"}
    swagger["paths"] = {"/ok": {"get": {"responses": {"200": {"description": "ok"}}}}, "{x}/y": {"get": {}}}
    document = tmp_path / "swagger.json"
    document.write_text(json.dumps(swagger))
    with pytest.raises(SpecError, match=r"the path '\{x\}/y' does not start with /"):
        load_catalog(document)


def test_an_extension_among_the_paths_is_no_path(tmp_path: Path) -> None:
    # The Paths Object may carry `x-` extensions (one of the APIs.guru directory's has `x-codegen-contextRoot`):
    # they are neither paths to refuse nor operations
    document = _one_path("/v1/plain")
    document["paths"]["x-codegen-contextRoot"] = "/apis"
    path = tmp_path / "api.json"
    path.write_text(json.dumps(document))
    assert [tool.name for tool in load_catalog(path).tools] == ["plain"]


OPERATOR_KEY = "operator-key-0451-secret"
TOKEN = "endpoint-token-for-the-path-tests-0123456789"


def _catalog(path: str, base_url: str) -> Catalog:
    """A catalog that did not come from a checked document (hand-written, or compiled elsewhere)."""
    params = tuple(Param(name, "string", True, location="path") for name in ("shard",) if "{shard}" in path)
    tool = make_tool("plain", params, operation=Operation("GET", path, "plain"))
    api = Api("plain", "Plain", base_url, auth=Auth("header", "X-Key", "PMCP_UPSTREAM_KEY"))
    return Catalog.build(api, {"things": "Things"}, (tool,))


def test_a_compiled_catalog_with_such_a_path_is_refused_too() -> None:
    text = dumps(_catalog("{shard}/v1/plain", "http://127.0.0.1:1810"))
    with pytest.raises(SpecError, match=r"plain: the path '\{shard\}/v1/plain' does not start with /"):
        loads(text, "plain.json")


# (base URL, path template, arguments); {api}: the API's server, {port}: the other server's port, {head} and
# {digit}: that port but its last digit, and its last digit (the 127.0.0.1:1810 + "{shard}" = 18102).
ELSEWHERE = {
    "port from an argument": ("http://127.0.0.1:{head}", "{shard}/v1/plain", {"shard": "{digit}"}),
    "host from an argument": ("http://127.0.0", "{shard}:{port}/x", {"shard": ".1"}),
    "userinfo in the path": ("{api}", "@127.0.0.1:{port}/stolen", {}),
}


def _fill(text: str, api: Recorded, other: Recorded) -> str:
    port = str(other.port)
    return (
        text.replace("{api}", api.url).replace("{port}", port).replace("{head}", port[:-1]).replace("{digit}", port[-1])
    )


@pytest.mark.parametrize("case", sorted(ELSEWHERE))
def test_the_request_builder_never_sends_to_another_host(case: str) -> None:
    base_url, path, arguments = ELSEWHERE[case]
    with recording_server() as api, recording_server() as other:
        catalog = _catalog(_fill(path, api, other), _fill(base_url, api, other))
        client = UpstreamClient(catalog.api, transport=HttpxTransport(), retries=0, deadline_s=10)
        with pytest.raises(ToolError, match="would go to another server than the API's; nothing was sent"):
            client.call(catalog.tools[0], {k: _fill(v, api, other) for k, v in arguments.items()}, OPERATOR_KEY)
    assert other.requests == [] and api.requests == []


def test_a_well_formed_path_still_reaches_the_api() -> None:
    with recording_server() as api:
        catalog = _catalog("/v1/{shard}/plain", api.url + "/base/")
        client = UpstreamClient(catalog.api, transport=HttpxTransport(), retries=0, deadline_s=10)
        client.call(catalog.tools[0], {"shard": "a@b:1"}, OPERATOR_KEY)
    [(method, target, headers)] = api.requests
    assert (method, target, headers["x-key"]) == ("GET", "/base/v1/a%40b%3A1/plain", OPERATOR_KEY)


@asynccontextmanager
async def served(catalog: Catalog, upstream_url: str | None) -> AsyncIterator[Client]:
    """`serve` in server-key mode for a hand-made catalog: the caller never sees the operator's key."""
    settings = Settings.from_env(
        {},
        auth_mode="server-key",
        api_key=OPERATOR_KEY,
        endpoint_tokens=(TOKEN,),
        upstream_url=upstream_url,
        upstream_retries=0,
        cache=False,
    )
    endpoint = Endpoint(Surface.from_settings(settings, catalog=catalog), settings)
    with LocalServer(make_handler(endpoint), port=0) as server:
        async with (
            httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30) as client,
            Client(streamable_http_client(server.url, http_client=client)) as session,
        ):
            yield session


@pytest.mark.anyio
@pytest.mark.parametrize("with_upstream", [False, True], ids=["spec base URL", "--upstream"])
async def test_over_http_the_operators_key_never_reaches_another_host(with_upstream: bool) -> None:
    with recording_server() as api, recording_server() as other:
        base = f"http://127.0.0.1:{str(other.port)[:-1]}"
        catalog = _catalog("{shard}/v1/plain", api.url if with_upstream else base)
        async with served(catalog, base if with_upstream else None) as client:
            result = await client.call_tool(
                "TOOL_CALL", {"tool_name": "plain", "arguments": {"shard": str(other.port)[-1]}}
            )
        stolen = _catalog(f"@127.0.0.1:{other.port}/stolen", api.url)
        async with served(stolen, api.url if with_upstream else None) as client:
            literal = await client.call_tool("TOOL_CALL", {"tool_name": "plain", "arguments": {}})
    for answer in (result, literal):
        assert answer.is_error
        block = answer.content[0]
        assert isinstance(block, types.TextContent) and "nothing was sent" in block.text, block
    assert other.requests == [] and api.requests == []
