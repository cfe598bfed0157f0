"""The meta-tools and the three surfaces, called in process (the stdio tests cover the wire)."""

from __future__ import annotations

import gc
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema_rs
import pytest

from progressive_mcp.calls.upstream import UpstreamClient
from progressive_mcp.catalog import Catalog
from progressive_mcp.errors import ConfigError, UnknownTool
from progressive_mcp.offline.sample_upstream import SampleUpstream
from progressive_mcp.report import BUDGETS, measure_tokens
from progressive_mcp.search import index as search_module
from progressive_mcp.search.index import SearchIndex, _bigrams, _ToolTexts, reading_for
from progressive_mcp.sources import load_catalog
from progressive_mcp.sources.spec import build_catalog
from progressive_mcp.surfaces.metatools import META_TOOL_NAMES
from progressive_mcp.surfaces.surface import CallContext, Surface

KEY = "SuRfAcE-KEY-0042"


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return load_catalog()


@pytest.fixture(scope="module")
def upstream_url() -> Iterator[str]:
    with SampleUpstream() as server:
        yield server.url


@pytest.fixture(scope="module")
def surface(catalog: Catalog, upstream_url: str) -> Surface:
    return Surface(catalog, upstream=UpstreamClient(catalog.api, base_url=upstream_url, retries=0))


def call(surface: Surface, name: str, arguments: dict[str, Any], key: str | None = KEY) -> tuple[dict[str, Any], bool]:
    """Call a tool; check the text is the same JSON as structuredContent; return (structured, is_error)."""
    result = surface.call_tool(name, arguments, CallContext(api_key=key))
    assert len(result.content) == 1
    text = result.content[0].text  # type: ignore[union-attr]
    assert json.loads(text) == result.structured_content, "text and structuredContent must carry the same JSON"
    if not result.is_error:
        schema = next(t.output_schema for t in surface.list_tools() if t.name == name)
        if schema is not None:
            jsonschema_rs.validate(schema, result.structured_content)
    return result.structured_content, result.is_error


def test_progressive_surface_lists_exactly_the_four_meta_tools(surface: Surface) -> None:
    tools = surface.list_tools()
    assert [t.name for t in tools] == list(META_TOOL_NAMES)
    for tool in tools:
        assert tool.output_schema is not None and tool.output_schema["type"] == "object"
        assert tool.annotations is not None and tool.annotations.read_only_hint is True
        jsonschema_rs.meta.validate(tool.input_schema)


def test_tool_list_default_names_grouped_by_category(surface: Surface, catalog: Catalog) -> None:
    listing, failed = call(surface, "TOOL_LIST", {})
    assert not failed
    assert listing["catalog_version"] == catalog.version
    assert listing["tool_count"] == len(catalog) == 128
    names = [name for group in listing["categories"] for name in group["tools"]]
    assert sorted(names) == sorted(t.name for t in catalog.tools)
    assert all(isinstance(name, str) for name in names)


def test_tool_list_one_category_defaults_to_summaries(surface: Surface) -> None:
    listing, failed = call(surface, "TOOL_LIST", {"category": "forex"})
    assert not failed
    [group] = listing["categories"]
    assert group["name"] == "forex"
    assert {t["name"] for t in group["tools"]} == {
        "CURRENCY_EXCHANGE_RATE",
        "FX_INTRADAY",
        "FX_DAILY",
        "FX_WEEKLY",
        "FX_MONTHLY",
    }
    assert all(t["summary"] for t in group["tools"])
    names_only, _ = call(surface, "TOOL_LIST", {"category": "forex", "detail": "names"})
    assert names_only["categories"][0]["tools"] == [t["name"] for t in group["tools"]]


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({"category": "weather"}, "unknown category 'weather'"),
        ({"detail": "everything"}, "detail must be one of names, summary"),
        ({"categroy": "forex"}, "unknown argument(s) categroy"),
    ],
)
def test_tool_list_bad_arguments_are_actionable(surface: Surface, arguments: dict[str, Any], expected: str) -> None:
    error, failed = call(surface, "TOOL_LIST", arguments)
    assert failed
    assert expected in error["error"]["message"]
    assert error["error"]["inputSchema"]["properties"]["category"]["enum"][0] == "stocks"


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("TOOL_LIST", {"category": ["forex"]}),
        ("TOOL_SEARCH", {"query": "exchange rate", "category": {"name": "forex"}}),
    ],
)
def test_a_category_that_is_not_a_string_is_an_error_result(
    surface: Surface, tool: str, arguments: dict[str, Any]
) -> None:
    """A list or object as the category was an unhashable-type TypeError (a 500 over HTTP)."""
    error, failed = call(surface, tool, arguments)
    assert failed
    assert "a category is named by a string, not a" in error["error"]["message"]
    assert "categories: stocks, options," in error["error"]["message"]


def test_an_unknown_category_is_answered_with_the_closest_and_never_echoed_whole(surface: Surface) -> None:
    error, failed = call(surface, "TOOL_LIST", {"category": "Stock"})
    message = error["error"]["message"]
    assert failed and "unknown category 'Stock' (did you mean stocks?); categories: stocks," in message
    error, failed = call(surface, "TOOL_SEARCH", {"query": "price", "category": "z" * 100_000})
    assert failed and len(error["error"]["message"]) < 500


def test_a_catalog_of_many_categories_names_the_closest_not_all() -> None:
    from progressive_mcp.sources.spec import parse_spec

    names = [f"group_{i:02d}" for i in range(30)] + ["droplets", "droplet_actions"]
    text = DOTTED_SPEC.replace(
        "categories: {artist: Artists., track: Tracks.}",
        "categories: {artist: Artists., track: Tracks., " + ", ".join(f"{n}: {n}." for n in names) + "}",
    ) + "".join(f"  - {{name: {n}.get, category: {n}, summary: One {n}., description: Use for {n}.}}\n" for n in names)
    many = Surface(build_catalog(parse_spec(text)))
    error, failed = call(many, "TOOL_LIST", {"category": "droplet"})
    message = error["error"]["message"]
    assert failed and "unknown category 'droplet' (did you mean droplets" in message
    assert "categories: 34, listed by TOOL_LIST without a category" in message
    assert "group_07" not in message


def test_tool_search_ranks_the_quote_tool_first(surface: Surface) -> None:
    found, failed = call(surface, "TOOL_SEARCH", {"query": "give me aapl price"})
    assert not failed
    results = found["results"]
    assert results[0]["name"] == "GLOBAL_QUOTE"
    assert len(results) <= 5
    assert all({"name", "score", "summary", "category"} <= set(r) for r in results)
    assert [r["score"] for r in results] == sorted((r["score"] for r in results), reverse=True)


def test_tool_search_limit_and_category(surface: Surface) -> None:
    found, _ = call(surface, "TOOL_SEARCH", {"query": "moving average", "limit": 2, "category": "technicals"})
    assert len(found["results"]) == 2
    assert all(r["category"] == "technicals" for r in found["results"])


def test_tool_search_off_topic_gives_empty_results_and_a_hint(surface: Surface, catalog: Catalog) -> None:
    found, failed = call(surface, "TOOL_SEARCH", {"query": "what is the weather in paris tomorrow"})
    assert not failed
    assert found["results"] == []
    assert "TOOL_LIST" in found["hint"]
    assert set(found["categories"]) == set(catalog.categories)


@pytest.mark.parametrize(
    "arguments",
    [{"query": ""}, {"query": "x", "limit": 0}, {"query": "x", "limit": 99}, {}, {"query": "stock price " * 100}],
)
def test_tool_search_rejects_bad_arguments(surface: Surface, arguments: dict[str, Any]) -> None:
    _, failed = call(surface, "TOOL_SEARCH", arguments)
    assert failed


def test_tool_search_spell_check_skips_words_longer_than_any_catalog_word(
    catalog: Catalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A word of n letters has n deletions of n-1 letters each: a 100,000-letter query took ~40 s (O(n²))."""
    index = SearchIndex(catalog.in_categories(None), catalog.vocabulary, categories=catalog.categories)
    assert [h.name for h in index.search("relative strenght index")][:1] == ["RSI"]  # builds the typo index
    longest = max(len(term) for term in index._postings)
    spelled: list[int] = []
    original = search_module._deletes
    monkeypatch.setattr(search_module, "_deletes", lambda word: spelled.append(len(word)) or original(word))

    assert index.search("x" * 100_000) == []
    assert [h.name for h in index.search("relative strenght index")][:1] == ["RSI"]  # still corrects typos
    assert spelled and max(spelled) <= longest + 1


def best_tool(surface: Surface, query: str) -> str | None:
    found, failed = call(surface, "TOOL_SEARCH", {"query": query})
    assert not failed
    return found["results"][0]["name"] if found["results"] else None


@pytest.mark.parametrize(
    ("query", "tool"),
    [
        # abbreviations and jargon the tool texts spell differently
        ("P/E and market cap of costco", "OVERVIEW"),
        ("FCF trend for AMZN", "CASH_FLOW"),
        ("EPS history of IBM", "EARNINGS"),
        ("+DI on QQQ", "PLUS_DI"),
        ("-DM for XOM", "MINUS_DM"),
        ("10y treasury", "TREASURY_YIELD"),
        ("NFP", "NONFARM_PAYROLL"),
        ("OHLCV 5min bars for TSLA", "TIME_SERIES_INTRADAY"),
        ("day-by-day closes for IBM", "TIME_SERIES_DAILY"),
        # the tool named by the query wins over its look-alikes
        ("macd for GOOG", "MACD"),
        ("ADX of MSFT", "ADX"),
        # currency pairs: a rate now, or a series when a spacing is given
        ("usd to jpy", "CURRENCY_EXCHANGE_RATE"),
        ("EUR/USD weekly candles", "FX_WEEKLY"),
        ("GBPUSD daily history", "FX_DAILY"),
        ("btc in euros", "CURRENCY_EXCHANGE_RATE"),
        # a misspelling one edit away
        ("unemploymnet rate", "UNEMPLOYMENT"),
    ],
)
def test_tool_search_knows_the_domains_words(surface: Surface, query: str, tool: str) -> None:
    assert best_tool(surface, query) == tool


@pytest.mark.parametrize(
    ("query", "tool"),
    [
        ("RSI for KO", "RSI"),  # KO is a ticker, not a word
        ("Rivian insider selling", "INSIDER_TRANSACTIONS"),  # an unknown capitalised name is an entity
        ("news about Tesla and Apple", "NEWS_SENTIMENT"),
        ("NVDA", "GLOBAL_QUOTE"),  # a ticker alone asks for its quote
        ("how is Microsoft doing today", "GLOBAL_QUOTE"),
    ],
)
def test_tool_search_entities_do_not_swamp_the_need(surface: Surface, query: str, tool: str) -> None:
    assert best_tool(surface, query) == tool


def test_tool_search_skips_us_only_series_for_other_countries(surface: Surface) -> None:
    assert best_tool(surface, "US inflation rate") == "INFLATION"
    assert best_tool(surface, "UK inflation rate") is None
    assert best_tool(surface, "unemployment in Japan") is None
    # ...but a place does not hide the tools that are not US-only
    assert best_tool(surface, "Brazil coffee prices") == "COFFEE"
    assert best_tool(surface, "canadian dollars to euros") == "CURRENCY_EXCHANGE_RATE"


@pytest.mark.parametrize(
    "query",
    [
        "palladium price per ounce",  # a metal the catalog has no series for
        "30 year mortgage rates",
        "consumer confidence index",
        "buy 10 shares of AAPL",  # a request to act
        "please sell all my bitcoin",
        "recipe for banana bread",
        "who won the game last night",
    ],
)
def test_tool_search_says_no_match_for_what_the_catalog_lacks(surface: Surface, query: str) -> None:
    assert best_tool(surface, query) is None


@pytest.mark.parametrize(
    ("query", "reason"),
    [
        ("explain how dividends work to a beginner", "explanation"),
        ("what is an option", "explanation"),
        ("how do stock splits work", "explanation"),
        ("difference between EPS and diluted EPS", "explanation"),
        ("should we hedge our euro exposure", "advice"),
        ("will gold keep going up", "advice"),
        ("which sector will do best in 2027", "advice"),
        ("how old is the Dow Jones index", "person or a story"),
        ("who was the first chairman of the Fed", "person or a story"),
        ("hi, what's your name", "conversation"),
        ("thanks, that helps", "conversation"),
    ],
)
def test_tool_search_knows_questions_no_data_tool_answers(
    surface: Surface, catalog: Catalog, query: str, reason: str
) -> None:
    assert best_tool(surface, query) is None
    off_topic = SearchIndex(catalog.tools, catalog.vocabulary, categories=catalog.categories).rank(query).off_topic
    assert off_topic is not None and reason in off_topic


@pytest.mark.parametrize(
    ("query", "tool"),
    [
        ("what is the P/E of IBM", "OVERVIEW"),  # "what is the", not "what is a": a look-up
        ("explain the drop in NFLX shares after earnings", "EARNINGS"),  # names a company: its data, not a lesson
        ("when will Apple report earnings", "EARNINGS_CALENDAR"),  # "when will": a date to look up
        ("Brazil coffee prices", "COFFEE"),  # a place, but the best tool covers every place
    ],
)
def test_tool_search_question_rules_leave_look_ups_alone(surface: Surface, query: str, tool: str) -> None:
    found, _ = call(surface, "TOOL_SEARCH", {"query": query})
    assert tool in [hit["name"] for hit in found["results"]]


def test_tool_search_another_countrys_figure_is_no_match_not_a_wrong_tool(catalog: Catalog) -> None:
    index = SearchIndex(catalog.tools, catalog.vocabulary)
    ranking = index.rank("Australian 10 year government bond yield")
    assert ranking.scores == [] and ranking.off_topic is not None and "US" in ranking.off_topic
    assert index.rank("US 10 year government bond yield").scores[0][0] == [t.name for t in catalog.tools].index(
        "TREASURY_YIELD"
    )


def test_tool_search_scores_are_shares_of_the_query(surface: Surface) -> None:
    found, _ = call(surface, "TOOL_SEARCH", {"query": "income statement and balance sheet for IBM", "limit": 10})
    results = found["results"]
    assert {r["name"] for r in results[:2]} == {"INCOME_STATEMENT", "BALANCE_SHEET"}
    assert all(0 < r["score"] <= 1 for r in results)
    assert results[-1]["score"] >= 0.3 * results[0]["score"]  # far weaker hits are left out


# -- the search index build: faster, with the same terms and rankings --------------------------------------


def indexed_terms(text: str) -> list[str]:
    """A tool text's terms the plain way, from `tokenize` (what the index build must reproduce), read with the
    bundled catalog's vocabulary (its phrases, spacing words and abbreviations)."""
    reading = reading_for(load_catalog().vocabulary)
    terms: list[str] = []
    for token in reading.tokenize(text):
        if token.lower in reading.stop_terms or token.term.isdigit():
            continue
        if "." in token.term:
            terms += [reading.stem(part) for part in token.term.split(".") if part and not part.isdigit()]
        else:
            terms.append(token.term)
    return terms


@pytest.mark.parametrize(
    "texts",
    [
        ("minute bars", "5 min candles", "day by", "day", "after", "hours trading"),  # no phrase spans two texts
        ("How much is BRK.B?", "U.S. GDP, +DI and P/E", "up 5% y/y", "it's e.g. TSCO.LON"),
        ("Ünïcode café prices", "K\u212a ratio", "rate\tof\nchange"),
        ("a text holding \x00 itself", "stock price"),
        ("",),
        (),
    ],
)
def test_index_reads_a_fields_texts_as_one_the_same_as_one_by_one(texts: tuple[str, ...]) -> None:
    terms, pairs = _ToolTexts(reading_for(load_catalog().vocabulary))(texts)
    assert terms == [t for text in texts for t in indexed_terms(text)]
    assert pairs == [p for text in texts for p in _bigrams(indexed_terms(text))]


@pytest.mark.parametrize("enabled", [True, False])
def test_index_build_leaves_garbage_collection_as_it_was(catalog: Catalog, enabled: bool) -> None:
    was = gc.isenabled()
    try:
        gc.enable() if enabled else gc.disable()
        SearchIndex(catalog.tools, catalog.vocabulary)
        assert gc.isenabled() is enabled
    finally:
        gc.enable() if was else gc.disable()


@pytest.mark.parametrize("query", ["price of anything today", "daily stock data", "give me aapl price", "stok prise"])
def test_ranking_that_skips_low_scores_keeps_the_same_best_tools(catalog: Catalog, query: str) -> None:
    index = SearchIndex(catalog.tools, catalog.vocabulary)
    every_category = frozenset(catalog.categories)  # the same tools, each one scored and compared
    for limit in (1, 5):
        assert index.rank(query, limit=limit).scores == index.rank(query, limit=limit, categories=every_category).scores


def test_tool_get_one_and_many(surface: Surface, catalog: Catalog) -> None:
    one, failed = call(surface, "TOOL_GET", {"tool_name": "GLOBAL_QUOTE"})
    assert not failed
    [tool] = one["tools"]
    assert tool["name"] == "GLOBAL_QUOTE"
    assert tool["inputSchema"]["required"] == ["symbol"]
    assert tool["inputSchema"]["properties"]["datatype"] == {
        "type": "string",
        "enum": ["json", "csv"],
        "default": "json",
    }
    assert tool["content_hash"] == catalog.get("GLOBAL_QUOTE").content_hash[:16]
    assert one["catalog_version"] == catalog.version
    many, _ = call(surface, "TOOL_GET", {"tool_name": ["RSI", "SMA", "RSI"]})
    assert [t["name"] for t in many["tools"]] == ["RSI", "SMA"]


def test_tool_get_unknown_name_suggests_the_closest_tools(surface: Surface) -> None:
    error, failed = call(surface, "TOOL_GET", {"tool_name": "GLOBAL_QOUTE"})
    assert failed
    assert error["error"]["suggestions"][0] == "GLOBAL_QUOTE"
    assert "GLOBAL_QUOTE" in error["error"]["message"]
    partial, failed = call(surface, "TOOL_GET", {"tool_name": ["RSI", "RSII"]})
    assert not failed
    assert [t["name"] for t in partial["tools"]] == ["RSI"]
    assert partial["not_found"][0]["suggestions"][0] == "RSI"


def test_tool_get_rejects_too_many_and_wrong_types(surface: Surface) -> None:
    assert call(surface, "TOOL_GET", {"tool_name": ["RSI"] * 11})[1]
    assert call(surface, "TOOL_GET", {"tool_name": 42})[1]


def test_tool_call_runs_the_upstream(surface: Surface) -> None:
    answer, failed = call(surface, "TOOL_CALL", {"tool_name": "GLOBAL_QUOTE", "arguments": {"symbol": "AAPL"}})
    assert not failed
    assert answer["tool"] == "GLOBAL_QUOTE"
    assert answer["arguments"] == {"symbol": "AAPL", "datatype": "json"}
    assert answer["data"]["Global Quote"]["01. symbol"] == "AAPL"


def test_tool_call_accepts_arguments_as_a_json_string(surface: Surface) -> None:
    answer, failed = call(surface, "TOOL_CALL", {"tool_name": "GLOBAL_QUOTE", "arguments": '{"symbol": "IBM"}'})
    assert not failed
    assert answer["data"]["Global Quote"]["01. symbol"] == "IBM"


def test_tool_call_invalid_arguments_list_every_problem_with_the_schema(surface: Surface) -> None:
    error, failed = call(
        surface,
        "TOOL_CALL",
        {"tool_name": "TIME_SERIES_INTRADAY", "arguments": {"interval": "2min", "outputsize": "huge", "foo": 1}},
    )
    assert failed
    problems = error["error"]["problems"]
    assert any("symbol" in p and "required" in p for p in problems)
    assert any("interval" in p for p in problems)
    assert any("outputsize" in p for p in problems)
    assert any("foo" in p for p in problems)
    assert error["error"]["inputSchema"]["properties"]["interval"]["enum"][0] == "1min"


def test_tool_call_unknown_tool_is_an_error_result_with_suggestions(surface: Surface) -> None:
    error, failed = call(surface, "TOOL_CALL", {"tool_name": "GLOBALQUOTE", "arguments": {}})
    assert failed
    assert error["error"]["type"] == "UnknownTool"
    assert "GLOBAL_QUOTE" in error["error"]["suggestions"]


def test_tool_call_refuses_meta_tools(surface: Surface) -> None:
    error, failed = call(surface, "TOOL_CALL", {"tool_name": "TOOL_LIST", "arguments": {}})
    assert failed and "meta-tool" in error["error"]["message"]


def test_upstream_errors_are_is_error_results_without_the_key(surface: Surface) -> None:
    error, failed = call(surface, "TOOL_CALL", {"tool_name": "GLOBAL_QUOTE", "arguments": {"symbol": "AAPL"}}, key=None)
    assert failed and error["error"]["kind"] == "auth"
    assert "ALPHAVANTAGE_API_KEY" in error["error"]["message"]
    limited, failed = call(
        surface, "TOOL_CALL", {"tool_name": "GLOBAL_QUOTE", "arguments": {"symbol": "AAPL"}}, key="ratelimited"
    )
    assert failed and limited["error"]["kind"] == "rate_limited"
    assert "ratelimited" not in json.dumps(limited)
    rejected, failed = call(surface, "TOOL_CALL", {"tool_name": "TIME_SERIES_DAILY", "arguments": {"symbol": "ZZZZ"}})
    assert failed and rejected["error"]["kind"] == "invalid_request"
    assert KEY not in json.dumps(rejected)


def test_direct_surface_exposes_every_tool_and_calls_it(catalog: Catalog, upstream_url: str) -> None:
    direct = Surface(catalog, mode="direct", upstream=UpstreamClient(catalog.api, base_url=upstream_url))
    tools = direct.list_tools()
    assert len(tools) == 128 and "TOOL_LIST" not in {t.name for t in tools}
    quote = next(t for t in tools if t.name == "GLOBAL_QUOTE")
    assert quote.annotations is not None
    assert (quote.annotations.read_only_hint, quote.annotations.destructive_hint) == (True, False)
    assert quote.annotations.open_world_hint is True
    answer, failed = call(direct, "GLOBAL_QUOTE", {"symbol": "MSFT"})
    assert not failed and answer["data"]["Global Quote"]["01. symbol"] == "MSFT"
    with pytest.raises(UnknownTool):
        direct.call_tool("TOOL_SEARCH", {"query": "price"}, CallContext())


def test_hybrid_surface_has_both_and_category_filter(catalog: Catalog) -> None:
    hybrid = Surface(catalog, mode="hybrid", categories=frozenset({"forex"}))
    names = [t.name for t in hybrid.list_tools()]
    assert names == [*META_TOOL_NAMES, "CURRENCY_EXCHANGE_RATE", "FX_INTRADAY", "FX_DAILY", "FX_WEEKLY", "FX_MONTHLY"]
    listing, _ = call(hybrid, "TOOL_LIST", {})
    assert [g["name"] for g in listing["categories"]] == ["forex"]
    error, failed = call(hybrid, "TOOL_CALL", {"tool_name": "GLOBAL_QUOTE", "arguments": {"symbol": "IBM"}})
    assert failed and error["error"]["type"] == "UnknownTool"


def test_unknown_category_filter_is_a_config_error(catalog: Catalog) -> None:
    with pytest.raises(ConfigError, match="unknown categories weather"):
        Surface(catalog, categories=frozenset({"weather"}))


def test_unknown_top_level_tool_raises_with_suggestions(surface: Surface) -> None:
    with pytest.raises(UnknownTool) as caught:
        surface.call_tool("TOOL_SERACH", {}, CallContext())
    assert "TOOL_SEARCH" in caught.value.suggestions


def test_token_budgets_of_design_md_hold(catalog: Catalog) -> None:
    figures = measure_tokens(catalog)
    for key, budget in BUDGETS.items():
        assert figures[key] <= budget, f"{key}: {figures[key]} tokens > budget {budget} (run progressive-mcp tokens)"


# --- narrowed surfaces, and names the surface does not offer ------------------------------------------------

DOTTED_SPEC = """\
api:
  name: music
  title: Music
  base_url: https://example.com/2.0/
  dispatch: {name: method}
categories: {artist: Artists., track: Tracks.}
tools:
  - {name: artist.getInfo, category: artist, summary: An artist's profile., description: Use for an artist's profile.}
  - {name: artist.getSimilar, category: artist, summary: Similar artists., description: Use for similar artists.}
  - {name: track.getInfo, category: track, summary: A track's details., description: Use for a track's details.}
"""


def test_a_narrowed_surface_describes_only_its_own_categories(catalog: Catalog) -> None:
    narrowed = Surface(catalog, categories=frozenset({"forex"}))
    forex_tools = [t.name for t in catalog.tools if t.category == "forex"]
    tool_list = next(t for t in narrowed.list_tools() if t.name == "TOOL_LIST")
    assert tool_list.description == f"Browse the {len(forex_tools)} {catalog.api.title} tools by category."
    assert tool_list.input_schema["properties"]["category"]["enum"] == ["forex"]
    error, is_error = call(narrowed, "TOOL_LIST", {"category": "stocks"})
    assert is_error and "unknown category 'stocks'; categories: forex" in error["error"]["message"]
    assert error["error"]["inputSchema"]["properties"]["category"]["enum"] == ["forex"]
    listed, is_error = call(narrowed, "TOOL_LIST", {"category": "Forex", "detail": "Names"})  # case folded
    assert not is_error and listed["categories"][0]["tools"] == forex_tools
    found, is_error = call(narrowed, "TOOL_SEARCH", {"query": "exchange rate", "category": "FOREX"})
    assert not is_error and {hit["category"] for hit in found["results"]} == {"forex"}


def test_tool_search_schema_states_its_limit(surface: Surface) -> None:
    search = next(t for t in surface.list_tools() if t.name == "TOOL_SEARCH")
    assert search.input_schema["properties"]["limit"]["maximum"] == 20
    error, is_error = call(surface, "TOOL_SEARCH", {"query": "apple price", "limit": 500})
    assert is_error and "from 1 to 20" in error["error"]["message"]


def test_direct_mode_hints_name_only_tools_it_offers(catalog: Catalog) -> None:
    direct = Surface(catalog, mode="direct")
    with pytest.raises(UnknownTool) as raised:
        direct.call_tool("TOOL_SEARCH", {"query": "apple"}, CallContext(api_key=KEY))
    message = str(raised.value)
    assert "not offered here" in message and "tools/list" in message
    assert "Use TOOL_SEARCH" not in message and "TOOL_LIST" not in message
    offered = {t.name for t in direct.list_tools()}
    assert set(raised.value.suggestions) <= offered


def test_a_typo_of_a_meta_tool_suggests_that_meta_tool_alone(surface: Surface) -> None:
    with pytest.raises(UnknownTool) as raised:
        surface.call_tool("TOOL_SERACH", {"query": "apple"}, CallContext(api_key=KEY))
    assert raised.value.suggestions == ["TOOL_SEARCH"]
    assert "Did you mean: TOOL_SEARCH?" in str(raised.value)


def test_names_fold_case_and_suggestions_ignore_separators() -> None:
    from progressive_mcp.sources.spec import parse_spec

    music = build_catalog(parse_spec(DOTTED_SPEC))
    assert music.get("artist.getinfo").name == "artist.getInfo"
    assert music.get("ARTIST.GETSIMILAR").name == "artist.getSimilar"
    for wrong in ("artist_getInfo", "artist-getinfo", "Artist getInfo"):
        with pytest.raises(UnknownTool) as raised:
            music.get(wrong)
        assert raised.value.suggestions[0] == "artist.getInfo", wrong
    meta = Surface(music)
    described, is_error = call(meta, "TOOL_GET", {"tool_name": ["artist.getinfo", "artist_getSimilar"]})
    assert not is_error
    assert [t["name"] for t in described["tools"]] == ["artist.getInfo"]
    assert described["not_found"] == [{"name": "artist_getSimilar", "suggestions": ["artist.getSimilar"]}]


def test_a_local_key_that_cannot_be_a_secret_is_refused_at_start(catalog: Catalog) -> None:
    from progressive_mcp.settings import Settings

    settings = Settings.from_env({})
    with pytest.raises(ConfigError, match="ALPHAVANTAGE_API_KEY is 1 characters long"):
        Surface(catalog).default_context(settings, {"ALPHAVANTAGE_API_KEY": "k"})
    assert Surface(catalog).default_context(settings, {"ALPHAVANTAGE_API_KEY": "demo"}).api_key == "demo"


def test_surfaces_over_one_catalog_share_its_search_index(catalog: Catalog) -> None:
    """An index is read-only once built: every Surface (each Endpoint, each test) over the same catalog, category
    filter and semantic switch uses the one the first built, instead of building its own."""
    first = Surface(catalog, semantic=False)
    assert Surface(catalog, semantic=False).meta.index is first.meta.index
    assert Surface(catalog, mode="code", semantic=False).meta.index is first.meta.index
    assert Surface(catalog, semantic=True).meta.index is not first.meta.index
    forex = frozenset({"forex"})
    narrow = Surface(catalog, categories=forex, semantic=False).meta.index
    assert narrow is not first.meta.index and narrow is Surface(catalog, categories=forex, semantic=False).meta.index
    other = load_catalog(Path(__file__).parent / "fixtures" / "lastfm" / "lastfm.yaml")
    assert Surface(other, semantic=False).meta.index is not first.meta.index


def test_an_unknown_tool_costs_one_suggestion_search(
    surface: Surface, catalog: Catalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    # difflib over every name is the costly part of an unknown name's answer: made once, from the surface's names.
    asked: list[str] = []
    suggest = Catalog.suggest

    def counted(self: Catalog, name: str, *args: Any, **kwargs: Any) -> list[str]:
        asked.append(name)
        return suggest(self, name, *args, **kwargs)

    monkeypatch.setattr(Catalog, "suggest", counted)
    for meta, arguments in (
        ("TOOL_GET", {"tool_name": "GLOBAL_QUOTEE"}),
        ("TOOL_CALL", {"tool_name": "GLOBAL_QUOTEE"}),
    ):
        asked.clear()
        result, failed = call(surface, meta, arguments)
        assert failed and "GLOBAL_QUOTE" in json.dumps(result)
        assert asked == ["GLOBAL_QUOTEE"], meta
