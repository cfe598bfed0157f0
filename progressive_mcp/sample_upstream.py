"""An offline stand-in for Alpha Vantage that serves deterministic SYNTHETIC data over local HTTP.

Run it, then point the product's base URL at it instead of https://www.alphavantage.co/query::

    python -m progressive_mcp.sample_upstream --port 8765
    curl 'http://127.0.0.1:8765/query?function=GLOBAL_QUOTE&symbol=IBM&apikey=demo'

or, inside a test::

    with SampleUpstream() as upstream:
        urllib.request.urlopen(upstream.url + "?function=TIME_SERIES_DAILY&symbol=IBM&apikey=k").read()

Every number is made up: prices are a random walk seeded from ``zlib.crc32(symbol)`` and dated back
from a fixed anchor day (``ANCHOR``), so every run answers the same bytes and nothing ever touches the
network. Responses copy Alpha Vantage's wire format (field names, newest-first ordering, HTTP-200 error
bodies, the rate-limit notice that echoes the API key) and carry ``X-Sample-Data: synthetic``; each
"Meta Data" block says "Sample data (synthetic, offline)" in its "1. Information" field.

``Faults`` switches on misbehaviour, in process through ``SampleUpstream.faults`` (or ``update_faults``),
out of process through ``POST /_sample/faults`` with a JSON object of fields, or with the CLI flags:

==================  ==================  =====================================================================
field               flag                the answer to every /query request
==================  ==================  =====================================================================
``delay_s``         ``--delay S``       comes after sleeping S seconds (a timeout)
``disconnect``      ``--disconnect``    never comes: the connection is closed at once (a dropped connection)
``status``          ``--status N``      is HTTP N with a small nginx-style HTML page (500, 502, 503, 429 ...)
``retry_after``     ``--retry-after S`` carries ``Retry-After: S`` (pair it with status 429 or 503)
``empty``           ``--empty``         is HTTP 200 with an empty body
``html``            ``--html``          is HTTP 200 with an HTML error page (a proxy or maintenance page)
``body_mb``         ``--body-mb M``     is an M MB JSON body, streamed in chunks without Content-Length
``rate_limit``      ``--rate-limit``    is Alpha Vantage's HTTP-200 daily rate-limit notice (it echoes the key)
``invalid_key``     ``--invalid-key``   is Alpha Vantage's HTTP-200 invalid-key error, whatever key came
``malformed``       ``--malformed``     is JSON cut in half
``huge``            ``--huge``          carries tens of thousands of rows for TIME_SERIES_* (several MB)
``trickle_s``       ``--trickle S``     (whatever it is) is sent one byte at a time, S seconds apart
==================  ==================  =====================================================================

Without the faults, the API key ``ratelimited`` gets the rate-limit notice, keys starting with
``invalid`` get the invalid-key error, and premium functions or ``entitlement=realtime`` get the
premium notice. A refused connection needs no answer at all: ``refuse_connections()`` closes the
listening socket (in process only) and ``accept_connections()`` opens it again on the same port.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import dataclasses
import datetime as dt
import http
import io
import json
import math
import random
import socket
import sys
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import lru_cache
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, cast
from urllib.parse import parse_qsl, urlsplit

SAMPLE_LABEL = "Sample data (synthetic, offline)"
DESCRIPTION = "Serve deterministic SYNTHETIC Alpha Vantage-shaped data on a local port (no network)."
ANCHOR = dt.date(2026, 11, 20)  # a Friday; the "latest trading day" of every series, forever
COMPACT_POINTS = 100
FULL_TRADING_DAYS = 20 * 52 * 5  # ~20 years of Mon-Fri trading days
HUGE_ROWS = 30_000  # with Alpha Vantage's 4-space indentation this is ~6-7 MB of JSON
TIME_ZONE = "US/Eastern"

DOCS_URL = "https://www.alphavantage.co/documentation/"
APIKEY_ERROR = (
    "the parameter apikey is invalid or missing. Please claim your free API key on "
    "(https://www.alphavantage.co/support/#api-key). It should take less than 20 seconds."
)
PREMIUM_NOTICE = (
    "Thank you for using Alpha Vantage! This is a premium endpoint. You may subscribe to any of the "
    "premium plans at https://www.alphavantage.co/premium/ to instantly unlock all premium endpoints"
)
RATE_LIMIT_KEY = "ratelimited"  # this API key always gets the daily-limit notice


def rate_limit_notice(apikey: str) -> str:
    """Alpha Vantage's daily-limit notice; like the real service it echoes the caller's key."""
    return (
        f"We have detected your API key as {apikey} and our standard API rate limit is 25 requests per "
        "day. Please subscribe to any of the premium plans at https://www.alphavantage.co/premium/ to "
        "instantly remove all daily rate limits."
    )


@dataclass
class Faults:
    """Misbehaviour switches; all off by default. Applied in the order delay, disconnect, status (with
    retry_after), empty, html, body_mb, rate_limit, invalid_key, malformed; trickle_s paces whatever is sent.

    ``huge`` makes every TIME_SERIES_* answer carry ``HUGE_ROWS`` bars whatever the outputsize: intraday
    bars keep their interval; daily, weekly and monthly answers use trading-day dates (a monthly series
    that long would run past year 1).
    """

    delay_s: float = 0.0  # sleep before answering
    status: int | None = None  # answer every /query request with this HTTP status and a small text/HTML body
    malformed: bool = False  # answer 200 with a body that is not valid JSON (truncated)
    huge: bool = False  # answer time series with a very large body (tens of thousands of rows, several MB)
    rate_limit: bool = False  # answer every /query with the HTTP-200 rate-limit "Information" body
    retry_after: float | None = None  # add a Retry-After header (seconds) to every /query answer
    trickle_s: float = 0.0  # send the body one byte at a time, this many seconds apart
    empty: bool = False  # answer 200 with an empty body
    html: bool = False  # answer 200 with an HTML error page instead of data
    body_mb: float = 0.0  # answer 200 with a JSON body of this many MB, streamed (chunked transfer encoding)
    disconnect: bool = False  # close the connection without answering
    invalid_key: bool = False  # answer the invalid-key error body whatever the key


# --------------------------------------------------------------------------------------------------
# The synthetic universe
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Company:
    symbol: str
    name: str
    asset_type: str  # OVERVIEW's AssetType
    search_type: str  # SYMBOL_SEARCH's "3. type"
    exchange: str
    sector: str
    industry: str
    cik: str
    fiscal_year_end: str
    last_close: float  # close on ANCHOR; the walk runs backwards from here
    daily_vol: float  # standard deviation of daily log returns
    volume: int  # typical daily share volume


COMPANIES: dict[str, Company] = {
    c.symbol: c
    for c in (
        Company(
            "IBM", "International Business Machines Corp", "Common Stock", "Equity", "NYSE", "TECHNOLOGY",
            "INFORMATION TECHNOLOGY SERVICES", "51143", "December", 245.0, 0.013, 4_200_000,
        ),
        Company(
            "AAPL", "Apple Inc", "Common Stock", "Equity", "NASDAQ", "TECHNOLOGY", "CONSUMER ELECTRONICS",
            "320193", "September", 232.0, 0.016, 55_000_000,
        ),
        Company(
            "MSFT", "Microsoft Corporation", "Common Stock", "Equity", "NASDAQ", "TECHNOLOGY",
            "SOFTWARE - INFRASTRUCTURE", "789019", "June", 425.0, 0.015, 21_000_000,
        ),
        Company(
            "NVDA", "NVIDIA Corporation", "Common Stock", "Equity", "NASDAQ", "TECHNOLOGY", "SEMICONDUCTORS",
            "1045810", "January", 145.0, 0.028, 240_000_000,
        ),
        Company(
            "TSLA", "Tesla Inc", "Common Stock", "Equity", "NASDAQ", "CONSUMER CYCLICAL",
            "AUTO MANUFACTURERS", "1318605", "December", 340.0, 0.032, 95_000_000,
        ),
        Company(
            "SPY", "SPDR S&P 500 ETF Trust", "ETF", "ETF", "NYSE ARCA", "FINANCIAL SERVICES",
            "ASSET MANAGEMENT", "884394", "September", 590.0, 0.010, 60_000_000,
        ),
    )
}  # fmt: skip

# USD value of one unit; the exchange rate is a ratio of two of these.
CURRENCIES: dict[str, tuple[str, float]] = {
    "USD": ("United States Dollar", 1.0),
    "EUR": ("Euro", 1.0842),
    "GBP": ("British Pound Sterling", 1.2716),
    "JPY": ("Japanese Yen", 0.006607),
    "BTC": ("Bitcoin", 68_231.55),
    "ETH": ("Ethereum", 3_512.87),
}

INTRADAY_INTERVALS = {"1min": 1, "5min": 5, "15min": 15, "30min": 30, "60min": 60}
INDICATOR_INTERVALS = (*INTRADAY_INTERVALS, "daily", "weekly", "monthly")
SERIES_TYPES = ("open", "high", "low", "close")
QUOTE_FIELDS = (
    "01. symbol", "02. open", "03. high", "04. low", "05. price", "06. volume", "07. latest trading day",
    "08. previous close", "09. change", "10. change percent",
)  # fmt: skip
QUOTE_CSV_COLUMNS = (
    "symbol", "open", "high", "low", "price", "volume", "latestDay", "previousClose", "change",
    "changePercent",
)  # fmt: skip
# SYMBOL_SEARCH's CSV header; the JSON keys are the same names numbered "1. symbol" ... "9. matchScore"
SEARCH_COLUMNS = (
    "symbol", "name", "type", "region", "marketOpen", "marketClose", "timezone", "currency", "matchScore",
)  # fmt: skip
PREMIUM_FUNCTIONS = frozenset({"TIME_SERIES_DAILY_ADJUSTED", "REALTIME_BULK_QUOTES"})

# Real Alpha Vantage functions this server does not simulate: they answer an "Information" notice
# rather than the "does not exist" error, so a client can tell "unsupported here" from "typo".
UNSIMULATED_FUNCTIONS = frozenset(
    """
    TIME_SERIES_WEEKLY_ADJUSTED TIME_SERIES_MONTHLY_ADJUSTED MARKET_STATUS REALTIME_OPTIONS
    HISTORICAL_OPTIONS PUT_CALL_RATIO VOLUME_OPEN_INTEREST_RATIO NEWS_SENTIMENT EARNINGS_CALL_TRANSCRIPT
    TOP_GAINERS_LOSERS INSIDER_TRANSACTIONS INSTITUTIONAL_HOLDINGS ANALYTICS_FIXED_WINDOW
    ANALYTICS_SLIDING_WINDOW ETF_PROFILE DIVIDENDS SPLITS INCOME_STATEMENT BALANCE_SHEET CASH_FLOW
    SHARES_OUTSTANDING EARNINGS EARNINGS_ESTIMATES LISTING_STATUS EARNINGS_CALENDAR IPO_CALENDAR
    FX_INTRADAY FX_DAILY FX_WEEKLY FX_MONTHLY CRYPTO_INTRADAY DIGITAL_CURRENCY_DAILY
    DIGITAL_CURRENCY_WEEKLY DIGITAL_CURRENCY_MONTHLY WTI BRENT NATURAL_GAS COPPER ALUMINUM WHEAT CORN
    COTTON SUGAR COFFEE ALL_COMMODITIES GOLD_SILVER_SPOT GOLD_SILVER_HISTORY REAL_GDP_PER_CAPITA
    TREASURY_YIELD FEDERAL_FUNDS_RATE INFLATION RETAIL_SALES DURABLES UNEMPLOYMENT NONFARM_PAYROLL
    EMA WMA DEMA TEMA TRIMA KAMA MAMA VWAP T3 MACD MACDEXT STOCH STOCHF STOCHRSI WILLR ADX ADXR APO PPO
    MOM BOP CCI CMO ROC ROCR AROON AROONOSC MFI TRIX ULTOSC DX MINUS_DI PLUS_DI MINUS_DM PLUS_DM BBANDS
    MIDPOINT MIDPRICE SAR TRANGE ATR NATR AD ADOSC OBV HT_TRENDLINE HT_SINE HT_TRENDMODE HT_DCPERIOD
    HT_DCPHASE HT_PHASOR
    """.split()  # noqa: SIM905 - a word list reads better than 100 quoted strings
)


@dataclass(frozen=True)
class Bar:
    stamp: str  # "YYYY-MM-DD" or "YYYY-MM-DD HH:MM:SS"
    open: float
    high: float
    low: float
    close: float
    volume: int


def _seeded(*parts: object) -> random.Random:
    # crc32, not hash(): hash() of str is salted per process, which would break byte-identical answers.
    return random.Random(zlib.crc32("|".join(map(str, parts)).encode()))


def _trading_days_back(count: int, end: dt.date = ANCHOR) -> list[dt.date]:
    """The `count` Mon-Fri days up to and including `end`, newest first (no holiday calendar)."""
    days: list[dt.date] = []
    day = end
    while len(days) < count:
        if day.weekday() < 5:
            days.append(day)
        day -= dt.timedelta(days=1)
    return days


@lru_cache(maxsize=64)
def daily_bars(symbol: str, count: int) -> tuple[Bar, ...]:
    """`count` daily bars ending on ANCHOR, newest first.

    The walk runs backwards from the company's ``last_close`` and draws each day's numbers in a fixed
    order, so a shorter history is exactly the newest part of a longer one (compact is a slice of full).
    """
    company = COMPANIES[symbol]
    rng = _seeded("daily", symbol)
    sigma = company.daily_vol
    bars: list[Bar] = []
    close = company.last_close
    for day in _trading_days_back(count):
        ret = rng.gauss(0.0003, sigma)
        gap = rng.gauss(0.0, sigma * 0.3)
        up, down = abs(rng.gauss(0.0, sigma * 0.5)), abs(rng.gauss(0.0, sigma * 0.5))
        volume = int(company.volume * math.exp(rng.gauss(0.0, 0.35)))
        prev_close = close / math.exp(ret)
        open_ = prev_close * math.exp(gap)
        high = max(open_, close) * math.exp(up)
        low = min(open_, close) / math.exp(down)
        bars.append(Bar(day.isoformat(), round(open_, 4), round(high, 4), round(low, 4), round(close, 4), volume))
        close = prev_close
    return tuple(bars)


def _aggregate(bars: tuple[Bar, ...], key: Callable[[dt.date], object]) -> list[Bar]:
    """Roll newest-first daily bars up into periods; each period is stamped with its last trading day."""
    out: list[Bar] = []
    group: list[Bar] = []

    def flush() -> None:
        # group is newest first: group[0] closes the period, group[-1] opens it
        out.append(
            Bar(
                group[0].stamp,
                group[-1].open,
                max(b.high for b in group),
                min(b.low for b in group),
                group[0].close,
                sum(b.volume for b in group),
            )
        )

    current: object = None
    for bar in bars:
        k = key(dt.date.fromisoformat(bar.stamp))
        if group and k != current:
            flush()
            group = []
        current = k
        group.append(bar)
    if group:
        flush()
    return out


@lru_cache(maxsize=32)
def weekly_bars(symbol: str) -> tuple[Bar, ...]:
    return tuple(_aggregate(daily_bars(symbol, FULL_TRADING_DAYS), lambda d: d.isocalendar()[:2]))


@lru_cache(maxsize=32)
def monthly_bars(symbol: str) -> tuple[Bar, ...]:
    return tuple(_aggregate(daily_bars(symbol, FULL_TRADING_DAYS), lambda d: (d.year, d.month)))


@lru_cache(maxsize=256)  # a 1min day is ~960 bars; bound the memory
def _intraday_day(symbol: str, day: Bar, minutes: int) -> tuple[Bar, ...]:
    """One day's extended-hours (04:00-20:00) bars, oldest first: a Brownian bridge from open to close."""
    rng = _seeded("intraday", symbol, day.stamp, minutes)
    n = 16 * 60 // minutes
    sigma = COMPANIES[symbol].daily_vol / math.sqrt(n) * 0.6
    steps = [rng.gauss(0.0, 1.0) for _ in range(n)]
    walk = [0.0]
    for s in steps:
        walk.append(walk[-1] + s)
    drift = math.log(day.close / day.open)
    # pin both ends to the daily open/close and keep every point inside the daily range
    points = [
        min(max(day.open * math.exp(drift * j / n + sigma * (walk[j] - walk[n] * j / n)), day.low), day.high)
        for j in range(n + 1)
    ]
    start = dt.datetime.fromisoformat(day.stamp).replace(hour=4)
    bars: list[Bar] = []
    for j in range(n):
        stamp = start + dt.timedelta(minutes=minutes * j)
        o, c = points[j], points[j + 1]
        wiggle = abs(rng.gauss(0.0, sigma * 0.5))
        high = min(max(o, c) * math.exp(wiggle), day.high)
        low = max(min(o, c) / math.exp(wiggle), day.low)
        regular = dt.time(9, 30) <= stamp.time() < dt.time(16, 0)
        share = (1.0 if regular else 0.08) * rng.uniform(0.5, 1.5)
        volume = int(day.volume / (390 / minutes) * share)
        rounded = (round(o, 4), round(high, 4), round(low, 4), round(c, 4))
        bars.append(Bar(stamp.strftime("%Y-%m-%d %H:%M:%S"), *rounded, volume))
    return tuple(bars)


def intraday_bars(
    symbol: str, minutes: int, days: list[Bar], extended_hours: bool = True, limit: int | None = None
) -> list[Bar]:
    """Intraday bars of the given daily bars (newest first), newest first, at most `limit` of them."""
    out: list[Bar] = []
    for day in days:
        for bar in reversed(_intraday_day(symbol, day, minutes)):
            if extended_hours or "09:30:00" <= bar.stamp[11:] < "16:00:00":
                out.append(bar)
                if limit is not None and len(out) >= limit:
                    return out
    return out


def _month_days(symbol: str, month: str | None) -> list[Bar] | None:
    """The daily bars of `month` (YYYY-MM, default ANCHOR's month), newest first; None if out of range."""
    history = daily_bars(symbol, FULL_TRADING_DAYS)
    target = month or ANCHOR.isoformat()[:7]
    days = [b for b in history if b.stamp.startswith(target + "-")]
    return days or None


# --------------------------------------------------------------------------------------------------
# Answers
# --------------------------------------------------------------------------------------------------


@dataclass
class Answer:
    """A handler's result: the JSON payload, plus a CSV table when the function supports datatype=csv."""

    payload: dict[str, Any]
    csv_rows: list[list[str]] | None = None


class InvalidCall(Exception):
    """A missing or unusable parameter: becomes Alpha Vantage's "Invalid API call" error body."""


def _invalid_call(function: str) -> dict[str, Any]:
    message = f"Invalid API call. Please retry or visit the documentation ({DOCS_URL}) for {function}."
    return {"Error Message": message}


def _money(x: float) -> str:
    return f"{x:.4f}"


def _bar_json(b: Bar) -> dict[str, str]:
    return {
        "1. open": _money(b.open),
        "2. high": _money(b.high),
        "3. low": _money(b.low),
        "4. close": _money(b.close),
        "5. volume": str(b.volume),
    }


def _bars_csv(bars: list[Bar] | tuple[Bar, ...]) -> list[list[str]]:
    rows = [["timestamp", "open", "high", "low", "close", "volume"]]
    rows += [[b.stamp, _money(b.open), _money(b.high), _money(b.low), _money(b.close), str(b.volume)] for b in bars]
    return rows


class Params:
    """Query parameters of one call, with the function name for error messages."""

    def __init__(self, function: str, values: dict[str, str]) -> None:
        self.function = function
        self.values = values

    def get(self, name: str, default: str | None = None) -> str | None:
        value = self.values.get(name, "").strip()
        return value or default

    def require(self, name: str, choices: tuple[str, ...] | None = None) -> str:
        value = self.get(name)
        if value is None or (choices is not None and value not in choices):
            raise InvalidCall(name)
        return value

    def choice(self, name: str, choices: tuple[str, ...], default: str) -> str:
        value = self.get(name, default)
        if value not in choices:
            raise InvalidCall(name)
        return cast(str, value)

    def symbol(self) -> str:
        symbol = self.require("symbol").upper()
        if symbol not in COMPANIES:
            raise InvalidCall("symbol")
        return symbol


def _info(description: str) -> str:
    return f"{description}. {SAMPLE_LABEL}"


def _output_size(p: Params) -> str:
    return p.choice("outputsize", ("compact", "full"), "compact")


def time_series_daily(p: Params, faults: Faults) -> Answer:
    symbol = p.symbol()
    size = _output_size(p)
    count = HUGE_ROWS if faults.huge else (FULL_TRADING_DAYS if size == "full" else COMPACT_POINTS)
    bars = daily_bars(symbol, count)
    meta = {
        "1. Information": _info("Daily Prices (open, high, low, close) and Volumes"),
        "2. Symbol": symbol,
        "3. Last Refreshed": bars[0].stamp,
        "4. Output Size": "Full size" if size == "full" else "Compact",
        "5. Time Zone": TIME_ZONE,
    }
    payload = {"Meta Data": meta, "Time Series (Daily)": {b.stamp: _bar_json(b) for b in bars}}
    return Answer(payload, _bars_csv(bars))


def _periodic(p: Params, faults: Faults, label: str, key: str, source: Callable[[str], tuple[Bar, ...]]) -> Answer:
    symbol = p.symbol()
    bars = daily_bars(symbol, HUGE_ROWS) if faults.huge else source(symbol)
    meta = {
        "1. Information": _info(f"{label} Prices (open, high, low, close) and Volumes"),
        "2. Symbol": symbol,
        "3. Last Refreshed": bars[0].stamp,
        "4. Time Zone": TIME_ZONE,
    }
    return Answer({"Meta Data": meta, key: {b.stamp: _bar_json(b) for b in bars}}, _bars_csv(bars))


def time_series_weekly(p: Params, faults: Faults) -> Answer:
    return _periodic(p, faults, "Weekly", "Weekly Time Series", weekly_bars)


def time_series_monthly(p: Params, faults: Faults) -> Answer:
    return _periodic(p, faults, "Monthly", "Monthly Time Series", monthly_bars)


def time_series_intraday(p: Params, faults: Faults) -> Answer:
    symbol = p.symbol()
    interval = p.require("interval", tuple(INTRADAY_INTERVALS))
    minutes = INTRADAY_INTERVALS[interval]
    size = _output_size(p)
    extended = p.choice("extended_hours", ("true", "false"), "true") == "true"
    p.choice("adjusted", ("true", "false"), "true")  # accepted; synthetic prices have no splits to adjust
    month = p.get("month")
    if month is not None and (len(month) != 7 or month[4] != "-"):
        raise InvalidCall("month")
    if faults.huge:
        bars = intraday_bars(symbol, minutes, list(daily_bars(symbol, FULL_TRADING_DAYS)), extended, HUGE_ROWS)
    else:
        days = _month_days(symbol, month)
        if days is None:
            raise InvalidCall("month")
        bars = intraday_bars(symbol, minutes, days, extended, COMPACT_POINTS if size == "compact" else None)
    meta = {
        "1. Information": _info(f"Intraday ({interval}) open, high, low, close prices and volume"),
        "2. Symbol": symbol,
        "3. Last Refreshed": bars[0].stamp,
        "4. Interval": interval,
        "5. Output Size": "Full size" if size == "full" else "Compact",
        "6. Time Zone": TIME_ZONE,
    }
    payload = {"Meta Data": meta, f"Time Series ({interval})": {b.stamp: _bar_json(b) for b in bars}}
    return Answer(payload, _bars_csv(bars))


def global_quote(p: Params, faults: Faults) -> Answer:
    symbol = p.require("symbol").upper()
    header = list(QUOTE_CSV_COLUMNS)
    if symbol not in COMPANIES:
        return Answer({"Global Quote": {}}, [header])  # the real API's answer for an unknown ticker
    today, yesterday = daily_bars(symbol, COMPACT_POINTS)[:2]
    change = today.close - yesterday.close
    prices = (today.open, today.high, today.low, today.close)
    values = [symbol, *map(_money, prices), str(today.volume), today.stamp, _money(yesterday.close)]
    values += [_money(change), f"{change / yesterday.close * 100:.4f}%"]
    return Answer({"Global Quote": dict(zip(QUOTE_FIELDS, values, strict=True))}, [header, values])


def symbol_search(p: Params, faults: Faults) -> Answer:
    keywords = p.require("keywords").lower()
    scored: list[tuple[float, Company]] = []
    for c in COMPANIES.values():
        ticker, name = c.symbol.lower(), c.name.lower()
        if ticker == keywords:
            score = 1.0
        elif ticker.startswith(keywords):
            score = len(keywords) / len(ticker)
        elif keywords in name:
            score = len(keywords) / len(name)
        else:
            continue
        scored.append((score, c))
    scored.sort(key=lambda sc: (-sc[0], sc[1].symbol))
    # every known symbol is a US listing, so the market columns are the same for all of them
    us_market = ["United States", "09:30", "16:00", "UTC-04", "USD"]
    rows = [[c.symbol, c.name, c.search_type, *us_market, f"{s:.4f}"] for s, c in scored]
    names = [f"{i}. {h}" for i, h in enumerate(SEARCH_COLUMNS, start=1)]
    matches = [dict(zip(names, row, strict=True)) for row in rows]
    header = list(SEARCH_COLUMNS)
    return Answer({"bestMatches": matches}, [header, *rows])


def overview(p: Params, faults: Faults) -> Answer:
    symbol = p.require("symbol").upper()
    if symbol not in COMPANIES:
        return Answer({})  # the real API answers an empty object for tickers it has no profile for
    c = COMPANIES[symbol]
    year = daily_bars(symbol, 260)
    price = year[0].close
    rng = _seeded("overview", symbol)
    shares = int(c.volume * rng.uniform(60, 180))
    eps = price / rng.uniform(14, 45)
    revenue = int(shares * price / rng.uniform(3, 12))

    def avg(n: int) -> str:
        return _money(sum(b.close for b in year[:n]) / n)

    payload: dict[str, Any] = {
        "Symbol": symbol,
        "AssetType": c.asset_type,
        "Name": c.name,
        "Description": f"{SAMPLE_LABEL}. A made-up profile for {c.name}; no figure here is real.",
        "CIK": c.cik,
        "Exchange": c.exchange,
        "Currency": "USD",
        "Country": "USA",
        "Sector": c.sector,
        "Industry": c.industry,
        "FiscalYearEnd": c.fiscal_year_end,
        "LatestQuarter": "2026-09-30",
        "MarketCapitalization": str(int(shares * price)),
        "EBITDA": str(int(revenue * rng.uniform(0.15, 0.4))),
        "PERatio": f"{price / eps:.2f}",
        "BookValue": f"{price / rng.uniform(2, 20):.2f}",
        "DividendPerShare": f"{price * rng.uniform(0, 0.03):.2f}",
        "DividendYield": f"{rng.uniform(0, 0.03):.4f}",
        "EPS": f"{eps:.2f}",
        "ProfitMargin": f"{rng.uniform(0.05, 0.45):.3f}",
        "RevenueTTM": str(revenue),
        "AnalystTargetPrice": f"{price * rng.uniform(0.9, 1.25):.2f}",
        "Beta": f"{c.daily_vol / 0.011:.3f}",
        "52WeekHigh": _money(max(b.high for b in year)),
        "52WeekLow": _money(min(b.low for b in year)),
        "50DayMovingAverage": avg(50),
        "200DayMovingAverage": avg(200),
        "SharesOutstanding": str(shares),
        "DividendDate": "2026-12-10",
        "ExDividendDate": "2026-11-10",
    }
    return Answer(payload)


def currency_exchange_rate(p: Params, faults: Faults) -> Answer:
    codes = [p.require("from_currency").upper(), p.require("to_currency").upper()]
    if any(code not in CURRENCIES for code in codes):
        raise InvalidCall("currency")
    (from_name, from_usd), (to_name, to_usd) = (CURRENCIES[code] for code in codes)
    rate = from_usd / to_usd
    payload = {
        "Realtime Currency Exchange Rate": {
            "1. From_Currency Code": codes[0],
            "2. From_Currency Name": from_name,
            "3. To_Currency Code": codes[1],
            "4. To_Currency Name": to_name,
            "5. Exchange Rate": f"{rate:.8f}",
            "6. Last Refreshed": f"{ANCHOR.isoformat()} 21:00:01",
            "7. Time Zone": "UTC",
            "8. Bid Price": f"{rate * 0.9999:.8f}",
            "9. Ask Price": f"{rate * 1.0001:.8f}",
        }
    }
    return Answer(payload)


def _indicator_series(symbol: str, interval: str) -> list[Bar]:
    """The price bars an indicator is computed on, oldest first."""
    if interval in INTRADAY_INTERVALS:
        days = cast(list[Bar], _month_days(symbol, None))
        bars: list[Bar] = intraday_bars(symbol, INTRADAY_INTERVALS[interval], days)
    elif interval == "daily":
        bars = list(daily_bars(symbol, FULL_TRADING_DAYS))
    else:
        bars = list(weekly_bars(symbol) if interval == "weekly" else monthly_bars(symbol))
    return bars[::-1]


def _sma(values: list[float], period: int) -> list[float | None]:
    out: list[float | None] = [None] * len(values)
    total = 0.0
    for i, v in enumerate(values):
        total += v
        if i >= period:
            total -= values[i - period]
        if i >= period - 1:
            out[i] = total / period
    return out


def _rsi(values: list[float], period: int) -> list[float | None]:
    """Wilder's RSI: simple average of the first `period` moves, then Wilder smoothing."""
    out: list[float | None] = [None] * len(values)
    if len(values) <= period:
        return out
    moves = [values[i] - values[i - 1] for i in range(1, len(values))]
    gain = sum(max(m, 0.0) for m in moves[:period]) / period
    loss = sum(max(-m, 0.0) for m in moves[:period]) / period
    for i in range(period, len(values)):
        if i > period:
            m = moves[i - 1]
            gain = (gain * (period - 1) + max(m, 0.0)) / period
            loss = (loss * (period - 1) + max(-m, 0.0)) / period
        out[i] = 100.0 if loss == 0 else 100.0 - 100.0 / (1.0 + gain / loss)
    return out


def _indicator(p: Params, name: str, title: str, compute: Callable[[list[float], int], list[float | None]]) -> Answer:
    symbol = p.symbol()
    interval = p.require("interval", INDICATOR_INTERVALS)
    period_text = p.require("time_period")
    series_type = p.require("series_type", SERIES_TYPES)
    if not period_text.isdigit() or int(period_text) < 1:
        raise InvalidCall("time_period")
    period = int(period_text)
    bars = _indicator_series(symbol, interval)
    values = compute([getattr(b, series_type) for b in bars], period)
    points = [(b.stamp, v) for b, v in zip(bars, values, strict=True) if v is not None][::-1]
    meta: dict[str, Any] = {
        "1. Information": SAMPLE_LABEL,  # our addition; the real indicator Meta Data starts at "1: Symbol"
        "1: Symbol": symbol,
        "2: Indicator": title,
        "3: Last Refreshed": bars[-1].stamp,
        "4: Interval": interval,
        "5: Time Period": period,
        "6: Series Type": series_type,
        "7: Time Zone": TIME_ZONE,
    }
    payload = {"Meta Data": meta, f"Technical Analysis: {name}": {s: {name: _money(v)} for s, v in points}}
    return Answer(payload, [["time", name]] + [[s, _money(v)] for s, v in points])


def rsi(p: Params, faults: Faults) -> Answer:
    return _indicator(p, "RSI", "Relative Strength Index (RSI)", _rsi)


def sma(p: Params, faults: Faults) -> Answer:
    return _indicator(p, "SMA", "Simple Moving Average (SMA)", _sma)


def _periods(first: dt.date, last: dt.date, months: int) -> list[dt.date]:
    """First-of-month dates from `last` back to `first`, every `months` months, newest first."""
    out: list[dt.date] = []
    year, month = last.year, last.month
    while (year, month) >= (first.year, first.month):
        out.append(dt.date(year, month, 1))
        month -= months
        while month < 1:
            month += 12
            year -= 1
    return out


def _economic(
    p: Params, name: str, unit: str, intervals: dict[str, tuple[dt.date, int]], start: float, growth: float
) -> Answer:
    """A US macro series: deterministic compound growth with noise, newest first, like FRED-backed AV data."""
    interval = p.choice("interval", tuple(intervals), next(iter(intervals)))
    latest, months = intervals[interval]
    dates = _periods(dt.date(2000, 1, 1), latest, months)[::-1]
    rng = _seeded("economic", p.function, interval)
    level, rows = start, []
    for d in dates:
        level *= 1 + growth * months / 12 + rng.gauss(0.0, 0.004 * math.sqrt(months))
        rows.append([d.isoformat(), f"{level:.3f}"])
    rows.reverse()
    payload = {
        "name": f"{name} - {SAMPLE_LABEL}",
        "interval": interval,
        "unit": unit,
        "data": [{"date": d, "value": v} for d, v in rows],
    }
    return Answer(payload, [["timestamp", "value"], *rows])


def real_gdp(p: Params, faults: Faults) -> Answer:
    intervals = {"annual": (dt.date(2025, 1, 1), 12), "quarterly": (dt.date(2026, 7, 1), 3)}
    return _economic(p, "Real Gross Domestic Product", "billions of dollars", intervals, 13_500.0, 0.021)


def cpi(p: Params, faults: Faults) -> Answer:
    intervals = {"monthly": (dt.date(2026, 10, 1), 1), "semiannual": (dt.date(2026, 1, 1), 6)}
    name = "Consumer Price Index for all Urban Consumers"
    return _economic(p, name, "index 1982-1984=100", intervals, 168.8, 0.026)


Handler = Callable[[Params, Faults], Answer]
FUNCTIONS: dict[str, Handler] = {
    "GLOBAL_QUOTE": global_quote,
    "TIME_SERIES_DAILY": time_series_daily,
    "TIME_SERIES_INTRADAY": time_series_intraday,
    "TIME_SERIES_WEEKLY": time_series_weekly,
    "TIME_SERIES_MONTHLY": time_series_monthly,
    "SYMBOL_SEARCH": symbol_search,
    "OVERVIEW": overview,
    "CURRENCY_EXCHANGE_RATE": currency_exchange_rate,
    "RSI": rsi,
    "SMA": sma,
    "REAL_GDP": real_gdp,
    "CPI": cpi,
}


@dataclass
class Reply:
    status: int
    content_type: str
    body: bytes
    headers: dict[str, str] = dataclasses.field(default_factory=dict)
    stream: Iterator[bytes] | None = None  # sent with chunked transfer encoding instead of `body`
    trickle_s: float = 0.0  # pause after each byte of the body


DISCONNECT = Reply(0, "", b"")  # close the connection without answering
STREAM_CHUNK_BYTES = 64 * 1024
MAX_BODY_MB = 1024.0


def _padded_json(megabytes: float) -> Iterator[bytes]:
    """A valid JSON object of about `megabytes` MB, made a chunk at a time (never held in memory whole)."""
    yield b'{"Information": "' + SAMPLE_LABEL.encode() + b' padding", "padding": "'
    left = int(megabytes * 1024 * 1024)
    filler = b"x" * STREAM_CHUNK_BYTES
    while left > 0:
        yield filler[: min(left, STREAM_CHUNK_BYTES)]
        left -= STREAM_CHUNK_BYTES
    yield b'"}'


def _json_reply(payload: dict[str, Any], status: int = 200) -> Reply:
    # Alpha Vantage pretty-prints with 4-space indentation; copy it so body sizes are realistic.
    return Reply(status, "application/json", json.dumps(payload, indent=4).encode())


def _gateway_error(status: int) -> Reply:
    try:
        title = f"{status} {http.HTTPStatus(status).phrase}"
    except ValueError:
        title = f"{status} Error"
    page = f"<html>\r\n<head><title>{title}</title></head>\r\n<body>\r\n<center><h1>{title}</h1></center>\r\n"
    page += "<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n"
    return Reply(status, "text/html", page.encode())


def answer_query(params: dict[str, str], faults: Faults) -> Reply:
    """Everything /query does after logging and the delay: faults, auth, dispatch, rendering."""
    reply = _faulty_answer(params, faults)
    if reply is DISCONNECT:
        return reply
    if faults.retry_after is not None:
        reply.headers["Retry-After"] = f"{faults.retry_after:g}"
    if faults.trickle_s > 0:
        reply.trickle_s = faults.trickle_s
    return reply


def _faulty_answer(params: dict[str, str], faults: Faults) -> Reply:
    if faults.disconnect:
        return DISCONNECT
    if faults.status is not None:
        return _gateway_error(faults.status)
    if faults.empty:
        return Reply(200, "application/json", b"")
    if faults.html:
        page = "<!DOCTYPE html>\n<html><head><title>Service Unavailable</title></head><body><h1>We'll be back soon"
        page += "</h1><p>Scheduled maintenance is in progress.</p></body></html>\n"
        return Reply(200, "text/html; charset=utf-8", page.encode())
    if faults.body_mb > 0:
        return Reply(200, "application/json", b"", stream=_padded_json(faults.body_mb))
    if faults.malformed:
        # whatever we would have said, rendered as JSON and cut in half so no parser accepts it
        body = _answer_alpha_vantage(params, faults, json_only=True).body
        return Reply(200, "application/json", body[: max(1, len(body) // 2)])
    return _answer_alpha_vantage(params, faults)


def _answer_alpha_vantage(params: dict[str, str], faults: Faults, json_only: bool = False) -> Reply:
    apikey = params.get("apikey", "")
    if faults.rate_limit or apikey == RATE_LIMIT_KEY:
        return _json_reply({"Information": rate_limit_notice(apikey)})
    if faults.invalid_key or not apikey.strip() or apikey.startswith("invalid"):
        return _json_reply({"Error Message": APIKEY_ERROR})
    function = params.get("function", "").strip()
    handler = FUNCTIONS.get(function)
    if handler is None and function not in UNSIMULATED_FUNCTIONS and function not in PREMIUM_FUNCTIONS:
        return _json_reply({"Error Message": f"This API function ({function}) does not exist."})
    if function in PREMIUM_FUNCTIONS or params.get("entitlement") == "realtime":
        return _json_reply({"Information": PREMIUM_NOTICE})
    if handler is None:
        notice = f"The sample upstream has no data for {function} (synthetic offline server)."
        return _json_reply({"Information": notice})
    try:
        answer = handler(Params(function, params), faults)
    except InvalidCall:
        return _json_reply(_invalid_call(function))
    if params.get("datatype") == "csv" and answer.csv_rows is not None and not json_only:
        text = io.StringIO()
        csv.writer(text, lineterminator="\r\n").writerows(answer.csv_rows)
        return Reply(200, "text/csv", text.getvalue().encode())
    return _json_reply(answer.payload)


# --------------------------------------------------------------------------------------------------
# HTTP plumbing
# --------------------------------------------------------------------------------------------------


class _Server(ThreadingHTTPServer):
    upstream: SampleUpstream

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that gave up (a timeout test, a cancelled call) closes the socket mid-reply: not our error.
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


class _RequestHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, like the real service; every reply sets Content-Length
    # TCP_NODELAY: headers and body are separate writes; with Nagle on, the client's delayed ACK adds ~40 ms.
    disable_nagle_algorithm = True
    server_version = "SampleUpstream/1"

    @property
    def upstream(self) -> SampleUpstream:
        return cast(_Server, self.server).upstream

    def setup(self) -> None:
        super().setup()
        self.upstream._track(self.connection, True)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.upstream._track(self.connection, False)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # stay quiet: tests and the demo share a terminal

    def _send(self, reply: Reply) -> None:
        if reply is DISCONNECT:
            self.close_connection = True
            return
        self.send_response(reply.status)
        self.send_header("Content-Type", reply.content_type)
        if reply.stream is None:
            self.send_header("Content-Length", str(len(reply.body)))
        else:
            self.send_header("Transfer-Encoding", "chunked")
        self.send_header("X-Sample-Data", "synthetic")
        for name, value in reply.headers.items():
            self.send_header(name, value)
        self.end_headers()
        if self.command == "HEAD":
            return
        if reply.stream is None:
            self._write(reply.body, reply.trickle_s)
            return
        for chunk in reply.stream:
            self._write(b"%x\r\n" % len(chunk) + chunk + b"\r\n", reply.trickle_s)
        self._write(b"0\r\n\r\n", reply.trickle_s)

    def _write(self, data: bytes, trickle_s: float) -> None:
        if trickle_s <= 0:
            self.wfile.write(data)
            return
        for i in range(len(data)):
            self.wfile.write(data[i : i + 1])
            time.sleep(trickle_s)

    def _not_found(self) -> None:
        self._send(Reply(404, "text/plain", b"Not Found\n"))

    def _body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length > 0 else b""

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        if url.path == "/query":
            params = dict(parse_qsl(url.query, keep_blank_values=True))
            self._send(self.upstream._handle_query(params))
        elif url.path == "/_sample/requests":
            log = self.upstream.requests_snapshot()
            self._send(_json_reply({"count": len(log), "requests": log}))
        else:
            self._not_found()

    def do_POST(self) -> None:
        body = self._body()  # always drain it so the kept-alive connection stays in step
        path = urlsplit(self.path).path
        if path == "/_sample/faults":
            try:
                update = json.loads(body or b"{}")
            except ValueError as exc:
                self._send(_json_reply({"error": f"body is not valid JSON: {exc}"}, 400))
                return
            try:
                faults = self.upstream.update_faults(update)
            except ValueError as exc:
                self._send(_json_reply({"error": str(exc)}, 400))
                return
            self._send(_json_reply(dataclasses.asdict(faults)))
        elif path == "/_sample/reset":
            self.upstream.reset()
            self._send(_json_reply({"reset": True}))
        else:
            self._not_found()

    def _other(self) -> None:
        self._body()
        self._not_found()

    do_PUT = do_DELETE = do_PATCH = do_HEAD = do_OPTIONS = _other


_NUMBER_FAULTS = frozenset({"delay_s", "trickle_s", "body_mb", "retry_after"})


def _is_number(value: object) -> bool:
    return not isinstance(value, bool) and isinstance(value, int | float) and math.isfinite(value) and value >= 0


def _check_fault_value(name: str, value: object) -> None:
    if name in ("delay_s", "trickle_s"):
        if not _is_number(value):
            raise ValueError(f"{name} must be a number >= 0")
    elif name == "retry_after":
        if value is not None and not _is_number(value):
            raise ValueError("retry_after must be null or a number of seconds >= 0")
    elif name == "body_mb":
        if not _is_number(value) or cast(float, value) > MAX_BODY_MB:
            raise ValueError(f"body_mb must be a number between 0 and {MAX_BODY_MB:g}")
    elif name == "status":
        is_code = isinstance(value, int) and not isinstance(value, bool) and 100 <= value <= 599
        if value is not None and not is_code:
            raise ValueError("status must be null or an HTTP status code (100-599)")
    elif not isinstance(value, bool):
        raise ValueError(f"{name} must be true or false")


class SampleUpstream:
    """The synthetic Alpha Vantage server. Binds on construction, so `url` is known before `start()`."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0, faults: Faults | None = None) -> None:
        self.faults: Faults = faults if faults is not None else Faults()
        self.requests: list[dict[str, str]] = []  # the log shown to people: the key masked
        self._unmasked: list[dict[str, str]] = []  # the same with the key, for tests that check which key came
        self._lock = threading.Lock()
        self._connections: set[socket.socket] = set()
        self._thread: threading.Thread | None = None
        self._httpd = _Server((host, port), _RequestHandler)
        self._httpd.upstream = self
        self.host = host
        self.port: int = self._httpd.server_address[1]
        self.url = f"http://{host}:{self.port}/query"

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self) -> SampleUpstream:
        """Serve in a daemon thread and return self."""
        if self._thread is None:
            # a short poll interval keeps stop() fast: shutdown() waits for the loop's next poll
            serve = self._httpd.serve_forever
            options = {"poll_interval": 0.02}
            self._thread = threading.Thread(target=serve, kwargs=options, name="sample-upstream", daemon=True)
            self._thread.start()
        return self

    def serve_forever(self) -> None:
        """Serve on the calling thread until interrupted (the CLI's loop)."""
        try:
            self._httpd.serve_forever()
        finally:
            self._httpd.server_close()

    def stop(self) -> None:
        """Stop serving and drop kept-alive connections, so no client talks to a stopped server."""
        if self._thread is not None:
            self._httpd.shutdown()
            self._thread.join(timeout=5)
            self._thread = None
        self._httpd.server_close()
        with self._lock:
            conns = list(self._connections)
        for conn in conns:
            with contextlib.suppress(OSError):  # already closed by the client
                conn.shutdown(socket.SHUT_RDWR)

    def __enter__(self) -> SampleUpstream:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- state -----------------------------------------------------------------------------------

    def requests_snapshot(self, *, unmasked: bool = False) -> list[dict[str, str]]:
        """The query parameters of each request so far; `unmasked=True` keeps the apikey (tests only)."""
        with self._lock:
            return [dict(r) for r in (self._unmasked if unmasked else self.requests)]

    def update_faults(self, update: object) -> Faults:
        """Apply a partial update (field -> value) to `faults`; ValueError names any bad field."""
        if not isinstance(update, dict):
            raise ValueError("expected a JSON object of Faults fields")
        known = {f.name for f in dataclasses.fields(Faults)}
        unknown = sorted(set(update) - known)
        if unknown:
            names = ", ".join(sorted(known))
            raise ValueError(f"unknown Faults field(s): {', '.join(unknown)}; known fields: {names}")
        for name, value in update.items():
            _check_fault_value(name, value)
        with self._lock:
            for name, value in update.items():
                setattr(self.faults, name, float(value) if name in _NUMBER_FAULTS and value is not None else value)
            return dataclasses.replace(self.faults)

    def reset(self) -> None:
        """Clear faults and the request log, in place (tests may hold references to either)."""
        with self._lock:
            for f in dataclasses.fields(Faults):
                setattr(self.faults, f.name, f.default)
            self.requests.clear()
            self._unmasked.clear()

    def refuse_connections(self) -> None:
        """Stop listening, so connections are refused, until `accept_connections()` (in process only)."""
        self.stop()

    def accept_connections(self) -> None:
        """Listen again on the same port after `refuse_connections()`, and serve."""
        if self._thread is None:
            self._httpd = _Server((self.host, self.port), _RequestHandler)
            self._httpd.upstream = self
            self.start()

    def _track(self, conn: socket.socket, alive: bool) -> None:
        with self._lock:
            if alive:
                self._connections.add(conn)
            else:
                self._connections.discard(conn)

    def _handle_query(self, params: dict[str, str]) -> Reply:
        logged = {k: ("***" if k == "apikey" else v) for k, v in params.items()}
        with self._lock:
            self.requests.append(logged)
            self._unmasked.append(dict(params))
            faults = dataclasses.replace(self.faults)  # one consistent view for this request
        if faults.delay_s > 0:
            time.sleep(faults.delay_s)
        return answer_query(params, faults)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The sample upstream's flags (shared by `python -m progressive_mcp.sample_upstream` and the CLI)."""
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8765, help="port; 0 picks a free one (default 8765)")
    parser.add_argument("--delay", type=float, default=0.0, metavar="SECONDS", help="sleep before answering")
    parser.add_argument("--status", type=int, default=None, help="answer every /query with this HTTP status")
    parser.add_argument("--malformed", action="store_true", help="answer truncated, unparsable JSON")
    parser.add_argument("--huge", action="store_true", help="answer time series with several MB of rows")
    parser.add_argument("--rate-limit", action="store_true", help="answer the daily rate-limit notice")
    parser.add_argument("--retry-after", type=float, metavar="SECONDS", help="send a Retry-After header")
    parser.add_argument("--trickle", type=float, default=0.0, metavar="SECONDS", help="send bodies a byte at a time")
    parser.add_argument("--empty", action="store_true", help="answer HTTP 200 with an empty body")
    parser.add_argument("--html", action="store_true", help="answer HTTP 200 with an HTML error page")
    parser.add_argument("--body-mb", type=float, default=0.0, metavar="MB", help="answer a JSON body this large")
    parser.add_argument("--disconnect", action="store_true", help="close connections without answering")
    parser.add_argument("--invalid-key", action="store_true", help="answer the invalid-key error for any key")


def run(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    """Serve synthetic Alpha Vantage data as `args` (from `add_arguments`) say, until Ctrl-C."""
    faults = Faults(
        args.delay,
        args.status,
        malformed=args.malformed,
        huge=args.huge,
        rate_limit=args.rate_limit,
        retry_after=args.retry_after,
        trickle_s=args.trickle,
        empty=args.empty,
        html=args.html,
        body_mb=args.body_mb,
        disconnect=args.disconnect,
        invalid_key=args.invalid_key,
    )
    for field in dataclasses.fields(Faults):
        try:
            _check_fault_value(field.name, getattr(faults, field.name))
        except ValueError as exc:
            parser.error(str(exc))
    try:
        upstream = SampleUpstream(args.host, args.port, faults)
    except OSError as exc:
        print(f"sample upstream: cannot listen on {args.host}:{args.port}: {exc}", file=sys.stderr)
        return 1
    print(f"sample upstream (synthetic data) listening on {upstream.url}", file=sys.stderr, flush=True)
    with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C is the normal way to stop
        upstream.serve_forever()
    return 0


def main(argv: list[str] | None = None) -> int:
    """CLI: serve synthetic Alpha Vantage data until Ctrl-C."""
    parser = argparse.ArgumentParser(
        prog="python -m progressive_mcp.sample_upstream",
        description=DESCRIPTION,
    )
    add_arguments(parser)
    return run(parser.parse_args(argv), parser)


if __name__ == "__main__":
    raise SystemExit(main())
