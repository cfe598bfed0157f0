"""The `auto` surface: direct when the tools a request may see cost at most PMCP_AUTO_DIRECT_TOKENS in a direct
tools/list, else progressive (or code); decided once per variant and reported in `_meta` and a log line."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
from real_documents import REAL

from progressive_mcp.catalog import Catalog
from progressive_mcp.errors import ConfigError
from progressive_mcp.report import tools_list_tokens
from progressive_mcp.settings import Settings
from progressive_mcp.sources import load_catalog
from progressive_mcp.surfaces.auto import AUTO_META, DEFAULT_AUTO_DIRECT_TOKENS, choose_mode
from progressive_mcp.surfaces.endpoint import Endpoint, HttpRequest
from progressive_mcp.surfaces.metatools import META_TOOL_NAMES
from progressive_mcp.surfaces.surface import Surface

CODE_TOOLS = ["TOOL_LIST", "TOOL_SEARCH", "TOOL_GET", "TOOL_EXECUTE"]
INITIALIZE = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
MODERN_HEADERS = {"MCP-Protocol-Version": "2026-07-28"}
MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return load_catalog()


@pytest.fixture(scope="module")
def endpoint(catalog: Catalog) -> Endpoint:
    settings = Settings.from_env({}, mode="auto", cache=False)
    return Endpoint(Surface.from_settings(settings, catalog=catalog), settings)


def rpc(endpoint: Endpoint, method: str, query: str = "", params: dict[str, Any] | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": 1, "method": method}
    headers: dict[str, str] = {}
    if method in ("server/discover",) or (params and "_meta" in params):
        headers = {**MODERN_HEADERS, "Mcp-Method": method}
    if params is not None:
        message["params"] = params
    response = endpoint.handle(
        HttpRequest.build("POST", "/mcp", query=query, headers=headers, body=json.dumps(message))
    )
    body: dict[str, Any] = response.json()
    body["status"] = response.status
    return body


def tool_names(answer: dict[str, Any]) -> list[str]:
    return [t["name"] for t in answer["result"]["tools"]]


# -- the rule ---------------------------------------------------------------------------------------------------


def test_the_choice_is_direct_up_to_the_threshold_and_the_fallback_past_it(catalog: Catalog) -> None:
    forex = [t.definition() for t in catalog.in_categories(frozenset({"forex"}))]
    cost = choose_mode(forex).direct_tokens
    assert choose_mode(forex, threshold=cost).mode == "direct"  # at most: the threshold itself is direct
    assert choose_mode(forex, threshold=cost - 1).mode == "progressive"
    assert choose_mode(forex, threshold=cost - 1, fallback="code").mode == "code"
    assert choose_mode([], threshold=10_000).mode == "progressive"  # no tool to show: nothing to list directly


def test_auto_counts_as_the_token_report_does(catalog: Catalog) -> None:
    """The cost auto decides on is the figure `progressive-mcp tokens` shows for a direct tools/list."""
    for categories in (frozenset({"forex"}), frozenset({"forex", "crypto"}), None):
        auto = Surface(catalog, mode="auto", categories=categories).auto
        assert auto is not None
        assert auto.direct_tokens == tools_list_tokens(Surface(catalog, mode="direct", categories=categories))


# -- over the endpoint ------------------------------------------------------------------------------------------


def test_a_small_category_is_direct_and_the_whole_catalog_progressive(endpoint: Endpoint, catalog: Catalog) -> None:
    forex = rpc(endpoint, "tools/list", "categories=forex")
    assert sorted(tool_names(forex)) == sorted(t.name for t in catalog.in_categories(frozenset({"forex"})))
    meta = forex["result"]["_meta"][AUTO_META]
    assert meta["mode"] == "direct" and meta["tools"] == len(tool_names(forex))
    assert meta["directTokens"] <= meta["threshold"] == DEFAULT_AUTO_DIRECT_TOKENS

    whole = rpc(endpoint, "tools/list")
    assert tool_names(whole) == list(META_TOOL_NAMES)
    assert whole["result"]["_meta"][AUTO_META]["mode"] == "progressive"
    assert whole["result"]["_meta"][AUTO_META]["directTokens"] > DEFAULT_AUTO_DIRECT_TOKENS

    code = rpc(endpoint, "tools/list", "mode=auto&fallback=code")
    assert tool_names(code) == CODE_TOOLS
    assert code["result"]["_meta"][AUTO_META]["mode"] == "code"
    # The fallback applies past the threshold only: a small category stays direct.
    assert (
        rpc(endpoint, "tools/list", "mode=auto&fallback=code&categories=forex")["result"]["tools"]
        == forex["result"]["tools"]
    )


def test_initialize_and_discover_report_the_choice(endpoint: Endpoint) -> None:
    initialize = rpc(endpoint, "initialize", "categories=forex", INITIALIZE)["result"]
    assert initialize["_meta"][AUTO_META]["mode"] == "direct"
    assert "call it directly" in initialize["instructions"]
    discover = rpc(endpoint, "server/discover", "", {"_meta": MODERN_META})["result"]
    assert discover["_meta"][AUTO_META]["mode"] == "progressive"
    assert "io.modelcontextprotocol/serverInfo" in discover["_meta"]
    listed = rpc(endpoint, "tools/list", "categories=forex", {"_meta": MODERN_META})["result"]
    assert listed["_meta"][AUTO_META]["mode"] == "direct"
    assert "progressive-mcp/catalogVersion" in listed["_meta"]


def test_an_explicit_mode_carries_no_auto_meta(endpoint: Endpoint) -> None:
    for query in ("mode=progressive", "mode=direct&categories=forex"):
        assert AUTO_META not in rpc(endpoint, "tools/list", query)["result"].get("_meta", {})
    assert AUTO_META not in rpc(endpoint, "initialize", "mode=progressive", INITIALIZE)["result"].get("_meta", {})


def test_the_choice_is_made_once_per_variant_and_logged(catalog: Catalog, caplog: pytest.LogCaptureFixture) -> None:
    settings = Settings.from_env({}, mode="auto", cache=False)
    with caplog.at_level(logging.INFO, logger="progressive_mcp.surfaces.surface"):
        endpoint = Endpoint(Surface.from_settings(settings, catalog=catalog), settings)
        for _ in range(3):
            rpc(endpoint, "tools/list", "categories=crypto")
            rpc(endpoint, "tools/call", "categories=crypto", {"name": "TOOL_LIST", "arguments": {}})
            rpc(endpoint, "tools/list")
    picked = [r.getMessage() for r in caplog.records if r.getMessage().startswith("auto mode picked")]
    assert len(picked) == 2, picked  # the default surface and the crypto variant, once each
    assert any(m.startswith("auto mode picked direct: 4 tools") for m in picked)
    assert any(m.startswith("auto mode picked progressive: 128 tools") for m in picked)


def test_a_lower_threshold_moves_a_category_to_progressive(catalog: Catalog) -> None:
    settings = Settings.from_env({"PMCP_AUTO_DIRECT_TOKENS": "500", "PMCP_MODE": "auto"}, cache=False)
    endpoint = Endpoint(Surface.from_settings(settings, catalog=catalog), settings)
    assert tool_names(rpc(endpoint, "tools/list", "categories=forex")) == list(META_TOOL_NAMES)
    congress = [t.name for t in catalog.in_categories(frozenset({"congress"}))]  # 351 tokens
    assert tool_names(rpc(endpoint, "tools/list", "categories=congress")) == congress


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("mode=auto&fallback=direct", "Unknown ?fallback='direct'; use one of progressive, code"),
        ("mode=direct&fallback=code", "?fallback= goes with ?mode=auto"),
    ],
)
def test_a_wrong_fallback_is_refused(catalog: Catalog, query: str, message: str) -> None:
    settings = Settings.from_env({}, cache=False)  # progressive by default: ?fallback= alone is refused too
    endpoint = Endpoint(Surface.from_settings(settings, catalog=catalog), settings)
    answer = rpc(endpoint, "tools/list", query)
    assert answer["status"] == 400 and message in answer["error"]["message"]
    assert "goes with ?mode=auto" in rpc(endpoint, "tools/list", "fallback=code")["error"]["message"]


# -- settings ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["4k", "4,000", "-1", "1000001", "2.5"])
def test_the_threshold_is_validated_with_a_clear_error(value: str) -> None:
    with pytest.raises(ConfigError, match="PMCP_AUTO_DIRECT_TOKENS") as caught:
        Settings.from_env({"PMCP_AUTO_DIRECT_TOKENS": value})
    assert value in str(caught.value) or str(int(value)) in str(caught.value)


def test_the_threshold_and_fallback_are_read() -> None:
    settings = Settings.from_env(
        {"PMCP_AUTO_DIRECT_TOKENS": " 2500 ", "PMCP_AUTO_FALLBACK": "Code", "PMCP_MODE": "auto"}
    )
    assert (settings.mode, settings.auto_direct_tokens, settings.auto_fallback) == ("auto", 2500, "code")
    assert Settings.from_env({}).auto_direct_tokens == DEFAULT_AUTO_DIRECT_TOKENS
    with pytest.raises(ConfigError, match="PMCP_AUTO_FALLBACK must be one of progressive, code, not 'direct'"):
        Settings.from_env({"PMCP_AUTO_FALLBACK": "direct"})


# -- every real document ----------------------------------------------------------------------------------------

QUICK_DOCUMENT = "spotify"


@pytest.mark.parametrize(
    "name", [pytest.param(n, marks=() if n == QUICK_DOCUMENT else pytest.mark.slow) for n in sorted(REAL)]
)
def test_on_every_real_document_small_categories_go_direct_and_the_catalog_progressive(name: str) -> None:
    """The rule holds on catalogs nobody tuned: each category is direct exactly when its direct tools/list (as the
    token report counts it) fits the threshold, then lists exactly that category's tools; the whole catalog never."""
    path: Path = REAL[name]
    if not path.is_file():
        pytest.skip(f"{path} is absent")
    catalog = load_catalog(path)
    whole = Surface(catalog, mode="auto")
    assert whole.mode == "progressive" and whole.auto is not None
    assert whole.auto.direct_tokens > DEFAULT_AUTO_DIRECT_TOKENS
    direct_categories = 0
    for category in catalog.categories:
        categories = frozenset({category})
        surface = Surface(catalog, mode="auto", categories=categories, meta=whole.meta)
        cost = tools_list_tokens(Surface(catalog, mode="direct", categories=categories, meta=whole.meta))
        assert surface.auto is not None and surface.auto.direct_tokens == cost
        if cost <= DEFAULT_AUTO_DIRECT_TOKENS:
            direct_categories += 1
            assert surface.mode == "direct"
            assert [d["name"] for d in surface.tool_definitions()] == [
                t.name for t in catalog.in_categories(categories)
            ]
        else:
            assert surface.mode == "progressive"
            assert [d["name"] for d in surface.tool_definitions()] == list(META_TOOL_NAMES)
    assert direct_categories >= len(catalog.categories) // 2  # the threshold is not so low that auto is never direct


@pytest.mark.parametrize("name", ["alphavantage", QUICK_DOCUMENT])
def test_without_the_tokenizer_a_compiled_catalog_decides_as_with_it(
    name: str, catalog: Catalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Lambda asset has no bpe-openai: a compiled catalog carries its definitions' counts, so auto reports and
    decides on the same figure there as `progressive-mcp tokens` counts (not on an upper bound twice as high)."""
    from progressive_mcp import tokens
    from progressive_mcp.sources import compiled

    if name != "alphavantage" and not REAL[name].is_file():
        pytest.skip(f"{REAL[name]} is absent")
    source = catalog if name == "alphavantage" else load_catalog(REAL[name])
    subsets = [frozenset({c}) for c in source.categories] + [None]
    exact = {s: Surface(source, mode="auto", categories=s).auto for s in subsets}
    text = compiled.dumps(source)
    monkeypatch.setattr(tokens, "exact_counts", False)
    monkeypatch.setattr(tokens, "_KNOWN_COUNTS", {})
    loaded = compiled.loads(text)
    for subset in subsets:
        assert Surface(loaded, mode="auto", categories=subset).auto == exact[subset], subset


def test_without_the_tokenizer_or_counts_auto_decides_on_the_upper_bound(
    catalog: Catalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A catalog nobody counted (loaded from its source where bpe-openai is absent): the bound, never below the
    real count, so auto never goes direct where the real count is over the threshold."""
    from progressive_mcp import tokens

    forex = [t.definition() for t in catalog.in_categories(frozenset({"forex"}))]
    exact = choose_mode(forex).direct_tokens
    monkeypatch.setattr(tokens, "exact_counts", False)
    monkeypatch.setattr(tokens, "_KNOWN_COUNTS", {})
    bound = choose_mode(forex).direct_tokens
    assert bound >= exact
    assert choose_mode(forex, threshold=bound).mode == "direct"
    assert choose_mode(forex, threshold=bound - 1).mode == "progressive"
