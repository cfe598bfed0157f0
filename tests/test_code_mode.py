"""Code mode in process: the surface's tools, typed stubs, TOOL_EXECUTE's answers and errors, concurrency and
the shared cache. (Attacks on the sandbox: test_code_mode_security.py; the SDK client end to end:
test_code_mode_e2e.py.)"""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest

from progressive_mcp.calls.cache import LOCAL, MemoryCache
from progressive_mcp.calls.sandbox import ScriptLimits
from progressive_mcp.calls.stubs import python_name, tool_stubs
from progressive_mcp.calls.upstream import HttpxTransport, UpstreamClient, UpstreamRequest, UpstreamResponse
from progressive_mcp.catalog import Catalog
from progressive_mcp.offline.sample_upstream import SampleUpstream
from progressive_mcp.report import tools_list_tokens
from progressive_mcp.sources import load_catalog
from progressive_mcp.sources.spec import build_catalog
from progressive_mcp.surfaces.surface import CallContext, Surface

KEY = "CoDe-MoDe-KEY-0042"
FIVE = ["AAPL", "MSFT", "NVDA", "AMZN", "GOOGL"]
FIVE_TICKERS = """\
import asyncio
symbols = ["AAPL", "MSFT", "NVDA", "AMZN", "GOOGL"]
series = await asyncio.gather(*[TIME_SERIES_DAILY(symbol=s) for s in symbols])
gains = {}
for symbol, data in zip(symbols, series):
    bars = data["Time Series (Daily)"]
    days = sorted(bars)
    gains[symbol] = float(bars[days[-1]]["4. close"]) / float(bars[days[0]]["4. close"]) - 1
best = max(gains, key=lambda s: gains[s])
print(len(days), "days")
{"best": best, "gain": round(gains[best] * 100, 2)}
"""


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return load_catalog()


@pytest.fixture
def upstream(shared_upstream: SampleUpstream) -> SampleUpstream:
    shared_upstream.reset()
    return shared_upstream


def code_surface(catalog: Catalog, upstream: SampleUpstream, **options: Any) -> Surface:
    transport = options.pop("transport", None)
    client = UpstreamClient(catalog.api, base_url=upstream.url, retries=0, transport=transport)
    return Surface(catalog, mode="code", upstream=client, cache=options.pop("cache", MemoryCache()), **options)


def run(surface: Surface, name: str, arguments: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    result = surface.call_tool_wire(name, arguments, CallContext(api_key=KEY, entitlement=LOCAL))
    assert json.loads(result["content"][0]["text"]) == result["structuredContent"]
    return result["structuredContent"], result["isError"]


def upstream_calls(upstream: SampleUpstream) -> list[dict[str, str]]:
    return [r for r in upstream.requests_snapshot(unmasked=True) if r.get("function")]


def expected_best(upstream: SampleUpstream) -> tuple[str, float]:
    """The five-ticker answer worked out here from the sample data, independently of the script."""
    import httpx

    gains = {}
    for symbol in FIVE:
        params = {"function": "TIME_SERIES_DAILY", "symbol": symbol, "apikey": KEY}
        bars = httpx.get(upstream.url, params=params).json()["Time Series (Daily)"]
        days = sorted(bars)
        gains[symbol] = float(bars[days[-1]]["4. close"]) / float(bars[days[0]]["4. close"]) - 1
    best = max(gains, key=lambda s: gains[s])
    return best, round(gains[best] * 100, 2)


# --- the surface -----------------------------------------------------------------------------------------


def test_code_surface_offers_four_tools_within_its_token_budget(catalog: Catalog) -> None:
    surface = Surface(catalog, mode="code")
    assert [t.name for t in surface.list_tools()] == ["TOOL_LIST", "TOOL_SEARCH", "TOOL_GET", "TOOL_EXECUTE"]
    assert tools_list_tokens(surface) <= 600
    assert "TOOL_EXECUTE" in surface.instructions
    # The progressive surface is untouched by code mode: no TOOL_EXECUTE, no format on TOOL_GET.
    progressive = {t.name: t for t in Surface(catalog).list_tools()}
    assert "TOOL_EXECUTE" not in progressive and "format" not in progressive["TOOL_GET"].input_schema["properties"]
    assert "TOOL_EXECUTE" not in {t.name for t in Surface(catalog, mode="hybrid").list_tools()}


def test_tool_get_gives_python_stubs_by_default_and_schemas_on_request(
    catalog: Catalog, upstream: SampleUpstream
) -> None:
    surface = code_surface(catalog, upstream)
    stubs, failed = run(surface, "TOOL_GET", {"tool_name": ["GLOBAL_QUOTE", "RSI"]})
    assert not failed and "tools" not in stubs  # the names are in the stubs
    text = stubs["stubs"]
    assert "async def GLOBAL_QUOTE(*, symbol: str" in text and "-> GlobalQuote:" in text
    assert "interval: Literal['1min', '5min', '15min', '30min', '60min', 'daily', 'weekly', 'monthly']" in text
    assert "'05. price': str" in text  # the return type: the answer's own keys
    assert "datatype" not in text  # scripts always get JSON
    schemas, failed = run(surface, "TOOL_GET", {"tool_name": "GLOBAL_QUOTE", "format": "schema"})
    assert not failed and schemas["tools"][0]["inputSchema"]["required"] == ["symbol"]
    wrong, failed = run(surface, "TOOL_GET", {"tool_name": "GLOBAL_QUOTE", "format": "yaml"})
    assert failed and "format must be one of python, schema" in wrong["error"]["message"]


def test_tool_search_schemas_attach_stubs_in_code_mode(catalog: Catalog, upstream: SampleUpstream) -> None:
    found, failed = run(code_surface(catalog, upstream), "TOOL_SEARCH", {"query": "apple stock price", "schemas": True})
    assert not failed
    best = found["results"][0]
    assert "stub" in best and "inputSchema" not in best
    assert f"async def {best['name']}(" in best["stub"]


def test_tool_call_is_not_offered_in_code_mode(catalog: Catalog, upstream: SampleUpstream) -> None:
    from progressive_mcp.errors import UnknownTool

    with pytest.raises(UnknownTool):
        code_surface(catalog, upstream).call_tool_wire("TOOL_CALL", {}, CallContext(api_key=KEY))


# --- TOOL_EXECUTE ----------------------------------------------------------------------------------------


def test_the_five_ticker_question_is_one_script_and_five_upstream_requests(
    catalog: Catalog, upstream: SampleUpstream
) -> None:
    answer, failed = run(code_surface(catalog, upstream), "TOOL_EXECUTE", {"code": FIVE_TICKERS})
    assert not failed, answer
    calls = upstream_calls(upstream)
    assert sorted(c["symbol"] for c in calls) == sorted(FIVE)
    assert all(c["function"] == "TIME_SERIES_DAILY" and c["datatype"] == "json" for c in calls)
    assert [c["tool"] for c in answer["calls"]] == ["TIME_SERIES_DAILY"] * 5
    assert answer["printed"] == "100 days\n"
    best, gain = expected_best(upstream)
    assert answer["result"] == {"best": best, "gain": gain}


def test_gathered_calls_run_at_the_same_time(catalog: Catalog, upstream: SampleUpstream) -> None:
    """Five gathered calls meet at a barrier of five in the transport: had they run one by one, the first
    would wait in vain and the barrier break."""
    barrier = threading.Barrier(5, timeout=10)
    real = HttpxTransport()

    class Meeting:
        def send(self, request: UpstreamRequest) -> UpstreamResponse:
            barrier.wait()
            return real.send(request)

    surface = code_surface(catalog, upstream, transport=Meeting())
    answer, failed = run(surface, "TOOL_EXECUTE", {"code": FIVE_TICKERS})
    assert not failed, answer
    assert not barrier.broken and len(upstream_calls(upstream)) == 5


def test_a_script_and_tool_call_share_one_cache_entry(catalog: Catalog, upstream: SampleUpstream) -> None:
    cache = MemoryCache()
    progressive = Surface(catalog, upstream=UpstreamClient(catalog.api, base_url=upstream.url), cache=cache)
    ctx = CallContext(api_key=KEY, entitlement=LOCAL)
    progressive.call_tool_wire("TOOL_CALL", {"tool_name": "GLOBAL_QUOTE", "arguments": {"symbol": "IBM"}}, ctx)
    code = code_surface(catalog, upstream, cache=cache)
    script = 'q = await GLOBAL_QUOTE(symbol="IBM")\nq["Global Quote"]["01. symbol"]'
    answer, failed = run(code, "TOOL_EXECUTE", {"code": script})
    assert not failed and answer["result"] == "IBM"
    assert answer["calls"][0]["cached"] is True
    assert len(upstream_calls(upstream)) == 1


def test_a_failed_call_is_a_catchable_exception_naming_the_error(catalog: Catalog, upstream: SampleUpstream) -> None:
    script = """\
try:
    await TIME_SERIES_DAILY(symbol="NOSUCHTICKER")
except RuntimeError as error:
    print(str(error)[:40])
"recovered"
"""
    answer, failed = run(code_surface(catalog, upstream), "TOOL_EXECUTE", {"code": script})
    assert not failed and answer["result"] == "recovered"
    assert answer["printed"].startswith("UpstreamRejected: Alpha Vantage rejected")
    assert answer["calls"][0]["error"] == "UpstreamRejected"
    uncaught, failed = run(code_surface(catalog, upstream), "TOOL_EXECUTE", {"code": script.splitlines()[1].strip()})
    assert failed and uncaught["error"]["kind"] == "runtime" and "UpstreamRejected" in uncaught["error"]["message"]


@pytest.mark.parametrize(
    ("script", "line", "message"),
    [
        ('await GLOBAL_QUOTE(symbol="IBM", interval="5min")', 1, "interval"),
        ('x = 1\nawait RSI(symbol="IBM", interval="hourly", time_period=14, series_type="close")', 2, "hourly"),
        ("await GLOBAL_QUOTE()", 1, "symbol"),
        ('q = GLOBAL_QUOTE(symbol="IBM")\nq["Global Quote"]', 2, "Coroutine"),
        ('await NOT_A_TOOL(symbol="IBM")', 1, "NOT_A_TOOL"),
    ],
    ids=["unknown argument", "wrong enum value", "missing argument", "no await", "unknown tool"],
)
def test_scripts_that_misuse_a_tool_are_refused_before_anything_runs(
    catalog: Catalog, upstream: SampleUpstream, script: str, line: int, message: str
) -> None:
    answer, failed = run(code_surface(catalog, upstream), "TOOL_EXECUTE", {"code": script})
    assert failed
    error = answer["error"]
    assert (error["type"], error["kind"], error["line"]) == ("ScriptError", "type", line), error
    assert message.lower() in error["message"].lower()
    assert upstream_calls(upstream) == []


@pytest.mark.parametrize(
    ("script", "line", "column"),
    [
        ("x = 1\ndef broken(:\n    pass", 2, 12),
        ("x = await GLOBAL_QUOTE(symbol='IBM'\nprint(x)", 2, 1),  # an unclosed call: no cascade of type errors
        ("def (:", 1, 5),
    ],
    ids=["bad parameter list", "unclosed call", "no function name"],
)
def test_a_syntax_error_names_its_line_and_column_and_nothing_else(
    catalog: Catalog, upstream: SampleUpstream, script: str, line: int, column: int
) -> None:
    answer, failed = run(code_surface(catalog, upstream), "TOOL_EXECUTE", {"code": script})
    assert failed
    error = answer["error"]
    assert (error["kind"], error["line"], error["column"]) == ("syntax", line, column), error
    assert error["message"].startswith(f"line {line}, column {column}: "), error
    assert "\n" not in error["message"], error  # one diagnostic, not the checker's cascade
    for noise in ("positional argument", "not defined", "error["):
        assert noise not in error["message"], error
    assert upstream_calls(upstream) == []


def test_a_script_in_newer_python_syntax_than_the_host_still_runs(catalog: Catalog, upstream: SampleUpstream) -> None:
    # Quotes reused inside an f-string (Python 3.12+): Monty's parser takes it, the host's 3.11 `ast` would not,
    # so the syntax verdict must come from the sandbox's own parser.
    answer, failed = run(code_surface(catalog, upstream), "TOOL_EXECUTE", {"code": 'x = {"a": 1}\nf"{x["a"]}"'})
    assert not failed, answer
    assert answer["result"] == "1"


def test_file_access_is_refused_as_docs_code_mode_says(catalog: Catalog, upstream: SampleUpstream) -> None:
    from pathlib import Path

    docs = " ".join((Path(__file__).parents[1] / "docs" / "code-mode.md").read_text().split())
    surface = code_surface(catalog, upstream)
    answer, failed = run(surface, "TOOL_EXECUTE", {"code": 'f = open("/etc/passwd")\nf.read()'})
    assert failed and answer["error"]["kind"] == "type", answer
    assert "Name `open` used when not defined" in answer["error"]["message"]
    said = '`open(...)` does not exist there: the type checker refuses the script before anything runs (`kind: "type"`'
    assert said in docs and "Name `open` used when not defined" in docs
    answer, failed = run(surface, "TOOL_EXECUTE", {"code": 'from pathlib import Path\nPath("/etc/passwd").read_text()'})
    assert failed and answer["error"]["kind"] == "runtime", answer
    assert "PermissionError" in answer["error"]["message"]
    assert "`pathlib.Path(...).read_text()`" in docs and "is refused when it runs with `PermissionError`" in docs


def test_plain_python_the_checker_quibbles_with_still_runs(catalog: Catalog, upstream: SampleUpstream) -> None:
    script = 'scores = {"a": 1, "b": 3}\nmax(scores, key=scores.__getitem__) if False else sorted(scores)[-1]'
    answer, failed = run(code_surface(catalog, upstream), "TOOL_EXECUTE", {"code": script})
    assert not failed, answer
    assert answer["result"] == "b"


def test_the_call_limit_stops_a_script(catalog: Catalog, upstream: SampleUpstream) -> None:
    surface = code_surface(catalog, upstream, script_limits=ScriptLimits(max_calls=2))
    script = 'for s in ["IBM", "AAPL", "MSFT"]:\n    await GLOBAL_QUOTE(symbol=s)'
    answer, failed = run(surface, "TOOL_EXECUTE", {"code": script})
    assert failed and answer["error"]["limit"] == "max_calls"
    assert len(upstream_calls(upstream)) == 2


def test_a_big_result_is_cut_to_the_budget_saying_so(catalog: Catalog, upstream: SampleUpstream) -> None:
    surface = code_surface(catalog, upstream)
    surface.max_result_tokens = 1000
    surface._code.budget_tokens = 1000  # type: ignore[union-attr]
    script = 'd = await TIME_SERIES_DAILY(symbol="IBM")\nd["Time Series (Daily)"]'
    answer, failed = run(surface, "TOOL_EXECUTE", {"code": script})
    assert not failed
    assert "truncated" in answer and "result cut" in answer["truncated"]["note"]
    assert 0 < len(answer["result"]) < 100


def test_stub_names_are_python_identifiers_for_dotted_tools() -> None:
    from progressive_mcp.sources.spec import parse_spec

    text = """\
api: {name: music, title: Music, base_url: "https://example.com/2.0/", dispatch: {name: method}}
categories: {artist: Artists.}
tools:
  - name: artist.getInfo
    category: artist
    summary: An artist's profile.
    description: Use for an artist's profile.
    params: {artist: {type: string, required: true}, lang: {type: string}}
    output:
      type: object
      properties: {artist: {type: object, properties: {name: {type: string}}, required: [name]}}
      required: [artist]
"""
    music = build_catalog(parse_spec(text))
    assert python_name("artist.getInfo") == "artist_getInfo"
    stub = tool_stubs(music.tools)
    assert "async def artist_getInfo(*, artist: str, lang: str | None = None) -> ArtistGetInfo:" in stub
    assert "class ArtistGetInfo(TypedDict):\n    artist: ArtistGetInfoArtist" in stub
