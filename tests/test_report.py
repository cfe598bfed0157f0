"""The token report (`progressive-mcp tokens`) and the TOOL_SEARCH `schemas` option it measures.

Run with: .venv/bin/python -m pytest tests/test_report.py -q
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema_rs
import pytest

from progressive_mcp.catalog import Catalog
from progressive_mcp.offline.sample_upstream import SampleUpstream
from progressive_mcp.report import BUDGETS, FLOWS, TASKS, build_report, render
from progressive_mcp.sources import load_catalog
from progressive_mcp.surfaces.metatools import DEFAULT_SEARCH_LIMIT, SEARCH_SCHEMA_HITS, SEARCH_SCHEMA_SHARE
from progressive_mcp.surfaces.surface import CallContext, Surface
from progressive_mcp.tokens import count_tokens, dumps

REPO = Path(__file__).resolve().parent.parent
SECTIONS = ("tokenizers", "catalog", "tools_list", "tool_list", "tool_search", "tool_get", "tasks", "flows", "budgets")
QUERIES = ("give me aapl price", "daily closing prices for tesla", "RSI of NVDA", "US inflation CPI", "moving average")


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return load_catalog()


@pytest.fixture(scope="module")
def surface(catalog: Catalog) -> Surface:
    return Surface(catalog)


@pytest.fixture(scope="module")
def upstream_url() -> Iterator[str]:
    with SampleUpstream() as server:
        yield server.url


@pytest.fixture(scope="module")
def report(catalog: Catalog, upstream_url: str) -> dict[str, Any]:
    return build_report(catalog, ("cl100k", "o200k"), upstream_url=upstream_url)


def search(surface: Surface, arguments: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """A successful TOOL_SEARCH answer: (structuredContent, text), checked to say the same."""
    result = surface.call_tool_wire("TOOL_SEARCH", arguments, CallContext())
    assert not result["isError"], result
    text = result["content"][0]["text"]
    assert json.loads(text) == result["structuredContent"]
    return result["structuredContent"], text


def output_schema(surface: Surface, name: str) -> dict[str, Any]:
    schema = next(t.output_schema for t in surface.list_tools() if t.name == name)
    assert schema is not None
    return schema


# -- tokenizers ---------------------------------------------------------------------------------


def test_both_tokenizers_count_a_non_trivial_text_differently() -> None:
    text = '{"symbol":"7203.T","name":"トヨタ自動車","note":"Cours de clôture quotidiens, ajustés des dividendes"}'
    cl100k, o200k = count_tokens(text, "cl100k_base"), count_tokens(text, "o200k_base")
    assert cl100k > 0 and o200k > 0
    assert cl100k != o200k
    assert count_tokens(text) == cl100k  # cl100k stays the default the server counts with


@pytest.mark.slow
def test_importing_the_core_loads_no_vocabulary_and_a_count_loads_only_cl100k() -> None:
    code = (
        "import sys\n"
        "import progressive_mcp.surfaces.surface, progressive_mcp.tokens as tokens\n"
        "assert 'bpe_openai' not in sys.modules\n"
        "tokens.count_tokens('x')\n"
        "assert tokens._encoding.cache_info().currsize == 1\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO, timeout=60)


# -- the report ---------------------------------------------------------------------------------


def test_the_report_has_every_section_for_both_tokenizers(report: dict[str, Any], catalog: Catalog) -> None:
    assert set(SECTIONS) <= set(report)
    assert set(report["tokenizers"]) == {"cl100k", "o200k"}
    figures = [
        *report["tools_list"].values(),
        *report["tool_list"]["catalog"].values(),
        *(entry[detail] for entry in report["tool_list"]["by_category"].values() for detail in ("names", "summary")),
        report["tool_search"]["mean"],
        report["tool_search"]["schemas_max"],
        *(report["tool_get"][key] for key in ("mean", "median", "max", "total")),
        report["tasks"]["call_answer_mean"],
        *(flow["mean"] for flow in report["flows"].values()),
    ]
    for figure in figures:
        assert set(figure["tokens"]) == {"cl100k", "o200k"}
        assert all(count > 0 for count in figure["tokens"].values())
    assert set(report["tool_list"]["by_category"]) == set(catalog.categories)
    assert sum(entry["tools"] for entry in report["tool_list"]["by_category"].values()) == len(catalog)
    assert report["tool_get"]["max"]["tool"]["cl100k"] in {t.name for t in catalog.tools}
    assert report["tool_get"]["total"]["calls"] == len(catalog)
    assert report["tools_list"]["progressive"]["official"] and report["tools_list"]["direct"]["official"]


def test_design_md_budgets_hold_in_cl100k(report: dict[str, Any]) -> None:
    checks = {check["what"]: check for check in report["budgets"]}
    shares = {what for what, check in checks.items() if "ratio" in check}
    assert set(checks) - shares == set(BUDGETS)
    assert shares == {
        "code mode / progressive, five-ticker comparison",
        "code mode / progressive, 20-day SMA crossover",
    }
    assert all(check["ok"] for check in checks.values()), checks
    assert report["tools_list"]["code"]["tokens"]["cl100k"] <= 600
    assert report["tools_list"]["progressive"]["tokens"]["cl100k"] <= 450
    assert report["tools_list"]["progressive_compact"]["tokens"]["cl100k"] <= 450
    assert report["tool_list"]["catalog"]["names"]["tokens"]["cl100k"] <= 2000
    assert report["tool_get"]["mean"]["tokens"]["cl100k"] <= 300
    assert report["tools_list"]["direct"]["tokens"]["cl100k"] <= 30000


def test_flows_add_up_and_progressive_ones_cost_a_fraction_of_direct(report: dict[str, Any]) -> None:
    flows, tasks = report["flows"], report["tasks"]["items"]
    assert set(flows) == set(FLOWS)
    assert [task["tool"] for task in tasks] == [task.tool for task in TASKS]
    for flow in flows.values():
        for run, task in zip(flow["tasks"], tasks, strict=True):
            assert run["steps"][0]["step"] == "tools/list"
            assert run["steps"][-1]["answer"] == task["call_answer"]  # every flow ends with the same answer
            for encoding, total in run["total"].items():
                read = [step["answer"][encoding] + step.get("arguments", {}).get(encoding, 0) for step in run["steps"]]
                assert total == sum(read)
                assert run["without_call_answer"][encoding] == total - task["call_answer"][encoding]
    steps = {name: len(flow["tasks"][0]["steps"]) for name, flow in flows.items()}
    assert steps["search_schemas_call"] == steps["search_get_call"] - 1  # one round trip fewer
    assert all(run["reached"] for name in ("list_get_call", "direct") for run in flows[name]["tasks"])
    direct = flows["direct"]["mean"]["tokens"]["cl100k"]
    assert all(flows[name]["mean"]["tokens"]["cl100k"] < direct / 4 for name in FLOWS if name != "direct")


def test_the_text_report_shows_every_flow_and_the_budget_verdicts(report: dict[str, Any]) -> None:
    text = render(report)
    for label in FLOWS.values():
        assert label in text
    assert "Budgets (cl100k): all hold" in text
    assert text.isascii()


def test_the_report_shows_what_auto_picks_per_category_and_combination(
    report: dict[str, Any], catalog: Catalog
) -> None:
    auto = report["auto"]
    assert set(auto["by_category"]) == set(catalog.categories)
    for label, entry in [*auto["by_category"].items(), *auto["combinations"].items()]:
        chosen = Surface(catalog, mode="auto", categories=frozenset(label.split(",")))
        assert entry["picks"] == chosen.mode, label
        assert chosen.auto is not None and entry["direct"]["tokens"]["cl100k"] == chosen.auto.direct_tokens, label
        assert entry["picks"] == (
            "direct" if entry["direct"]["tokens"]["cl100k"] <= auto["threshold"] else "progressive"
        )
    assert auto["by_category"]["forex"]["picks"] == "direct"
    assert auto["combinations"]["forex,crypto"]["picks"] == "direct"
    assert auto["catalog"]["picks"] == "progressive" and auto["catalog"]["tools"] == len(catalog)
    text = render(report)
    assert "auto picks" in text and "(whole catalog)" in text


@pytest.mark.slow
def test_cli_tokens_json_counts_with_the_chosen_tokenizer() -> None:
    script = Path(sys.executable).with_name("progressive-mcp")
    command = [str(script)] if script.is_file() else [sys.executable, "-m", "progressive_mcp.cli"]
    run = subprocess.run(
        [*command, "tokens", "--json", "--tokenizer", "cl100k"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    assert set(SECTIONS) <= set(report)
    assert list(report["tokenizers"]) == ["cl100k"]
    assert set(report["tools_list"]["progressive"]["tokens"]) == {"cl100k"}
    assert all(check["ok"] for check in report["budgets"])


# -- TOOL_SEARCH {schemas: true} ----------------------------------------------------------------


def test_progressive_tools_list_declares_the_schemas_flag(surface: Surface) -> None:
    tool = next(t for t in surface.list_tools() if t.name == "TOOL_SEARCH")
    flag = tool.input_schema["properties"]["schemas"]
    assert flag["type"] == "boolean"
    assert "inputSchema" in flag["description"]
    assert "schemas" not in tool.input_schema.get("required", [])


@pytest.mark.parametrize("query", QUERIES)
def test_search_with_schemas_gives_the_best_hits_the_schema_tool_get_gives(surface: Surface, query: str) -> None:
    found, _ = search(surface, {"query": query, "schemas": True})
    jsonschema_rs.validate(output_schema(surface, "TOOL_SEARCH"), found)
    results = found["results"]
    assert results, query
    with_schema = [hit for hit in results if "inputSchema" in hit]
    assert results[0] in with_schema  # the best hit always carries its schema...
    assert with_schema == results[: len(with_schema)]  # ...the others only in rank order...
    assert len(with_schema) <= SEARCH_SCHEMA_HITS  # ...at most this many...
    for hit in results:  # ...and exactly those close enough to the best
        close = hit["score"] >= SEARCH_SCHEMA_SHARE * results[0]["score"]
        assert ("inputSchema" in hit) == (close and results.index(hit) < SEARCH_SCHEMA_HITS), hit["name"]
    described = surface.call_tool_wire("TOOL_GET", {"tool_name": [h["name"] for h in with_schema]}, CallContext())
    assert [hit["inputSchema"] for hit in with_schema] == [
        t["inputSchema"] for t in described["structuredContent"]["tools"]
    ]


@pytest.mark.parametrize("query", QUERIES)
def test_search_without_the_flag_answers_as_before(surface: Surface, query: str) -> None:
    plain, text = search(surface, {"query": query})
    hits = surface.meta.index.search(query, limit=DEFAULT_SEARCH_LIMIT)
    # The detailed hits TOOL_SEARCH gave before it had the flag (then a tail of `name: summary` lines, issue 29).
    assert plain["results"] == [
        {"name": h.name, "score": h.score, "summary": h.summary, "category": h.category} for h in hits
    ]
    assert text == dumps(plain)
    jsonschema_rs.validate(output_schema(surface, "TOOL_SEARCH"), plain)
    for off in (False, None, "false"):
        assert search(surface, {"query": query, "schemas": off})[1] == text  # byte for byte
    with_schemas, _ = search(surface, {"query": query, "schemas": "true"})
    for hit in with_schemas["results"]:
        hit.pop("inputSchema", None)
    assert with_schemas == plain


def test_search_with_schemas_and_no_match_still_answers_with_a_hint(surface: Surface) -> None:
    found, _ = search(surface, {"query": "what is the weather in paris tomorrow", "schemas": True})
    jsonschema_rs.validate(output_schema(surface, "TOOL_SEARCH"), found)
    assert found["results"] == [] and found["hint"]


@pytest.mark.parametrize("value", ["yes", 1, [], {}])
def test_search_rejects_a_schemas_flag_that_is_not_a_boolean(surface: Surface, value: Any) -> None:
    result = surface.call_tool_wire("TOOL_SEARCH", {"query": "apple price", "schemas": value}, CallContext())
    assert result["isError"]
    error = result["structuredContent"]["error"]
    assert "schemas must be true or false" in error["message"]
    assert error["inputSchema"]["properties"]["schemas"]["type"] == "boolean"


def test_multi_step_tasks_answer_in_code_mode_for_a_fraction_of_the_progressive_flow(report: dict[str, Any]) -> None:
    tasks = {task["task"]: task for task in report["multi_step"]["tasks"]}
    assert list(tasks) == ["five-ticker comparison", "20-day SMA crossover", "currency conversion chain"]
    assert tasks["five-ticker comparison"]["code_answer"]["best"] in {"AAPL", "MSFT", "NVDA", "AMZN", "GOOGL"}
    assert set(tasks["20-day SMA crossover"]["code_answer"]) == {"above_sma_now", "crossed_in_last_5_days"}
    assert tasks["currency conversion chain"]["code_answer"]["eur_1000_in_jpy"] > 0
    for task in tasks.values():
        code, progressive = task["code"], task["progressive"]
        assert [s["step"] for s in code["steps"]] == ["tools/list", "TOOL_SEARCH", "TOOL_GET", "TOOL_EXECUTE"]
        assert len(progressive["steps"]) == 3 + task["calls"]
        for flow in (code, progressive, task["direct"]):
            parts = [s["answer"]["cl100k"] + s.get("arguments", {}).get("cl100k", 0) for s in flow["steps"]]
            assert flow["total"]["cl100k"] == pytest.approx(sum(parts))
        if task["data_heavy"]:
            assert code["total"]["cl100k"] <= 0.10 * progressive["total"]["cl100k"]
