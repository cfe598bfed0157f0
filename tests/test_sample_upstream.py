"""Tests for the offline sample upstream: real HTTP on 127.0.0.1, synthetic Alpha Vantage answers.

Run with: .venv/bin/python -m pytest tests/test_sample_upstream.py -q
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest

from progressive_mcp.offline import serving
from progressive_mcp.offline.sample_upstream import (
    ANCHOR,
    APIKEY_ERROR,
    COMPACT_POINTS,
    FULL_TRADING_DAYS,
    HUGE_ROWS,
    PREMIUM_NOTICE,
    SAMPLE_LABEL,
    Faults,
    SampleUpstream,
)

KEY = "test-key-123"
DOCS = "https://www.alphavantage.co/documentation/"
INVALID_CALL = f"Invalid API call. Please retry or visit the documentation ({DOCS}) for {{}}."


@pytest.fixture
def upstream(shared_upstream: SampleUpstream) -> SampleUpstream:
    """One server for the module (stopping one costs a poll interval); each test starts it clean."""
    shared_upstream.reset()
    return shared_upstream


def fetch(server: SampleUpstream, **params: str) -> tuple[int, dict[str, str], bytes]:
    """GET /query with these params; apikey=KEY unless the caller passes its own (even "")."""
    params.setdefault("apikey", KEY)
    query = urlencode(params)
    return http(f"{server.url}?{query}")


def http(url: str, method: str = "GET", body: bytes | None = None) -> tuple[int, dict[str, str], bytes]:
    request = urllib.request.Request(url, data=body, method=method)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as err:
        return err.code, dict(err.headers), err.read()


def call(server: SampleUpstream, **params: str) -> Any:
    status, headers, body = fetch(server, **params)
    assert status == 200
    assert headers["X-Sample-Data"] == "synthetic"
    assert headers["Content-Type"] == "application/json"
    return json.loads(body)


def control(server: SampleUpstream, path: str, payload: object = None) -> tuple[int, Any]:
    base = server.url.removesuffix("/query")
    if payload is None and path == "/_sample/requests":
        status, _, body = http(base + path)
    else:
        status, _, body = http(base + path, "POST", json.dumps(payload or {}).encode())
    return status, json.loads(body)


def series(answer: dict[str, Any]) -> dict[str, Any]:
    """The one non-"Meta Data" block of a time-series or indicator answer."""
    (key,) = [k for k in answer if k != "Meta Data"]
    return dict(answer[key])


# ---- shapes of each function ----------------------------------------------------------------


def test_global_quote_shape(upstream: SampleUpstream) -> None:
    quote = call(upstream, function="GLOBAL_QUOTE", symbol="IBM")["Global Quote"]
    assert list(quote) == [
        "01. symbol", "02. open", "03. high", "04. low", "05. price", "06. volume",
        "07. latest trading day", "08. previous close", "09. change", "10. change percent",
    ]  # fmt: skip
    assert quote["01. symbol"] == "IBM"
    assert quote["07. latest trading day"] == ANCHOR.isoformat()
    price, prev = float(quote["05. price"]), float(quote["08. previous close"])
    assert float(quote["09. change"]) == pytest.approx(price - prev, abs=1e-3)
    assert quote["10. change percent"].endswith("%")
    assert float(quote["04. low"]) <= price <= float(quote["03. high"])


def test_daily_shape_and_label(upstream: SampleUpstream) -> None:
    answer = call(upstream, function="TIME_SERIES_DAILY", symbol="aapl")
    meta = answer["Meta Data"]
    assert SAMPLE_LABEL in meta["1. Information"]
    assert meta["2. Symbol"] == "AAPL"
    assert meta["3. Last Refreshed"] == ANCHOR.isoformat()
    assert meta["4. Output Size"] == "Compact"
    assert meta["5. Time Zone"] == "US/Eastern"
    bars = answer["Time Series (Daily)"]
    assert len(bars) == COMPACT_POINTS
    dates = list(bars)
    assert dates == sorted(dates, reverse=True)  # newest first, like Alpha Vantage
    assert all(time.strptime(d, "%Y-%m-%d").tm_wday < 5 for d in dates)  # trading days only
    for bar in bars.values():
        assert list(bar) == ["1. open", "2. high", "3. low", "4. close", "5. volume"]
        o, h, lo, c = (float(bar[k]) for k in ("1. open", "2. high", "3. low", "4. close"))
        assert lo <= min(o, c) <= max(o, c) <= h
        assert int(bar["5. volume"]) > 0


def test_compact_vs_full(upstream: SampleUpstream) -> None:
    compact = call(upstream, function="TIME_SERIES_DAILY", symbol="MSFT", outputsize="compact")
    full = call(upstream, function="TIME_SERIES_DAILY", symbol="MSFT", outputsize="full")
    assert full["Meta Data"]["4. Output Size"] == "Full size"
    full_bars = series(full)
    assert len(full_bars) == FULL_TRADING_DAYS
    assert min(full_bars) < "2007-01-01"  # ~20 years back
    # compact is exactly the newest slice of full
    assert series(compact) == dict(list(full_bars.items())[:COMPACT_POINTS])


@pytest.mark.parametrize("interval", ["1min", "5min", "15min", "30min", "60min"])
def test_intraday_intervals(upstream: SampleUpstream, interval: str) -> None:
    answer = call(upstream, function="TIME_SERIES_INTRADAY", symbol="NVDA", interval=interval)
    meta = answer["Meta Data"]
    assert SAMPLE_LABEL in meta["1. Information"]
    assert meta["4. Interval"] == interval
    bars = answer[f"Time Series ({interval})"]
    assert len(bars) == COMPACT_POINTS
    stamps = list(bars)
    assert stamps[0] == meta["3. Last Refreshed"]
    assert stamps[0].startswith(ANCHOR.isoformat())
    step = int(interval.removesuffix("min")) * 60
    t0, t1 = (time.mktime(time.strptime(s, "%Y-%m-%d %H:%M:%S")) for s in stamps[:2])
    assert t0 - t1 == step


def test_intraday_full_month_and_hours(upstream: SampleUpstream) -> None:
    full = series(call(upstream, function="TIME_SERIES_INTRADAY", symbol="IBM", interval="60min", outputsize="full"))
    month = ANCHOR.isoformat()[:7]
    assert all(stamp.startswith(month) for stamp in full)
    assert len(full) == 15 * 16  # 15 trading days of November 2026 up to the anchor, 04:00-20:00 hourly
    regular = series(
        call(upstream, function="TIME_SERIES_INTRADAY", symbol="IBM", interval="60min", extended_hours="false")
    )
    assert all("09:30:00" <= stamp[11:] < "16:00:00" for stamp in regular)
    past = series(call(upstream, function="TIME_SERIES_INTRADAY", symbol="IBM", interval="30min", month="2009-01"))
    assert all(stamp.startswith("2009-01-") for stamp in past)


def test_weekly_and_monthly(upstream: SampleUpstream) -> None:
    weekly = call(upstream, function="TIME_SERIES_WEEKLY", symbol="SPY")
    assert SAMPLE_LABEL in weekly["Meta Data"]["1. Information"]
    assert weekly["Meta Data"]["4. Time Zone"] == "US/Eastern"
    weeks = weekly["Weekly Time Series"]
    assert next(iter(weeks)) == ANCHOR.isoformat()
    assert 1000 < len(weeks) < 1100
    monthly = call(upstream, function="TIME_SERIES_MONTHLY", symbol="SPY")
    months = monthly["Monthly Time Series"]
    assert list(months)[:2] == [
        ANCHOR.isoformat(),
        "2026-10-30",
    ]  # stamped with each month's last trading day
    assert 235 < len(months) < 245
    daily = series(call(upstream, function="TIME_SERIES_DAILY", symbol="SPY", outputsize="full"))
    november = [bar for day, bar in daily.items() if day.startswith("2026-11")]
    assert months[ANCHOR.isoformat()]["2. high"] == max((b["2. high"] for b in november), key=float)


def test_csv(upstream: SampleUpstream) -> None:
    status, headers, body = fetch(upstream, function="TIME_SERIES_DAILY", symbol="IBM", datatype="csv")
    assert status == 200
    assert headers["Content-Type"] == "text/csv"
    assert headers["X-Sample-Data"] == "synthetic"
    lines = body.decode().splitlines()
    assert lines[0] == "timestamp,open,high,low,close,volume"
    assert len(lines) == 1 + COMPACT_POINTS
    assert lines[1].startswith(ANCHOR.isoformat() + ",")
    answer = call(upstream, function="TIME_SERIES_DAILY", symbol="IBM")
    first = answer["Time Series (Daily)"][ANCHOR.isoformat()]
    assert lines[1].split(",")[1:] == list(first.values())
    _, _, intraday = fetch(upstream, function="TIME_SERIES_INTRADAY", symbol="IBM", interval="5min", datatype="csv")
    assert intraday.decode().startswith("timestamp,open,high,low,close,volume\r\n2026-11-20 19:55:00,")


def test_symbol_search(upstream: SampleUpstream) -> None:
    matches = call(upstream, function="SYMBOL_SEARCH", keywords="micro")["bestMatches"]
    assert [m["1. symbol"] for m in matches] == ["MSFT"]
    assert set(matches[0]) == {
        "1. symbol", "2. name", "3. type", "4. region", "5. marketOpen", "6. marketClose", "7. timezone",
        "8. currency", "9. matchScore",
    }  # fmt: skip
    exact = call(upstream, function="SYMBOL_SEARCH", keywords="TSLA")["bestMatches"]
    assert exact[0]["1. symbol"] == "TSLA" and exact[0]["9. matchScore"] == "1.0000"
    by_name = call(upstream, function="SYMBOL_SEARCH", keywords="apple")["bestMatches"]
    assert [m["2. name"] for m in by_name] == ["Apple Inc"]
    assert call(upstream, function="SYMBOL_SEARCH", keywords="zzzz") == {"bestMatches": []}


def test_overview(upstream: SampleUpstream) -> None:
    profile = call(upstream, function="OVERVIEW", symbol="NVDA")
    assert profile["Symbol"] == "NVDA"
    assert profile["Name"] == "NVIDIA Corporation"
    assert SAMPLE_LABEL in profile["Description"]
    for field in ("AssetType", "Exchange", "Sector", "MarketCapitalization", "PERatio", "52WeekHigh", "EPS"):
        assert profile[field]
    assert call(upstream, function="OVERVIEW", symbol="NOPE") == {}


def test_currency_exchange_rate(upstream: SampleUpstream) -> None:
    rate = call(upstream, function="CURRENCY_EXCHANGE_RATE", from_currency="USD", to_currency="JPY")
    block = rate["Realtime Currency Exchange Rate"]
    assert block["1. From_Currency Code"] == "USD"
    assert block["4. To_Currency Name"] == "Japanese Yen"
    assert float(block["8. Bid Price"]) < float(block["5. Exchange Rate"]) < float(block["9. Ask Price"])
    btc = call(upstream, function="CURRENCY_EXCHANGE_RATE", from_currency="btc", to_currency="EUR")
    eth = call(upstream, function="CURRENCY_EXCHANGE_RATE", from_currency="ETH", to_currency="EUR")
    btc_rate = float(btc["Realtime Currency Exchange Rate"]["5. Exchange Rate"])
    assert btc_rate > float(eth["Realtime Currency Exchange Rate"]["5. Exchange Rate"]) > 1
    bad = call(upstream, function="CURRENCY_EXCHANGE_RATE", from_currency="USD", to_currency="XYZ")
    assert bad == {"Error Message": INVALID_CALL.format("CURRENCY_EXCHANGE_RATE")}


def test_rsi(upstream: SampleUpstream) -> None:
    answer = call(upstream, function="RSI", symbol="IBM", interval="daily", time_period="14", series_type="close")
    meta = answer["Meta Data"]
    assert "1. Information" not in meta  # indicators' Meta Data has none upstream: it starts at "1: Symbol"
    assert meta["1: Symbol"] == "IBM"
    assert meta["2: Indicator"] == "Relative Strength Index (RSI)"
    assert meta["5: Time Period"] == 14
    values = answer["Technical Analysis: RSI"]
    assert len(values) == FULL_TRADING_DAYS - 14
    assert all(0 <= float(v["RSI"]) <= 100 for v in values.values())
    weekly = call(upstream, function="RSI", symbol="IBM", interval="weekly", time_period="10", series_type="open")
    assert weekly["Meta Data"]["4: Interval"] == "weekly"
    intraday = call(upstream, function="RSI", symbol="IBM", interval="15min", time_period="20", series_type="high")
    assert next(iter(intraday["Technical Analysis: RSI"])) == f"{ANCHOR.isoformat()} 19:45:00"


def test_sma_matches_the_daily_closes(upstream: SampleUpstream) -> None:
    answer = call(upstream, function="SMA", symbol="TSLA", interval="daily", time_period="5", series_type="close")
    assert answer["Meta Data"]["2: Indicator"] == "Simple Moving Average (SMA)"
    values = answer["Technical Analysis: SMA"]
    closes = [
        float(b["4. close"]) for b in series(call(upstream, function="TIME_SERIES_DAILY", symbol="TSLA")).values()
    ]
    assert float(values[ANCHOR.isoformat()]["SMA"]) == pytest.approx(sum(closes[:5]) / 5, abs=1e-3)
    assert len(values) == FULL_TRADING_DAYS - 4


@pytest.mark.parametrize(
    ("function", "interval", "newest", "step_months"),
    [
        ("REAL_GDP", "annual", "2025-01-01", 12),
        ("REAL_GDP", "quarterly", "2026-07-01", 3),
        ("CPI", "monthly", "2026-10-01", 1),
        ("CPI", "semiannual", "2026-01-01", 6),
    ],
)
def test_economic(upstream: SampleUpstream, function: str, interval: str, newest: str, step_months: int) -> None:
    answer = call(upstream, function=function, interval=interval)
    assert set(answer) == {"name", "interval", "unit", "data"}
    assert SAMPLE_LABEL in answer["name"]
    assert answer["interval"] == interval
    data = answer["data"]
    assert data[0]["date"] == newest
    assert data[-1]["date"] == "2000-01-01"
    assert len(data) == (int(newest[:4]) - 2000) * 12 // step_months + (int(newest[5:7]) - 1) // step_months + 1
    assert all(float(point["value"]) > 0 for point in data)
    assert call(upstream, function=function)["interval"] in ("annual", "monthly")  # the documented defaults


# ---- determinism ------------------------------------------------------------------------------


def test_same_request_same_bytes(upstream: SampleUpstream) -> None:
    params = {"function": "TIME_SERIES_DAILY", "symbol": "TSLA", "outputsize": "full"}
    first = fetch(upstream, **params)[2]
    assert fetch(upstream, **params)[2] == first
    with SampleUpstream() as other:  # a fresh server (and lru caches do not matter: same seed, same walk)
        assert fetch(other, **params)[2] == first
    rsi = {
        "function": "RSI",
        "symbol": "AAPL",
        "interval": "5min",
        "time_period": "14",
        "series_type": "close",
    }
    assert fetch(upstream, **rsi)[2] == fetch(upstream, **rsi)[2]


def test_symbols_get_different_walks(upstream: SampleUpstream) -> None:
    quotes = {
        s: call(upstream, function="GLOBAL_QUOTE", symbol=s)["Global Quote"]["05. price"] for s in ("IBM", "AAPL")
    }
    assert quotes["IBM"] != quotes["AAPL"]


# ---- Alpha Vantage-style errors ---------------------------------------------------------------


def test_missing_and_invalid_apikey(upstream: SampleUpstream) -> None:
    status, _, body = http(f"{upstream.url}?function=GLOBAL_QUOTE&symbol=IBM")
    assert status == 200
    assert json.loads(body) == {"Error Message": APIKEY_ERROR}
    assert call(upstream, function="GLOBAL_QUOTE", symbol="IBM", apikey="") == {"Error Message": APIKEY_ERROR}
    assert call(upstream, function="GLOBAL_QUOTE", symbol="IBM", apikey="invalid-xyz") == {
        "Error Message": APIKEY_ERROR
    }


@pytest.mark.parametrize(
    "params",
    [
        {"function": "TIME_SERIES_DAILY", "symbol": "NOPE"},
        {"function": "TIME_SERIES_DAILY"},
        {"function": "TIME_SERIES_WEEKLY", "symbol": "NOPE"},
        {"function": "TIME_SERIES_INTRADAY", "symbol": "IBM"},
        {"function": "TIME_SERIES_INTRADAY", "symbol": "IBM", "interval": "2min"},
        {"function": "TIME_SERIES_INTRADAY", "symbol": "IBM", "interval": "5min", "month": "2030-01"},
        {
            "function": "RSI",
            "symbol": "NOPE",
            "interval": "daily",
            "time_period": "14",
            "series_type": "close",
        },
        {"function": "SMA", "symbol": "IBM", "interval": "daily", "series_type": "close"},
        {"function": "SMA", "symbol": "IBM", "interval": "daily", "time_period": "0", "series_type": "close"},
        {"function": "OVERVIEW"},
        {"function": "GLOBAL_QUOTE"},
        {"function": "SYMBOL_SEARCH"},
        {"function": "REAL_GDP", "interval": "weekly"},
    ],
)
def test_invalid_api_call(upstream: SampleUpstream, params: dict[str, str]) -> None:
    assert call(upstream, **params) == {"Error Message": INVALID_CALL.format(params["function"])}


def test_unknown_symbol_answers_like_the_real_api(upstream: SampleUpstream) -> None:
    assert call(upstream, function="GLOBAL_QUOTE", symbol="NOPE") == {"Global Quote": {}}
    assert call(upstream, function="OVERVIEW", symbol="NOPE") == {}


def test_unknown_functions(upstream: SampleUpstream) -> None:
    assert call(upstream, function="NOT_A_FUNCTION") == {
        "Error Message": "This API function (NOT_A_FUNCTION) does not exist."
    }
    # every catalog function is simulated now (tests/test_sample_catalog.py covers them all)
    news = call(upstream, function="NEWS_SENTIMENT", tickers="IBM")
    assert news["feed"] and all(SAMPLE_LABEL in article["summary"] for article in news["feed"])


def test_premium(upstream: SampleUpstream) -> None:
    premium = {"Information": PREMIUM_NOTICE}
    assert call(upstream, function="TIME_SERIES_DAILY_ADJUSTED", symbol="IBM") == premium
    assert call(upstream, function="REALTIME_BULK_QUOTES", symbol="IBM,AAPL") == premium
    assert call(upstream, function="GLOBAL_QUOTE", symbol="IBM", entitlement="realtime") == premium
    assert "Global Quote" in call(upstream, function="GLOBAL_QUOTE", symbol="IBM", entitlement="delayed")


def test_a_premium_key_unlocks_premium_functions(upstream: SampleUpstream) -> None:
    adjusted = call(upstream, function="TIME_SERIES_DAILY_ADJUSTED", symbol="IBM", apikey="premium-demo")
    assert SAMPLE_LABEL in adjusted["Meta Data"]["1. Information"]
    assert "5. adjusted close" in adjusted["Time Series (Daily)"][ANCHOR.isoformat()]
    bulk = call(upstream, function="REALTIME_BULK_QUOTES", symbol="IBM,AAPL", apikey="premium-demo")
    assert [row["symbol"] for row in bulk["data"]] == ["IBM", "AAPL"]
    realtime = call(upstream, function="GLOBAL_QUOTE", symbol="IBM", entitlement="realtime", apikey="premium-demo")
    assert realtime == call(upstream, function="GLOBAL_QUOTE", symbol="IBM")


def test_rate_limited_key_is_echoed(upstream: SampleUpstream) -> None:
    answer = call(upstream, function="GLOBAL_QUOTE", symbol="IBM", apikey="ratelimited")
    assert list(answer) == ["Information"]
    assert answer["Information"].startswith("We have detected your API key as ratelimited and our standard")
    assert "25 requests per day" in answer["Information"]


# ---- faults -------------------------------------------------------------------------------------


def test_fault_rate_limit_echoes_the_key(upstream: SampleUpstream) -> None:
    upstream.faults.rate_limit = True
    answer = call(upstream, function="TIME_SERIES_DAILY", symbol="IBM", apikey="SECRET-KEY-42")
    assert "We have detected your API key as SECRET-KEY-42 " in answer["Information"]


@pytest.mark.parametrize("code", [500, 503, 429])
def test_fault_status(upstream: SampleUpstream, code: int) -> None:
    upstream.faults.status = code
    status, headers, body = fetch(upstream, function="GLOBAL_QUOTE", symbol="IBM")
    assert status == code
    assert headers["X-Sample-Data"] == "synthetic"
    assert headers["Content-Type"] == "text/html"
    assert str(code).encode() in body
    with pytest.raises(ValueError):
        json.loads(body)


def test_fault_malformed(upstream: SampleUpstream) -> None:
    upstream.faults = Faults(malformed=True)
    status, headers, body = fetch(upstream, function="GLOBAL_QUOTE", symbol="IBM")
    assert status == 200
    assert headers["Content-Type"] == "application/json"
    assert body.startswith(b'{\n    "Global Quote"')
    with pytest.raises(ValueError):
        json.loads(body)
    _, _, csv_body = fetch(upstream, function="TIME_SERIES_DAILY", symbol="IBM", datatype="csv")
    with pytest.raises(ValueError):
        json.loads(csv_body)


def test_fault_delay(upstream: SampleUpstream) -> None:
    upstream.faults.delay_s = 0.3
    # A client that waits less than the delay gets no answer in time (the fault stands for a slow upstream)...
    query = urlencode({"function": "GLOBAL_QUOTE", "symbol": "IBM", "apikey": KEY})
    with pytest.raises(TimeoutError):
        urllib.request.urlopen(f"{upstream.url}?{query}", timeout=0.05)
    # ...and one that waits longer gets it.
    assert "Global Quote" in call(upstream, function="GLOBAL_QUOTE", symbol="IBM")


def test_fault_huge(upstream: SampleUpstream) -> None:
    upstream.faults.huge = True
    _, _, body = fetch(upstream, function="TIME_SERIES_DAILY", symbol="IBM")
    assert len(body) > 3_000_000
    answer = json.loads(body)
    assert len(answer["Time Series (Daily)"]) == HUGE_ROWS
    assert SAMPLE_LABEL in answer["Meta Data"]["1. Information"]
    intraday = call(upstream, function="TIME_SERIES_INTRADAY", symbol="IBM", interval="5min")
    assert len(intraday["Time Series (5min)"]) == HUGE_ROWS
    assert len(str(call(upstream, function="GLOBAL_QUOTE", symbol="IBM"))) < 1000  # only time series grow


@pytest.mark.parametrize("code", [429, 503])
def test_fault_retry_after_rides_on_a_status(upstream: SampleUpstream, code: int) -> None:
    status, faults = control(upstream, "/_sample/faults", {"status": code, "retry_after": 7})
    assert status == 200 and faults["retry_after"] == 7.0
    status, headers, _ = fetch(upstream, function="GLOBAL_QUOTE", symbol="IBM")
    assert status == code
    assert headers["Retry-After"] == "7"


def test_fault_empty_body(upstream: SampleUpstream) -> None:
    upstream.faults.empty = True
    status, headers, body = fetch(upstream, function="GLOBAL_QUOTE", symbol="IBM")
    assert (status, headers["Content-Type"], headers["Content-Length"], body) == (200, "application/json", "0", b"")


def test_fault_html_page_with_status_200(upstream: SampleUpstream) -> None:
    control(upstream, "/_sample/faults", {"html": True})
    status, headers, body = fetch(upstream, function="GLOBAL_QUOTE", symbol="IBM")
    assert status == 200
    assert headers["Content-Type"].startswith("text/html")
    assert body.startswith(b"<!DOCTYPE html>")


def test_fault_invalid_key_whatever_the_key(upstream: SampleUpstream) -> None:
    control(upstream, "/_sample/faults", {"invalid_key": True})
    assert call(upstream, function="GLOBAL_QUOTE", symbol="IBM", apikey="a-fine-key") == {"Error Message": APIKEY_ERROR}


def test_fault_body_mb_is_streamed_valid_json_of_that_size(upstream: SampleUpstream) -> None:
    control(upstream, "/_sample/faults", {"body_mb": 2})
    status, headers, body = fetch(upstream, function="GLOBAL_QUOTE", symbol="IBM")
    assert status == 200
    assert headers["Transfer-Encoding"] == "chunked" and "Content-Length" not in headers
    assert 2 * 1024 * 1024 <= len(body) < 2 * 1024 * 1024 + 200
    assert len(json.loads(body)["padding"]) == 2 * 1024 * 1024


def test_fault_trickle_sends_one_byte_at_a_time(upstream: SampleUpstream) -> None:
    upstream.faults.trickle_s = 0.05
    host, port = upstream.host, upstream.port
    with socket.create_connection((host, port), timeout=5) as sock:
        sock.sendall(b"GET /query?function=GLOBAL_QUOTE&symbol=IBM&apikey=k HTTP/1.1\r\nHost: x\r\n\r\n")
        head = b""
        while b"\r\n\r\n" not in head:
            head += sock.recv(4096)
        _, _, already = head.partition(b"\r\n\r\n")
        # The body comes in pieces of one byte, paced: a read right after the headers finds (almost) nothing.
        sock.settimeout(1)
        pieces = [sock.recv(4096) for _ in range(3)]
    assert "Content-Length: " in head.decode()
    assert len(already) <= 1 and all(len(piece) == 1 for piece in pieces)


def test_fault_disconnect_closes_without_an_answer(upstream: SampleUpstream) -> None:
    control(upstream, "/_sample/faults", {"disconnect": True})
    with socket.create_connection((upstream.host, upstream.port), timeout=5) as sock:
        sock.sendall(b"GET /query?function=GLOBAL_QUOTE&symbol=IBM&apikey=k HTTP/1.1\r\nHost: x\r\n\r\n")
        assert sock.recv(4096) == b""  # closed, nothing sent
    assert len(upstream.requests) == 1


def test_refuse_and_accept_connections_on_the_same_port() -> None:
    with SampleUpstream() as server:
        server.refuse_connections()
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection((server.host, server.port), timeout=5).close()
        server.accept_connections()
        assert fetch(server, function="CPI")[0] == 200


# ---- control endpoints, request log, routing ----------------------------------------------------


def test_control_faults_partial_update(upstream: SampleUpstream) -> None:
    status, faults = control(upstream, "/_sample/faults", {"status": 503})
    assert status == 200
    assert faults == dataclasses.asdict(Faults(status=503))
    assert faults["retry_after"] is None and faults["trickle_s"] == 0.0 and faults["body_mb"] == 0.0
    status, faults = control(upstream, "/_sample/faults", {"delay_s": 0.01})
    assert faults["status"] == 503 and faults["delay_s"] == 0.01
    assert upstream.faults.status == 503
    assert fetch(upstream, function="GLOBAL_QUOTE", symbol="IBM")[0] == 503
    status, faults = control(upstream, "/_sample/faults", {"status": None, "delay_s": 0})
    assert faults["status"] is None
    assert fetch(upstream, function="GLOBAL_QUOTE", symbol="IBM")[0] == 200


@pytest.mark.parametrize(
    "payload",
    [
        {"bogus": 1},
        {"status": "500"},
        {"malformed": 1},
        {"delay_s": -1},
        [1],
        {"retry_after": "soon"},
        {"retry_after": -1},
        {"trickle_s": True},
        {"body_mb": 5000},
        {"empty": "yes"},
        {"disconnect": None},
    ],
)
def test_control_faults_rejects_bad_updates(upstream: SampleUpstream, payload: object) -> None:
    status, answer = control(upstream, "/_sample/faults", payload)
    assert status == 400
    assert "error" in answer
    assert upstream.faults == Faults()


def test_request_log_masks_apikey(upstream: SampleUpstream) -> None:
    fetch(upstream, function="GLOBAL_QUOTE", symbol="IBM", apikey="SUPER-SECRET")
    fetch(upstream, function="SYMBOL_SEARCH", keywords="app", apikey="SUPER-SECRET")
    http(f"{upstream.url}?function=CPI")  # no key at all: nothing to mask
    expected = [
        {"function": "GLOBAL_QUOTE", "symbol": "IBM", "apikey": "***"},
        {"function": "SYMBOL_SEARCH", "keywords": "app", "apikey": "***"},
        {"function": "CPI"},
    ]
    assert upstream.requests == expected
    status, log = control(upstream, "/_sample/requests")
    assert status == 200
    assert log == {"count": 3, "requests": expected}
    assert "SUPER-SECRET" not in json.dumps(log)


def test_control_reset(upstream: SampleUpstream) -> None:
    upstream.faults.rate_limit = True
    fetch(upstream, function="GLOBAL_QUOTE", symbol="IBM")
    status, _ = control(upstream, "/_sample/reset")
    assert status == 200
    assert upstream.faults == Faults()
    assert upstream.requests == []
    assert control(upstream, "/_sample/requests")[1] == {"count": 0, "requests": []}


@pytest.mark.parametrize(
    ("method", "path"),
    [("GET", "/"), ("GET", "/query/x"), ("POST", "/query"), ("GET", "/_sample/faults"), ("DELETE", "/query")],
)
def test_other_routes_404(upstream: SampleUpstream, method: str, path: str) -> None:
    base = upstream.url.removesuffix("/query")
    status, headers, _ = http(base + path, method, b"{}" if method == "POST" else None)
    assert status == 404
    assert headers["X-Sample-Data"] == "synthetic"
    assert upstream.requests == []


def test_url_and_lifecycle() -> None:
    server = SampleUpstream(port=0)
    assert server.url.startswith("http://127.0.0.1:") and server.url.endswith("/query")
    assert server.url != "http://127.0.0.1:0/query"
    with server:
        assert fetch(server, function="CPI")[0] == 200
    with pytest.raises(OSError):
        http(server.url)


@pytest.mark.slow
def test_cli_serves_until_interrupted() -> None:
    root = Path(__file__).resolve().parent.parent
    proc = subprocess.Popen(
        [sys.executable, "-m", "progressive_mcp.offline.sample_upstream", "--port", "0", "--rate-limit"],
        cwd=root,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(root)},
        # Ctrl-C as in a terminal: a test run started in the background of a script (`make test &`) ignores
        # SIGINT, its children inherit that, and Python then never raises KeyboardInterrupt.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        assert line.startswith("sample upstream (synthetic data) listening on http://127.0.0.1:")
        url = line.split(" on ", 1)[1].strip()
        _, _, body = http(f"{url}?function=GLOBAL_QUOTE&symbol=IBM&apikey=cli-key")
        assert "detected your API key as cli-key" in json.loads(body)["Information"]
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=5) == 0
        assert proc.stderr.read() == ""  # quiet: no per-request log lines
    finally:
        if proc.poll() is None:
            proc.kill()


def test_a_client_that_hangs_up_early_leaves_no_traceback(capfd: pytest.CaptureFixture[str]) -> None:

    with SampleUpstream() as server:
        server.faults.delay_s = 0.3
        host, port = server.url.split("//")[1].split("/")[0].split(":")
        with socket.create_connection((host, int(port))) as sock:
            sock.sendall(b"GET /query?function=GLOBAL_QUOTE&symbol=IBM&apikey=k HTTP/1.1\r\nHost: x\r\n\r\n")
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        time.sleep(0.6)  # the server wakes from the delay and writes to a reset socket
    assert "Traceback" not in capfd.readouterr().err


def test_the_request_log_keeps_the_newest_requests_up_to_its_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    """`serve --sample-upstream` runs this server in its own process: its log of every request made the server's
    memory grow under load for as long as it ran. It now keeps the newest `serving.RECORD_LIMIT`, masked and not."""
    monkeypatch.setattr(serving, "RECORD_LIMIT", 2)
    server = SampleUpstream().start()
    try:
        for symbol in ("IBM", "AAPL", "MSFT"):
            call(server, function="GLOBAL_QUOTE", symbol=symbol, apikey="secret-key")
        assert [r["symbol"] for r in server.requests_snapshot()] == ["AAPL", "MSFT"]
        assert [r["apikey"] for r in server.requests_snapshot(unmasked=True)] == ["secret-key", "secret-key"]
        assert control(server, "/_sample/requests")[1]["count"] == 2
    finally:
        server.stop()
