"""Tests for the upstream client: real HTTP to the offline sample upstream, error mapping, retries, key hygiene.

Run with: .venv/bin/python -m pytest tests/test_upstream.py -q
"""

from __future__ import annotations

import json
import logging
import socket
import threading
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import quote, quote_plus

import pytest

from progressive_mcp.calls.upstream import (
    HttpxTransport,
    TransportError,
    UpstreamClient,
    UpstreamRequest,
    UpstreamResponse,
    redact,
)
from progressive_mcp.catalog import Auth, Catalog
from progressive_mcp.errors import (
    MissingApiKey,
    PremiumRequired,
    RateLimited,
    UpstreamBadResponse,
    UpstreamError,
    UpstreamRejected,
    UpstreamTimeout,
    UpstreamUnavailable,
)
from progressive_mcp.offline.sample_upstream import COMPACT_POINTS, RATE_LIMIT_KEY, SAMPLE_LABEL, SampleUpstream
from progressive_mcp.sources import load_catalog

KEY = "SeCrEt-KEY-123"
ENV_VAR = "ALPHAVANTAGE_API_KEY"


# --- fakes and fixtures ---------------------------------------------------------------------------


class RecordingSleep:
    """Stands in for time.sleep: remembers the delays and returns at once."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


class ScriptedTransport:
    """Answers each send with the next scripted response, or raises the next scripted TransportError."""

    def __init__(self, *script: UpstreamResponse | TransportError) -> None:
        self.script = list(script)
        self.sent: list[UpstreamRequest] = []

    def send(self, request: UpstreamRequest) -> UpstreamResponse:
        self.sent.append(request)
        step = self.script.pop(0)
        if isinstance(step, TransportError):
            raise step
        return step


def json_response(payload: Any, status: int = 200, headers: dict[str, str] | None = None) -> UpstreamResponse:
    return UpstreamResponse(
        status, {"content-type": "application/json", **(headers or {})}, json.dumps(payload).encode()
    )


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return load_catalog()


@pytest.fixture(scope="module")
def shared_upstream() -> Iterator[SampleUpstream]:
    with SampleUpstream(port=0) as server:
        yield server


@pytest.fixture
def upstream(shared_upstream: SampleUpstream) -> SampleUpstream:
    """One server for the module; each test starts with no faults and an empty request log."""
    shared_upstream.reset()
    return shared_upstream


@pytest.fixture(scope="module")
def transport(shared_upstream: SampleUpstream) -> Iterator[HttpxTransport]:
    """The real transport, warmed up once so the tests below may turn httpx logging up afterwards."""
    transport = HttpxTransport()
    warm_up = UpstreamRequest(shared_upstream.url.replace("/query", "/_sample/requests"), (), (), 5.0)
    assert transport.send(warm_up).status == 200
    yield transport
    transport.close()


@pytest.fixture
def sleep() -> RecordingSleep:
    return RecordingSleep()


@pytest.fixture
def client(
    catalog: Catalog, upstream: SampleUpstream, transport: HttpxTransport, sleep: RecordingSleep
) -> UpstreamClient:
    return UpstreamClient(catalog.api, base_url=upstream.url, transport=transport, retries=2, sleep=sleep)


@pytest.fixture
def debug_logs(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    """Every logger at DEBUG, including httpx's and httpcore's, which log request URLs."""
    caplog.set_level(logging.DEBUG)
    for name in ("httpx", "httpcore", "progressive_mcp"):
        caplog.set_level(logging.DEBUG, logger=name)
    return caplog


def closed_port_url() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}/query"  # nothing listens here any more: connection refused


def secret_forms(secret: str) -> set[str]:
    return {secret, quote(secret, safe=""), quote_plus(secret)}


def exception_chain(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    pending: list[BaseException | None] = [exc]
    while pending:
        current = pending.pop()
        if current is None or any(current is s for s in seen):
            continue
        seen.append(current)
        pending += [current.__cause__, current.__context__]
    return seen


def assert_key_never_leaks(secret: str, caplog: pytest.LogCaptureFixture, exc: BaseException | None = None) -> None:
    """The secret (plain or URL-encoded) is in no exception text, attribute or log record."""
    texts: list[str] = []
    if exc is not None:
        if isinstance(exc, UpstreamError):
            texts.append(json.dumps(exc.details()))
        for link in exception_chain(exc):
            texts += [str(link), repr(link), repr(link.args), repr(getattr(link, "__dict__", {}))]
    for record in caplog.records:
        texts += [record.getMessage(), repr(record.msg), repr(record.args), repr(vars(record))]
    texts.append(caplog.text)
    for form in secret_forms(secret):
        leaks = [text for text in texts if form in text]
        assert not leaks, f"the key leaked: {leaks[0][:300]}"


# --- successful calls ---------------------------------------------------------------------------


def test_global_quote_comes_back_as_json(client: UpstreamClient, catalog: Catalog, upstream: SampleUpstream) -> None:
    result = client.call(catalog.get("GLOBAL_QUOTE"), {"symbol": "IBM"}, KEY)

    assert result.format == "json"
    assert result.status == 200
    assert result.attempts == 1
    quote_fields = result.payload["Global Quote"]
    assert quote_fields["01. symbol"] == "IBM"
    assert float(quote_fields["05. price"]) > 0
    assert upstream.requests == [{"function": "GLOBAL_QUOTE", "symbol": "IBM", "apikey": "***"}]


def test_time_series_daily_payload_shape(client: UpstreamClient, catalog: Catalog) -> None:
    result = client.call(catalog.get("TIME_SERIES_DAILY"), {"symbol": "IBM", "outputsize": "compact"}, KEY)

    assert result.format == "json"
    assert set(result.payload) == {"Meta Data", "Time Series (Daily)"}
    assert result.payload["Meta Data"]["2. Symbol"] == "IBM"
    assert SAMPLE_LABEL in result.payload["Meta Data"]["1. Information"]
    series = result.payload["Time Series (Daily)"]
    assert len(series) == COMPACT_POINTS
    dates = list(series)
    assert dates == sorted(dates, reverse=True)  # newest first, as upstream sends it
    assert set(series[dates[0]]) == {"1. open", "2. high", "3. low", "4. close", "5. volume"}


def test_csv_answers_come_back_as_csv_text(client: UpstreamClient, catalog: Catalog) -> None:
    daily = client.call(catalog.get("TIME_SERIES_DAILY"), {"symbol": "IBM", "datatype": "csv"}, KEY)
    quote_csv = client.call(catalog.get("GLOBAL_QUOTE"), {"symbol": "MSFT", "datatype": "csv"}, KEY)

    assert daily.format == "csv"
    lines = daily.payload.splitlines()
    assert lines[0] == "timestamp,open,high,low,close,volume"
    assert len(lines) == COMPACT_POINTS + 1
    assert quote_csv.format == "csv"
    assert quote_csv.payload.splitlines()[1].startswith("MSFT,")


def test_request_carries_function_key_and_arguments_with_booleans_as_words(
    client: UpstreamClient, catalog: Catalog, upstream: SampleUpstream
) -> None:
    tool = catalog.get("TIME_SERIES_INTRADAY")
    arguments = {"symbol": "IBM", "interval": "60min", "extended_hours": False, "adjusted": True}

    request = client.build_request(tool, arguments, KEY)
    result = client.call(tool, arguments, KEY)

    assert request.url == upstream.url
    assert request.params == (
        ("function", "TIME_SERIES_INTRADAY"),
        ("symbol", "IBM"),
        ("interval", "60min"),
        ("extended_hours", "false"),
        ("adjusted", "true"),
        ("apikey", KEY),
    )
    assert upstream.requests == [
        {
            "function": "TIME_SERIES_INTRADAY",
            "symbol": "IBM",
            "interval": "60min",
            "extended_hours": "false",
            "adjusted": "true",
            "apikey": "***",
        }
    ]
    # the upstream understood "false": only regular-hours bars came back
    stamps = list(result.payload["Time Series (60min)"])
    assert stamps and all("09:30:00" <= stamp[11:] < "16:00:00" for stamp in stamps)


def test_build_request_ignores_arguments_named_like_the_function_or_the_key(
    client: UpstreamClient, catalog: Catalog, upstream: SampleUpstream
) -> None:
    hostile = {"function": "OVERVIEW", "apikey": "invalid-other-key", "symbol": "IBM"}

    request = client.build_request(catalog.get("GLOBAL_QUOTE"), hostile, KEY)

    assert request.url == upstream.url
    assert request.params == (("function", "GLOBAL_QUOTE"), ("symbol", "IBM"), ("apikey", KEY))
    # and over the wire: still GLOBAL_QUOTE (not OVERVIEW), still our key (not the rejected one)
    result = client.call(catalog.get("GLOBAL_QUOTE"), hostile, KEY)
    assert "Global Quote" in result.payload
    assert [r["function"] for r in upstream.requests] == ["GLOBAL_QUOTE"]


def test_argument_values_cannot_smuggle_query_parameters(
    client: UpstreamClient, catalog: Catalog, upstream: SampleUpstream
) -> None:
    smuggled = "IBM&function=OVERVIEW&apikey=invalid-other-key"

    with pytest.raises(UpstreamRejected):  # no such ticker: the whole text stayed the symbol
        client.call(catalog.get("GLOBAL_QUOTE"), {"symbol": smuggled}, KEY)

    assert upstream.requests == [{"function": "GLOBAL_QUOTE", "symbol": smuggled, "apikey": "***"}]


def test_key_can_travel_in_a_header(catalog: Catalog) -> None:
    api = replace(catalog.api, auth=Auth("header", "Authorization", "T", "Bearer "))
    client = UpstreamClient(api, base_url="http://127.0.0.1:9/query", transport=ScriptedTransport())

    request = client.build_request(catalog.get("GLOBAL_QUOTE"), {"symbol": "IBM"}, KEY)

    assert request.params == (("function", "GLOBAL_QUOTE"), ("symbol", "IBM"))
    assert request.headers == (("Authorization", f"Bearer {KEY}"),)


# --- error mapping ---------------------------------------------------------------------------------


@pytest.mark.parametrize("missing", [None, ""])
def test_no_key_configured_names_the_env_var_and_sends_nothing(
    client: UpstreamClient, catalog: Catalog, upstream: SampleUpstream, missing: str | None
) -> None:
    with pytest.raises(MissingApiKey) as caught:
        client.call(catalog.get("GLOBAL_QUOTE"), {"symbol": "IBM"}, missing)

    assert ENV_VAR in str(caught.value)
    assert caught.value.details()["kind"] == "auth"
    assert upstream.requests == []


def test_invalid_key_is_missing_api_key(client: UpstreamClient, catalog: Catalog) -> None:
    with pytest.raises(MissingApiKey) as caught:
        client.call(catalog.get("GLOBAL_QUOTE"), {"symbol": "IBM"}, "invalid-" + KEY)

    assert "API key" in str(caught.value)


def test_unknown_symbol_is_rejected(client: UpstreamClient, catalog: Catalog) -> None:
    with pytest.raises(UpstreamRejected) as caught:
        client.call(catalog.get("TIME_SERIES_DAILY"), {"symbol": "NOSUCH"}, KEY)

    assert "Invalid API call" in str(caught.value)
    assert caught.value.details()["kind"] == "invalid_request"


@pytest.mark.parametrize("datatype", ["json", "csv"])
def test_empty_global_quote_is_rejected_saying_no_data(client: UpstreamClient, catalog: Catalog, datatype: str) -> None:
    # the sample answers {"Global Quote": {}} (or a CSV header without rows) for an unknown ticker
    with pytest.raises(UpstreamRejected) as caught:
        client.call(catalog.get("GLOBAL_QUOTE"), {"symbol": "NOSUCH", "datatype": datatype}, KEY)

    message = str(caught.value)
    assert "no data" in message
    assert "NOSUCH" in message
    assert "SYMBOL_SEARCH" in message


def test_empty_object_from_a_fake_is_rejected(catalog: Catalog) -> None:
    transport = ScriptedTransport(json_response({"Global Quote": {}}))
    client = UpstreamClient(catalog.api, transport=transport, sleep=RecordingSleep())

    with pytest.raises(UpstreamRejected, match="no data"):
        client.call(catalog.get("GLOBAL_QUOTE"), {"symbol": "IBM"}, KEY)


@pytest.mark.parametrize(
    ("tool_name", "arguments"),
    [
        ("TIME_SERIES_DAILY_ADJUSTED", {"symbol": "IBM"}),
        ("GLOBAL_QUOTE", {"symbol": "IBM", "entitlement": "realtime"}),
    ],
)
def test_premium_endpoint_is_premium_required(
    client: UpstreamClient, catalog: Catalog, tool_name: str, arguments: dict[str, Any]
) -> None:
    with pytest.raises(PremiumRequired) as caught:
        client.call(catalog.get(tool_name), arguments, KEY)

    assert "paid" in str(caught.value)
    assert caught.value.details()["kind"] == "premium_required"


@pytest.mark.parametrize("how", ["fault", "key"])
def test_rate_limit_body_is_rate_limited_without_the_key(
    client: UpstreamClient, catalog: Catalog, upstream: SampleUpstream, how: str
) -> None:
    key = KEY
    if how == "fault":
        upstream.faults.rate_limit = True
    else:
        key = RATE_LIMIT_KEY

    with pytest.raises(RateLimited) as caught:
        client.call(catalog.get("GLOBAL_QUOTE"), {"symbol": "IBM"}, key)

    message = str(caught.value)
    assert "rate limit" in message
    assert "25 requests per day" in message  # the upstream's own words are kept...
    assert key not in message  # ...but not the key it echoed
    assert "***" in message
    assert caught.value.details()["kind"] == "rate_limited"
    assert len(upstream.requests) == 1  # an HTTP-200 notice is an answer, not a reason to retry


@pytest.mark.parametrize("status", [500, 503])
def test_server_errors_are_retried_then_unavailable(
    client: UpstreamClient, catalog: Catalog, upstream: SampleUpstream, sleep: RecordingSleep, status: int
) -> None:
    upstream.faults.status = status

    with pytest.raises(UpstreamUnavailable) as caught:
        client.call(catalog.get("GLOBAL_QUOTE"), {"symbol": "IBM"}, KEY)

    assert len(upstream.requests) == 1 + client.retries
    assert sleep.delays == [0.5, 1.0]  # exponential backoff, injected
    assert f"HTTP {status}" in str(caught.value)
    assert caught.value.details() == {"kind": "unavailable", "upstream_status": status}


def test_retries_zero_means_one_attempt(
    catalog: Catalog, upstream: SampleUpstream, transport: HttpxTransport, sleep: RecordingSleep
) -> None:
    upstream.faults.status = 502
    client = UpstreamClient(catalog.api, base_url=upstream.url, transport=transport, retries=0, sleep=sleep)

    with pytest.raises(UpstreamUnavailable):
        client.call(catalog.get("GLOBAL_QUOTE"), {"symbol": "IBM"}, KEY)

    assert len(upstream.requests) == 1
    assert sleep.delays == []


def test_backoff_never_really_sleeps(
    catalog: Catalog, upstream: SampleUpstream, transport: HttpxTransport, sleep: RecordingSleep
) -> None:
    upstream.faults.status = 500
    client = UpstreamClient(
        catalog.api, base_url=upstream.url, transport=transport, retries=3, backoff_s=5.0, sleep=sleep
    )

    with pytest.raises(UpstreamUnavailable):
        client.call(catalog.get("GLOBAL_QUOTE"), {"symbol": "IBM"}, KEY)

    # The injected sleep does not move the real clock, so every wait "fits" the 25 s deadline.
    assert sleep.delays == [5.0, 10.0, 20.0]
    assert len(upstream.requests) == 4


def test_http_429_is_retried_then_rate_limited(
    client: UpstreamClient, catalog: Catalog, upstream: SampleUpstream, sleep: RecordingSleep
) -> None:
    upstream.faults.status = 429

    with pytest.raises(RateLimited) as caught:
        client.call(catalog.get("GLOBAL_QUOTE"), {"symbol": "IBM"}, KEY)

    assert len(upstream.requests) == 3
    assert sleep.delays == [0.5, 1.0]
    assert caught.value.retry_after_s == 60.0  # no Retry-After header: a minute
    assert caught.value.details() == {"kind": "rate_limited", "upstream_status": 429, "retry_after_s": 60.0}


@pytest.mark.parametrize(
    ("header", "slept", "reported"),
    [("7", [7.0], 7.0), ("120", [], 120.0), ("nan", [0.5], 60.0), ("inf", [0.5], 60.0), ("soon", [0.5], 60.0)],
)
def test_http_429_honours_retry_after(catalog: Catalog, header: str, slept: list[float], reported: float) -> None:
    too_many = json_response({}, status=429, headers={"retry-after": header})
    transport = ScriptedTransport(too_many, too_many)
    sleep = RecordingSleep()
    client = UpstreamClient(catalog.api, transport=transport, retries=1, sleep=sleep)

    with pytest.raises(RateLimited) as caught:
        client.call(catalog.get("GLOBAL_QUOTE"), {"symbol": "IBM"}, KEY)

    # A short Retry-After is waited out; a long one (over MAX_RETRY_AFTER_S) is not worth a wait...
    assert sleep.delays == slept
    assert len(transport.sent) == 1 + len(slept)
    assert caught.value.retry_after_s == reported  # ...and the model hears what the upstream said


def test_server_error_then_success_succeeds_on_the_second_attempt(catalog: Catalog) -> None:
    quote_payload = {"Global Quote": {"01. symbol": "IBM", "05. price": "245.0000"}}
    transport = ScriptedTransport(UpstreamResponse(503, {}, b"<html>busy</html>"), json_response(quote_payload))
    sleep = RecordingSleep()
    client = UpstreamClient(catalog.api, transport=transport, retries=2, sleep=sleep)

    result = client.call(catalog.get("GLOBAL_QUOTE"), {"symbol": "IBM"}, KEY)

    assert result.payload == quote_payload
    assert result.attempts == 2
    assert sleep.delays == [0.5]
    assert transport.sent[0] == transport.sent[1]  # the same request, sent again


def test_connection_error_then_success(catalog: Catalog) -> None:
    transport = ScriptedTransport(TransportError("connect", "ConnectError"), json_response({"Global Quote": {"a": 1}}))
    client = UpstreamClient(catalog.api, transport=transport, sleep=RecordingSleep())

    assert client.call(catalog.get("GLOBAL_QUOTE"), {"symbol": "IBM"}, KEY).attempts == 2


def test_malformed_body_is_bad_response(client: UpstreamClient, catalog: Catalog, upstream: SampleUpstream) -> None:
    upstream.faults.malformed = True

    with pytest.raises(UpstreamBadResponse) as caught:
        client.call(catalog.get("TIME_SERIES_DAILY"), {"symbol": "IBM"}, KEY)

    assert "broken JSON" in str(caught.value)
    assert len(upstream.requests) == 1


def test_answer_neither_json_nor_csv_is_bad_response(catalog: Catalog) -> None:
    odd = UpstreamResponse(200, {"content-type": "application/octet-stream"}, b"\x00\x01binary")
    client = UpstreamClient(catalog.api, transport=ScriptedTransport(odd), sleep=RecordingSleep())

    with pytest.raises(UpstreamBadResponse, match="neither JSON nor CSV"):
        client.call(catalog.get("GLOBAL_QUOTE"), {"symbol": "IBM"}, KEY)


@pytest.mark.parametrize("content_type", ["text/html", "text/plain", ""])
def test_html_page_with_status_200_is_bad_response_not_retried(catalog: Catalog, content_type: str) -> None:
    page = UpstreamResponse(200, {"content-type": content_type}, b"<!DOCTYPE html><html>maintenance</html>")
    transport = ScriptedTransport(page, page)
    client = UpstreamClient(catalog.api, transport=transport, sleep=RecordingSleep())

    with pytest.raises(UpstreamBadResponse, match="HTML page instead of data") as caught:
        client.call(catalog.get("GLOBAL_QUOTE"), {"symbol": "IBM"}, KEY)

    assert len(transport.sent) == 1
    assert caught.value.details() == {"kind": "bad_response", "upstream_status": 200}


@pytest.mark.parametrize("datatype", ["json", "csv"])
def test_empty_body_is_bad_response_not_retried(catalog: Catalog, datatype: str) -> None:
    empty = UpstreamResponse(200, {"content-type": "application/json"}, b"  \n")
    transport = ScriptedTransport(empty, empty)
    client = UpstreamClient(catalog.api, transport=transport, sleep=RecordingSleep())

    with pytest.raises(UpstreamBadResponse, match="empty body"):
        client.call(catalog.get("GLOBAL_QUOTE"), {"symbol": "IBM", "datatype": datatype}, KEY)

    assert len(transport.sent) == 1


def test_slow_answer_times_out_without_retry(
    catalog: Catalog, upstream: SampleUpstream, transport: HttpxTransport, sleep: RecordingSleep
) -> None:
    upstream.faults.delay_s = 1.0
    client = UpstreamClient(catalog.api, base_url=upstream.url, transport=transport, timeout_s=0.3, sleep=sleep)

    with pytest.raises(UpstreamTimeout) as caught:
        client.call(catalog.get("GLOBAL_QUOTE"), {"symbol": "IBM"}, KEY)

    assert "0.3 s" in str(caught.value)
    assert len(upstream.wait_for_requests()) == 1
    assert sleep.delays == []


def test_connection_refused_is_unavailable_after_retries(
    catalog: Catalog, transport: HttpxTransport, sleep: RecordingSleep
) -> None:
    client = UpstreamClient(catalog.api, base_url=closed_port_url(), transport=transport, retries=2, sleep=sleep)

    with pytest.raises(UpstreamUnavailable) as caught:
        client.call(catalog.get("GLOBAL_QUOTE"), {"symbol": "IBM"}, KEY)

    assert "3 attempts" in str(caught.value)
    assert sleep.delays == [0.5, 1.0]


def test_a_refused_connection_is_known_not_to_have_sent_anything(transport: HttpxTransport) -> None:
    """So that even a POST may be tried again (see tests/test_rest_requests.py for the retry policy)."""
    with pytest.raises(TransportError) as caught:
        transport.send(UpstreamRequest(closed_port_url(), (), (), 5.0, method="POST", body=b"x=1"))
    assert caught.value.kind == "connect" and caught.value.sent is False


# --- the deadline: a fake clock whose sleep moves it, and a transport whose answers take fake time ---


class FakeClock:
    """A monotonic clock that only moves when slept on (or when a fake transport spends time)."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.delays: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.delays.append(seconds)
        self.now += seconds


class TimedTransport:
    """Scripted answers, each taking `cost_s` of the fake clock's time; remembers each attempt's timeout."""

    def __init__(self, clock: FakeClock, *script: tuple[float, UpstreamResponse | TransportError]) -> None:
        self.clock = clock
        self.script = list(script)
        self.timeouts: list[float] = []

    def send(self, request: UpstreamRequest) -> UpstreamResponse:
        self.timeouts.append(request.timeout_s)
        cost_s, step = self.script.pop(0)
        self.clock.now += min(cost_s, request.timeout_s)
        if isinstance(step, TransportError):
            raise step
        return step


OK_QUOTE = json_response({"Global Quote": {"01. symbol": "IBM", "05. price": "245.0000"}})


def timed_client(catalog: Catalog, clock: FakeClock, transport: TimedTransport, **options: Any) -> UpstreamClient:
    options = {"retries": 2, "deadline_s": 3.0, **options}
    return UpstreamClient(catalog.api, transport=transport, sleep=clock.sleep, clock=clock, **options)


def test_each_attempt_gets_only_the_time_left_and_a_retry_that_would_not_fit_is_skipped(catalog: Catalog) -> None:
    clock = FakeClock()
    busy = UpstreamResponse(503, {}, b"busy")
    transport = TimedTransport(clock, (1.0, busy), (1.0, busy), (1.0, OK_QUOTE))
    client = timed_client(catalog, clock, transport)

    with pytest.raises(UpstreamUnavailable) as caught:
        client.call(catalog.get("GLOBAL_QUOTE"), {"symbol": "IBM"}, KEY)

    # t=0: 3 s left; t=1: wait 0.5; t=1.5: 1.5 s left; t=2.5: a 1 s wait would leave less than MIN_ATTEMPT_S.
    assert transport.timeouts == [3.0, 1.5]
    assert clock.delays == [0.5]
    assert "2 attempts" in str(caught.value)
    assert clock.now - 1000.0 <= 3.0


def test_a_callers_deadline_caps_the_configured_one(catalog: Catalog) -> None:
    clock = FakeClock()
    transport = TimedTransport(clock, (0.1, OK_QUOTE))
    client = timed_client(catalog, clock, transport, deadline_s=25.0, timeout_s=20.0)

    client.call(catalog.get("GLOBAL_QUOTE"), {"symbol": "IBM"}, KEY, deadline=clock() + 1.25)

    assert transport.timeouts == [1.25]


def test_no_time_left_sends_nothing(catalog: Catalog) -> None:
    clock = FakeClock()
    transport = TimedTransport(clock, (0.1, OK_QUOTE))
    client = timed_client(catalog, clock, transport)

    with pytest.raises(UpstreamTimeout, match="No time was left"):
        client.call(catalog.get("GLOBAL_QUOTE"), {"symbol": "IBM"}, KEY, deadline=clock() - 0.01)

    assert transport.timeouts == []


def test_a_timeout_is_never_retried_even_with_time_to_spare(catalog: Catalog) -> None:
    clock = FakeClock()
    transport = TimedTransport(clock, (2.0, TransportError("timeout", "slow")), (0.1, OK_QUOTE))
    client = timed_client(catalog, clock, transport, timeout_s=2.0, deadline_s=25.0)

    with pytest.raises(UpstreamTimeout) as caught:
        client.call(catalog.get("GLOBAL_QUOTE"), {"symbol": "IBM"}, KEY)

    assert transport.timeouts == [2.0]
    assert clock.delays == []
    assert caught.value.details() == {"kind": "timeout"}


@pytest.mark.parametrize("status", [429, 503])
def test_a_retry_after_that_fits_is_waited_out_exactly(catalog: Catalog, status: int) -> None:
    clock = FakeClock()
    wait = UpstreamResponse(status, {"retry-after": "1"}, b"")
    transport = TimedTransport(clock, (0.1, wait), (0.1, OK_QUOTE))
    client = timed_client(catalog, clock, transport)

    result = client.call(catalog.get("GLOBAL_QUOTE"), {"symbol": "IBM"}, KEY)

    assert result.attempts == 2
    assert clock.delays == [1.0]


@pytest.mark.parametrize(("status", "error"), [(429, RateLimited), (503, UpstreamUnavailable)])
def test_a_retry_after_past_the_deadline_returns_at_once_carrying_it(
    catalog: Catalog, status: int, error: type[UpstreamError]
) -> None:
    clock = FakeClock()
    wait = UpstreamResponse(status, {"retry-after": "5"}, b"")
    transport = TimedTransport(clock, (0.1, wait), (0.1, OK_QUOTE))
    client = timed_client(catalog, clock, transport)  # 3 s deadline: a 5 s wait cannot fit

    with pytest.raises(error) as caught:
        client.call(catalog.get("GLOBAL_QUOTE"), {"symbol": "IBM"}, KEY)

    assert transport.timeouts == [3.0]
    assert clock.delays == []
    assert caught.value.retry_after_s == 5.0
    assert caught.value.status == status


def test_dropped_connections_are_retried_while_the_backoff_fits(catalog: Catalog) -> None:
    clock = FakeClock()
    dropped = TransportError("connect", "RemoteProtocolError")
    transport = TimedTransport(clock, (0.0, dropped), (0.0, dropped), (0.1, OK_QUOTE))
    client = timed_client(catalog, clock, transport)

    result = client.call(catalog.get("GLOBAL_QUOTE"), {"symbol": "IBM"}, KEY)

    assert result.attempts == 3
    assert clock.delays == [0.5, 1.0]
    assert transport.timeouts == [3.0, 2.5, 1.5]


def test_an_oversize_body_is_bad_response_naming_the_limit_and_not_retried(catalog: Catalog) -> None:
    clock = FakeClock()
    big = json_response({"padding": "x" * 4096})
    transport = TimedTransport(clock, (0.1, big), (0.1, OK_QUOTE))
    client = timed_client(catalog, clock, transport, max_body_bytes=2048)

    with pytest.raises(UpstreamBadResponse, match=r"larger than 0.00195312 MB.*outputsize=compact") as caught:
        client.call(catalog.get("TIME_SERIES_DAILY"), {"symbol": "IBM"}, KEY)

    assert len(transport.timeouts) == 1
    assert "interval" not in str(caught.value)  # advice only names knobs this tool has


def test_a_transport_refusing_a_large_body_becomes_bad_response(catalog: Catalog) -> None:
    clock = FakeClock()
    transport = TimedTransport(clock, (0.1, TransportError("too_large", "Content-Length 52428800")))
    client = timed_client(catalog, clock, transport)

    with pytest.raises(UpstreamBadResponse, match="larger than 16 MB") as caught:
        client.call(catalog.get("GLOBAL_QUOTE"), {"symbol": "IBM"}, KEY)

    assert len(transport.timeouts) == 1
    assert "52428800" not in str(caught.value)


NOTICES = {
    "daily limit": {"Information": "our standard API rate limit is 25 requests per day."},
    "premium": {"Information": "Thank you for using Alpha Vantage! This is a premium endpoint."},
    "invalid key": {"Error Message": "the parameter apikey is invalid or missing."},
}


@pytest.mark.parametrize("notice", NOTICES.values(), ids=NOTICES.keys())
def test_http_200_notices_are_never_retried(catalog: Catalog, notice: dict[str, str]) -> None:
    clock = FakeClock()
    transport = TimedTransport(clock, (0.1, json_response(notice)), (0.1, OK_QUOTE))
    client = timed_client(catalog, clock, transport)

    with pytest.raises(UpstreamError):
        client.call(catalog.get("GLOBAL_QUOTE"), {"symbol": "IBM"}, KEY)

    assert len(transport.timeouts) == 1 and clock.delays == []


# --- the deadline over real HTTP --------------------------------------------------------------------


def test_a_trickling_body_is_cut_off_by_the_wall_clock(
    catalog: Catalog, upstream: SampleUpstream, transport: HttpxTransport
) -> None:
    upstream.faults.trickle_s = 0.05  # each byte arrives well inside httpx's per-read timeout
    client = UpstreamClient(catalog.api, base_url=upstream.url, transport=transport, timeout_s=0.5, deadline_s=0.5)

    with pytest.raises(UpstreamTimeout):
        client.call(catalog.get("GLOBAL_QUOTE"), {"symbol": "IBM"}, KEY)

    assert len(upstream.requests) == 1


def test_a_request_the_caller_gave_up_on_before_it_went_out_is_never_sent(
    catalog: Catalog, upstream: SampleUpstream
) -> None:
    """The exchange runs on a worker thread; on a busy machine the caller's time can run out before that thread
    sends anything. The caller has already answered UpstreamTimeout, so a late request (a POST that creates
    something) must not go out after it."""
    transport = HttpxTransport()
    sent_or_not = threading.Event()
    exchange = transport._exchange

    def late(request: Any, ends_at: float, abandoned: threading.Event) -> Any:
        assert abandoned.wait(10)  # the worker thread starts only once the caller has given up
        try:
            return exchange(request, ends_at, abandoned)
        finally:
            sent_or_not.set()

    transport._exchange = late  # type: ignore[method-assign]
    client = UpstreamClient(catalog.api, base_url=upstream.url, transport=transport, timeout_s=0.05, deadline_s=0.05)
    try:
        with pytest.raises(UpstreamTimeout):
            client.call(catalog.get("GLOBAL_QUOTE"), {"symbol": "IBM"}, KEY)
        assert sent_or_not.wait(10)
    finally:
        transport.close()
    assert upstream.requests == []


def test_a_streamed_body_over_the_limit_is_refused_while_streaming(catalog: Catalog, upstream: SampleUpstream) -> None:
    upstream.faults.body_mb = 3  # chunked: no Content-Length to refuse it by
    small = HttpxTransport(max_body_bytes=1024 * 1024)
    client = UpstreamClient(catalog.api, base_url=upstream.url, transport=small, max_body_bytes=1024 * 1024)
    try:
        with pytest.raises(UpstreamBadResponse, match="larger than 1 MB"):
            client.call(catalog.get("GLOBAL_QUOTE"), {"symbol": "IBM"}, KEY)
    finally:
        small.close()
    assert len(upstream.requests) == 1


def test_a_declared_content_length_over_the_limit_is_refused_before_reading(catalog: Catalog) -> None:
    """The server announces 50 MB and sends nothing more: only the header can end this before the timeout."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        port = listener.getsockname()[1]
        accepted: list[socket.socket] = []

        def answer() -> None:
            conn, _ = listener.accept()
            accepted.append(conn)
            conn.recv(65536)
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 52428800\r\n\r\n{")

        worker = threading.Thread(target=answer, daemon=True)
        worker.start()
        http_transport = HttpxTransport()
        client = UpstreamClient(
            catalog.api, base_url=f"http://127.0.0.1:{port}/query", transport=http_transport, timeout_s=5.0
        )
        try:
            with pytest.raises(UpstreamBadResponse, match="larger than 16 MB"):
                client.call(catalog.get("GLOBAL_QUOTE"), {"symbol": "IBM"}, KEY)
        finally:
            http_transport.close()
            worker.join(timeout=5)
            for conn in accepted:
                conn.close()


# --- the key never leaks ------------------------------------------------------------------------

LEAK_CASES: dict[str, tuple[dict[str, Any], str, str, dict[str, Any], type[UpstreamError]]] = {
    # name: (faults, key, tool, arguments, expected error)
    "invalid key": ({}, "invalid-" + KEY, "GLOBAL_QUOTE", {"symbol": "IBM"}, MissingApiKey),
    "unknown symbol": ({}, KEY, "TIME_SERIES_DAILY", {"symbol": "NOSUCH"}, UpstreamRejected),
    "empty quote": ({}, KEY, "GLOBAL_QUOTE", {"symbol": "NOSUCH"}, UpstreamRejected),
    "empty csv": ({}, KEY, "GLOBAL_QUOTE", {"symbol": "NOSUCH", "datatype": "csv"}, UpstreamRejected),
    "premium": ({}, KEY, "TIME_SERIES_DAILY_ADJUSTED", {"symbol": "IBM"}, PremiumRequired),
    "rate limit notice": ({"rate_limit": True}, KEY, "GLOBAL_QUOTE", {"symbol": "IBM"}, RateLimited),
    "rate-limited key": ({}, RATE_LIMIT_KEY, "GLOBAL_QUOTE", {"symbol": "IBM"}, RateLimited),
    "odd characters": ({"rate_limit": True}, "SeCrEt KEY/+&=é 1", "GLOBAL_QUOTE", {"symbol": "IBM"}, RateLimited),
    "http 500": ({"status": 500}, KEY, "GLOBAL_QUOTE", {"symbol": "IBM"}, UpstreamUnavailable),
    "http 503": ({"status": 503}, KEY, "GLOBAL_QUOTE", {"symbol": "IBM"}, UpstreamUnavailable),
    "http 429": ({"status": 429}, KEY, "GLOBAL_QUOTE", {"symbol": "IBM"}, RateLimited),
    "http 404": ({"status": 404}, KEY, "GLOBAL_QUOTE", {"symbol": "IBM"}, UpstreamError),
    "malformed": ({"malformed": True}, KEY, "TIME_SERIES_DAILY", {"symbol": "IBM"}, UpstreamBadResponse),
    # the broken body is the rate-limit notice cut in half: it still holds the echoed key
    "malformed notice": ({"malformed": True, "rate_limit": True}, KEY, "GLOBAL_QUOTE", {}, UpstreamBadResponse),
    "timeout": ({"delay_s": 1.0}, KEY, "GLOBAL_QUOTE", {"symbol": "IBM"}, UpstreamTimeout),
    "trickle": ({"trickle_s": 0.05, "rate_limit": True}, KEY, "GLOBAL_QUOTE", {"symbol": "IBM"}, UpstreamTimeout),
    "429 retry-after": ({"status": 429, "retry_after": 60}, KEY, "GLOBAL_QUOTE", {"symbol": "IBM"}, RateLimited),
    "empty body": ({"empty": True}, KEY, "GLOBAL_QUOTE", {"symbol": "IBM"}, UpstreamBadResponse),
    "html page": ({"html": True}, KEY, "GLOBAL_QUOTE", {"symbol": "IBM"}, UpstreamBadResponse),
    "dropped connection": ({"disconnect": True}, KEY, "GLOBAL_QUOTE", {"symbol": "IBM"}, UpstreamUnavailable),
}


@pytest.mark.parametrize("case", list(LEAK_CASES))
def test_key_never_leaks_on_error(
    case: str,
    catalog: Catalog,
    upstream: SampleUpstream,
    transport: HttpxTransport,
    debug_logs: pytest.LogCaptureFixture,
) -> None:
    faults, key, tool_name, arguments, expected = LEAK_CASES[case]
    upstream.update_faults(faults)
    # Only the cases about a slow answer get a short limit: on a busy machine 0.3 s can pass before any
    # answer is read, which would turn every other case into a timeout.
    timeout_s = 0.3 if expected is UpstreamTimeout else 10.0
    client = UpstreamClient(
        catalog.api, base_url=upstream.url, transport=transport, timeout_s=timeout_s, sleep=RecordingSleep()
    )

    with pytest.raises(expected) as caught:
        client.call(catalog.get(tool_name), arguments, key)

    assert upstream.wait_for_requests(), "the call reached the sample upstream"
    assert_key_never_leaks(key, debug_logs, caught.value)


def test_key_never_leaks_when_the_upstream_is_unreachable(
    catalog: Catalog, transport: HttpxTransport, debug_logs: pytest.LogCaptureFixture
) -> None:
    client = UpstreamClient(catalog.api, base_url=closed_port_url(), transport=transport, sleep=RecordingSleep())

    with pytest.raises(UpstreamUnavailable) as caught:
        client.call(catalog.get("GLOBAL_QUOTE"), {"symbol": "IBM"}, KEY)

    assert_key_never_leaks(KEY, debug_logs, caught.value)


def test_key_never_leaks_into_logs_of_a_successful_call(
    client: UpstreamClient, catalog: Catalog, debug_logs: pytest.LogCaptureFixture
) -> None:
    client.call(catalog.get("GLOBAL_QUOTE"), {"symbol": "IBM"}, KEY)

    assert any(r.name == "httpx" for r in debug_logs.records), "httpx's request line was captured"
    assert any(r.name == "progressive_mcp.calls.upstream" for r in debug_logs.records)
    assert_key_never_leaks(KEY, debug_logs)


# --- redact -------------------------------------------------------------------------------------


def test_redact_masks_the_plain_key() -> None:
    masked = redact(f"We have detected your API key as {KEY} and ...", KEY)

    assert KEY not in masked
    assert masked == "We have detected your API key as *** and ..."


def test_redact_masks_url_encoded_forms() -> None:
    secret = "a b/c+d&e=f"
    text = f"one {quote(secret, safe='')} two {quote_plus(secret)} three {secret}"

    masked = redact(text, secret)

    assert masked == "one *** two *** three ***"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("GET /query?function=X&apikey=abc123&symbol=IBM", "GET /query?function=X&apikey=***&symbol=IBM"),
        ("https://h/q?APIKEY=abc123", "https://h/q?APIKEY=***"),
        ("api_key=abc token=xyz", "api_key=*** token=***"),
        ("no secrets here", "no secrets here"),
    ],
)
def test_redact_masks_key_value_pairs_even_without_the_secret(text: str, expected: str) -> None:
    assert redact(text, None) == expected


def test_redact_with_an_empty_secret_changes_nothing_else() -> None:
    assert redact("plain text", "") == "plain text"


def test_request_repr_never_shows_the_key() -> None:
    request = UpstreamClient(load_catalog().api).build_request(
        load_catalog().get("GLOBAL_QUOTE"), {"symbol": "IBM"}, "ReprKey-991"
    )
    assert ("apikey", "ReprKey-991") in request.params
    assert "ReprKey-991" not in repr(request)


def test_deadline_and_body_limit_settings_reach_the_client(catalog: Catalog) -> None:
    from progressive_mcp.errors import ConfigError
    from progressive_mcp.settings import Settings
    from progressive_mcp.surfaces.surface import Surface

    settings = Settings.from_env({"PMCP_DEADLINE_S": "3.5", "PMCP_MAX_UPSTREAM_BYTES": "2048"})
    client = Surface.from_settings(settings, catalog=catalog).upstream

    assert (client.deadline_s, client.max_body_bytes) == (3.5, 2048)
    assert isinstance(client.transport, HttpxTransport) and client.transport.max_body_bytes == 2048
    assert Settings.from_env({}).deadline_s == 25.0
    assert Settings.from_env({}).max_upstream_bytes == 16 * 1024 * 1024
    for bad in ({"PMCP_DEADLINE_S": "0"}, {"PMCP_DEADLINE_S": "nan"}, {"PMCP_MAX_UPSTREAM_BYTES": "10"}):
        with pytest.raises(ConfigError, match=next(iter(bad))):
            Settings.from_env(bad)


# --- error bodies, hints and odd answers, in any API's terms ----------------------------------------------

LASTFM_SPEC = Path(__file__).resolve().parent / "fixtures" / "lastfm" / "lastfm.yaml"


@pytest.fixture(scope="module")
def lastfm() -> Catalog:
    return load_catalog(LASTFM_SPEC)


def scripted(catalog: Catalog, *answers: UpstreamResponse) -> UpstreamClient:
    return UpstreamClient(catalog.api, transport=ScriptedTransport(*answers), retries=0, sleep=RecordingSleep())


def text_response(body: str, status: int, content_type: str = "text/plain") -> UpstreamResponse:
    return UpstreamResponse(status, {"content-type": content_type}, body.encode())


def test_an_error_field_is_an_error_whatever_its_value_and_the_spec_names_the_message(lastfm: Catalog) -> None:
    body = {"error": 6, "message": "The artist you supplied could not be found"}
    client = scripted(lastfm, json_response(body))
    with pytest.raises(UpstreamRejected) as caught:
        client.call(lastfm.get("artist.getInfo"), {"artist": "Nobody At All", "format": "json"}, KEY)
    message = str(caught.value)
    assert "The artist you supplied could not be found" in message
    assert "symbol" not in message.lower() and "SYMBOL_SEARCH" not in message  # no Alpha Vantage advice


@pytest.mark.parametrize(
    "body",
    [
        {"Error Message": ["Invalid API call."]},
        {"Error Message": {"detail": "Invalid API call."}},
        {"Information": {"text": "Please visit the premium page"}},
        {"Note": 42},
    ],
    ids=["list", "object", "notice object", "number"],
)
def test_alpha_vantage_error_fields_count_whatever_their_type(catalog: Catalog, body: dict[str, Any]) -> None:
    client = scripted(catalog, json_response(body))
    with pytest.raises(UpstreamError):
        client.call(catalog.get("GLOBAL_QUOTE"), {"symbol": "IBM"}, KEY)


def test_no_data_advice_comes_from_the_spec(catalog: Catalog, lastfm: Catalog) -> None:
    with pytest.raises(UpstreamRejected) as alpha:
        scripted(catalog, json_response({"Global Quote": {}})).call(catalog.get("GLOBAL_QUOTE"), {"symbol": "ZZZ"}, KEY)
    assert "returned no data for GLOBAL_QUOTE (symbol=ZZZ)" in str(alpha.value)
    assert "SYMBOL_SEARCH finds tickers" in str(alpha.value)  # spec/alphavantage.yaml's hints.no_data
    with pytest.raises(UpstreamRejected) as music:
        scripted(lastfm, json_response({"similarartists": {}})).call(
            lastfm.get("artist.getSimilar"), {"artist": "Radiohead", "format": "json"}, KEY
        )
    assert "returned no data for artist.getSimilar" in str(music.value)
    assert "symbol" not in str(music.value).lower()


def test_premium_advice_names_only_the_paid_arguments_actually_sent(catalog: Catalog) -> None:
    notice = {"Information": "Thank you for using Alpha Vantage! This is a premium endpoint."}
    with pytest.raises(PremiumRequired) as plain:
        scripted(catalog, json_response(notice)).call(
            catalog.get("TIME_SERIES_DAILY_ADJUSTED"), {"symbol": "MSFT"}, KEY
        )
    assert "entitlement" not in str(plain.value)
    assert "needs a paid plan" in str(plain.value)
    with pytest.raises(PremiumRequired) as realtime:
        scripted(catalog, json_response(notice)).call(
            catalog.get("GLOBAL_QUOTE"), {"symbol": "MSFT", "entitlement": "realtime"}, KEY
        )
    assert "without entitlement=realtime" in str(realtime.value)


@pytest.mark.parametrize("status", [401, 403])
def test_http_401_and_403_are_auth_errors_with_the_upstream_message(catalog: Catalog, status: int) -> None:
    said = {"message": f"Invalid API key {KEY}: this key was revoked"}
    with pytest.raises(MissingApiKey) as caught:
        scripted(catalog, json_response(said, status)).call(catalog.get("GLOBAL_QUOTE"), {"symbol": "IBM"}, KEY)
    assert caught.value.kind == "auth"
    assert "this key was revoked" in str(caught.value)
    assert KEY not in str(caught.value)


def test_http_404_says_the_upstream_url_is_probably_wrong(catalog: Catalog) -> None:
    page = text_response("<html><body>Not Found</body></html>", 404, "text/html")
    with pytest.raises(UpstreamError) as caught:
        scripted(catalog, page).call(catalog.get("GLOBAL_QUOTE"), {"symbol": "IBM"}, KEY)
    assert type(caught.value) is UpstreamError and caught.value.kind == "upstream_error"
    assert "upstream URL is probably misconfigured" in str(caught.value)
    assert "<html" not in str(caught.value)


def test_a_redirect_with_a_json_body_is_not_data(catalog: Catalog) -> None:
    moved = json_response({"Global Quote": {"01. symbol": "IBM"}}, 302, {"location": "https://elsewhere.example/"})
    with pytest.raises(UpstreamError, match="HTTP 302 instead of data"):
        scripted(catalog, moved).call(catalog.get("GLOBAL_QUOTE"), {"symbol": "IBM"}, KEY)


@pytest.mark.parametrize(
    "body",
    ["[" * 300 + "]" * 300, '{"a":' * 1000 + "1" + "}" * 1000, '{"n": ' + "7" * 5000 + "}"],
    ids=["nested 300", "nested 1000", "5000 digits"],
)
def test_answers_that_cannot_be_passed_on_are_bad_responses(catalog: Catalog, body: str) -> None:
    answer = text_response(body, 200, "application/json")
    with pytest.raises(UpstreamBadResponse):
        scripted(catalog, answer).call(catalog.get("GLOBAL_QUOTE"), {"symbol": "IBM"}, KEY)


def test_nan_and_infinity_become_null(catalog: Catalog) -> None:
    answer = text_response(
        '{"Global Quote": {"01. symbol": "IBM", "05. price": NaN, "x": Infinity, "y": -Infinity}}', 200
    )
    result = scripted(catalog, answer).call(catalog.get("GLOBAL_QUOTE"), {"symbol": "IBM"}, KEY)
    assert result.payload == {"Global Quote": {"01. symbol": "IBM", "05. price": None, "x": None, "y": None}}
