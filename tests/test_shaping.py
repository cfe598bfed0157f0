"""Tests for result shaping and token counting: answers fit the budget, counted with the real tokenizer.

Run with: .venv/bin/python -m pytest tests/test_shaping.py -q
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from progressive_mcp.calls.shaping import shape_result
from progressive_mcp.calls.upstream import HttpxTransport, UpstreamClient, UpstreamResult
from progressive_mcp.catalog import Catalog
from progressive_mcp.offline.sample_upstream import FULL_TRADING_DAYS, HUGE_ROWS, SAMPLE_LABEL, SampleUpstream
from progressive_mcp.sources import load_catalog
from progressive_mcp.tokens import count_tokens, dumps, fits_budget

KEY = "shaping-test-key"
DAILY = "Time Series (Daily)"
FULL_ARGS = {"symbol": "IBM", "outputsize": "full", "datatype": "json"}


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return load_catalog()


@pytest.fixture(scope="module")
def fetched(catalog: Catalog) -> Iterator[dict[str, UpstreamResult]]:
    """Real answers from the sample upstream, fetched once for the module."""
    transport = HttpxTransport()
    with SampleUpstream(port=0) as upstream:
        client = UpstreamClient(catalog.api, base_url=upstream.url, transport=transport)
        daily = catalog.get("TIME_SERIES_DAILY")
        answers = {
            "quote": client.call(catalog.get("GLOBAL_QUOTE"), {"symbol": "IBM"}, KEY),
            "full": client.call(daily, FULL_ARGS, KEY),
            "full_csv": client.call(daily, {**FULL_ARGS, "datatype": "csv"}, KEY),
        }
        upstream.faults.huge = True
        answers["huge"] = client.call(daily, {"symbol": "IBM"}, KEY)
    transport.close()
    yield answers


def tokens_of(envelope: dict[str, Any]) -> int:
    return count_tokens(dumps(envelope))


# --- whole answers ------------------------------------------------------------------------------


def test_small_answer_passes_through_whole(catalog: Catalog, fetched: dict[str, UpstreamResult]) -> None:
    payload = fetched["quote"].payload
    arguments = {"symbol": "IBM", "datatype": "json"}

    envelope = shape_result(catalog.get("GLOBAL_QUOTE"), arguments, payload, "json", budget_tokens=2000)

    assert envelope == {"tool": "GLOBAL_QUOTE", "arguments": arguments, "format": "json", "data": payload}
    assert "truncated" not in envelope
    text = dumps(envelope)
    assert text.count(dumps(payload)) == 1  # the payload appears once
    assert len(text) < len(dumps(payload)) + 120


def test_answer_exactly_at_the_budget_is_not_cut(catalog: Catalog, fetched: dict[str, UpstreamResult]) -> None:
    tool = catalog.get("GLOBAL_QUOTE")
    payload = fetched["quote"].payload
    size = tokens_of(shape_result(tool, {}, payload, "json", budget_tokens=10_000))

    assert "truncated" not in shape_result(tool, {}, payload, "json", budget_tokens=size)
    assert "truncated" in shape_result(tool, {}, payload, "json", budget_tokens=size - 1)


# --- JSON previews ------------------------------------------------------------------------------


@pytest.mark.parametrize("source", ["full", "huge"])
@pytest.mark.parametrize("budget", [2000, 8000])
def test_large_series_becomes_a_preview_within_budget(
    catalog: Catalog, fetched: dict[str, UpstreamResult], source: str, budget: int
) -> None:
    payload = fetched[source].payload
    total = FULL_TRADING_DAYS if source == "full" else HUGE_ROWS
    assert len(payload[DAILY]) == total

    envelope = shape_result(catalog.get("TIME_SERIES_DAILY"), FULL_ARGS, payload, "json", budget_tokens=budget)

    used = tokens_of(envelope)
    assert used <= budget
    assert used > budget * 0.9  # as many entries as fit, not a token preview
    counts = envelope["truncated"]["series"][DAILY]
    assert counts["total"] == total
    assert 0 < counts["kept"] < total
    kept = envelope["data"][DAILY]
    assert list(kept) == list(payload[DAILY])[: counts["kept"]]  # the first (newest) entries
    assert all(kept[day] == payload[DAILY][day] for day in kept)  # each entry whole
    assert envelope["data"]["Meta Data"] == payload["Meta Data"]  # kept whole
    note = envelope["truncated"]["note"]
    assert "outputsize=compact" in note
    assert f"{budget}-token" in note
    assert envelope["tool"] == "TIME_SERIES_DAILY"
    assert envelope["arguments"] == FULL_ARGS


def test_preview_holds_the_data_once(catalog: Catalog, fetched: dict[str, UpstreamResult]) -> None:
    payload = fetched["full"].payload

    envelope = shape_result(catalog.get("TIME_SERIES_DAILY"), FULL_ARGS, payload, "json", budget_tokens=2000)

    text = dumps(envelope)
    assert text.count(SAMPLE_LABEL) == 1
    for day, bar in envelope["data"][DAILY].items():
        assert text.count(dumps({day: bar})[1:-1]) == 1
    assert set(envelope) == {"tool", "arguments", "format", "data", "truncated"}


def test_list_series_are_cut_from_the_front(catalog: Catalog) -> None:
    rows = [{"date": f"{2026 - i // 12}-{12 - i % 12:02d}-01", "value": f"{100 + i * 0.37:.3f}"} for i in range(3000)]
    payload = {"name": "Real GDP (synthetic)", "interval": "quarterly", "unit": "billions", "data": rows}

    envelope = shape_result(catalog.get("REAL_GDP"), {}, payload, "json", budget_tokens=1500)

    assert tokens_of(envelope) <= 1500
    counts = envelope["truncated"]["series"]["data"]
    assert counts["total"] == 3000
    assert envelope["data"]["data"] == rows[: counts["kept"]]
    assert {k: envelope["data"][k] for k in ("name", "interval", "unit")} == {
        "name": "Real GDP (synthetic)",
        "interval": "quarterly",
        "unit": "billions",
    }


# --- CSV previews -------------------------------------------------------------------------------


@pytest.mark.parametrize("budget", [2000, 8000])
def test_csv_is_cut_by_rows_keeping_the_header(
    catalog: Catalog, fetched: dict[str, UpstreamResult], budget: int
) -> None:
    text = fetched["full_csv"].payload
    lines = text.splitlines()
    arguments = {**FULL_ARGS, "datatype": "csv"}

    envelope = shape_result(catalog.get("TIME_SERIES_DAILY"), arguments, text, "csv", budget_tokens=budget)

    assert tokens_of(envelope) <= budget
    counts = envelope["truncated"]["series"]["rows"]
    assert counts["total"] == FULL_TRADING_DAYS == len(lines) - 1
    assert 0 < counts["kept"] < counts["total"]
    kept_lines = envelope["data"].splitlines()
    assert kept_lines[0] == "timestamp,open,high,low,close,volume"
    assert kept_lines == lines[: counts["kept"] + 1]  # whole rows, newest first
    note = envelope["truncated"]["note"]
    assert "outputsize=compact" in note
    assert "datatype=csv" not in note  # it already is CSV


# --- the fallback excerpt -----------------------------------------------------------------------


@pytest.mark.parametrize("budget", [300, 1000, 4000])
def test_huge_single_string_falls_back_to_an_excerpt_within_budget(catalog: Catalog, budget: int) -> None:
    payload = " ".join(f"word{i} costs {i * 3.7:.2f} dollars" for i in range(40_000))  # ~1.2 MB, one string

    envelope = shape_result(catalog.get("GLOBAL_QUOTE"), {"symbol": "IBM"}, payload, "json", budget_tokens=budget)

    assert tokens_of(envelope) <= budget
    assert envelope["data"] is None  # no second copy beside the excerpt
    counts = envelope["truncated"]["series"]["characters"]
    assert counts["total"] == len(json.dumps(payload, ensure_ascii=False))
    assert 0 < counts["kept"] < counts["total"]
    assert json.dumps(payload).startswith(envelope["excerpt"])
    assert len(envelope["excerpt"]) == counts["kept"]


def test_one_line_csv_falls_back_to_an_excerpt_within_budget(catalog: Catalog) -> None:
    text = ",".join(str(i * 7919) for i in range(200_000))

    envelope = shape_result(catalog.get("TIME_SERIES_DAILY"), {}, text, "csv", budget_tokens=800)

    assert tokens_of(envelope) <= 800
    assert text.startswith(envelope["excerpt"])


def test_long_text_is_cut_to_an_excerpt_of_itself(catalog: Catalog) -> None:
    """A REST answer in plain text (or XML) has no rows or series: its start is kept, as the text it is."""
    text = "".join(f"<line n='{i}'>\"quoted\" words</line>\n" for i in range(20_000))

    envelope = shape_result(catalog.get("GLOBAL_QUOTE"), {}, text, "text", budget_tokens=800)

    assert tokens_of(envelope) <= 800
    assert envelope["format"] == "text" and envelope["data"] is None
    assert text.startswith(envelope["excerpt"])  # the text itself, not its JSON-escaped form
    assert envelope["truncated"]["series"]["characters"]["total"] == len(text)


# --- token counting -----------------------------------------------------------------------------

BOUNDARY_TEXTS = {
    "json": dumps({"Global Quote": {"01. symbol": "IBM", "05. price": "245.0000", "09. change": "-1.2300"}}),
    "csv": "timestamp,open,high,low,close,volume\r\n2026-11-20,243.5200,245.4926,243.3122,245.0000,2910277\r\n",
    "prose": "Use GLOBAL_QUOTE for the latest price; TIME_SERIES_DAILY for history. " * 5,
    "unicode": "株価は上がった。Prix en €, ünïcödé, emoji 📈📉 " * 4,
    "special": "a headline that says <|endoftext|> and <|fim_prefix|> in plain text",
}


@pytest.mark.parametrize("name", list(BOUNDARY_TEXTS))
def test_fits_budget_agrees_with_count_tokens_around_the_boundary(name: str) -> None:
    text = BOUNDARY_TEXTS[name]
    count = count_tokens(text)
    size_in_bytes = len(text.encode())
    assert 0 < count < size_in_bytes  # so the budgets below exercise the tokenizer, not the byte shortcut

    for budget in (count - 2, count - 1, count, count + 1, count + 2, size_in_bytes - 1, size_in_bytes):
        assert fits_budget(text, budget) == (count <= budget), budget


def test_special_token_text_counts_as_plain_text() -> None:
    assert count_tokens("<|endoftext|>") > 1  # several ordinary tokens, not one special token, no error


def test_long_texts_are_counted_exactly_in_chunks() -> None:
    import bpe_openai  # only to check our count against a single direct encode

    text = dumps([{"name": "International Business Machines", "price": 245 + i % 97, "id": i} for i in range(9000)])
    assert 200_000 < len(text) < 1_000_000  # long enough to be counted in chunks, short enough to encode at once

    direct = len(bpe_openai.get_encoding("cl100k_base").encode_ordinary(text))

    assert count_tokens(text) == direct


def test_texts_beyond_the_tokenizer_limits_can_be_counted() -> None:
    text = "2026-11-20,243.5200,245.4926,243.3122,245.0000,2910277\r\n" * 40_000  # 2.3 MB, > 200,000 tokens

    count = count_tokens(text)

    assert count > 200_000
    assert count == 40_000 * count_tokens("2026-11-20,243.5200,245.4926,243.3122,245.0000,2910277\r\n")
    assert not fits_budget(text, 8000)
    assert fits_budget(text, count)
