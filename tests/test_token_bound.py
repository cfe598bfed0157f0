"""The token bound the Lambda uses instead of a tokenizer (`progressive_mcp.tokens.estimate_tokens`).

The Lambda asset leaves out bpe-openai (77 MB of vocabularies); there `fits_budget` checks result budgets with
an upper bound on the cl100k_base count. These tests hold it to the real tokenizer (installed here): its proven
parts against the vocabulary, and the whole bound against every sample answer the server can send (as served, as
JSON, and every text `fits_budget` sees while shaping it), the offline REST upstream's answers for real OpenAPI
documents, prose, and texts chosen to be hard for it. bench/token_bound.py measures the same texts.

Run with: .venv/bin/python -m pytest tests/test_token_bound.py -q
"""

from __future__ import annotations

import base64
import hashlib
import json
import random
import string
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple
from urllib.parse import urlencode

import pytest
from real_documents import REAL as REAL_DOCUMENTS
from test_sample_catalog import JSON_EVEN_AS_CSV, key_for, takes_csv, valid_arguments  # the catalog tests' helpers

from progressive_mcp import tokens
from progressive_mcp.calls import shaping
from progressive_mcp.calls.upstream import UpstreamClient, _wire_value
from progressive_mcp.catalog import CatalogTool
from progressive_mcp.offline.rest_upstream import has_operations, serve_rest_upstream
from progressive_mcp.offline.sample_upstream import SampleUpstream
from progressive_mcp.settings import Settings
from progressive_mcp.sources import load_catalog
from progressive_mcp.surfaces.surface import CallContext, Surface
from progressive_mcp.tokens import count_tokens, dumps, estimate_tokens

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE_ARGUMENTS = {
    "symbol": "IBM",
    "keywords": "micro",
    "from_currency": "USD",
    "to_currency": "EUR",
    "from_symbol": "EUR",
    "to_symbol": "USD",
    "market": "USD",
    "interval": "5min",
    "time_period": 10,
    "series_type": "close",
    "tickers": "AAPL",
}
CTX = CallContext(api_key="demo-key-1234")


def arguments_for(tool: Any, datatype: str | None) -> dict[str, Any]:
    arguments: dict[str, Any] = {}
    for param in tool.params:
        if param.required:
            value = EXAMPLE_ARGUMENTS.get(param.name)
            arguments[param.name] = value if value is not None else (param.enum[0] if param.enum else "IBM")
    if datatype:
        arguments["datatype"] = datatype
    return arguments


def served_answers(*, one_per_category: bool = False) -> list[tuple[str, str]]:
    """(label, text): every function's answer (or the first function's of each category) from the sample upstream,
    JSON and CSV, as the server shapes it for an 8,000-token budget (the whole result, and its text content alone)."""
    catalog = load_catalog()
    tools = list(catalog.tools)
    if one_per_category:
        tools = list({tool.category: tool for tool in reversed(tools)}.values())
    found: list[tuple[str, str]] = []
    with SampleUpstream() as upstream:
        settings = Settings.from_env({}, upstream_url=upstream.url, cache=False, mode="direct", upstream_retries=0)
        surface = Surface.from_settings(settings)
        for tool in tools:
            for datatype in (None, "csv") if tool.param("datatype") else (None,):
                result = surface.call_tool_wire(tool.name, arguments_for(tool, datatype), CTX)
                found.append((f"{tool.name} {datatype or 'json'}", dumps(result)))
                found += [
                    (f"{tool.name} {datatype or 'json'} text", c["text"]) for c in result["content"] if "text" in c
                ]
    return found


def assert_never_below_and_useful(answers: list[tuple[str, str]]) -> None:
    over = []
    for label, text in answers:
        real = count_tokens(text)
        estimate = estimate_tokens(text)
        assert estimate >= real, (label, estimate, real)
        if real >= 200:
            over.append(estimate / real)
    over.sort()
    assert over[len(over) // 2] < 1.5  # and it stays useful: the median overestimate is well under 1.5x


def test_the_bound_never_falls_below_the_real_count_on_one_answer_of_each_category() -> None:
    answers = served_answers(one_per_category=True)
    catalog = load_catalog()
    served = {catalog.get(label.split()[0]).category for label, _ in answers}
    assert served == {tool.category for tool in catalog.tools}
    assert_never_below_and_useful(answers)


# The whole catalog's answers through the server take ~20 CPU-seconds (make test keeps one function of each
# category, docs/development.md#what-make-test-runs); the timeout only stops a hang, and a busy machine may stretch
# those seconds to minutes of wall time.
@pytest.mark.slow
@pytest.mark.timeout(900)
def test_the_bound_never_falls_below_the_real_count_on_what_the_server_sends() -> None:
    answers = served_answers()
    assert len(answers) > 250
    assert_never_below_and_useful(answers)


def hard_texts() -> Iterator[tuple[str, str]]:
    """Texts a user could get that are hard for a bound without a vocabulary: random strings, ids, URLs, non-ASCII
    text, long digit runs, escaped JSON, prose."""
    rng = random.Random(7)
    yield "prose", (ROOT / "README.md").read_text(encoding="utf-8")
    yield "design prose", (ROOT / "docs" / "measurements.md").read_text(encoding="utf-8")
    yield (
        "single-digit CSV",
        "flag,value\n" + "".join(f"{rng.randint(0, 1)},{rng.randint(0, 9)}\n" for _ in range(3000)),
    )
    yield "long digit runs", ",".join(str(rng.randint(10**11, 10**12)) for _ in range(2000))
    yield "one 30,000-digit number", dumps({"n": "".join(rng.choice(string.digits) for _ in range(30_000))})
    yield "base64", base64.b64encode(rng.randbytes(30_000)).decode()
    yield "base64 in JSON", dumps({"png": base64.b64encode(rng.randbytes(30_000)).decode()})
    yield "hex", rng.randbytes(20_000).hex()
    yield "sha256 hashes", dumps([hashlib.sha256(str(i).encode()).hexdigest() for i in range(800)])
    yield "uuids", dumps([str(uuid.UUID(int=rng.getrandbits(128))) for _ in range(1000)])
    yield "urls", " ".join(f"https://example.com/a/{rng.randint(0, 99999)}?q=x{rng.randint(0, 9)}" for _ in range(800))
    yield "tickers", dumps(["".join(rng.choices(string.ascii_uppercase, k=rng.randint(1, 5))) for _ in range(3000)])

    def ids(alphabet: str, shortest: int, longest: int, prefix: str = "") -> str:
        return dumps([prefix + "".join(rng.choices(alphabet, k=rng.randint(shortest, longest))) for _ in range(2000)])

    yield "mixed-case ids", ids(string.ascii_letters + string.digits, 22, 22)
    yield "prefixed mixed-case ids", ids(string.ascii_letters + string.digits, 14, 14, prefix="cus_")
    yield "lowercase ids", ids(string.ascii_lowercase, 4, 12)
    yield "lowercase and digit ids", ids(string.ascii_lowercase + string.digits, 12, 12)
    yield "letter-only mixed-case ids", ids(string.ascii_letters, 8, 15)

    def pseudo_word(length: int) -> str:
        return "".join(rng.choice("bcdfghjklmnpqrstvwxz") + rng.choice("aeiou") for _ in range(length // 2))

    slugs = [f"{pseudo_word(6)}-{pseudo_word(8)}-{rng.randint(1000, 9999)}" for _ in range(1000)]
    yield "pronounceable slugs", dumps(slugs)
    hawaiian = "Ua mau ke ea o ka aina i ka pono. Kamehameha, Kalakaua, Liliuokalani, Kaahumanu, Keopuolani. "
    yield "vowel-rich language", dumps({"text": hawaiian * 60})
    yield "random letters", "".join(rng.choices(string.ascii_letters, k=30_000))
    yield "random lowercase", "".join(rng.choices(string.ascii_lowercase, k=30_000))
    yield "random printable ASCII", "".join(rng.choices(string.printable[:94], k=30_000))
    yield "random punctuation", "".join(rng.choices(string.punctuation, k=30_000))
    yield (
        "punctuation strings",
        dumps(["".join(rng.choices(string.punctuation, k=rng.randint(1, 3))) for _ in range(2000)]),
    )
    yield (
        "missing values",
        dumps({f"k{i}": rng.choice(["-", "N/A", "", ".", "*", "--", "?", ","]) for i in range(2000)}),
    )
    yield "Japanese", "東証プライム市場で半導体関連株が大幅に上昇し、日経平均株価は史上最高値を更新した。" * 200
    yield "full-width digits", "価格は１２３４５６円、前日比＋１２．５％、出来高１２３４５６７８９株。" * 200
    yield "other numerals", "x²=12½ + 3¼ and ١٢٣٤ or 1²2³3 " * 300
    yield "emoji", "📈 stocks up 🚀🚀 to the moon 🌕 " * 500
    yield "emoji only", "".join(rng.choices(["🚀", "📈", "📉", "💰", "🔥", "🇺🇸", "👨‍👩‍👧"], k=5000))
    yield "accented names", dumps(["Société Générale", "Nestlé S.A.", "L'Oréal", "Zürich", "Ørsted A/S", "ČEZ"] * 300)
    yield "escaped JSON", json.dumps(json.dumps({"Meta Data": {"1. Information": "Daily Prices"}, "x": [1.5] * 2000}))
    yield "JSON escaped twice", dumps([dumps(dumps({"a": [1, 'b"c', {"d": "e\\f"}]}))] * 300)
    yield "indented JSON", json.dumps([{"open": "182.3400", "high": "183.0000", "name": "x"}] * 300, indent=4)
    yield "runs of spaces", "a" + " " * 3000 + "b\n" + "\t \n  \r\n" * 500 + "   x  1  \n\n\n  ,"
    yield "contractions", "'s'S'll'LL've're'd'm't" * 500 + " it's we've I'M THEY'RE" * 500
    yield (
        "XML",
        "<feed>" + "".join(f'<item id="{i}"><price unit="USD">{i * 1.5:.2f}</price></item>' for i in range(800)),
    )


@pytest.mark.parametrize(("label", "text"), list(hard_texts()), ids=[label for label, _ in hard_texts()])
def test_the_bound_holds_on_texts_chosen_to_be_hard(label: str, text: str) -> None:
    assert estimate_tokens(text) >= count_tokens(text), label


def outside_the_guarantee() -> Iterator[tuple[str, str]]:
    """Texts the bound undercounts, and that `fits_budget` never meets (see the test below)."""
    rng = random.Random(3)
    yield "raw control characters", "".join(chr(rng.randrange(0, 32)) + rng.choice("ab1 ,") for _ in range(10_000))
    yield "short JSON, odd punctuation", '{"k":","}'


def test_what_the_bound_undercounts_never_reaches_it() -> None:
    """Bytes below 0x20 (but tabs and line breaks) are a token each, and the bound counts fewer; punctuation costs
    are calibrated on JSON, where `":"` and `","` are one token each, but `{"k":","}` is five and the bound says three.
    `fits_budget` bounds only JSON the server made, where control characters are escaped (\\u0001), and only texts
    longer in bytes than the budget (hundreds at least), where strings of odd punctuation are diluted (see
    "punctuation strings" above)."""
    for label, text in outside_the_guarantee():
        assert estimate_tokens(text) < count_tokens(text), label
        as_sent = dumps({"text": text} if len(text) > 100 else {"texts": [text] * 200})
        assert estimate_tokens(as_sent) >= count_tokens(as_sent), label
    assert tokens.fits_budget('{"k":","}', 250)


# Strings of the random JSON documents below: punctuation inside strings is what the JSON-fitted costs did not see.
LEAVES = (
    "",
    "x",
    'It\'s 5% up (YoY) - "quoted"!',
    "C:\\path\\file",
    "https://example.com/a?x=1&y=2#z",
    "::",
    "...",
    "x <= -0.35: Bearish;",
    "{braces} [brackets]",
    "a=b;c=d",
    "@user #tag",
    "<b>bold</b>",
    "`code`",
    "\r\n",
)


def random_json(rng: random.Random, depth: int = 0) -> Any:
    """A JSON value: nested objects and lists, numbers, booleans, null, and strings with punctuation in them."""
    roll = rng.random()
    if depth > 4 or roll < 0.3:
        scalars = [rng.choice(LEAVES), round(rng.uniform(-1e3, 1e3), rng.randint(0, 4)), rng.randint(-9, 9**9), True]
        return rng.choice([*scalars, None, {}, [], [[]], [{}]])
    if roll < 0.65:
        return [random_json(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    return {f"{rng.choice(LEAVES[1:])}{i}": random_json(rng, depth + 1) for i in range(rng.randint(0, 4))}


def test_the_bound_holds_on_random_json_documents_escaped_once_and_twice() -> None:
    """Not the documents the punctuation costs were fitted on (another generator, another seed)."""
    rng = random.Random(99)
    texts = []
    for i in range(1000):
        text = dumps(random_json(rng))
        texts += [(f"{i}", text), (f"{i} escaped", dumps(text)), (f"{i} escaped twice", dumps(dumps(text)))]
    assert_bound_holds(texts)


@pytest.fixture
def estimated(monkeypatch: pytest.MonkeyPatch) -> None:
    """What the Lambda asset does: no bpe-openai, so budgets are checked with the bound."""
    monkeypatch.setattr(tokens, "exact_counts", False)


def shaped(budget: int, name: str, arguments: dict[str, Any], upstream: SampleUpstream) -> str:
    settings = Settings.from_env(
        {}, upstream_url=upstream.url, cache=False, mode="direct", upstream_retries=0, max_result_tokens=budget
    )
    return dumps(Surface.from_settings(settings).call_tool_wire(name, arguments, CTX))


BIG_ANSWERS = [
    ("TIME_SERIES_DAILY", {"symbol": "IBM", "outputsize": "full"}),
    ("TIME_SERIES_DAILY", {"symbol": "IBM", "outputsize": "full", "datatype": "csv"}),
    ("NEWS_SENTIMENT", {"tickers": "AAPL"}),
    ("INCOME_STATEMENT", {"symbol": "IBM"}),
    ("UNEMPLOYMENT", {"datatype": "csv"}),
]


@pytest.mark.parametrize(
    ("name", "arguments"), BIG_ANSWERS, ids=[f"{n} {a.get('datatype', 'json')}" for n, a in BIG_ANSWERS]
)
def test_with_the_bound_results_still_fit_and_keep_most_of_what_an_exact_count_keeps(
    monkeypatch: pytest.MonkeyPatch, name: str, arguments: dict[str, Any]
) -> None:
    budget = 2000
    with SampleUpstream() as upstream:
        monkeypatch.setattr(tokens, "exact_counts", True)
        exact = shaped(budget, name, arguments, upstream)
        monkeypatch.setattr(tokens, "exact_counts", False)
        bounded = shaped(budget, name, arguments, upstream)
    assert count_tokens(bounded) <= max(count_tokens(exact), budget)  # never over what exact counting allows
    assert len(bounded) >= len(exact) // 3, (len(bounded), len(exact))  # a preview, not a stub


# ---- every answer, every text shaping bounds, OpenAPI samples (bench/token_bound.py measures these) --------------

BUDGET = 8000
OPENAPI_DOCUMENTS = {
    "tasks (fixture)": ROOT / "tests" / "fixtures" / "openapi" / "tasks" / "openapi.yaml",
    "swagger2 (fixture)": ROOT / "tests" / "fixtures" / "openapi" / "swagger2.json",
    **{name: REAL_DOCUMENTS[name] for name in ("spotify", "slack", "openai", "digitalocean")},
}


class Answer(NamedTuple):
    """One upstream answer: the body as served, and what the server makes of it."""

    label: str
    tool: CatalogTool
    arguments: dict[str, Any]
    body: str
    payload: Any
    format: str


def upstream_answers(url: str, *, one_per_category: bool = False) -> list[Answer]:
    """Every function of the catalog (or the first of each category) from the sample upstream at `url`, with
    typical valid arguments, and as CSV where the function offers it."""
    catalog = load_catalog()
    client = UpstreamClient(catalog.api, base_url=url, retries=0)
    found = []
    tools = list(catalog.tools)
    if one_per_category:
        tools = list({tool.category: tool for tool in reversed(tools)}.values())
    for tool in tools:
        arguments = valid_arguments(catalog, tool, typical=True)
        variants = [arguments]
        if takes_csv(tool) and tool.name not in JSON_EVEN_AS_CSV:
            variants.append({**arguments, "datatype": "csv"})
        for variant in variants:
            query = {"function": tool.name, "apikey": key_for(tool), **{k: _wire_value(v) for k, v in variant.items()}}
            with urllib.request.urlopen(f"{url}?{urlencode(query)}", timeout=30) as response:
                body = response.read().decode()
            result = client.call(tool, variant, api_key=key_for(tool))
            label = f"{tool.name} {variant.get('datatype', 'json')}"
            found.append(Answer(label, tool, variant, body, result.payload, result.format))
    return found


def sent_texts(answer: Answer) -> Iterator[tuple[str, str]]:
    """The answer as served, as the JSON a result carries, and that JSON escaped inside a result's text."""
    yield f"{answer.label} as served", answer.body
    data = dumps(answer.payload) if answer.format == "json" else answer.payload
    yield f"{answer.label} as JSON", data
    yield f"{answer.label} escaped", dumps({"content": [{"type": "text", "text": data}]})


def shaping_texts(answer: Answer, budget: int = BUDGET) -> list[tuple[str, str]]:
    """Every text `fits_budget` sees while the server shapes `answer` for `budget` tokens (counted exactly), and the
    result it sends, whose text is the envelope's JSON again, escaped."""
    seen: list[str] = []
    fits = shaping.fits_budget

    def recorded(text: str, budget: int) -> bool:
        seen.append(text)
        return fits(text, budget)

    shaping.fits_budget = recorded
    try:
        envelope = shape(answer, budget)
    finally:
        shaping.fits_budget = fits
    texts = [(f"{answer.label} candidate {i}", text) for i, text in enumerate(seen)]
    return [*texts, (f"{answer.label} sent", sent(envelope))]


def shape(answer: Answer, budget: int = BUDGET) -> dict[str, Any]:
    return shaping.shape_result(answer.tool, answer.arguments, answer.payload, answer.format, budget_tokens=budget)


def sent(envelope: dict[str, Any]) -> str:
    """The result the server sends for `envelope`, as JSON: its text is the envelope's JSON, escaped."""
    return dumps({"content": [{"type": "text", "text": dumps(envelope)}], "structuredContent": envelope})


def openapi_texts(path: Path) -> Iterator[tuple[str, str]]:
    """The offline REST upstream's answer to every operation of the document at `path`: alone, as the envelope the
    server sends, and all of them as one list (a long answer to cut)."""
    catalog = load_catalog(str(path))
    assert has_operations(catalog)
    with serve_rest_upstream(catalog) as upstream:
        bodies = {tool.name: upstream.answer(tool).decode() for tool in catalog.tools if tool.operation}
    for name, body in bodies.items():
        yield name, body
        yield (
            f"{name} sent",
            sent({"tool": name, "arguments": {}, "format": "json", "data": json.loads(body or "null")}),
        )
    yield "every answer in one list", dumps([json.loads(body) for body in bodies.values() if body])


def assert_bound_holds(texts: list[tuple[str, str]]) -> None:
    under = [(label, estimate_tokens(text), count_tokens(text)) for label, text in texts]
    under = [(label, estimate, real) for label, estimate, real in under if estimate < real]
    assert not under, under[:10]


@pytest.fixture(scope="module")
def every_answer() -> Iterator[list[Answer]]:
    with SampleUpstream(port=0) as upstream:
        yield upstream_answers(upstream.url)


# The sweeps over every answer of the catalog (~60 CPU-s) run in make test-slow; make test keeps the first function
# of each category (docs/development.md#what-make-test-runs).
def test_the_bound_holds_on_one_answer_of_each_category_served_shaped_and_escaped() -> None:
    with SampleUpstream(port=0) as upstream:
        some = upstream_answers(upstream.url, one_per_category=True)
    assert {answer.tool.category for answer in some} == {tool.category for tool in load_catalog().tools}
    assert_bound_holds([text for answer in some for text in (*sent_texts(answer), *shaping_texts(answer))])


@pytest.mark.slow
def test_the_bound_holds_on_every_answer_as_served_as_json_and_escaped(every_answer: list[Answer]) -> None:
    assert len(every_answer) > 200
    assert {answer.tool.name for answer in every_answer} == {tool.name for tool in load_catalog().tools}
    assert_bound_holds([text for answer in every_answer for text in sent_texts(answer)])


@pytest.mark.slow
def test_the_bound_holds_on_every_text_shaping_bounds(every_answer: list[Answer]) -> None:
    texts = [text for answer in every_answer for text in shaping_texts(answer)]
    assert len(texts) > 1000
    assert_bound_holds(texts)


@pytest.mark.parametrize("document", list(OPENAPI_DOCUMENTS))
def test_the_bound_holds_on_the_answers_of_openapi_documents(document: str) -> None:
    path = OPENAPI_DOCUMENTS[document]
    if not path.exists():
        pytest.skip(f"{path} is not there")
    assert_bound_holds(list(openapi_texts(path)))


@pytest.mark.slow
@pytest.mark.slow
def test_a_prefix_never_estimates_more_than_the_whole_text_and_a_token(every_answer: list[Answer]) -> None:
    """What lets `fits_budget` settle a long text by a prefix."""
    rng = random.Random(5)
    texts = [text for answer in every_answer[::7] for _, text in sent_texts(answer)]
    texts += [text for _, text in hard_texts()]
    for text in texts:
        whole = estimate_tokens(text)
        for cut in rng.sample(range(len(text)), min(len(text), 20)):
            assert estimate_tokens(text[:cut]) <= whole + 1, (text[:80], cut)


@pytest.mark.usefixtures("estimated")
def test_fits_budget_without_a_tokenizer_is_the_bound_within_the_budget() -> None:
    text = dumps([{"symbol": "IBM", "close": f"{245 + i / 7:.4f}", "volume": 1000 + i} for i in range(3000)])
    estimate = estimate_tokens(text)
    assert [tokens.fits_budget(text, budget) for budget in (estimate - 1, estimate)] == [False, True]
    assert not tokens.fits_budget(text, 50)  # settled by a prefix
    assert tokens.fits_budget("x" * 50, 50)  # at most one token per byte: no estimate needed


def test_fits_budget_asking_the_bound_first_agrees_with_the_count_either_side_of_it() -> None:
    text = dumps([{"symbol": "IBM", "close": f"{245 + i / 7:.4f}", "volume": 1000 + i} for i in range(300)])
    real, estimate = count_tokens(text), estimate_tokens(text)
    assert real < estimate  # between the two, the count decides: the bound alone would say "over"
    for budget in (real - 1, real, estimate - 1, estimate):
        assert tokens.fits_budget(text, budget, bound_first=True) == tokens.fits_budget(text, budget), budget


def cut_answers_fit_and_keep_a_real_preview(monkeypatch: pytest.MonkeyPatch, answers: list[Answer]) -> int:
    """With the bound, shaping never overshoots the budget by the real count, and keeps at least 40% of what an exact
    count keeps: a preview keeps whole entries, so one entry less of a few big ones (option chains, statements) is
    already a large share; bench/token_bound.py reports the median (about 0.9). Returns how many answers were cut."""
    ratios = []
    for answer in answers:
        exact = shape(answer)
        if not shaping.was_cut(exact):
            continue
        monkeypatch.setattr(tokens, "exact_counts", False)
        bounded = shape(answer)
        monkeypatch.setattr(tokens, "exact_counts", None)
        kept, kept_exactly = count_tokens(dumps(bounded)), count_tokens(dumps(exact))
        assert kept <= BUDGET, answer.label
        ratios.append((kept / kept_exactly, answer.label))
    assert not ratios or min(ratios)[0] >= 0.4, sorted(ratios)[:5]
    return len(ratios)


def test_with_the_bound_a_cut_answer_of_each_category_fits_and_keeps_a_real_preview(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with SampleUpstream(port=0) as upstream:
        some = upstream_answers(upstream.url, one_per_category=True)
    assert cut_answers_fit_and_keep_a_real_preview(monkeypatch, some) >= 3


@pytest.mark.slow  # the whole catalog's answers (~30 CPU-s); make test keeps one function of each category above
def test_with_the_bound_every_cut_answer_fits_and_keeps_a_real_preview(
    monkeypatch: pytest.MonkeyPatch, every_answer: list[Answer]
) -> None:
    assert cut_answers_fit_and_keep_a_real_preview(monkeypatch, every_answer) > 100
