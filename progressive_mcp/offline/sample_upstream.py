"""An offline stand-in for Alpha Vantage that serves deterministic SYNTHETIC data over local HTTP.

Run it, then point the product's base URL at it instead of https://www.alphavantage.co/query::

    python -m progressive_mcp.offline.sample_upstream --port 8765
    curl 'http://127.0.0.1:8765/query?function=GLOBAL_QUOTE&symbol=IBM&apikey=demo'

or, inside a test::

    with SampleUpstream() as upstream:
        urllib.request.urlopen(upstream.url + "?function=TIME_SERIES_DAILY&symbol=IBM&apikey=k").read()

Every number is made up: prices are a random walk seeded from ``zlib.crc32(symbol)`` and dated back
from a fixed anchor day (``ANCHOR``), so every run answers the same bytes and nothing ever touches the
network. Responses copy Alpha Vantage's wire format (field names, newest-first ordering, HTTP-200 error
bodies, the rate-limit notice that echoes the API key) and carry ``X-Sample-Data: synthetic``; each
"Meta Data" block of a price series says "Sample data (synthetic, offline)" in its "1. Information" field (the
technical indicators' Meta Data has no such field upstream, so theirs do not), and answers
without one say so in a text field of their own (a name, summary, message or description).

Every function of the bundled catalog (spec/alphavantage.yaml, 128 of them) answers, in JSON and, where
Alpha Vantage offers it, in CSV (LISTING_STATUS, EARNINGS_CALENDAR and IPO_CALENDAR answer CSV only):

- stocks: quotes, intraday/daily/weekly/monthly series (adjusted too), bulk quotes and bid/ask, market status;
- options: live and historical chains with greeks (Black-Scholes on the walk), fair values, put/call and
  volume/open-interest ratios;
- intelligence: news with sentiment, earnings-call transcripts, top movers, insider and institutional
  holdings, fixed- and sliding-window return analytics;
- fundamentals: overview, ETF profile, dividends, splits, income statement, balance sheet, cash flow, earnings
  and estimates (one consistent set of made-up books per company, matching OVERVIEW's TTM figures), logos,
  listings and the earnings and IPO calendars;
- forex and crypto (exchange rates, intraday/daily/weekly/monthly), commodities and gold/silver, US economic
  indicators, index levels and the index catalog, congressional trades and a politician roster;
- all technical indicators, computed on the walk (textbook formulas; MAMA and the HT_* family simplified).

Three real functions outside the catalog answer too: SHARES_OUTSTANDING, and PUT_CALL_RATIO and
VOLUME_OPEN_INTEREST_RATIO (older names of the REALTIME_ ones). Any other name gets "does not exist".

The universe is small: the stocks and funds in ``COMPANIES`` (IBM, AAPL, MSFT, NVDA, TSLA, SPY, AMZN, GOOGL; QQQ too for
ETF_PROFILE), the currencies in ``CURRENCIES``, the indices in ``INDICES``. An unknown ticker gets what Alpha
Vantage gives it: an "Invalid API call" error for series, an empty answer for profiles and statements. People,
firms, tickers of small caps, headlines and URLs (on example.com-style domains) are all invented.

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
``invalid`` get the invalid-key error, and premium functions (``PREMIUM_FUNCTIONS``) or
``entitlement=realtime`` get the premium notice unless the key starts with ``premium`` (a premium plan).
A refused connection needs no answer at all: ``refuse_connections()`` closes the listening socket (in
process only) and ``accept_connections()`` opens it again on the same port.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import dataclasses
import datetime as dt
import http
import io
import itertools
import json
import math
import random
import statistics
import sys
import time
import zlib
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, cast
from urllib.parse import parse_qsl, urlsplit

from progressive_mcp.offline import sample_data
from progressive_mcp.offline.serving import LoopbackServer, ServedUpstream, TrackedHandler, record

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
        Company(
            "AMZN", "Amazon.com Inc", "Common Stock", "Equity", "NASDAQ", "CONSUMER CYCLICAL",
            "INTERNET RETAIL", "1018724", "December", 205.0, 0.020, 45_000_000,
        ),
        Company(
            "GOOGL", "Alphabet Inc Class A", "Common Stock", "Equity", "NASDAQ", "COMMUNICATION SERVICES",
            "INTERNET CONTENT & INFORMATION", "1652044", "December", 175.0, 0.019, 30_000_000,
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
    csv_only: bool = False  # always CSV, whatever the datatype (LISTING_STATUS and the calendars)


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
    # The fields Alpha Vantage's OVERVIEW has added since (2024-2025), as strings like the rest.
    ratings = [int(v) for v in rng.sample(range(0, 30), 5)]
    payload.update(
        {
            "Address": f"1 {c.name.split()[0]} Way, Sampletown, USA",
            "OfficialSite": f"https://www.{c.symbol.lower()}.example.com",
            "PEGRatio": f"{rng.uniform(0.5, 3):.3f}",
            "RevenuePerShareTTM": f"{revenue / shares:.2f}",
            "OperatingMarginTTM": f"{rng.uniform(0.05, 0.45):.3f}",
            "ReturnOnAssetsTTM": f"{rng.uniform(0.01, 0.25):.3f}",
            "ReturnOnEquityTTM": f"{rng.uniform(0.05, 0.6):.3f}",
            "GrossProfitTTM": str(int(revenue * rng.uniform(0.3, 0.7))),
            "DilutedEPSTTM": f"{eps * rng.uniform(0.97, 1.0):.2f}",
            "QuarterlyEarningsGrowthYOY": f"{rng.uniform(-0.2, 0.5):.3f}",
            "QuarterlyRevenueGrowthYOY": f"{rng.uniform(-0.1, 0.3):.3f}",
            "AnalystRatingStrongBuy": str(ratings[0]),
            "AnalystRatingBuy": str(ratings[1]),
            "AnalystRatingHold": str(ratings[2]),
            "AnalystRatingSell": str(ratings[3] // 5),
            "AnalystRatingStrongSell": str(ratings[4] // 10),
            "TrailingPE": f"{price / eps:.2f}",
            "ForwardPE": f"{price / eps * rng.uniform(0.7, 1.0):.2f}",
            "PriceToSalesRatioTTM": f"{shares * price / revenue:.3f}",
            "PriceToBookRatio": f"{rng.uniform(1, 40):.2f}",
            "EVToRevenue": f"{shares * price / revenue * rng.uniform(0.95, 1.1):.3f}",
            "EVToEBITDA": f"{rng.uniform(8, 40):.2f}",
            "SharesFloat": str(int(shares * rng.uniform(0.85, 0.99))),
            "PercentInsiders": f"{rng.uniform(0, 5):.3f}",
            "PercentInstitutions": f"{rng.uniform(40, 80):.3f}",
        }
    )
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


# --------------------------------------------------------------------------------------------------
# The rest of the catalog: shared pieces
# --------------------------------------------------------------------------------------------------

# Keys starting with this act like a premium plan: PREMIUM_FUNCTIONS and entitlement=realtime answer data.
PREMIUM_KEY_PREFIX = "premium"
MONTHS = (
    "January", "February", "March", "April", "May", "June", "July", "August", "September", "October", "November",
    "December",
)  # fmt: skip
# Made-up people: the sample universe never puts words or trades in a real person's name.
FIRST_NAMES = (
    "Avery", "Blake", "Casey", "Dana", "Emerson", "Finley", "Gray", "Harper", "Indra", "Jules", "Kendall", "Logan",
    "Morgan", "Noel", "Oakley", "Parker", "Quinn", "Reese", "Sawyer", "Tatum", "Umber", "Vale", "Wren", "Yael",
)  # fmt: skip
LAST_NAMES = (
    "Ashdown", "Brightwater", "Calloway", "Dunmore", "Ellery", "Fairbanks", "Greyson", "Hollis", "Iverly", "Jessop",
    "Kestrel", "Lindqvist", "Marlowe", "Northcott", "Oakhurst", "Pemberly", "Quillon", "Ravensworth", "Stroud",
    "Thackery", "Upton", "Verhoeven", "Whitlock", "Yardley",
)  # fmt: skip
# Made-up firms (banks on earnings calls, fund managers in 13F filings).
FIRMS = (
    "Sample Capital Markets", "Meridian Example Securities", "Synthetic Partners & Co", "Northgate Demo Research",
    "Placeholder Asset Management", "Fictional Advisors LLC", "Mock Street Investments", "Lorem Ipsum Capital",
    "Offline Index Funds", "Test Harbor Holdings", "Example Pension Trust", "Dummy Ridge Capital LP",
)  # fmt: skip


def _premium_plan(apikey: str) -> bool:
    return apikey.startswith(PREMIUM_KEY_PREFIX)


def _company_or_none(p: Params) -> Company | None:
    """The symbol's company, or None for a ticker the sample universe does not know (required either way)."""
    return COMPANIES.get(p.require("symbol").upper())


def _fmt(x: float, digits: int = 2) -> str:
    return f"{x:.{digits}f}"


def _person(*seed: object) -> tuple[str, str]:
    rng = _seeded("person", *seed)
    return rng.choice(FIRST_NAMES), rng.choice(LAST_NAMES)


def _weekday_on_or_after(day: dt.date) -> dt.date:
    while day.weekday() >= 5:
        day += dt.timedelta(days=1)
    return day


def _weekday_on_or_before(day: dt.date) -> dt.date:
    while day.weekday() >= 5:
        day -= dt.timedelta(days=1)
    return day


def _month_end(year: int, month: int) -> dt.date:
    first_next = dt.date(year + month // 12, month % 12 + 1, 1)
    return first_next - dt.timedelta(days=1)


def _add_months(day: dt.date, months: int) -> dt.date:
    index = day.year * 12 + day.month - 1 + months
    year, month = divmod(index, 12)
    return dt.date(year, month + 1, min(day.day, _month_end(year, month + 1).day))


def _third_friday(year: int, month: int) -> dt.date:
    first = dt.date(year, month, 1)
    return first + dt.timedelta(days=(4 - first.weekday()) % 7 + 14)


def _date_param(p: Params, name: str) -> dt.date | None:
    """A YYYY-MM-DD parameter, None when absent; anything else is an invalid call."""
    text = p.get(name)
    if text is None:
        return None
    try:
        if len(text) != 10:
            raise ValueError(text)
        return dt.date.fromisoformat(text)
    except ValueError:
        raise InvalidCall(name) from None


def _positive_int(p: Params, name: str, default: int | None = None, lo: int = 1, hi: int = 10_000) -> int:
    text = p.get(name)
    if text is None:
        if default is None:
            raise InvalidCall(name)
        return default
    if not text.isdigit() or not lo <= int(text) <= hi:
        raise InvalidCall(name)
    return int(text)


def _number(p: Params, name: str, default: float) -> float:
    text = p.get(name)
    if text is None:
        return default
    try:
        value = float(text)
    except ValueError:
        raise InvalidCall(name) from None
    if not math.isfinite(value) or value < 0:
        raise InvalidCall(name)
    return value


@lru_cache(maxsize=16)
def _profile(symbol: str) -> dict[str, Any]:
    """OVERVIEW's answer for a known symbol: the figures the other fundamentals stay consistent with."""
    return overview(Params("OVERVIEW", {"symbol": symbol}), Faults()).payload


@lru_cache(maxsize=16)
def _bars_by_date(symbol: str) -> dict[str, Bar]:
    return {b.stamp: b for b in daily_bars(symbol, FULL_TRADING_DAYS)}


def _close_on(symbol: str, day: dt.date) -> Bar:
    """The daily bar of `day`, or of the last trading day before it (inside the 20-year history)."""
    by_date = _bars_by_date(symbol)
    for _ in range(10):
        bar = by_date.get(day.isoformat())
        if bar is not None:
            return bar
        day -= dt.timedelta(days=1)
    return daily_bars(symbol, FULL_TRADING_DAYS)[-1]


@lru_cache(maxsize=64)
def _walk_bars(
    seed: str, count: int, last_close: float, vol: float, volume: float, every_day: bool = False
) -> tuple[Bar, ...]:
    """`count` daily bars ending on ANCHOR, newest first: daily_bars' backward walk for any instrument.

    `every_day` walks calendar days (crypto trades on weekends); otherwise Mon-Fri. Volumes are whole units;
    a `volume` of 0 gives none (forex, indices).
    """
    rng = _seeded("walk", seed)
    days = [ANCHOR - dt.timedelta(days=i) for i in range(count)] if every_day else _trading_days_back(count)
    bars: list[Bar] = []
    close = last_close
    for day in days:
        ret = rng.gauss(0.0002, vol)
        gap = rng.gauss(0.0, vol * 0.3)
        up, down = abs(rng.gauss(0.0, vol * 0.5)), abs(rng.gauss(0.0, vol * 0.5))
        units = int(volume * math.exp(rng.gauss(0.0, 0.35))) if volume else 0
        prev_close = close / math.exp(ret)
        open_ = prev_close * math.exp(gap)
        high = max(open_, close) * math.exp(up)
        low = min(open_, close) / math.exp(down)
        bars.append(Bar(day.isoformat(), open_, high, low, close, units))
        close = prev_close
    return tuple(bars)


@lru_cache(maxsize=256)
def _intraday_24h(seed: str, day: Bar, minutes: int, vol: float) -> tuple[Bar, ...]:
    """A round-the-clock day (forex, crypto) in `minutes` bars, oldest first: a bridge from open to close."""
    rng = _seeded("intraday-24h", seed, day.stamp, minutes)
    n = 24 * 60 // minutes
    sigma = vol / math.sqrt(n) * 0.6
    walk = [0.0]
    for _ in range(n):
        walk.append(walk[-1] + rng.gauss(0.0, 1.0))
    drift = math.log(day.close / day.open)
    points = [
        min(max(day.open * math.exp(drift * j / n + sigma * (walk[j] - walk[n] * j / n)), day.low), day.high)
        for j in range(n + 1)
    ]
    start = dt.datetime.fromisoformat(day.stamp)
    bars: list[Bar] = []
    for j in range(n):
        o, c = points[j], points[j + 1]
        wiggle = abs(rng.gauss(0.0, sigma * 0.5))
        high = min(max(o, c) * math.exp(wiggle), day.high)
        low = max(min(o, c) / math.exp(wiggle), day.low)
        units = int(day.volume / n * rng.uniform(0.4, 1.6)) if day.volume else 0
        stamp = (start + dt.timedelta(minutes=minutes * j)).strftime("%Y-%m-%d %H:%M:%S")
        bars.append(Bar(stamp, o, high, low, c, units))
    return tuple(bars)


def _intraday_24h_bars(seed: str, days: tuple[Bar, ...], minutes: int, vol: float, limit: int) -> list[Bar]:
    out: list[Bar] = []
    for day in days:
        for bar in reversed(_intraday_24h(seed, day, minutes, vol)):
            out.append(bar)
            if len(out) >= limit:
                return out
    return out


def _labelled(name: str) -> str:
    return f"{name} - {SAMPLE_LABEL}"


# --------------------------------------------------------------------------------------------------
# Stocks: adjusted series, bulk quotes, market status
# --------------------------------------------------------------------------------------------------


def _dividend_amount(symbol: str) -> float:
    """The latest quarterly dividend: a quarter of OVERVIEW's DividendPerShare."""
    return float(_profile(symbol)["DividendPerShare"]) / 4


@lru_cache(maxsize=16)
def _dividends(symbol: str, since: dt.date) -> tuple[tuple[dt.date, dt.date, dt.date, dt.date, float], ...]:
    """Quarterly dividends, newest first, back to `since`: (ex, declaration, record, payment, amount).

    The newest is the one OVERVIEW announces (ex-date 2026-11-10, paid 2026-12-10); going back, the amount
    shrinks by a steady yearly raise, so the history reads like a company that grows its payout.
    """
    rng = _seeded("dividends", symbol)
    raise_rate = rng.uniform(0.02, 0.08)
    amount = _dividend_amount(symbol)
    out = []
    quarter = 0
    while True:
        month = _add_months(dt.date(2026, 11, 10), -3 * quarter)
        ex = _weekday_on_or_after(month)
        if ex < since:
            break
        if amount >= 0.005:
            declared = _weekday_on_or_before(ex - dt.timedelta(days=rng.randint(14, 24)))
            paid = _weekday_on_or_after(_add_months(month, 1))
            out.append((ex, declared, ex, paid, round(amount, 2)))
        quarter += 1
        if quarter % 4 == 0:
            amount /= 1 + raise_rate
    return tuple(out)


def _dividends_by_day(symbol: str, since: dt.date) -> dict[str, float]:
    return {ex.isoformat(): amount for ex, _, _, _, amount in _dividends(symbol, since)}


def _adjusted_closes(symbol: str, bars: tuple[Bar, ...] | list[Bar]) -> list[float]:
    """Dividend-adjusted closes of newest-first daily bars (no splits happen inside the synthetic history)."""
    paid = _dividends_by_day(symbol, dt.date.fromisoformat(bars[-1].stamp))
    factor, out = 1.0, []
    for i, bar in enumerate(bars):
        out.append(bar.close * factor)
        amount = paid.get(bar.stamp)
        if amount and i + 1 < len(bars):
            factor *= 1 - amount / bars[i + 1].close
    return out


def time_series_daily_adjusted(p: Params, faults: Faults) -> Answer:
    symbol = p.symbol()
    size = _output_size(p)
    count = HUGE_ROWS if faults.huge else (FULL_TRADING_DAYS if size == "full" else COMPACT_POINTS)
    bars = daily_bars(symbol, count)
    adjusted = _adjusted_closes(symbol, bars)
    paid = _dividends_by_day(symbol, dt.date.fromisoformat(bars[-1].stamp))
    meta = {
        "1. Information": _info("Daily Time Series with Splits and Dividend Events"),
        "2. Symbol": symbol,
        "3. Last Refreshed": bars[0].stamp,
        "4. Output Size": "Full size" if size == "full" else "Compact",
        "5. Time Zone": TIME_ZONE,
    }
    rows = [
        [
            "timestamp",
            "open",
            "high",
            "low",
            "close",
            "adjusted_close",
            "volume",
            "dividend_amount",
            "split_coefficient",
        ]
    ]
    series: dict[str, dict[str, str]] = {}
    for b, adj in zip(bars, adjusted, strict=True):
        values = [_money(b.open), _money(b.high), _money(b.low), _money(b.close), _money(adj), str(b.volume)]
        values += [_money(paid.get(b.stamp, 0.0)), "1.0"]
        names = ("1. open", "2. high", "3. low", "4. close", "5. adjusted close", "6. volume", "7. dividend amount")
        series[b.stamp] = dict(zip((*names, "8. split coefficient"), values, strict=True))
        rows.append([b.stamp, *values])
    return Answer({"Meta Data": meta, "Time Series (Daily)": series}, rows)


def _periodic_adjusted(p: Params, faults: Faults, label: str, key: str, period: Callable[[dt.date], object]) -> Answer:
    symbol = p.symbol()
    daily = daily_bars(symbol, HUGE_ROWS if faults.huge else FULL_TRADING_DAYS)
    adjusted = dict(zip((b.stamp for b in daily), _adjusted_closes(symbol, daily), strict=True))
    paid = _dividends_by_day(symbol, dt.date.fromisoformat(daily[-1].stamp))
    bars = list(daily) if faults.huge else _aggregate(daily, period)
    dividends: dict[str, float] = {}
    current: object = None
    stamp = ""
    for day in daily:  # grouped exactly as _aggregate groups them: a period is stamped with its newest day
        group = day.stamp if faults.huge else period(dt.date.fromisoformat(day.stamp))
        if group != current:
            current, stamp = group, day.stamp
        dividends[stamp] = dividends.get(stamp, 0.0) + paid.get(day.stamp, 0.0)
    meta = {
        "1. Information": _info(f"{label} Adjusted Prices and Volumes"),
        "2. Symbol": symbol,
        "3. Last Refreshed": bars[0].stamp,
        "4. Time Zone": TIME_ZONE,
    }
    rows = [["timestamp", "open", "high", "low", "close", "adjusted close", "volume", "dividend amount"]]
    series: dict[str, dict[str, str]] = {}
    names = ("1. open", "2. high", "3. low", "4. close", "5. adjusted close", "6. volume", "7. dividend amount")
    for b in bars:
        values = [_money(b.open), _money(b.high), _money(b.low), _money(b.close), _money(adjusted[b.stamp])]
        values += [str(b.volume), _money(dividends.get(b.stamp, 0.0))]
        series[b.stamp] = dict(zip(names, values, strict=True))
        rows.append([b.stamp, *values])
    return Answer({"Meta Data": meta, key: series}, rows)


def time_series_weekly_adjusted(p: Params, faults: Faults) -> Answer:
    return _periodic_adjusted(p, faults, "Weekly", "Weekly Adjusted Time Series", lambda d: d.isocalendar()[:2])


def time_series_monthly_adjusted(p: Params, faults: Faults) -> Answer:
    return _periodic_adjusted(p, faults, "Monthly", "Monthly Adjusted Time Series", lambda d: (d.year, d.month))


def _bulk_symbols(p: Params) -> tuple[list[str], list[str]]:
    """The known and the unknown tickers of a comma-separated `symbol` list (at most 100)."""
    symbols = [s.strip().upper() for s in p.require("symbol").split(",") if s.strip()]
    if not symbols or len(symbols) > 100:
        raise InvalidCall("symbol")
    known = [s for s in dict.fromkeys(symbols) if s in COMPANIES]
    return known, [s for s in dict.fromkeys(symbols) if s not in COMPANIES]


def _bulk_answer(endpoint: str, rows: list[dict[str, str]], unknown: list[str], columns: list[str]) -> Answer:
    message = f"{SAMPLE_LABEL}." + (f" Unknown symbols skipped: {','.join(unknown)}." if unknown else "")
    payload = {"endpoint": endpoint, "message": message, "data": rows}
    return Answer(payload, [columns] + [[r[c] for c in columns] for r in rows])


def realtime_bulk_quotes(p: Params, faults: Faults) -> Answer:
    known, unknown = _bulk_symbols(p)
    rows = []
    for symbol in known:
        today, yesterday = daily_bars(symbol, COMPACT_POINTS)[:2]
        after = today.close * math.exp(_seeded("after-hours", symbol).gauss(0.0, COMPANIES[symbol].daily_vol * 0.3))
        change = today.close - yesterday.close
        rows.append(
            {
                "symbol": symbol,
                "timestamp": f"{today.stamp} 16:00:00.000",
                "open": _money(today.open),
                "high": _money(today.high),
                "low": _money(today.low),
                "close": _money(today.close),
                "volume": str(today.volume),
                "previous_close": _money(yesterday.close),
                "change": _money(change),
                "change_percent": _money(change / yesterday.close * 100),
                "extended_hours_quote": _money(after),
                "extended_hours_change": _money(after - today.close),
                "extended_hours_change_percent": _money((after / today.close - 1) * 100),
            }
        )
    columns = list(rows[0]) if rows else ["symbol", "timestamp", "open", "high", "low", "close", "volume"]
    return _bulk_answer("Realtime Bulk Quotes", rows, unknown, columns)


def realtime_bulk_bid_ask_prices(p: Params, faults: Faults) -> Answer:
    known, unknown = _bulk_symbols(p)
    rows = []
    for symbol in known:
        last = daily_bars(symbol, COMPACT_POINTS)[0].close
        rng = _seeded("bid-ask", symbol)
        spread = max(0.01, round(last * rng.uniform(0.00005, 0.0004), 2))
        bid = round(last - spread / 2, 2)
        rows.append(
            {
                "symbol": symbol,
                "timestamp": f"{ANCHOR.isoformat()} 16:00:00.000",
                "bid_price": _fmt(bid),
                "bid_size": str(rng.randint(1, 40) * 100),
                "ask_price": _fmt(bid + spread),
                "ask_size": str(rng.randint(1, 40) * 100),
            }
        )
    columns = ["symbol", "timestamp", "bid_price", "bid_size", "ask_price", "ask_size"]
    return _bulk_answer("Realtime Bulk Bid Ask Prices", rows, unknown, columns)


# (market type, region, primary exchanges, local open, local close, status at the anchor's US close)
MARKETS = (
    ("Equity", "United States", "NASDAQ, NYSE, AMEX, BATS", "09:30", "16:00", "closed"),
    ("Equity", "Canada", "Toronto, Toronto Ventures", "09:30", "16:00", "closed"),
    ("Equity", "United Kingdom", "London", "08:00", "16:30", "closed"),
    ("Equity", "Germany", "XETRA, Berlin, Frankfurt, Munich, Stuttgart", "08:00", "20:00", "closed"),
    ("Equity", "France", "Paris", "09:00", "17:30", "closed"),
    ("Equity", "Spain", "Barcelona", "09:00", "17:30", "closed"),
    ("Equity", "Portugal", "Lisbon", "08:00", "16:30", "closed"),
    ("Equity", "Japan", "Tokyo", "09:00", "15:00", "closed"),
    ("Equity", "India", "India", "09:15", "15:30", "closed"),
    ("Equity", "Mainland China", "Shanghai, Shenzhen", "09:30", "15:00", "closed"),
    ("Equity", "Hong Kong", "Hong Kong", "09:30", "16:00", "closed"),
    ("Equity", "Brazil", "Sao Paolo", "10:00", "17:30", "open"),
    ("Equity", "South Africa", "Johannesburg", "09:00", "17:00", "closed"),
    ("Forex", "Global", "Global", "00:00", "23:59", "open"),
    ("Cryptocurrency", "Global", "Global", "00:00", "23:59", "open"),
)


def market_status(p: Params, faults: Faults) -> Answer:
    markets = [
        {
            "market_type": kind,
            "region": region,
            "primary_exchanges": exchanges,
            "local_open": opens,
            "local_close": closes,
            "current_status": status,
            "notes": f"{SAMPLE_LABEL}: the status at {ANCHOR.isoformat()} 16:00 US/Eastern, always",
        }
        for kind, region, exchanges, opens, closes, status in MARKETS
    ]
    return Answer({"endpoint": "Market Status", "markets": markets})


# --------------------------------------------------------------------------------------------------
# Options
# --------------------------------------------------------------------------------------------------

RISK_FREE_RATE = 0.04


def _norm_cdf(x: float) -> float:
    return 0.5 * (1.0 + math.erf(x / math.sqrt(2.0)))


def _norm_pdf(x: float) -> float:
    return math.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)


def _expirations(day: dt.date) -> list[dt.date]:
    """The listed expiries on `day`: the next four Fridays, six monthly and two January (LEAPS) expiries."""
    fridays = [day + dt.timedelta(days=(4 - day.weekday()) % 7 + 7 * k) for k in range(4)]
    fridays = [f if f > day else f + dt.timedelta(days=28) for f in fridays]
    monthly = [_third_friday(_add_months(day, k).year, _add_months(day, k).month) for k in range(1, 7)]
    leaps = [_third_friday(day.year + k, 1) for k in (1, 2)]
    return sorted({d for d in (*fridays, *monthly, *leaps) if d > day})


def _strike_step(price: float) -> float:
    for limit, step in ((25, 1.0), (100, 2.5), (250, 5.0), (1000, 10.0)):
        if price < limit:
            return step
    return 50.0


@lru_cache(maxsize=32)
def _option_chain(symbol: str, day: dt.date) -> tuple[dict[str, Any], ...]:
    """Every contract of the chain on `day`, sorted by expiry, strike, then call before put (numbers as floats)."""
    bar = _close_on(symbol, day)
    day = dt.date.fromisoformat(bar.stamp)
    spot = bar.close
    base_iv = COMPANIES[symbol].daily_vol * math.sqrt(252) * _seeded("iv", symbol, day).uniform(0.9, 1.2)
    step = _strike_step(spot)
    centre = round(spot / step) * step
    contracts: list[dict[str, Any]] = []
    for expiry in _expirations(day):
        years = max((expiry - day).days, 1) / 365.0
        width = 6 if (expiry - day).days < 30 else 8
        for k in range(-width, width + 1):
            strike = centre + k * step
            if strike <= 0:
                continue
            moneyness = math.log(strike / spot)
            for kind in ("call", "put"):
                rng = _seeded("option", symbol, day, expiry, strike, kind)
                iv = base_iv * (1 + 1.5 * moneyness * moneyness - 0.25 * moneyness) * (1 + 0.1 / math.sqrt(years * 12))
                iv *= rng.uniform(0.97, 1.03)
                root = iv * math.sqrt(years)
                d1 = (moneyness * -1 + (RISK_FREE_RATE + iv * iv / 2) * years) / root
                d2 = d1 - root
                discount = strike * math.exp(-RISK_FREE_RATE * years)
                if kind == "call":
                    price = spot * _norm_cdf(d1) - discount * _norm_cdf(d2)
                    delta = _norm_cdf(d1)
                    theta = -spot * _norm_pdf(d1) * iv / (2 * math.sqrt(years)) - RISK_FREE_RATE * discount * _norm_cdf(
                        d2
                    )
                    rho = strike * years * math.exp(-RISK_FREE_RATE * years) * _norm_cdf(d2) / 100
                else:
                    price = discount * _norm_cdf(-d2) - spot * _norm_cdf(-d1)
                    delta = _norm_cdf(d1) - 1
                    theta = -spot * _norm_pdf(d1) * iv / (2 * math.sqrt(years)) + RISK_FREE_RATE * discount * _norm_cdf(
                        -d2
                    )
                    rho = -strike * years * math.exp(-RISK_FREE_RATE * years) * _norm_cdf(-d2) / 100
                mark = max(price, 0.01)
                spread = max(0.01, mark * rng.uniform(0.01, 0.06))
                near = math.exp(-50 * moneyness * moneyness)
                contracts.append(
                    {
                        "contractID": f"{symbol}{expiry:%y%m%d}{kind[0].upper()}{round(strike * 1000):08d}",
                        "symbol": symbol,
                        "expiration": expiry.isoformat(),
                        "strike": strike,
                        "type": kind,
                        "last": max(0.01, mark * rng.uniform(0.97, 1.03)),
                        "mark": mark,
                        "bid": max(0.0, mark - spread / 2),
                        "bid_size": rng.randint(1, 60),
                        "ask": mark + spread / 2,
                        "ask_size": rng.randint(1, 60),
                        "volume": int(COMPANIES[symbol].volume / 1000 * near * rng.uniform(0.0, 1.5)),
                        "open_interest": int(COMPANIES[symbol].volume / 200 * near * rng.uniform(0.2, 1.5)),
                        "date": day.isoformat(),
                        "implied_volatility": iv,
                        "delta": delta,
                        "gamma": _norm_pdf(d1) / (spot * root),
                        "theta": theta / 365,
                        "vega": spot * _norm_pdf(d1) * math.sqrt(years) / 100,
                        "rho": rho,
                    }
                )
    return tuple(contracts)


GREEKS = ("implied_volatility", "delta", "gamma", "theta", "vega", "rho")


def _option_row(contract: dict[str, Any], fields: tuple[str, ...]) -> dict[str, str]:
    row: dict[str, str] = {}
    for name in fields:
        value = contract[name]
        if name in GREEKS:
            text = f"{value:.5f}"
            row[name] = text[1:] if text == "-0.00000" else text
        elif isinstance(value, float):
            row[name] = _fmt(value)
        else:
            row[name] = str(value)
    return row


def _option_day(p: Params, realtime: bool) -> dt.date:
    if realtime:
        return ANCHOR
    day = _date_param(p, "date")
    if day is None:
        return _trading_days_back(2)[1]  # the previous session
    if not dt.date(2008, 1, 1) <= day <= ANCHOR:
        raise InvalidCall("date")
    return day


def _filtered_chain(p: Params, symbol: str, day: dt.date) -> list[dict[str, Any]]:
    chain = list(_option_chain(symbol, day))
    contract = p.get("contract")
    if contract is not None:
        chain = [c for c in chain if c["contractID"] == contract.upper()]
    expiration = _date_param(p, "expiration")
    if expiration is not None:
        chain = [c for c in chain if c["expiration"] == expiration.isoformat()]
    return chain


QUOTE_FIELDS_OPTIONS = (
    "contractID", "symbol", "expiration", "strike", "type", "last", "mark", "bid", "bid_size", "ask", "ask_size",
    "volume", "open_interest", "date",
)  # fmt: skip


def _options(p: Params, endpoint: str, realtime: bool, fmv: bool = False) -> Answer:
    company = _company_or_none(p)
    greeks = not realtime or p.choice("require_greeks", ("true", "false"), "false") == "true"
    if fmv:
        fields: tuple[str, ...] = ("contractID", "symbol", "expiration", "strike", "type", "mark", "date")
    else:
        fields = QUOTE_FIELDS_OPTIONS
    fields += GREEKS if greeks else ()
    day = _option_day(p, realtime)
    if company is None:
        return Answer({}, [[("fmv" if f == "mark" and fmv else f) for f in fields]])
    rows = [_option_row(c, fields) for c in _filtered_chain(p, company.symbol, day)]
    if fmv:
        rows = [{("fmv" if k == "mark" else k): v for k, v in r.items()} for r in rows]
        fields = tuple("fmv" if f == "mark" else f for f in fields)
    payload = {"endpoint": endpoint, "message": "success", "data": rows}
    return Answer(payload, [list(fields)] + [[r[f] for f in fields] for r in rows])


def realtime_options(p: Params, faults: Faults) -> Answer:
    return _options(p, "Realtime Options", realtime=True)


def realtime_options_fmv(p: Params, faults: Faults) -> Answer:
    return _options(p, "Realtime Options FMV", realtime=True, fmv=True)


def historical_options(p: Params, faults: Faults) -> Answer:
    return _options(p, "Historical Options", realtime=False)


def _put_call_ratio(p: Params, endpoint: str, realtime: bool) -> Answer:
    company = _company_or_none(p)
    day = _option_day(p, realtime)
    if company is None:
        return Answer({})
    chain = _option_chain(company.symbol, day)
    by_expiry: dict[str, list[int]] = {}
    for c in chain:
        by_expiry.setdefault(c["expiration"], [0, 0])[c["type"] == "put"] += c["volume"]
    calls = sum(v[0] for v in by_expiry.values())
    puts = sum(v[1] for v in by_expiry.values())

    def ratio(put: int, call: int) -> str:
        return f"{put / call:.4f}" if call else "0.0000"

    payload = {
        "endpoint": endpoint,
        "message": "success",
        "symbol": company.symbol,
        "date": chain[0]["date"],
        "put_call_ratio": ratio(puts, calls),
        "put_volume": str(puts),
        "call_volume": str(calls),
        "expirations": [
            {"expiration": e, "put_call_ratio": ratio(v[1], v[0]), "put_volume": str(v[1]), "call_volume": str(v[0])}
            for e, v in by_expiry.items()
        ],
    }
    return Answer(payload)


def realtime_put_call_ratio(p: Params, faults: Faults) -> Answer:
    return _put_call_ratio(p, "Realtime Put Call Ratio", realtime=True)


def historical_put_call_ratio(p: Params, faults: Faults) -> Answer:
    return _put_call_ratio(p, "Historical Put Call Ratio", realtime=False)


def _volume_open_interest(p: Params, endpoint: str, realtime: bool) -> Answer:
    company = _company_or_none(p)
    day = _option_day(p, realtime)
    if company is None:
        return Answer({})
    chain = _option_chain(company.symbol, day)
    rows = []
    for c in chain:
        ratio = c["volume"] / c["open_interest"] if c["open_interest"] else 0.0
        row = _option_row(c, ("contractID", "expiration", "strike", "type", "volume", "open_interest"))
        rows.append({**row, "volume_open_interest_ratio": f"{ratio:.4f}"})
    payload = {
        "endpoint": endpoint,
        "message": "success",
        "symbol": company.symbol,
        "date": chain[0]["date"],
        "data": rows,
    }
    return Answer(payload)


def realtime_volume_open_interest_ratio(p: Params, faults: Faults) -> Answer:
    return _volume_open_interest(p, "Realtime Volume Open Interest Ratio", realtime=True)


def historical_volume_open_interest_ratio(p: Params, faults: Faults) -> Answer:
    return _volume_open_interest(p, "Historical Volume Open Interest Ratio", realtime=False)


# --------------------------------------------------------------------------------------------------
# Intelligence: news, transcripts, movers, insiders, institutions, analytics
# --------------------------------------------------------------------------------------------------

NEWS_TOPICS = {
    "blockchain": "Blockchain",
    "earnings": "Earnings",
    "ipo": "IPO",
    "mergers_and_acquisitions": "Mergers & Acquisitions",
    "financial_markets": "Financial Markets",
    "economy_fiscal": "Economy - Fiscal",
    "economy_monetary": "Economy - Monetary",
    "economy_macro": "Economy - Macro",
    "energy_transportation": "Energy & Transportation",
    "finance": "Finance",
    "life_sciences": "Life Sciences",
    "manufacturing": "Manufacturing",
    "real_estate": "Real Estate & Construction",
    "retail_wholesale": "Retail & Wholesale",
    "technology": "Technology",
}
NEWS_SOURCES = (
    ("Sample Wire", "Top News", "wire.example.com"),
    ("Synthetic Markets Daily", "Markets", "markets.example.org"),
    ("Offline Business Review", "Business", "review.example.net"),
    ("Placeholder Finance", "Stocks", "finance.example.com"),
    ("The Example Ledger", "Companies", "ledger.example.org"),
)
NEWS_START = dt.datetime(2022, 3, 1)
NEWS_NOW = dt.datetime.combine(ANCHOR, dt.time(20, 0))
SENTIMENT_DEFINITION = (
    "x <= -0.35: Bearish; -0.35 < x <= -0.15: Somewhat-Bearish; -0.15 < x < 0.15: Neutral; "
    "0.15 <= x < 0.35: Somewhat_Bullish; x >= 0.35: Bullish"
)
RELEVANCE_DEFINITION = "0 < x <= 1, with a higher score indicating higher relevance."
HEADLINES = (
    "{name} {up_down} after {event}",
    "What {event} means for {name}",
    "Analysts weigh {name} outlook as {event} nears",
    "{name} investors react to {event}",
    "{name}: {event} puts strategy in focus",
)
EVENTS = {
    "earnings": "quarterly results",
    "technology": "a new product launch",
    "financial_markets": "a volatile trading session",
    "mergers_and_acquisitions": "deal talks",
    "economy_monetary": "the central bank meeting",
    "economy_macro": "fresh economic data",
    "ipo": "a wave of new listings",
    "blockchain": "digital asset swings",
}


def _sentiment_label(score: float) -> str:
    if score <= -0.35:
        return "Bearish"
    if score <= -0.15:
        return "Somewhat-Bearish"
    if score < 0.15:
        return "Neutral"
    if score < 0.35:
        return "Somewhat-Bullish"
    return "Bullish"


def _ticker_name(ticker: str) -> str:
    kind, _, code = ticker.partition(":")
    if code and kind in ("CRYPTO", "FOREX") and code in CURRENCIES:
        return CURRENCIES[code][0]
    return COMPANIES[ticker].name if ticker in COMPANIES else ticker


def _news_time(p: Params, name: str) -> dt.datetime | None:
    text = p.get(name)
    if text is None:
        return None
    for layout in ("%Y%m%dT%H%M%S", "%Y%m%dT%H%M"):
        try:
            return dt.datetime.strptime(text, layout)
        except ValueError:
            continue
    raise InvalidCall(name)


def _relevance_range(ticker: str, asked: tuple[str, ...], lead: str) -> tuple[float, float]:
    """Tickers asked for (and the article's lead) are central to it; the others only mentioned."""
    return (0.1, 1.0) if ticker in asked or ticker == lead else (0.01, 0.4)


def _articles_of_day(day: dt.date, tickers: tuple[str, ...], topics: tuple[str, ...]) -> list[dict[str, Any]]:
    """The day's made-up articles that mention every ticker and cover every topic asked for, oldest first."""
    rng = _seeded("news-day", day, ",".join(tickers), ",".join(topics))
    out = []
    for j in range(rng.randint(3, 6)):
        art = _seeded("news", day, ",".join(tickers), ",".join(topics), j)
        published = dt.datetime.combine(day, dt.time(art.randint(0, 23), art.randint(0, 59), art.randint(0, 59)))
        mentioned = list(tickers) or [art.choice(sorted(COMPANIES))]
        for extra in sorted(COMPANIES):
            if extra not in mentioned and art.random() < 0.12:
                mentioned.append(extra)
        covered = list(topics) or [art.choice(sorted(EVENTS))]
        if art.random() < 0.5:
            covered.append(art.choice(sorted(set(NEWS_TOPICS) - set(covered))))
        score = art.uniform(-0.45, 0.6)
        name = _ticker_name(mentioned[0])
        event = EVENTS.get(covered[0], "an industry shift")
        title = art.choice(HEADLINES).format(name=name, event=event, up_down="rises" if score > 0 else "slips")
        source, category, domain = art.choice(NEWS_SOURCES)
        slug = "-".join(title.lower().replace(":", "").split())
        first, last = _person("author", day, j, source)
        out.append(
            {
                "title": title,
                "url": f"https://{domain}/{published:%Y/%m/%d}/{slug}",
                "time_published": published.strftime("%Y%m%dT%H%M%S"),
                "authors": [f"{first} {last}"],
                "summary": f"{SAMPLE_LABEL}. A made-up article about {name} and {event}; nothing in it happened.",
                "banner_image": f"https://{domain}/images/{published:%Y%m%d}-{j}.jpg",
                "source": source,
                "category_within_source": category,
                "source_domain": domain,
                "topics": [
                    {"topic": NEWS_TOPICS[t], "relevance_score": f"{art.uniform(0.3, 1.0):.6f}"} for t in covered
                ],
                "overall_sentiment_score": round(score, 6),
                "overall_sentiment_label": _sentiment_label(score),
                "ticker_sentiment": [
                    {
                        "ticker": t,
                        "relevance_score": f"{art.uniform(*_relevance_range(t, tickers, mentioned[0])):.6f}",
                        "ticker_sentiment_score": f"{max(-1.0, min(1.0, score + art.gauss(0.0, 0.15))):.6f}",
                        "ticker_sentiment_label": _sentiment_label(score),
                    }
                    for t in mentioned
                ],
            }
        )
    return sorted(out, key=lambda a: a["time_published"])


def news_sentiment(p: Params, faults: Faults) -> Answer:
    tickers = tuple(dict.fromkeys(t.strip().upper() for t in (p.get("tickers") or "").split(",") if t.strip()))
    topics = tuple(dict.fromkeys(t.strip().lower() for t in (p.get("topics") or "").split(",") if t.strip()))
    if any(t not in NEWS_TOPICS for t in topics):
        raise InvalidCall("topics")
    if any(not all(ch.isalnum() or ch in ".:-" for ch in t) for t in tickers):
        raise InvalidCall("tickers")
    sort = p.choice("sort", ("LATEST", "EARLIEST", "RELEVANCE"), "LATEST")
    limit = _positive_int(p, "limit", 50, hi=1000)
    since = _news_time(p, "time_from")
    until = min(_news_time(p, "time_to") or NEWS_NOW, NEWS_NOW)
    start = max(since or NEWS_START, NEWS_START)
    feed: list[dict[str, Any]] = []
    if start <= until:
        days = (until.date() - start.date()).days
        order = range(days + 1) if sort == "EARLIEST" else range(days, -1, -1)
        for k in order:
            day = start.date() + dt.timedelta(days=k)
            articles = [
                a
                for a in _articles_of_day(day, tickers, topics)
                if start.strftime("%Y%m%dT%H%M%S") <= a["time_published"] <= until.strftime("%Y%m%dT%H%M%S")
            ]
            feed.extend(articles if sort == "EARLIEST" else articles[::-1])
            if len(feed) >= limit and sort != "RELEVANCE":
                break
            if len(feed) >= max(limit * 3, 200):  # RELEVANCE ranks a recent pool, not all history
                break
    if sort == "RELEVANCE":
        feed.sort(key=lambda a: -max(float(t["relevance_score"]) for t in a["ticker_sentiment"]))
    feed = feed[:limit]
    payload = {
        "items": str(len(feed)),
        "sentiment_score_definition": SENTIMENT_DEFINITION,
        "relevance_score_definition": RELEVANCE_DEFINITION,
        "feed": feed,
    }
    return Answer(payload)


# --------------------------------------------------------------------------------------------------
# Fundamentals model: one made-up set of books per company, consistent across every statement
# --------------------------------------------------------------------------------------------------

REPORTED_AFTER_DAYS = 40  # a quarter counts as reported this long after it ends
QUARTERS_SHOWN = 20
YEARS_SHOWN = 5


@dataclass(frozen=True)
class Quarter:
    end: dt.date
    fiscal_year: int
    fiscal_quarter: int
    reported: dt.date
    revenue: float
    gross_margin: float
    operating_income: float
    net_income: float
    shares: float
    estimated_eps: float
    assets: float
    equity: float
    cash: float
    dividends: float


def _fiscal_quarter(end: dt.date, fiscal_year_end_month: int) -> tuple[int, int]:
    """(fiscal year, quarter 1-4) of a quarter ending on `end`."""
    months_to_year_end = (fiscal_year_end_month - end.month) % 12
    year = end.year + (1 if end.month > fiscal_year_end_month else 0)
    return year, 4 - months_to_year_end // 3


@lru_cache(maxsize=16)
def _books(symbol: str) -> tuple[Quarter, ...]:
    """QUARTERS_SHOWN + 4 fiscal quarters, newest first, scaled so the latest four add up to OVERVIEW's TTM."""
    company = COMPANIES[symbol]
    profile = _profile(symbol)
    fye = MONTHS.index(company.fiscal_year_end) + 1
    rng = _seeded("books", symbol)
    ends: list[dt.date] = []
    month = _month_end(ANCHOR.year + 1, fye)  # a quarter end in the future; walk back from there
    while len(ends) < QUARTERS_SHOWN + 4:
        if month + dt.timedelta(days=REPORTED_AFTER_DAYS) <= ANCHOR:
            ends.append(month)
        month = _month_end(_add_months(month, -3).year, _add_months(month, -3).month)
    shares = float(profile["SharesOutstanding"])
    revenue_ttm = float(profile["RevenueTTM"])
    eps_ttm = float(profile["EPS"])
    growth = rng.uniform(0.02, 0.15)
    seasonal = [rng.uniform(-0.06, 0.08) for _ in range(4)]
    net_margin = eps_ttm * shares / revenue_ttm
    gross_margin = min(0.92, max(0.25, net_margin * 1.35 + rng.uniform(0.15, 0.35)))
    assets_to_revenue = rng.uniform(1.1, 2.4)
    book = float(profile["BookValue"]) * shares
    quarters: list[Quarter] = []
    for k, end in enumerate(ends):
        fy, fq = _fiscal_quarter(end, fye)
        scale = (1 + growth) ** (-k / 4) * (1 + seasonal[fq - 1]) * rng.uniform(0.97, 1.03)
        revenue = revenue_ttm / 4 * scale
        net = eps_ttm * shares / 4 * scale * rng.uniform(0.9, 1.1)
        buyback = 1 + 0.004 * k
        eps = net / (shares * buyback)
        report_day = _weekday_on_or_after(end + dt.timedelta(days=rng.randint(18, 35)))
        quarters.append(
            Quarter(
                end=end,
                fiscal_year=fy,
                fiscal_quarter=fq,
                reported=report_day,
                revenue=revenue,
                gross_margin=gross_margin * rng.uniform(0.98, 1.02),
                operating_income=net / 0.82 * rng.uniform(1.0, 1.08),
                net_income=net,
                shares=shares * buyback,
                estimated_eps=eps * (1 - rng.gauss(0.03, 0.05)),
                assets=revenue_ttm * assets_to_revenue * (1 + growth) ** (-k / 4),
                equity=book * (1 + growth) ** (-k / 4) * rng.uniform(0.98, 1.02),
                cash=revenue_ttm * rng.uniform(0.08, 0.25),
                dividends=_dividend_amount(symbol) * shares * buyback * (1.05 ** (-k / 4)),
            )
        )
    # make the newest four sum exactly to the TTM figures OVERVIEW shows
    revenue_fix = revenue_ttm / sum(q.revenue for q in quarters[:4])
    net_fix = eps_ttm * shares / sum(q.net_income for q in quarters[:4])
    return tuple(
        dataclasses.replace(
            q,
            revenue=q.revenue * revenue_fix,
            net_income=q.net_income * net_fix,
            operating_income=q.operating_income * net_fix,
            estimated_eps=q.estimated_eps * net_fix,
        )
        for q in quarters
    )


def _fiscal_years(quarters: tuple[Quarter, ...]) -> list[list[Quarter]]:
    """Complete fiscal years (four quarters each, newest first)."""
    years: dict[int, list[Quarter]] = {}
    for q in quarters:
        years.setdefault(q.fiscal_year, []).append(q)
    return [qs for qs in years.values() if len(qs) == 4][:YEARS_SHOWN]


def _usd(x: float) -> str:
    return str(round(x))


def _income_fields(qs: list[Quarter]) -> dict[str, str]:
    revenue = sum(q.revenue for q in qs)
    gross = sum(q.revenue * q.gross_margin for q in qs)
    operating = sum(q.operating_income for q in qs)
    net = sum(q.net_income for q in qs)
    rnd = (gross - operating) * 0.3
    sga = gross - operating - rnd
    depreciation = revenue * 0.045
    interest_income, interest_expense = revenue * 0.006, revenue * 0.012
    pretax = operating + interest_income - interest_expense
    return {
        "fiscalDateEnding": qs[0].end.isoformat(),
        "reportedCurrency": "USD",
        "grossProfit": _usd(gross),
        "totalRevenue": _usd(revenue),
        "costOfRevenue": _usd(revenue - gross),
        "costofGoodsAndServicesSold": _usd(revenue - gross),
        "operatingIncome": _usd(operating),
        "sellingGeneralAndAdministrative": _usd(sga),
        "researchAndDevelopment": _usd(rnd),
        "operatingExpenses": _usd(sga + rnd),
        "investmentIncomeNet": "None",
        "netInterestIncome": _usd(interest_income - interest_expense),
        "interestIncome": _usd(interest_income),
        "interestExpense": _usd(interest_expense),
        "nonInterestIncome": "None",
        "otherNonOperatingIncome": "None",
        "depreciation": "None",
        "depreciationAndAmortization": _usd(depreciation),
        "incomeBeforeTax": _usd(pretax),
        "incomeTaxExpense": _usd(pretax - net),
        "interestAndDebtExpense": _usd(interest_expense),
        "netIncomeFromContinuingOperations": _usd(net),
        "comprehensiveIncomeNetOfTax": "None",
        "ebit": _usd(pretax + interest_expense),
        "ebitda": _usd(pretax + interest_expense + depreciation),
        "netIncome": _usd(net),
    }


def _balance_fields(q: Quarter) -> dict[str, str]:
    a = q.assets
    current = a * 0.28
    receivables, inventory, short_investments = a * 0.09, a * 0.02, a * 0.03
    other_current = current - q.cash - receivables - inventory - short_investments
    if other_current < 0:
        current -= other_current
        other_current = 0.0
    noncurrent = a - current
    ppe, goodwill, intangibles = noncurrent * 0.18, noncurrent * 0.45, noncurrent * 0.12
    liabilities = max(a - q.equity, a * 0.2)
    equity = a - liabilities
    current_liabilities = liabilities * 0.33
    payable, short_debt, current_long_debt = (
        current_liabilities * 0.15,
        current_liabilities * 0.2,
        current_liabilities * 0.1,
    )
    long_debt = (liabilities - current_liabilities) * 0.7
    leases = (liabilities - current_liabilities) * 0.05
    return {
        "fiscalDateEnding": q.end.isoformat(),
        "reportedCurrency": "USD",
        "totalAssets": _usd(a),
        "totalCurrentAssets": _usd(current),
        "cashAndCashEquivalentsAtCarryingValue": _usd(q.cash),
        "cashAndShortTermInvestments": _usd(q.cash + short_investments),
        "inventory": _usd(inventory),
        "currentNetReceivables": _usd(receivables),
        "totalNonCurrentAssets": _usd(noncurrent),
        "propertyPlantEquipment": _usd(ppe),
        "accumulatedDepreciationAmortizationPPE": "None",
        "intangibleAssets": _usd(goodwill + intangibles),
        "intangibleAssetsExcludingGoodwill": _usd(intangibles),
        "goodwill": _usd(goodwill),
        "investments": "None",
        "longTermInvestments": _usd(noncurrent * 0.05),
        "shortTermInvestments": _usd(short_investments),
        "otherCurrentAssets": _usd(other_current),
        "otherNonCurrentAssets": _usd(noncurrent - ppe - goodwill - intangibles - noncurrent * 0.05),
        "totalLiabilities": _usd(liabilities),
        "totalCurrentLiabilities": _usd(current_liabilities),
        "currentAccountsPayable": _usd(payable),
        "deferredRevenue": _usd(current_liabilities * 0.12),
        "currentDebt": _usd(short_debt + current_long_debt),
        "shortTermDebt": _usd(short_debt),
        "totalNonCurrentLiabilities": _usd(liabilities - current_liabilities),
        "capitalLeaseObligations": _usd(leases),
        "longTermDebt": _usd(long_debt + current_long_debt),
        "currentLongTermDebt": _usd(current_long_debt),
        "longTermDebtNoncurrent": _usd(long_debt),
        "shortLongTermDebtTotal": _usd(long_debt + current_long_debt + short_debt),
        "otherCurrentLiabilities": _usd(current_liabilities - payable - short_debt - current_long_debt),
        "otherNonCurrentLiabilities": _usd(liabilities - current_liabilities - long_debt - leases),
        "totalShareholderEquity": _usd(equity),
        "treasuryStock": "None",
        "retainedEarnings": _usd(equity * 1.6),
        "commonStock": _usd(equity * 0.4),
        "commonStockSharesOutstanding": _usd(q.shares),
    }


def _cash_flow_fields(qs: list[Quarter]) -> dict[str, str]:
    revenue = sum(q.revenue for q in qs)
    net = sum(q.net_income for q in qs)
    depreciation = revenue * 0.045
    operating = net + depreciation + revenue * 0.02
    capex = revenue * 0.05
    investing = -capex - revenue * 0.03
    dividends = sum(q.dividends for q in qs)
    buybacks = net * 0.25
    financing = -dividends - buybacks + revenue * 0.01
    return {
        "fiscalDateEnding": qs[0].end.isoformat(),
        "reportedCurrency": "USD",
        "operatingCashflow": _usd(operating),
        "paymentsForOperatingActivities": "None",
        "proceedsFromOperatingActivities": "None",
        "changeInOperatingLiabilities": _usd(revenue * 0.01),
        "changeInOperatingAssets": _usd(-revenue * 0.008),
        "depreciationDepletionAndAmortization": _usd(depreciation),
        "capitalExpenditures": _usd(capex),
        "changeInReceivables": _usd(-revenue * 0.005),
        "changeInInventory": _usd(-revenue * 0.002),
        "profitLoss": _usd(net),
        "cashflowFromInvestment": _usd(investing),
        "cashflowFromFinancing": _usd(financing),
        "proceedsFromRepaymentsOfShortTermDebt": _usd(revenue * 0.01),
        "paymentsForRepurchaseOfCommonStock": _usd(buybacks),
        "paymentsForRepurchaseOfEquity": _usd(buybacks),
        "paymentsForRepurchaseOfPreferredStock": "None",
        "dividendPayout": _usd(dividends),
        "dividendPayoutCommonStock": _usd(dividends),
        "dividendPayoutPreferredStock": "None",
        "proceedsFromIssuanceOfCommonStock": "None",
        "proceedsFromIssuanceOfLongTermDebtAndCapitalSecuritiesNet": "None",
        "proceedsFromIssuanceOfPreferredStock": "None",
        "proceedsFromRepurchaseOfEquity": _usd(-buybacks),
        "proceedsFromSaleOfTreasuryStock": "None",
        "changeInCashAndCashEquivalents": _usd(operating + investing + financing),
        "changeInExchangeRate": "None",
        "netIncome": _usd(net),
    }


def _statement(
    p: Params, annual: Callable[[list[Quarter]], dict[str, str]], quarterly: Callable[[Quarter], dict[str, str]]
) -> Answer:
    company = _company_or_none(p)
    if company is None or company.asset_type != "Common Stock":
        return Answer({})  # like OVERVIEW: no statements for unknown tickers (or funds)
    books = _books(company.symbol)
    payload = {
        "symbol": company.symbol,
        "annualReports": [annual(qs) for qs in _fiscal_years(books)],
        "quarterlyReports": [quarterly(q) for q in books[:QUARTERS_SHOWN]],
    }
    return Answer(payload)


def income_statement(p: Params, faults: Faults) -> Answer:
    return _statement(p, _income_fields, lambda q: _income_fields([q]))


def balance_sheet(p: Params, faults: Faults) -> Answer:
    return _statement(p, lambda qs: _balance_fields(qs[0]), _balance_fields)


def cash_flow(p: Params, faults: Faults) -> Answer:
    return _statement(p, _cash_flow_fields, lambda q: _cash_flow_fields([q]))


def earnings(p: Params, faults: Faults) -> Answer:
    company = _company_or_none(p)
    if company is None or company.asset_type != "Common Stock":
        return Answer({})
    books = _books(company.symbol)
    rng = _seeded("earnings-time", company.symbol)
    when = rng.choice(("pre-market", "post-market"))
    quarterly = []
    for q in books[:QUARTERS_SHOWN]:
        reported = q.net_income / q.shares
        surprise = round(reported, 2) - round(q.estimated_eps, 2)
        quarterly.append(
            {
                "fiscalDateEnding": q.end.isoformat(),
                "reportedDate": q.reported.isoformat(),
                "reportedEPS": _fmt(reported),
                "estimatedEPS": _fmt(q.estimated_eps),
                "surprise": _fmt(surprise),
                "surprisePercentage": f"{surprise / abs(round(q.estimated_eps, 2)) * 100:.4f}"
                if round(q.estimated_eps, 2)
                else "None",
                "reportTime": when,
            }
        )
    annual = [
        {"fiscalDateEnding": qs[0].end.isoformat(), "reportedEPS": _fmt(sum(q.net_income / q.shares for q in qs))}
        for qs in _fiscal_years(books)
    ]
    return Answer({"symbol": company.symbol, "annualEarnings": annual, "quarterlyEarnings": quarterly})


def shares_outstanding(p: Params, faults: Faults) -> Answer:
    """Not in the bundled catalog, but a real Alpha Vantage function (and the brief for this fake names it)."""
    header = ["date", "shares_outstanding_diluted", "shares_outstanding_basic"]
    company = _company_or_none(p)
    if company is None or company.asset_type != "Common Stock":
        return Answer({}, [header])
    rows = [[q.end.isoformat(), _usd(q.shares * 1.006), _usd(q.shares)] for q in _books(company.symbol)]
    payload = {"symbol": company.symbol, "status": "success", "data": [dict(zip(header, r, strict=True)) for r in rows]}
    return Answer(payload, [header, *rows])


def _future_quarters(symbol: str, count: int) -> list[tuple[dt.date, int, int, dt.date]]:
    """The next `count` fiscal quarters after the latest reported one: (end, fiscal year, quarter, report day)."""
    latest = _books(symbol)[0]
    fye = MONTHS.index(COMPANIES[symbol].fiscal_year_end) + 1
    rng = _seeded("report-days", symbol)
    out = []
    end = latest.end
    for _ in range(count):
        end = _month_end(_add_months(end, 3).year, _add_months(end, 3).month)
        fy, fq = _fiscal_quarter(end, fye)
        out.append((end, fy, fq, _weekday_on_or_after(end + dt.timedelta(days=rng.randint(18, 35)))))
    return out


def earnings_estimates(p: Params, faults: Faults) -> Answer:
    company = _company_or_none(p)
    if company is None or company.asset_type != "Common Stock":
        return Answer({})
    books = _books(company.symbol)
    ttm_eps = sum(q.net_income / q.shares for q in books[:4])
    ttm_revenue = sum(q.revenue for q in books[:4])
    rng = _seeded("estimates", company.symbol)
    growth = rng.uniform(0.03, 0.14)
    rows: list[tuple[dt.date, str, float, float]] = []
    for k, (end, _, _, _) in enumerate(_future_quarters(company.symbol, 2), start=1):
        rows.append(
            (end, "fiscal quarter", ttm_eps / 4 * (1 + growth) ** (k / 4), ttm_revenue / 4 * (1 + growth) ** (k / 4))
        )
    fy_ends = sorted({q.end for q in books[:4] if q.fiscal_quarter == 4})
    year_end = fy_ends[-1] if fy_ends else books[0].end
    for k in (1, 2):
        end = _month_end(year_end.year + k, year_end.month)
        rows.append((end, "fiscal year", ttm_eps * (1 + growth) ** k, ttm_revenue * (1 + growth) ** k))
    for q in books[:4]:
        rows.append((q.end, "fiscal quarter", q.estimated_eps, q.revenue * rng.uniform(0.97, 1.02)))
    estimates = []
    for end, horizon, eps, revenue in sorted(rows, key=lambda r: r[0], reverse=True):
        analysts = rng.randint(8, 30)
        drift = [eps * (1 - rng.gauss(0.0, 0.01) * w) for w in (1, 2, 3, 4)]
        up = rng.randint(0, analysts // 3)
        estimates.append(
            {
                "date": end.isoformat(),
                "horizon": horizon,
                "eps_estimate_average": _fmt(eps, 4),
                "eps_estimate_high": _fmt(eps * rng.uniform(1.03, 1.12), 4),
                "eps_estimate_low": _fmt(eps * rng.uniform(0.86, 0.97), 4),
                "eps_estimate_analyst_count": f"{analysts}.0000",
                "eps_estimate_average_7_days_ago": _fmt(drift[0], 4),
                "eps_estimate_average_30_days_ago": _fmt(drift[1], 4),
                "eps_estimate_average_60_days_ago": _fmt(drift[2], 4),
                "eps_estimate_average_90_days_ago": _fmt(drift[3], 4),
                "eps_estimate_revision_up_trailing_7_days": f"{min(up, 2)}.0000",
                "eps_estimate_revision_down_trailing_7_days": f"{rng.randint(0, 1)}.0000",
                "eps_estimate_revision_up_trailing_30_days": f"{up}.0000",
                "eps_estimate_revision_down_trailing_30_days": f"{rng.randint(0, analysts // 4)}.0000",
                "revenue_estimate_average": _fmt(revenue, 4),
                "revenue_estimate_high": _fmt(revenue * rng.uniform(1.02, 1.06), 4),
                "revenue_estimate_low": _fmt(revenue * rng.uniform(0.94, 0.98), 4),
                "revenue_estimate_analyst_count": f"{max(1, analysts - rng.randint(0, 4))}.0000",
            }
        )
    return Answer({"symbol": company.symbol, "estimates": estimates})


def _executives(symbol: str) -> list[tuple[str, str]]:
    """(NAME as filed, title) for a company's made-up officers and directors."""
    officers = ("Chief Executive Officer", "Chief Financial Officer", "Chief Operating Officer", "General Counsel")
    titles = (*officers, "Director", "Director", "Director", "Director", "Director")
    out = []
    for k, title in enumerate(titles):
        first, last = _person("executive", symbol, k)
        out.append((f"{last.upper()}, {first.upper()}", title))
    return out


def earnings_call_transcript(p: Params, faults: Faults) -> Answer:
    company = _company_or_none(p)
    quarter = p.require("quarter").upper()
    if len(quarter) != 6 or not quarter[:4].isdigit() or quarter[4] != "Q" or quarter[5] not in "1234":
        raise InvalidCall("quarter")
    if company is None or company.asset_type != "Common Stock":
        return Answer({})
    fy, fq = int(quarter[:4]), int(quarter[5])
    match = next((q for q in _books(company.symbol) if (q.fiscal_year, q.fiscal_quarter) == (fy, fq)), None)
    latest = _books(company.symbol)[0]
    if (fy, fq) > (latest.fiscal_year, latest.fiscal_quarter) or fy < 2010:
        return Answer({"symbol": company.symbol, "quarter": quarter, "transcript": []})
    rng = _seeded("transcript", company.symbol, quarter)
    revenue = match.revenue if match else float(_profile(company.symbol)["RevenueTTM"]) / 4 * rng.uniform(0.6, 0.95)
    eps = (
        match.net_income / match.shares
        if match
        else float(_profile(company.symbol)["EPS"]) / 4 * rng.uniform(0.6, 0.95)
    )
    (ceo, ceo_title), (cfo, cfo_title) = _executives(company.symbol)[:2]

    def spoken(name: str) -> str:
        last, _, first = name.partition(", ")
        return f"{first.title()} {last.title()}"

    analysts = [(f"{' '.join(_person('analyst', company.symbol, quarter, k))}", rng.choice(FIRMS)) for k in range(3)]
    segments = [
        (
            "Operator",
            "Operator",
            f"Welcome to the {company.name} {quarter} earnings call. {SAMPLE_LABEL}: this transcript is made up.",
        ),
        (
            spoken(ceo),
            ceo_title,
            f"Thank you. We delivered revenue of ${revenue / 1e9:.2f} billion this quarter and we remain focused on "
            "execution across the business.",
        ),
        (
            spoken(cfo),
            cfo_title,
            f"Earnings per share came in at ${eps:.2f}. Margins were "
            f"{rng.choice(('steady', 'higher', 'slightly lower'))} and cash generation stayed healthy.",
        ),
    ]
    for name, firm in analysts:
        segments.append(
            (
                name,
                f"Analyst, {firm}",
                "Thanks for taking my question. How should we think about "
                f"{rng.choice(('demand', 'pricing', 'costs', 'investment'))} over the next few quarters?",
            )
        )
        segments.append(
            (
                spoken(rng.choice((ceo, cfo))),
                rng.choice((ceo_title, cfo_title)),
                "We see a balanced picture and we will keep investing where returns are clear.",
            )
        )
    segments.append(("Operator", "Operator", "This concludes today's call. Thank you for participating."))
    transcript = [
        {
            "speaker": speaker,
            "title": title,
            "content": content,
            "sentiment": f"{rng.uniform(0.1, 0.8) if speaker != 'Operator' else 0.0:.1f}",
        }
        for speaker, title, content in segments
    ]
    return Answer({"symbol": company.symbol, "quarter": quarter, "transcript": transcript})


# --------------------------------------------------------------------------------------------------
# Movers, insiders, institutions, analytics
# --------------------------------------------------------------------------------------------------


def _made_up_tickers(count: int, *seed: object) -> list[str]:
    rng = _seeded("tickers", *seed)
    out: list[str] = []
    while len(out) < count:
        ticker = "".join(rng.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZ") for _ in range(rng.choice((3, 4, 4, 5))))
        if ticker not in COMPANIES and ticker not in out:
            out.append(ticker)
    return out


def top_gainers_losers(p: Params, faults: Faults) -> Answer:
    rng = _seeded("movers", ANCHOR)

    def row(ticker: str, price: float, change_pct: float, volume: int) -> dict[str, str]:
        before = price / (1 + change_pct / 100)
        return {
            "ticker": ticker,
            "price": f"{price:.4g}" if price < 1 else _fmt(price),
            "change_amount": f"{price - before:.4f}",
            "change_percentage": f"{change_pct:.4f}%",
            "volume": str(volume),
        }

    tickers = _made_up_tickers(60, "movers", ANCHOR)
    gainers = sorted(
        (row(t, rng.uniform(0.2, 40), rng.uniform(20, 250), rng.randint(10_000, 90_000_000)) for t in tickers[:20]),
        key=lambda r: -float(r["change_percentage"][:-1]),
    )
    losers = sorted(
        (row(t, rng.uniform(0.05, 30), -rng.uniform(15, 80), rng.randint(10_000, 60_000_000)) for t in tickers[20:40]),
        key=lambda r: float(r["change_percentage"][:-1]),
    )
    active = []
    for symbol in sorted(COMPANIES, key=lambda s: -daily_bars(s, COMPACT_POINTS)[0].volume):
        today, yesterday = daily_bars(symbol, COMPACT_POINTS)[:2]
        active.append(row(symbol, today.close, (today.close / yesterday.close - 1) * 100, today.volume))
    for t in tickers[40:54]:
        active.append(row(t, rng.uniform(0.5, 20), rng.uniform(-30, 60), rng.randint(50_000_000, 400_000_000)))
    active.sort(key=lambda r: -int(r["volume"]))
    payload = {
        "metadata": f"Top gainers, losers, and most actively traded US tickers - {SAMPLE_LABEL}",
        "last_updated": f"{ANCHOR.isoformat()} 16:15:59 US/Eastern",
        "top_gainers": gainers,
        "top_losers": losers,
        "most_actively_traded": active[:20],
    }
    return Answer(payload)


def insider_transactions(p: Params, faults: Faults) -> Answer:
    company = _company_or_none(p)
    since = _date_param(p, "from")
    if company is None:
        return Answer({})
    rng = _seeded("insiders", company.symbol)
    people = _executives(company.symbol)
    days = _trading_days_back(3 * 252)
    rows = []
    for _ in range(48):
        day = rng.choice(days)
        name, title = rng.choice(people)
        close = _close_on(company.symbol, day).close
        kind = rng.random()
        if kind < 0.25:  # grants: no price
            security, action, shares, price = "Restricted Stock Unit", "A", rng.randint(500, 20_000), 0.0
        elif kind < 0.35:
            security, action, shares, price = (
                "Employee Stock Option (Right to Buy)",
                "A",
                rng.randint(1_000, 40_000),
                close * 0.8,
            )
        elif kind < 0.45:
            security, action, shares, price = "Common Stock", "A", rng.randint(100, 5_000), close
        else:
            security, action, shares, price = "Common Stock", "D", rng.randint(200, 60_000), close
        rows.append(
            {
                "transaction_date": day.isoformat(),
                "ticker": company.symbol,
                "executive": name,
                "executive_title": title,
                "security_type": security,
                "acquisition_or_disposal": action,
                "shares": f"{shares}.0",
                "share_price": _fmt(price) if price else "0.0",
            }
        )
    rows.sort(key=lambda r: (r["transaction_date"], r["executive"]), reverse=True)
    if since is not None:
        rows = [r for r in rows if r["transaction_date"] >= since.isoformat()]
    return Answer({"data": rows})


def institutional_holdings(p: Params, faults: Faults) -> Answer:
    company = _company_or_none(p)
    if company is None:
        return Answer({})
    rng = _seeded("institutions", company.symbol)
    shares_out = float(_profile(company.symbol)["SharesOutstanding"])
    ownership = rng.uniform(0.45, 0.82)
    total = int(shares_out * ownership)
    holders_count = rng.randint(1800, 5200)
    increased = int(holders_count * rng.uniform(0.35, 0.55))
    decreased = int(holders_count * rng.uniform(0.25, 0.4))
    report_period = _month_end(2026, 9)
    price = _close_on(company.symbol, report_period).close
    weights = sorted((rng.paretovariate(1.4) for _ in FIRMS), reverse=True)
    scale = total * 0.45 / sum(weights)
    holders = []
    for firm, weight in zip(FIRMS, weights, strict=True):
        shares = int(weight * scale)
        change = int(shares * rng.uniform(-0.08, 0.1))
        holders.append(
            {
                "name": firm,
                "shares": str(shares),
                "value": _usd(shares * price),
                "change_shares": str(change),
                "change_percent": f"{change / max(shares - change, 1) * 100:.2f}",
                "change_type": "increased" if change > 0 else "decreased" if change < 0 else "unchanged",
                "percent_of_shares_outstanding": f"{shares / shares_out * 100:.4f}",
                "date_reported": report_period.isoformat(),
            }
        )
    net_change = sum(int(h["change_shares"]) for h in holders)
    payload = {
        "symbol": company.symbol,
        "report_period": report_period.isoformat(),
        "institutional_ownership_percent": f"{ownership * 100:.2f}",
        "total_institutional_shares": str(total),
        "total_holders": str(holders_count),
        "holders_increased": str(increased),
        "holders_decreased": str(decreased),
        "holders_unchanged": str(holders_count - increased - decreased),
        "net_shares_change": str(net_change),
        "net_shares_change_percent": f"{net_change / max(total - net_change, 1) * 100:.2f}",
        "holders": holders,
    }
    return Answer(payload)


ANALYTICS_INTERVALS = {
    "1min": 1,
    "5min": 5,
    "15min": 15,
    "30min": 30,
    "60min": 60,
    "DAILY": 0,
    "WEEKLY": 0,
    "MONTHLY": 0,
}
ANALYTICS_METRICS = (
    "MEAN", "MEDIAN", "CUMULATIVE_RETURN", "VARIANCE", "STDDEV", "MAX_DRAWDOWN", "HISTOGRAM", "AUTOCORRELATION",
    "COVARIANCE", "CORRELATION",
)  # fmt: skip
SLIDING_METRICS = ("MEAN", "MEDIAN", "CUMULATIVE_RETURN", "VARIANCE", "STDDEV", "COVARIANCE", "CORRELATION")


def _analytics_input(
    p: Params, metrics: tuple[str, ...]
) -> tuple[list[str], str, str, list[tuple[str, str, dict[str, str]]]]:
    symbols = list(dict.fromkeys(s.strip().upper() for s in p.require("SYMBOLS").split(",") if s.strip()))
    if not symbols or len(symbols) > 50 or any(s not in COMPANIES for s in symbols):
        raise InvalidCall("SYMBOLS")
    interval = p.require("INTERVAL").upper().replace("MIN", "min")
    if interval not in ANALYTICS_INTERVALS:
        raise InvalidCall("INTERVAL")
    ohlc = p.choice("OHLC", SERIES_TYPES, "close")
    calculations = []
    text = p.require("CALCULATIONS")
    for part in _split_calculations(text):
        name, _, rest = part.partition("(")
        name = name.strip().upper()
        if name not in metrics:
            raise InvalidCall("CALCULATIONS")
        options: dict[str, str] = {}
        for option in rest.rstrip(")").split(","):
            if "=" in option:
                k, _, v = option.partition("=")
                options[k.strip().lower()] = v.strip().lower()
        calculations.append((name, part.strip().upper(), options))
    if not calculations:
        raise InvalidCall("CALCULATIONS")
    return symbols, interval, ohlc, calculations


def _split_calculations(text: str) -> list[str]:
    """ "MEAN,STDDEV(annualized=True),CORRELATION" -> its three parts (commas inside brackets stay)."""
    parts, depth, current = [], 0, ""
    for ch in text:
        if ch == "," and depth == 0:
            parts.append(current)
            current = ""
            continue
        depth += (ch == "(") - (ch == ")")
        current += ch
    parts.append(current)
    return [x for x in parts if x.strip()]


def _analytics_bars(symbol: str, interval: str) -> list[Bar]:
    """Oldest-first bars of one symbol for the analytics endpoints."""
    if ANALYTICS_INTERVALS[interval]:
        return _indicator_series(symbol, interval)
    return _indicator_series(symbol, interval.lower())


def _analytics_range(p: Params, stamps: list[str]) -> tuple[str, str]:
    """The first and last stamp RANGE selects (full, a trailing span like 6month, or a start date)."""
    text = p.require("RANGE").strip().lower()
    last = dt.date.fromisoformat(stamps[-1][:10])
    if text == "full":
        return stamps[0], stamps[-1]
    for unit, days in (("day", 1), ("week", 7), ("month", 30.4375), ("year", 365.25)):
        number = text.removesuffix("s").removesuffix(unit)
        if text.removesuffix("s").endswith(unit) and number.isdigit() and int(number) > 0:
            start = last - dt.timedelta(days=int(int(number) * days))
            return start.isoformat(), stamps[-1]
    try:
        start = dt.date.fromisoformat(text[:10])
    except ValueError:
        raise InvalidCall("RANGE") from None
    return start.isoformat(), stamps[-1]


def _returns_table(
    p: Params, symbols: list[str], interval: str, ohlc: str
) -> tuple[list[str], dict[str, list[float]], dict[str, list[float]]]:
    """Shared stamps, and per symbol the prices and the period returns (returns[i] ends at stamps[i + 1])."""
    bars = {s: _analytics_bars(s, interval) for s in symbols}
    stamps = [b.stamp for b in bars[symbols[0]]]
    first, last = _analytics_range(p, stamps)
    keep = [i for i, s in enumerate(stamps) if first <= s[: len(first)] and s[: len(last)] <= last]
    if len(keep) < 3:
        raise InvalidCall("RANGE")
    chosen = [stamps[i] for i in keep]
    prices = {s: [getattr(bars[s][i], ohlc) for i in keep] for s in symbols}
    return chosen, prices, {s: sample_data.returns(v) for s, v in prices.items()}


def _stat(name: str, options: dict[str, str], xs: list[float], periods_per_year: float) -> float:
    if name == "MEAN":
        return sum(xs) / len(xs)
    if name == "MEDIAN":
        return statistics.median(xs)
    if name == "CUMULATIVE_RETURN":
        return math.prod(1 + x for x in xs) - 1
    variance = statistics.variance(xs) if len(xs) > 1 else 0.0
    if options.get("annualized") == "true":
        variance *= periods_per_year
    return variance if name == "VARIANCE" else math.sqrt(variance)


def _periods_per_year(interval: str) -> float:
    minutes = ANALYTICS_INTERVALS[interval]
    if minutes:
        return 252 * 16 * 60 / minutes
    return {"DAILY": 252.0, "WEEKLY": 52.0, "MONTHLY": 12.0}[interval]


def analytics_fixed_window(p: Params, faults: Faults) -> Answer:
    symbols, interval, ohlc, calculations = _analytics_input(p, ANALYTICS_METRICS)
    stamps, prices, rets = _returns_table(p, symbols, interval, ohlc)
    per_year = _periods_per_year(interval)
    results: dict[str, Any] = {}
    for name, label, options in calculations:
        if name in ("CORRELATION", "COVARIANCE"):
            pair = sample_data.correlation if name == "CORRELATION" else sample_data.covariance
            matrix = [[round(pair(rets[a], rets[b]), 10) for b in symbols[: i + 1]] for i, a in enumerate(symbols)]
            results[label] = {"index": symbols, name.lower(): matrix}
        elif name == "MAX_DRAWDOWN":
            block = {}
            for s in symbols:
                depth, start, end = sample_data.max_drawdown(prices[s])
                block[s] = {
                    "max_drawdown": depth,
                    "drawdown_range": {"start_drawdown": stamps[start], "end_drawdown": stamps[end]},
                }
            results[label] = block
        elif name == "HISTOGRAM":
            bins = int(options.get("bins", "10")) if options.get("bins", "10").isdigit() else 10
            block = {}
            for s in symbols:
                counts, edges = sample_data.histogram(rets[s], max(1, min(bins, 100)))
                block[s] = {"bin_count": counts, "bin_edges": edges}
            results[label] = block
        elif name == "AUTOCORRELATION":
            lag = int(options.get("lag", "1")) if options.get("lag", "1").isdigit() else 1
            results[label] = {s: sample_data.autocorrelation(rets[s], max(1, lag)) for s in symbols}
        else:
            results[label] = {s: _stat(name, options, rets[s], per_year) for s in symbols}
    meta = {
        "symbols": ",".join(symbols),
        "min_dt": stamps[0],
        "max_dt": stamps[-1],
        "ohlc": ohlc.title(),
        "interval": interval,
    }
    return Answer({"meta_data": meta, "payload": {"RETURNS_CALCULATIONS": results}})


def analytics_sliding_window(p: Params, faults: Faults) -> Answer:
    symbols, interval, ohlc, calculations = _analytics_input(p, SLIDING_METRICS)
    window = _positive_int(p, "WINDOW_SIZE", None, lo=10, hi=5000)
    stamps, _, rets = _returns_table(p, symbols, interval, ohlc)
    if len(stamps) - 1 < window:
        raise InvalidCall("WINDOW_SIZE")
    per_year = _periods_per_year(interval)
    ends = [stamps[k + window] for k in range(len(stamps) - window)]  # run k of returns ends at stamps[k + window]
    starts = {end: stamps[k] for k, end in enumerate(ends)}
    results: dict[str, Any] = {}
    for name, label, options in calculations:
        block: dict[str, Any] = {}
        if name in ("CORRELATION", "COVARIANCE"):
            running = {}
            for i, a in enumerate(symbols):
                for b in symbols[i + 1 :]:
                    values = sample_data.rolling_pair(rets[a], rets[b], window, name)
                    running[f"{a}-{b}"] = dict(zip(ends, values, strict=True))
            block[f"RUNNING_{name}"] = running
        else:
            scale = per_year if options.get("annualized") == "true" else 1.0
            block[f"RUNNING_{name}"] = {
                s: dict(zip(ends, sample_data.rolling(rets[s], window, name, scale), strict=True)) for s in symbols
            }
        block["window_start"] = starts
        if options:
            block["params"] = options
        results[label] = block
    meta = {
        "symbols": ",".join(symbols),
        "window_size": window,
        "min_dt": stamps[0],
        "max_dt": stamps[-1],
        "ohlc": ohlc.title(),
        "interval": interval,
    }
    return Answer({"meta_data": meta, "payload": {"RETURNS_CALCULATIONS": results}})


# --------------------------------------------------------------------------------------------------
# Fundamentals: logo, ETF profile, dividends, splits, listings and calendars
# --------------------------------------------------------------------------------------------------


def company_logo(p: Params, faults: Faults) -> Answer:
    company = _company_or_none(p)
    if company is None:
        return Answer({})
    base = f"https://logos.example.com/sample/{company.symbol.lower()}"
    payload = {
        "symbol": company.symbol,
        "name": company.name,
        "png": f"{base}.png",
        "svg": f"{base}.svg",
        "note": SAMPLE_LABEL,
    }
    return Answer(payload)


@dataclass(frozen=True)
class Fund:
    symbol: str
    name: str
    net_assets: float
    expense_ratio: float
    inception: str
    holdings: tuple[str, ...]  # the known symbols it holds first; made-up tickers fill the rest


ETFS = {
    f.symbol: f
    for f in (
        Fund("SPY", "SPDR S&P 500 ETF Trust", 6.2e11, 0.000945, "1993-01-22", ("AAPL", "MSFT", "NVDA", "TSLA", "IBM")),
        Fund("QQQ", "Invesco QQQ Trust, Series 1", 3.4e11, 0.002, "1999-03-10", ("NVDA", "AAPL", "MSFT", "TSLA")),
    )
}
ETF_SECTORS = (
    "INFORMATION TECHNOLOGY", "COMMUNICATION SERVICES", "CONSUMER DISCRETIONARY", "HEALTHCARE", "FINANCIALS",
    "INDUSTRIALS", "CONSUMER STAPLES", "ENERGY", "UTILITIES", "MATERIALS", "REAL ESTATE",
)  # fmt: skip


def etf_profile(p: Params, faults: Faults) -> Answer:
    fund = ETFS.get(p.require("symbol").upper())
    if fund is None:
        return Answer({})  # not a fund the sample knows (or not a fund at all)
    rng = _seeded("etf", fund.symbol)
    sector_weights = sorted((rng.paretovariate(1.2) for _ in ETF_SECTORS), reverse=True)
    total = sum(sector_weights)
    others = _made_up_tickers(45, "etf", fund.symbol)
    weights = sorted((rng.paretovariate(1.1) for _ in range(len(fund.holdings) + len(others))), reverse=True)
    scale = 0.97 / sum(weights)
    holdings = []
    for ticker, weight in zip((*fund.holdings, *others), weights, strict=True):
        name = COMPANIES[ticker].name.upper() if ticker in COMPANIES else f"SAMPLE HOLDING {ticker} INC"
        holdings.append({"symbol": ticker, "description": name, "weight": f"{weight * scale:.4f}"})
    payload = {
        "net_assets": _usd(fund.net_assets),
        "net_expense_ratio": f"{fund.expense_ratio:.6g}",
        "portfolio_turnover": f"{rng.uniform(0.02, 0.12):.2f}",
        "dividend_yield": f"{rng.uniform(0.004, 0.015):.4f}",
        "inception_date": fund.inception,
        "leveraged": "NO",
        "asset_allocation": {
            "domestic_equities": "0.9712",
            "foreign_equities": "0.0263",
            "bond": "0.0",
            "cash": "0.0025",
            "other": "0.0",
        },
        "sectors": [
            {"sector": s, "weight": f"{w / total:.3f}"} for s, w in zip(ETF_SECTORS, sector_weights, strict=True)
        ],
        "holdings": holdings,
    }
    return Answer(payload)


def dividends(p: Params, faults: Faults) -> Answer:
    header = ["ex_dividend_date", "declaration_date", "record_date", "payment_date", "amount"]
    company = _company_or_none(p)
    if company is None:
        return Answer({}, [header])
    rows = [
        [ex.isoformat(), declared.isoformat(), record.isoformat(), paid.isoformat(), _fmt(amount)]
        for ex, declared, record, paid, amount in _dividends(company.symbol, dt.date(2006, 1, 1))
    ]
    payload = {"symbol": company.symbol, "data": [dict(zip(header, row, strict=True)) for row in rows]}
    return Answer(payload, [header, *rows])


def splits(p: Params, faults: Faults) -> Answer:
    """Splits happen before the synthetic price history starts, so no price in it needs adjusting."""
    header = ["effective_date", "split_factor"]
    company = _company_or_none(p)
    if company is None:
        return Answer({}, [header])
    rng = _seeded("splits", company.symbol)
    rows = []
    year = 2005
    for _ in range(rng.randint(1, 3)):
        year -= rng.randint(2, 7)
        day = _weekday_on_or_after(dt.date(year, rng.randint(1, 12), rng.randint(1, 28)))
        rows.append([day.isoformat(), rng.choice(("2.0000", "2.0000", "3.0000", "1.5000"))])
    payload = {"symbol": company.symbol, "data": [dict(zip(header, row, strict=True)) for row in rows]}
    return Answer(payload, [header, *rows])


LISTING_COLUMNS = ["symbol", "name", "exchange", "assetType", "ipoDate", "delistingDate", "status"]


def _listings() -> list[list[str]]:
    """The made-up listing history: the known companies, plus made-up delisted and recently listed names."""
    rng = _seeded("listings")
    rows = []
    for c in COMPANIES.values():
        ipo = _weekday_on_or_after(dt.date(rng.randint(1962, 2003), rng.randint(1, 12), rng.randint(1, 28)))
        kind = "ETF" if c.asset_type == "ETF" else "Stock"
        rows.append([c.symbol, c.name, c.exchange, kind, ipo.isoformat(), "null", "Active"])
    for k, ticker in enumerate(_made_up_tickers(30, "listings")):
        ipo = _weekday_on_or_after(dt.date(rng.randint(1995, 2024), rng.randint(1, 12), rng.randint(1, 28)))
        exchange = rng.choice(("NYSE", "NASDAQ", "NYSE ARCA", "NYSE MKT"))
        name = f"Sample Listing {ticker} {rng.choice(('Inc', 'Corp', 'Holdings', 'Trust'))}"
        kind = "ETF" if name.endswith("Trust") else "Stock"
        if k % 2:  # delisted some time after listing
            gone = _weekday_on_or_after(ipo + dt.timedelta(days=rng.randint(200, 6000)))
            if gone < ANCHOR:
                rows.append([ticker, name, exchange, kind, ipo.isoformat(), gone.isoformat(), "Delisted"])
                continue
        rows.append([ticker, name, exchange, kind, ipo.isoformat(), "null", "Active"])
    return sorted(rows)


def listing_status(p: Params, faults: Faults) -> Answer:
    state = p.choice("state", ("active", "delisted"), "active")
    day = _date_param(p, "date") or ANCHOR
    if not dt.date(2010, 1, 1) <= day <= ANCHOR:
        raise InvalidCall("date")
    rows = []
    for row in _listings():
        listed = row[4] <= day.isoformat()
        delisted = row[5] != "null" and row[5] <= day.isoformat()
        if listed and (delisted if state == "delisted" else not delisted):
            rows.append([*row[:6], "Delisted" if delisted else "Active"])
    return Answer({}, [LISTING_COLUMNS, *rows], csv_only=True)


def earnings_calendar(p: Params, faults: Faults) -> Answer:
    horizon = p.choice("horizon", ("3month", "6month", "12month"), "3month")
    months = int(horizon.removesuffix("month"))
    symbol = p.get("symbol")
    last_day = _add_months(ANCHOR, months)
    header = ["symbol", "name", "reportDate", "fiscalDateEnding", "estimate", "currency", "timeOfTheDay"]
    rows = []
    for c in COMPANIES.values():
        if c.asset_type != "Common Stock" or (symbol is not None and symbol.upper() != c.symbol):
            continue
        ttm_eps = sum(q.net_income / q.shares for q in _books(c.symbol)[:4])
        when = _seeded("earnings-time", c.symbol).choice(("pre-market", "post-market"))
        for k, (end, _, _, report) in enumerate(_future_quarters(c.symbol, 5), start=1):
            if ANCHOR <= report <= last_day:
                estimate = ttm_eps / 4 * (1.02**k)
                rows.append([c.symbol, c.name, report.isoformat(), end.isoformat(), _fmt(estimate), "USD", when])
    rows.sort(key=lambda r: (r[2], r[0]))
    return Answer({}, [header, *rows], csv_only=True)


def ipo_calendar(p: Params, faults: Faults) -> Answer:
    rng = _seeded("ipos", ANCHOR)
    header = ["symbol", "name", "ipoDate", "priceRangeLow", "priceRangeHigh", "currency", "exchange"]
    rows = []
    for ticker in _made_up_tickers(14, "ipo", ANCHOR):
        day = _weekday_on_or_after(ANCHOR + dt.timedelta(days=rng.randint(3, 90)))
        low = rng.choice((4, 8, 10, 12, 14, 16, 18, 20, 24))
        name = (
            f"Sample {rng.choice(('Robotics', 'Biosciences', 'Payments', 'Energy', 'Software', 'Foods'))} {ticker} Inc"
        )
        rows.append(
            [
                ticker,
                name,
                day.isoformat(),
                _fmt(low),
                _fmt(low + rng.choice((0, 2, 3, 4))),
                "USD",
                rng.choice(("NASDAQ", "NYSE")),
            ]
        )
    rows.sort(key=lambda r: (r[2], r[0]))
    return Answer({}, [header, *rows], csv_only=True)


# --------------------------------------------------------------------------------------------------
# Indices and congressional trades
# --------------------------------------------------------------------------------------------------

# code -> (name, level on the anchor day, daily volatility)
INDICES: dict[str, tuple[str, float, float]] = {
    "SPX": ("S&P 500", 5_948.7, 0.010),
    "DJI": ("Dow Jones Industrial Average", 43_870.4, 0.009),
    "COMP": ("NASDAQ Composite", 19_110.2, 0.013),
    "NDX": ("NASDAQ-100", 20_905.8, 0.013),
    "RUT": ("Russell 2000", 2_351.6, 0.014),
    "VIX": ("CBOE Volatility Index", 16.4, 0.06),
    "NYA": ("NYSE Composite", 19_980.3, 0.009),
    "OEX": ("S&P 100", 2_870.5, 0.010),
    "MID": ("S&P MidCap 400", 3_210.9, 0.011),
    "SML": ("S&P SmallCap 600", 1_455.2, 0.013),
    "RUI": ("Russell 1000", 3_268.1, 0.010),
    "RUA": ("Russell 3000", 3_390.4, 0.010),
    "DJT": ("Dow Jones Transportation Average", 17_102.6, 0.012),
    "DJU": ("Dow Jones Utility Average", 1_051.3, 0.009),
    "SOX": ("PHLX Semiconductor Index", 4_980.7, 0.02),
    "N225": ("Nikkei 225", 38_650.1, 0.012),
    "FTSE": ("FTSE 100", 8_150.5, 0.008),
    "GDAXI": ("DAX", 19_320.8, 0.010),
    "FCHI": ("CAC 40", 7_290.4, 0.010),
    "HSI": ("Hang Seng Index", 19_650.2, 0.014),
    "STOXX50E": ("EURO STOXX 50", 4_820.6, 0.010),
}


@lru_cache(maxsize=4)
def _mean_reverting_bars(
    seed: str, last: float, mean: float, vol: float, pull: float, lo: float, hi: float
) -> tuple[Bar, ...]:
    """FULL_TRADING_DAYS daily bars, newest first, whose closes follow a mean-reverting level."""
    path = _level_path(seed, last, mean, vol, pull, lo, hi)[-FULL_TRADING_DAYS - 1 :]
    rng = _seeded("bars", seed)
    bars = []
    for (_, before), (day, close) in itertools.pairwise(path):
        open_ = before * math.exp(rng.gauss(0.0, vol * 0.3))
        high = max(open_, close) * math.exp(abs(rng.gauss(0.0, vol * 0.5)))
        low = min(open_, close) / math.exp(abs(rng.gauss(0.0, vol * 0.5)))
        bars.append(Bar(day.isoformat(), open_, high, low, close, 0))
    return tuple(bars[::-1])


def index_catalog(p: Params, faults: Faults) -> Answer:
    rows = [[code, name] for code, (name, _, _) in INDICES.items()]
    payload = {
        "endpoint": "Index Catalog",
        "message": SAMPLE_LABEL,
        "data": [{"symbol": s, "name": n} for s, n in rows],
    }
    return Answer(payload, [["symbol", "name"], *rows])


def index_data(p: Params, faults: Faults) -> Answer:
    code = p.require("symbol").upper()
    interval = p.require("interval", ("daily", "weekly", "monthly"))
    if code not in INDICES:
        raise InvalidCall("symbol")
    name, level, vol = INDICES[code]
    if code == "VIX":  # a volatility index mean-reverts instead of wandering off
        daily = _mean_reverting_bars(f"index|{code}", level, 19.0, vol, 0.03, 9.0, 85.0)
    else:
        daily = _walk_bars(f"index|{code}", FULL_TRADING_DAYS, level, vol, 0)
    if interval == "weekly":
        bars: list[Bar] | tuple[Bar, ...] = _aggregate(daily, lambda d: d.isocalendar()[:2])
    elif interval == "monthly":
        bars = _aggregate(daily, lambda d: (d.year, d.month))
    else:
        bars = daily
    rows = [[b.stamp, _fmt(b.open), _fmt(b.high), _fmt(b.low), _fmt(b.close)] for b in bars]
    data = [dict(zip(("date", "open", "high", "low", "close"), row, strict=True)) for row in rows]
    payload = {"symbol": code, "name": _labelled(name), "interval": interval, "data": data}
    return Answer(payload, [["timestamp", "open", "high", "low", "close"], *rows])


STATES = ("CA", "TX", "NY", "FL", "OH", "PA", "IL", "GA", "WA", "AZ", "MI", "CO", "NC", "VA", "MN", "OR")
AMOUNT_RANGES = (
    (1_001, 15_000),
    (15_001, 50_000),
    (50_001, 100_000),
    (100_001, 250_000),
    (250_001, 500_000),
    (500_001, 1_000_000),
)


@lru_cache(maxsize=1)
def _politicians() -> tuple[dict[str, str], ...]:
    """A made-up roster (fictional names and IDs; no real member of Congress)."""
    rng = _seeded("politicians")
    roster = []
    for k in range(30):
        first, last = FIRST_NAMES[k % len(FIRST_NAMES)], LAST_NAMES[(k * 7) % len(LAST_NAMES)]
        chamber = "Senate" if k % 4 == 0 else "House"
        state = rng.choice(STATES)
        roster.append(
            {
                "bioguide_id": f"{last[0]}{900_000 + k * 37:06d}",
                "name": f"{first} {last}",
                "first_name": first,
                "last_name": last,
                "party": rng.choice(("D", "R", "D", "R", "I")),
                "chamber": chamber,
                "state": state,
                "district": "" if chamber == "Senate" else str(rng.randint(1, 20)),
                "state_district": state if chamber == "Senate" else f"{state}-{rng.randint(1, 20):02d}",
                "term_start": f"{rng.randint(2005, 2025)}-01-03",
                "in_office": "true",
            }
        )
    return tuple(roster)


@lru_cache(maxsize=1)
def _congress_trades() -> tuple[dict[str, str], ...]:
    trades = []
    stocks = [c for c in COMPANIES.values()]
    days = _trading_days_back(2 * 252)
    for member in _politicians():
        rng = _seeded("congress", member["bioguide_id"])
        for _ in range(rng.randint(4, 18)):
            company = rng.choice(stocks)
            traded = rng.choice(days)
            low, high = rng.choice(AMOUNT_RANGES[:4] if rng.random() < 0.8 else AMOUNT_RANGES)
            option = rng.random() < 0.1
            disclosed = _weekday_on_or_after(traded + dt.timedelta(days=rng.randint(5, 45)))
            if disclosed > ANCHOR:
                continue  # not disclosed yet
            trades.append(
                {
                    "transaction_date": traded.isoformat(),
                    "disclosure_date": disclosed.isoformat(),
                    "bioguide_id": member["bioguide_id"],
                    "name": member["name"],
                    "party": member["party"],
                    "chamber": member["chamber"],
                    "state_district": member["state_district"],
                    "symbol": company.symbol,
                    "asset_name": company.name + (" - Call Options" if option else ""),
                    "asset_type": "Stock Option" if option else "Stock",
                    "transaction_type": rng.choice(("BUY", "SELL", "SELL", "BUY", "SELL (PARTIAL)")),
                    "amount_min": str(low),
                    "amount_max": str(high),
                    "owner_code": rng.choice(("SELF", "SP", "JT", "DC")),
                }
            )
    trades.sort(key=lambda t: (t["transaction_date"], t["bioguide_id"], t["symbol"]), reverse=True)
    return tuple(trades)


CONGRESS_COLUMNS = [
    "transaction_date", "disclosure_date", "bioguide_id", "name", "party", "chamber", "state_district", "symbol",
    "asset_name", "asset_type", "transaction_type", "amount_min", "amount_max", "owner_code",
]  # fmt: skip


def congress_trades(p: Params, faults: Faults) -> Answer:
    symbol = (p.get("symbol") or "").upper()
    member = (p.get("bioguide_id") or "").upper()
    if not symbol and not member:
        raise InvalidCall("symbol")
    trades = [
        t
        for t in _congress_trades()
        if (not symbol or t["symbol"] == symbol) and (not member or t["bioguide_id"] == member)
    ]
    return Answer({"trades": trades}, [CONGRESS_COLUMNS] + [[t[c] for c in CONGRESS_COLUMNS] for t in trades])


def politician_metadata(p: Params, faults: Faults) -> Answer:
    return Answer({"data": list(_politicians())})


# --------------------------------------------------------------------------------------------------
# Forex and crypto
# --------------------------------------------------------------------------------------------------

FIAT = ("USD", "EUR", "GBP", "JPY")
CRYPTO = ("BTC", "ETH")
FX_VOL = 0.005
CRYPTO_VOL = {"BTC": 0.032, "ETH": 0.042}
CRYPTO_DAYS = 12 * 365  # daily crypto history reaches back to late 2014
INTRADAY_FULL_DAYS = 5  # FX_INTRADAY / CRYPTO_INTRADAY outputsize=full: the last five days of bars


def _usd_path(code: str) -> tuple[Bar, ...]:
    """A fiat currency's value in USD per trading day, newest first (USD itself is flat at 1)."""
    if code == "USD":
        return tuple(Bar(d.isoformat(), 1.0, 1.0, 1.0, 1.0, 0) for d in _trading_days_back(FULL_TRADING_DAYS))
    return _walk_bars(f"fx|{code}", FULL_TRADING_DAYS, CURRENCIES[code][1], FX_VOL * (1.2 if code == "JPY" else 1), 0)


@lru_cache(maxsize=16)
def _fx_daily_bars(from_code: str, to_code: str) -> tuple[Bar, ...]:
    """Daily bars of a pair, newest first: the ratio of the two currencies' USD paths, so pairs agree."""
    out = []
    for f, t in zip(_usd_path(from_code), _usd_path(to_code), strict=True):
        o, c = f.open / t.open, f.close / t.close
        spread = ((f.high - f.low) / f.close + (t.high - t.low) / t.close) / 4
        out.append(Bar(f.stamp, o, max(o, c) * (1 + spread), min(o, c) * (1 - spread), c, 0))
    return tuple(out)


def _fx_pair(p: Params) -> tuple[str, str]:
    pair = (p.require("from_symbol").upper(), p.require("to_symbol").upper())
    if any(code not in FIAT for code in pair):
        raise InvalidCall("from_symbol" if pair[0] not in FIAT else "to_symbol")
    return pair


def _fx_json(b: Bar) -> dict[str, str]:
    return {
        "1. open": f"{b.open:.5f}",
        "2. high": f"{b.high:.5f}",
        "3. low": f"{b.low:.5f}",
        "4. close": f"{b.close:.5f}",
    }


def _fx_answer(meta: dict[str, str], key: str, bars: list[Bar] | tuple[Bar, ...]) -> Answer:
    rows = [["timestamp", "open", "high", "low", "close"]]
    rows += [[b.stamp, *_fx_json(b).values()] for b in bars]
    return Answer({"Meta Data": meta, key: {b.stamp: _fx_json(b) for b in bars}}, rows)


def fx_intraday(p: Params, faults: Faults) -> Answer:
    from_code, to_code = _fx_pair(p)
    interval = p.require("interval", tuple(INTRADAY_INTERVALS))
    size = _output_size(p)
    minutes = INTRADAY_INTERVALS[interval]
    days = _fx_daily_bars(from_code, to_code)[:INTRADAY_FULL_DAYS]
    limit = COMPACT_POINTS if size == "compact" else INTRADAY_FULL_DAYS * 24 * 60 // minutes
    bars = _intraday_24h_bars(f"fx|{from_code}|{to_code}", days, minutes, FX_VOL, limit)
    meta = {
        "1. Information": _info(f"FX Intraday ({interval}) Time Series"),
        "2. From Symbol": from_code,
        "3. To Symbol": to_code,
        "4. Last Refreshed": bars[0].stamp,
        "5. Interval": interval,
        "6. Output Size": "Full size" if size == "full" else "Compact",
        "7. Time Zone": "UTC",
    }
    return _fx_answer(meta, f"Time Series FX ({interval})", bars)


def fx_daily(p: Params, faults: Faults) -> Answer:
    from_code, to_code = _fx_pair(p)
    size = _output_size(p)
    bars = _fx_daily_bars(from_code, to_code)[: FULL_TRADING_DAYS if size == "full" else COMPACT_POINTS]
    meta = {
        "1. Information": _info("Forex Daily Prices (open, high, low, close)"),
        "2. From Symbol": from_code,
        "3. To Symbol": to_code,
        "4. Output Size": "Full size" if size == "full" else "Compact",
        "5. Last Refreshed": bars[0].stamp,
        "6. Time Zone": "UTC",
    }
    return _fx_answer(meta, "Time Series FX (Daily)", bars)


def _fx_periodic(p: Params, label: str, period: Callable[[dt.date], object]) -> Answer:
    from_code, to_code = _fx_pair(p)
    bars = _aggregate(_fx_daily_bars(from_code, to_code), period)
    meta = {
        "1. Information": _info(f"Forex {label} Prices (open, high, low, close)"),
        "2. From Symbol": from_code,
        "3. To Symbol": to_code,
        "4. Last Refreshed": bars[0].stamp,
        "5. Time Zone": "UTC",
    }
    return _fx_answer(meta, f"Time Series FX ({label})", bars)


def fx_weekly(p: Params, faults: Faults) -> Answer:
    return _fx_periodic(p, "Weekly", lambda d: d.isocalendar()[:2])


def fx_monthly(p: Params, faults: Faults) -> Answer:
    return _fx_periodic(p, "Monthly", lambda d: (d.year, d.month))


def _crypto_pair(p: Params) -> tuple[str, str]:
    symbol, market = p.require("symbol").upper(), p.require("market").upper()
    if symbol not in CRYPTO:
        raise InvalidCall("symbol")
    if market not in FIAT:
        raise InvalidCall("market")
    return symbol, market


def _crypto_daily(symbol: str, market: str) -> tuple[Bar, ...]:
    """Daily bars (every calendar day) priced in `market`; volumes are in thousandths of a coin."""
    usd = _walk_bars(
        f"crypto|{symbol}",
        CRYPTO_DAYS,
        CURRENCIES[symbol][1],
        CRYPTO_VOL[symbol],
        40_000_000 if symbol == "BTC" else 450_000_000,
        every_day=True,
    )
    rate = CURRENCIES[market][1]
    return tuple(Bar(b.stamp, b.open / rate, b.high / rate, b.low / rate, b.close / rate, b.volume) for b in usd)


def _crypto_json(b: Bar) -> dict[str, str]:
    digits = 8 if b.close < 1 else 2
    values = [_fmt(x, digits) for x in (b.open, b.high, b.low, b.close)] + [f"{b.volume / 1000:.8f}"]
    return dict(zip(("1. open", "2. high", "3. low", "4. close", "5. volume"), values, strict=True))


def _crypto_answer(meta: dict[str, str], key: str, bars: list[Bar] | tuple[Bar, ...]) -> Answer:
    rows = [["timestamp", "open", "high", "low", "close", "volume"]]
    rows += [[b.stamp, *_crypto_json(b).values()] for b in bars]
    return Answer({"Meta Data": meta, key: {b.stamp: _crypto_json(b) for b in bars}}, rows)


def crypto_intraday(p: Params, faults: Faults) -> Answer:
    symbol, market = _crypto_pair(p)
    interval = p.require("interval", tuple(INTRADAY_INTERVALS))
    size = _output_size(p)
    minutes = INTRADAY_INTERVALS[interval]
    limit = COMPACT_POINTS if size == "compact" else INTRADAY_FULL_DAYS * 24 * 60 // minutes
    days = _crypto_daily(symbol, market)[:INTRADAY_FULL_DAYS]
    bars = _intraday_24h_bars(f"crypto|{symbol}|{market}", days, minutes, CRYPTO_VOL[symbol], limit)
    meta = {
        "1. Information": _info(f"Crypto Intraday ({interval}) Time Series"),
        "2. Digital Currency Code": symbol,
        "3. Digital Currency Name": CURRENCIES[symbol][0],
        "4. Market Code": market,
        "5. Market Name": CURRENCIES[market][0],
        "6. Last Refreshed": bars[0].stamp,
        "7. Interval": interval,
        "8. Output Size": "Full size" if size == "full" else "Compact",
        "9. Time Zone": "UTC",
    }
    return _crypto_answer(meta, f"Time Series Crypto ({interval})", bars)


def _digital_currency(p: Params, label: str, period: Callable[[dt.date], object] | None) -> Answer:
    symbol, market = _crypto_pair(p)
    daily = _crypto_daily(symbol, market)
    bars = daily if period is None else _aggregate(daily, period)
    meta = {
        "1. Information": _info(f"{label} Prices and Volumes for Digital Currency"),
        "2. Digital Currency Code": symbol,
        "3. Digital Currency Name": CURRENCIES[symbol][0],
        "4. Market Code": market,
        "5. Market Name": CURRENCIES[market][0],
        "6. Last Refreshed": f"{bars[0].stamp} 00:00:00",
        "7. Time Zone": "UTC",
    }
    return _crypto_answer(meta, f"Time Series (Digital Currency {label})", bars)


def digital_currency_daily(p: Params, faults: Faults) -> Answer:
    return _digital_currency(p, "Daily", None)


def digital_currency_weekly(p: Params, faults: Faults) -> Answer:
    return _digital_currency(p, "Weekly", lambda d: d.isocalendar()[:2])


def digital_currency_monthly(p: Params, faults: Faults) -> Answer:
    return _digital_currency(p, "Monthly", lambda d: (d.year, d.month))


# --------------------------------------------------------------------------------------------------
# Commodities and the economy: {"name", "interval", "unit", "data": [{"date", "value"}]}, newest first
# --------------------------------------------------------------------------------------------------

LEVEL_START = dt.date(1990, 1, 1)


@lru_cache(maxsize=64)
def _level_path(
    seed: str, last: float, mean: float, vol: float, pull: float, lo: float, hi: float
) -> tuple[tuple[dt.date, float], ...]:
    """A mean-reverting daily level (Mon-Fri) from LEVEL_START to ANCHOR, oldest first, ending at `last`."""
    rng = _seeded("level", seed)
    span = (ANCHOR - LEVEL_START).days
    days = [d for d in (LEVEL_START + dt.timedelta(days=k) for k in range(span + 1)) if d.weekday() < 5]
    values = [last]
    for _ in range(len(days) - 1):  # walk backwards from today's value
        x = values[-1]
        x += pull * (mean - x) + rng.gauss(0.0, vol * x)
        values.append(min(max(x, lo), hi))
    return tuple(zip(days, values[::-1], strict=True))


def _averaged(path: tuple[tuple[dt.date, float], ...], interval: str) -> list[tuple[str, float]]:
    """The path as daily points, or averaged over each completed week, month, quarter or year (newest first)."""
    if interval == "daily":
        return [(d.isoformat(), v) for d, v in reversed(path)]
    groups: dict[dt.date, list[float]] = {}
    for d, v in path:
        if interval == "weekly":
            key = d + dt.timedelta(days=4 - d.weekday())  # the week's Friday
        elif interval == "monthly":
            key = d.replace(day=1)
        elif interval == "quarterly":
            key = dt.date(d.year, (d.month - 1) // 3 * 3 + 1, 1)
        elif interval == "semiannual":
            key = dt.date(d.year, 1 if d.month <= 6 else 7, 1)
        else:
            key = dt.date(d.year, 1, 1)
        groups.setdefault(key, []).append(v)
    complete = {
        "weekly": lambda k: k <= ANCHOR,
        "monthly": lambda k: _add_months(k, 1) <= ANCHOR,
        "quarterly": lambda k: _add_months(k, 3) <= ANCHOR,
        "semiannual": lambda k: _add_months(k, 6) <= ANCHOR,
        "annual": lambda k: _add_months(k, 12) <= ANCHOR,
    }[interval]
    return [(k.isoformat(), sum(vs) / len(vs)) for k, vs in sorted(groups.items(), reverse=True) if complete(k)]


@dataclass(frozen=True)
class Level:
    """A series that wanders around a level: commodity prices, interest rates, unemployment."""

    name: str
    unit: str
    intervals: tuple[str, ...]  # the first is the default
    last: float
    mean: float
    vol: float
    pull: float = 0.002
    lo: float = 0.0
    hi: float = math.inf
    digits: int = 2


COMMODITIES: dict[str, Level] = {
    "WTI": Level(
        "Crude Oil Prices: West Texas Intermediate (WTI) - Cushing, Oklahoma",
        "dollars per barrel",
        ("monthly", "daily", "weekly"),
        71.24,
        65.0,
        0.022,
        lo=10.0,
    ),
    "BRENT": Level(
        "Crude Oil Prices: Brent - Europe",
        "dollars per barrel",
        ("monthly", "daily", "weekly"),
        74.81,
        68.0,
        0.02,
        lo=10.0,
    ),
    "NATURAL_GAS": Level(
        "Henry Hub Natural Gas Spot Price",
        "dollars per million BTU",
        ("monthly", "daily", "weekly"),
        3.12,
        3.5,
        0.035,
        lo=1.0,
    ),
    "COPPER": Level(
        "Global Price of Copper",
        "dollar per metric ton",
        ("monthly", "quarterly", "annual"),
        9_352.0,
        7_000.0,
        0.012,
        lo=1_000.0,
        digits=2,
    ),
    "ALUMINUM": Level(
        "Global Price of Aluminum",
        "dollar per metric ton",
        ("monthly", "quarterly", "annual"),
        2_581.0,
        2_100.0,
        0.011,
        lo=800.0,
    ),
    "WHEAT": Level(
        "Global Price of Wheat",
        "dollar per metric ton",
        ("monthly", "quarterly", "annual"),
        245.3,
        220.0,
        0.014,
        lo=60.0,
    ),
    "CORN": Level(
        "Global Price of Corn",
        "dollar per metric ton",
        ("monthly", "quarterly", "annual"),
        205.8,
        190.0,
        0.013,
        lo=50.0,
    ),
    "COTTON": Level(
        "Global Price of Cotton", "cent per pound", ("monthly", "quarterly", "annual"), 72.4, 75.0, 0.013, lo=20.0
    ),
    "SUGAR": Level(
        "Global Price of Sugar, No. 11, World",
        "cent per pound",
        ("monthly", "quarterly", "annual"),
        19.6,
        16.0,
        0.016,
        lo=4.0,
    ),
    "COFFEE": Level(
        "Global Price of Coffee, Other Mild Arabica",
        "cent per pound",
        ("monthly", "quarterly", "annual"),
        245.1,
        180.0,
        0.016,
        lo=40.0,
    ),
    "ALL_COMMODITIES": Level(
        "Global Price Index of All Commodities",
        "index 2016 = 100",
        ("monthly", "quarterly", "annual"),
        172.3,
        150.0,
        0.008,
        lo=40.0,
    ),
}
METALS = {
    "GOLD": ("Gold", 2_654.31, 1_800.0, 0.009),
    "SILVER": ("Silver", 31.27, 24.0, 0.016),
}
TREASURY_MATURITIES = {
    "3month": ("3-Month", 4.31),
    "2year": ("2-Year", 4.12),
    "5year": ("5-Year", 4.05),
    "7year": ("7-Year", 4.16),
    "10year": ("10-Year", 4.29),
    "30year": ("30-Year", 4.48),
}
ECONOMIC_LEVELS: dict[str, Level] = {
    "FEDERAL_FUNDS_RATE": Level(
        "Effective Federal Funds Rate",
        "percent",
        ("monthly", "daily", "weekly"),
        4.33,
        2.0,
        0.01,
        pull=0.001,
        lo=0.05,
        hi=9.0,
    ),
    "UNEMPLOYMENT": Level(
        "Unemployment Rate", "percent", ("monthly",), 4.2, 5.6, 0.004, pull=0.001, lo=3.0, hi=11.0, digits=1
    ),
    "INFLATION": Level(
        "Inflation - US Consumer Prices", "percent", ("annual",), 2.9, 2.6, 0.02, pull=0.002, lo=-1.0, hi=9.0, digits=3
    ),
}
# name, unit, interval, value in January 2000, yearly growth, digits
ECONOMIC_GROWTH = {
    "REAL_GDP_PER_CAPITA": (
        "Real gross domestic product per capita",
        "chained 2017 dollars",
        "quarterly",
        49_500.0,
        0.013,
        0,
    ),
    "RETAIL_SALES": ("Advance Retail Sales: Retail Trade", "millions of dollars", "monthly", 245_000.0, 0.04, 0),
    "DURABLES": ("Manufacturer New Orders: Durable Goods", "millions of dollars", "monthly", 205_000.0, 0.016, 0),
    "NONFARM_PAYROLL": ("Total Nonfarm Payroll", "thousands of persons", "monthly", 131_000.0, 0.0075, 0),
}


def _series_answer(name: str, interval: str, unit: str, points: list[tuple[str, float]], digits: int) -> Answer:
    rows = [[d, _fmt(v, digits)] for d, v in points]
    payload = {
        "name": _labelled(name),
        "interval": interval,
        "unit": unit,
        "data": [{"date": d, "value": v} for d, v in rows],
    }
    return Answer(payload, [["timestamp", "value"], *rows])


def _level_answer(p: Params, seed: str, level: Level) -> Answer:
    interval = p.choice("interval", level.intervals, level.intervals[0])
    path = _level_path(seed, level.last, level.mean, level.vol, level.pull, level.lo, level.hi)
    return _series_answer(level.name, interval, level.unit, _averaged(path, interval), level.digits)


def commodity(p: Params, faults: Faults) -> Answer:
    return _level_answer(p, f"commodity|{p.function}", COMMODITIES[p.function])


def _metal(p: Params) -> tuple[str, tuple[str, float, float, float]]:
    symbol = p.require("symbol").upper()
    key = {"XAU": "GOLD", "XAG": "SILVER"}.get(symbol, symbol)
    if key not in METALS:
        raise InvalidCall("symbol")
    return key, METALS[key]


def gold_silver_spot(p: Params, faults: Faults) -> Answer:
    key, (_, last, _, _) = _metal(p)
    return Answer({"nominal": key, "timestamp": f"{ANCHOR.isoformat()} 16:59:58", "price": _fmt(last, 4)})


def gold_silver_history(p: Params, faults: Faults) -> Answer:
    key, (name, last, mean, vol) = _metal(p)
    level = Level(
        f"{name} Prices (USD per troy ounce)",
        "USD per troy ounce",
        ("monthly", "daily", "weekly"),
        last,
        mean,
        vol,
        lo=1.0,
    )
    return _level_answer(p, f"metal|{key}", level)


def economic_level(p: Params, faults: Faults) -> Answer:
    return _level_answer(p, f"economic|{p.function}", ECONOMIC_LEVELS[p.function])


def treasury_yield(p: Params, faults: Faults) -> Answer:
    maturity = p.choice("maturity", tuple(TREASURY_MATURITIES), "10year")
    label, last = TREASURY_MATURITIES[maturity]
    level = Level(
        f"{label} Treasury Constant Maturity Rate",
        "percent",
        ("monthly", "daily", "weekly"),
        last,
        3.2,
        0.012,
        pull=0.001,
        lo=0.01,
        hi=9.0,
    )
    return _level_answer(p, f"treasury|{maturity}", level)


def economic_growth(p: Params, faults: Faults) -> Answer:
    name, unit, interval, start, growth, digits = ECONOMIC_GROWTH[p.function]
    p.choice("interval", (interval,), interval)
    months = {"monthly": 1, "quarterly": 3}[interval]
    # the newest published period: last month, or the last complete quarter (like REAL_GDP and CPI)
    this_period = dt.date(ANCHOR.year, (ANCHOR.month - 1) // months * months + 1, 1)
    newest = _add_months(this_period, -months)
    rng = _seeded("economic", p.function, interval)
    level, points = start, []
    for d in _periods(dt.date(2000, 1, 1), newest, months)[::-1]:
        level *= 1 + growth * months / 12 + rng.gauss(0.0, 0.004 * math.sqrt(months))
        points.append((d.isoformat(), level))
    return _series_answer(name, interval, unit, points[::-1], digits)


# --------------------------------------------------------------------------------------------------
# Technical indicators beyond RSI and SMA
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Extra:
    """An indicator parameter besides interval, time_period and series_type."""

    name: str  # query parameter
    label: str  # its Meta Data label
    default: float
    kind: str = "int"  # "int", "matype" (0-8) or "float"


@dataclass(frozen=True)
class Inputs:
    bars: list[Bar]  # oldest first
    values: list[float]  # the series_type field (close when the indicator takes none)
    period: int
    options: dict[str, float]

    def __getitem__(self, name: str) -> int:
        return int(self.options[name])

    @property
    def opens(self) -> list[float]:
        return [b.open for b in self.bars]

    @property
    def highs(self) -> list[float]:
        return [b.high for b in self.bars]

    @property
    def lows(self) -> list[float]:
        return [b.low for b in self.bars]

    @property
    def closes(self) -> list[float]:
        return [b.close for b in self.bars]

    @property
    def volumes(self) -> list[float]:
        return [float(b.volume) for b in self.bars]

    def hlc(self) -> tuple[list[float], list[float], list[float]]:
        return self.highs, self.lows, self.closes


@dataclass(frozen=True)
class Indicator:
    title: str  # Meta Data "2: Indicator"
    outputs: tuple[str, ...]
    compute: Callable[[Inputs], list[sample_data.Series]]
    period: bool = False  # takes time_period
    series: bool = False  # takes series_type
    extras: tuple[Extra, ...] = ()
    key: str = ""  # "Technical Analysis: <key>", when it is not the function's name
    intraday_only: bool = False
    digits: int = 4
    fixed: tuple[tuple[str, Any], ...] = ()  # Meta Data entries after the period with constant values (T3's vFactor)


def _fast_slow(
    fast: int, slow: int, fast_label: str = "Fast Period", slow_label: str = "Slow Period"
) -> tuple[Extra, ...]:
    return Extra("fastperiod", fast_label, fast), Extra("slowperiod", slow_label, slow)


def _directional(name: str) -> Callable[[Inputs], list[sample_data.Series]]:
    return lambda x: [sample_data.directional(*x.hlc(), x.period)[name]]


def _stoch(x: Inputs) -> list[sample_data.Series]:
    fast_k = sample_data.stochastic_k(*x.hlc(), x["fastkperiod"])
    slow_k = sample_data.moving_average(fast_k, x["slowkperiod"], x["slowkmatype"])
    return [slow_k, sample_data.moving_average(slow_k, x["slowdperiod"], x["slowdmatype"])]


def _stochf(x: Inputs) -> list[sample_data.Series]:
    fast_k = sample_data.stochastic_k(*x.hlc(), x["fastkperiod"])
    return [fast_k, sample_data.moving_average(fast_k, x["fastdperiod"], x["fastdmatype"])]


def _aroon_oscillator(x: Inputs) -> list[sample_data.Series]:
    up, down = sample_data.aroon(x.highs, x.lows, x.period)
    return [[None if u is None or d is None else u - d for u, d in zip(up, down, strict=True)]]


def _hilbert(*names: str) -> Callable[[Inputs], list[sample_data.Series]]:
    def compute(x: Inputs) -> list[sample_data.Series]:
        measures = sample_data.hilbert(x.values)
        return [measures[n] for n in names]

    return compute


MA_TYPE = "MA Type"
INDICATORS: dict[str, Indicator] = {
    "EMA": Indicator(
        "Exponential Moving Average (EMA)", ("EMA",), lambda x: [sample_data.ema(x.values, x.period)], True, True
    ),
    "WMA": Indicator(
        "Weighted Moving Average (WMA)", ("WMA",), lambda x: [sample_data.wma(x.values, x.period)], True, True
    ),
    "DEMA": Indicator(
        "Double Exponential Moving Average (DEMA)",
        ("DEMA",),
        lambda x: [sample_data.dema(x.values, x.period)],
        True,
        True,
    ),
    "TEMA": Indicator(
        "Triple Exponential Moving Average (TEMA)",
        ("TEMA",),
        lambda x: [sample_data.tema(x.values, x.period)],
        True,
        True,
    ),
    "TRIMA": Indicator(
        "Triangular Exponential Moving Average (TRIMA)",
        ("TRIMA",),
        lambda x: [sample_data.trima(x.values, x.period)],
        True,
        True,
    ),
    "KAMA": Indicator(
        "Kaufman Adaptive Moving Average (KAMA)",
        ("KAMA",),
        lambda x: [sample_data.kama(x.values, x.period)],
        True,
        True,
    ),
    "T3": Indicator(
        "Triple Exponential Moving Average (T3)",
        ("T3",),
        lambda x: [sample_data.t3(x.values, x.period)],
        True,
        True,
        fixed=(("Volume Factor (vFactor)", 0.7),),
    ),
    "MAMA": Indicator(
        "MESA Adaptive Moving Average (MAMA)",
        ("MAMA", "FAMA"),
        lambda x: list(sample_data.mama(x.values, x.options["fastlimit"], x.options["slowlimit"])),
        series=True,
        extras=(Extra("fastlimit", "Fast Limit", 0.01, "float"), Extra("slowlimit", "Slow Limit", 0.01, "float")),
    ),
    "VWAP": Indicator(
        "Volume Weighted Average Price (VWAP)",
        ("VWAP",),
        lambda x: [sample_data.vwap([b.stamp[:10] for b in x.bars], *x.hlc(), x.volumes)],
        intraday_only=True,
    ),
    "MACD": Indicator(
        "Moving Average Convergence/Divergence (MACD)",
        ("MACD", "MACD_Signal", "MACD_Hist"),
        lambda x: list(sample_data.macd(x.values, x["fastperiod"], x["slowperiod"], x["signalperiod"])),
        series=True,
        extras=(*_fast_slow(12, 26), Extra("signalperiod", "Signal Period", 9)),
    ),
    "MACDEXT": Indicator(
        "MACD with Controllable Moving Average Type (MACDEXT)",
        ("MACD", "MACD_Signal", "MACD_Hist"),
        lambda x: list(
            sample_data.macd(
                x.values,
                x["fastperiod"],
                x["slowperiod"],
                x["signalperiod"],
                (x["fastmatype"], x["slowmatype"], x["signalmatype"]),
            )
        ),
        series=True,
        extras=(
            *_fast_slow(12, 26),
            Extra("signalperiod", "Signal Period", 9),
            Extra("fastmatype", "Fast MA Type", 0, "matype"),
            Extra("slowmatype", "Slow MA Type", 0, "matype"),
            Extra("signalmatype", "Signal MA Type", 0, "matype"),
        ),
    ),
    "STOCH": Indicator(
        "Stochastic (STOCH)",
        ("SlowK", "SlowD"),
        _stoch,
        extras=(
            Extra("fastkperiod", "FastK Period", 5),
            Extra("slowkperiod", "SlowK Period", 3),
            Extra("slowkmatype", "SlowK MA Type", 0, "matype"),
            Extra("slowdperiod", "SlowD Period", 3),
            Extra("slowdmatype", "SlowD MA Type", 0, "matype"),
        ),
    ),
    "STOCHF": Indicator(
        "Stochastic Fast (STOCHF)",
        ("FastK", "FastD"),
        _stochf,
        extras=(
            Extra("fastkperiod", "FastK Period", 5),
            Extra("fastdperiod", "FastD Period", 3),
            Extra("fastdmatype", "FastD MA Type", 0, "matype"),
        ),
    ),
    "STOCHRSI": Indicator(
        "Stochastic Relative Strength Index (STOCHRSI)",
        ("FastK", "FastD"),
        lambda x: list(
            sample_data.stochastic_rsi(x.values, x.period, x["fastkperiod"], x["fastdperiod"], x["fastdmatype"])
        ),
        True,
        True,
        extras=(
            Extra("fastkperiod", "FastK Period", 5),
            Extra("fastdperiod", "FastD Period", 3),
            Extra("fastdmatype", "FastD MA Type", 0, "matype"),
        ),
    ),
    "WILLR": Indicator(
        "Williams' %R (WILLR)", ("WILLR",), lambda x: [sample_data.williams_r(*x.hlc(), x.period)], True
    ),
    "ADX": Indicator("Average Directional Movement Index (ADX)", ("ADX",), _directional("ADX"), True),
    "ADXR": Indicator("Average Directional Movement Index Rating (ADXR)", ("ADXR",), _directional("ADXR"), True),
    "APO": Indicator(
        "Absolute Price Oscillator (APO)",
        ("APO",),
        lambda x: [sample_data.price_oscillator(x.values, x["fastperiod"], x["slowperiod"], x["matype"], False)],
        series=True,
        extras=(*_fast_slow(12, 26), Extra("matype", MA_TYPE, 0, "matype")),
    ),
    "PPO": Indicator(
        "Percentage Price Oscillator (PPO)",
        ("PPO",),
        lambda x: [sample_data.price_oscillator(x.values, x["fastperiod"], x["slowperiod"], x["matype"], True)],
        series=True,
        extras=(*_fast_slow(12, 26), Extra("matype", MA_TYPE, 0, "matype")),
    ),
    "MOM": Indicator("Momentum (MOM)", ("MOM",), lambda x: [sample_data.momentum(x.values, x.period)], True, True),
    "BOP": Indicator("Balance Of Power (BOP)", ("BOP",), lambda x: [sample_data.balance_of_power(x.opens, *x.hlc())]),
    "CCI": Indicator("Commodity Channel Index (CCI)", ("CCI",), lambda x: [sample_data.cci(*x.hlc(), x.period)], True),
    "CMO": Indicator(
        "Chande Momentum Oscillator (CMO)", ("CMO",), lambda x: [sample_data.cmo(x.values, x.period)], True, True
    ),
    "ROC": Indicator(
        "Rate of change : ((price/prevPrice)-1)*100",
        ("ROC",),
        lambda x: [sample_data.rate_of_change(x.values, x.period)],
        True,
        True,
    ),
    "ROCR": Indicator(
        "Rate of change ratio: (price/prevPrice)",
        ("ROCR",),
        lambda x: [sample_data.rate_of_change(x.values, x.period, ratio=True)],
        True,
        True,
    ),
    "AROON": Indicator(
        "Aroon (AROON)",
        ("Aroon Down", "Aroon Up"),
        lambda x: list(sample_data.aroon(x.highs, x.lows, x.period))[::-1],
        True,
    ),
    "AROONOSC": Indicator("Aroon Oscillator (AROONOSC)", ("AROONOSC",), _aroon_oscillator, True),
    "MFI": Indicator(
        "Money Flow Index (MFI)",
        ("MFI",),
        lambda x: [sample_data.money_flow_index(*x.hlc(), x.volumes, x.period)],
        True,
    ),
    "TRIX": Indicator(
        "1-day Rate-Of-Change (ROC) of a Triple Smooth EMA (TRIX)",
        ("TRIX",),
        lambda x: [sample_data.trix(x.values, x.period)],
        True,
        True,
    ),
    "ULTOSC": Indicator(
        "Ultimate Oscillator (ULTOSC)",
        ("ULTOSC",),
        lambda x: [sample_data.ultimate_oscillator(*x.hlc(), (x["timeperiod1"], x["timeperiod2"], x["timeperiod3"]))],
        extras=(
            Extra("timeperiod1", "Time Period 1", 7),
            Extra("timeperiod2", "Time Period 2", 14),
            Extra("timeperiod3", "Time Period 3", 28),
        ),
    ),
    "DX": Indicator("Directional Movement Index (DX)", ("DX",), _directional("DX"), True),
    "MINUS_DI": Indicator("Minus Directional Indicator (MINUS_DI)", ("MINUS_DI",), _directional("MINUS_DI"), True),
    "PLUS_DI": Indicator("Plus Directional Indicator (PLUS_DI)", ("PLUS_DI",), _directional("PLUS_DI"), True),
    "MINUS_DM": Indicator("Minus Directional Movement (MINUS_DM)", ("MINUS_DM",), _directional("MINUS_DM"), True),
    "PLUS_DM": Indicator("Plus Directional Movement (PLUS_DM)", ("PLUS_DM",), _directional("PLUS_DM"), True),
    "BBANDS": Indicator(
        "Bollinger Bands (BBANDS)",
        ("Real Upper Band", "Real Middle Band", "Real Lower Band"),
        lambda x: list(
            sample_data.bollinger(x.values, x.period, x.options["nbdevup"], x.options["nbdevdn"], x["matype"])
        ),
        True,
        True,
        extras=(
            Extra("nbdevup", "Deviation multiplier for upper band", 2),
            Extra("nbdevdn", "Deviation multiplier for lower band", 2),
            Extra("matype", MA_TYPE, 0, "matype"),
        ),
    ),
    "MIDPOINT": Indicator(
        "MidPoint over period (MIDPOINT)",
        ("MIDPOINT",),
        lambda x: [sample_data.midpoint(x.values, x.period)],
        True,
        True,
    ),
    "MIDPRICE": Indicator(
        "Midpoint Price over period (MIDPRICE)",
        ("MIDPRICE",),
        lambda x: [sample_data.midprice(x.highs, x.lows, x.period)],
        True,
    ),
    "SAR": Indicator(
        "Parabolic SAR (SAR)",
        ("SAR",),
        lambda x: [sample_data.parabolic_sar(x.highs, x.lows, x.options["acceleration"], x.options["maximum"])],
        extras=(Extra("acceleration", "Acceleration", 0.01, "float"), Extra("maximum", "Maximum", 0.2, "float")),
    ),
    "TRANGE": Indicator("True Range (TRANGE)", ("TRANGE",), lambda x: [sample_data.true_range(*x.hlc())]),
    "ATR": Indicator("Average True Range (ATR)", ("ATR",), lambda x: [sample_data.atr(*x.hlc(), x.period)], True),
    "NATR": Indicator(
        "Normalized Average True Range (NATR)", ("NATR",), lambda x: [sample_data.natr(*x.hlc(), x.period)], True
    ),
    "AD": Indicator(
        "Chaikin A/D Line", ("Chaikin A/D",), lambda x: [sample_data.chaikin_ad(*x.hlc(), x.volumes)], key="Chaikin A/D"
    ),
    "ADOSC": Indicator(
        "Chaikin A/D Oscillator (ADOSC)",
        ("ADOSC",),
        lambda x: [sample_data.chaikin_oscillator(*x.hlc(), x.volumes, x["fastperiod"], x["slowperiod"])],
        extras=_fast_slow(3, 10, "FastK Period", "SlowK Period"),
    ),
    "OBV": Indicator(
        "On Balance Volume (OBV)", ("OBV",), lambda x: [sample_data.on_balance_volume(x.closes, x.volumes)]
    ),
    "HT_TRENDLINE": Indicator(
        "Hilbert Transform - Instantaneous Trendline (HT_TRENDLINE)",
        ("HT_TRENDLINE",),
        _hilbert("HT_TRENDLINE"),
        series=True,
    ),
    "HT_SINE": Indicator(
        "Hilbert Transform - SineWave (HT_SINE)", ("LEAD SINE", "SINE"), _hilbert("LEAD SINE", "SINE"), series=True
    ),
    "HT_TRENDMODE": Indicator(
        "Hilbert Transform - Trend vs Cycle Mode (HT_TRENDMODE)",
        ("TRENDMODE",),
        _hilbert("TRENDMODE"),
        series=True,
        digits=0,
    ),
    "HT_DCPERIOD": Indicator(
        "Hilbert Transform - Dominant Cycle Period (HT_DCPERIOD)", ("DCPERIOD",), _hilbert("DCPERIOD"), series=True
    ),
    "HT_DCPHASE": Indicator(
        "Hilbert Transform - Dominant Cycle Phase (HT_DCPHASE)", ("HT_DCPHASE",), _hilbert("DCPHASE"), series=True
    ),
    "HT_PHASOR": Indicator(
        "Hilbert Transform - Phasor Components (HT_PHASOR)",
        ("PHASE", "QUADRATURE"),
        _hilbert("PHASE", "QUADRATURE"),
        series=True,
    ),
}


def technical_indicator(p: Params, faults: Faults) -> Answer:
    spec = INDICATORS[p.function]
    symbol = p.symbol()
    interval = p.require("interval", tuple(INTRADAY_INTERVALS) if spec.intraday_only else INDICATOR_INTERVALS)
    period = _positive_int(p, "time_period") if spec.period else 0
    series_type = p.require("series_type", SERIES_TYPES) if spec.series else "close"
    options: dict[str, float] = {}
    for extra in spec.extras:
        if extra.kind == "float":
            options[extra.name] = _number(p, extra.name, extra.default)
        else:
            lo, hi = (0, 8) if extra.kind == "matype" else (1, 10_000)
            options[extra.name] = _positive_int(p, extra.name, int(extra.default), lo=lo, hi=hi)
    bars = _indicator_series(symbol, interval)
    columns = spec.compute(Inputs(bars, [getattr(b, series_type) for b in bars], period, options))
    points = [
        (b.stamp, values)
        for b, values in zip(bars, zip(*columns, strict=True), strict=True)
        if all(v is not None for v in values)
    ][::-1]
    meta: dict[str, Any] = {
        "1: Symbol": symbol,
        "2: Indicator": spec.title,
        "3: Last Refreshed": bars[-1].stamp,
        "4: Interval": interval,
    }
    number = 5
    if spec.period:
        meta[f"{number}: Time Period"] = period
        number += 1
    for label, value in spec.fixed:
        meta[f"{number}: {label}"] = value
        number += 1
    if spec.extras:
        for k, extra in enumerate(spec.extras, start=1):
            meta[f"{number}.{k}: {extra.label}"] = options[extra.name]
        number += 1
    if spec.series:
        meta[f"{number}: Series Type"] = series_type
        number += 1
    meta[f"{number}: Time Zone"] = TIME_ZONE

    def shown(v: float | None) -> str:
        text = f"{cast(float, v):.{spec.digits}f}"
        return text[1:] if text.startswith("-") and not text.strip("-0.") else text  # no "-0.0000"

    table = {stamp: dict(zip(spec.outputs, map(shown, values), strict=True)) for stamp, values in points}
    rows = [["time", *spec.outputs]] + [[stamp, *map(shown, values)] for stamp, values in points]
    return Answer({"Meta Data": meta, f"Technical Analysis: {spec.key or p.function}": table}, rows)


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
    # stocks
    "TIME_SERIES_DAILY_ADJUSTED": time_series_daily_adjusted,
    "TIME_SERIES_WEEKLY_ADJUSTED": time_series_weekly_adjusted,
    "TIME_SERIES_MONTHLY_ADJUSTED": time_series_monthly_adjusted,
    "REALTIME_BULK_QUOTES": realtime_bulk_quotes,
    "REALTIME_BULK_BID_ASK_PRICES": realtime_bulk_bid_ask_prices,
    "MARKET_STATUS": market_status,
    # options
    "REALTIME_OPTIONS": realtime_options,
    "REALTIME_OPTIONS_FMV": realtime_options_fmv,
    "REALTIME_PUT_CALL_RATIO": realtime_put_call_ratio,
    "REALTIME_VOLUME_OPEN_INTEREST_RATIO": realtime_volume_open_interest_ratio,
    "HISTORICAL_OPTIONS": historical_options,
    "HISTORICAL_PUT_CALL_RATIO": historical_put_call_ratio,
    "HISTORICAL_VOLUME_OPEN_INTEREST_RATIO": historical_volume_open_interest_ratio,
    # intelligence
    "NEWS_SENTIMENT": news_sentiment,
    "EARNINGS_CALL_TRANSCRIPT": earnings_call_transcript,
    "TOP_GAINERS_LOSERS": top_gainers_losers,
    "INSIDER_TRANSACTIONS": insider_transactions,
    "INSTITUTIONAL_HOLDINGS": institutional_holdings,
    "ANALYTICS_FIXED_WINDOW": analytics_fixed_window,
    "ANALYTICS_SLIDING_WINDOW": analytics_sliding_window,
    # fundamentals
    "COMPANY_LOGO": company_logo,
    "ETF_PROFILE": etf_profile,
    "DIVIDENDS": dividends,
    "SPLITS": splits,
    "INCOME_STATEMENT": income_statement,
    "BALANCE_SHEET": balance_sheet,
    "CASH_FLOW": cash_flow,
    "EARNINGS": earnings,
    "EARNINGS_ESTIMATES": earnings_estimates,
    "LISTING_STATUS": listing_status,
    "EARNINGS_CALENDAR": earnings_calendar,
    "IPO_CALENDAR": ipo_calendar,
    # indices and congress
    "INDEX_DATA": index_data,
    "INDEX_CATALOG": index_catalog,
    "CONGRESS_TRADES": congress_trades,
    "POLITICIAN_METADATA": politician_metadata,
    # forex and crypto
    "FX_INTRADAY": fx_intraday,
    "FX_DAILY": fx_daily,
    "FX_WEEKLY": fx_weekly,
    "FX_MONTHLY": fx_monthly,
    "CRYPTO_INTRADAY": crypto_intraday,
    "DIGITAL_CURRENCY_DAILY": digital_currency_daily,
    "DIGITAL_CURRENCY_WEEKLY": digital_currency_weekly,
    "DIGITAL_CURRENCY_MONTHLY": digital_currency_monthly,
    # commodities and the economy
    **dict.fromkeys(COMMODITIES, commodity),
    "GOLD_SILVER_SPOT": gold_silver_spot,
    "GOLD_SILVER_HISTORY": gold_silver_history,
    **dict.fromkeys(ECONOMIC_LEVELS, economic_level),
    **dict.fromkeys(ECONOMIC_GROWTH, economic_growth),
    "TREASURY_YIELD": treasury_yield,
    # technical indicators
    **dict.fromkeys(INDICATORS, technical_indicator),
    # real functions outside the bundled catalog, once listed here as unsimulated
    "SHARES_OUTSTANDING": shares_outstanding,
    "PUT_CALL_RATIO": realtime_put_call_ratio,  # an older name of REALTIME_PUT_CALL_RATIO
    "VOLUME_OPEN_INTEREST_RATIO": realtime_volume_open_interest_ratio,  # likewise
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
    if handler is None:
        return _json_reply({"Error Message": f"This API function ({function}) does not exist."})
    premium_asked = function in PREMIUM_FUNCTIONS or params.get("entitlement") == "realtime"
    if premium_asked and not _premium_plan(apikey):
        return _json_reply({"Information": PREMIUM_NOTICE})
    try:
        answer = handler(Params(function, params), faults)
    except InvalidCall:
        return _json_reply(_invalid_call(function))
    wants_csv = params.get("datatype") == "csv" or answer.csv_only
    if wants_csv and answer.csv_rows is not None and not json_only:
        text = io.StringIO()
        csv.writer(text, lineterminator="\r\n").writerows(answer.csv_rows)
        return Reply(200, "text/csv", text.getvalue().encode())
    return _json_reply(answer.payload)


# --------------------------------------------------------------------------------------------------
# HTTP plumbing
# --------------------------------------------------------------------------------------------------


class _RequestHandler(TrackedHandler):
    server_version = "SampleUpstream/1"

    @property
    def upstream(self) -> SampleUpstream:
        return cast(SampleUpstream, cast(LoopbackServer, self.server).upstream)

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


class SampleUpstream(ServedUpstream):
    """The synthetic Alpha Vantage server. Binds on construction, so `url` is known before `start()`."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0, faults: Faults | None = None) -> None:
        self.faults: Faults = faults if faults is not None else Faults()
        # The newest `serving.RECORD_LIMIT` requests: the log shown to people, the key masked; and the same with the
        # key, for tests that check which key came.
        self._masked: deque[dict[str, str]] = record()
        self._unmasked: deque[dict[str, str]] = record()
        super().__init__(host, port, _RequestHandler, "sample-upstream")
        self.url = f"http://{host}:{self.port}/query"

    # -- state -----------------------------------------------------------------------------------

    @property
    def requests(self) -> list[dict[str, str]]:
        """The log shown to people (the key masked), oldest first: a copy; `requests_snapshot` copies each entry."""
        with self._lock:
            return list(self._masked)

    def requests_snapshot(self, *, unmasked: bool = False) -> list[dict[str, str]]:
        """The query parameters of each request so far (the newest `serving.RECORD_LIMIT`); `unmasked=True` keeps
        the apikey (tests only)."""
        with self._lock:
            return [dict(r) for r in (self._unmasked if unmasked else self._masked)]

    def wait_for_requests(self, *, within_s: float = 10.0, unmasked: bool = False) -> list[dict[str, str]]:
        """`requests_snapshot` once the log holds a request, or as it is after `within_s` (tests: a caller that
        gave up, or a script still waiting on its call, answers before this server's thread has logged it)."""
        waited_until = time.monotonic() + within_s
        while not self.requests_snapshot() and time.monotonic() < waited_until:
            time.sleep(0.01)
        return self.requests_snapshot(unmasked=unmasked)

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
            self._masked.clear()
            self._unmasked.clear()

    def refuse_connections(self) -> None:
        """Stop listening, so connections are refused, until `accept_connections()` (in process only)."""
        self.stop()

    def accept_connections(self) -> None:
        """Listen again on the same port after `refuse_connections()`, and serve."""
        self.restart()

    def _handle_query(self, params: dict[str, str]) -> Reply:
        logged = {k: ("***" if k == "apikey" else v) for k, v in params.items()}
        with self._lock:
            self._masked.append(logged)
            self._unmasked.append(dict(params))
            faults = dataclasses.replace(self.faults)  # one consistent view for this request
        if faults.delay_s > 0:
            time.sleep(faults.delay_s)
        return answer_query(params, faults)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The sample upstream's flags (shared by `python -m progressive_mcp.offline.sample_upstream` and the CLI)."""
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
        prog="python -m progressive_mcp.offline.sample_upstream",
        description=DESCRIPTION,
    )
    add_arguments(parser)
    return run(parser.parse_args(argv), parser)


if __name__ == "__main__":
    raise SystemExit(main())
