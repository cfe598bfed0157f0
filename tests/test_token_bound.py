"""The token bound the Lambda uses instead of a tokenizer (`progressive_mcp.tokens.estimate_tokens`).

The Lambda asset leaves out bpe-openai (77 MB of vocabularies); there `fits_budget` checks result budgets with
an upper bound on the cl100k_base count. These tests hold it to the real tokenizer (installed here): its proven
parts against the vocabulary, and the whole bound against every sample answer the server can send, the shaped
results it does send, prose, and texts chosen to be hard for it.

Run with: .venv/bin/python -m pytest tests/test_token_bound.py -q
"""

from __future__ import annotations

import base64
import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from progressive_mcp import tokens
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


@pytest.fixture(scope="module")
def answers() -> list[tuple[str, str]]:
    """(label, text): every function's answer from the sample upstream, JSON and CSV, as the server shapes it
    for an 8,000-token budget (the whole result, and its text content alone), counted exactly."""
    catalog = load_catalog()
    found: list[tuple[str, str]] = []
    with SampleUpstream() as upstream:
        settings = Settings.from_env({}, upstream_url=upstream.url, cache=False, mode="direct", upstream_retries=0)
        surface = Surface.from_settings(settings)
        for tool in catalog.tools:
            for datatype in (None, "csv") if tool.param("datatype") else (None,):
                result = surface.call_tool_wire(tool.name, arguments_for(tool, datatype), CTX)
                found.append((f"{tool.name} {datatype or 'json'}", dumps(result)))
                found += [
                    (f"{tool.name} {datatype or 'json'} text", c["text"]) for c in result["content"] if "text" in c
                ]
    assert len(found) > 250
    return found


def test_each_group_of_up_to_three_digits_is_one_cl100k_token() -> None:
    """The proven part of the bound: cl100k's vocabulary holds every 1-3 digit string as a single token."""
    for width in (1, 2, 3):
        for number in range(10**width):
            assert count_tokens(f"{number:0{width}d}") == 1, number
    assert count_tokens("1234567") == 3  # cut left to right into 123 456 7


def test_the_bound_never_falls_below_the_real_count_on_what_the_server_sends(answers: list[tuple[str, str]]) -> None:
    over = []
    for label, text in answers:
        real = count_tokens(text)
        estimate = estimate_tokens(text)
        assert estimate >= real, (label, estimate, real)
        if real >= 200:
            over.append(estimate / real)
    over.sort()
    assert over[len(over) // 2] < 2.0  # and it stays useful: the median overestimate is well under 2x


def hard_texts() -> Iterator[tuple[str, str]]:
    rng = random.Random(7)
    yield "prose", (ROOT / "README.md").read_text(encoding="utf-8")
    yield "design prose", (ROOT / "docs" / "measurements.md").read_text(encoding="utf-8")
    yield (
        "single-digit CSV",
        "flag,value\n" + "".join(f"{rng.randint(0, 1)},{rng.randint(0, 9)}\n" for _ in range(3000)),
    )
    yield "long digit runs", ",".join(str(rng.randint(10**11, 10**12)) for _ in range(2000))
    yield "base64", base64.b64encode(rng.randbytes(30_000)).decode()
    yield "hex", rng.randbytes(20_000).hex()
    yield "urls", " ".join(f"https://example.com/a/{rng.randint(0, 99999)}?q=x{rng.randint(0, 9)}" for _ in range(800))
    yield "Japanese", "東証プライム市場で半導体関連株が大幅に上昇し、日経平均株価は史上最高値を更新した。" * 200
    yield "emoji", "📈 stocks up 🚀🚀 to the moon 🌕 " * 500
    yield "escaped JSON", json.dumps(json.dumps({"Meta Data": {"1. Information": "Daily Prices"}, "x": [1.5] * 2000}))


@pytest.mark.parametrize(("label", "text"), list(hard_texts()), ids=[label for label, _ in hard_texts()])
def test_the_bound_holds_on_texts_chosen_to_be_hard(label: str, text: str) -> None:
    assert estimate_tokens(text) >= count_tokens(text), label


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
