"""Tests for what one TOOL_SEARCH answer shows (the eval's `shown`, answer tokens and no-match read off the
answer), on a hand-made catalog and hand-written answers where what is shown is known, then through the real
surface and the `eval` command.

Run with: .venv/bin/python -m pytest tests/test_answer_eval.py -q
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from factories import make_tool

from progressive_mcp.catalog import Api, Catalog
from progressive_mcp.cli import main
from progressive_mcp.search.evaluation import (
    EvalQuery,
    names_shown,
    run_eval,
    surface_answerer,
)
from progressive_mcp.tokens import count_tokens

TOOLS = (
    make_tool("weather_forecast", summary="Weather forecast for a city, hour by hour"),
    make_tool("weather_history", summary="Past weather observations of a city"),
    make_tool("stock_quote", summary="Latest price of a stock"),
    make_tool("stock_quote_history", summary="Daily prices of a stock"),
)


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return Catalog.build(Api(name="toy", title="Toy", base_url="http://127.0.0.1:9"), {"things": "Everything"}, TOOLS)


def query(id: str, text: str, relevant: dict[str, int], kind: str = "paraphrase", split: str = "dev") -> EvalQuery:
    return EvalQuery(id=id, query=text, relevant=relevant, kind=kind, split=split)


def answer_text(results: list[str], **extra: Any) -> str:
    return json.dumps({"query": "q", "results": [{"name": n, "score": 0.5} for n in results], **extra})


def test_a_name_is_shown_only_as_a_whole_name() -> None:
    text = answer_text(["stock_quote_history"], more="weather_forecast: Rain\nweather_history: Past weather")
    assert names_shown(text, ["stock_quote_history", "weather_history"]) == ["stock_quote_history", "weather_history"]
    assert "\\nweather_history" in text  # the JSON text escapes the line break
    assert names_shown(text, ["stock_quote", "quote_history", "weather"]) == ["weather"]  # a word of a summary, too
    assert names_shown("see GLOBAL_QUOTE.", ["GLOBAL_QUOTE"]) == ["GLOBAL_QUOTE"]  # a full stop ends a name
    assert names_shown("memory.create_entities: make", ["memory.create_entities", "create_entities"]) == [
        "memory.create_entities"
    ]


def test_shown_tokens_and_no_match_are_read_off_the_answers(catalog: Catalog) -> None:
    queries = [
        query("q1", "rain tomorrow", {"weather_forecast": 2, "weather_history": 1}),
        query("q2", "price of ibm", {"stock_quote": 2}, split="test"),
        query("q3", "old prices", {"stock_quote_history": 2, "weather_history": 1}),
        query("q4", "who called", {"weather_history": 2}),  # answered with candidates only
        query("n1", "bake a cake", {}, "negative"),
        query("n2", "sing a song", {}, "negative", "test"),
    ]
    answers = {
        "rain tomorrow": answer_text(["weather_forecast"]),
        # the grade-2 tool is only in the tail: shown all the same
        "price of ibm": answer_text(["stock_quote_history"], more="stock_quote: Latest price of a stock"),
        # only the grade-1 tool is there: not shown (the threshold is grade 2)
        "old prices": answer_text(["weather_history"]),
        # no confident match, the right tool among the low-confidence candidates: shown, and a false no-match
        "who called": answer_text([], hint="No confident match.", candidates="weather_history: Past weather"),
        "bake a cake": answer_text([], hint="No confident match; nothing fits."),
        "sing a song": answer_text(["weather_forecast"]),  # a negative with a result: not a no-match
    }
    run = run_eval(catalog, queries, lambda q, limit: [], answer=answers.__getitem__)
    metrics = run["metrics"]
    assert metrics["shown"] == pytest.approx(3 / 4)
    assert metrics["answer_no_match_rate"] == pytest.approx(1 / 2)
    assert metrics["answer_false_no_match_rate"] == pytest.approx(1 / 4)
    assert metrics["candidates_on_negatives"] == 0.0
    positive_tokens = sorted(count_tokens(answers[q.query]) for q in queries if q.relevant)
    assert metrics["answer_tokens_p50"] == positive_tokens[1]  # nearest rank: the 2nd of 4
    assert metrics["answer_tokens_p90"] == positive_tokens[3]
    assert run["by_split"]["test"]["metrics"]["shown"] == 1.0
    record = next(r for r in run["per_query"] if r["id"] == "q3")
    assert record["answer"]["shown"] == [] and record["answer"]["tokens"] == count_tokens(answers["old prices"])
    assert run["answer_grade"] == 2


def test_a_nothing_fits_answer_is_a_no_match_whose_closest_tools_are_shown(catalog: Catalog) -> None:
    """What the agent reads decides (issue 29): "nothing fits" with its few closest tools is a no-match, for a
    positive too, and not a list of candidates; a closest tool the positive wants is shown all the same."""
    queries = [query("q1", "who called", {"weather_history": 2}), query("n1", "bake a cake", {}, "negative")]
    closest = {"hint": "No confident match. Nothing fits; the closest tools are listed, unlikely to fit."}
    answers = {
        "who called": answer_text([], **closest, closest="weather_history: Past weather\nstock_quote: Latest"),
        "bake a cake": answer_text([], **closest, closest="stock_quote: Latest price of a stock"),
    }
    metrics = run_eval(catalog, queries, lambda q, limit: [], answer=answers.__getitem__)["metrics"]
    assert metrics["shown"] == 1.0
    assert metrics["answer_no_match_rate"] == 1.0 and metrics["answer_false_no_match_rate"] == 1.0
    assert metrics["candidates_on_negatives"] == 0.0


def test_without_an_answerer_the_run_has_no_answer_metrics(catalog: Catalog) -> None:
    run = run_eval(catalog, [query("q1", "rain", {"weather_forecast": 2})], lambda q, limit: ["weather_forecast"])
    assert "shown" not in run["metrics"]


def test_the_real_surface_answers_what_the_agent_reads(catalog: Catalog) -> None:
    answer = surface_answerer(catalog)
    text = answer("weather forecast for Paris")
    payload = json.loads(text)
    assert payload["results"][0]["name"] == "weather_forecast"
    assert names_shown(text, ["weather_forecast"]) == ["weather_forecast"]


def test_eval_command_reports_shown_and_answer_tokens(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "q.jsonl"
    lines = [
        {
            "id": "q1",
            "query": "latest stock price quote for apple",
            "relevant": {"GLOBAL_QUOTE": 2},
            "kind": "x",
            "split": "dev",
        },
        {"id": "n1", "query": "zzqy wvvx", "relevant": {}, "kind": "negative", "split": "dev"},
    ]
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    assert main(["eval", str(path)]) == 0
    text = capsys.readouterr().out
    assert "shown in one TOOL_SEARCH answer (grade 2)" in text
    assert main(["eval", str(path), "--json"]) == 0
    engine = json.loads(capsys.readouterr().out)["runs"]["engine"]
    assert engine["metrics"]["shown"] == 1.0
    assert engine["metrics"]["answer_tokens_p50"] > 0
    assert engine["metrics"]["answer_no_match_rate"] == 1.0
