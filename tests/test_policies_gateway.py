"""Per-identity policies in front of a gateway (issue 30), over real HTTP on 127.0.0.1 with real stdio MCP servers
(the toy server): a policy that hides a server's tools hides its withheld tools (pinned, awaiting approval) and
its entry among the unavailable servers too, in every answer that names tools or servers (TOOL_LIST, TOOL_SEARCH,
TOOL_GET, TOOL_CALL, code-mode stubs and scripts, tools/list in every mode); a call of a hidden withheld tool is
answered byte for byte as a call of a tool that does not exist; a policy that shows the server still names them."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_gateway import TOY_TOOLS, toy_entry, toy_tool, write_tools
from test_gateway_hardening import relist

from lambda_fn.handler import make_handler
from lambda_fn.local import LocalServer
from progressive_mcp.calls.stubs import python_name
from progressive_mcp.gateway.config import load_servers
from progressive_mcp.gateway.gateway import Gateway
from progressive_mcp.gateway.store import SqliteToolStore
from progressive_mcp.settings import Settings
from progressive_mcp.surfaces.endpoint import Endpoint
from progressive_mcp.surfaces.surface import GatewaySurfaces

pytestmark = pytest.mark.slow  # a gateway of four toy servers, synced twice, for the module: as the other pin tests

MODERN = "2026-07-28"
MODES = ("progressive", "direct", "hybrid", "code")
NOW = 1_900_000_000.0  # a frozen clock: no retry of a down server comes due during the tests
# The names a caller of the "other" team must never learn: the servers it is not given, and their tools, withheld
# or not ("toy" alone is too common a word to look for: its tools' names are looked for instead).
WITHHELD = "toy.secret_plan"
HIDDEN_SERVERS = ("flaky", "broken")


def token(name: str) -> str:
    return f"{name}-gateway-policy-token-0123456789"


def digest(value: str) -> str:
    return "sha256:" + hashlib.sha256(value.encode()).hexdigest()[:16]


POLICIES: dict[str, dict[str, Any]] = {
    "other": {"categories": ["other"]},  # one server: toy, flaky and broken are hidden, withheld tools and all
    "toy_named": {"tools": ["toy.echo", "toy.add", "other.*"]},  # toy's tools by name: its new one is not among them
    "toy": {"categories": ["toy", "flaky", "broken"]},  # the servers themselves: their withheld and down entries show
    "all": {},
}
TOKENS = {name: token(name) for name in POLICIES}
DOCUMENT = {"identities": [{"token": digest(TOKENS[name]), **fields} for name, fields in POLICIES.items()]}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalServer]:
    """A gateway of four toy servers: `toy` (pinned; its second sync lists a new tool, withheld), `other`, `flaky`
    (synced once, then failing: down with known tools) and `broken` (never synced: down with none), served over
    HTTP in server-key mode with the policies above."""
    folder = tmp_path_factory.mktemp("gateway-policies")
    files = {name: folder / f"{name}.json" for name in ("toy", "other", "flaky", "broken")}
    write_tools(files["toy"], TOY_TOOLS)
    write_tools(files["other"], [toy_tool("ping", "Answer with the arguments; proves this server still works.")])
    write_tools(files["flaky"], [toy_tool("flake_report", "Report the flakes of the week.")])
    files["broken"].write_text(json.dumps({"tools": [], "list": "error"}))
    servers = folder / "servers.json"
    entries = {
        "toy": toy_entry(files["toy"], pin=True, description="A toy server."),
        "other": toy_entry(files["other"], description="Another toy server."),
        "flaky": toy_entry(files["flaky"], description="A server that fails after its first sync."),
        "broken": toy_entry(files["broken"], description="A server whose tools/list always fails."),
    }
    servers.write_text(json.dumps({"mcpServers": entries}))
    gateway = Gateway(load_servers(servers), SqliteToolStore(folder / "index.sqlite3"), clock=lambda: NOW)
    try:
        gateway.sync()
        files["flaky"].write_text(json.dumps({"tools": [], "list": "error"}))
        gateway.sync(["flaky"])
        relist(gateway, files["toy"], [*TOY_TOOLS, toy_tool("secret_plan", "The plan nobody outside may know of.")])
        assert [w["name"] for w in gateway.withheld] == [WITHHELD], gateway.withheld
        assert {d.server for d in gateway.unavailable()} == set(HIDDEN_SERVERS)
        assert "flaky.flake_report" in gateway.catalog  # its stored tools are kept while it is down
        settings = Settings.from_env(
            {"PMCP_POLICIES": json.dumps(DOCUMENT)},
            auth_mode="server-key",
            endpoint_tokens=tuple(TOKENS.values()),
            cache=False,
        )
        surfaces = GatewaySurfaces(gateway, settings)
        endpoint = Endpoint(surfaces.current(), settings, current=surfaces.current, gateway=gateway)
        with LocalServer(make_handler(endpoint), port=0) as running:
            yield running
    finally:
        gateway.close()


def rpc(
    server: LocalServer, who: str, method: str, params: dict[str, Any] | None = None, *, query: str = "", modern=False
) -> httpx.Response:
    body: dict[str, Any] = {"jsonrpc": "2.0", "id": 3, "method": method}
    headers = {"Authorization": f"Bearer {TOKENS[who]}"}
    if modern:
        meta = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {}}
        params = {**(params or {}), "_meta": meta}
        headers.update({"MCP-Protocol-Version": MODERN, "Mcp-Method": method})
        if method == "tools/call":
            headers["Mcp-Name"] = params["name"]
    if params is not None:
        body["params"] = params
    return httpx.post(server.url + (f"?{query}" if query else ""), json=body, headers=headers, timeout=60)


def tool(server: LocalServer, who: str, name: str, arguments: dict[str, Any], query: str = "") -> dict[str, Any]:
    response = rpc(server, who, "tools/call", {"name": name, "arguments": arguments}, query=query)
    assert response.status_code == 200, response.text
    return response.json()  # type: ignore[no-any-return]


# What the "other" team must never be told of: the hidden servers' names and every tool of toy and flaky.
HIDDEN_NAMES = re.compile(
    r"(?<![\w-])("
    + "|".join(
        re.escape(n)
        for n in sorted(
            {*HIDDEN_SERVERS, WITHHELD, python_name(WITHHELD), "secret_plan", "flake_report"}
            | {f"toy.{t['name']}" for t in TOY_TOOLS},
            key=len,
            reverse=True,
        )
    )
    + r")(?![\w-])"
)


def told(answer: Any, asked: str = "") -> set[str]:
    """The hidden names an answer holds that its request did not."""
    return set(HIDDEN_NAMES.findall(json.dumps(answer))) - set(HIDDEN_NAMES.findall(asked))


def probes() -> list[tuple[str, dict[str, Any], str]]:
    """Every answer that names tools or servers, asked about the hidden ones: (tool, arguments, query)."""
    return [
        ("TOOL_LIST", {}, ""),
        ("TOOL_LIST", {"detail": "summary"}, "mode=code"),
        ("TOOL_LIST", {"category": "toy"}, ""),
        ("TOOL_LIST", {"category": "flaky"}, ""),
        ("TOOL_LIST", {"category": "broken"}, ""),
        ("TOOL_SEARCH", {"query": "secret plan nobody may know", "limit": 20}, ""),
        ("TOOL_SEARCH", {"query": "flake report of the week", "schemas": True}, "mode=code"),
        ("TOOL_GET", {"tool_name": WITHHELD}, ""),
        ("TOOL_GET", {"tool_name": [WITHHELD, "other.ping"]}, ""),
        ("TOOL_GET", {"tool_name": [WITHHELD, "flaky.flake_report"]}, "mode=code"),
        ("TOOL_GET", {"tool_name": WITHHELD, "format": "python"}, "mode=code"),
        ("TOOL_CALL", {"tool_name": WITHHELD, "arguments": {}}, ""),
        ("TOOL_CALL", {"tool_name": "flaky.flake_report", "arguments": {}}, ""),
        ("TOOL_EXECUTE", {"code": f"await {python_name(WITHHELD)}()"}, "mode=code"),
    ]


@pytest.mark.parametrize(("name", "arguments", "query"), probes())
def test_no_answer_names_a_hidden_servers_withheld_tool_or_unavailable_entry(
    served: LocalServer, name: str, arguments: dict[str, Any], query: str
) -> None:
    answer = tool(served, "other", name, arguments, query)
    assert not told(answer, json.dumps(arguments)), answer
    # The same request by an identity the policy does not narrow does name them (the probe asks after real things).
    if name == "TOOL_LIST" and not arguments:
        seen = tool(served, "all", name, arguments, query)["result"]["structuredContent"]
        assert [w["name"] for w in seen["withheld"]] == [WITHHELD]
        assert {d["server"] for d in seen["unavailable"]} == set(HIDDEN_SERVERS)


def test_tools_list_in_every_mode_names_no_hidden_tool(served: LocalServer) -> None:
    for mode in MODES:
        for modern in (False, True):
            listed = rpc(served, "other", "tools/list", query=f"mode={mode}", modern=modern)
            assert listed.status_code == 200 and not told(listed.json()), listed.text
    direct = rpc(served, "other", "tools/list", query="mode=direct").json()["result"]["tools"]
    assert [t["name"] for t in direct] == ["other.ping"]


def blank(answer: Any, name: str) -> str:
    return json.dumps(answer).replace(name, "NAME")


@pytest.mark.parametrize(
    ("name", "arguments", "query"),
    [
        ("TOOL_CALL", {"tool_name": "{name}", "arguments": {}}, ""),
        ("TOOL_GET", {"tool_name": "{name}"}, ""),
        ("TOOL_GET", {"tool_name": ["{name}", "other.ping"]}, "mode=code"),
        ("TOOL_EXECUTE", {"code": "await {python}()"}, "mode=code"),
        ("{name}", {}, "mode=direct"),
    ],
)
def test_a_hidden_withheld_tool_answers_byte_for_byte_as_one_that_does_not_exist(
    served: LocalServer, name: str, arguments: dict[str, Any], query: str
) -> None:
    """The same request for the hidden withheld tool and for a made-up name of the same server and length, in both
    protocol eras: the same status and the same bytes (results, `_meta`, error data) once each name is blanked."""
    made_up = "toy.secret_plam"
    assert len(made_up) == len(WITHHELD)

    def ask(tool_name: str, modern: bool) -> httpx.Response:
        fill = {"{name}": tool_name, "{python}": python_name(tool_name)}
        text = json.dumps(arguments)
        for hole, value in fill.items():
            text = text.replace(hole, value)
        called = fill.get(name, name)
        return rpc(served, "other", "tools/call", {"name": called, "arguments": json.loads(text)}, query=query,
                   modern=modern)  # fmt: skip

    for modern in (False, True):
        hidden, absent = ask(WITHHELD, modern), ask(made_up, modern)
        assert hidden.status_code == absent.status_code
        assert blank(hidden.json(), python_name(WITHHELD)).replace(WITHHELD, "NAME") == blank(
            absent.json(), python_name(made_up)
        ).replace(made_up, "NAME"), (hidden.text, absent.text)
        assert "withheld" not in hidden.text and "approve" not in hidden.text


def test_a_policy_that_shows_the_server_still_names_its_withheld_tool_and_its_outage(served: LocalServer) -> None:
    listed = tool(served, "toy", "TOOL_LIST", {})["result"]["structuredContent"]
    assert [w["name"] for w in listed["withheld"]] == [WITHHELD]
    assert {d["server"] for d in listed["unavailable"]} == set(HIDDEN_SERVERS)
    called = tool(served, "toy", "TOOL_CALL", {"tool_name": WITHHELD, "arguments": {}})["result"]
    assert called["isError"] and called["structuredContent"]["error"]["type"] == "ToolWithheld"
    down = tool(served, "toy", "TOOL_LIST", {"category": "broken"})["result"]["structuredContent"]["error"]
    assert "'broken' is unavailable" in down["message"]


def test_a_policy_naming_some_of_a_servers_tools_hides_its_new_withheld_one(served: LocalServer) -> None:
    """toy's tools by name: the new one, not among the names, is not named, though toy's others are shown (and
    flaky and broken, whose tools it does not name, are not named either)."""
    listed = tool(served, "toy_named", "TOOL_LIST", {})["result"]["structuredContent"]
    assert "withheld" not in listed and "unavailable" not in listed, listed
    assert "toy.echo" in json.dumps(listed)
    got = tool(served, "toy_named", "TOOL_GET", {"tool_name": WITHHELD})["result"]["structuredContent"]["error"]
    assert got["type"] == "UnknownTool", got


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    probe=st.sampled_from(probes()),
    spelling=st.sampled_from([WITHHELD, WITHHELD.upper(), "toy.secret", "secret_plan", "toy", "flaky", "broken"]),
    mode=st.sampled_from(["", "mode=code", "mode=direct", "mode=hybrid", "mode=auto"]),
    modern=st.booleans(),
)
def test_fuzzed_probes_never_learn_a_hidden_name(
    served: LocalServer, probe: tuple[str, dict[str, Any], str], spelling: str, mode: str, modern: bool
) -> None:
    """The probes with the hidden name spelt other ways, in other modes and both eras: no answer tells a hidden
    name its request did not hold."""
    name, arguments, _query = probe
    text = json.dumps(arguments).replace(WITHHELD, spelling)
    response = rpc(served, "other", "tools/call", {"name": name, "arguments": json.loads(text)}, query=mode,
                   modern=modern)  # fmt: skip
    assert response.status_code in (200, 400), response.text
    assert not told(response.json(), text), response.text


@pytest.mark.parametrize("category", ["toy", "flaky", "broken"])
def test_tool_list_of_a_hidden_server_answers_as_a_category_that_does_not_exist(
    served: LocalServer, category: str
) -> None:
    """Not "unavailable" (a down server the caller may not see), not its tools: what a made-up category gets."""
    made_up = "zq" + category[2:]
    for modern in (False, True):
        hidden = rpc(served, "other", "tools/call", {"name": "TOOL_LIST", "arguments": {"category": category}},
                     modern=modern)  # fmt: skip
        absent = rpc(served, "other", "tools/call", {"name": "TOOL_LIST", "arguments": {"category": made_up}},
                     modern=modern)  # fmt: skip
        assert hidden.status_code == absent.status_code == 200
        assert hidden.text.replace(category, "NAME") == absent.text.replace(made_up, "NAME"), hidden.text
