"""Per-identity policies over real HTTP on 127.0.0.1: what each identity may see and call, and how often.

The serve stack (LocalServer → the Lambda handler → Endpoint) in server-key mode holds one token per policy field;
each test asks every discovery answer (tools/list in every mode, TOOL_LIST, TOOL_SEARCH with its tail and
candidates, TOOL_GET, code-mode stubs) and finds no hidden tool; a call of a hidden tool gets the very answer a
tool that does not exist gets (compared with an endpoint whose catalog never had it); `?categories=` narrows only;
a rate gives 429 with Retry-After; malformed policies are refused at start with the identity's digest and field.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from oauth_issuer import LoopbackIssuer, loopback_issuer, rsa_key
from real_documents import REAL

from lambda_fn.handler import make_handler
from lambda_fn.local import LocalServer
from progressive_mcp.calls.stubs import python_name
from progressive_mcp.catalog import Catalog
from progressive_mcp.errors import ConfigError
from progressive_mcp.offline.sample_upstream import SampleUpstream
from progressive_mcp.policies import (
    IDENTIFIER_SHAPED,
    Caller,
    MemoryRateLimiter,
    Policy,
    load_policies,
    narrow_catalog,
    parse_policies,
)
from progressive_mcp.settings import Settings
from progressive_mcp.sources import load_catalog
from progressive_mcp.surfaces.auto import AUTO_META
from progressive_mcp.surfaces.endpoint import Endpoint

ROOT = Path(__file__).resolve().parent.parent
SERVER_KEY = "policy-tests-server-upstream-key"
MODES = ("progressive", "direct", "hybrid", "code")
MODERN = "2026-07-28"


def token(name: str) -> str:
    return f"{name}-endpoint-token-0123456789abcdef"


def digest(value: str) -> str:
    return "sha256:" + hashlib.sha256(value.encode()).hexdigest()[:16]


# One identity per policy field; each hides a known set of Alpha Vantage tools.
POLICIES: dict[str, dict[str, Any]] = {
    "categories": {"categories": ["forex", "crypto"]},
    "tools": {"tools": ["TIME_SERIES_*", "GLOBAL_QUOTE"]},
    "deny": {"deny": ["TIME_SERIES_*", "*_INTRADAY*"]},
    "read_only": {"read_only": True},
    "premium": {"premium": False},
    "everything": {},
    "rate": {"rate": 2},
}
TOKENS = {name: token(name) for name in POLICIES}
DOCUMENT = {"identities": [{"token": digest(TOKENS[name]), **fields} for name, fields in POLICIES.items()]}


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return load_catalog(None)


@pytest.fixture(scope="module")
def spotify() -> Catalog:
    if not REAL["spotify"].is_file():
        pytest.skip("../shared/openapi is absent")
    return load_catalog(REAL["spotify"])


@pytest.fixture(scope="module")
def spotify_server(spotify: Catalog, upstream: SampleUpstream) -> Iterator[LocalServer]:
    """Spotify's catalog (it has writes: Alpha Vantage's tools are all reads), for the read_only identity."""
    document = {"identities": [{"token": digest(TOKENS["read_only"]), "read_only": True}]}
    settings = policy_settings(upstream, document, spec_path=REAL["spotify"])
    with LocalServer(make_handler(Endpoint.from_settings(settings)), port=0) as running:
        yield running


@pytest.fixture
def served(request: pytest.FixtureRequest, who: str) -> tuple[LocalServer, Catalog]:
    """The server and catalog an identity's test runs on."""
    if who == "read_only":
        return request.getfixturevalue("spotify_server"), request.getfixturevalue("spotify")
    return request.getfixturevalue("server"), request.getfixturevalue("catalog")


class FrozenClock:
    """A clock standing in the middle of a minute, so a rate window never turns during a test."""

    now = 1_800_000_030.0

    def __call__(self) -> float:
        return self.now


def policy_settings(upstream: SampleUpstream, document: dict[str, Any], **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "upstream_url": upstream.url,
        "cache": False,
        "auth_mode": "server-key",
        "endpoint_tokens": tuple(TOKENS.values()),
        "api_key": SERVER_KEY,
        **overrides,
    }
    return Settings.from_env({"PMCP_POLICIES": json.dumps(document)}, **values)


@pytest.fixture(scope="module")
def server(upstream: SampleUpstream) -> Iterator[LocalServer]:
    endpoint = Endpoint(
        Endpoint.from_settings(policy_settings(upstream, DOCUMENT)).surface,
        policy_settings(upstream, DOCUMENT),
        rate_limiter=MemoryRateLimiter(clock=FrozenClock()),
    )
    with LocalServer(make_handler(endpoint), port=0) as running:
        yield running


@pytest.fixture(scope="module")
def without_fx(upstream: SampleUpstream) -> Iterator[LocalServer]:
    """An endpoint whose catalog never had the FX tools (PMCP_EXCLUDE), nor any policy: the reference answers."""
    settings = Settings.from_env(
        {},
        upstream_url=upstream.url,
        cache=False,
        auth_mode="server-key",
        endpoint_tokens=(TOKENS["deny"],),
        api_key=SERVER_KEY,
        exclude=("FX_*",),
    )
    with LocalServer(make_handler(Endpoint.from_settings(settings)), port=0) as running:
        yield running


@pytest.fixture(scope="module")
def hiding_fx(upstream: SampleUpstream) -> Iterator[LocalServer]:
    """The same catalog with the FX tools hidden by a policy."""
    document = {"identities": [{"token": digest(TOKENS["deny"]), "deny": ["FX_*"]}]}
    settings = policy_settings(upstream, document, endpoint_tokens=(TOKENS["deny"],))
    with LocalServer(make_handler(Endpoint.from_settings(settings)), port=0) as running:
        yield running


def rpc(
    server: LocalServer,
    who: str,
    method: str,
    params: dict[str, Any] | None = None,
    *,
    query: str = "",
    modern: bool = False,
) -> httpx.Response:
    body: dict[str, Any] = {"jsonrpc": "2.0", "id": 7, "method": method}
    headers = {"Authorization": f"Bearer {TOKENS.get(who, who)}"}
    if modern:
        params = {
            **(params or {}),
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": MODERN,
                "io.modelcontextprotocol/clientCapabilities": {},
            },
        }
        headers.update({"MCP-Protocol-Version": MODERN, "Mcp-Method": method})
        if method == "tools/call":
            headers["Mcp-Name"] = params["name"]
    if params is not None:
        body["params"] = params
    return httpx.post(server.url + (f"?{query}" if query else ""), json=body, headers=headers, timeout=60)


def call(server: LocalServer, who: str, tool: str, arguments: dict[str, Any], *, query: str = "") -> Any:
    response = rpc(server, who, "tools/call", {"name": tool, "arguments": arguments}, query=query)
    assert response.status_code == 200, response.text
    return response.json()


def structured(answer: Any) -> dict[str, Any]:
    assert "result" in answer, answer
    result: dict[str, Any] = answer["result"]
    assert result["isError"] is False, result
    return result["structuredContent"]  # type: ignore[no-any-return]


def visible(catalog: Catalog, who: str) -> set[str]:
    policy = parse_policies({"identities": [{"token": digest(TOKENS[who]), **POLICIES[who]}]}).entries[0].policy
    return {t.name for t in narrow_catalog(catalog, policy).tools}


def hidden(catalog: Catalog, who: str) -> set[str]:
    return {t.name for t in catalog.tools} - visible(catalog, who)


FIELDS = ("categories", "tools", "deny", "read_only", "premium")


# --- every discovery answer -----------------------------------------------------------------------------------


@pytest.mark.parametrize("who", FIELDS)
def test_each_field_hides_some_tools_and_keeps_others(served: tuple[LocalServer, Catalog], who: str) -> None:
    catalog = served[1]
    assert hidden(catalog, who), who
    assert visible(catalog, who), who


@pytest.mark.parametrize("who", FIELDS)
def test_hidden_tools_are_absent_from_tools_list_in_every_mode(served: tuple[LocalServer, Catalog], who: str) -> None:
    server, catalog = served
    secret = hidden(catalog, who)
    for mode in MODES:
        for modern in (False, True):
            response = rpc(server, who, "tools/list", query=f"mode={mode}", modern=modern)
            assert response.status_code == 200, response.text
            names = {t["name"] for t in response.json()["result"]["tools"]}
            if mode in ("direct", "hybrid"):
                assert names - {"TOOL_LIST", "TOOL_SEARCH", "TOOL_GET", "TOOL_CALL"} == visible(catalog, who)
            assert not any(_named(name, response.text) for name in secret), (who, mode)


@pytest.mark.parametrize("who", FIELDS)
def test_tool_list_shows_only_visible_tools(served: tuple[LocalServer, Catalog], who: str) -> None:
    server, catalog = served
    for detail in ("names", "summary"):
        answer = call(server, who, "TOOL_LIST", {"detail": detail})
        listed = {t if isinstance(t, str) else t["name"] for g in structured(answer)["categories"] for t in g["tools"]}
        assert listed == visible(catalog, who)
        assert not any(_named(name, json.dumps(answer)) for name in hidden(catalog, who))


@pytest.mark.parametrize("who", FIELDS)
def test_tool_search_for_a_hidden_tool_never_names_it(server: LocalServer, catalog: Catalog, who: str) -> None:
    """Its exact name, its title and its summary as queries: no result, tail line or candidate is a hidden tool."""
    secret = hidden(catalog, who)
    for name in sorted(secret)[:6]:
        tool = catalog.get(name)
        for query in (name, tool.title, tool.summary):
            for mode in ("progressive", "code"):
                answer = call(
                    server, who, "TOOL_SEARCH", {"query": query, "limit": 20, "schemas": True}, query=f"mode={mode}"
                )
                found = structured(answer)
                text = json.dumps({k: v for k, v in found.items() if k != "query"})  # the query is echoed
                assert not any(_named(hidden_name, text) for hidden_name in secret), (who, query)
                assert not shown_names(found) & secret, (who, query)


def shown_names(search: dict[str, Any]) -> set[str]:
    """Every tool a TOOL_SEARCH answer names: its results, its tail's and its candidates' `name: summary` lines."""
    lines = "\n".join(search.get(key, "") for key in ("more", "candidates")).splitlines()
    return {r["name"] for r in search["results"]} | {line.split(": ", 1)[0] for line in lines if line}


@pytest.mark.parametrize("who", FIELDS)
def test_tool_get_and_stubs_of_a_hidden_tool_are_unknown(served: tuple[LocalServer, Catalog], who: str) -> None:
    server, catalog = served
    secret = sorted(hidden(catalog, who))
    for name in secret[:5]:
        for mode in ("progressive", "code"):
            answer = call(server, who, "TOOL_GET", {"tool_name": name}, query=f"mode={mode}")
            assert answer["result"]["isError"] is True
            assert answer["result"]["structuredContent"]["error"]["type"] == "UnknownTool"
    # Stubs of everything visible: no hidden tool is named (as a function, in a docstring or a type).
    shown = sorted(visible(catalog, who))
    for start in range(0, len(shown), 10):
        answer = call(server, who, "TOOL_GET", {"tool_name": shown[start : start + 10]}, query="mode=code")
        stubs = structured(answer)["stubs"]
        assert not any(_named(name, stubs) or _named(python_name(name), stubs) for name in secret)


def test_premium_argument_values_are_gone_and_refused(server: LocalServer) -> None:
    answer = call(server, "premium", "TOOL_GET", {"tool_name": "TIME_SERIES_DAILY"})
    schema = structured(answer)["tools"][0]["inputSchema"]
    assert schema["properties"]["outputsize"]["enum"] == ["compact"]
    assert "entitlement" not in schema["properties"]  # its values are all premium
    refused = call(
        server,
        "premium",
        "TOOL_CALL",
        {"tool_name": "TIME_SERIES_DAILY", "arguments": {"symbol": "IBM", "outputsize": "full"}},
    )
    assert refused["result"]["isError"] is True
    assert refused["result"]["structuredContent"]["error"]["type"] == "InvalidArguments"
    allowed = call(server, "everything", "TOOL_GET", {"tool_name": "TIME_SERIES_DAILY"})
    assert "full" in structured(allowed)["tools"][0]["inputSchema"]["properties"]["outputsize"]["enum"]


# --- calls outside the policy --------------------------------------------------------------------------------


def test_a_visible_tool_runs(server: LocalServer) -> None:
    answer = call(
        server,
        "categories",
        "TOOL_CALL",
        {"tool_name": "FX_DAILY", "arguments": {"from_symbol": "EUR", "to_symbol": "USD"}},
    )
    assert structured(answer)["tool"] == "FX_DAILY"


CALLS = [
    ("tools/call", {"name": "FX_DAILY", "arguments": {"from_symbol": "EUR", "to_symbol": "USD"}}, "mode=direct"),
    ("tools/call", {"name": "FX_DAILY", "arguments": {"from_symbol": "EUR", "to_symbol": "USD"}}, "mode=hybrid"),
    (
        "tools/call",
        {"name": "TOOL_CALL", "arguments": {"tool_name": "FX_DAILY", "arguments": {"from_symbol": "EUR"}}},
        "",
    ),
    ("tools/call", {"name": "TOOL_CALL", "arguments": {"tool_name": "fx_daily", "arguments": {}}}, ""),
    ("tools/call", {"name": "TOOL_GET", "arguments": {"tool_name": "FX_DAILY"}}, ""),
    ("tools/call", {"name": "TOOL_GET", "arguments": {"tool_name": ["FX_DAILY", "FX_WEEKLY"]}}, ""),
    ("tools/call", {"name": "TOOL_GET", "arguments": {"tool_name": ["FX_DAILY", "GLOBAL_QUOTE"]}}, ""),
    ("tools/call", {"name": "TOOL_GET", "arguments": {"tool_name": "FX_DAILY"}}, "mode=code"),
    ("tools/call", {"name": "TOOL_LIST", "arguments": {"category": "forex"}}, ""),
    (
        "tools/call",
        {"name": "TOOL_EXECUTE", "arguments": {"code": "return await FX_DAILY(from_symbol='EUR', to_symbol='USD')"}},
        "mode=code",
    ),
    (
        "tools/call",
        {"name": "TOOL_EXECUTE", "arguments": {"code": "return await fx_daily(from_symbol='EUR', to_symbol='USD')"}},
        "mode=code",
    ),
]


@pytest.mark.parametrize(("method", "params", "query"), CALLS)
def test_a_call_outside_the_policy_answers_as_a_tool_that_does_not_exist(
    hiding_fx: LocalServer, without_fx: LocalServer, method: str, params: dict[str, Any], query: str
) -> None:
    """Byte for byte what an endpoint whose catalog has no FX tool answers (FX is also a category there: the
    currency exchange rate tool keeps it alive on both)."""
    for modern in (False, True):
        hidden_answer = rpc(hiding_fx, "deny", method, params, query=query, modern=modern)
        absent_answer = rpc(without_fx, "deny", method, params, query=query, modern=modern)
        assert hidden_answer.status_code == absent_answer.status_code
        assert _without_versions(hidden_answer.json()) == _without_versions(absent_answer.json()), params
        assert "FX_DAILY" not in json.dumps(
            hidden_answer.json().get("result", {}).get("structuredContent", {}).get("suggestions", [])
        )


def _without_versions(answer: Any) -> Any:
    """The answer with catalog versions and content hashes blanked (they digest the tools each catalog holds)."""
    text = json.dumps(answer)
    for key in ("catalog_version", "content_hash"):
        text = _blank(text, key)
    return json.loads(text)


def _blank(text: str, key: str) -> str:
    import re

    return re.sub(rf'(\\?"{key}\\?":\s*\\?")[0-9a-f]+', r"\1x", text)


def test_a_hidden_category_is_unknown_and_the_url_only_narrows(server: LocalServer, catalog: Catalog) -> None:
    # ?categories= inside the policy: narrower still.
    answer = call(server, "categories", "TOOL_LIST", {}, query="categories=forex")
    assert [g["name"] for g in structured(answer)["categories"]] == ["forex"]
    # A category the policy hides is refused as one that does not exist, and the error names only visible ones.
    hidden_category = rpc(server, "categories", "tools/list", query="categories=stocks")
    missing_category = rpc(server, "categories", "tools/list", query="categories=nonesuch")
    assert hidden_category.status_code == missing_category.status_code == 400
    assert hidden_category.json()["error"]["message"].replace("stocks", "X") == missing_category.json()["error"][
        "message"
    ].replace("nonesuch", "X")
    assert "stocks" not in hidden_category.json()["error"]["message"].split("offers")[1]
    # Asking TOOL_LIST for a hidden category: unknown, like a made-up one.
    answer = call(server, "categories", "TOOL_LIST", {"category": "stocks"})
    assert answer["result"]["isError"] is True
    assert "stocks" not in answer["result"]["structuredContent"]["error"]["message"].split("categories:")[1]


def test_tools_list_narrowed_by_url_in_direct_mode(server: LocalServer, catalog: Catalog) -> None:
    response = rpc(server, "tools", "tools/list", query="mode=direct&categories=stocks")
    names = {t["name"] for t in response.json()["result"]["tools"]}
    assert names == {n for n in visible(catalog, "tools") if catalog.get(n).category == "stocks"}


def test_auto_decides_on_the_tools_a_policy_leaves(server: LocalServer, catalog: Catalog) -> None:
    """`?mode=auto` chooses on what this identity may see: the whole catalog is progressive for everyone, but the
    forex-and-crypto identity's small remainder goes direct, listing only its own tools."""
    everything = rpc(server, "everything", "tools/list", query="mode=auto").json()["result"]
    assert everything["_meta"][AUTO_META]["mode"] == "progressive"
    narrow = rpc(server, "categories", "tools/list", query="mode=auto").json()["result"]
    assert narrow["_meta"][AUTO_META]["mode"] == "direct", narrow["_meta"]
    assert {t["name"] for t in narrow["tools"]} == visible(catalog, "categories")


def test_an_identity_without_an_entry_is_refused_by_default(upstream: SampleUpstream) -> None:
    stranger = token("stranger")
    settings = policy_settings(upstream, DOCUMENT, endpoint_tokens=(*TOKENS.values(), stranger))
    with LocalServer(make_handler(Endpoint.from_settings(settings)), port=0) as running:
        response = rpc(running, stranger, "tools/list")
        assert response.status_code == 403
        assert stranger not in response.text
        everyone = Settings.from_env(
            {"PMCP_POLICIES": json.dumps({**DOCUMENT, "default": {"categories": ["forex"]}})},
            **{k: getattr(settings, k) for k in ("upstream_url", "auth_mode", "endpoint_tokens", "api_key")},
        )
    with LocalServer(make_handler(Endpoint.from_settings(everyone)), port=0) as running:
        answer = call(running, stranger, "TOOL_LIST", {})
        assert [g["name"] for g in structured(answer)["categories"]] == ["forex"]


# --- rate -----------------------------------------------------------------------------------------------------


def test_past_its_rate_an_identity_gets_429_with_retry_after(server: LocalServer) -> None:
    statuses = [rpc(server, "rate", "tools/list").status_code for _ in range(3)]
    assert statuses == [200, 200, 429]
    refused = rpc(server, "rate", "ping")
    assert refused.status_code == 429
    assert refused.headers["retry-after"] == "30"  # the frozen clock stands 30 s into its minute
    assert rpc(server, "everything", "tools/list").status_code == 200  # others are not slowed


def test_the_memory_rate_limiter_opens_a_new_window_each_minute() -> None:
    clock = FrozenClock()
    limiter = MemoryRateLimiter(clock=clock)
    assert [limiter.hit("a", 2) for _ in range(3)] == [None, None, 30.0]
    assert limiter.hit("b", 2) is None
    clock.now += 30
    assert limiter.hit("a", 2) is None


# --- policies refused at start --------------------------------------------------------------------------------

BAD: list[tuple[dict[str, Any], list[str]]] = [
    ({"identities": [{"token": TOKENS["tools"]}]}, ["identities[0]", "token", "sha256"]),
    ({"identities": [{"token": "sha256:abc"}]}, ["identities[0]", "token"]),
    ({"identities": [{"token": digest(TOKENS["tools"]), "rate": 0}]}, [digest(TOKENS["tools"]), "rate"]),
    ({"identities": [{"token": digest(TOKENS["tools"]), "rate": "60"}]}, [digest(TOKENS["tools"]), "rate"]),
    ({"identities": [{"token": digest(TOKENS["tools"]), "read_only": "yes"}]}, [digest(TOKENS["tools"]), "read_only"]),
    ({"identities": [{"token": digest(TOKENS["tools"]), "premium": 0}]}, [digest(TOKENS["tools"]), "premium"]),
    ({"identities": [{"token": digest(TOKENS["tools"]), "tools": [3]}]}, [digest(TOKENS["tools"]), "tools"]),
    ({"identities": [{"token": digest(TOKENS["tools"]), "deny": ""}]}, [digest(TOKENS["tools"]), "deny"]),
    (
        {"identities": [{"token": digest(TOKENS["tools"]), "categories": ["nonesuch"]}]},
        [digest(TOKENS["tools"]), "categories", "nonesuch"],
    ),
    ({"identities": [{"token": digest(TOKENS["tools"]), "colour": "red"}]}, [digest(TOKENS["tools"]), "colour"]),
    (
        {"identities": [{"token": digest("not-a-configured-token-at-all-000")}]},
        [digest("not-a-configured-token-at-all-000"), "token"],
    ),
    ({"identities": [{"token": digest(TOKENS["tools"]), "subject": "x"}]}, ["identities[0]", "exactly one"]),
    ({"identities": [{"subject": ""}]}, ["identities[0]", "subject"]),
    ({"identities": {}}, ["identities"]),
    ({"default": "maybe"}, ["default"]),
    ({"default": {"token": digest(TOKENS["tools"])}}, ["default", "token"]),
    ({"identity": []}, ["identity"]),
]


@pytest.mark.parametrize(("document", "words"), BAD)
def test_malformed_policies_are_refused_at_start(
    upstream: SampleUpstream, document: dict[str, Any], words: list[str]
) -> None:
    with pytest.raises(ConfigError) as raised:
        Endpoint.from_settings(policy_settings(upstream, document))
    message = str(raised.value)
    for word in words:
        assert word in message, (word, message)
    for value in TOKENS.values():
        assert value not in message


def test_policies_need_an_auth_mode_that_names_identities(upstream: SampleUpstream) -> None:
    with pytest.raises(ConfigError, match="server-key or oauth"):
        Endpoint.from_settings(Settings.from_env({"PMCP_POLICIES": json.dumps(DOCUMENT)}, upstream_url=upstream.url))


def test_a_policies_file_in_yaml(tmp_path: Path) -> None:
    path = tmp_path / "policies.yaml"
    path.write_text(
        "default: deny\nidentities:\n"
        f"  - token: {digest(TOKENS['tools'])}\n    name: markets\n    categories: [forex]\n    rate: 60\n"
        "  - group: analysts\n    read_only: true\n"
    )
    policies = load_policies({"PMCP_POLICIES_FILE": str(path)})
    assert policies is not None
    tools_token = hashlib.sha256(TOKENS["tools"].encode()).hexdigest()
    policy = policies.match(Caller(token_digest=tools_token))
    assert policy is not None and policy.categories == frozenset({"forex"}) and policy.rate == 60
    assert policies.match(Caller(groups=frozenset({"analysts", "x"}))) == Policy(
        label="identities[1] (group 'analysts')", read_only=True
    )
    assert policies.match(Caller(subject="someone")) is None
    with pytest.raises(ConfigError, match="not both"):
        load_policies({"PMCP_POLICIES_FILE": str(path), "PMCP_POLICIES": "{}"})
    path.write_text("identities: [")
    with pytest.raises(ConfigError, match="PMCP_POLICIES_FILE"):
        load_policies({"PMCP_POLICIES_FILE": str(path)})


@pytest.mark.slow
def test_the_cli_refuses_a_malformed_policy_at_start(tmp_path: Path) -> None:
    bad = {"identities": [{"token": digest(TOKENS["tools"]), "rate": -1}]}
    env = {
        "PATH": "/usr/bin:/bin",
        "PMCP_POLICIES": json.dumps(bad),
        "PMCP_AUTH_MODE": "server-key",
        "PMCP_ENDPOINT_TOKENS": TOKENS["tools"],
        "ALPHAVANTAGE_API_KEY": SERVER_KEY,
        "HOME": str(tmp_path),
    }
    done = subprocess.run(
        [sys.executable, "-m", "progressive_mcp.cli", "serve", "--port", "0"],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0
    assert digest(TOKENS["tools"]) in done.stderr and "rate" in done.stderr
    assert TOKENS["tools"] not in done.stderr + done.stdout


# --- the mechanism on every real document ------------------------------------------------------------------------


# Spotify's in make test, the rest in test-slow (Stripe's alone costs ~11 CPU-s).
@pytest.mark.parametrize(
    "document", [d if d == "spotify" else pytest.param(d, marks=pytest.mark.slow) for d in sorted(REAL)]
)
def test_read_only_and_deny_on_every_real_document(document: str) -> None:
    """read_only keeps exactly the tools with readOnlyHint; a deny pattern hides its tools; no kept tool's text
    names a hidden one."""
    if not REAL[document].is_file():
        pytest.skip("../shared/openapi is absent")
    catalog = load_catalog(REAL[document])
    reads = {t.name for t in catalog.tools if t.annotations.get("readOnlyHint")}
    narrowed = narrow_catalog(catalog, Policy(read_only=True))
    assert {t.name for t in narrowed.tools} == reads
    assert set(narrowed.categories) == {catalog.get(n).category for n in reads}
    first = catalog.tools[0].name
    denied = narrow_catalog(catalog, Policy(deny=(first,)))
    assert first not in denied and len(denied) == len(catalog) - 1
    for policy_narrowed in (narrowed, denied):
        secret = {t.name for t in catalog.tools} - {t.name for t in policy_narrowed.tools}
        for tool in policy_narrowed.tools:
            text = json.dumps(
                [tool.summary, tool.description, dict(tool.input_schema.get("properties") or {})], default=str
            )
            assert not any(_named(name, text) for name in secret), tool.name


def _named(name: str, text: str) -> bool:
    import re

    # One-word names (MACD, VWAP) are also the domain's words: a title may say "MACD" (see IDENTIFIER_SHAPED).
    shaped = IDENTIFIER_SHAPED.fullmatch(name) is not None
    return shaped and re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", text) is not None


# --- OAuth identities: subject, group claim, scope ------------------------------------------------------------------


@pytest.fixture(scope="module")
def issuer() -> Iterator[LoopbackIssuer]:
    with loopback_issuer(rsa_key("rsa-1")) as running:
        yield running


OAUTH_POLICIES = {
    "groups_claim": "cognito:groups",
    "identities": [
        {"subject": "alice", "categories": ["forex"]},
        {"group": "analysts", "tools": ["GLOBAL_QUOTE", "SYMBOL_SEARCH"]},
        {"scope": "mcp:crypto", "categories": ["crypto"], "rate": 1},
    ],
}


@pytest.fixture(scope="module")
def oauth_server(upstream: SampleUpstream, issuer: LoopbackIssuer) -> Iterator[LocalServer]:
    settings = Settings.from_env(
        {"PMCP_POLICIES": json.dumps(OAUTH_POLICIES)},
        upstream_url=upstream.url,
        cache=False,
        auth_mode="oauth",
        oauth_issuer=issuer.url,
        api_key=SERVER_KEY,
    )
    endpoint = Endpoint(
        Endpoint.from_settings(settings).surface, settings, rate_limiter=MemoryRateLimiter(clock=FrozenClock())
    )
    with LocalServer(make_handler(endpoint), port=0) as running:
        yield running


def listed(server: LocalServer, access_token: str) -> httpx.Response:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "TOOL_LIST", "arguments": {}}}
    return httpx.post(server.url, json=body, headers={"Authorization": f"Bearer {access_token}"}, timeout=60)


def tool_names(response: httpx.Response) -> set[str]:
    assert response.status_code == 200, response.text
    groups = structured(response.json())["categories"]
    return {name for group in groups for name in group["tools"]}


def test_oauth_subject_group_and_scope_each_choose_a_policy(
    oauth_server: LocalServer, issuer: LoopbackIssuer, catalog: Catalog
) -> None:
    url = oauth_server.url
    alice = issuer.mint(url, sub="alice", **{"cognito:groups": ["analysts"]})  # the subject's entry comes first
    assert tool_names(listed(oauth_server, alice)) == {t.name for t in catalog.tools if t.category == "forex"}
    bob = issuer.mint(url, sub="bob", **{"cognito:groups": ["traders", "analysts"]})
    assert tool_names(listed(oauth_server, bob)) == {"GLOBAL_QUOTE", "SYMBOL_SEARCH"}
    carol = issuer.mint(url, sub="carol", scope="openid mcp:crypto")
    assert tool_names(listed(oauth_server, carol)) == {t.name for t in catalog.tools if t.category == "crypto"}
    refused = listed(oauth_server, carol)  # rate 1 a minute
    assert refused.status_code == 429 and refused.headers["retry-after"] == "30"
    # Each caller has its own count: another subject with the same scope is not slowed by carol.
    dave = issuer.mint(url, sub="dave", scope="mcp:crypto")
    assert listed(oauth_server, dave).status_code == 200
    stranger = issuer.mint(url, sub="eve", scope="mcp:tools")
    assert listed(oauth_server, stranger).status_code == 403


# --- the official SDK client -------------------------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("protocol", ["legacy", "2026-07-28"])
@pytest.mark.parametrize("mode", MODES)
async def test_the_sdk_client_sees_only_the_policy_tools(
    server: LocalServer, catalog: Catalog, protocol: str, mode: str
) -> None:
    """tools/list and a discovery call through the MCP Python SDK's streamable HTTP client, in both eras."""
    headers = {"Authorization": f"Bearer {TOKENS['categories']}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=60) as http,
        Client(streamable_http_client(f"{server.url}?mode={mode}", http_client=http), mode=protocol) as client,
    ):
        tools = await client.list_tools()
        names = {t.name for t in tools.tools}
        shown = visible(catalog, "categories")
        if mode in ("direct", "hybrid"):
            assert shown <= names
        text = json.dumps([t.model_dump(by_alias=True, exclude_none=True) for t in tools.tools])
        assert not any(_named(name, text) for name in hidden(catalog, "categories"))
        if mode != "direct":
            found = await client.call_tool("TOOL_LIST", {"detail": "names"})
            assert found.structured_content is not None
            listed_names = {n for g in found.structured_content["categories"] for n in g["tools"]}
            assert listed_names == shown
            outside = await client.call_tool("TOOL_GET", {"tool_name": "GLOBAL_QUOTE"})
            assert outside.is_error


# --- built once per policy and variant -------------------------------------------------------------------------


def test_each_policy_surface_is_built_once_per_variant(
    upstream: SampleUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The requests of an identity share one narrowed catalog, whatever variant they ask for; nothing is narrowed
    again per request, and a policy that hides nothing is served by the default surface."""
    import progressive_mcp.surfaces.endpoint as endpoint_module
    from progressive_mcp.surfaces.endpoint import HttpRequest

    narrowed: list[Policy] = []
    real = endpoint_module.narrow_catalog

    def counting(catalog: Catalog, policy: Policy) -> Catalog:
        narrowed.append(policy)
        return real(catalog, policy)

    monkeypatch.setattr(endpoint_module, "narrow_catalog", counting)
    endpoint = Endpoint.from_settings(policy_settings(upstream, DOCUMENT))

    def ask(who: str, query: str = "") -> None:
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        headers = {"Authorization": f"Bearer {TOKENS[who]}"}
        assert endpoint.handle(HttpRequest.build("POST", "/mcp", query=query, headers=headers, body=body)).status == 200

    for _ in range(3):
        for query in ("", "mode=direct", "mode=code&categories=forex"):
            ask("categories", query)
            ask("everything", query)
    assert len(narrowed) == 1  # "everything" hides nothing: the default surface serves it
    ask("deny")
    ask("deny", "mode=direct")
    assert len(narrowed) == 2


# Unblanked: the reference endpoint serves the very catalog the policy leaves, so even catalog versions, content
# hashes and `_meta` must agree; the one difference allowed is none.
HIDDEN_ROUTES: list[tuple[str, dict[str, Any], str]] = [
    ("tools/call", {"name": "FX_DAILY", "arguments": {"from_symbol": "EUR", "to_symbol": "USD"}}, "mode=direct"),
    ("tools/call", {"name": "TOOL_CALL", "arguments": {"tool_name": "FX_DAILY", "arguments": {}}}, ""),
    ("tools/call", {"name": "TOOL_GET", "arguments": {"tool_name": ["FX_DAILY", "FX_WEEKLY"]}}, ""),
    ("tools/call", {"name": "TOOL_GET", "arguments": {"tool_name": "FX_DAILY", "format": "python"}}, "mode=code"),
    ("tools/call", {"name": "TOOL_SEARCH", "arguments": {"query": "FX_DAILY", "limit": 20}}, ""),
    ("tools/call", {"name": "TOOL_EXECUTE", "arguments": {"code": "await FX_DAILY(from_symbol='EUR')"}}, "mode=code"),
    ("tools/list", {}, "mode=hybrid"),
]


@pytest.mark.parametrize(("method", "params", "query"), HIDDEN_ROUTES)
def test_a_hidden_tool_and_an_absent_one_take_one_code_path_to_the_same_bytes(
    upstream: SampleUpstream, method: str, params: dict[str, Any], query: str
) -> None:
    """The same request by a caller whose policy hides FX_DAILY and FX_WEEKLY, and by a caller of an endpoint that
    serves, without any policy, exactly the catalog that policy leaves: byte-identical HTTP bodies and statuses in
    both protocol eras, `_meta`, catalog versions and error data included."""
    from progressive_mcp.surfaces.endpoint import HttpRequest
    from progressive_mcp.surfaces.surface import Surface

    document = {"identities": [{"token": digest(TOKENS["deny"]), "deny": ["FX_DAILY", "FX_WEEKLY"]}]}
    hiding = Endpoint.from_settings(policy_settings(upstream, document, endpoint_tokens=(TOKENS["deny"],)))
    policy = parse_policies(document).entries[0].policy
    plain = Settings.from_env(
        {}, upstream_url=upstream.url, cache=False, auth_mode="server-key", endpoint_tokens=(TOKENS["deny"],),
        api_key=SERVER_KEY,
    )  # fmt: skip
    absent = Endpoint(Surface(narrow_catalog(load_catalog(None), policy), upstream=hiding.surface.upstream), plain)

    def ask(endpoint: Endpoint, modern: bool) -> tuple[int, bytes]:
        body: dict[str, Any] = {"jsonrpc": "2.0", "id": 5, "method": method, "params": dict(params)}
        headers = {"Authorization": f"Bearer {TOKENS['deny']}", "Content-Type": "application/json"}
        if modern:
            body["params"]["_meta"] = {
                "io.modelcontextprotocol/protocolVersion": MODERN,
                "io.modelcontextprotocol/clientCapabilities": {},
            }
            headers.update({"MCP-Protocol-Version": MODERN, "Mcp-Method": method})
            if method == "tools/call":
                headers["Mcp-Name"] = params["name"]
        response = endpoint.handle(
            HttpRequest.build("POST", "/mcp", query=query, headers=headers, body=json.dumps(body))
        )
        return response.status, response.body

    for modern in (False, True):
        assert ask(hiding, modern) == ask(absent, modern), (method, params, query, modern)
