"""The sample upstream against the whole catalog, and the bytes it must never change.

Every tool of spec/alphavantage.yaml is called through the product's own path (arguments prepared by
`prepare_arguments`, sent by `UpstreamClient`) with valid arguments built from the spec, and must answer data
shaped like Alpha Vantage's: a "Meta Data" block and a newest-first series for series tools, the documented
top-level fields for the others, a CSV table with a header and rows where CSV is asked for (or is the only
format). Every answer is deterministic: the same request gives the same bytes, with cold caches and under
another hash seed.

The pins at the end are sha256 digests of answers recorded from the sample upstream before it covered the whole
catalog (when it simulated 12 functions): those answers feed other tests and the token report, so widening
the simulation must leave every one of them byte for byte as it was.

Run with: .venv/bin/python -m pytest tests/test_sample_catalog.py -q
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import subprocess
import sys
import urllib.parse
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from sweeps import one_per_kind

from progressive_mcp.calls.arguments import prepare_arguments
from progressive_mcp.calls.upstream import UpstreamClient, UpstreamResult, _wire_value
from progressive_mcp.catalog import Catalog, CatalogTool
from progressive_mcp.errors import PremiumRequired
from progressive_mcp.offline import sample_upstream
from progressive_mcp.offline.sample_upstream import (
    ANCHOR,
    PREMIUM_FUNCTIONS,
    SAMPLE_LABEL,
    Faults,
    SampleUpstream,
    answer_query,
)
from progressive_mcp.sources import load_catalog

KEY = "k"
PREMIUM_KEY = "premium-k"  # the sample upstream treats keys starting with "premium" as a premium plan

# A sensible value for a parameter the spec gives no example or enum for, by name.
SENSIBLE: dict[str, Any] = {
    "symbol": "IBM",
    "keywords": "micro",
    "from_currency": "USD",
    "to_currency": "JPY",
    "from_symbol": "EUR",
    "to_symbol": "USD",
    "market": "EUR",
    "SYMBOLS": "IBM,AAPL,MSFT",
    "RANGE": "6month",
    "CALCULATIONS": "MEAN,STDDEV(annualized=True),CORRELATION",
    "WINDOW_SIZE": 20,
    "time_period": 14,
}
# Optional parameters worth sending in the "typical call" variant (the spec's defaults are added anyway).
TYPICAL: dict[str, Any] = {
    "month": "2025-06",
    "date": "2025-06-13",
    "from": "2026-01-01",
    "tickers": "AAPL",
    "topics": "technology",
    "time_from": "20261101T0000",
    "limit": 10,
    "require_greeks": True,
    "outputsize": "compact",
    "symbol": "IBM",  # where it is optional (EARNINGS_CALENDAR)
}
# Per-tool values where the parameter's meaning differs from the shared one.
OVERRIDES: dict[tuple[str, str], Any] = {
    ("INDEX_DATA", "symbol"): "SPX",
    ("ANALYTICS_FIXED_WINDOW", "CALCULATIONS"): (
        "MEAN,MEDIAN,CUMULATIVE_RETURN,VARIANCE,STDDEV(annualized=True),MAX_DRAWDOWN,HISTOGRAM(bins=5),"
        "AUTOCORRELATION(lag=2),COVARIANCE,CORRELATION"
    ),
    ("ANALYTICS_SLIDING_WINDOW", "RANGE"): "2year",  # enough monthly points for a 20-point window
}
CHEAP_INTERVALS = ("daily", "DAILY")  # preferred when an interval is required: a 1min series is the costliest


def param_value(tool: CatalogTool, name: str) -> Any:
    param = tool.param(name)
    assert param is not None
    if (tool.name, name) in OVERRIDES:
        return OVERRIDES[(tool.name, name)]
    if param.examples:
        return param.examples[0]
    if param.enum:
        return next((v for v in CHEAP_INTERVALS if v in param.enum), param.enum[0])
    if name in SENSIBLE:
        return SENSIBLE[name]
    if param.default is not None:
        return param.default
    raise AssertionError(f"no valid value for {tool.name}.{name}: give it an example in the spec or one here")


def valid_arguments(catalog: Catalog, tool: CatalogTool, *, typical: bool = False, **extra: Any) -> dict[str, Any]:
    """Required parameters (and one of each require_any group), optionally typical optional ones too, prepared
    by the product's own argument handling (which adds the spec's defaults)."""
    raw = {p.name: param_value(tool, p.name) for p in tool.params if p.required}
    for group in tool.require_any:
        if not any(name in raw for name in group):
            raw[group[0]] = param_value(tool, group[0])
    if typical:
        for p in tool.params:
            if p.name not in raw and p.name in TYPICAL:
                raw[p.name] = TYPICAL[p.name]
    raw.update(extra)
    return prepare_arguments(catalog, tool.name, raw)


def takes_csv(tool: CatalogTool) -> bool:
    datatype = tool.param("datatype")
    return datatype is not None and datatype.enum is not None and "csv" in datatype.enum


CSV_ONLY = {"LISTING_STATUS", "EARNINGS_CALENDAR", "IPO_CALENDAR"}
# Answered JSON before the sample upstream covered the catalog, whatever the datatype, and pinned below.
JSON_EVEN_AS_CSV = {"CURRENCY_EXCHANGE_RATE"}


def key_for(tool: CatalogTool) -> str:
    return PREMIUM_KEY if tool.name in PREMIUM_FUNCTIONS else KEY


# ---- what each answer must look like -----------------------------------------------------------------------

SERIES_KEYS = {
    "TIME_SERIES_INTRADAY": "Time Series ({interval})",
    "TIME_SERIES_DAILY": "Time Series (Daily)",
    "TIME_SERIES_DAILY_ADJUSTED": "Time Series (Daily)",
    "TIME_SERIES_WEEKLY": "Weekly Time Series",
    "TIME_SERIES_WEEKLY_ADJUSTED": "Weekly Adjusted Time Series",
    "TIME_SERIES_MONTHLY": "Monthly Time Series",
    "TIME_SERIES_MONTHLY_ADJUSTED": "Monthly Adjusted Time Series",
    "FX_INTRADAY": "Time Series FX ({interval})",
    "FX_DAILY": "Time Series FX (Daily)",
    "FX_WEEKLY": "Time Series FX (Weekly)",
    "FX_MONTHLY": "Time Series FX (Monthly)",
    "CRYPTO_INTRADAY": "Time Series Crypto ({interval})",
    "DIGITAL_CURRENCY_DAILY": "Time Series (Digital Currency Daily)",
    "DIGITAL_CURRENCY_WEEKLY": "Time Series (Digital Currency Weekly)",
    "DIGITAL_CURRENCY_MONTHLY": "Time Series (Digital Currency Monthly)",
}
BAR_FIELDS = {
    "TIME_SERIES_DAILY_ADJUSTED": [
        "1. open", "2. high", "3. low", "4. close", "5. adjusted close", "6. volume", "7. dividend amount",
        "8. split coefficient",
    ],
    "TIME_SERIES_WEEKLY_ADJUSTED": [
        "1. open", "2. high", "3. low", "4. close", "5. adjusted close", "6. volume", "7. dividend amount",
    ],
    "TIME_SERIES_MONTHLY_ADJUSTED": [
        "1. open", "2. high", "3. low", "4. close", "5. adjusted close", "6. volume", "7. dividend amount",
    ],
    **{name: ["1. open", "2. high", "3. low", "4. close"] for name in ("FX_INTRADAY", "FX_DAILY", "FX_WEEKLY")},
    "FX_MONTHLY": ["1. open", "2. high", "3. low", "4. close"],
}  # fmt: skip
# Alpha Vantage's output names per indicator ("Technical Analysis: <key>" is the function unless given).
INDICATOR_OUTPUTS: dict[str, tuple[str, ...]] = {
    "MAMA": ("MAMA", "FAMA"),
    "MACD": ("MACD", "MACD_Signal", "MACD_Hist"),
    "MACDEXT": ("MACD", "MACD_Signal", "MACD_Hist"),
    "STOCH": ("SlowK", "SlowD"),
    "STOCHF": ("FastK", "FastD"),
    "STOCHRSI": ("FastK", "FastD"),
    "AROON": ("Aroon Down", "Aroon Up"),
    "BBANDS": ("Real Upper Band", "Real Middle Band", "Real Lower Band"),
    "AD": ("Chaikin A/D",),
    "HT_SINE": ("LEAD SINE", "SINE"),
    "HT_TRENDMODE": ("TRENDMODE",),
    "HT_DCPERIOD": ("DCPERIOD",),
    "HT_PHASOR": ("PHASE", "QUADRATURE"),
}
INDICATOR_KEYS = {"AD": "Chaikin A/D"}
# Top-level fields of the answers that have no "Meta Data" block.
TOP_LEVEL: dict[str, set[str]] = {
    "GLOBAL_QUOTE": {"Global Quote"},
    "REALTIME_BULK_QUOTES": {"endpoint", "message", "data"},
    "REALTIME_BULK_BID_ASK_PRICES": {"endpoint", "message", "data"},
    "SYMBOL_SEARCH": {"bestMatches"},
    "MARKET_STATUS": {"endpoint", "markets"},
    "REALTIME_OPTIONS": {"endpoint", "message", "data"},
    "REALTIME_OPTIONS_FMV": {"endpoint", "message", "data"},
    "HISTORICAL_OPTIONS": {"endpoint", "message", "data"},
    "REALTIME_PUT_CALL_RATIO": {"endpoint", "message", "symbol", "date", "put_call_ratio", "put_volume",
                                "call_volume", "expirations"},
    "HISTORICAL_PUT_CALL_RATIO": {"endpoint", "message", "symbol", "date", "put_call_ratio", "put_volume",
                                  "call_volume", "expirations"},
    "REALTIME_VOLUME_OPEN_INTEREST_RATIO": {"endpoint", "message", "symbol", "date", "data"},
    "HISTORICAL_VOLUME_OPEN_INTEREST_RATIO": {"endpoint", "message", "symbol", "date", "data"},
    "NEWS_SENTIMENT": {"items", "sentiment_score_definition", "relevance_score_definition", "feed"},
    "EARNINGS_CALL_TRANSCRIPT": {"symbol", "quarter", "transcript"},
    "TOP_GAINERS_LOSERS": {"metadata", "last_updated", "top_gainers", "top_losers", "most_actively_traded"},
    "INSIDER_TRANSACTIONS": {"data"},
    "INSTITUTIONAL_HOLDINGS": {"symbol", "report_period", "institutional_ownership_percent",
                               "total_institutional_shares", "total_holders", "holders_increased",
                               "holders_decreased", "holders_unchanged", "net_shares_change",
                               "net_shares_change_percent", "holders"},
    "ANALYTICS_FIXED_WINDOW": {"meta_data", "payload"},
    "ANALYTICS_SLIDING_WINDOW": {"meta_data", "payload"},
    "COMPANY_LOGO": {"symbol", "name", "png", "svg", "note"},
    "ETF_PROFILE": {"net_assets", "net_expense_ratio", "portfolio_turnover", "dividend_yield", "inception_date",
                    "leveraged", "asset_allocation", "sectors", "holdings"},
    "DIVIDENDS": {"symbol", "data"},
    "SPLITS": {"symbol", "data"},
    "INCOME_STATEMENT": {"symbol", "annualReports", "quarterlyReports"},
    "BALANCE_SHEET": {"symbol", "annualReports", "quarterlyReports"},
    "CASH_FLOW": {"symbol", "annualReports", "quarterlyReports"},
    "EARNINGS": {"symbol", "annualEarnings", "quarterlyEarnings"},
    "EARNINGS_ESTIMATES": {"symbol", "estimates"},
    "INDEX_DATA": {"symbol", "name", "interval", "data"},
    "INDEX_CATALOG": {"endpoint", "message", "data"},
    "CONGRESS_TRADES": {"trades"},
    "POLITICIAN_METADATA": {"data"},
    "CURRENCY_EXCHANGE_RATE": {"Realtime Currency Exchange Rate"},
    "GOLD_SILVER_SPOT": {"nominal", "timestamp", "price"},
    "OVERVIEW": {
        "Symbol", "AssetType", "Name", "Description", "CIK", "Exchange", "Currency", "Country", "Sector", "Industry",
        "FiscalYearEnd", "LatestQuarter", "MarketCapitalization", "EBITDA", "PERatio", "BookValue",
        "DividendPerShare", "DividendYield", "EPS", "ProfitMargin", "RevenueTTM", "AnalystTargetPrice", "Beta",
        "52WeekHigh", "52WeekLow", "50DayMovingAverage", "200DayMovingAverage", "SharesOutstanding",
        "DividendDate", "ExDividendDate",
        # added by Alpha Vantage since 2024
        "Address", "OfficialSite", "PEGRatio", "RevenuePerShareTTM", "OperatingMarginTTM", "ReturnOnAssetsTTM",
        "ReturnOnEquityTTM", "GrossProfitTTM", "DilutedEPSTTM", "QuarterlyEarningsGrowthYOY",
        "QuarterlyRevenueGrowthYOY", "AnalystRatingStrongBuy", "AnalystRatingBuy", "AnalystRatingHold",
        "AnalystRatingSell", "AnalystRatingStrongSell", "TrailingPE", "ForwardPE", "PriceToSalesRatioTTM",
        "PriceToBookRatio", "EVToRevenue", "EVToEBITDA", "SharesFloat", "PercentInsiders", "PercentInstitutions",
    },
}  # fmt: skip
DATA_SERIES = {"name", "interval", "unit", "data"}  # commodities, gold/silver history, the economy
CSV_HEADERS = {
    "LISTING_STATUS": ["symbol", "name", "exchange", "assetType", "ipoDate", "delistingDate", "status"],
    "EARNINGS_CALENDAR": ["symbol", "name", "reportDate", "fiscalDateEnding", "estimate", "currency", "timeOfTheDay"],
    "IPO_CALENDAR": ["symbol", "name", "ipoDate", "priceRangeLow", "priceRangeHigh", "currency", "exchange"],
    "DIVIDENDS": ["ex_dividend_date", "declaration_date", "record_date", "payment_date", "amount"],
    "SPLITS": ["effective_date", "split_factor"],
    "TIME_SERIES_DAILY_ADJUSTED": [
        "timestamp", "open", "high", "low", "close", "adjusted_close", "volume", "dividend_amount",
        "split_coefficient",
    ],
}  # fmt: skip


def is_indicator(catalog: Catalog, name: str) -> bool:
    return catalog.get(name).category == "technicals"


def check_json(catalog: Catalog, tool: CatalogTool, arguments: dict[str, Any], payload: Any) -> None:
    name = tool.name
    assert isinstance(payload, dict) and payload, name
    assert not {"Error Message", "Information", "Note"} & set(payload), (name, payload)
    if "Meta Data" in payload:
        (series_key,) = set(payload) - {"Meta Data"}
        meta = payload["Meta Data"]
        if not is_indicator(catalog, name):  # indicators' Meta Data has no "1. Information" upstream
            assert SAMPLE_LABEL in meta["1. Information"], name
        if is_indicator(catalog, name):
            assert series_key == f"Technical Analysis: {INDICATOR_KEYS.get(name, name)}", name
            assert meta["2: Indicator"].endswith(f"({name})") or name in ("AD", "ROC", "ROCR"), meta
            outputs = INDICATOR_OUTPUTS.get(name, (name,))
        else:
            expected = SERIES_KEYS[name].format(interval=arguments.get("interval"))
            assert series_key == expected, (name, series_key)
            outputs = tuple(BAR_FIELDS.get(name, ["1. open", "2. high", "3. low", "4. close"]))
        series = payload[series_key]
        assert isinstance(series, dict) and series, name
        stamps = list(series)
        assert stamps == sorted(stamps, reverse=True), f"{name}: not newest first"
        assert stamps[0][:10] <= ANCHOR.isoformat(), name
        for row in list(series.values())[:50]:
            assert tuple(row)[: len(outputs)] == outputs, (name, row)
            assert all(isinstance(v, str) and float(v) == float(v) for v in row.values()), (name, row)
        return
    if name in TOP_LEVEL:
        assert set(payload) == TOP_LEVEL[name], (name, sorted(payload))
    else:
        assert set(payload) == DATA_SERIES, (name, sorted(payload))
        assert SAMPLE_LABEL in payload["name"], name
        dates = [point["date"] for point in payload["data"]]
        assert dates and dates == sorted(dates, reverse=True), name
        assert all(float(point["value"]) > -10 for point in payload["data"]), name
    # no list or object at the top level is empty: the answer carries data
    for key, value in payload.items():
        if isinstance(value, list | dict) and key not in ("expirations",):
            assert value, (name, key)


def check_csv(tool: CatalogTool, text: str) -> None:
    rows = list(csv.reader(io.StringIO(text)))
    assert len(rows) >= 2, (tool.name, text[:200])
    header = rows[0]
    assert all(header) and len(set(header)) == len(header), (tool.name, header)
    assert all(len(row) == len(header) for row in rows), tool.name
    if tool.name in CSV_HEADERS:
        assert header == CSV_HEADERS[tool.name], (tool.name, header)
    if header[0] in ("timestamp", "time"):
        stamps = [row[0] for row in rows[1:]]
        assert stamps == sorted(stamps, reverse=True), f"{tool.name}: not newest first"


# ---- fixtures ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return load_catalog()


@pytest.fixture(scope="module")
def sample() -> Iterator[SampleUpstream]:
    with SampleUpstream(port=0) as server:
        yield server


@pytest.fixture(scope="module")
def client(catalog: Catalog, sample: SampleUpstream) -> UpstreamClient:
    return UpstreamClient(catalog.api, base_url=sample.url, retries=0)


def call(client: UpstreamClient, tool: CatalogTool, arguments: dict[str, Any], key: str = KEY) -> UpstreamResult:
    return client.call(tool, arguments, api_key=key)


def all_tools() -> list[str]:
    return [tool.name for tool in load_catalog().tools]


def tools_sweep() -> list[Any]:
    """Every tool; `make test` keeps the first of each category (sweeps.py)."""
    category = {tool.name: tool.category for tool in load_catalog().tools}
    return one_per_kind(all_tools(), category.__getitem__)


# ---- every tool answers --------------------------------------------------------------------------------


def test_the_catalog_is_what_the_sample_upstream_simulates(catalog: Catalog) -> None:
    assert len(catalog.tools) == 128
    extras = {"SHARES_OUTSTANDING", "PUT_CALL_RATIO", "VOLUME_OPEN_INTEREST_RATIO"}  # real, outside the catalog
    assert {t.name for t in catalog.tools} == set(sample_upstream.FUNCTIONS) - extras
    assert not hasattr(sample_upstream, "UNSIMULATED_FUNCTIONS")


@pytest.mark.parametrize("name", tools_sweep())
def test_every_tool_answers_data_with_valid_arguments(catalog: Catalog, client: UpstreamClient, name: str) -> None:
    tool = catalog.get(name)
    arguments = valid_arguments(catalog, tool)
    result = call(client, tool, arguments, key_for(tool))
    if name in CSV_ONLY:
        assert result.format == "csv"
        check_csv(tool, result.payload)
    else:
        assert result.format == "json", name
        check_json(catalog, tool, arguments, result.payload)


@pytest.mark.parametrize("name", tools_sweep())
def test_every_tool_answers_a_typical_call_and_csv_where_offered(
    catalog: Catalog, client: UpstreamClient, name: str
) -> None:
    tool = catalog.get(name)
    arguments = valid_arguments(catalog, tool, typical=True)
    result = call(client, tool, arguments, key_for(tool))
    if name in CSV_ONLY:
        check_csv(tool, result.payload)
    else:
        check_json(catalog, tool, arguments, result.payload)
    if takes_csv(tool) and name not in JSON_EVEN_AS_CSV:
        as_csv = call(client, tool, {**arguments, "datatype": "csv"}, key_for(tool))
        assert as_csv.format == "csv", name
        check_csv(tool, as_csv.payload)


# Indicators share one interval enum: all of its values are swept on indicators of each kind of input (a price
# series, high/low/close, volume, extra parameters, the Hilbert family, intraday only); the other indicators get
# every other enum value (series types, MA types) on a cheap interval.
INTERVAL_SWEEP = {"SMA", "EMA", "ADX", "STOCH", "MACD", "BBANDS", "OBV", "HT_SINE", "VWAP", "SAR"}


def enum_cases() -> list[tuple[str, str, Any]]:
    cases = []
    for tool in load_catalog().tools:
        for p in tool.params:
            if not p.enum or p.name in ("datatype", "entitlement"):
                continue
            if tool.category == "technicals" and p.name == "interval" and tool.name not in INTERVAL_SWEEP:
                continue
            cases += [(tool.name, p.name, value) for value in p.enum]
    return cases


# make test asks each value of each parameter name once (its first tool); make test-slow every tool's.
@pytest.mark.parametrize("every_tool", [False, pytest.param(True, marks=pytest.mark.slow)], ids=["once", "every-tool"])
def test_every_enum_value_of_every_tool_answers(catalog: Catalog, every_tool: bool) -> None:
    """Each allowed value of each enum parameter (intervals, series types, MA types, maturities ...) answers data;
    in process, to keep the sweep fast."""
    failures = []
    cases = enum_cases()
    if not every_tool:
        cases = list({(param, str(value)): (name, param, value) for name, param, value in reversed(cases)}.values())
    for name, param, value in cases:
        tool = catalog.get(name)
        cheap = {"interval": "60min" if name == "VWAP" else "monthly"} if tool.category == "technicals" else {}
        arguments = valid_arguments(catalog, tool, **{**cheap, param: value})
        query = {"function": name, "apikey": key_for(tool), **{k: _wire_value(v) for k, v in arguments.items()}}
        reply = answer_query(query, Faults())
        body = reply.body.decode()
        if reply.content_type == "text/csv":
            ok = len(body.splitlines()) >= 2
        else:
            payload = json.loads(body)
            ok = bool(payload) and not {"Error Message", "Information", "Note"} & set(payload)
        if not ok:
            failures.append((name, param, value, body[:200]))
    assert failures == []


def test_premium_functions_need_a_premium_key(catalog: Catalog, client: UpstreamClient) -> None:
    for name in sorted(PREMIUM_FUNCTIONS):
        tool = catalog.get(name)
        with pytest.raises(PremiumRequired):
            client.call(tool, valid_arguments(catalog, tool), api_key=KEY)
        assert client.call(tool, valid_arguments(catalog, tool), api_key=PREMIUM_KEY).payload


# ---- specific shapes ----------------------------------------------------------------------------------


def test_indicator_outputs_and_meta_data(catalog: Catalog) -> None:
    query = {"apikey": KEY, "symbol": "IBM", "interval": "daily", "time_period": "20", "series_type": "close"}
    macd = json.loads(answer_query({**query, "function": "MACD"}, Faults()).body)
    assert list(macd["Meta Data"])[4:] == [
        "5.1: Fast Period", "5.2: Slow Period", "5.3: Signal Period", "6: Series Type", "7: Time Zone",
    ]  # fmt: skip
    newest = macd["Technical Analysis: MACD"][ANCHOR.isoformat()]
    assert float(newest["MACD_Hist"]) == pytest.approx(float(newest["MACD"]) - float(newest["MACD_Signal"]), abs=2e-4)
    bands = json.loads(answer_query({**query, "function": "BBANDS"}, Faults()).body)["Technical Analysis: BBANDS"]
    for row in bands.values():
        upper, middle, lower = (float(row[k]) for k in ("Real Upper Band", "Real Middle Band", "Real Lower Band"))
        assert lower <= middle <= upper
    for name, lo, hi in (("RSI", 0, 100), ("STOCH", 0, 100), ("WILLR", -100, 0), ("MFI", 0, 100), ("ADX", 0, 100),
                         ("AROON", 0, 100), ("ULTOSC", 0, 100), ("CMO", -100, 100), ("HT_SINE", -1, 1)):  # fmt: skip
        values = json.loads(answer_query({**query, "function": name}, Faults()).body)
        (table,) = (v for k, v in values.items() if k != "Meta Data")
        assert all(lo <= float(x) <= hi for row in table.values() for x in row.values()), name
    vwap = json.loads(answer_query({**query, "function": "VWAP", "interval": "15min"}, Faults()).body)
    assert next(iter(vwap["Technical Analysis: VWAP"])).startswith(ANCHOR.isoformat())


def test_fundamentals_agree_with_the_overview() -> None:
    def get(**params: str) -> Any:
        return json.loads(answer_query({"apikey": KEY, **params}, Faults()).body)

    overview = get(function="OVERVIEW", symbol="MSFT")
    income = get(function="INCOME_STATEMENT", symbol="MSFT")
    ttm = sum(int(q["totalRevenue"]) for q in income["quarterlyReports"][:4])
    assert abs(ttm - int(overview["RevenueTTM"])) <= 4
    earnings = get(function="EARNINGS", symbol="MSFT")
    eps = sum(float(q["reportedEPS"]) for q in earnings["quarterlyEarnings"][:4])
    assert eps == pytest.approx(float(overview["EPS"]), rel=0.02)
    dividends = get(function="DIVIDENDS", symbol="MSFT")["data"]
    assert dividends[0]["ex_dividend_date"] == overview["ExDividendDate"]
    assert dividends[0]["payment_date"] == overview["DividendDate"]
    sheet = get(function="BALANCE_SHEET", symbol="MSFT")["quarterlyReports"][0]
    assert int(sheet["totalAssets"]) == pytest.approx(
        int(sheet["totalCurrentAssets"]) + int(sheet["totalNonCurrentAssets"]), abs=2
    )
    assert int(sheet["totalAssets"]) == pytest.approx(
        int(sheet["totalLiabilities"]) + int(sheet["totalShareholderEquity"]), abs=2
    )
    assert get(function="INCOME_STATEMENT", symbol="NOPE") == {}
    spy = get(function="ETF_PROFILE", symbol="SPY")
    assert sum(float(h["weight"]) for h in spy["holdings"]) == pytest.approx(0.97, abs=0.01)
    assert {"AAPL", "MSFT", "NVDA"} <= {h["symbol"] for h in spy["holdings"]}


def test_functions_outside_the_catalog_that_used_to_be_listed_as_unsimulated() -> None:
    def get(**params: str) -> Any:
        return json.loads(answer_query({"apikey": KEY, **params}, Faults()).body)

    shares = get(function="SHARES_OUTSTANDING", symbol="AAPL")
    assert shares["symbol"] == "AAPL" and shares["data"][0]["shares_outstanding_basic"]
    overview = get(function="OVERVIEW", symbol="AAPL")
    assert int(shares["data"][0]["shares_outstanding_basic"]) == int(overview["SharesOutstanding"])
    assert get(function="PUT_CALL_RATIO", symbol="IBM")["endpoint"] == "Realtime Put Call Ratio"
    assert get(function="VOLUME_OPEN_INTEREST_RATIO", symbol="IBM")["data"]


def test_unknown_symbols_get_what_alpha_vantage_gives_them() -> None:
    def get(**params: str) -> Any:
        return json.loads(answer_query({"apikey": KEY, **params}, Faults()).body)

    invalid = "Invalid API call"
    for function in ("TIME_SERIES_DAILY_ADJUSTED", "TIME_SERIES_WEEKLY_ADJUSTED", "EMA", "MACD"):
        answer = get(function=function, symbol="NOPE", interval="daily", time_period="10", series_type="close",
                     apikey=PREMIUM_KEY)  # fmt: skip
        assert answer["Error Message"].startswith(invalid), function
    for function in ("INCOME_STATEMENT", "EARNINGS", "COMPANY_LOGO", "ETF_PROFILE", "INSIDER_TRANSACTIONS"):
        assert get(function=function, symbol="NOPE") == {}, function
    assert get(function="FX_DAILY", from_symbol="EUR", to_symbol="XYZ")["Error Message"].startswith(invalid)
    assert get(function="CONGRESS_TRADES", symbol="NOPE") == {"trades": []}


# ---- determinism ------------------------------------------------------------------------------------------


def all_queries(catalog: Catalog) -> list[dict[str, str]]:
    """One call per tool (valid arguments), and its CSV form where the tool offers one. Indicators use the
    weekly interval (60min for VWAP): the same arithmetic as daily, on a fifth of the points."""
    queries = []
    for tool in catalog.tools:
        cheap = {"interval": "60min" if tool.name == "VWAP" else "weekly"} if tool.category == "technicals" else {}
        arguments = valid_arguments(catalog, tool, **cheap)
        query = {"function": tool.name, "apikey": key_for(tool), **{k: _wire_value(v) for k, v in arguments.items()}}
        queries.append(query)
        if takes_csv(tool):
            queries.append({**query, "datatype": "csv"})
    return queries


def digests(queries: list[dict[str, str]]) -> list[str]:
    return [hashlib.sha256(answer_query(q, Faults()).body).hexdigest() for q in queries]


HTTP_DIGESTS: list[str] = []  # what test_same_request_same_bytes_for_every_tool received, for the next test


def test_same_request_same_bytes_for_every_tool(catalog: Catalog, sample: SampleUpstream) -> None:
    for query in all_queries(catalog):  # the bytes a client receives, twice
        url = sample.url + "?" + urllib.parse.urlencode(query)
        with urllib.request.urlopen(url, timeout=10) as one, urllib.request.urlopen(url, timeout=10) as two:
            first = one.read()
            assert two.read() == first, query["function"]
        HTTP_DIGESTS.append(hashlib.sha256(first).hexdigest())


@pytest.mark.slow
def test_same_bytes_from_a_cold_process_with_another_hash_seed(catalog: Catalog) -> None:
    """No answer depends on warm caches or on str hashing (set order, hash()): a fresh process agrees."""
    queries = all_queries(catalog)
    script = (
        "import json, sys\n"
        "from tests.test_sample_catalog import digests\n"
        "print(json.dumps(digests(json.load(sys.stdin))))\n"
    )
    # the child imports this module, which imports tests/sweeps.py as pytest makes it importable: from tests/
    tests = os.path.dirname(os.path.abspath(__file__))
    env = {
        **os.environ,
        "PYTHONHASHSEED": "12345",
        "PYTHONPATH": os.pathsep.join(filter(None, (tests, os.environ.get("PYTHONPATH")))),
    }
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    done = subprocess.run(
        [sys.executable, "-c", script], input=json.dumps(queries), capture_output=True, text=True, env=env,
        timeout=120, cwd=root, check=True,
    )  # fmt: skip
    assert json.loads(done.stdout) == (HTTP_DIGESTS or digests(queries))


# ---- the previously simulated answers, byte for byte ---------------------------------------------------------

# (faults, query parameters, sha256 of "<status> <content type>\n" + body); the key is "k" unless given
# Re-pinned on purpose since: OVERVIEW (the 25 fields Alpha Vantage added since 2024) and RSI/SMA (their Meta Data
# lost the fake's own "1. Information" line, which the real indicators do not have).
PINNED: list[tuple[dict[str, Any], dict[str, str], str]] = [
    (
        {},
        {"function": "GLOBAL_QUOTE", "symbol": "IBM"},
        "7102e3cbc37d048008c7675aa7117588fae3a4688eef59ffa77d83e931416430",
    ),
    (
        {},
        {"function": "GLOBAL_QUOTE", "symbol": "AAPL"},
        "b7515df02e92ef16f5043e43f95976b42dbc2c63a90262ade12d919457e473e3",
    ),
    (
        {},
        {"function": "GLOBAL_QUOTE", "symbol": "ibm", "datatype": "csv"},
        "9b25a850802e0a8c9f9fb2d18ecfd5d378d3d7486fde4287410109d888449449",
    ),
    (
        {},
        {"function": "GLOBAL_QUOTE", "symbol": "NOPE"},
        "cbf48ae16926776a56f53de46ee73817f9bbbbad7f36cc056af37a1234d3c14d",
    ),
    (
        {},
        {"function": "GLOBAL_QUOTE", "symbol": "NOPE", "datatype": "csv"},
        "01a9c9516ba1b538e9d5169fbd6963fc4b45235cfaf59dc23f4332416a5bd596",
    ),
    (
        {},
        {"function": "GLOBAL_QUOTE", "symbol": "SPY", "entitlement": "delayed"},
        "8e5a2ed5c32bce0a4241b3d5d7801f3c7f4cbf746da34dbbc8605d0f5785412a",
    ),
    (
        {},
        {"function": "GLOBAL_QUOTE", "symbol": "IBM", "entitlement": "realtime"},
        "fe6abdab6bb059208e8fc31b165689a1478e486e9fa21d4e4f6d369dc4e091fe",
    ),
    ({}, {"function": "GLOBAL_QUOTE"}, "eb739554b9193f6a585c75c400da2842333b3440d3a84f0f21d40143578d0d91"),
    (
        {},
        {"function": "TIME_SERIES_DAILY", "symbol": "IBM"},
        "108eb037aa27e154fd3e224f29c2929947a77615ccf8af4646089bde59b0a8fe",
    ),
    (
        {},
        {"function": "TIME_SERIES_DAILY", "symbol": "IBM", "outputsize": "full"},
        "c24039f5647a6d39bf6e10b4856cd834b3a5097e0ec6323b317e0874a9bc4811",
    ),
    (
        {},
        {"function": "TIME_SERIES_DAILY", "symbol": "MSFT", "datatype": "csv"},
        "a360367de1cf56231beff4228fcd86bb623794833ef330c37d90719c1c48dc30",
    ),
    (
        {},
        {"function": "TIME_SERIES_DAILY", "symbol": "TSLA", "outputsize": "compact"},
        "89beb276b6ff3f55dd9d70731c3fee7565671c6f8df7761b159973b49d4299bb",
    ),
    (
        {},
        {"function": "TIME_SERIES_DAILY", "symbol": "NVDA", "outputsize": "full", "datatype": "csv"},
        "f3005a9a5bbff453e17166989b994f83d878e9cf0a5b5286d022856f66f31a52",
    ),
    (
        {},
        {"function": "TIME_SERIES_DAILY", "symbol": "NOPE"},
        "fd2f72aa1556c1436975b78dd4d3a30c40e8b4fb05f82cb1852be6ee2caba1bb",
    ),
    (
        {},
        {"function": "TIME_SERIES_INTRADAY", "symbol": "IBM", "interval": "5min"},
        "21ed9beb1bffec71d0b8ed785af1523aa158f3663a695bc996399eefe9f7949d",
    ),
    (
        {},
        {"function": "TIME_SERIES_INTRADAY", "symbol": "AAPL", "interval": "1min", "outputsize": "full"},
        "9f81564a50abe75fa9740aac8532d18e32ab885d2272f01260bcd522300f6ca9",
    ),
    (
        {},
        {"function": "TIME_SERIES_INTRADAY", "symbol": "IBM", "interval": "60min", "month": "2020-01"},
        "63755f87fe795745402c96d1f87169170aaea83c2307e795b8f05b3b3ba2e338",
    ),
    (
        {},
        {"function": "TIME_SERIES_INTRADAY", "symbol": "MSFT", "interval": "15min", "extended_hours": "false"},
        "c2a32fdd879c0221b2544d753c9fa6e09ff37ca6af7bb796feac9acdcd3db34a",
    ),
    (
        {},
        {
            "function": "TIME_SERIES_INTRADAY",
            "symbol": "SPY",
            "interval": "30min",
            "datatype": "csv",
            "adjusted": "false",
        },
        "4182362e19cdf04c8d179163f9f1e5ff3e3e06e52b65e001882ace29a2fd7c47",
    ),
    (
        {},
        {"function": "TIME_SERIES_INTRADAY", "symbol": "IBM", "interval": "5min", "month": "2030-01"},
        "c0c3e38da67c14cfc8fcd665674be507ca16402656aca1382ce78dc14b9cda56",
    ),
    (
        {},
        {"function": "TIME_SERIES_WEEKLY", "symbol": "IBM"},
        "f23b71ad9fc59cea15783c19de35b14428a909fdc7772f3db6ed2410958f454e",
    ),
    (
        {},
        {"function": "TIME_SERIES_WEEKLY", "symbol": "SPY", "datatype": "csv"},
        "3a64298fe001550f424203311dd493a0f5391bf522f91607b7521b394734de21",
    ),
    (
        {},
        {"function": "TIME_SERIES_MONTHLY", "symbol": "IBM"},
        "7a076b891b0b0ee3310b6711e6437371e51178b04d132af759217792fd7a525c",
    ),
    (
        {},
        {"function": "TIME_SERIES_MONTHLY", "symbol": "AAPL", "datatype": "csv"},
        "aaced8d677a8027e9d35d805563db592b8fa0ef5c61dbed41bf96719467e2595",
    ),
    (
        {},
        {"function": "SYMBOL_SEARCH", "keywords": "ibm"},
        "9d21ff8d73403225b418942e71950a1a772b412e32be70566c4766b69cec502a",
    ),
    (
        {},
        {"function": "SYMBOL_SEARCH", "keywords": "micro"},
        "9ce7a87d42ac83d2035cc2ddf83aeca20ac1e86bfca0be113dc6431b18888c44",
    ),
    # Re-pinned when AMZN and GOOGL joined the universe: they match the keyword "a" (nothing else changed).
    (
        {},
        {"function": "SYMBOL_SEARCH", "keywords": "a"},
        "d8509a8d86cce1997c8927c59ca6dffa76db4494f2bdace59c8fd8bbfc6d6535",
    ),
    (
        {},
        {"function": "SYMBOL_SEARCH", "keywords": "tesla"},
        "687579699ab0247d3daa339a9befc01421dcd8ad65a031f9b18961a1ab566d9d",
    ),
    (
        {},
        {"function": "SYMBOL_SEARCH", "keywords": "xyz"},
        "408c3d9c08c1f37ae3558ae5052221c4d6f5dc6516fc167fffbaff43aa2bcd71",
    ),
    (
        {},
        {"function": "SYMBOL_SEARCH", "keywords": "trust"},
        "3078db447c732f4ea603ed61f805dc74c2ad8b5e41de95ad57788178ec4631c2",
    ),
    (
        {},
        {"function": "SYMBOL_SEARCH", "keywords": "app", "datatype": "csv"},
        "27e0ba9f0eec6f46cbe84c9a3be0ebb05246f28c9e95648b9b9c95296609e40c",
    ),
    ({}, {"function": "OVERVIEW", "symbol": "IBM"}, "21a7f15c379a5c7fa2bd80e6e1d8a86b24603632943bdb9ff56aac9f706ae91d"),
    ({}, {"function": "OVERVIEW", "symbol": "SPY"}, "ec9a51f24a03acc7a08223cf63ba58955c38d1118b4afec93af7a4954b2fba90"),
    (
        {},
        {"function": "OVERVIEW", "symbol": "NOPE"},
        "a5339ad0007bb09cc41736258c364bd40dd28778e69c75e0f3b0d25647fcdd7a",
    ),
    (
        {},
        {"function": "CURRENCY_EXCHANGE_RATE", "from_currency": "USD", "to_currency": "JPY"},
        "69dc76564df61147d39d026b88a06ed8f0936b240445b0fa3012ce4f3153fe8f",
    ),
    (
        {},
        {"function": "CURRENCY_EXCHANGE_RATE", "from_currency": "BTC", "to_currency": "USD"},
        "3a0ad239bcd27b56dc13a00cd05a637d74981f9511eb10886f16e8f6ab9986db",
    ),
    (
        {},
        {"function": "CURRENCY_EXCHANGE_RATE", "from_currency": "EUR", "to_currency": "GBP", "datatype": "csv"},
        "ef40211f02e58b40adec8e412d5153c829a8c58378b5ae157ec84c278004e847",
    ),
    (
        {},
        {"function": "CURRENCY_EXCHANGE_RATE", "from_currency": "XXX", "to_currency": "USD"},
        "4ae144b606821dfdc57c205bb5578f816ba7a6a777f3b07a3dddf8e538963c19",
    ),
    (
        {},
        {"function": "RSI", "symbol": "IBM", "interval": "daily", "time_period": "14", "series_type": "close"},
        "8b8749fd4c4d4a1fa115bc3f5b780dcf76be72ef3eed6f9df74968730e9e35c2",
    ),
    (
        {},
        {"function": "RSI", "symbol": "AAPL", "interval": "60min", "time_period": "10", "series_type": "open"},
        "450c535772c9f6b0794340d278ca9be45a590856091ab36e07ecbbf896b4e079",
    ),
    (
        {},
        {"function": "RSI", "symbol": "IBM", "interval": "weekly", "time_period": "14", "series_type": "close"},
        "1c489d36f28e269f501da53b2ab10fac4f0140c02ec959b933fd71043b026642",
    ),
    (
        {},
        {
            "function": "RSI",
            "symbol": "MSFT",
            "interval": "monthly",
            "time_period": "7",
            "series_type": "high",
            "datatype": "csv",
        },
        "eba258da6e67d05bfb125b70ddbb6af45f08c7247ea4ca638c6020d07e8942b5",
    ),
    (
        {},
        {"function": "SMA", "symbol": "IBM", "interval": "daily", "time_period": "20", "series_type": "close"},
        "2770bfa3893320c8dd9fcef6569d8b0492fdaa1ddbcc3930b6a0ce221200a26d",
    ),
    (
        {},
        {
            "function": "SMA",
            "symbol": "NVDA",
            "interval": "5min",
            "time_period": "50",
            "series_type": "low",
            "datatype": "csv",
        },
        "071708b087da0f5d4d1e384bf590f46f3b446de7b9dbcc8a11fdcee2c257f718",
    ),
    (
        {},
        {"function": "SMA", "symbol": "IBM", "interval": "daily", "series_type": "close"},
        "7b787d268ba4ccf0f9432980c4873bde717cefc891ee8053845fdab4aba06b87",
    ),
    ({}, {"function": "REAL_GDP"}, "297938e26a29c86b367054f3310d7155a4b3c1b36ed41b35ae64cb1972683dc6"),
    (
        {},
        {"function": "REAL_GDP", "interval": "quarterly"},
        "ce2ab6a78499c60b4cfed3ea4343eb281188de4d7c96fe4a907b2dcd4ac8c4f2",
    ),
    (
        {},
        {"function": "REAL_GDP", "interval": "annual", "datatype": "csv"},
        "bdd8e2e0f2f46a18c3405e5c85ca244cac3c56be851ae36e19a6bf794fe4e502",
    ),
    (
        {},
        {"function": "REAL_GDP", "interval": "weekly"},
        "d1b7299e11de8c65bdddfaa599447f65f756de4163790af6fe0f614ee567d0d3",
    ),
    ({}, {"function": "CPI"}, "731c90a52e75b4c7f0b519c7df8aa81ff833ee460d44b70a42c40fbfd89b3bbd"),
    (
        {},
        {"function": "CPI", "interval": "semiannual"},
        "0a758a144ffbdc428cdfd9b5716ff5c9b0984f41c1af37981355dcff1b8576e2",
    ),
    ({}, {"function": "CPI", "datatype": "csv"}, "a4b014c1a8a0d8cbbd197b8bd31a07418d1a972adf6d8a9d642d2f388cf7da75"),
    ({}, {"function": "NOT_A_FUNCTION"}, "c7205887b6845bf8d6c55b35f961b39c7819bbe3762922b65a75bf1aefa96909"),
    (
        {},
        {"function": "TIME_SERIES_DAILY_ADJUSTED", "symbol": "IBM"},
        "fe6abdab6bb059208e8fc31b165689a1478e486e9fa21d4e4f6d369dc4e091fe",
    ),
    (
        {},
        {"function": "REALTIME_BULK_QUOTES", "symbol": "IBM,AAPL"},
        "fe6abdab6bb059208e8fc31b165689a1478e486e9fa21d4e4f6d369dc4e091fe",
    ),
    (
        {},
        {"function": "GLOBAL_QUOTE", "symbol": "IBM", "apikey": "ratelimited"},
        "3b8065922cf779bdd76b6646c87bd0524c0ee58c84768ffef0f582e4ab201eb3",
    ),
    (
        {},
        {"function": "GLOBAL_QUOTE", "symbol": "IBM", "apikey": "invalid-key"},
        "97ba6df9574d090d7cf49840c652747bb15c4b3854ea304f92b631c418c25850",
    ),
    (
        {},
        {"function": "GLOBAL_QUOTE", "symbol": "IBM", "apikey": ""},
        "97ba6df9574d090d7cf49840c652747bb15c4b3854ea304f92b631c418c25850",
    ),
    (
        {"malformed": True},
        {"function": "GLOBAL_QUOTE", "symbol": "IBM"},
        "813087da22e82e5d200c10222bdf948e7d896393b7f292fcf44cd5246e6ff2ba",
    ),
    (
        {"malformed": True},
        {"function": "TIME_SERIES_DAILY", "symbol": "IBM", "datatype": "csv"},
        "19a07a4dfb3e460178b42ec7421b69dabd54d4a8bb6dbce61318e67a4c2a8091",
    ),
    (
        {"huge": True},
        {"function": "TIME_SERIES_MONTHLY", "symbol": "MSFT"},
        "2341cc5963999b0d00f61db81b9529670b341d9a1c6a1140f2542becbf674524",
    ),
    (
        {"huge": True},
        {"function": "TIME_SERIES_INTRADAY", "symbol": "IBM", "interval": "60min", "datatype": "csv"},
        "a63962e98db75cd83b22c3b77e5c89a43e533dccb0bd89deea0477a982f8f778",
    ),
    (
        {},
        {
            "function": "RSI",
            "symbol": "IBM",
            "interval": "15min",
            "time_period": "14",
            "series_type": "close",
            "month": "2020-01",
        },
        "e6086b11007bf0e770c222b241b1e7fb30bf42573dc765269d8c717cc47ac15b",
    ),
    (
        {},
        {"function": "SMA", "symbol": "TSLA", "interval": "1min", "time_period": "9", "series_type": "open"},
        "5ce3088cb8d4ee7016e574ae29b4d0b3ca92df347106717cb6bad24b862f9af8",
    ),
]


def digest(faults: dict[str, Any], params: dict[str, str]) -> str:
    reply = answer_query({"apikey": "k", **params}, Faults(**faults))
    return hashlib.sha256(f"{reply.status} {reply.content_type}\n".encode() + reply.body).hexdigest()


@pytest.mark.parametrize(("faults", "params", "expected"), PINNED, ids=[str(i) for i in range(len(PINNED))])
def test_previously_simulated_answers_are_unchanged(
    faults: dict[str, Any], params: dict[str, str], expected: str
) -> None:
    assert digest(faults, params) == expected, params
