"""The output descriptions of spec/alphavantage.yaml against what the offline fake of Alpha Vantage answers.

Every tool's `output` describes the data of a real Alpha Vantage JSON answer, key for key; code mode turns it into
the return type of the tool's function. Here each of the 128 tools is called once through the product's own path
(arguments from the sample-catalog tests' helpers and `prepare_arguments`, sent by `UpstreamClient`, premium
functions with a premium key) and its answer must validate against the tool's `output_schema`; the CSV-only tools
must answer text whose header line is the one their description names. The schemas must be precise (no open
object, no array without items) and must bite: per family, an answer with a key missing, a key too many or a value
of the wrong type fails.

The schemas describe the real API; where the fake differed from it (indicator Meta Data, T3's volume factor,
OVERVIEW's newer fields, the analytics meta), the fake was corrected, so its answers validate as they are.

Run with: .venv/bin/python -m pytest tests/test_outputs.py -q
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable, Iterator
from typing import Any

import jsonschema_rs
import pytest
from test_sample_catalog import CSV_ONLY, key_for, valid_arguments  # the sample-catalog tests' argument helpers

from progressive_mcp.calls.upstream import UpstreamClient
from progressive_mcp.catalog import Catalog
from progressive_mcp.offline.sample_upstream import SampleUpstream
from progressive_mcp.sources import load_catalog

INDICATORS = frozenset(t.name for t in load_catalog().tools if t.category == "technicals")
ALL_TOOLS = sorted(t.name for t in load_catalog().tools)

# ---- fixtures -------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return load_catalog()


@pytest.fixture(scope="module")
def sample() -> Iterator[SampleUpstream]:
    with SampleUpstream(port=0) as server:
        yield server


def plain(schema: Any) -> dict[str, Any]:
    """A catalog output schema (a frozen mapping) as plain JSON data."""
    thawed: dict[str, Any] = json.loads(json.dumps(schema, default=dict))
    return thawed


@pytest.fixture(scope="module")
def schemas(catalog: Catalog) -> dict[str, dict[str, Any]]:
    return {name: plain(catalog.get(name).output_schema) for name in ALL_TOOLS}


@pytest.fixture(scope="module")
def answers(catalog: Catalog, sample: SampleUpstream) -> dict[str, Any]:
    """Every tool called once with typical valid arguments: name -> the answer's payload (JSON data or CSV text)."""
    client = UpstreamClient(catalog.api, base_url=sample.url, retries=0)
    found: dict[str, Any] = {}
    for name in ALL_TOOLS:
        tool = catalog.get(name)
        result = client.call(tool, valid_arguments(catalog, tool, typical=True), api_key=key_for(tool))
        assert result.format == ("csv" if name in CSV_ONLY else "json"), name
        found[name] = result.payload
    # the default call of the realtime chains has no greeks: that shape must validate too
    for name in ("REALTIME_OPTIONS", "REALTIME_OPTIONS_FMV"):
        tool = catalog.get(name)
        arguments = valid_arguments(catalog, tool, require_greeks=False)
        found[f"{name} without greeks"] = client.call(tool, arguments, api_key=key_for(tool)).payload
    return found


def validator(schema: dict[str, Any]) -> Any:
    return jsonschema_rs.Draft202012Validator(schema)


# ---- every tool is described, and the description fits the answer ------------------------------------------------


def test_every_tool_has_an_output_schema(catalog: Catalog) -> None:
    assert len(catalog.tools) == 128
    assert [t.name for t in catalog.tools if t.output_schema is None] == []


@pytest.mark.parametrize("name", ALL_TOOLS)
def test_the_answer_fits_the_description(name: str, schemas: dict[str, Any], answers: dict[str, Any]) -> None:
    schema = schemas[name]
    if name in CSV_ONLY:
        assert schema["type"] == "string"
        header = re.search(r"header line (\S+), then one row per", schema["description"])
        assert header, schema["description"]
        text = answers[name]
        assert isinstance(text, str) and text.splitlines()[0] == header.group(1), (name, text[:200])
        return
    validator(schema).validate(answers[name])


@pytest.mark.parametrize("name", ["REALTIME_OPTIONS", "REALTIME_OPTIONS_FMV"])
def test_option_chains_without_greeks_fit_too(name: str, schemas: dict[str, Any], answers: dict[str, Any]) -> None:
    payload = answers[f"{name} without greeks"]
    assert payload["data"] and "delta" not in payload["data"][0]
    validator(schemas[name]).validate(payload)


# ---- the descriptions are precise -------------------------------------------------------------------------------

# Objects with fixed keys *and* a schema for the other keys, on purpose.
MIXED_OBJECTS = {
    # The calculations are keyed as asked: the plain names are listed, ones with options ("STDDEV(ANNUALIZED=TRUE)")
    # are shaped as the same calculation without them.
    "ANALYTICS_FIXED_WINDOW: $defs/AnalyticsFixedWindow/properties/payload/properties/RETURNS_CALCULATIONS",
}


def imprecise_nodes(name: str, schema: dict[str, Any]) -> list[str]:
    """Places of a resolved output schema that would accept more than Alpha Vantage sends."""
    problems: list[str] = []

    def walk(node: Any, where: str) -> None:
        if not isinstance(node, dict) or not node:
            problems.append(f"{where}: empty schema")
            return
        if "$ref" in node:
            return  # the definition is walked once, under $defs
        kinds = node.get("type")
        kinds = kinds if isinstance(kinds, list) else [kinds]
        if kinds == [None] and "anyOf" not in node and "enum" not in node:
            problems.append(f"{where}: no type")
        for i, member in enumerate(node.get("anyOf", [])):
            walk(member, f"{where}/anyOf/{i}")
        if "object" in kinds:
            properties, extra = node.get("properties"), node.get("additionalProperties")
            if properties:
                if extra is not False and f"{name}: {where}" not in MIXED_OBJECTS:
                    problems.append(f"{where}: fixed keys, but other keys are allowed too")
                for key, member in properties.items():
                    walk(member, f"{where}/properties/{key}")
            elif not isinstance(extra, dict):
                problems.append(f"{where}: an object with neither properties nor a schema for its values")
            if isinstance(extra, dict):
                walk(extra, f"{where}/additionalProperties")
        if "array" in kinds:
            if "items" in node:
                walk(node["items"], f"{where}/items")
            else:
                problems.append(f"{where}: an array without items")

    walk({k: v for k, v in schema.items() if k != "$defs"}, "")
    for definition, member in schema.get("$defs", {}).items():
        walk(member, f"$defs/{definition}")
    return problems


@pytest.mark.parametrize("name", ALL_TOOLS)
def test_no_description_is_vacuous(name: str, schemas: dict[str, Any]) -> None:
    assert imprecise_nodes(name, schemas[name]) == []


def test_the_precision_check_finds_vacuous_schemas() -> None:
    empty_object = ": an object with neither properties nor a schema for its values"
    assert imprecise_nodes("X", {"type": "object"}) == [empty_object]
    assert imprecise_nodes("X", {"type": "array"}) == [": an array without items"]
    assert imprecise_nodes("X", {"type": "object", "properties": {"a": {}}, "additionalProperties": False}) == [
        "/properties/a: empty schema"
    ]
    open_keys = {"type": "object", "properties": {"a": {"type": "string"}}}
    assert imprecise_nodes("X", {"$ref": "#/$defs/o", "$defs": {"o": open_keys}}) == [
        "$defs/o: fixed keys, but other keys are allowed too"
    ]


# ---- the descriptions bite: per family, a wrong answer fails ------------------------------------------------------


def first(mapping: dict[str, Any]) -> Any:
    return next(iter(mapping.values()))


def drop(key: str) -> Callable[[dict[str, Any]], None]:
    return lambda node: node.pop(key)


def rename_series(old: str, new: str) -> Callable[[dict[str, Any]], None]:
    return lambda answer: answer.__setitem__(new, answer.pop(old))


# (tool, what is wrong, where in the answer (a function of it), the change made there)
BROKEN: list[tuple[str, str, Callable[[Any], Any], Callable[[Any], None]]] = [
    # quotes and the market
    ("GLOBAL_QUOTE", "no price", lambda a: a["Global Quote"], drop("05. price")),
    ("GLOBAL_QUOTE", "price as a number", lambda a: a["Global Quote"], lambda q: q.update({"05. price": 245.0})),
    ("REALTIME_BULK_QUOTES", "a key too many", lambda a: a["data"][0], lambda q: q.update({"bid": "1"})),
    ("REALTIME_BULK_BID_ASK_PRICES", "no ask", lambda a: a["data"][0], drop("ask_price")),
    ("SYMBOL_SEARCH", "no match score", lambda a: a["bestMatches"][0], drop("9. matchScore")),
    ("MARKET_STATUS", "a status of its own", lambda a: a["markets"][0], lambda m: m.update({"current_status": "x"})),
    # stock, FX and crypto series
    ("TIME_SERIES_DAILY", "a bar without volume", lambda a: first(a["Time Series (Daily)"]), drop("5. volume")),
    ("TIME_SERIES_DAILY", "no Meta Data", lambda a: a, drop("Meta Data")),
    ("TIME_SERIES_INTRADAY", "an interval that does not exist", lambda a: a,
     rename_series("Time Series (1min)", "Time Series (2min)")),
    ("TIME_SERIES_DAILY_ADJUSTED", "no split coefficient", lambda a: first(a["Time Series (Daily)"]),
     drop("8. split coefficient")),
    ("TIME_SERIES_WEEKLY_ADJUSTED", "a split coefficient (daily only)",
     lambda a: first(a["Weekly Adjusted Time Series"]), lambda b: b.update({"8. split coefficient": "1.0"})),
    ("TIME_SERIES_MONTHLY", "the meta data of a daily series", lambda a: a["Meta Data"],
     lambda m: m.update({"4. Output Size": "Compact"})),
    ("FX_DAILY", "a bar with volume", lambda a: first(a["Time Series FX (Daily)"]),
     lambda b: b.update({"5. volume": "1"})),
    ("FX_INTRADAY", "no series key asked for", lambda a: a, rename_series("Time Series FX (1min)", "Time Series")),
    ("DIGITAL_CURRENCY_DAILY", "the pre-2024 per-market columns",
     lambda a: first(a["Time Series (Digital Currency Daily)"]),
     lambda b: b.update({"1a. open (USD)": b.pop("1. open")})),
    ("CRYPTO_INTRADAY", "meta data without the market", lambda a: a["Meta Data"], drop("4. Market Code")),
    ("CURRENCY_EXCHANGE_RATE", "no rate", lambda a: a["Realtime Currency Exchange Rate"], drop("5. Exchange Rate")),
    # technical indicators
    ("RSI", "a value too many", lambda a: first(a["Technical Analysis: RSI"]), lambda v: v.update({"SMA": "1"})),
    ("RSI", "the value as a number", lambda a: first(a["Technical Analysis: RSI"]), lambda v: v.update({"RSI": 40.1})),
    ("MACD", "no histogram", lambda a: first(a["Technical Analysis: MACD"]), drop("MACD_Hist")),
    ("BBANDS", "the time period as text", lambda a: a["Meta Data"], lambda m: m.update({"5: Time Period": "14"})),
    ("SMA", "no time zone", lambda a: a["Meta Data"], drop("7: Time Zone")),
    ("AD", "the function's name as series key", lambda a: a,
     rename_series("Technical Analysis: Chaikin A/D", "Technical Analysis: AD")),
    ("HT_SINE", "no sine", lambda a: first(a["Technical Analysis: HT_SINE"]), drop("SINE")),
    ("STOCH", "the fast lines of STOCHF", lambda a: first(a["Technical Analysis: STOCH"]),
     lambda v: v.update({"FastK": v.pop("SlowK")})),
    # options
    ("REALTIME_OPTIONS", "a contract type of its own", lambda a: a["data"][0], lambda c: c.update({"type": "both"})),
    ("HISTORICAL_OPTIONS", "no strike", lambda a: a["data"][0], drop("strike")),
    ("REALTIME_OPTIONS_FMV", "a mark (this one has fmv)", lambda a: a["data"][0], lambda c: c.update({"mark": "1"})),
    ("REALTIME_PUT_CALL_RATIO", "no expirations", lambda a: a, drop("expirations")),
    ("HISTORICAL_VOLUME_OPEN_INTEREST_RATIO", "no ratio", lambda a: a["data"][0], drop("volume_open_interest_ratio")),
    # intelligence
    ("NEWS_SENTIMENT", "the score as text", lambda a: a["feed"][0],
     lambda f: f.update({"overall_sentiment_score": "0.1"})),
    ("NEWS_SENTIMENT", "a label of its own", lambda a: a["feed"][0]["ticker_sentiment"][0],
     lambda t: t.update({"ticker_sentiment_label": "Very Bullish"})),
    ("EARNINGS_CALL_TRANSCRIPT", "no speaker", lambda a: a["transcript"][0], drop("speaker")),
    ("TOP_GAINERS_LOSERS", "a mover without volume", lambda a: a["top_losers"][0], drop("volume")),
    ("INSIDER_TRANSACTIONS", "neither acquisition nor disposal", lambda a: a["data"][0],
     lambda t: t.update({"acquisition_or_disposal": "X"})),
    ("INSTITUTIONAL_HOLDINGS", "no holders", lambda a: a, drop("holders")),
    ("ANALYTICS_FIXED_WINDOW", "a mean as text", lambda a: a["payload"]["RETURNS_CALCULATIONS"]["MEAN"],
     lambda m: m.update({"IBM": "0.1"})),
    ("ANALYTICS_FIXED_WINDOW", "a matrix without index",
     lambda a: a["payload"]["RETURNS_CALCULATIONS"]["CORRELATION"], drop("index")),
    ("ANALYTICS_SLIDING_WINDOW", "a calculation without window starts",
     lambda a: a["payload"]["RETURNS_CALCULATIONS"]["MEAN"], drop("window_start")),
    # fundamentals
    ("OVERVIEW", "a key too many", lambda a: a, lambda o: o.update({"Rating": "AAA"})),
    ("OVERVIEW", "no symbol", lambda a: a, drop("Symbol")),
    ("INCOME_STATEMENT", "net income as a number", lambda a: a["quarterlyReports"][0],
     lambda r: r.update({"netIncome": 1})),
    ("BALANCE_SHEET", "no total assets", lambda a: a["annualReports"][0], drop("totalAssets")),
    ("CASH_FLOW", "a report of the income statement", lambda a: a["annualReports"][0],
     lambda r: r.update({"grossProfit": "1"})),
    ("EARNINGS", "no reported EPS", lambda a: a["quarterlyEarnings"][0], drop("reportedEPS")),
    ("EARNINGS_ESTIMATES", "an estimate as a number", lambda a: a["estimates"][0],
     lambda e: e.update({"eps_estimate_average": 1.5})),
    ("DIVIDENDS", "no amount", lambda a: a["data"][0], drop("amount")),
    ("SPLITS", "a key too many", lambda a: a["data"][0], lambda s: s.update({"ratio": "2:1"})),
    ("ETF_PROFILE", "a weight as a number", lambda a: a["holdings"][0], lambda h: h.update({"weight": 0.1})),
    ("COMPANY_LOGO", "no png", lambda a: a, drop("png")),
    # commodities, economy, indices, congress
    ("WTI", "a point without value", lambda a: a["data"][0], drop("value")),
    ("REAL_GDP", "a key too many", lambda a: a, lambda s: s.update({"source": "x"})),
    ("GOLD_SILVER_SPOT", "no price", lambda a: a, drop("price")),
    ("INDEX_DATA", "a bar with volume", lambda a: a["data"][0], lambda b: b.update({"volume": "1"})),
    ("INDEX_CATALOG", "no name", lambda a: a["data"][0], drop("name")),
    ("CONGRESS_TRADES", "a trade without its member", lambda a: a["trades"][0], drop("bioguide_id")),
    ("POLITICIAN_METADATA", "no party", lambda a: a["data"][0], drop("party")),
]  # fmt: skip


@pytest.mark.parametrize(("name", "wrong", "where", "change"), BROKEN, ids=[f"{n}: {w}" for n, w, _, _ in BROKEN])
def test_a_wrong_answer_fails(
    name: str,
    wrong: str,
    where: Callable[[Any], Any],
    change: Callable[[Any], None],
    schemas: dict[str, Any],
    answers: dict[str, Any],
) -> None:
    check = validator(schemas[name])
    answer = copy.deepcopy(answers[name])
    assert check.is_valid(answer), name
    change(where(answer))
    assert not check.is_valid(answer), f"{name} accepts an answer with {wrong}"


def test_every_family_has_a_wrong_answer(catalog: Catalog) -> None:
    broken = {name for name, *_ in BROKEN}
    assert {catalog.get(name).category for name in broken} == set(catalog.categories)


def test_a_csv_tool_answers_text_not_json(schemas: dict[str, Any]) -> None:
    for name in sorted(CSV_ONLY):
        assert not validator(schemas[name]).is_valid({"symbol": "IBM"})
