"""The response cache and the large-result hook in the core: MemoryCache, cache keys, and Surface behaviour.

The AWS implementations (DynamoDB, S3, Secrets Manager) are tested under moto in test_aws.py; here
the sample upstream counts what really reaches the upstream.
"""

from __future__ import annotations

import json
import threading
from dataclasses import replace
from typing import Any

import httpx
import pytest

from lambda_fn.handler import make_handler
from lambda_fn.local import LocalServer
from progressive_mcp.calls.cache import (
    LOCAL,
    PUBLIC,
    SERVER,
    CachedAnswer,
    MemoryCache,
    StoredResult,
    cache_key,
    caller_entitlement,
)
from progressive_mcp.calls.upstream import UpstreamClient
from progressive_mcp.catalog import Catalog
from progressive_mcp.errors import ConfigError
from progressive_mcp.offline.sample_upstream import SampleUpstream
from progressive_mcp.settings import Settings
from progressive_mcp.sources import load_catalog
from progressive_mcp.surfaces.endpoint import Endpoint
from progressive_mcp.surfaces.surface import CallContext, CallRecord, Surface
from progressive_mcp.tokens import count_tokens, dumps

KEY = "CaChE-KEY-0042"
OTHER_KEY = "OtHeR-KEY-0777"


class Clock:
    def __init__(self, now: float = 1_800_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def answer(size: int = 10, expires_at: float = 2e9, payload: Any = None) -> CachedAnswer:
    return CachedAnswer(payload if payload is not None else {"n": 1}, "json", 1e9, expires_at, size)


# --- MemoryCache ---------------------------------------------------------------------------------


def test_memory_cache_returns_fresh_answers_and_forgets_expired_ones() -> None:
    clock = Clock()
    cache = MemoryCache(clock=clock)
    cache.put("k", answer(expires_at=clock.now + 60))
    assert cache.get("k") == answer(expires_at=clock.now + 60)
    assert cache.get("other") is None
    clock.now += 60
    assert cache.get("k") is None
    assert len(cache) == 0


def test_memory_cache_drops_the_least_recently_used_first() -> None:
    cache = MemoryCache(max_entries=2)
    cache.put("a", answer())
    cache.put("b", answer())
    assert cache.get("a") is not None  # a is now the most recently used
    cache.put("c", answer())
    assert cache.get("b") is None
    assert cache.get("a") is not None and cache.get("c") is not None


def test_memory_cache_keeps_within_its_byte_budget_and_refuses_huge_answers() -> None:
    cache = MemoryCache(max_entries=100, max_bytes=1000, weigh=lambda answer: answer.size)
    for name in "abcde":
        cache.put(name, answer(size=240))
    assert len(cache) == 4 and cache.get("a") is None  # 5 × 240 > 1000: the oldest went
    cache.put("huge", answer(size=251))  # over a quarter of the budget: not kept at all
    assert cache.get("huge") is None and len(cache) == 4
    cache.put("b", answer(size=10))  # replacing an entry releases its bytes
    cache.put("f", answer(size=240))
    assert cache.get("b") is not None


def test_memory_cache_is_safe_under_threads() -> None:
    cache = MemoryCache(max_entries=50)

    def work(n: int) -> None:
        for i in range(500):
            cache.put(f"{n}-{i % 80}", answer(size=1))
            cache.get(f"{(n + 1) % 8}-{i % 80}")

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(cache) == 50


def test_memory_cache_rejects_nonsense_limits() -> None:
    with pytest.raises(ValueError):
        MemoryCache(max_entries=0)


# --- cache keys ----------------------------------------------------------------------------------


def test_cache_key_ignores_argument_order_and_depends_on_tool_arguments_and_entitlement() -> None:
    base = cache_key("GLOBAL_QUOTE", {"symbol": "IBM", "datatype": "json"}, PUBLIC)
    assert base == cache_key("GLOBAL_QUOTE", {"datatype": "json", "symbol": "IBM"}, PUBLIC)
    assert len(base) == 64 and KEY not in base
    assert base != cache_key("GLOBAL_QUOTE", {"symbol": "MSFT", "datatype": "json"}, PUBLIC)
    assert base != cache_key("OVERVIEW", {"symbol": "IBM", "datatype": "json"}, PUBLIC)
    assert base != cache_key("GLOBAL_QUOTE", {"symbol": "IBM", "datatype": "json"}, SERVER)


# --- Surface with a cache ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return load_catalog()


@pytest.fixture
def upstream(shared_upstream: SampleUpstream) -> SampleUpstream:
    shared_upstream.reset()
    return shared_upstream


def make_surface(catalog: Catalog, upstream: SampleUpstream, **kwargs: Any) -> Surface:
    client = UpstreamClient(catalog.api, base_url=upstream.url, retries=0)
    return Surface(catalog, upstream=client, **kwargs)


def run(
    surface: Surface, tool: str, arguments: dict[str, Any], *, key: str = KEY, entitlement: str = PUBLIC
) -> tuple[dict[str, Any], CallRecord]:
    record = CallRecord()
    ctx = CallContext(api_key=key, record=record, entitlement=entitlement)
    result = surface.call_tool_wire("TOOL_CALL", {"tool_name": tool, "arguments": arguments}, ctx)
    assert json.loads(result["content"][0]["text"]) == result["structuredContent"]
    return result, record


def upstream_calls(upstream: SampleUpstream) -> list[dict[str, str]]:
    return [r for r in upstream.requests_snapshot(unmasked=True) if r.get("function")]


def test_same_call_twice_reaches_the_upstream_once_and_says_it_was_cached(
    catalog: Catalog, upstream: SampleUpstream
) -> None:
    clock = Clock()
    surface = make_surface(catalog, upstream, cache=MemoryCache(clock=clock), clock=clock)
    first, record1 = run(surface, "GLOBAL_QUOTE", {"symbol": "IBM"})
    second, record2 = run(surface, "GLOBAL_QUOTE", {"symbol": "IBM"})
    assert len(upstream_calls(upstream)) == 1
    assert (record1.cache, record2.cache) == ("miss", "hit")
    assert record2.upstream_ms is None
    assert "cached_at" not in first["structuredContent"]
    cached = dict(second["structuredContent"])
    assert cached.pop("cached_at") == "2027-01-15T08:00:00Z"  # the clock's time when the answer was kept
    assert cached == first["structuredContent"]
    # A different question, or the same one after its TTL (60 s for GLOBAL_QUOTE in the spec), goes upstream.
    run(surface, "GLOBAL_QUOTE", {"symbol": "MSFT"})
    clock.now += catalog.get("GLOBAL_QUOTE").cache_ttl_s
    _, record3 = run(surface, "GLOBAL_QUOTE", {"symbol": "IBM"})
    assert record3.cache == "miss" and len(upstream_calls(upstream)) == 3


def test_normalised_arguments_share_an_entry(catalog: Catalog, upstream: SampleUpstream) -> None:
    surface = make_surface(catalog, upstream, cache=MemoryCache())
    _, first = run(surface, "TIME_SERIES_DAILY", {"symbol": "IBM"})
    # The defaults written out, and the arguments as a JSON string, are the same question.
    _, spelled_out = run(surface, "TIME_SERIES_DAILY", {"datatype": "json", "symbol": "IBM", "outputsize": "compact"})
    _, as_text = run(surface, "TIME_SERIES_DAILY", json.dumps({"symbol": "IBM"}))  # type: ignore[arg-type]
    assert (first.cache, spelled_out.cache, as_text.cache) == ("miss", "hit", "hit")
    assert len(upstream_calls(upstream)) == 1


def test_errors_and_rate_limit_notices_are_never_cached(catalog: Catalog, upstream: SampleUpstream) -> None:
    surface = make_surface(catalog, upstream, cache=MemoryCache())
    upstream.faults.rate_limit = True
    limited, _ = run(surface, "GLOBAL_QUOTE", {"symbol": "IBM"})
    assert limited["isError"] and limited["structuredContent"]["error"]["kind"] == "rate_limited"
    upstream.faults.rate_limit = False
    upstream.faults.status = 503
    failed, _ = run(surface, "GLOBAL_QUOTE", {"symbol": "IBM"})
    assert failed["isError"]
    upstream.faults.status = None
    ok, record = run(surface, "GLOBAL_QUOTE", {"symbol": "IBM"})
    assert not ok["isError"] and record.cache == "miss"
    rejected, record = run(surface, "TIME_SERIES_DAILY", {"symbol": "ZZZZ"})
    assert rejected["isError"]
    _, record = run(surface, "TIME_SERIES_DAILY", {"symbol": "ZZZZ"})
    assert record.cache == "miss"


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("TIME_SERIES_DAILY", {"symbol": "IBM", "outputsize": "full"}),  # a premium value
        ("GLOBAL_QUOTE", {"symbol": "IBM", "entitlement": "delayed"}),  # a premium value of a shared parameter
    ],
)
def test_paid_answers_are_shared_only_where_one_key_serves_everyone(
    catalog: Catalog, upstream: SampleUpstream, tool: str, arguments: dict[str, Any]
) -> None:
    assert catalog.get(tool).premium or any(p.premium_values for p in catalog.get(tool).params)
    surface = make_surface(catalog, upstream, cache=MemoryCache())
    _, first = run(surface, tool, arguments, key=KEY)
    _, second = run(surface, tool, arguments, key=OTHER_KEY)
    assert (first.cache, second.cache) == ("miss", "miss")  # each caller's own plan decides
    assert len(upstream_calls(upstream)) == 2
    for entitlement in (SERVER, LOCAL):
        _, miss = run(surface, tool, arguments, entitlement=entitlement)
        _, hit = run(surface, tool, arguments, entitlement=entitlement)
        assert (miss.cache, hit.cache) == ("miss", "hit")
    assert len(upstream_calls(upstream)) == 4


def test_callers_with_their_own_keys_never_share_answers(catalog: Catalog, upstream: SampleUpstream) -> None:
    surface = make_surface(catalog, upstream, cache=MemoryCache())
    _, first = run(surface, "GLOBAL_QUOTE", {"symbol": "IBM"}, key=KEY)
    _, other = run(surface, "GLOBAL_QUOTE", {"symbol": "IBM"}, key=OTHER_KEY)
    _, again = run(surface, "GLOBAL_QUOTE", {"symbol": "IBM"}, key=KEY)
    assert (first.cache, other.cache, again.cache) == ("miss", "miss", "hit")
    assert [r["apikey"] for r in upstream_calls(upstream)] == [KEY, OTHER_KEY]
    # A key that the upstream refuses gets its refusal, never the answer another key fetched.
    refused, record = run(surface, "GLOBAL_QUOTE", {"symbol": "IBM"}, key="invalid-key")
    assert refused["isError"] and record.cache == "miss"
    assert caller_entitlement(KEY) != caller_entitlement(OTHER_KEY)
    assert KEY not in caller_entitlement(KEY)


def test_a_premium_tool_is_keyed_by_entitlement_and_its_premium_notice_never_cached(
    catalog: Catalog, upstream: SampleUpstream
) -> None:
    surface = make_surface(catalog, upstream, cache=MemoryCache())
    premium = catalog.get("REALTIME_BULK_QUOTES")
    assert premium.premium
    assert surface._cache_key(premium, {"symbol": "IBM"}, CallContext(entitlement=PUBLIC)) is None
    server = surface._cache_key(premium, {"symbol": "IBM"}, CallContext(entitlement=SERVER))
    local = surface._cache_key(premium, {"symbol": "IBM"}, CallContext(entitlement=LOCAL))
    assert None not in (server, local) and server != local
    # The sample upstream answers this tool with Alpha Vantage's premium notice: an error, never kept.
    for _ in range(2):
        result, record = run(surface, "REALTIME_BULK_QUOTES", {"symbol": "IBM"}, entitlement=SERVER)
        assert result["structuredContent"]["error"]["kind"] == "premium_required" and record.cache == "miss"
    assert len(upstream_calls(upstream)) == 2


def test_a_tool_with_no_ttl_is_not_cached(catalog: Catalog, upstream: SampleUpstream) -> None:
    surface = make_surface(catalog, upstream, cache=MemoryCache())
    tool = catalog.get("GLOBAL_QUOTE")
    ctx = CallContext(api_key=KEY)
    assert surface._cache_key(tool, {"symbol": "IBM"}, ctx) is not None
    assert surface._cache_key(replace(tool, cache_ttl_s=0), {"symbol": "IBM"}, ctx) is None


class BrokenCache:
    """A cache whose backend is down: every read and write raises."""

    def __init__(self) -> None:
        self.calls = 0

    def get(self, key: str) -> CachedAnswer | None:
        self.calls += 1
        raise ConnectionError("cache backend unreachable")

    def put(self, key: str, answer: CachedAnswer) -> None:
        self.calls += 1
        raise ConnectionError("cache backend unreachable")


def test_a_failing_cache_degrades_to_a_direct_call(
    catalog: Catalog, upstream: SampleUpstream, caplog: pytest.LogCaptureFixture
) -> None:
    broken = BrokenCache()
    surface = make_surface(catalog, upstream, cache=broken)
    for _ in range(2):
        result, record = run(surface, "GLOBAL_QUOTE", {"symbol": "IBM"})
        assert not result["isError"] and record.cache == "error"
    assert broken.calls == 4 and len(upstream_calls(upstream)) == 2
    assert "response cache read failed" in caplog.text and KEY not in caplog.text


# --- large results -------------------------------------------------------------------------------


class DictStore:
    """A result store in a dict (the S3 one is tested under moto in test_aws.py)."""

    def __init__(self, fail: bool = False) -> None:
        self.objects: dict[str, tuple[bytes, str]] = {}
        self.fail = fail

    def put(self, name: str, body: bytes, content_type: str) -> StoredResult:
        if self.fail:
            raise TimeoutError("store unreachable")
        self.objects[name] = (body, content_type)
        return StoredResult(f"https://results.example/{name}?X-Amz-Signature=abc&X-Amz-Expires=900", 1_800_000_900.0)


@pytest.mark.parametrize("datatype", ["json", "csv"])
def test_a_large_result_goes_to_the_store_and_the_preview_links_to_it(
    catalog: Catalog, upstream: SampleUpstream, datatype: str
) -> None:
    store = DictStore()
    surface = make_surface(catalog, upstream, results=store, max_result_tokens=800)
    result, _ = run(surface, "TIME_SERIES_DAILY", {"symbol": "IBM", "datatype": datatype})
    envelope = result["structuredContent"]
    assert not result["isError"] and "truncated" in envelope
    link = envelope["full_result"]
    assert link["url"].startswith("https://results.example/TIME_SERIES_DAILY/")
    assert link["expires_at"] == "2027-01-15T08:15:00Z" and link["format"] == datatype
    assert "full_result.url" in envelope["truncated"]["note"]
    assert count_tokens(dumps(envelope)) <= 800  # the link is inside the budget
    [(name, (body, content_type))] = store.objects.items()
    assert link["url"].split("?")[0].endswith(name) and link["bytes"] == len(body)
    raw = UpstreamClient(catalog.api, base_url=upstream.url).call(
        catalog.get("TIME_SERIES_DAILY"), {"symbol": "IBM", "datatype": datatype}, KEY
    )
    if datatype == "csv":
        assert content_type.startswith("text/csv") and body.decode() == raw.payload
    else:
        assert content_type == "application/json" and json.loads(body) == raw.payload


def test_small_results_and_stores_that_fail_leave_the_preview_alone(catalog: Catalog, upstream: SampleUpstream) -> None:
    store = DictStore()
    surface = make_surface(catalog, upstream, results=store, max_result_tokens=800)
    small, _ = run(surface, "GLOBAL_QUOTE", {"symbol": "IBM"})
    assert "full_result" not in small["structuredContent"] and not store.objects
    failing = make_surface(catalog, upstream, results=DictStore(fail=True), max_result_tokens=800)
    cut, _ = run(failing, "TIME_SERIES_DAILY", {"symbol": "IBM"})
    assert not cut["isError"] and "truncated" in cut["structuredContent"]
    assert "full_result" not in cut["structuredContent"]
    no_store = make_surface(catalog, upstream, max_result_tokens=800)
    plain, _ = run(no_store, "TIME_SERIES_DAILY", {"symbol": "IBM"})
    assert plain["structuredContent"] == cut["structuredContent"]


# --- settings and the serve stack ----------------------------------------------------------------


def test_cache_setting_reads_on_and_off() -> None:
    assert Settings.from_env({}).cache is True
    assert Settings.from_env({"PMCP_CACHE": "off"}).cache is False
    assert Settings.from_env({"PMCP_CACHE": " ON "}).cache is True
    with pytest.raises(ConfigError, match="PMCP_CACHE"):
        Settings.from_env({"PMCP_CACHE": "maybe"})
    assert Surface.from_settings(Settings.from_env({"PMCP_CACHE": "off"})).cache is None
    assert isinstance(Surface.from_settings(Settings.from_env({})).cache, MemoryCache)


def test_serve_answers_a_repeated_call_from_memory_over_real_http(upstream: SampleUpstream) -> None:
    endpoint = Endpoint.from_settings(Settings.from_env({}, upstream_url=upstream.url))
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "TOOL_CALL", "arguments": {"tool_name": "OVERVIEW", "arguments": {"symbol": "IBM"}}},
    }
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    answers = []
    with LocalServer(make_handler(endpoint), port=0) as server:
        for key in (KEY, OTHER_KEY, KEY):
            response = httpx.post(server.url, json=body, headers={**headers, "X-API-Key": key}, timeout=10)
            assert response.status_code == 200
            answers.append(response.json()["result"]["structuredContent"])
    calls = upstream_calls(upstream)
    assert [call["apikey"] for call in calls] == [KEY, OTHER_KEY]  # each key's answers are its own
    assert ["cached_at" in answer for answer in answers] == [False, False, True]
    assert KEY not in json.dumps(answers[2])


# --- what is kept, and what it costs -------------------------------------------------------------------


def test_memory_cache_keeps_answers_as_text_and_counts_that_exactly() -> None:
    import sys

    cache = MemoryCache()
    payload = {"Time Series (Daily)": {f"2026-11-{d:02d}": {"4. close": f"{100 + d}.00"} for d in range(1, 21)}}
    cache.put("k", answer(payload=payload, size=10))
    text = json.dumps(payload, separators=(",", ":"))
    assert cache.bytes == sys.getsizeof(text)
    first, second = cache.get("k"), cache.get("k")
    assert first is not None and second is not None
    assert first.payload == payload and first.payload is not second.payload  # each read is a fresh copy
    cache.put("csv", CachedAnswer("timestamp,close\n2026-11-20,1.0\n", "csv", 1e9, 2e9, 30))
    kept = cache.get("csv")
    assert kept is not None and kept.payload == "timestamp,close\n2026-11-20,1.0\n"


def test_a_big_answer_is_cut_to_size_once_however_often_it_is_asked_for(
    catalog: Catalog, upstream: SampleUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    from progressive_mcp.surfaces import surface as surface_module

    shaped: list[str] = []
    real_shape = surface_module.shape_result
    monkeypatch.setattr(
        surface_module, "shape_result", lambda tool, *a, **k: shaped.append(tool.name) or real_shape(tool, *a, **k)
    )
    upstream.update_faults({"huge": True})
    surface = make_surface(catalog, upstream, cache=MemoryCache())
    answers = [run(surface, "TIME_SERIES_DAILY", {"symbol": "IBM", "outputsize": "full"}) for _ in range(3)]
    assert [record.cache for _, record in answers] == ["miss", "hit", "hit"]
    assert shaped == ["TIME_SERIES_DAILY"]  # the hits sent what was sent the first time
    first = answers[0][0]["structuredContent"]
    for result, _ in answers[1:]:
        again = dict(result["structuredContent"])
        assert again.pop("cached_at") and again == first
        assert "truncated" in again
    assert len(upstream_calls(upstream)) == 1
